"""Capacity learners (Herin, Perny & Sokolovska, IJCAI 2024): closed forms and invariants."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.optimize import minimize

from learners._mobius import (
    SubsetIndex,
    capacity_from_mobius,
    mobius_from_capacity,
    mobius_transform,
    zeta_transform,
)
from learners.capacity_constraints import constraint_matrix, constraint_residuals
from learners.capacity import CapacityFOBOS, CapacityRDA, choquet_from_capacity
from learners.capacity_solvers import (
    fobos_step,
    hinge_loss,
    hinge_subgradient_coef,
    rda_closed_form,
    rda_from_sum,
    solve_lp,
)
from learners.exceptions import BudgetError, InvalidInputError, InvalidParameterError, SnapshotError
from learners.state import dump_state, load_state


def subsets_of(mask):
    """All sub-masks of ``mask`` (brute force)."""
    bits = [i for i in range(mask.bit_length()) if (mask >> i) & 1]
    for r in range(len(bits) + 1):
        for c in itertools.combinations(bits, r):
            yield sum(1 << i for i in c)


def brute_v(m_full, n):
    return np.array([sum(m_full[T] for T in subsets_of(S)) for S in range(1 << n)])


def random_monotone_mobius(idx, rng, K=None):
    K = K or idx.n
    m = np.zeros(idx.d)
    cols = rng.choice(idx.d, size=min(K, idx.d), replace=False)
    m[cols] = rng.random(cols.size)
    return m / m.sum()


def pairs_from(m, idx, T, rng, sigma=0.0, agg="choquet"):
    X, Y = rng.random((T, idx.n)), rng.random((T, idx.n))
    f = lambda Z: idx.features(Z, agg) @ m
    fx, fy = f(X) + rng.normal(0, sigma, T) * (sigma > 0), f(Y) + rng.normal(0, sigma, T) * (sigma > 0)
    return X, Y, np.where(fx > fy, 1, -1)


def dicts(X, names):
    return [dict(zip(names, row)) for row in X]


# ------------------------------------------------------------------ transforms
@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_zeta_and_mobius_are_inverse_and_match_definition(n):
    rng = np.random.default_rng(n)
    m = rng.normal(size=1 << n)
    m[0] = 0.0
    v = zeta_transform(m)
    np.testing.assert_allclose(v, brute_v(m, n), atol=1e-12)
    np.testing.assert_allclose(mobius_transform(v), m, atol=1e-12)
    idx = SubsetIndex(n)
    np.testing.assert_allclose(mobius_from_capacity(capacity_from_mobius(m[1:], idx), idx), m[1:], atol=1e-12)


def test_mobius_from_capacity_rejects_nonzero_empty_set():
    with pytest.raises(InvalidInputError, match="v\\(∅\\) = 0"):
        mobius_from_capacity(np.array([0.1, 0.5, 0.5, 1.0]))


def test_subset_index_k_additive_masks_and_budget():
    idx = SubsetIndex(5, k=2)
    assert idx.d == 5 + 10
    assert sorted(idx.masks.tolist()) == idx.masks.tolist()
    assert all(bin(int(s)).count("1") <= 2 for s in idx.masks)
    assert idx.position(np.array([3, 7, 1 << 4])).tolist()[1] == -1
    with pytest.raises(BudgetError):
        SubsetIndex(30)
    with pytest.raises(InvalidParameterError, match="'n' parameter of SubsetIndex"):
        SubsetIndex(0)


# ------------------------------------------------------------------ features
@pytest.mark.parametrize("n,k", [(3, None), (5, None), (5, 2), (6, 3)])
def test_choquet_features_equal_sorted_permutation_definition(n, k):
    rng = np.random.default_rng(10 * n + (k or 0))
    idx = SubsetIndex(n, k)
    m = rng.normal(size=idx.d)
    m_full = idx.to_full(m)
    v = brute_v(m_full, n)
    X = rng.random((40, n))
    got = idx.features(X, "choquet") @ m
    # oracle: C_v(x) = Σ_i (x_(i) − x_(i−1)) v({(i), …, (n)}) with a sorting permutation
    want = []
    for x in X:
        order = np.argsort(x)
        prev, tot = 0.0, 0.0
        for pos, i in enumerate(order):
            upper = sum(1 << int(j) for j in order[pos:])
            tot += (x[i] - prev) * v[upper]
            prev = x[i]
        want.append(tot)
    np.testing.assert_allclose(got, want, atol=1e-12)
    if k is None:
        np.testing.assert_allclose(choquet_from_capacity(X, v), want, atol=1e-12)


@pytest.mark.parametrize("n,k", [(3, None), (5, None), (5, 2)])
def test_multilinear_equals_direct_definition(n, k):
    rng = np.random.default_rng(n)
    idx = SubsetIndex(n, k)
    m = rng.normal(size=idx.d)
    v = brute_v(idx.to_full(m), n)
    X = rng.random((30, n))
    got = idx.features(X, "multilinear") @ m
    # ML_v(x) = Σ_S v(S) Π_{i∈S} x_i Π_{i∉S} (1 − x_i)  (Owen's multilinear extension)
    want = [sum(v[S] * np.prod([x[i] if (S >> i) & 1 else 1 - x[i] for i in range(n)]) for S in range(1 << n))
            for x in X]
    np.testing.assert_allclose(got, want, atol=1e-12)


def test_features_shapes_and_bad_width():
    idx = SubsetIndex(4)
    assert idx.features(np.full(4, 0.5)).shape == (15,)
    assert idx.features(np.full((3, 4), 0.5)).shape == (3, 15)
    with pytest.raises(InvalidInputError, match="n=4"):
        idx.features(np.zeros((2, 3)))


def test_capacity_values_are_model_values_at_indicator_vectors():
    # F(1_S, 0_{-S}) = v(S) for Choquet and multilinear (Section 2)
    rng = np.random.default_rng(3)
    idx = SubsetIndex(4)
    m = rng.normal(size=idx.d)
    v = capacity_from_mobius(m, idx)
    ind = ((np.arange(16)[:, None] >> np.arange(4)) & 1).astype(float)
    for agg in ("choquet", "multilinear"):
        np.testing.assert_allclose(idx.features(ind, agg) @ m, v, atol=1e-12)


# ------------------------------------------------------------------ constraints
def brute_rows(n, idx, kind):
    rows = []
    col = {int(s): c for c, s in enumerate(idx.masks)}

    def vec(S, sign, out):
        for T in subsets_of(S):
            if T in col:
                out[col[T]] += sign

    if kind == "monotone":
        for i in range(n):
            rest = [j for j in range(n) if j != i]
            for c in range(1 << (n - 1)):
                S0 = sum(1 << rest[b] for b in range(n - 1) if (c >> b) & 1)
                r = np.zeros(idx.d)
                vec(S0, 1.0, r)              # v(S∖{i}) − v(S) ≤ 0
                vec(S0 | (1 << i), -1.0, r)
                rows.append(r)
    else:
        for i in range(n):
            for j in range(i + 1, n):
                rest = [q for q in range(n) if q not in (i, j)]
                for c in range(1 << (n - 2)):
                    S = sum(1 << rest[b] for b in range(n - 2) if (c >> b) & 1)
                    r = np.zeros(idx.d)      # −(v(S∪ij) − v(S∪i) − v(S∪j) + v(S)) ≤ 0
                    vec(S | (1 << i) | (1 << j), -1.0, r)
                    vec(S | (1 << i), 1.0, r)
                    vec(S | (1 << j), 1.0, r)
                    vec(S, -1.0, r)
                    rows.append(r)
    return np.array(rows)


@pytest.mark.parametrize("n,k", [(2, None), (3, None), (4, None), (4, 2)])
def test_constraint_rows_equal_definitions_on_v(n, k):
    idx = SubsetIndex(n, k)
    for kind in ("monotone", "supermodular"):
        B = constraint_matrix(idx, (kind,)).toarray()
        np.testing.assert_allclose(B, brute_rows(n, idx, kind), atol=1e-12)
    rng = np.random.default_rng(n)
    m = rng.normal(size=idx.d)
    B = constraint_matrix(idx, ("monotone", "supermodular"))
    np.testing.assert_allclose(B @ m, constraint_residuals(capacity_from_mobius(m, idx), ("monotone", "supermodular")),
                               atol=1e-12)


def test_example_2_matrix_of_the_paper():
    B = constraint_matrix(SubsetIndex(2), ("monotone", "supermodular")).toarray()
    assert sorted(map(tuple, B)) == sorted([(-1, 0, 0), (-1, 0, -1), (0, -1, 0), (0, -1, -1), (0, 0, -1)])
    assert B.shape == (5, 3)


def test_monotone_iff_residuals_nonpositive():
    rng = np.random.default_rng(0)
    idx = SubsetIndex(4)
    m = random_monotone_mobius(idx, rng)          # non-negative masses: belief function → monotone & supermodular
    r = constraint_residuals(capacity_from_mobius(m, idx), ("monotone", "supermodular"))
    assert r.max() <= 1e-15
    m2 = m.copy()
    m2[idx.position(np.array([3]))] = -0.9        # m({0,1}) very negative: v({0,1}) < v({0})
    assert constraint_residuals(capacity_from_mobius(m2, idx), ("monotone",)).max() > 0


# ------------------------------------------------------------------ loss & steps
def test_subgradient_rule_and_subgradient_inequality():
    rng = np.random.default_rng(0)
    delta = 0.1
    assert hinge_subgradient_coef(0.05, 1, delta) == -1.0 and hinge_subgradient_coef(0.2, 1, delta) == 0.0
    assert hinge_subgradient_coef(-0.05, -1, delta) == 1.0 and hinge_subgradient_coef(-0.2, -1, delta) == 0.0
    assert hinge_subgradient_coef(-0.2, 0, delta) == -1.0 and hinge_subgradient_coef(0.2, 0, delta) == 1.0
    assert hinge_subgradient_coef(0.05, 0, delta) == 0.0
    for _ in range(300):
        d = rng.normal(size=5)
        m, m2 = rng.normal(size=5) * 0.1, rng.normal(size=5) * 0.1
        y = int(rng.choice([-1, 0, 1]))
        g = hinge_subgradient_coef(m @ d, y, delta) * d
        assert hinge_loss(m2 @ d, y, delta) >= hinge_loss(m @ d, y, delta) + g @ (m2 - m) - 1e-12


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rda_step_solves_linearised_problem_4(seed):
    rng = np.random.default_rng(seed)
    d, t, gamma, lam = 6, 17.0, 3.0, 0.05
    gbar = rng.normal(scale=0.1, size=d)
    eta = gamma / (2 * math.sqrt(t))
    # min ⟨ḡ, m⟩ + λ‖m‖₁ + η_t ‖m‖²  with m = p − q, p, q ≥ 0 (smooth, bound-constrained)
    obj = lambda z: gbar @ (z[:d] - z[d:]) + lam * z.sum() + eta * np.sum((z[:d] - z[d:]) ** 2)
    jac = lambda z: np.concatenate([gbar + lam + 2 * eta * (z[:d] - z[d:]), -gbar + lam - 2 * eta * (z[:d] - z[d:])])
    res = minimize(obj, np.zeros(2 * d), jac=jac, bounds=[(0, None)] * (2 * d), method="L-BFGS-B",
                   options={"ftol": 1e-15, "gtol": 1e-12})
    m_star = res.x[:d] - res.x[d:]
    np.testing.assert_allclose(rda_closed_form(gbar, t, gamma, lam), m_star, atol=1e-7)
    np.testing.assert_allclose(rda_from_sum(gbar * t, t, gamma, lam), m_star, atol=1e-7)


def test_fobos_step_is_prox_of_l1():
    rng = np.random.default_rng(0)
    m0, g = rng.normal(size=5), rng.normal(size=5)
    eta, lam = 0.3, 0.5
    u = m0 - eta * g
    res = minimize(lambda z: 0.5 * np.sum((z[:5] - z[5:] - u) ** 2) + eta * lam * z.sum(), np.zeros(10),
                   bounds=[(0, None)] * 10, method="L-BFGS-B", options={"ftol": 1e-15, "gtol": 1e-12})
    np.testing.assert_allclose(fobos_step(m0.copy(), g, eta, lam), res.x[:5] - res.x[5:], atol=1e-6)


def test_learner_replays_algorithm_1():
    """Each round: g_t from the paper's rule at m_t, ḡ_t = mean, m_{t+1} = −(√t/γ)[|ḡ_t| − λ]₊ sign(ḡ_t)."""
    rng = np.random.default_rng(1)
    idx = SubsetIndex(4)
    names = list("abcd")
    m_true = random_monotone_mobius(idx, rng)
    X, Y, lab = pairs_from(m_true, idx, 60, rng)
    lab[::7] = 0  # some indifferences
    gamma, lam, delta = 5.0, 0.002, 0.02
    model = CapacityRDA(names, gamma=gamma, l1=lam, delta=delta)
    m_t = np.zeros(idx.d)
    G = np.zeros(idx.d)
    for t, (x, y, l) in enumerate(zip(dicts(X, names), dicts(Y, names), lab), start=1):
        model.learn_one(x, y, int(l))
        Delta = idx.features(X[t - 1]) - idx.features(Y[t - 1])
        if l != 0:
            Delta = l * Delta
            g = -Delta if m_t @ Delta < delta else 0 * Delta
        else:
            s = m_t @ Delta
            g = -Delta if s < -delta else (Delta if s > delta else 0 * Delta)
        G += g
        gbar = G / t
        m_t = -(math.sqrt(t) / gamma) * np.maximum(np.abs(gbar) - lam, 0) * np.sign(gbar)
        np.testing.assert_allclose(model.mobius, m_t, atol=1e-12)
    assert np.count_nonzero(m_t) > 0


