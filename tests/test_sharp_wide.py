"""ShaRP beyond exact enumeration: sampled orders of players, feature groups, and tie tolerance.

Pliatsika, Fonseca, Akhynko, Shevchenko & Stoyanovich (2024), Algorithm 1 / Section 8.3 (approximation);
issue 12 finding 8 (ranks must not depend on rounding noise).
"""

from __future__ import annotations

import numpy as np
import pytest

from explainers.sharp import SharpExplainer, catalog_ranks


def lin(w):
    w = np.asarray(w, float)
    return lambda A: (np.asarray(A, float) * w).sum(axis=1)


def catalog(n=60, d=8, seed=0):
    return np.random.default_rng(seed).random((n, d))


@pytest.mark.parametrize("qoi", ["rank", "score"])
def test_sampled_orders_approach_the_exact_values_with_honest_standard_errors(qoi):
    X = catalog()
    f = lambda A: np.tanh(A @ np.linspace(1.0, 0.2, 8)) + 0.5 * A[:, 0] * A[:, 1]  # noqa: E731
    exact = SharpExplainer(f, X).explain(np.arange(6), qoi)
    approx = SharpExplainer(f, X, max_exact_players=4, max_coalitions=128).explain(np.arange(6), qoi, seed=1)
    assert exact.extra["estimator"] == "exact" and approx.extra["estimator"] == "kernel-shap-paired"
    assert approx.extra["n_coalitions"] == 128 and approx.extra["n_enumerated"] > 2
    se = np.asarray(approx.extra["stderr"])
    assert se.shape == (6, 8) and np.all(se >= 0)
    err = np.abs(approx.values - exact.values)
    assert err.max() <= 0.05 * np.abs(exact.values).max()
    assert np.mean(err <= 3 * se + 1e-12) >= 0.9            # ~99.7 % of 3-sigma intervals cover
    # Kernel SHAP with the efficiency constraint: efficiency is exact, not approximate
    assert approx.additivity_error().max() < 1e-9
    np.testing.assert_allclose(approx.base_values, exact.base_values, atol=1e-12)


def test_twenty_six_features_are_explained_not_refused():
    X = catalog(n=120, d=26, seed=3)
    f = lin(np.linspace(2.0, 0.0, 26))                        # the last feature has weight 0
    ex = SharpExplainer(f, X, max_coalitions=2048)
    for e in (ex.explain([0, 1], "rank", seed=0), ex.explain_pairwise([(0, 1)], "rank", seed=0)):
        assert e.values.shape[1] == 26 and e.extra["estimator"] == "kernel-shap-paired"
        assert e.additivity_error().max() < 1e-9
        # null player: Kernel SHAP does not pin it at 0 (sampled orders did), but within its error bar
        se = np.asarray(e.extra["stderr"])
        assert np.all(np.abs(e.values[:, -1]) <= 4 * se[:, -1] + 1e-12)
        assert np.all(np.abs(e.values[:, -1]) < 0.05 * np.abs(e.values).max(axis=1))


def test_feature_groups_are_players_and_match_the_grouped_game():
    """A group is one player: same values as the explainer of the catalog with the group collapsed."""
    rng = np.random.default_rng(5)
    X = rng.random((40, 3))
    onehot = np.eye(4)[rng.integers(0, 4, 40)]                # a categorical feature, one-hot
    w_cat = np.array([0.0, 0.3, 0.6, 0.9])
    Xw = np.concatenate([X, onehot], axis=1)
    f_wide = lambda A: A[:, :3] @ np.array([1.0, 0.5, 0.2]) + A[:, 3:] @ w_cat  # noqa: E731
    names = ["a", "b", "c", "t_0", "t_1", "t_2", "t_3"]
    grouped = SharpExplainer(f_wide, Xw, feature_names=names, feature_groups={"t": names[3:]})
    assert grouped.p == 4 and grouped.player_names == ["a", "b", "c", "t"]
    # the same game with the category as one numeric column whose value is its contribution
    Xc = np.concatenate([X, (onehot @ w_cat)[:, None]], axis=1)
    narrow = SharpExplainer(lambda A: A[:, :3] @ np.array([1.0, 0.5, 0.2]) + A[:, 3], Xc)
    for qoi in ("rank", "score"):
        np.testing.assert_allclose(grouped.explain(np.arange(8), qoi).values, narrow.explain(np.arange(8), qoi).values,
                                   atol=1e-10)
    e = grouped.explain([0], "rank")
    assert e.extra["feature_groups"] == {"t": names[3:]} and e.feature_names == ["a", "b", "c", "t"]


