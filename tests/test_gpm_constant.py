"""The item kernel (c + k_RBF)/√(1+c) of GPM / C-GPM: pair kernel (k_E + c·k_UPM)/(1+c) (issue 14 item 4).

The pair kernel against its literal definition, skew-symmetry and positive semi-definiteness; the
fitted model is the kernel expansion; GPM ⊇ UPM (a GPM with c > 0 can represent any UPM f(a) − f(b));
the constant is selected with λ and m; states with and without the constant round-trip, and a
state written before the constant existed (no ``item_constant`` entry) loads as the pure k_E model.
"""

import numpy as np
import pytest
import torch

from learners.exceptions import InvalidParameterError, SnapshotError
from learners.gpm import CGPM, GPM, UPM
from learners.kernels import PairKernel, context_pref_kernel, pref_kernel, rbf_np, utility_pair_kernel
from learners.state import dump_state, load_state

FIX = dict(penalty=1e-4, lengthscale_multiplier=1.0)


@pytest.fixture(scope="module")
def duels():
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(300, 3)), rng.normal(size=(300, 3))
    u = lambda X: X[:, 0] + 0.5 * np.tanh(X[:, 1])            # noqa: E731 — a utility (transitive) truth
    return A, B, np.where(u(A) > u(B), 1, -1)


def test_constant_pair_kernel_is_the_literal_product_and_psd():
    rng = np.random.default_rng(1)
    XL, XR, CL, CR = (rng.normal(size=(6, 3)) for _ in range(4))
    U, CU = rng.normal(size=(6, 2)), rng.normal(size=(6, 2))
    ls, lsu, c = np.array([0.7, 1.3, 2.0]), np.array([0.5, 1.5]), 2.5
    k = lambda A, B: (c + rbf_np(A, B, ls)) / np.sqrt(1 + c)   # noqa: E731
    lit = k(XL, CL) * k(XR, CR) - k(XL, CR) * k(XR, CL)
    np.testing.assert_allclose(pref_kernel(XL, XR, CL, CR, ls, c), lit, atol=1e-12)
    np.testing.assert_allclose(pref_kernel(XL, XR, CL, CR, ls, c),
                               (pref_kernel(XL, XR, CL, CR, ls) + c * utility_pair_kernel(XL, XR, CL, CR, ls)) / (1 + c),
                               atol=1e-12)
    np.testing.assert_allclose(context_pref_kernel(XL, XR, U, CL, CR, CU, ls, lsu, c), rbf_np(U, CU, lsu) * lit, atol=1e-12)
    t = torch.tensor
    for kind, ref, Z1, Z2 in [("gpm", lit, np.c_[XL, XR], np.c_[CL, CR]),
                              ("cgpm", rbf_np(U, CU, lsu) * lit, np.c_[XL, XR, U], np.c_[CL, CR, CU])]:
        kern = PairKernel(kind, t(ls), t(lsu) if kind == "cgpm" else None, c)
        np.testing.assert_allclose(kern(t(Z1), t(Z2)).numpy(), ref, atol=1e-12)
        np.testing.assert_allclose(kern.to(torch.float32, "cpu")(t(Z1).float(), t(Z2).float()).numpy(), ref, atol=1e-5)
    np.testing.assert_allclose(pref_kernel(XR, XL, CL, CR, ls, c), -lit, atol=1e-12)
    np.testing.assert_allclose(pref_kernel(XL, XL, CL, CR, ls, c), 0.0, atol=1e-12)
    K = pref_kernel(XL, XR, XL, XR, ls, c)
    assert np.allclose(K, K.T) and np.linalg.eigvalsh(K).min() > -1e-10
    with pytest.raises(InvalidParameterError):
        PairKernel("gpm", t(ls), None, -1.0)
    with pytest.raises(InvalidParameterError):
        PairKernel("upm", t(ls), None, 1.0)