def test_admm_step_with_empty_B_is_algorithm_1_and_rda_learns():
    import scipy.sparse as sp

    from learners.capacity_solvers import ADMMState, admm_rda_step

    rng = np.random.default_rng(2)
    G = rng.normal(size=7)
    B = sp.csr_matrix((0, 7))
    m, _ = admm_rda_step(G, 5.0, ADMMState.zeros(0), B, B.T.tocsr(), gamma=3.0, l1=0.1, rho=1.0)
    np.testing.assert_allclose(m, rda_from_sum(G, 5.0, 3.0, 0.1), atol=1e-15)
    idx = SubsetIndex(5)
    names = [f"c{i}" for i in range(5)]
    m_true = random_monotone_mobius(idx, rng)
    model = CapacityRDA(names, delta=1e-3)
    assert model.constraint_matrix is None
    model.learn_many(*pairs_from(m_true, idx, 400, np.random.default_rng(5), sigma=0.03))
    Xt, Yt, labt = pairs_from(m_true, idx, 400, np.random.default_rng(99))
    assert np.mean(np.sign(model.margins(Xt, Yt)) == labt) > 0.85


def test_admm_rda_keeps_monotonicity_violation_near_zero():
    rng = np.random.default_rng(4)
    n = 10
    idx = SubsetIndex(n)
    names = [f"c{i}" for i in range(n)]
    m_true = random_monotone_mobius(idx, rng)
    X, Y, lab = pairs_from(m_true, idx, 300, rng, sigma=0.03)
    rda = CapacityRDA(names, delta=1e-3)
    admm = CapacityRDA(names, delta=1e-3, constraints=("monotone",), rho=1.0)
    B = admm.constraint_matrix
    vr, va = [], []
    for t in range(0, 300, 3):                      # violation every 3 rounds
        rda.learn_many(X[t:t + 3], Y[t:t + 3], lab[t:t + 3])
        admm.learn_many(X[t:t + 3], Y[t:t + 3], lab[t:t + 3])
        vr.append(np.square(np.maximum(B @ rda.mobius, 0)).sum())
        va.append(np.square(np.maximum(B @ admm.mobius, 0)).sum())
    vr, va = np.array(vr), np.array(va)
    assert vr[:17].max() > 1e-3                     # RDA violates monotonicity early (Fig. 1a)
    assert va.mean() < 0.1 * vr.mean()              # ADMM-RDA: an order of magnitude less on average …
    assert va[17:].mean() < 1e-2 * vr[:17].mean()   # … and near 0 once the multipliers have built up
    assert admm.metrics()["constraint_violation"] < 1e-8
    Xt, Yt, labt = pairs_from(m_true, idx, 300, np.random.default_rng(7))
    assert np.mean(np.sign(admm.margins(Xt, Yt)) == labt) > 0.8


