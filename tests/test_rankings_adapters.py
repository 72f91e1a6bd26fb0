"""Ranked catalogs of Pliatsika et al. 2024 (Appendix A) built from the shared data directory."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import data_root, needs_data

from learners.exceptions import InvalidInputError, InvalidParameterError
from stream.adapters.rankings import (
    CSR_AREA_GROUPS,
    GeometricMeanScorer,
    LinearScorer,
    RankedCatalog,
    csrankings_area_table,
    load_ranked_catalog,
    make_synthetic,
)

DATA = data_root()
needs = needs_data


@needs("the_2020")
def test_the2020_scorer_reproduces_published_overall_score():
    import pandas as pd

    c = load_ranked_catalog("the2020", DATA)
    assert c.X.shape == (1397, 5) and c.feature_names[0] == "teaching"
    df = pd.read_csv(DATA / "the_2020" / "THE_WUR_2020_rankings.csv")
    overall = pd.to_numeric(df["scores_overall"], errors="coerce")
    ok = overall.notna().to_numpy()
    assert ok.sum() >= 200
    assert np.abs(c.scores()[ok] - overall[ok].to_numpy()).max() <= 0.1      # rounding of THE's published score
    assert [c.item_ids[i] for i in c.order()[:2]] == ["University of Oxford", "California Institute of Technology"]


@needs("csrankings_2017")
def test_csrankings_built_at_load_time_equals_geometric_mean_over_areas():
    c = load_ranked_catalog("csrankings", DATA)
    tab = csrankings_area_table(DATA)
    assert c.n == 118 and c.feature_names == list(CSR_AREA_GROUPS) and tab.shape[1] == 25
    direct = np.exp(np.log1p(tab.to_numpy()).mean(axis=1))
    np.testing.assert_allclose(c.scores(), direct, rtol=1e-12)
    top5 = [c.item_ids[i] for i in c.order()[:5]]
    assert top5 == ["Carnegie Mellon University", "Massachusetts Institute of Technology",
                    "University of California - Berkeley", "Stanford University",
                    "University of Illinois at Urbana-Champaign"]
    assert load_ranked_catalog("csrankings", DATA, us_only=False).n == 231
    # the licence forbids shipping the table: nothing under the repository is written by the loader
    repo = Path(__file__).resolve().parents[1]
    assert not list(repo.rglob("*csrankings*.csv"))


@needs("moving_company")
def test_moving_company_learned_ranker():
    import pandas as pd

    c = load_ranked_catalog("moving", DATA)
    assert c.X.shape == (2000, 3)
    y = np.asarray(c.meta["qualification"])
    assert np.corrcoef(c.scores(), y)[0, 1] > 0.9
    te = pd.read_csv(DATA / "moving_company" / "movers_biased_R10_test.csv")
    assert set(np.unique(c.X[:, 0])) == {0.0, 1.0} and len(te) == c.n


@needs("tennis_atp")
def test_atp_serve_statistics():
    c = load_ranked_catalog("atp", DATA)
    assert c.d == 6 and 60 <= c.n <= 120
    assert np.all((c.X[:, :4] > 20) & (c.X[:, :4] < 100))
    s = c.scores()
    np.testing.assert_allclose(s, c.X[:, :5].sum(1) - c.X[:, 5])
    assert c.X[:, 3].min() > 0 and np.all(c.X[:, 3] <= np.maximum(c.X[:, 1], c.X[:, 2]) + 1e-9)
    with pytest.raises(InvalidInputError):
        load_ranked_catalog("atp", DATA, year=1990)


def test_synthetic_appendix_b():
    d1 = make_synthetic("D1", seed=1)
    assert d1.X.shape == (2000, 2) and set(np.unique(d1.X[:, 1])) == {0.0, 1.0}
    d4 = make_synthetic("D4", seed=1)
    assert np.corrcoef(d4.X.T)[0, 1] == pytest.approx(-0.8, abs=0.05)
    s2 = make_synthetic("S2", seed=1)
    C = np.corrcoef(s2.X.T)
    assert C[0, 2] == pytest.approx(0.6, abs=0.05) and C[1, 2] == pytest.approx(-0.2, abs=0.05)
    np.testing.assert_allclose(s2.scores(), s2.X @ np.array([0.33, 0.33, 0.34]))
    np.testing.assert_array_equal(make_synthetic("D3", seed=4).X, make_synthetic("D3", seed=4).X)
    with pytest.raises(InvalidParameterError):
        make_synthetic("D9")
    with pytest.raises(InvalidParameterError):
        make_synthetic("D3", scorer="f4")


def test_scorers_and_catalog_helpers():
    A = np.asfortranarray(np.random.default_rng(0).random((50, 3)))
    w = [0.4, -0.3, 0.2]
    np.testing.assert_allclose(LinearScorer(w, 1.0)(A), A @ w + 1.0)
    # row-wise deterministic: the score of a row does not depend on its batch
    big = LinearScorer(w)(A)
    np.testing.assert_allclose(big[7:9], LinearScorer(w)(A[7:9]), rtol=1e-12, atol=1e-12)  # a BLAS blocks a slice differently
    np.testing.assert_allclose(GeometricMeanScorer([1, 2])(np.array([[3.0, 1.0]])), [(4 * 2 * 2) ** (1 / 3)])
    c = RankedCatalog("t", A, ["a", "b", "c"], LinearScorer(w), [f"i{k}" for k in range(50)])
    r = c.ranks()
    assert sorted(r.tolist()) == list(range(1, 51)) and c.index_of("i3") == 3
    assert r[c.order()[0]] == 1
    with pytest.raises(InvalidInputError):
        c.index_of("nope")
    with pytest.raises(InvalidInputError):
        RankedCatalog("t", A, ["a"], LinearScorer(w), ["x"] * 50)
    with pytest.raises(InvalidParameterError):
        load_ranked_catalog("nope")


def test_missing_data_dir_raises_clear_error(monkeypatch, tmp_path):
    import stream.adapters as A
    import stream.adapters.rankings as R

    monkeypatch.delenv("PREFSTREAM_DATA_DIR", raising=False)
    monkeypatch.setattr(A, "_REPO_SHARED", tmp_path / "none")
    with pytest.raises(InvalidInputError, match="PREFSTREAM_DATA_DIR"):
        R.load_the2020(tmp_path)


def test_catalog_feeds_sharp_explainer():
    from explainers.sharp import SharpExplainer

    c = make_synthetic("D3", n=100, seed=0)
    ex = SharpExplainer.from_catalog(c)
    e = ex.explain([0, 1], "rank")
    assert e.feature_names == ["x1", "x2"] and e.instance_ids == ["0", "1"]
    assert e.additivity_error().max() < 1e-9
