"""Pref-SHAP (Hu, Chau et al. 2022, Section 3): invariants and an independent brute-force oracle.

The models explained here are small stand-ins with exactly the fitted attributes of
``learners.gpm.GPM/CGPM/UPM`` (dense kernel ridge on the k_E / k_E^U / utility kernels, centres =
training pairs), so these tests do not depend on the kernel-methods engineer's code.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from explainers._coalitions import all_coalitions, exact_shapley
from explainers._result import Explanation
from explainers.exceptions import InvalidInputError, InvalidParameterError, NotFittedError
from explainers.prefshap import (
    PrefSHAP,
    explain_concat_duels,
    explain_contexts,
    explain_duel_contexts,
    explain_duels,
    explain_items,
    explain_upm_duels,
    preferential_value_function,
)


# ----------------------------------------------------------------------------- stand-in models
def _k(A, B, ls):
    """Product RBF kernel on scaled features, (len(A), len(B))."""
    A = np.atleast_2d(A) / ls
    B = np.atleast_2d(B) / ls
    return np.exp(-0.5 * ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1))


class StandInGPM:
    """GPM stand-in: g(a,b) = Σ α_m [k(a,cl)k(b,cr) − k(a,cr)k(b,cl)], kernel ridge on ±1 labels."""

    model_name = "gpm"

    def __init__(self, feature_names, lengthscales, reg=1e-2):
        self.feature_names = list(feature_names)
        self.lengthscales_ = np.asarray(lengthscales, float)
        self.reg = reg
        self.model_version = 3

    def _fit_scaler(self, X):
        self.mu_ = X.mean(axis=0)
        sd = X.std(axis=0)
        self.sd_ = np.where(sd > 0, sd, 1.0)

    def transform(self, X):
        return (np.asarray(X, float) - self.mu_) / self.sd_

    def _terms(self, L, R):
        ls = self.lengthscales_
        return _k(L, self.centres_left_, ls) * _k(R, self.centres_right_, ls) - \
            _k(L, self.centres_right_, ls) * _k(R, self.centres_left_, ls)

    def fit(self, XL, XR, y):
        self._fit_scaler(np.concatenate([XL, XR]))
        L, R = self.transform(XL), self.transform(XR)
        self.centres_left_, self.centres_right_ = L, R
        K = self._terms(L, R)
        self.alpha_ = np.linalg.solve(K + self.reg * np.eye(len(y)), np.asarray(y, float))
        return self

    def decision_function(self, XL, XR):
        return self._terms(self.transform(XL), self.transform(XR)) @ self.alpha_


class StandInCGPM(StandInGPM):
    """C-GPM stand-in: g_U(u,a,b) = Σ α_m k_U(u,u_m)[…]."""

    model_name = "cgpm"

    def __init__(self, feature_names, lengthscales, context_names, context_lengthscales, reg=1e-2):
        super().__init__(feature_names, lengthscales, reg)
        self.context_names = list(context_names)
        self.context_lengthscales_ = np.asarray(context_lengthscales, float)

    def transform_context(self, U):
        return (np.asarray(U, float) - self.umu_) / self.usd_

    def fit(self, XL, XR, y, U):
        self._fit_scaler(np.concatenate([XL, XR]))
        self.umu_, self.usd_ = U.mean(0), np.where(U.std(0) > 0, U.std(0), 1.0)
        L, R, Us = self.transform(XL), self.transform(XR), self.transform_context(U)
        self.centres_left_, self.centres_right_, self.centres_context_ = L, R, Us
        K = _k(Us, Us, self.context_lengthscales_) * self._terms(L, R)
        self.alpha_ = np.linalg.solve(K + self.reg * np.eye(len(y)), np.asarray(y, float))
        return self

    def decision_function(self, XL, XR, U):
        kU = _k(self.transform_context(U), self.centres_context_, self.context_lengthscales_)
        return (kU * self._terms(self.transform(XL), self.transform(XR))) @ self.alpha_


class StandInUPM(StandInGPM):
    """UPM stand-in: f(x) = Σ α_m [k(x,cl_m) − k(x,cr_m)], g(a,b) = f(a) − f(b)."""

    model_name = "upm"

    def utility(self, X):
        Xs = self.transform(X)
        ls = self.lengthscales_
        return (_k(Xs, self.centres_left_, ls) - _k(Xs, self.centres_right_, ls)) @ self.alpha_

    def fit(self, XL, XR, y):
        self._fit_scaler(np.concatenate([XL, XR]))
        L, R = self.transform(XL), self.transform(XR)
        self.centres_left_, self.centres_right_ = L, R
        ls = self.lengthscales_
        F = lambda A: _k(A, L, ls) - _k(A, R, ls)
        K = F(L) - F(R)                                  # Gram of f(a)-f(b) features
        self.alpha_ = np.linalg.solve(K + self.reg * np.eye(len(y)), np.asarray(y, float))
        return self

    def decision_function(self, XL, XR):
        return self.utility(XL) - self.utility(XR)


def make_items(n=40, d=4, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d))


def make_duels(items, m=80, seed=1):
    rng = np.random.default_rng(seed)
    i, j = rng.integers(0, len(items), m), rng.integers(0, len(items), m)
    keep = i != j
    XL, XR = items[i[keep]], items[j[keep]]
    # unrankable truth: a linear part plus a skew-symmetric cross term
    g = (XL[:, 0] - XR[:, 0]) + 1.5 * (XL[:, 1] * XR[:, 2] - XL[:, 2] * XR[:, 1])
    return XL, XR, np.where(g > 0, 1.0, -1.0)


NAMES = ["f0", "f1", "f2", "f3"]


@pytest.fixture(scope="module")
def data():
    items = make_items()
    XL, XR, y = make_duels(items)
    return items, XL, XR, y


@pytest.fixture(scope="module")
def gpm(data):
    items, XL, XR, y = data
    return StandInGPM(NAMES, [1.2, 1.0, 1.0, 1.5]).fit(XL, XR, y)


# ----------------------------------------------------------------------------- brute-force oracle
def cme_weights(Xref_s, x_s, ls, S, reg, normalize=True):
    """β^S(x) = (K_S + nλI)^{-1} k_S(X, x), written out independently in numpy (scaled units);
    divided by its sum when ``normalize`` (the explainer's default)."""
    n = len(Xref_s)
    cols = list(S)
    if cols:
        K = _k(Xref_s[:, cols], Xref_s[:, cols], ls[cols])
        kx = _k(Xref_s[:, cols], x_s[None, cols], ls[cols])[:, 0]
    else:                                   # the empty product kernel is 1
        K, kx = np.ones((n, n)), np.ones(n)
    b = np.linalg.solve(K + n * reg * np.eye(n), kx)
    return b / b.sum() if normalize else b


def brute_value(model, Xref_raw, xl, xr, S, reg, normalize=True):
    """Σ_i Σ_j β_i(x^ℓ) β_j(x^r) g(hybrid(x^ℓ, X_i), hybrid(x^r, X_j)) with model.decision_function.

    hybrid(x, X_i) keeps x on S and takes X_i on S^c: the reference draw of Definition 3.1.
    """
    Xs = model.transform(Xref_raw)
    ls = model.lengthscales_
    bl = cme_weights(Xs, model.transform(xl[None])[0], ls, S, reg, normalize)
    br = cme_weights(Xs, model.transform(xr[None])[0], ls, S, reg, normalize)
    n = len(Xref_raw)
    cols = list(S)
    HL = Xref_raw.copy(); HL[:, cols] = xl[cols]
    HR = Xref_raw.copy(); HR[:, cols] = xr[cols]
    ii, jj = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    G = model.decision_function(HL[ii.ravel()], HR[jj.ravel()]).reshape(n, n)
    return float(bl @ G @ br)


# ----------------------------------------------------------------------------- tests
def test_value_function_matches_bruteforce_hybrid_expectation(data, gpm):
    """ν̂_S of Prop. 3.2 equals E[g | X_S] computed from the same CME weights on hybrid items.

    This pins down the pairing of the four cross terms of k_E: the left item meets the left
    centre and the right item the right centre in the first product, swapped in the second.
    """
    items, XL, XR, _ = data
    ref = items[:15]
    reg = 1e-2
    d = ref.shape[1]
    Z = all_coalitions(d)
    est = preferential_value_function(gpm, Z, XL[:3], XR[:3], reference_items=ref, cme_reg=reg, max_reference=100)
    for p in range(3):
        for z in Z[[0, 1, 5, 6, 9, 14, 15]]:
            S = tuple(np.flatnonzero(z))
            want = brute_value(gpm, np.unique(ref, axis=0), XL[p], XR[p], S, reg)
            got = est[int(sum(1 << j for j in S)), p]
            assert got == pytest.approx(want, rel=1e-8, abs=1e-10), (p, S)


def test_literal_paper_estimator_matches_unnormalised_bruteforce(data, gpm):
    """normalize_cme=False is Prop. 3.2 verbatim for every S (∅ and Ω included)."""
    items, XL, XR, _ = data
    ref = items[:12]
    Z = all_coalitions(4)
    est = preferential_value_function(gpm, Z, XL[:2], XR[:2], reference_items=ref, cme_reg=1e-2,
                                      normalize_cme=False)
    for p in range(2):
        for code in (0, 3, 12, 15):
            S = tuple(np.flatnonzero(Z[code]))
            want = brute_value(gpm, np.unique(ref, axis=0), XL[p], XR[p], S, 1e-2, normalize=False)
            assert est[code, p] == pytest.approx(want, rel=1e-8, abs=1e-12), (p, S)
    e = explain_duels(gpm, XL[:5], XR[:5], reference_items=ref, normalize_cme=False)
    assert e.additivity_error().max() < 1e-10             # efficiency w.r.t. the estimated ν(Ω)


def test_wrong_cross_term_pairing_would_be_detected(data, gpm):
    """The oracle discriminates: taking the S^c part of a cross term from the other centre
    (k_S(c^r, x^ℓ) with the CME against c^ℓ) gives a different ν than Prop. 3.2's pairing."""
    items, XL, XR, _ = data
    ref = np.unique(items[:15], axis=0)
    S, Sc = [0, 2], [1, 3]
    want = brute_value(gpm, ref, XL[0], XR[0], tuple(S), 1e-2)
    Xs, ls = gpm.transform(ref), gpm.lengthscales_

    def gamma(C_S, C_Sc, x):
        xs = gpm.transform(x[None])
        bx = cme_weights(Xs, xs[0], ls, tuple(S), 1e-2)
        return _k(C_S[:, S], xs[:, S], ls[S])[:, 0] * (_k(C_Sc[:, Sc], Xs[:, Sc], ls[Sc]) @ bx)

    cl, cr, a = gpm.centres_left_, gpm.centres_right_, gpm.alpha_
    right = a @ (gamma(cl, cl, XL[0]) * gamma(cr, cr, XR[0]) - gamma(cr, cr, XL[0]) * gamma(cl, cl, XR[0]))
    wrong = a @ (gamma(cl, cl, XL[0]) * gamma(cr, cr, XR[0]) - gamma(cr, cl, XL[0]) * gamma(cl, cr, XR[0]))
    assert right == pytest.approx(want, rel=1e-9)
    assert abs(wrong - want) > 1e-3 * max(1.0, abs(want))


def test_efficiency_and_prediction(data, gpm):
    items, XL, XR, _ = data
    e = explain_duels(gpm, XL[:20], XR[:20], reference_items=items)
    assert isinstance(e, Explanation) and e.method == "pref-shap"
    assert e.values.shape == (20, 4)
    np.testing.assert_allclose(e.prediction, gpm.decision_function(XL[:20], XR[:20]), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(e.base_values, 0.0, atol=1e-12)
    assert e.additivity_error().max() < 1e-10
    assert e.extra["exact"].all() and (e.extra["coalitions"] == 16).all()       # per duel
    assert e.model_version == 3 and e.model_name == "gpm"
    np.testing.assert_allclose(e.data, XL[:20] - XR[:20])


def test_exact_shapley_equals_definition_on_value_function(data, gpm):
    """φ equals Eq. 3 applied to the value function (independently enumerated)."""
    items, XL, XR, _ = data
    Z = all_coalitions(4)
    v = preferential_value_function(gpm, Z, XL[:4], XR[:4], reference_items=items)
    e = explain_duels(gpm, XL[:4], XR[:4], reference_items=items)
    perms = list(itertools.permutations(range(4)))
    code = lambda S: sum(1 << j for j in S)
    for p in range(4):
        phi = np.zeros(4)
        for perm in perms:
            S = []
            for j in perm:
                phi[j] += v[code(S + [j]), p] - v[code(S), p]
                S.append(j)
        np.testing.assert_allclose(e.values[p], phi / len(perms), atol=1e-12)


def test_skew_symmetry(data, gpm):
    items, XL, XR, _ = data
    a = explain_duels(gpm, XL[:15], XR[:15], reference_items=items)
    b = explain_duels(gpm, XR[:15], XL[:15], reference_items=items)
    np.testing.assert_allclose(a.values, -b.values, atol=1e-12)
    np.testing.assert_allclose(a.prediction, -b.prediction, atol=1e-12)


def test_identical_items_give_zero(data, gpm):
    items, XL, _, _ = data
    e = explain_duels(gpm, XL[:5], XL[:5], reference_items=items)
    np.testing.assert_allclose(e.values, 0.0, atol=1e-14)
    np.testing.assert_allclose(e.prediction, 0.0, atol=1e-14)


def test_ignored_feature_gets_zero(data):
    items, XL, XR, y = data
    m = StandInGPM(NAMES, [1.0, 1.0, 1.0, 1e9]).fit(XL, XR, y)     # k_3 ≡ 1: g ignores f3
    e = explain_duels(m, XL[:20], XR[:20], reference_items=items)
    assert np.abs(e.values[:, 3]).max() < 1e-9 * max(1.0, np.abs(e.values).max())
    assert np.abs(e.values[:, :3]).max() > 1e-3
    assert e.additivity_error().max() < 1e-10


def test_constant_feature_removed(data, gpm):
    items, XL, XR, _ = data
    XL2, XR2 = XL[:10].copy(), XR[:10].copy()
    XL2[:, 1] = 0.3
    XR2[:, 1] = 0.3
    e = explain_duels(gpm, XL2, XR2, reference_items=items)
    assert all(dp == ["f1"] for dp in e.extra["dropped_players"])     # per duel
    assert (e.extra["coalitions"] == 8).all()                # 2^(d_eff) with d_eff = 3
    np.testing.assert_allclose(e.values[:, 1], 0.0, rtol=0, atol=1e-12)
    assert e.additivity_error().max() < 1e-10
    np.testing.assert_allclose(e.base_values, 0.0, atol=1e-12)
    np.testing.assert_allclose(e.prediction, gpm.decision_function(XL2, XR2), rtol=1e-10)


def test_sampled_coalitions_converge_to_exact(data):
    items6 = make_items(n=30, d=6, seed=3)
    XL, XR, y = make_duels(items6, m=60, seed=4)
    m = StandInGPM([f"x{i}" for i in range(6)], np.ones(6) * 1.3).fit(XL, XR, y)
    exact = explain_duels(m, XL[:8], XR[:8], reference_items=items6)
    assert exact.extra["exact"].all() and "stderr" not in exact.extra
    errs = []
    for budget in (12, 30, 63):
        runs = [explain_duels(m, XL[:8], XR[:8], reference_items=items6, max_coalitions=budget, random_state=s)
                for s in range(4)]
        assert all(not r.extra["exact"].any() for r in runs)
        for r in runs:
            assert r.additivity_error().max() < 1e-10          # efficiency is a constraint
            assert r.extra["estimator"] == "kernel-shap" and np.asarray(r.extra["stderr"]).shape == (8, 6)
        errs.append(np.mean([np.abs(r.values - exact.values).max() for r in runs]))
    assert errs[0] > errs[1] > errs[2]
    # 63 = all but one proper coalition … and with all 2^6 coalitions the WLS is exact
    assert errs[2] < 0.5 * errs[0]
    full = PrefSHAP(m, items6, max_coalitions=64)
    full.max_coalitions = 64
    from explainers._coalitions import CoalitionPlan, all_coalitions as allc, constrained_wls, shapley_kernel_weights
    Z = allc(6)
    v = full.coalition_values(Z, XL[:8], XR[:8])
    inner = Z[1:-1]
    wls = constrained_wls(inner, v[1:-1] - v[0], shapley_kernel_weights(inner.sum(1), 6), v[-1] - v[0])
    np.testing.assert_allclose(wls, exact.values, atol=1e-9)


def test_outcome_orients_winner_loser(data, gpm):
    items, XL, XR, y = data
    e = explain_duels(gpm, XL[:10], XR[:10], reference_items=items)
    o = explain_duels(gpm, XL[:10], XR[:10], reference_items=items, outcome=y[:10])
    np.testing.assert_allclose(o.values, e.values * y[:10, None], atol=1e-14)
    np.testing.assert_allclose(o.data, (XL[:10] - XR[:10]) * y[:10, None])
    assert o.additivity_error().max() < 1e-10


def test_a_tie_is_not_oriented_and_the_record_says_so(data, gpm):
    """Issue 12, finding 9: an outcome of 0 has no winner; values stay left-vs-right and extra agrees."""
    items, XL, XR, y = data
    plain = explain_duels(gpm, XL[:4], XR[:4], reference_items=items)
    tie = explain_duels(gpm, XL[:1], XR[:1], reference_items=items, outcome=[0])
    assert tie.extra["oriented"] == "left-right"
    np.testing.assert_allclose(tie.values, plain.values[:1], atol=1e-14)
    mixed_y = np.array([1, 0, -1, 0])
    mixed = explain_duels(gpm, XL[:4], XR[:4], reference_items=items, outcome=mixed_y)
    assert mixed.extra["oriented"] == ["winner-loser", "left-right", "winner-loser", "left-right"]
    np.testing.assert_allclose(mixed.values, plain.values * np.where(mixed_y == 0, 1, mixed_y)[:, None], atol=1e-14)
    recs = mixed.to_records(instance_ids=["a", "b", "c", "d"])
    assert [r["extra"]["oriented"] for r in recs] == mixed.extra["oriented"]
    for r, yy, row in zip(recs, mixed_y, range(4)):    # data = x_winner − x_loser only where there is a winner
        want = (XL[row] - XR[row]) * (yy if yy else 1)
        np.testing.assert_allclose(r["data"], want)


def test_items_task_is_mean_of_duels(data, gpm):
    items, _, _, _ = data
    X = items[:3]
    opp = items[10:25]
    e = explain_items(gpm, X, opponents=opp, reference_items=items)
    for i in range(3):
        duels = explain_duels(gpm, np.repeat(X[i:i + 1], len(opp), 0), opp, reference_items=items)
        np.testing.assert_allclose(e.values[i], duels.values.mean(axis=0), atol=1e-12)
        assert e.prediction[i] == pytest.approx(gpm.decision_function(np.repeat(X[i:i + 1], len(opp), 0), opp).mean())
    assert e.additivity_error().max() < 1e-10


def test_upm_prefshap_equals_utility_shap_difference(data):
    items, XL, XR, y = data
    upm = StandInUPM(NAMES, [1.0, 1.0, 1.0, 1.0]).fit(XL, XR, y)
    a = explain_duels(upm, XL[:10], XR[:10], reference_items=items)
    b = explain_upm_duels(upm, XL[:10], XR[:10], reference_items=items)
    assert b.method == "upm-shap"
    np.testing.assert_allclose(a.values, b.values, atol=1e-12)
    np.testing.assert_allclose(b.prediction, upm.utility(XL[:10]) - upm.utility(XR[:10]), rtol=1e-10)
    assert b.additivity_error().max() < 1e-10
    # the UPM value function is the brute-force hybrid expectation too
    ref = np.unique(items[:12], axis=0)
    v = preferential_value_function(upm, all_coalitions(4)[[3, 10]], XL[:1], XR[:1], reference_items=ref, cme_reg=1e-2)
    for row, S in zip(v[:, 0], [(0, 1), (1, 3)]):
        assert row == pytest.approx(brute_value(upm, ref, XL[0], XR[0], S, 1e-2), rel=1e-8)


def test_upm_baseline_rejects_gpm(data, gpm):
    items, XL, XR, _ = data
    with pytest.raises(InvalidInputError, match="UPM"):
        explain_upm_duels(gpm, XL[:2], XR[:2], reference_items=items)


def test_concat_baseline_efficiency_and_asymmetry(data, gpm):
    items, XL, XR, _ = data
    e = explain_concat_duels(gpm, XL[:6], XR[:6], reference_duels=(XL, XR), max_coalitions=256)
    assert e.method == "concat-shap" and e.values.shape == (6, 8)
    assert e.feature_names[:2] == ["f0(l)", "f1(l)"] and e.feature_names[4] == "f0(r)"
    assert e.additivity_error().max() < 1e-9
    np.testing.assert_allclose(e.prediction, gpm.decision_function(XL[:6], XR[:6]), rtol=1e-10)
    # the same feature gets two different attributions on the two sides (the pathology of App. B)
    assert np.abs(e.values[:, :4] - e.values[:, 4:]).max() > 1e-3


@pytest.fixture(scope="module")
def cgpm_data():
    rng = np.random.default_rng(7)
    items = make_items(n=30, d=3, seed=8)
    XL, XR, _ = make_duels(items, m=70, seed=9)
    U = rng.normal(size=(len(XL), 2))
    g = np.where(U[:, 0] > 0, XL[:, 0] - XR[:, 0], XR[:, 1] - XL[:, 1])
    y = np.where(g > 0, 1.0, -1.0)
    m = StandInCGPM(["a", "b", "c"], [1.0, 1.0, 1.0], ["u0", "u1"], [1.0, 1e9]).fit(XL, XR, y, U)
    return items, XL, XR, U, m


def test_cgpm_items_with_and_without_context(cgpm_data):
    items, XL, XR, U, m = cgpm_data
    e = explain_duels(m, XL[:8], XR[:8], U[:8], reference_items=items)
    np.testing.assert_allclose(e.prediction, m.decision_function(XL[:8], XR[:8], U[:8]), rtol=1e-10)
    assert e.additivity_error().max() < 1e-10
    avg = explain_duels(m, XL[:8], XR[:8], reference_items=items, reference_contexts=U)
    gbar = np.mean([m.decision_function(XL[:8], XR[:8], np.repeat(u[None], 8, 0)) for u in np.unique(U, axis=0)], axis=0)
    np.testing.assert_allclose(avg.prediction, gbar, rtol=1e-9)
    assert avg.additivity_error().max() < 1e-10


def test_context_value_function_and_null_context(cgpm_data):
    items, XL, XR, U, m = cgpm_data
    e = explain_duel_contexts(m, U[:10], XL[:10], XR[:10], reference_items=items, reference_contexts=U)
    assert e.method == "pref-shap-context" and e.feature_names == ["u0", "u1"]
    np.testing.assert_allclose(e.prediction, m.decision_function(XL[:10], XR[:10], U[:10]), rtol=1e-10)
    assert e.additivity_error().max() < 1e-10
    assert np.abs(e.values[:, 1]).max() < 1e-9 * max(1.0, np.abs(e.values[:, 0]).max())   # ℓ_u1 = ∞
    # ν(∅') = ḡ over the reference contexts (Prop. 3.3 with β = 1/n)
    uref = np.unique(U, axis=0)
    gbar = np.mean([m.decision_function(XL[:10], XR[:10], np.repeat(u[None], 10, 0)) for u in uref], axis=0)
    np.testing.assert_allclose(e.base_values, gbar, rtol=1e-9)
    # brute force for S' = {u0}: Σ_i β_i(u) g_U({u_0, U_i,1}, x^ℓ, x^r)
    Us, lsu = m.transform_context(uref), m.context_lengthscales_
    reg = 1e-3
    b = cme_weights(Us, m.transform_context(U[:1])[0], lsu, (0,), reg)
    H = uref.copy(); H[:, 0] = U[0, 0]
    want = b @ m.decision_function(np.repeat(XL[:1], len(H), 0), np.repeat(XR[:1], len(H), 0), H)
    ex = PrefSHAP(m, items, U)
    from explainers.prefshap import _Engine
    eng = ex._engine()
    v = ex._context_values(np.array([[True, False]]), U[:1], ex._xi(eng, XL[:1], XR[:1]), eng, np.array([0]))
    assert v[0, 0] == pytest.approx(want, rel=1e-8)


def test_contexts_on_average(cgpm_data):
    items, XL, XR, U, m = cgpm_data
    e = explain_contexts(m, U[:4], XL, XR, reference_items=items, reference_contexts=U)
    assert e.values.shape == (4, 2) and e.method == "pref-shap-context"
    ex = PrefSHAP(m, items, U)
    from explainers.prefshap import _Engine
    eng = ex._engine()
    Z = all_coalitions(2)
    per_duel = ex._context_values(Z, np.repeat(U[:4], len(XL), 0), ex._xi(eng, np.tile(XL, (4, 1)), np.tile(XR, (4, 1))),
                                  eng, np.arange(4 * len(XL)))
    for t in range(4):
        want = m.decision_function(XL, XR, np.repeat(U[t:t + 1], len(XL), 0)).mean()
        assert e.prediction[t] == pytest.approx(want, rel=1e-9)
        v = per_duel[:, t * len(XL):(t + 1) * len(XL)].mean(axis=1)       # Table 1 row 4: mean of ν
        np.testing.assert_allclose(e.values[t], exact_shapley(v, 2), atol=1e-10)
    assert e.additivity_error().max() < 1e-10


def test_cg_solver_matches_cholesky(data, gpm):
    items, XL, XR, _ = data
    a = explain_duels(gpm, XL[:6], XR[:6], reference_items=items, solver="cholesky")
    b = explain_duels(gpm, XL[:6], XR[:6], reference_items=items, solver="cg")
    np.testing.assert_allclose(a.values, b.values, atol=1e-6)


def test_interventional_value_function_is_marginal_expectation(data, gpm):
    items, XL, XR, _ = data
    ref = np.unique(items[:10], axis=0)
    v = preferential_value_function(gpm, np.array([[1, 0, 1, 0]], bool), XL[:1], XR[:1], reference_items=ref,
                                    value_function="interventional")
    HL = ref.copy(); HL[:, [0, 2]] = XL[0, [0, 2]]
    HR = ref.copy(); HR[:, [0, 2]] = XR[0, [0, 2]]
    n = len(ref)
    ii, jj = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    want = gpm.decision_function(HL[ii.ravel()], HR[jj.ravel()]).mean()
    assert v[0, 0] == pytest.approx(want, rel=1e-9)


def test_feature_groups(data, gpm):
    items, XL, XR, _ = data
    e = explain_duels(gpm, XL[:5], XR[:5], reference_items=items, feature_groups={"g12": ["f1", "f2"]})
    assert e.feature_names == ["f0", "g12", "f3"]
    assert e.additivity_error().max() < 1e-10
    np.testing.assert_allclose(e.data[:, 1], (XL[:5, 1] - XR[:5, 1]) + (XL[:5, 2] - XR[:5, 2]))
    with pytest.raises(InvalidInputError, match="unknown feature"):
        explain_duels(gpm, XL[:2], XR[:2], reference_items=items, feature_groups={"g": ["nope"]})


def test_memory_chunking_gives_same_values(data, gpm):
    items, XL, XR, _ = data
    a = explain_duels(gpm, XL[:10], XR[:10], reference_items=items)
    b = explain_duels(gpm, XL[:10], XR[:10], reference_items=items, max_memory_mb=0.2)
    np.testing.assert_allclose(a.values, b.values, atol=1e-12)


def test_records_roundtrip(data, gpm):
    items, XL, XR, _ = data
    e = explain_duels(gpm, XL[:2], XR[:2], reference_items=items)
    recs = e.to_records(["a", "b"])
    back = Explanation.from_record(recs[1])
    np.testing.assert_allclose(back.values, e.values[1])
    assert back.method == "pref-shap" and back.model_version == 3


def test_bad_inputs_raise(data, gpm):
    items, XL, XR, y = data
    bad = XL[:3].copy(); bad[0, 0] = np.nan
    with pytest.raises(InvalidInputError, match="NaN"):
        explain_duels(gpm, bad, XR[:3], reference_items=items)
    with pytest.raises(InvalidInputError, match="shape"):
        explain_duels(gpm, XL[:3, :3], XR[:3, :3], reference_items=items)
    with pytest.raises(InvalidInputError, match="same shape"):
        explain_duels(gpm, XL[:3], XR[:4], reference_items=items)
    with pytest.raises(InvalidInputError, match="outcome"):
        explain_duels(gpm, XL[:3], XR[:3], reference_items=items, outcome=[1, 2, 1])
    with pytest.raises(InvalidInputError, match="no context"):
        explain_duels(gpm, XL[:3], XR[:3], U=np.zeros((3, 1)), reference_items=items)
    with pytest.raises(InvalidInputError, match="C-GPM"):
        explain_duel_contexts(gpm, np.zeros((3, 1)), XL[:3], XR[:3], reference_items=items)
    with pytest.raises(InvalidParameterError, match="cme_reg"):
        explain_duels(gpm, XL[:3], XR[:3], reference_items=items, cme_reg=-1.0)
    with pytest.raises(InvalidParameterError, match="solver"):
        explain_duels(gpm, XL[:3], XR[:3], reference_items=items, solver="lu")
    with pytest.raises(NotFittedError, match="Fit"):
        explain_duels(StandInGPM(NAMES, np.ones(4)), XL[:3], XR[:3])


def test_plots_render_from_explanation(tmp_path, data, gpm):
    from explainers import plots

    items, XL, XR, y = data
    e = explain_duels(gpm, XL[:30], XR[:30], reference_items=items, outcome=y[:30])
    ax = plots.bar(e)
    heights = sorted((p.get_width() for p in ax.patches), reverse=True)
    np.testing.assert_allclose(heights, sorted(e.mean_abs().values(), reverse=True))
    ax2 = plots.beeswarm(e)
    assert [t.get_text() for t in ax2.get_yticklabels()][::-1] == list(e.mean_abs())
    xs = np.concatenate([c.get_offsets()[:, 0] for c in ax2.collections])
    np.testing.assert_allclose(np.sort(xs), np.sort(e.values.ravel()))
    path = tmp_path / "summary.png"
    plots.summary(e, path=str(path))
    assert path.stat().st_size > 5000
    with pytest.raises(InvalidInputError):
        plots.bar({"values": [1.0]})


def test_real_gpm_cgpm_upm_from_learners():
    """Integration with learners.gpm (fixed hyper-parameters, tiny fits)."""
    gpm_mod = pytest.importorskip("learners.gpm")
    rng = np.random.default_rng(11)
    A, B = rng.normal(size=(150, 3)), rng.normal(size=(150, 3))
    U = rng.normal(size=(150, 2))
    y = np.where(A[:, 0] - B[:, 0] + A[:, 1] * B[:, 2] - A[:, 2] * B[:, 1] > 0, 1, -1)
    kw = dict(penalty=1e-4, lengthscale_multiplier=1.0, n_centres=40)
    m = gpm_mod.GPM(["a", "b", "c"], **kw).fit(A, B, y)
    e = explain_duels(m, A[:10], B[:10], reference_items=np.concatenate([A, B]))
    np.testing.assert_allclose(e.prediction, m.decision_function(A[:10], B[:10]), rtol=1e-8, atol=1e-10)
    assert e.additivity_error().max() < 1e-9 and e.model_version == m.model_version
    c = gpm_mod.CGPM(["a", "b", "c"], ["u0", "u1"], **kw).fit(A, B, y, U)
    ec = explain_duels(c, A[:5], B[:5], U[:5], reference_items=np.concatenate([A, B]))
    np.testing.assert_allclose(ec.prediction, c.decision_function(A[:5], B[:5], U[:5]), rtol=1e-8, atol=1e-10)
    ex = explain_duel_contexts(c, U[:5], A[:5], B[:5], reference_contexts=U)
    assert ex.additivity_error().max() < 1e-9 and ex.feature_names == ["u0", "u1"]
    u = gpm_mod.UPM(["a", "b", "c"], **kw).fit(A, B, y)
    eu = explain_upm_duels(u, A[:5], B[:5], reference_items=np.concatenate([A, B]))
    np.testing.assert_allclose(eu.prediction, u.utility(A[:5]) - u.utility(B[:5]), rtol=1e-8, atol=1e-10)


def test_large_batches_are_split_into_blocks(data, gpm):
    items, XL, XR, _ = data
    a = explain_duels(gpm, XL, XR, reference_items=items)
    b = explain_duels(gpm, XL, XR, reference_items=items, max_memory_mb=2.0)   # forces several duel blocks
    np.testing.assert_allclose(a.values, b.values, atol=1e-12)
    from explainers.exceptions import BudgetError
    with pytest.raises(BudgetError, match="max_memory_mb"):
        explain_duels(gpm, XL, XR, reference_items=items, max_memory_mb=0.01)