# ------------------------------------------------------------------ merge
def test_merge_equals_union_run_when_subgradients_coincide():
    """With δ huge every hinge is active, g_τ = −y_τ d_τ does not depend on the iterate: merge is exact."""
    rng = np.random.default_rng(5)
    idx = SubsetIndex(4)
    names = list("abcd")
    X, Y, lab = pairs_from(random_monotone_mobius(idx, rng), idx, 80, rng)
    kw = dict(delta=1e6, gamma=10.0, l1=0.001)
    a, b, u, u2 = (CapacityRDA(names, **kw) for _ in range(4))
    a.learn_many(X[:30], Y[:30], lab[:30])
    b.learn_many(X[30:], Y[30:], lab[30:])
    u.learn_many(X, Y, lab)
    u2.learn_many(np.r_[X[30:], X[:30]], np.r_[Y[30:], Y[:30]], np.r_[lab[30:], lab[:30]])
    merged = a + b
    np.testing.assert_allclose(merged.mobius, u.mobius, atol=1e-12)
    np.testing.assert_allclose(merged.mobius, u2.mobius, atol=1e-12)
    assert merged.n_seen == 80
    a += b
    np.testing.assert_allclose(a.gradient_sum, u.gradient_sum, atol=1e-12)


def test_merge_definition_in_general_regime():
    rng = np.random.default_rng(6)
    idx = SubsetIndex(4)
    names = list("abcd")
    X, Y, lab = pairs_from(random_monotone_mobius(idx, rng), idx, 100, rng, sigma=0.03)
    a, b = CapacityRDA(names, delta=1e-3), CapacityRDA(names, delta=1e-3)
    a.learn_many(X[:70], Y[:70], lab[:70])
    b.learn_many(X[70:], Y[70:], lab[70:])
    G = a.gradient_sum + b.gradient_sum
    gbar = (70 * (a.gradient_sum / 70) + 30 * (b.gradient_sum / 30)) / 100   # count-weighted average of ḡ's
    np.testing.assert_allclose(G / 100, gbar, atol=1e-15)
    a.merge(b)
    np.testing.assert_allclose(a.mobius, rda_closed_form(gbar, 100, a.gamma, a.l1), atol=1e-14)


