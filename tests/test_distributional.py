"""Distributional values (Franceschi et al. 2024): games, value operators, statistics, games from models.

Oracles are written here independently of the module: brute-force enumeration of permutations
(Shapley), explicit per-coalition weights (Banzhaf / semivalues), the per-pair closed forms of
Sec. 3.1, and Monte Carlo estimates judged by their own standard errors.
"""

import itertools
import json
import math

import numpy as np
import pytest

from explainers._gumbel import gumbel_max_coupling
from explainers._result import Explanation
from explainers.distributional import (
    Banzhaf,
    BernoulliFamily,
    CategoricalFamily,
    ExplicitCoalitionStructure,
    GaussianFamily,
    RandomOrderValue,
    Semivalue,
    Shapley,
    StochasticGame,
    all_coalitions,
    bernoulli_preference_game,
    categorical_choice_game,
    distributional_value,
    explain_choice,
    explain_gaussian_utility,
    explain_preference,
    gaussian_utility_game,
    learner_margin_value_function,
    pairwise_margin_value_function,
    reference_game,
    sampled_value,
    table_game,
    to_explanation,
)
from explainers.exceptions import BudgetError, InvalidInputError, InvalidParameterError

# exact invariants (null player, pmf, efficiency) hold to 1e-12: never bit for bit, another
# machine's BLAS/libm rounds the last bits differently (issue 31)
TOL = 1e-12


def softmax(x):
    z = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def bits(S):
    return sum(1 << j for j in S)


def linear_logit_game(n=5, d=4, seed=0, tie=None):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(n, d)) * 1.5
    x = rng.normal(size=n)
    if tie is not None:  # make players tie[0] and tie[1] symmetric
        W[tie[1]] = W[tie[0]]
        x[tie[1]] = x[tie[0]]
    logits = lambda c: (c * x) @ W + np.arange(d) * 0.1  # noqa: E731
    return StochasticGame(logits, n, CategoricalFamily(d)), logits


def brute_force_shapley(u, n):
    """Shapley value by enumerating all n! permutations (independent oracle)."""
    out = 0.0
    for perm in itertools.permutations(range(n)):
        S = []
        phi = [None] * n
        for j in perm:
            phi[j] = u(S + [j]) - u(S)
            S = S + [j]
        out = out + np.array(phi)
    return out / math.factorial(n)


def coalition_mask(S, n):
    m = np.zeros((1, n), dtype=bool)
    m[0, list(S)] = True
    return m


# ------------------------------------------------------------------ paper examples and axioms
def test_xor_game_of_example_3_5():
    g = table_game({(): 0.0, (0,): 1.0, (1,): 1.0, (0, 1): 0.0}, "bernoulli")
    v = distributional_value(g)
    # invariants to 1e-12 (TOL): another machine's arithmetic may differ in the last bits
    np.testing.assert_allclose(v.pmf(), [[0.5, 0.0, 0.5], [0.5, 0.0, 0.5]], rtol=0, atol=TOL)
    np.testing.assert_allclose(v.importance(), [1.0, 1.0], rtol=0, atol=TOL)
    np.testing.assert_allclose(v.mean(), [0.0, 0.0], rtol=0, atol=TOL)  # the standard Shapley value sees nothing ...
    np.testing.assert_allclose(v.variance(), [1.0, 1.0], rtol=0, atol=TOL)  # ... the distributional value sees the flips
    assert np.allclose(v.entropy(), np.log(2))


