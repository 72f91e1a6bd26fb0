"""Sampled Shapley estimators at d = 12 within the default budget (2048 coalition evaluations):
relative error against exact enumeration, exact efficiency, and standard errors that cover the
truth at about their stated rate over repeated seeds (issue 15)."""

import numpy as np
import pytest

from explainers._coalitions import all_coalitions, exact_shapley, plan_coalitions, shapley_of_game
from explainers.distributional import bernoulli_preference_game, distributional_value
from explainers.sharp import SharpExplainer

D, BUDGET = 12, 2048


def rel_err(a, b):
    a, b = np.atleast_2d(a), np.atleast_2d(b)
    return float((np.abs(a - b).max(axis=1) / np.abs(b).max(axis=1)).max())


def logistic_game(seed, d=D, batch=4):
    """P(left preferred) = σ(linear + pairwise interactions): far from additive, exact values known."""
    rng = np.random.default_rng(seed)
    w1, w2 = rng.normal(size=(batch, d)), rng.normal(size=(batch, d, d)) * 0.5

    def game(codes):
        Z = ((np.asarray(codes)[:, None] >> np.arange(d)) & 1).astype(float)
        return (1.0 / (1.0 + np.exp(-(Z @ w1.T + np.einsum("ki,bij,kj->kb", Z, w2, Z) / d)))).T

    return game, exact_shapley(game(np.arange(2 ** d)).T, d)


def test_plan_enumerates_small_and_large_sizes_and_draws_complementary_pairs():
    plan = plan_coalitions(D, BUDGET, np.random.default_rng(0))
    assert not plan.exact and plan.n_coalitions == BUDGET
    sizes = plan.masks[2:].sum(axis=1)
    fixed = sizes[:plan.n_fixed]
    for k in (1, 2, 3, 9, 10, 11):                              # 12 + 66 + 220 per side, all of them
        assert np.sum(fixed == k) == len(all_coalitions(D)[all_coalitions(D).sum(axis=1) == k])
    drawn = plan.masks[2 + plan.n_fixed:]
    np.testing.assert_array_equal(drawn[0::2], ~drawn[1::2])    # S then Ω∖S
    assert len(np.unique(np.packbits(plan.masks, axis=1), axis=0)) == BUDGET     # no coalition twice
    assert set(sizes[plan.n_fixed:]) <= {4, 5, 6, 7, 8}


def test_kernel_shap_relative_error_and_efficiency_at_d12():
    game, exact = logistic_game(1)
    phi, se, plan = shapley_of_game(game, D, BUDGET, np.random.default_rng(0))
    assert rel_err(phi, exact) <= 0.02
    total = game(np.array([2 ** D - 1]))[:, 0] - game(np.array([0]))[:, 0]
    np.testing.assert_allclose(phi.sum(axis=1), total, atol=1e-12)
    assert np.all(se > 0) and se.shape == phi.shape


def test_kernel_shap_standard_errors_cover_the_truth():
    game, exact = logistic_game(2)
    hits = []
    for seed in range(40):
        phi, se, _ = shapley_of_game(game, D, BUDGET, np.random.default_rng(seed))
        hits.append(np.abs(phi - exact) <= 1.96 * se)
    rate = np.mean(hits)
    assert 0.88 <= rate <= 0.99, rate                            # nominal 95 %: neither too wide nor too narrow


@pytest.mark.parametrize("qoi", ["score", "rank"])
def test_sharp_sampled_matches_exact_at_d12(qoi):
    rng = np.random.default_rng(4)
    X = rng.random((40, D))
    w = np.linspace(1.0, 0.1, D)
    f = lambda A: np.tanh(A @ w - 2.5) + 0.3 * A[:, 0] * A[:, 1]  # noqa: E731
    exact = SharpExplainer(f, X).explain(np.arange(4), qoi)
    approx = SharpExplainer(f, X, max_exact_players=10, max_coalitions=BUDGET).explain(np.arange(4), qoi, seed=0)
    assert approx.extra["estimator"] == "kernel-shap-paired" and approx.extra["n_coalitions"] == BUDGET
    assert rel_err(approx.values, exact.values) <= 0.02
    assert approx.additivity_error().max() < 1e-9


def _dist_game(seed):
    rng = np.random.default_rng(seed)
    w1, w2 = rng.normal(size=D), rng.normal(size=(D, D)) * 0.7

    def nu(C):
        Z = np.asarray(C, float)
        return Z @ w1 + np.einsum("ki,ij,kj->k", Z, w2, Z) / D * 2

    return bernoulli_preference_game(nu, D)


def test_stratified_distributional_values_at_d12():
    game = _dist_game(1)
    exact = distributional_value(game, method="exact")
    st = distributional_value(game, method="stratified", max_coalitions=BUDGET, random_state=0)
    assert st.estimator == "stratified"
    assert rel_err(st.mean(), exact.mean()) <= 0.02
    assert abs(st.base[1] + st.mean().sum() - st.prediction[1]) < 1e-12          # exact efficiency
    T = st.transition
    assert T.min() >= 0 and np.allclose(T.sum(axis=(1, 2)), 1.0)                # a law per player
    assert np.abs(T - exact.transition).max() < 0.05
    np.testing.assert_allclose(st.mean(), T[:, 0, 1] - T[:, 1, 0], atol=1e-12)


def test_stratified_distributional_standard_errors_cover_the_truth():
    game = _dist_game(2)
    exact = distributional_value(game, method="exact")
    hits, thits = [], []
    for seed in range(30):
        st = distributional_value(game, method="stratified", max_coalitions=BUDGET, random_state=seed)
        hits.append(np.abs(st.mean() - exact.mean()) <= 1.96 * st.mean_stderr[:, 1])
        stay = np.trace(st.transition, axis1=1, axis2=2)
        stay_se = np.sqrt(st.stderr[:, 0, 0] ** 2 + st.stderr[:, 1, 1] ** 2)
        thits.append(np.abs(stay - np.trace(exact.transition, axis1=1, axis2=2)) <= 2.58 * stay_se + 1e-12)
    assert 0.85 <= np.mean(hits) <= 0.995, np.mean(hits)
    assert np.mean(thits) >= 0.8, np.mean(thits)
