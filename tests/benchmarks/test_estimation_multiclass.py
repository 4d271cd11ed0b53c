"""benchmarks/estimation_multiclass.py: its reference swaps back the replaced computations and restores them, and
the two give the same estimate (EM's shared tolerance allows about 1e-6)."""

from __future__ import annotations

import pytest

import shiftlib.estimation as E
from benchmarks import estimation_multiclass as bench


def test_reference_swaps_and_restores() -> None:
    shipped = E.em_prior, E._groups, E._stratified_shuffle_splits
    with bench.reference():
        assert E.em_prior is bench._plain_em and E._groups is bench._loop_groups
    assert (E.em_prior, E._groups, E._stratified_shuffle_splits) == shipped


@pytest.mark.slow
def test_quick_run_agrees_with_the_reference(capsys) -> None:
    bench.main(["--quick"])
    out = capsys.readouterr().out.splitlines()
    row = next(line for line in out if line.startswith("NB"))
    assert float(row.split()[-1]) < 1e-5
    assert any(line.startswith("all") for line in out)
    assert out[-1].startswith("estimate_each over 2 candidates") and out[-1].endswith("identical estimates: True")