def test_null_player_gets_delta_zero_prop_3_9_ii():
    rng = np.random.default_rng(1)
    n, null = 4, 2
    base = rng.random(2 ** n)
    pi = np.array([base[m & ~(1 << null)] for m in range(2 ** n)])  # payoff ignores player 2
    v = distributional_value(table_game(pi, "bernoulli"))
    # the null player's pmf is the point mass at 0, to 1e-12 (TOL), not bit for bit
    np.testing.assert_allclose(v.pmf()[null], [0.0, 1.0, 0.0], rtol=0, atol=TOL)
    assert v.importance()[null] == pytest.approx(0.0, abs=TOL)
    assert np.all(v.importance()[[0, 1, 3]] > 0)
    # categorical and Gaussian games too
    g, _ = linear_logit_game(n=4, d=3, seed=2)
    g_null = StochasticGame(lambda c: g.payoff(c & (np.arange(4) != 1)), 4, CategoricalFamily(3))
    vc = distributional_value(g_null)
    assert np.allclose(vc.transition[1], np.diag(vc.transition[1].diagonal()), rtol=0, atol=TOL)
    assert vc.importance()[1] == pytest.approx(0.0, abs=TOL)
    gg = StochasticGame(lambda c: np.stack([c[:, 0] * 2.0 + c[:, 2], 1.0 + c[:, 0] * 0.5], 1), 3, GaussianFamily())
    vg = distributional_value(gg)
    np.testing.assert_allclose([vg.importance()[1], vg.mean()[1], vg.variance()[1]], 0.0, rtol=0, atol=TOL)


def test_efficiency_by_enumeration_prop_3_9_iv():
    n, d = 4, 3
    g, logits = linear_logit_game(n=n, d=d, seed=3)
    # (iv) as a random-variable identity: for every shared noise draw, the coalition-averaged
    # marginal contributions sum to v([n], eps) - v(empty, eps)
    rng = np.random.default_rng(0)
    eps = rng.gumbel(size=(200, d))
    masks = all_coalitions(n)
    O = g.sample(masks, eps)  # (2^n, draws)
    onehot = np.eye(d)[O]  # (2^n, draws, d)
    for struct in (Shapley(), RandomOrderValue(groups=[[3], [0, 2], [1]])):
        W = struct.player_weights(n)
        total = 0.0
        for i in range(n):
            m = np.arange(2 ** n)
            total = total + np.tensordot(W[i], onehot[m | (1 << i)] - onehot[m], axes=1)
        assert np.allclose(total, onehot[-1] - onehot[0], atol=1e-12)
        # and for the analytic value: sum of means = u([n]) - u(empty)
        v = distributional_value(g, struct)
        assert v.efficient
        assert np.max(np.abs(v.mean_vector().sum(0) - (v.prediction - v.base))) < 1e-12
    vb = distributional_value(g, Banzhaf())  # Banzhaf is not efficient
    assert not vb.efficient
    assert np.max(np.abs(vb.mean_vector().sum(0) - (vb.prediction - vb.base))) > 1e-3


def test_symmetry_by_enumeration_prop_3_9_v():
    g, _ = linear_logit_game(n=5, d=4, seed=4, tie=(1, 3))
    for struct in (Shapley(), Banzhaf(), Semivalue([0.4, 0.1, 0.1, 0.1, 0.3])):
        v = distributional_value(g, struct)
        assert np.allclose(v.transition[1], v.transition[3], atol=1e-15)
        assert not np.allclose(v.transition[0], v.transition[1], atol=1e-6)
    # an asymmetric structure separates them
    v = distributional_value(g, RandomOrderValue(groups=[[1], [0, 2, 3, 4]]))
    assert not np.allclose(v.transition[1], v.transition[3], atol=1e-6)


def test_categorical_mean_is_the_shapley_value_of_the_softmax_game_class_by_class():
    n, d = 5, 4
    g, logits = linear_logit_game(n=n, d=d, seed=5)
    v = distributional_value(g)
    oracle = brute_force_shapley(lambda S: softmax(logits(coalition_mask(S, n))[0]), n)
    assert oracle.shape == (n, d)
    assert np.max(np.abs(v.mean_vector() - oracle)) < 1e-12
    e = to_explanation(v, target=2)
    assert np.allclose(e.values, oracle[:, 2], atol=1e-12)
    assert e.additivity_error()[0] < 1e-12


