"""The selectors by name: ``SELECTORS`` and ``make_selector``, beside ``LEARNERS`` and ``WEIGHTERS``.

=========  ==============================================================  ==============
name       selector                                                        uses weights
=========  ==============================================================  ==============
``"rt"``   ReverseTesting (RT §4, Conditions 4.1–4.3)                      no
``"trcv"`` transfer cross-validation (TrCV Fig. 1/3, eq. 14–16)            yes (KMM)
``"scv"``  stratified k-fold CV on the source (RT §3 / TrCV §5.1 baseline)  no
``"wcv"``  importance-weighted k-fold CV (TrCV §5.1 baseline)              yes (KMM)
=========  ==============================================================  ==============

``SELECTORS`` is built from ``shiftlib.catalog.SELECTION_METHODS`` (the one place the names live). Every
selector is a :class:`~shiftlib.selection.selectors.BaseSelector`: ``make_selector(name, **settings)`` builds
it, and calling it, ``selector(learners, X_source, y_source, X_target)``, returns a
:class:`~shiftlib.selection.SelectorScores` result (ReverseTesting's adds its matrix). :func:`bind_selector` is how the pipeline builds one: it
hands the selector those of the run's settings it takes (its ``get_params``), so a selector with a
``random_state`` is seeded, whatever its name.
"""

from __future__ import annotations

import importlib
from typing import Any

from shiftlib.catalog import SELECTION_METHODS
from shiftlib.errors import UnknownNameError

from .selectors import BaseSelector

__all__ = ["SELECTORS", "bind_selector", "make_selector", "runs_on_every_row", "selector_fan_out",
           "selector_settings"]


def _class(path: str) -> type[BaseSelector]:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


#: the label-free selectors by name, built from ``shiftlib.catalog.SELECTION_METHODS``
SELECTORS: dict[str, type[BaseSelector]] = {name: _class(path) for name, path in SELECTION_METHODS.items()}


def _registered(name: str) -> type[BaseSelector]:
    if name not in SELECTORS:
        raise UnknownNameError(f"unknown selector {name!r}; choose one of {sorted(SELECTORS)}")
    return SELECTORS[name]


def selector_settings(name: str) -> frozenset[str]:
    """The settings the selector ``name`` takes: its ``get_params()`` keys.

    Parameters
    ----------
    name : str
        A selector name; one outside :data:`SELECTORS` (the labeled ``fewlabel``) takes none here.

    Returns
    -------
    frozenset of str
        E.g. ``{"k", "weights", "random_state"}`` for ``"trcv"``.
    """
    return frozenset(SELECTORS[name]().get_params()) if name in SELECTORS else frozenset()


def runs_on_every_row(name: str) -> bool:
    """Whether the selector ``name`` fits on every source row rather than the selection subsample.

    Parameters
    ----------
    name : str
        A selector name.

    Returns
    -------
    bool
        Its class's ``every_row`` (source CV and WCV); False for a name outside :data:`SELECTORS`.
    """
    return name in SELECTORS and SELECTORS[name].every_row


def selector_fan_out(name: str) -> str | None:
    """How the flow may split the selector ``name`` into tasks.

    Parameters
    ----------
    name : str
        A selector name.

    Returns
    -------
    str or None
        Its class's ``fan_out``: one of ``shiftlib.selection.selectors.FAN_OUTS``, or None (the selection task
        runs it whole; always so for a name outside :data:`SELECTORS`).
    """
    return SELECTORS[name].fan_out if name in SELECTORS else None


def make_selector(name: str, **params: Any) -> BaseSelector:
    """Build a selector by registry name (see :data:`SELECTORS`), e.g. ``make_selector("trcv", k=5)``.

    Parameters
    ----------
    name : str
    **params
        Settings of that selector (its ``__init__`` keywords, e.g. ``k``, ``weights``, ``scoring``,
        ``random_state``); one it does not take is refused.

    Returns
    -------
    BaseSelector

    Raises
    ------
    UnknownNameError
        ``name`` is not registered.
    TypeError
        A setting the selector does not take (TrCV has no ``scoring``: it estimates accuracy, TrCV eq. 14).
    """
    cls = _registered(name)
    unknown = sorted(set(params) - selector_settings(name))
    if unknown:
        raise TypeError(f"selector {name!r} takes no setting {unknown}; its settings are "
                        f"{sorted(selector_settings(name))}")
    return cls(**params)


def bind_selector(name: str, **settings: Any) -> BaseSelector:
    """Build the selector ``name`` with those of ``settings`` it takes, leaving out the rest.

    How the pipeline dispatches: it offers every run setting (``random_state``, ``k``, ``weights``,
    ``max_folds``), and each selector takes what its ``get_params()`` lists, so a random selector is seeded
    and a weighted one gets β by its settings, not by its name.

    Parameters
    ----------
    name : str
        A name in :data:`SELECTORS`.
    **settings
        Settings on offer.

    Returns
    -------
    BaseSelector
    """
    _registered(name)
    takes = selector_settings(name)
    return make_selector(name, **{k: v for k, v in settings.items() if k in takes})