def test_merge_refusals():
    names = list("ab")
    with pytest.raises(InvalidParameterError, match="ADMM"):
        CapacityRDA(names, constraints=("monotone",)).merge(CapacityRDA(names, constraints=("monotone",)))
    with pytest.raises(InvalidParameterError, match="different parameters"):
        CapacityRDA(names, gamma=1.0).merge(CapacityRDA(names, gamma=2.0))
    with pytest.raises(InvalidParameterError, match="FOBOS"):
        f = CapacityFOBOS(names)
        f += CapacityFOBOS(names)


# ------------------------------------------------------------------ inputs
def test_bad_inputs_raise_invalid_input_error():
    model = CapacityRDA(["a", "b"])
    with pytest.raises(InvalidInputError, match="'b'"):
        model.learn_one({"a": 0.1}, {"a": 0.2, "b": 0.3}, 1)
    with pytest.raises(InvalidInputError, match="finite"):
        model.learn_one({"a": float("nan"), "b": 0.1}, {"a": 0.2, "b": 0.3}, 1)
    with pytest.raises(InvalidInputError, match=r"\[0, 1\]"):
        model.learn_one({"a": 1.5, "b": 0.1}, {"a": 0.2, "b": 0.3}, 1)
    with pytest.raises(InvalidInputError, match="outcome"):
        model.learn_one({"a": 0.5, "b": 0.1}, {"a": 0.2, "b": 0.3}, 2)
    with pytest.raises(InvalidInputError, match="shape"):
        model.score(np.zeros((3, 3)))
    with pytest.raises(InvalidInputError, match="finite"):
        model.score(np.array([[np.nan, 0.1]]))
    with pytest.raises(InvalidInputError, match="shape"):
        model.learn_many(np.zeros((3, 2)), np.zeros((2, 2)), [1, 1, 1])
    with pytest.raises(InvalidInputError, match="outcomes"):
        model.learn_many(np.zeros((2, 2)), np.zeros((2, 2)), [1, 3])
    assert model.n_seen == 0