def test_transition_tables_against_brute_force_semivalues():
    n, d = 4, 5
    g, logits = linear_logit_game(n=n, d=d, seed=6)
    p_size = np.array([0.1, 0.2, 0.3, 0.4])
    cases = {
        "banzhaf": (Banzhaf(), lambda k: 1.0 / 2 ** (n - 1)),
        "semivalue": (Semivalue(p_size), lambda k: p_size[k] / math.comb(n - 1, k)),
        "shapley": (Shapley(), lambda k: 1.0 / (n * math.comb(n - 1, k))),
    }
    for name, (struct, w) in cases.items():
        v = distributional_value(g, struct)
        for i in range(n):
            others = [j for j in range(n) if j != i]
            T = np.zeros((d, d))
            for k in range(n):
                for S in itertools.combinations(others, k):
                    a = logits(coalition_mask(S + (i,), n))[0]
                    b = logits(coalition_mask(S, n))[0]
                    T += w(k) * gumbel_max_coupling(a, b).T  # rows = from (without i)
            assert np.allclose(v.transition[i], T, atol=1e-14), name


def test_bernoulli_value_matches_the_closed_form_of_section_3_1():
    rng = np.random.default_rng(8)
    n = 4
    pi = rng.random(2 ** n)
    v = distributional_value(table_game(pi, "bernoulli"), Banzhaf())
    for i in range(n):
        m = np.array([s for s in range(2 ** n) if not s & (1 << i)])
        lo = np.minimum(pi[m | (1 << i)], pi[m])
        q_plus = np.mean(pi[m | (1 << i)] - lo)
        q_minus = np.mean(pi[m] - lo)
        assert v.pmf()[i] == pytest.approx([q_minus, 1 - q_plus - q_minus, q_plus], abs=1e-15)
        assert v.variance()[i] == pytest.approx(q_plus + q_minus - (q_plus - q_minus) ** 2, abs=1e-15)


def test_two_class_categorical_reduces_to_bernoulli():
    n = 4
    g2, logits = linear_logit_game(n=n, d=2, seed=9)
    vb = distributional_value(StochasticGame(lambda c: softmax(logits(c))[:, 1], n, BernoulliFamily()))
    vc = distributional_value(g2)
    assert np.allclose(vc.transition, vb.transition, atol=1e-15)
    assert np.allclose(vc.mean_vector()[:, 1], vb.mean(), atol=1e-15)


def test_random_order_constructions_agree():
    n = 4
    groups = [[2, 0], [3], [1]]
    perms, w = [], []
    for a in itertools.permutations([2, 0]):
        perms.append(list(a) + [3, 1])
        w.append(0.5)
    W1 = RandomOrderValue(groups=groups).player_weights(n)
    W2 = RandomOrderValue(permutations=perms, weights=w).player_weights(n)
    assert np.allclose(W1, W2)
    assert np.allclose(RandomOrderValue().player_weights(n), Shapley().player_weights(n))
    assert ExplicitCoalitionStructure(W1).efficient
    assert not ExplicitCoalitionStructure(Banzhaf().player_weights(n)).efficient
    assert ExplicitCoalitionStructure(Banzhaf().player_weights(n)).symmetric


def _random_explicit_structure(n, seed=0):
    rng = np.random.default_rng(seed)
    W = rng.random((n, 2 ** n)) * ~all_coalitions(n).T
    return ExplicitCoalitionStructure(W / W.sum(axis=1, keepdims=True))


@pytest.mark.parametrize("struct", [Shapley(), Banzhaf(), Semivalue([0.5, 0.0, 0.2, 0.1, 0.2]),
                                    RandomOrderValue(groups=[[4, 1], [0, 2, 3]]),
                                    RandomOrderValue(permutations=[[0, 1, 2, 3, 4], [4, 3, 2, 1, 0], [2, 0, 4, 1, 3]],
                                                     weights=[0.5, 0.3, 0.2]),
                                    _random_explicit_structure(5)])
def test_monte_carlo_converges_within_its_standard_error(struct):
    g, _ = linear_logit_game(n=5, d=3, seed=10)
    exact = distributional_value(g, struct)
    mc = distributional_value(g, struct, method="monte-carlo", n_samples=3000, random_state=1)
    pos = mc.stderr > 0
    z = np.abs(mc.transition - exact.transition)[pos] / mc.stderr[pos]
    assert z.max() < 4.5, z.max()
    # cells with zero spread are exact
    assert np.allclose(mc.transition[~pos], exact.transition[~pos], atol=1e-12)
    zm = np.abs(mc.mean_vector() - exact.mean_vector()) / np.maximum(mc.mean_stderr, 1e-300)
    assert zm.max() < 4.5
    # the error estimate is honest: about 1/sqrt(n) of the per-sample spread, not zero
    assert 1e-4 < mc.stderr.max() < 0.05


