"""Oracle weights from the known selection probability: ``1/P(s=1|x)``, normalized (DL Prop. 2).

For benchmarks where the bias mechanism is known (``shiftlib.bias`` returns P(s=1|x) for every
selected row): the weights every estimator is trying to recover.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from shiftlib._validation import check_probabilities

from ._base import BaseWeighter, WeightsUnavailableError

__all__ = ["OracleWeights"]


class OracleWeights(BaseWeighter):
    """Weights ``1/P(s=1|x)`` from the true selection probabilities of the source rows (DL Prop. 2).

    ``fit(X_source, X_target, selection_proba)``: ``selection_proba[i]`` is the true P(s=1|x_i) of
    source row i, in (0, 1]. ``X_target`` serves the MMD diagnostics only. Learned:
    ``selection_proba_`` plus the base attributes; ``predict_weights`` raises (P is known only for
    the given rows).
    """

    def __init__(self) -> None:
        pass

    def _fit_raw(
        self, X_source: np.ndarray, X_target: np.ndarray, selection_proba: Any = None, **fit_params: Any
    ) -> np.ndarray:
        if fit_params:
            raise TypeError(f"OracleWeights.fit takes only selection_proba; got {sorted(fit_params)}")
        if selection_proba is None:
            raise TypeError(
                "OracleWeights.fit needs selection_proba: the true P(s=1|x) of each source row "
                "(e.g. from shiftlib.bias)"
            )
        self.selection_proba_ = check_probabilities(selection_proba, "selection_proba", n_rows=X_source.shape[0], rows="source row", positive=True)
        return 1.0 / self.selection_proba_

    def _predict_raw(self, X: np.ndarray) -> np.ndarray:
        raise WeightsUnavailableError(
            "OracleWeights knows P(s=1|x) only for the source rows it was given; use weights_"
        )
