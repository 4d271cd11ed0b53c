"""Heatmap of ReverseTesting's matrix (shiftlib.selection.plotting.plot_rt_matrix): every cell annotated with
its value (hand-worked matrix of test_reverse_testing.py), undetermined cells marked n/a, the text colour
against the mean of the finite cells, the labels."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from shiftlib.selection import plot_rt_matrix, reverse_testing
from tests.shiftlib.selection.test_reverse_testing import X_D, X_T, Y_D, BinMajority, learners_ab

pytestmark = pytest.mark.usefixtures("one_blas_thread")


@pytest.mark.heavy
def test_heatmap_annotates_every_cell_with_its_matrix_value():
    learners = {**learners_ab(), "C": BinMajority(())}
    res = reverse_testing(learners, X_D, Y_D, X_T)
    fig = plot_rt_matrix(res)
    texts = [t.get_text() for t in fig.axes[0].texts]
    expected = ["n/a" if not math.isfinite(v) else f"{v:.3f}" for v in res.matrix.to_numpy().ravel()]
    assert texts == expected
    assert texts[:2] == ["0.625", "0.375"]  # M[A,A] = 5/8, M[A,B] = 3/8 by hand


def test_cells_axes_colours_and_labels_by_hand() -> None:
    # M = [[0.9, NaN], [0.2, 0.4]]: the finite cells' mean is 0.5, so 0.9 is written in black, 0.2 and 0.4 in
    # white (below the mean, on the dark end of viridis), the undetermined cell "n/a" in black on grey
    M = pd.DataFrame([[0.9, np.nan], [0.2, 0.4]], index=["A", "B"], columns=["A", "B"])
    fig = plot_rt_matrix(SimpleNamespace(matrix=M, scoring="accuracy", rule="pair"), fmt="{:.1f}")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.texts] == ["0.9", "n/a", "0.2", "0.4"]
    assert [t.get_color() for t in ax.texts] == ["black", "black", "white", "white"]
    assert [t.get_position() for t in ax.texts] == [(0, 0), (1, 0), (0, 1), (1, 1)]  # (column j, row i)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["A", "B"]
    assert ax.get_title() == "ReverseTesting M[labeler, retrainer] (rule=pair)"
    assert ax.get_ylabel().startswith("labeler i") and ax.get_xlabel().startswith("retrainer j")
    assert fig.axes[1].get_ylabel() == "score on D (accuracy)"  # the colour bar
    image = ax.images[0].get_array()
    assert image.mask.tolist() == [[False, True], [False, False]]  # NaN masked, shown in the grey face colour
    assert plot_rt_matrix(SimpleNamespace(matrix=M), title="mine").axes[0].get_title() == "mine"