def test_monte_carlo_shares_coalitions_across_players():
    calls = []
    g, logits = linear_logit_game(n=6, d=3, seed=11)
    g2 = StochasticGame(lambda c: (calls.append(c.shape[0]), logits(c))[1], 6, CategoricalFamily(3))
    distributional_value(g2, "shapley", method="monte-carlo", n_samples=50, random_state=0)
    # a permutation costs n + 1 = 7 coalitions shared by all players (<= 7 * 50 after dedupe)
    assert calls[0] <= 7 * 50
    calls.clear()
    distributional_value(g2, Semivalue([1 / 6] * 6), method="monte-carlo", n_samples=50, random_state=0)
    assert calls[0] <= 7 * 50 + 2


def test_shared_noise_sampling_agrees_and_independent_noise_breaks_null_players_remark_3_6():
    rng = np.random.default_rng(12)
    n, null = 3, 1
    base = rng.uniform(0.2, 0.8, size=2 ** n)
    pi = np.array([base[m & ~(1 << null)] for m in range(2 ** n)])
    g = table_game(pi, "bernoulli")
    exact = distributional_value(g)
    shared = sampled_value(g, n_draws=20000, random_state=3)
    pos = shared.stderr > 0
    assert np.max(np.abs(shared.transition - exact.transition)[pos] / shared.stderr[pos]) < 4.5
    assert shared.importance()[null] == pytest.approx(0.0, abs=TOL)
    indep = sampled_value(g, n_draws=20000, random_state=3, independent_noise=True)
    W = Shapley().player_weights(n)[null]
    m = np.flatnonzero(W)
    expected = 1 - np.sum(W[m] * (pi[m] ** 2 + (1 - pi[m]) ** 2))  # Remark 3.6
    assert indep.importance()[null] == pytest.approx(expected, abs=0.02)
    assert expected > 0.3


def test_categorical_shared_noise_sampling_agrees_with_closed_form():
    g, _ = linear_logit_game(n=3, d=4, seed=13)
    exact = distributional_value(g)
    s = sampled_value(g, n_draws=20000, random_state=4)
    pos = s.stderr > 0
    assert np.max(np.abs(s.transition - exact.transition)[pos] / s.stderr[pos]) < 4.5


def test_statistics_on_a_handmade_value():
    g, _ = linear_logit_game(n=3, d=3, seed=14)
    v = distributional_value(g)
    T = np.zeros((1, 3, 3))
    T[0] = [[0.3, 0.05, 0.15], [0.0, 0.2, 0.0], [0.1, 0.0, 0.2]]
    v.transition = T
    prob, frm, to = v.most_likely_change()
    assert (prob[0], frm[0], to[0]) == (0.15, 0, 2)
    assert v.importance()[0] == pytest.approx(0.3)
    p = np.array([0.7, 0.05, 0.15, 0.1])
    assert v.entropy()[0] == pytest.approx(-np.sum(p * np.log(p)))
    # xi = e_r - e_s: mean per class
    assert v.mean_vector()[0] == pytest.approx([0.1 - 0.2, 0.05, 0.15 - 0.1])
    assert np.allclose(v.variance()[0], np.diag(v.covariance()[0]))
    assert v.leave_probability()[0] == pytest.approx([0.2, 0.0, 0.1])
    # covariance by enumeration of the support
    ev = np.zeros((3, 3))
    for s in range(3):
        for r in range(3):
            z = np.eye(3)[r] - np.eye(3)[s]
            ev += T[0, s, r] * np.outer(z, z)
    mu = v.mean_vector()[0]
    assert np.allclose(v.covariance()[0], ev - np.outer(mu, mu))