def test_bad_parameters_have_house_messages():
    with pytest.raises(InvalidParameterError, match="The 'gamma' parameter of CapacityRDA must be a float in the range"):
        CapacityRDA(["a"], gamma=-1.0)
    with pytest.raises(InvalidParameterError, match="'decreasing'"):
        CapacityRDA(["a"], decreasing=["zz"])
    with pytest.raises(InvalidParameterError, match="'constraints'"):
        CapacityRDA(["a"], constraints=("convex",))
    with pytest.raises(InvalidParameterError, match="'weight'"):
        CapacityRDA(["a"]).learn_one({"a": 0.1}, {"a": 0.2}, 1, weight=0.0)


def test_scaler_and_decreasing_criteria():
    rng = np.random.default_rng(8)
    raw_l, raw_r = rng.random((50, 2)) * [100, 10], rng.random((50, 2)) * [100, 10]
    util = lambda Z: np.minimum(1 - Z[:, 0] / 100, Z[:, 1] / 10)      # cheap and good is better
    lab = np.where(util(raw_l) > util(raw_r), 1, -1)
    a = CapacityRDA(["price", "q"], scaler="minmax", decreasing=["price"])
    b = CapacityRDA(["price", "q"], scaler="minmax", decreasing=["price"])
    for l, r, y in zip(raw_l, raw_r, lab):
        a.learn_one({"price": l[0], "q": l[1]}, {"price": r[0], "q": r[1]}, int(y))
    b.learn_many(raw_l, raw_r, lab)
    np.testing.assert_allclose(a.mobius, b.mobius, atol=1e-13)       # learn_many ≡ learn_one loop
    # less is better: the cheaper item scores higher when quality is equal
    assert a.score_one({"price": 10.0, "q": 5.0}) >= a.score_one({"price": 90.0, "q": 5.0})
    # the decreasing flip equals manual 1 − x on scaled inputs
    lo, hi = a._scaler.lo, a._scaler.hi
    u = (np.array([40.0, 3.0]) - lo) / (hi - lo)
    u[0] = 1 - u[0]
    assert a.score_one({"price": 40.0, "q": 3.0}) == pytest.approx(float(a.index.features(u) @ a.mobius))