def test_rounding_noise_is_a_tie_and_ranks_survive_a_constant_or_a_monotone_transform():
    s = np.array([14.997499999999999, 14.9975, 3.0, 20.0])
    assert catalog_ranks(s).tolist() != [2.0, 2.0, 4.0, 1.0]   # without tolerance: rounding decides
    X = s[:, None]
    ex = SharpExplainer(lambda A: A[:, 0], X)
    assert ex.ranks.tolist() == [2.0, 2.0, 4.0, 1.0]


def test_the2020_ranks_and_explanations_invariant_under_constant_and_increasing_transforms(data_dir):
    from stream.adapters.rankings import load_ranked_catalog

    cat = load_ranked_catalog("the2020", data_dir)
    base = SharpExplainer(cat.score_fn, cat.X)
    items = np.arange(0, cat.n, 97)
    e0 = base.explain(items, "rank")
    p0 = base.explain_pairwise(np.stack([items[:-1], items[1:]], axis=1), "rank")
    for g in (lambda s: s + 1000.0, lambda s: 3.0 * s - 7.25, lambda s: np.exp(s / 20.0), lambda s: s ** 3):
        ex = SharpExplainer(lambda A, g=g: g(cat.score_fn(A)), cat.X)
        assert np.array_equal(ex.ranks, base.ranks)           # no catalog rank changes
        np.testing.assert_allclose(ex.explain(items, "rank").values, e0.values, atol=1e-9)
        np.testing.assert_allclose(ex.explain_pairwise(np.stack([items[:-1], items[1:]], axis=1), "rank").values,
                                   p0.values, atol=1e-9)


def test_reference_sample_reports_standard_errors_that_cover_the_exact_values():
    X = catalog(n=200, d=5, seed=9)
    f = lambda A: A @ np.array([1.0, 0.8, 0.5, 0.2, 0.1]) + 0.3 * A[:, 0] * A[:, 2]  # noqa: E731
    ex = SharpExplainer(f, X)
    exact = ex.explain(np.arange(20), "rank")
    approx = ex.explain(np.arange(20), "rank", sample_size=40, seed=2)
    assert approx.extra["estimator"] == "reference-sample" and approx.extra["sample_size"] == 40
    se = np.asarray(approx.extra["stderr"])
    assert se.shape == (20, 5) and se.max() > 0
    z = np.abs(approx.values - exact.values) / np.maximum(se, 1e-12)
    assert np.mean(z <= 3) >= 0.9
    assert approx.additivity_error().max() < 1e-9           # anchored at the exact reference mean


def test_standard_errors_survive_the_record_and_the_report_draws_error_bars(tmp_path):
    from explainers import plots
    from explainers._result import Explanation
    from stream.report import combine_records, write_report

    X = catalog(n=50, d=24, seed=4)
    e = SharpExplainer(lambda A: A @ np.linspace(1, 0, 24), X, n_permutations=16).explain([0, 1], "rank", seed=0)
    recs = e.to_records(["a", "b"])
    back = Explanation.from_record(recs[1])
    np.testing.assert_allclose(plots.standard_errors(back), np.asarray(e.extra["stderr"])[1])
    assert plots.standard_errors(SharpExplainer(lambda A: A.sum(1), X[:, :3]).explain([0], "rank")) is None
    ax = plots.errorbars(back)
    assert len(ax.containers) >= 1 and "s.e." in ax.get_xlabel()
    out = write_report(tmp_path, {}, recs)
    html = (out if out.suffix == ".html" else out / "index.html").read_text()
    assert "standard errors" in html
    assert combine_records(recs)
