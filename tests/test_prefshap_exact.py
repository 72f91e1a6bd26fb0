"""Exact product-marginal Pref-SHAP (issue 29 item 1): explainers/prefshap/product.py and exact.py.

Oracles: the value function against its definition (each absent feature drawn independently from its
own marginal over the reference catalog, both items independently, averaged over every combination
through the model's own ``decision_function``); the Shapley values against enumeration of the same value
function over all 2^d coalitions (:func:`explainers._coalitions.exact_shapley`) to 1e-9 at d ≤ 12; at
d = 26 efficiency, skew-symmetry and the null player.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from explainers._coalitions import all_coalitions, exact_shapley
from explainers.prefshap import PrefSHAP
from explainers.distributional import product_value_function
from explainers.prefshap.product import product_game_shapley, product_game_values
from learners.gpm import CGPM, GPM, UPM

PM = "product-marginal"


def _pairs(d, n_items=40, n_pairs=300, seed=0, p=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_items, d))
    X[:, -1] = rng.integers(0, 2, n_items)                       # a binary column, as one-hot features are
    a, b = rng.integers(0, n_items, n_pairs), rng.integers(0, n_items, n_pairs)
    U = rng.normal(size=(n_pairs, p)) if p else None
    s = X @ rng.normal(size=d) + 0.5 * X[:, 0] * X[:, 1 % d]
    y = np.where(s[a] + (0 if U is None else U[:, 0] * X[a, 0]) > s[b] + (0 if U is None else U[:, 0] * X[b, 0]), 1, -1)
    return X, X[a], X[b], U, y


def _fit(kind, d, c=0.0, p=0, M=20, seed=0):
    X, A, B, U, y = _pairs(d, p=p, seed=seed)
    names = [f"f{j}" for j in range(d)]
    kw = dict(penalty=1e-4, lengthscale_multiplier=1.0, n_centres=M, seed=seed)
    if kind == "gpm":
        return X, U, GPM(names, item_constant=c, **kw).fit(A, B, y)
    if kind == "upm":
        return X, U, UPM(names, **kw).fit(A, B, y)
    return X, U, CGPM(names, context_names=[f"u{j}" for j in range(p)], item_constant=c, **kw).fit(A, B, y, U=U)


def _brute_force(model, ref, xl, xr, u=None):
    """ν_S by the definition: absent features of each item drawn independently from the reference's marginals."""
    d = xl.shape[0]
    out = []
    for S in all_coalitions(d):
        absent = np.flatnonzero(~S)
        combos = list(itertools.product(range(ref.shape[0]), repeat=len(absent)))
        Ls, Rs = [], []
        for cl in combos:
            for cr in combos:
                L, R = xl.copy(), xr.copy()
                L[absent] = ref[list(cl), absent]
                R[absent] = ref[list(cr), absent]
                Ls.append(L)
                Rs.append(R)
        Ls, Rs = np.array(Ls), np.array(Rs)
        g = model.decision_function(Ls, Rs) if u is None else model.decision_function(Ls, Rs, np.repeat(u[None], len(Ls), 0))
        out.append(g.mean())
    return np.array(out)


@pytest.mark.parametrize("kind,c", [("gpm", 0.0), ("gpm", 1.0), ("upm", 0.0), ("cgpm", 0.5)])
def test_value_function_is_the_product_marginal_expectation(kind, c):
    X, U, m = _fit(kind, 3, c=c, p=2 if kind == "cgpm" else 0)
    ref = X[:4]
    ps = PrefSHAP(m, reference_items=ref, value_function=PM)
    xl, xr = X[7], X[9]
    u = None if U is None else U[3]
    want = _brute_force(m, ref, xl, xr, u)
    got = ps.coalition_values(all_coalitions(3), xl[None], xr[None], None if u is None else u[None])[:, 0]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-11)
    e = ps.explain_duels(xl[None], xr[None], None if u is None else u[None])
    np.testing.assert_allclose(e.values[0], exact_shapley(want, 3), rtol=0, atol=1e-11)
    np.testing.assert_allclose(e.prediction[0], want[-1], rtol=0, atol=1e-11)


