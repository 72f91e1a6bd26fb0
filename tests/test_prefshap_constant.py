"""Pref-SHAP for a GPM whose item kernel has a constant term, (c + k_RBF)/√(1+c) (pair kernel (k_E + c·k_UPM)/(1+c)).

The value function is checked against the independent brute-force oracle of ``tests/test_prefshap.py``
(Σ_i Σ_j β_i β_j g(hybrids), model.decision_function on hybrid items) to 1e-8, for the normalised
CME and for Hu, Chau et al. (2022) Prop. 3.2 verbatim; then efficiency, skew-symmetry, null player,
the C-GPM context value function (Prop. 3.3) and a real ``learners.gpm.GPM(item_constant=…)``.
"""

from __future__ import annotations

import numpy as np
import pytest

from explainers._coalitions import all_coalitions
from explainers.exceptions import InvalidInputError
from explainers.prefshap import (
    PrefSHAP,
    explain_concat_duels,
    explain_duel_contexts,
    explain_duels,
    explain_items,
    preferential_value_function,
)
from tests.test_prefshap import NAMES, StandInCGPM, StandInGPM, _k, brute_value, make_duels, make_items

C = 0.7


class ConstGPM(StandInGPM):
    """g(a,b) = Σ α_m [k_c(a,cl)k_c(b,cr) − k_c(a,cr)k_c(b,cl)], k_c = (c + k)/√(1+c), written out literally."""

    item_constant_ = C

    def _terms(self, L, R):
        ls, c = self.lengthscales_, self.item_constant_
        k = lambda A, B: (c + _k(A, B, ls)) / np.sqrt(1 + c)   # noqa: E731
        return k(L, self.centres_left_) * k(R, self.centres_right_) - k(L, self.centres_right_) * k(R, self.centres_left_)


class ConstCGPM(StandInCGPM):
    item_constant_ = C
    _terms = ConstGPM._terms


@pytest.fixture(scope="module")
def data():
    items = make_items()
    XL, XR, y = make_duels(items)
    return items, XL, XR, y


@pytest.fixture(scope="module")
def gpm(data):
    items, XL, XR, y = data
    return ConstGPM(NAMES, [1.2, 1.0, 1.0, 1.5]).fit(XL, XR, y)


@pytest.mark.parametrize("normalize", [True, False])
def test_value_function_matches_bruteforce_with_constant(data, gpm, normalize):
    """ν̂_S = Σ_m α_m [(cΣβ(x^ℓ) + Γ_S(c^ℓ_m,x^ℓ))(cΣβ(x^r) + Γ_S(c^r_m,x^r)) − …]/(1+c) equals the oracle."""
    items, XL, XR, _ = data
    ref = items[:15]
    Z = all_coalitions(4)
    est = preferential_value_function(gpm, Z, XL[:3], XR[:3], reference_items=ref, cme_reg=1e-2,
                                      normalize_cme=normalize)
    for p in range(3):
        for code in range(16):
            S = tuple(np.flatnonzero(Z[code]))
            want = brute_value(gpm, np.unique(ref, axis=0), XL[p], XR[p], S, 1e-2, normalize=normalize)
            assert est[code, p] == pytest.approx(want, rel=1e-8, abs=1e-10), (p, S, normalize)


def test_the_constant_term_is_not_negligible(data, gpm):
    """The oracle discriminates: dropping the c·Σβ terms (the pure-k_E value function) is far off."""
    items, XL, XR, _ = data
    ref = np.unique(items[:15], axis=0)
    S = (0, 2)
    want = brute_value(gpm, ref, XL[0], XR[0], S, 1e-2)
    pure = StandInGPM(NAMES, gpm.lengthscales_)
    pure.__dict__.update({k: v for k, v in gpm.__dict__.items()})
    est_pure = preferential_value_function(pure, all_coalitions(4), XL[:1], XR[:1], reference_items=ref, cme_reg=1e-2)
    assert abs(est_pure[5, 0] - want) > 1e-3 * max(1.0, abs(want))


