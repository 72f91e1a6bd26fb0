"""Product RBF and pair kernels against direct definitions (Hu, Chau et al. 2022, Section 2.1)."""

import numpy as np
import pytest
import torch

from learners.exceptions import InvalidInputError, InvalidParameterError
from learners.kernels import (PairKernel, context_pref_kernel, kernel_matvec, median_heuristic, pref_kernel, rbf, rbf_np,
                              utility_pair_kernel)


def _k(x, y, ls):
    return float(np.prod(np.exp(-((x - y) ** 2) / (2 * ls**2))))


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(7, 3)), rng.normal(size=(7, 3)), rng.normal(size=(5, 3)), rng.normal(size=(5, 3)), np.array([0.7, 1.3, 2.0])


def test_rbf_matches_product_definition(data):
    X, _, Y, _, ls = data
    K = rbf_np(X, Y, ls)
    ref = np.array([[_k(x, y, ls) for y in Y] for x in X])
    np.testing.assert_allclose(K, ref, rtol=1e-12)
    Kt = rbf(torch.tensor(X), torch.tensor(Y), torch.tensor(ls))
    assert isinstance(Kt, torch.Tensor) and Kt.dtype == torch.float64
    np.testing.assert_allclose(Kt.numpy(), ref, rtol=1e-12)


def test_pair_kernels_match_definitions(data):
    XL, XR, CL, CR, ls = data
    rng = np.random.default_rng(1)
    U, CU, lsu = rng.normal(size=(7, 2)), rng.normal(size=(5, 2)), np.array([0.5, 1.5])
    KE = pref_kernel(XL, XR, CL, CR, ls)
    KC = context_pref_kernel(XL, XR, U, CL, CR, CU, ls, lsu)
    KU = utility_pair_kernel(XL, XR, CL, CR, ls)
    for i in range(7):
        for m in range(5):
            e = _k(XL[i], CL[m], ls) * _k(XR[i], CR[m], ls) - _k(XL[i], CR[m], ls) * _k(XR[i], CL[m], ls)
            assert KE[i, m] == pytest.approx(e, abs=1e-12)
            assert KC[i, m] == pytest.approx(_k(U[i], CU[m], lsu) * e, abs=1e-12)
            u = _k(XL[i], CL[m], ls) + _k(XR[i], CR[m], ls) - _k(XL[i], CR[m], ls) - _k(XR[i], CL[m], ls)
            assert KU[i, m] == pytest.approx(u, abs=1e-12)
    # packed PairKernel gives the same matrices
    t = torch.tensor
    for kind, ref, Z1, Z2 in [("gpm", KE, np.c_[XL, XR], np.c_[CL, CR]), ("upm", KU, np.c_[XL, XR], np.c_[CL, CR]),
                              ("cgpm", KC, np.c_[XL, XR, U], np.c_[CL, CR, CU])]:
        k = PairKernel(kind, t(ls), t(lsu) if kind == "cgpm" else None)
        np.testing.assert_allclose(k(t(Z1), t(Z2)).numpy(), ref, atol=1e-12)


def test_pair_kernels_are_skew_symmetric_in_pair_order(data):
    XL, XR, CL, CR, ls = data
    for f in (pref_kernel, utility_pair_kernel):
        np.testing.assert_allclose(f(XR, XL, CL, CR, ls), -f(XL, XR, CL, CR, ls), atol=1e-14)
        np.testing.assert_allclose(f(XL, XR, CR, CL, ls), -f(XL, XR, CL, CR, ls), atol=1e-14)
    # k_E vanishes on a pair of identical items
    np.testing.assert_allclose(pref_kernel(XL, XL, CL, CR, ls), 0.0, atol=1e-14)


def test_pref_kernel_is_positive_semidefinite(data):
    XL, XR, _, _, ls = data
    K = pref_kernel(XL, XR, XL, XR, ls)
    assert np.allclose(K, K.T)
    assert np.linalg.eigvalsh(K).min() > -1e-12


def test_blockwise_matvec_equals_dense(data):
    XL, XR, CL, CR, ls = data
    k = PairKernel("gpm", torch.tensor(ls))
    Z, C = torch.tensor(np.c_[XL, XR]), torch.tensor(np.c_[CL, CR])
    v = torch.arange(5, dtype=torch.float64)
    np.testing.assert_allclose(kernel_matvec(k, Z, C, v, block_size=2).numpy(), (k(Z, C) @ v).numpy(), rtol=1e-12)


def test_median_heuristic_handles_binary_and_constant_columns():
    X = np.c_[np.arange(10.0), np.r_[np.zeros(8), np.ones(2)], np.full(10, 3.0)]
    h = median_heuristic(X)
    assert h[0] == pytest.approx(np.median([abs(i - j) for i in range(10) for j in range(i + 1, 10)]))
    assert h[1] == pytest.approx(1.0) and h[2] == 1.0


def test_bad_input_raises(data):
    X, _, Y, _, ls = data
    with pytest.raises(InvalidInputError):
        rbf_np(X, Y[:, :2], ls)
    with pytest.raises(InvalidInputError):
        rbf_np(X[0], Y, ls)
    with pytest.raises(InvalidParameterError):
        rbf_np(X, Y, np.array([1.0, 0.0, 1.0]))
    with pytest.raises(InvalidParameterError):
        PairKernel("nope", torch.tensor(ls))