@pytest.mark.parametrize("kind,c", [("gpm", 0.0), ("gpm", 10.0), ("upm", 0.0), ("cgpm", 1.0)])
def test_exact_equals_enumeration_at_d12(kind, c):
    d = 12
    X, U, m = _fit(kind, d, c=c, p=3 if kind == "cgpm" else 0, M=30)
    ps = PrefSHAP(m, reference_items=X, value_function=PM)
    rng = np.random.default_rng(1)
    ia, ib = rng.choice(X.shape[0], 3), rng.choice(X.shape[0], 3)
    XL, XR = X[ia].copy(), X[ib].copy()
    XL[1, :4] = XR[1, :4]                               # duel 1: four equal features, held (φ = 0)
    Uq = None if U is None else U[:3]
    e = ps.explain_duels(XL, XR, Uq)
    C = all_coalitions(d)
    table = ps.coalition_values(C, XL, XR, Uq)           # (2^d, 3)
    for p in range(3):
        held = np.flatnonzero(XL[p] == XR[p])
        act = np.setdiff1d(np.arange(d), held)
        sub = all_coalitions(len(act)).astype(np.int64) @ (1 << act) + int(sum(1 << held))
        want = np.zeros(d)
        want[act] = exact_shapley(table[sub, p], len(act))
        np.testing.assert_allclose(e.values[p], want, rtol=0, atol=1e-9)
        assert list(e.extra["dropped_players"][p]) == [f"f{j}" for j in held]
    g = m.decision_function(XL, XR) if U is None else m.decision_function(XL, XR, Uq)
    np.testing.assert_allclose(e.prediction, g, rtol=0, atol=1e-10)
    np.testing.assert_allclose(e.base_values, 0.0, atol=1e-12)      # ν(∅) = 0 by skew-symmetry


@pytest.mark.parametrize("groups", [None, {"g0": ["f0", "f1", "f2"], "g1": ["f10", "f11", "f12", "f13"]}])
def test_a_batch_each_duel_holding_its_own_players_equals_enumeration(groups):
    """One compiled pass explains duels that hold different players (explainers/prefshap/compiled.py): a player
    held in every duel of the batch (one joint factor), players held in some, and a duel with 13 varying players
    (7 quadrature nodes, whose products run side by side)."""
    d = 14
    X, _, m = _fit("gpm", d, c=1.0, M=25)
    ps = PrefSHAP(m, reference_items=X, value_function=PM, feature_groups=groups)
    pnames, member = ps.players()
    n = len(pnames)
    XL, XR = X[:5].copy(), X[20:25].copy()
    XL[:, 10:14] = XR[:, 10:14] if groups else XL[:, 10:14]
    XL[:, 13] = XR[:, 13]                                        # held in every duel
    XL[1, :3] = XR[1, :3]
    XL[2, 5] = XR[2, 5]
    XL[3, 4:9] = XR[3, 4:9]
    e = ps.explain_duels(XL, XR)
    C = all_coalitions(n).astype(np.int64)
    table = ps.coalition_values((C @ member.astype(np.int64)) > 0, XL, XR)          # (2^n, 5)
    dropped = ((XL == XR).astype(int) @ member.T.astype(int)) == member.sum(axis=1)
    assert (~dropped[0]).sum() == (8 if groups else 13)                          # 13: 7 quadrature nodes
    for p in range(5):
        act = np.flatnonzero(~dropped[p])
        sub = all_coalitions(act.size).astype(np.int64) @ (1 << act) + int(sum(1 << np.flatnonzero(dropped[p])))
        want = np.zeros(n)
        want[act] = exact_shapley(table[sub, p], act.size)
        np.testing.assert_allclose(e.values[p], want, rtol=0, atol=1e-9)
        one = ps.explain_duels(XL[p:p + 1], XR[p:p + 1])
        np.testing.assert_allclose(one.values[0], e.values[p], rtol=0, atol=1e-12)
    np.testing.assert_allclose(e.prediction, m.decision_function(XL, XR), rtol=0, atol=1e-10)