def test_efficiency_skew_symmetry_null_player(data, gpm):
    items, XL, XR, y = data
    e = explain_duels(gpm, XL[:20], XR[:20], reference_items=items)
    np.testing.assert_allclose(e.prediction, gpm.decision_function(XL[:20], XR[:20]), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(e.base_values, 0.0, atol=1e-12)
    assert e.additivity_error().max() < 1e-10
    b = explain_duels(gpm, XR[:20], XL[:20], reference_items=items)
    np.testing.assert_allclose(e.values, -b.values, atol=1e-12)
    same = explain_duels(gpm, XL[:5], XL[:5], reference_items=items)
    np.testing.assert_allclose(same.values, 0.0, atol=1e-13)
    m = ConstGPM(NAMES, [1.0, 1.0, 1.0, 1e9]).fit(XL, XR, y)          # k_3 ≡ 1: g ignores f3
    e = explain_duels(m, XL[:20], XR[:20], reference_items=items)
    assert np.abs(e.values[:, 3]).max() < 1e-9 * max(1.0, np.abs(e.values).max())
    assert e.additivity_error().max() < 1e-10


def test_items_task_and_solvers(data, gpm):
    items, XL, XR, _ = data
    X, O = items[:3], items[10:16]
    e = explain_items(gpm, X, opponents=O, reference_items=items)
    per = [explain_duels(gpm, np.repeat(X[i:i + 1], len(O), 0), O, reference_items=items).values.mean(0) for i in range(3)]
    np.testing.assert_allclose(e.values, np.array(per), atol=1e-10)
    a = explain_duels(gpm, XL[:6], XR[:6], reference_items=items)
    b = explain_duels(gpm, XL[:6], XR[:6], reference_items=items, solver="cg")
    np.testing.assert_allclose(a.values, b.values, atol=1e-6)
    ex = PrefSHAP(gpm, items)                         # the factor cache (second call) gives the same values
    np.testing.assert_allclose(ex.explain_duels(XL[:6], XR[:6]).values, ex.explain_duels(XL[:6], XR[:6]).values, atol=1e-12)
    with pytest.raises(InvalidInputError, match="item_constant"):
        explain_concat_duels(gpm, XL[:2], XR[:2])


def test_cgpm_with_constant_items_and_contexts():
    rng = np.random.default_rng(3)
    items = make_items(30, 3, seed=4)
    XL, XR, y = make_duels(items, 60, seed=5)
    U = rng.normal(size=(len(y), 2))
    m = ConstCGPM(NAMES[:3], [1.0, 1.2, 0.9], ["u0", "u1"], [1.0, 1.0]).fit(XL, XR, y, U)
    e = explain_duels(m, XL[:8], XR[:8], U=U[:8], reference_items=items)
    np.testing.assert_allclose(e.prediction, m.decision_function(XL[:8], XR[:8], U[:8]), rtol=1e-10, atol=1e-12)
    assert e.additivity_error().max() < 1e-10
    c = explain_duel_contexts(m, U[:8], XL[:8], XR[:8], reference_contexts=U)
    np.testing.assert_allclose(c.prediction, m.decision_function(XL[:8], XR[:8], U[:8]), rtol=1e-10, atol=1e-12)
    assert c.additivity_error().max() < 1e-10
    # ν(∅') = ḡ = mean over the reference contexts of g_U (the context value function at the empty set)
    Uref = np.unique(U, axis=0)
    gbar = np.array([m.decision_function(np.repeat(XL[i:i + 1], len(Uref), 0), np.repeat(XR[i:i + 1], len(Uref), 0),
                                         Uref).mean() for i in range(8)])
    np.testing.assert_allclose(c.base_values, gbar, rtol=1e-8, atol=1e-10)


def test_real_gpm_with_constant_is_explained_exactly():
    from learners.gpm import GPM

    items = make_items(40, 3, seed=7)
    XL, XR, y = make_duels(items, 200, seed=8)
    m = GPM(NAMES[:3], penalty=1e-4, lengthscale_multiplier=1.0, item_constant=1.0).fit(XL, XR, y)
    assert m.item_constant_ == 1.0
    ref = items[:12]
    Z = all_coalitions(3)
    est = preferential_value_function(m, Z, XL[:2], XR[:2], reference_items=ref, cme_reg=1e-2)
    for p in range(2):
        for code in (0, 1, 3, 6, 7):
            S = tuple(np.flatnonzero(Z[code]))
            want = brute_value(m, np.unique(ref, axis=0), XL[p], XR[p], S, 1e-2)
            assert est[code, p] == pytest.approx(want, rel=1e-8, abs=1e-10), (p, S)
    e = explain_duels(m, XL[:10], XR[:10], reference_items=items)
    np.testing.assert_allclose(e.prediction, m.decision_function(XL[:10], XR[:10]), rtol=1e-9, atol=1e-11)
    assert e.additivity_error().max() < 1e-9


def test_property_efficiency_and_skew_symmetry_for_any_constant():
    """Hypothesis: for any c ≥ 0 and random duels, ν(Ω) = g, ν(∅) = 0, Σφ = g and φ(b, a) = −φ(a, b)."""
    from hypothesis import given, settings, strategies as st

    items = make_items(25, 3, seed=11)
    XL, XR, y = make_duels(items, 50, seed=12)

    @settings(max_examples=15, deadline=None)
    @given(c=st.floats(0.0, 50.0), seed=st.integers(0, 10_000))
    def check(c, seed):
        cls = type("G", (ConstGPM,), {"item_constant_": c})
        m = cls(NAMES[:3], [1.0, 1.3, 0.8]).fit(XL, XR, y)
        idx = np.random.default_rng(seed).integers(0, len(y), 4)
        e = explain_duels(m, XL[idx], XR[idx], reference_items=items)
        g = m.decision_function(XL[idx], XR[idx])
        scale = max(1.0, np.abs(g).max())
        np.testing.assert_allclose(e.prediction, g, rtol=1e-9, atol=1e-10 * scale)
        np.testing.assert_allclose(e.base_values, 0.0, atol=1e-10 * scale)
        assert e.additivity_error().max() < 1e-9 * scale
        b = explain_duels(m, XR[idx], XL[idx], reference_items=items)
        np.testing.assert_allclose(e.values, -b.values, atol=1e-10 * scale)

    check()
