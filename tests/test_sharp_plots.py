"""ShaRP plots (Section 7.2): they draw what the Explanation holds."""

from __future__ import annotations

import numpy as np
import pytest

from explainers.exceptions import InvalidInputError
from explainers.sharp import SharpExplainer, strata_summary
from tests.conftest import require_module

require_module("matplotlib")
from explainers.sharp_plots import pairwise_bars, strata_boxplot, waterfall  # noqa: E402

X = np.random.default_rng(0).random((60, 3))
EX = SharpExplainer(lambda A: A @ np.array([0.5, 0.3, 0.2]), X, feature_names=["a", "b", "c"])


def test_waterfall_rank_walks_from_mean_rank_to_rank(tmp_path):
    e = EX.explain([4, 9], "rank")
    fig = waterfall(e, 1, path=tmp_path / "w.png")
    assert (tmp_path / "w.png").stat().st_size > 1000
    bars = fig.axes[0].patches
    assert len(bars) == 3
    phi = dict(zip(e.feature_names, e.values[1]))
    for b in bars:                                   # each bar moves the rank by -phi
        assert b.get_width() == pytest.approx(-phi[b.get_gid()])
    assert bars[0].get_x() == pytest.approx(e.extra["mean_rank"][1])
    last = bars[-1]
    assert last.get_x() + last.get_width() == pytest.approx(e.extra["rank"][1])
    # largest |phi| drawn first (top)
    assert abs(phi[bars[0].get_gid()]) == pytest.approx(np.abs(e.values[1]).max())


def test_waterfall_score_and_errors():
    e = EX.explain([0], "score")
    bars = waterfall(e).axes[0].patches
    assert bars[0].get_x() == pytest.approx(e.base_values[0])
    assert bars[-1].get_x() + bars[-1].get_width() == pytest.approx(e.prediction[0])
    with pytest.raises(InvalidInputError):
        waterfall(e, 3)


def test_strata_boxplot_medians_match_summary(tmp_path):
    e = EX.explain(np.arange(60), "rank")
    fig = strata_boxplot(e, path=tmp_path / "b.png")
    assert (tmp_path / "b.png").stat().st_size > 1000
    summ = {s["stratum"]: s for s in strata_summary(e)}
    meds = {ln.get_gid(): ln for ln in fig.axes[0].lines if (ln.get_gid() or "").startswith("median-")}
    assert len(meds) == 30
    for s, row in summ.items():
        for f in e.feature_names:
            assert meds[f"median-{s}-{f}"].get_ydata()[0] == pytest.approx(row["median"][f])
    with pytest.raises(InvalidInputError):
        strata_boxplot(EX.explain_pairwise([(0, 1)]))


def test_pairwise_bars(tmp_path):
    e = EX.explain_pairwise([(3, 7), (7, 3)])
    fig = pairwise_bars(e, 1, path=tmp_path / "p.png")
    heights = [b.get_height() for b in fig.axes[0].patches]
    np.testing.assert_allclose(heights, e.values[1])
    assert "positions" in fig.axes[0].get_title()
    with pytest.raises(InvalidInputError):
        pairwise_bars(EX.explain([0], "rank"))