def test_product_game_with_held_players_is_the_smaller_game():
    rng = np.random.default_rng(5)
    d, T = 6, 25
    A, B, W = rng.uniform(0, 1, (T, d)), rng.uniform(0, 1, (T, d)), rng.normal(size=T)
    held = np.array([False, True, False, False, True, False])
    phi, full, empty = product_game_shapley(A, B, W, held)
    act = np.flatnonzero(~held)
    v = product_game_values(A[:, act], B[:, act], W * A[:, held].prod(axis=1), all_coalitions(act.size))
    np.testing.assert_allclose(phi[act], exact_shapley(v, act.size), rtol=0, atol=1e-12)
    np.testing.assert_allclose(phi[held], 0.0, atol=0)
    np.testing.assert_allclose([full, empty], [v[-1], v[0]], rtol=0, atol=1e-12)


def test_feature_groups_are_products_of_their_features():
    d = 8
    X, _, m = _fit("gpm", d, M=25)
    groups = {"g0": ["f0", "f1", "f2"], "g1": ["f5", "f7"]}
    ps = PrefSHAP(m, reference_items=X, value_function=PM, feature_groups=groups)
    pnames, member = ps.players()
    xl, xr = X[3], X[11]
    e = ps.explain_duels(xl[None], xr[None])
    C = all_coalitions(len(pnames))
    v = ps.coalition_values((C.astype(int) @ member.astype(int)) > 0, xl[None], xr[None])[:, 0]
    np.testing.assert_allclose(e.values[0], exact_shapley(v, len(pnames)), rtol=0, atol=1e-10)


def test_contexts_exact_equal_enumeration():
    X, U, m = _fit("cgpm", 4, c=0.0, p=5, M=25)
    ps = PrefSHAP(m, reference_items=X, reference_contexts=U[:60], value_function=PM)
    XL, XR, Uq = X[:2], X[5:7], U[:2]
    e = ps.explain_duel_contexts(Uq, XL, XR)
    alpha, Xi = m.alpha_, ps._xi(ps._engine(), XL, XR).cpu().numpy()      # (M, P)
    prod = ps._product()
    for p in range(2):
        A, B, W = prod.context_terms(np.asarray(m.transform_context(Uq[p:p + 1]))[0], alpha * Xi[:, p])
        v = product_game_values(A, B, W, all_coalitions(5))
        np.testing.assert_allclose(e.values[p], exact_shapley(v, 5), rtol=0, atol=1e-10)
        np.testing.assert_allclose(e.prediction[p], m.decision_function(XL[p:p + 1], XR[p:p + 1], Uq[p:p + 1])[0],
                                   rtol=0, atol=1e-10)
    avg = ps.explain_contexts(Uq, XL, XR)
    np.testing.assert_allclose(avg.values.sum(1) + avg.base_values, avg.prediction, atol=1e-10)


def test_items_are_the_mean_over_opponents():
    X, _, m = _fit("gpm", 5, M=15)
    ps = PrefSHAP(m, reference_items=X[:10], value_function=PM)
    opp = X[20:24]
    e = ps.explain_items(X[:2], opp)
    for p in range(2):
        C = all_coalitions(5)
        v = ps.coalition_values(C, np.repeat(X[p:p + 1], 4, 0), opp).mean(axis=1)
        np.testing.assert_allclose(e.values[p], exact_shapley(v, 5), rtol=0, atol=1e-10)


@pytest.fixture(scope="module")
def wide():
    d = 26
    X, _, m = _fit("gpm", d, c=1.0, M=40)
    return X, m