def test_gaussian_value_mixture_tracker_and_mean():
    n = 4
    rng = np.random.default_rng(15)
    w = rng.normal(size=n)
    s = np.abs(rng.normal(size=n))
    s[2] = -0.5  # player 2 reduces the predictive sd
    game = StochasticGame(lambda c: np.stack([c @ w + 0.3 * c[:, 0] * c[:, 1], 1.0 + c @ s], 1), n, GaussianFamily())
    v = distributional_value(game)
    oracle = brute_force_shapley(lambda S: coalition_mask(S, n)[0] @ w + 0.3 * (0 in S and 1 in S), n)
    assert np.allclose(v.mean(), oracle, atol=1e-12)
    # mixture variance by explicit enumeration
    W = Shapley().player_weights(n)
    masks = all_coalitions(n)
    P = game.params(masks)
    for i in range(n):
        m = np.flatnonzero(W[i])
        dm = P[m | (1 << i), 0] - P[m, 0]
        ds = P[m | (1 << i), 1] - P[m, 1]
        var = np.sum(W[i, m] * (ds ** 2 + dm ** 2)) - np.sum(W[i, m] * dm) ** 2
        assert v.variance()[i] == pytest.approx(var, abs=1e-12)
    np.testing.assert_allclose(v.tracker()[2], [1.0, 0.0, 0.0], rtol=0, atol=TOL)
    np.testing.assert_allclose(v.tracker()[0], [0.0, 0.0, 1.0], rtol=0, atol=TOL)
    assert np.allclose(v.cdf([1e6])[:, 0], 1.0) and np.allclose(v.cdf([-1e6])[:, 0], 0.0)
    e = to_explanation(v)
    assert e.method == "distributional-gaussian" and e.additivity_error()[0] < 1e-12
    json.dumps(e.extra)


# ------------------------------------------------------------------ games from models
def test_bernoulli_preference_game_from_a_linear_margin():
    w = np.array([1.5, -0.7, 0.0, 2.0])
    xl = np.array([1.0, 0.5, 3.0, -0.2])
    xr = np.array([0.0, 1.5, -1.0, 0.4])
    nu = pairwise_margin_value_function(lambda L, R: (L - R) @ w, xl, xr)
    e = explain_preference(nu, ["a", "b", "c", "d"], model_name="linear", model_version=3, instance_id="ev-1")
    assert e.method == "distributional-bernoulli"
    assert e.prediction == pytest.approx(1 / (1 + np.exp(-(xl - xr) @ w)))
    assert e.base_values == pytest.approx(0.5)
    assert e.additivity_error()[0] < 1e-12
    assert e.extra["importance"][2] == pytest.approx(0.0, abs=TOL)  # zero weight: null player, to 1e-12
    oracle = brute_force_shapley(lambda S: 1 / (1 + np.exp(-nu(coalition_mask(S, 4))[0])), 4)
    assert np.allclose(e.values, oracle, atol=1e-12)
    rec = e.to_records()[0]
    json.dumps(rec)
    back = Explanation.from_record(rec)
    assert back.extra["q_plus"] == pytest.approx(e.extra["q_plus"])
    assert rec["model_version"] == 3 and rec["request_id"] == "ev-1"


def test_learner_adapter_matches_the_batched_margin():
    class Linear:
        feature_names = ["a", "b", "c"]
        w = np.array([1.0, -2.0, 0.5])

        def margin_one(self, x_left, x_right, context=None):
            return float(sum(self.w[j] * (x_left[f] - x_right[f]) for j, f in enumerate(self.feature_names)))

    m = Linear()
    xl, xr = {"a": 1.0, "b": 0.0, "c": 2.0}, {"a": 0.0, "b": 1.0, "c": 2.5}
    nu1 = learner_margin_value_function(m, xl, xr)
    nu2 = pairwise_margin_value_function(lambda L, R: (L - R) @ m.w, [1.0, 0.0, 2.0], [0.0, 1.0, 2.5])
    c = all_coalitions(3)
    assert np.allclose(nu1(c), nu2(c))