# ------------------------------------------------------------------ state, metrics, LP
@pytest.mark.parametrize("kind", ["rda", "admm", "fobos"])
def test_state_round_trip_and_resume(kind):
    rng = np.random.default_rng(9)
    idx = SubsetIndex(3)
    names = ["x", "y", "z"]
    X, Y, lab = pairs_from(random_monotone_mobius(idx, rng), idx, 60, rng, sigma=0.03)
    make = {"rda": lambda: CapacityRDA(names, scaler="minmax", delta=1e-3),
            "admm": lambda: CapacityRDA(names, constraints=("monotone", "supermodular"), delta=1e-3),
            "fobos": lambda: CapacityFOBOS(names, delta=1e-3)}[kind]
    full, half = make(), make()
    full.learn_many(X, Y, lab)
    half.learn_many(X[:30], Y[:30], lab[:30])
    restored = type(half).from_state(load_state(dump_state(half.state_dict())))
    np.testing.assert_array_equal(restored.mobius, half.mobius)
    assert repr(restored) == repr(half)
    restored.learn_many(X[30:], Y[30:], lab[30:])
    np.testing.assert_allclose(restored.mobius, full.mobius, atol=1e-13)
    assert restored.metrics()["regret_proxy"] == pytest.approx(full.metrics()["regret_proxy"], abs=1e-12)
    with pytest.raises(SnapshotError):
        CapacityFOBOS.from_state(CapacityRDA(names).state_dict())