def test_efficiency_skew_symmetry_at_d26(wide):
    X, m = wide
    ps = PrefSHAP(m, reference_items=X, value_function=PM)
    XL, XR = X[:6], X[6:12]
    e = ps.explain_duels(XL, XR)
    g = m.decision_function(XL, XR)
    np.testing.assert_allclose(e.values.sum(axis=1), g - e.base_values, rtol=0, atol=1e-10)   # Σφ = ν(Ω) − ν(∅)
    np.testing.assert_allclose(e.prediction, g, rtol=0, atol=1e-10)
    np.testing.assert_allclose(e.base_values, 0.0, atol=1e-12)
    sw = ps.explain_duels(XR, XL)
    np.testing.assert_allclose(sw.values, -e.values, rtol=0, atol=1e-12)
    assert np.abs(e.values).max() > 1e-3                                   # a real game, not all zeros


def test_null_player_at_d26(wide):
    X, m = wide
    j = 4
    m2 = GPM.from_state(m.state_dict())
    m2.lengthscales_ = m2.lengthscales_.copy()
    m2.lengthscales_[j] = 1e9                   # k_j ≡ 1: the model ignores feature j
    ps = PrefSHAP(m2, reference_items=X, value_function=PM)
    e = ps.explain_duels(X[:5], X[5:10])
    assert np.all(X[:5, j] != X[5:10, j])       # not held: a genuine null player of the game
    np.testing.assert_allclose(e.values[:, j], 0.0, atol=1e-12)
    np.testing.assert_allclose(e.values.sum(axis=1), m2.decision_function(X[:5], X[5:10]), atol=1e-10)


def test_product_game_with_zero_factors_matches_enumeration():
    rng = np.random.default_rng(3)
    d, T = 7, 30
    A, B, W = rng.uniform(0, 1, (T, d)), rng.uniform(0, 1, (T, d)), rng.normal(size=T)
    A[0, 2] = 0.0
    B[3, 5] = 0.0                                  # zeros: the products are division-free
    phi, full, empty = product_game_shapley(A, B, W)
    v = product_game_values(A, B, W, all_coalitions(d))
    np.testing.assert_allclose(phi, exact_shapley(v, d), rtol=0, atol=1e-12)
    np.testing.assert_allclose([full, empty], [v[-1], v[0]], rtol=0, atol=1e-12)


@pytest.mark.parametrize("d", [1, 2, 5, 9])
def test_product_game_table_equals_coalition_values(d):
    from explainers.prefshap.product import product_game_table

    rng = np.random.default_rng(d)
    A, B, W = rng.uniform(0, 1, (40, d)), rng.uniform(0, 1, (40, d)), rng.normal(size=40)
    np.testing.assert_allclose(product_game_table(A, B, W), product_game_values(A, B, W, all_coalitions(d)),
                               rtol=0, atol=1e-12)


def test_grouped_product_terms_are_the_feature_game_on_groups():
    """product_terms on players (groups): the same value function as the features' with whole groups switched."""
    d = 7
    X, _, m = _fit("gpm", d, c=1.0, M=20)
    ps = PrefSHAP(m, reference_items=X, value_function=PM)
    member = np.array([[1, 1, 0, 0, 0, 0, 0], [0, 0, 1, 0, 0, 0, 0], [0, 0, 0, 1, 1, 1, 0], [0, 0, 0, 0, 0, 0, 1]], bool)
    grouped = product_value_function(*ps.product_terms(X[1], X[2], member=member))
    feats = product_value_function(*ps.product_terms(X[1], X[2]))
    C = all_coalitions(4)
    np.testing.assert_allclose(grouped(C), feats((C.astype(int) @ member.astype(int)) > 0), rtol=0, atol=1e-12)


def test_concat_baseline_refuses_the_product_marginal_value_function():
    from learners.exceptions import InvalidInputError

    X, _, m = _fit("gpm", 3, M=10)
    with pytest.raises(InvalidInputError, match="value_function='observational'"):
        PrefSHAP(m, reference_items=X, value_function=PM).explain_concat_duels(X[:2], X[2:4])