def test_click_session_categorical_game():
    rng = np.random.default_rng(16)
    k, d = 4, 3
    items = rng.normal(size=(k, d))
    beta = np.array([2.0, -1.0, 0.0])
    e = explain_choice(lambda X: X @ beta, items, feature_names=["price", "rating", "noise"], target=1)
    assert e.method == "distributional-categorical"
    assert e.extra["target"] == 1 and e.extra["target_class"] == "item1"
    assert e.additivity_error()[0] < 1e-12
    assert e.extra["importance"][2] == pytest.approx(0.0, abs=TOL)  # zero utility weight: null player, to 1e-12
    T = np.array(e.extra["transition"])
    assert T.shape == (d, k, k)
    p_full = softmax(items @ beta)
    assert np.allclose(e.extra["prediction_distribution"], p_full)
    assert np.allclose(e.extra["base_distribution"], 0.25)  # reference = session mean -> all items equal
    # batched utilities give the same value
    e2 = explain_choice(lambda X: X @ beta, items, batched=True, target=1)
    assert np.allclose(e2.values, e.values)
    json.dumps(e.to_records())


def test_reference_game_with_a_sklearn_multinomial_model_probabilities_vs_logits():
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    X, y = load_iris(return_X_y=True)
    clf = LogisticRegression(max_iter=500).fit(X, y)
    x, ref = X[60], X.mean(axis=0)
    gp = reference_game(clf.predict_proba, x, ref, output="probability")
    gl = reference_game(clf.decision_function, x, ref, output="logits")
    vp, vl = distributional_value(gp), distributional_value(gl)
    assert np.allclose(vp.transition, vl.transition, atol=1e-10)
    oracle = brute_force_shapley(lambda S: clf.predict_proba(np.where(coalition_mask(S, 4), x, ref))[0], 4)
    assert np.allclose(vp.mean_vector(), oracle, atol=1e-12)
    # a background set: payoffs are averaged probabilities
    gb = reference_game(clf.predict_proba, x, X[::15], output="probability")
    vb = distributional_value(gb)
    assert np.allclose(vb.base, clf.predict_proba(X[::15]).mean(axis=0))
    # binary model as a Bernoulli game
    yb = (y == 2).astype(int)
    cb = LogisticRegression(max_iter=500).fit(X, yb)
    g1 = reference_game(lambda Z: cb.predict_proba(Z)[:, 1], x, ref, family="bernoulli")
    g2 = reference_game(cb.decision_function, x, ref, family="bernoulli", output="logits")
    assert np.allclose(distributional_value(g1).pmf(), distributional_value(g2).pmf(), atol=1e-12)


def test_gaussian_utility_game_from_a_predictive_variance():
    w = np.array([1.0, 0.0, -2.0])
    e = explain_gaussian_utility(lambda X: (X @ w, 0.1 + (X ** 2) @ np.array([0.0, 1.0, 0.0])),
                                 [1.0, 2.0, 0.5], [0.0, 0.0, 0.0], feature_names=["a", "b", "c"])
    assert np.allclose(e.values, [1.0, 0.0, -1.0])
    np.testing.assert_allclose(e.extra["sigma_tracker"][1], [0.0, 0.0, 1.0], rtol=0, atol=TOL)  # feature b only raises the variance
    assert e.extra["importance"][1] == pytest.approx(1.0, abs=TOL) and e.values[1] == pytest.approx(0.0, abs=TOL)


# ------------------------------------------------------------------ robustness and errors
def test_extreme_logits_give_finite_values():
    n, d = 4, 5
    rng = np.random.default_rng(17)
    W = rng.choice([-1000.0, 1000.0], size=(n, d))
    g = StochasticGame(lambda c: c @ W, n, CategoricalFamily(d))
    v = distributional_value(g)
    assert np.all(np.isfinite(v.transition))
    assert np.allclose(v.transition.sum(axis=(1, 2)), 1.0, atol=1e-12)
    assert np.max(np.abs(v.mean_vector().sum(0) - (v.prediction - v.base))) < 1e-12
    e = to_explanation(v)
    assert all(np.isfinite(e.values))