def test_fitted_gpm_with_constant_is_the_kernel_expansion(duels):
    A, B, y = duels
    m = GPM(["a", "b", "c"], item_constant=1.5, **FIX).fit(A, B, y)
    assert m.item_constant_ == 1.5
    g = pref_kernel(m.transform(A[:20]), m.transform(B[:20]), m.centres_left_, m.centres_right_, m.lengthscales_, 1.5) @ m.alpha_
    k = lambda X, C: (1.5 + rbf_np(m.transform(X), C, m.lengthscales_)) / np.sqrt(2.5)   # noqa: E731
    lit = (k(A[:20], m.centres_left_) * k(B[:20], m.centres_right_) - k(A[:20], m.centres_right_) * k(B[:20], m.centres_left_))
    np.testing.assert_allclose(lit @ m.alpha_, g, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(m.decision_function(A[:20], B[:20]), g, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(m.decision_function(B, A), -m.decision_function(A, B), atol=1e-12)


def test_gpm_with_constant_contains_upm(duels):
    """GPM ⊇ UPM: as c grows the pair kernel (k_E + c·k_UPM)/(1+c) tends to k_UPM, so at the same λ
    and centres the GPM tends to the UPM; on a utility truth it fits at least as well as pure k_E."""
    A, B, y = duels
    from learners.metrics import roc_auc
    kw = dict(penalty=1e-3, lengthscale_multiplier=1.0, n_centres=80)
    upm = UPM(**kw).fit(A, B, y)
    big = GPM(item_constant=1e4, **kw).fit(A, B, y)
    gu, gb = upm.decision_function(A, B), big.decision_function(A, B)
    assert np.corrcoef(gu, gb)[0, 1] > 0.99
    pure = GPM(item_constant=0.0, **kw).fit(A, B, y)
    assert roc_auc(y, gb) >= roc_auc(y, pure.decision_function(A, B)) - 0.01


def test_constant_is_selected_and_recorded(duels):
    A, B, y = duels
    m = GPM(item_constant="auto", constant_grid=(0.0, 1.0), penalty="auto", penalty_grid=(1e-3, 1e-5),
            lengthscale_multiplier=1.0).fit(A, B, y)
    assert {r["constant"] for r in m.cv_results_} == {0.0, 1.0} and len(m.cv_results_) == 4
    best = max(m.cv_results_, key=lambda r: (r["val_auc"], -r["val_log_loss"]))
    assert (m.item_constant_, m.penalty_) == (best["constant"], best["penalty"])
    with pytest.raises(InvalidParameterError):
        GPM(item_constant=-1.0).fit(A, B, y)
    with pytest.raises(InvalidParameterError):
        UPM(item_constant=1.0).fit(A, B, y)


def test_states_round_trip_and_old_states_load(duels):
    A, B, y = duels
    U = np.random.default_rng(2).normal(size=(A.shape[0], 1))
    for m, args in [(GPM(item_constant=0.5, **FIX).fit(A, B, y), ()),
                    (CGPM(context_names=["u"], item_constant=0.5, **FIX).fit(A, B, y, U), (U,))]:
        st = load_state(dump_state(m.state_dict()))
        assert st["meta"]["item_constant"] == 0.5
        m2 = type(m).from_state(st)
        assert m2.item_constant_ == 0.5
        np.testing.assert_allclose(m2.decision_function(A, B, *args), m.decision_function(A, B, *args), rtol=1e-12)
    # a snapshot written before the constant existed: no "item_constant" in meta → pure k_E
    old = GPM(item_constant=0.0, **FIX).fit(A, B, y)   # the kernel of snapshots written before the constant
    st = old.state_dict()
    del st["meta"]["item_constant"]
    m3 = GPM.from_state(load_state(dump_state(st)))
    assert m3.item_constant_ == 0.0
    np.testing.assert_allclose(m3.decision_function(A, B), old.decision_function(A, B), rtol=1e-12)
    bad = GPM(**FIX).fit(A, B, y).state_dict()
    bad["meta"]["item_constant"] = -1.0
    with pytest.raises(SnapshotError):
        GPM.from_state(bad)


def test_merge_pools_parts_only_with_the_same_constant():
    """stream/plugins/gpm_merge: the ensemble Σ w_k g_k is one GPM only if the item kernels agree (same c)."""
    from learners.refit import RefittingGPM
    from stream.plugins.gpm_merge import merge_gpm

    rng = np.random.default_rng(0)
    XL, XR = rng.normal(size=(200, 2)), rng.normal(size=(200, 2))
    y = np.where(XL[:, 0] > XR[:, 0], 1, -1)

    def part(c, n):
        lr = RefittingGPM(["a", "b"], refit_every=None, min_train=50, drift=False,
                          model_params={"penalty": 1e-4, "lengthscale_multiplier": 1.0, "max_centres": 30, "item_constant": c})
        for i in range(n):
            lr.learn_one(dict(a=XL[i, 0], b=XL[i, 1]), dict(a=XR[i, 0], b=XR[i, 1]), int(y[i]))
        lr.refit()
        return lr

    p1, p2 = part(1.0, 200), part(1.0, 200)       # same data → same scaler and length-scales
    A, B = rng.normal(size=(15, 2)), rng.normal(size=(15, 2))
    merged = merge_gpm([(p1, 120), (p2, 80)])
    want = (120 * p1.model.decision_function(A, B) + 80 * p2.model.decision_function(A, B)) / 200
    np.testing.assert_allclose(merged.model.decision_function(A, B), want, rtol=1e-8, atol=1e-10)
    p3 = part(10.0, 200)
    fallback = merge_gpm([(p1, 120), (p3, 80)])
    np.testing.assert_allclose(fallback.model.decision_function(A, B), p1.model.decision_function(A, B))