def test_metrics_and_predictions():
    rng = np.random.default_rng(10)
    idx = SubsetIndex(4)
    names = list("abcd")
    X, Y, lab = pairs_from(random_monotone_mobius(idx, rng), idx, 200, rng)
    model = CapacityRDA(names, delta=1e-3)
    assert math.isnan(model.metrics()["regret_proxy"])
    model.learn_many(X, Y, lab)
    mt = model.metrics()
    assert set(mt) >= {"nonzero_masses", "constraint_violation", "regret_proxy"}
    assert mt["nonzero_masses"] == np.count_nonzero(model.mobius)
    assert mt["constraint_violation"] == pytest.approx(
        float(np.square(np.maximum(constraint_matrix(idx) @ model.mobius, 0)).sum()))
    x, y = dict(zip(names, X[0])), dict(zip(names, Y[0]))
    g = model.margin_one(x, y)
    assert g == pytest.approx(model.score_one(x) - model.score_one(y))
    assert model.predict_one(x, y) == (1 if g > 0 else -1)
    p = model.predict_proba_one(x, y)
    assert p[1] + p[-1] == pytest.approx(1.0)
    np.testing.assert_allclose(model.score(X[:5]), idx.features(X[:5]) @ model.mobius, atol=1e-14)


def test_lp_solves_problem_2():
    rng = np.random.default_rng(11)
    idx = SubsetIndex(4)
    X, Y, lab = pairs_from(random_monotone_mobius(idx, rng), idx, 40, rng, sigma=0.05)
    lab[:5] = 0
    D = idx.features(X) - idx.features(Y)
    delta, lam = 0.05, 0.01
    res = solve_lp(D, lab, delta, lam)
    assert res.status == 0
    obj = lambda m: np.mean([hinge_loss(float(d @ m), int(y), delta) for d, y in zip(D, lab)]) + lam * np.abs(m).sum()
    assert obj(res.m) == pytest.approx(res.objective, abs=1e-9)
    for _ in range(50):                         # convex: no perturbation does better
        assert obj(res.m + rng.normal(scale=1e-2, size=idx.d)) >= res.objective - 1e-9
    # monotone-constrained LP satisfies B m ≤ 0
    B = constraint_matrix(idx)
    rc = solve_lp(D, lab, delta, lam, B=B)
    assert (B @ rc.m).max() <= 1e-9 and rc.objective >= res.objective - 1e-12