def test_bad_input_raises():
    g, _ = linear_logit_game(n=3, d=3)
    with pytest.raises(InvalidParameterError, match="structure"):
        distributional_value(g, "owen")
    with pytest.raises(InvalidParameterError, match="method"):
        distributional_value(g, method="kernel")
    with pytest.raises(InvalidParameterError, match="n_samples"):
        distributional_value(g, method="monte-carlo", n_samples=1)
    with pytest.raises(BudgetError, match="monte-carlo"):
        distributional_value(StochasticGame(lambda c: np.zeros((len(c), 3)), 20, CategoricalFamily(3)), method="exact")
    with pytest.raises(InvalidInputError, match="shape"):
        distributional_value(StochasticGame(lambda c: np.zeros((len(c), 2)), 3, CategoricalFamily(3)))
    with pytest.raises(InvalidInputError, match="finite"):
        distributional_value(StochasticGame(lambda c: np.full((len(c), 3), np.nan), 3, CategoricalFamily(3)))
    with pytest.raises(InvalidInputError, match=r"\[0, 1\]"):
        distributional_value(StochasticGame(lambda c: np.full(len(c), 1.5), 3, BernoulliFamily()))
    with pytest.raises(InvalidInputError, match="NaN"):
        distributional_value(bernoulli_preference_game(lambda c: np.full(len(c), np.nan), 2))
    with pytest.raises(InvalidInputError, match="shape"):
        distributional_value(bernoulli_preference_game(lambda c: np.zeros((len(c), 2)), 2))
    with pytest.raises(InvalidInputError, match="Coalitions"):
        g.params(np.ones((2, 4), dtype=bool))
    with pytest.raises(InvalidInputError, match="k >= 2"):
        categorical_choice_game(lambda X: X.sum(1), np.ones((1, 3)))
    with pytest.raises(InvalidInputError, match="reference"):
        categorical_choice_game(lambda X: X.sum(1), np.ones((3, 3)), reference=np.zeros(4))
    with pytest.raises(InvalidInputError, match="NaN"):
        pairwise_margin_value_function(lambda L, R: L.sum(1), [np.nan, 1.0], [0.0, 0.0])
    with pytest.raises(InvalidInputError, match="variance"):
        distributional_value(gaussian_utility_game(lambda X: (X.sum(1), -np.ones(len(X))), [1.0, 2.0], [0.0, 0.0]))
    with pytest.raises(InvalidParameterError, match="size_distribution"):
        distributional_value(g, Semivalue([0.5, 0.6, 0.1]))
    with pytest.raises(InvalidParameterError, match="groups"):
        distributional_value(g, RandomOrderValue(groups=[[0, 1]]))
    with pytest.raises(InvalidParameterError, match="permutations"):
        RandomOrderValue(permutations=[0, 1, 2])
    with pytest.raises(InvalidParameterError, match="permutations"):
        distributional_value(g, RandomOrderValue(permutations=[[0, 1, 1]]))
    with pytest.raises(InvalidParameterError, match="weights"):
        RandomOrderValue(permutations=[[0, 1, 2], [2, 1, 0]], weights=[0.5, 0.6])
    with pytest.raises(InvalidParameterError, match="zero mass"):
        ExplicitCoalitionStructure(np.full((2, 4), 0.25))
    with pytest.raises(InvalidInputError, match="probability distribution"):
        distributional_value(reference_game(lambda Z: np.full((len(Z), 3), 0.5), [1.0, 2.0], [0.0, 0.0]))
    with pytest.raises(InvalidInputError, match="no payoff"):
        table_game({(): 0.0, (0,): 1.0}, "bernoulli", n_players=2)


def test_records_validate_against_the_explanation_schema():
    import pathlib

    import jsonschema

    path = pathlib.Path(__file__).resolve().parents[1] / "stream" / "schemas" / "explanation.v1.json"
    schema = json.loads(path.read_text())
    g, _ = linear_logit_game(n=3, d=3)
    nu = pairwise_margin_value_function(lambda L, R: (L - R).sum(1), [1.0, 0.0], [0.0, 1.0])
    exps = [
        to_explanation(distributional_value(g, method="monte-carlo", n_samples=50, random_state=0)),
        explain_preference(nu, ["a", "b"]),
        explain_gaussian_utility(lambda X: (X.sum(1), 1.0 + X[:, 0] ** 2), [1.0, 2.0], [0.0, 0.0]),
    ]
    for e in exps:
        for rec in e.to_records(instance_ids=["r1"]):
            jsonschema.validate(json.loads(json.dumps(rec)), schema)
            assert rec["method"].startswith("distributional-")