def test_lp_column_generation_reaches_the_direct_optimum():
    from learners.capacity_solvers import solve_lp_colgen

    rng = np.random.default_rng(12)
    for agg in ("choquet", "multilinear"):
        idx = SubsetIndex(6)
        UL, UR = rng.random((120, 6)), rng.random((120, 6))
        y = rng.choice([-1, 1, 0], size=120, p=[0.45, 0.45, 0.1])
        direct = solve_lp(idx.features(UL, agg) - idx.features(UR, agg), y, 0.01, 0.005)
        cg = solve_lp_colgen(idx, UL, UR, y, 0.01, 0.005, aggregation=agg, add=8)
        assert cg.status == 0 and cg.rounds > 1 and cg.n_columns < idx.d
        assert cg.objective == pytest.approx(direct.objective, rel=1e-7, abs=1e-10)
        assert cg.extra["max_violation"] <= 1e-7


def test_matrix_free_constraint_operator_equals_sparse_B_and_gives_same_admm_run():
    from learners.capacity_constraints import ConstraintOperator

    for n, k in [(3, None), (4, None), (5, 2)]:
        idx = SubsetIndex(n, k)
        cs = ("monotone", "supermodular")
        S = constraint_matrix(idx, cs).toarray()
        B = ConstraintOperator(idx, cs)
        np.testing.assert_array_equal(B.toarray(), S)
        np.testing.assert_array_equal(B.T.toarray(), S.T)
    rng = np.random.default_rng(13)
    idx = SubsetIndex(5)
    names = [f"c{i}" for i in range(5)]
    X, Y, lab = pairs_from(random_monotone_mobius(idx, rng), idx, 120, rng, sigma=0.03)
    a = CapacityRDA(names, constraints=("monotone",), constraint_backend="sparse", delta=1e-3)
    b = CapacityRDA(names, constraints=("monotone",), constraint_backend="implicit", delta=1e-3)
    a.learn_many(X, Y, lab)
    b.learn_many(X, Y, lab)
    assert isinstance(b.constraint_matrix, ConstraintOperator)
    np.testing.assert_allclose(a.mobius, b.mobius, atol=1e-12)
    with pytest.raises(BudgetError):
        CapacityRDA(names, constraints=("monotone",), constraint_backend="sparse", max_nnz=10)
    assert isinstance(CapacityRDA(names, constraints=("monotone",), max_nnz=10).constraint_matrix, ConstraintOperator)


def test_learn_many_fast_path_equals_learn_one_loop_with_indifferences_and_weights():
    rng = np.random.default_rng(14)
    idx = SubsetIndex(4)
    names = list("abcd")
    X, Y, lab = pairs_from(random_monotone_mobius(idx, rng), idx, 90, rng, sigma=0.03)
    lab[::5] = 0
    w = rng.uniform(0.5, 2.0, size=90)
    a, b = CapacityRDA(names, delta=0.002, gamma=20.0), CapacityRDA(names, delta=0.002, gamma=20.0)
    for x, y, l, wi in zip(dicts(X, names), dicts(Y, names), lab, w):
        a.learn_one(x, y, int(l), weight=float(wi))
    b.learn_many(X[:40], Y[:40], lab[:40], weight=w[:40])
    b.learn_many(X[40:], Y[40:], lab[40:], weight=w[40:])
    np.testing.assert_allclose(b.mobius, a.mobius, atol=1e-13)
    np.testing.assert_allclose(b.gradient_sum, a.gradient_sum, atol=1e-13)
    assert b.n_seen == pytest.approx(w.sum()) and b.version == a.version
    assert b.metrics()["avg_online_loss"] == pytest.approx(a.metrics()["avg_online_loss"], rel=1e-9)


def test_constraints_on_too_many_criteria_fail_fast_with_budget_error():
    """26 criteria with monotonicity: a clear BudgetError at construction, not an out-of-memory kill."""
    import time

    from learners.capacity import CapacityRDA
    from learners.exceptions import BudgetError

    t0 = time.perf_counter()
    with pytest.raises(BudgetError, match="Drop the constraints"):
        CapacityRDA([f"c{i}" for i in range(26)], k_additive=2, constraints=["monotone"])
    assert time.perf_counter() - t0 < 5.0
