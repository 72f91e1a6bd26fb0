"""FALKON against closed forms (Rudi et al. 2017) and an independent logistic oracle (scikit-learn)."""

import numpy as np
import pytest
import torch

from learners.exceptions import InvalidInputError, InvalidParameterError, NotFittedError
from learners.falkon import Falkon, KnMOperator, conjugate_gradient, default_n_centres
from learners.kernels import PairKernel, rbf


@pytest.fixture
def reg():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(240, 3, generator=g, dtype=torch.float64)
    y = torch.sign(X[:, 0] * X[:, 1] + 0.3 * X[:, 2])
    ls = torch.tensor([1.0, 1.2, 0.8], dtype=torch.float64)
    return X, y, (lambda a, b: rbf(a, b, ls))


def test_full_centres_equal_exact_krr(reg):
    X, y, k = reg
    n, lam = X.shape[0], 1e-4
    m = Falkon(k, penalty=lam, n_centres=n, tol=1e-14, max_iter=300).fit(X, y)
    K = k(X, X)
    alpha = torch.linalg.solve(K + lam * n * torch.eye(n, dtype=K.dtype), y)
    exact = K @ alpha
    pred = m.predict(X)
    assert float((pred - exact).norm() / exact.norm()) < 1e-6
    Xt = torch.randn(50, 3, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    e2 = k(Xt, X) @ alpha
    assert float((m.predict(Xt) - e2).norm() / e2.norm()) < 1e-6


@pytest.mark.parametrize("block_size,cache", [(17, 0), (None, 2**30)])
def test_nystrom_krr_equals_closed_form(reg, block_size, cache):
    X, y, k = reg
    n, lam, M = X.shape[0], 1e-3, 40
    m = Falkon(k, penalty=lam, n_centres=M, tol=1e-14, max_iter=300, block_size=block_size, cache_bytes=cache).fit(X, y)
    C = m.centres_
    assert C.shape == (M, 3)
    KnM, KMM = k(X, C), k(C, C)
    alpha = torch.linalg.pinv(KnM.T @ KnM + lam * n * KMM, hermitian=True) @ (KnM.T @ y)
    assert float((m.alpha_ - alpha).norm() / alpha.norm()) < 1e-6


def test_logistic_matches_sklearn_on_nystrom_features(reg):
    from sklearn.linear_model import LogisticRegression

    X, y, k = reg
    n, lam, M = X.shape[0], 1e-3, 40
    m = Falkon(k, penalty=lam, n_centres=M, loss="logistic", tol=1e-13, max_iter=300, newton_final=8).fit(X, y)
    C = m.centres_
    KnM, KMM = k(X, C), k(C, C)
    # Nyström features Φ = K_nM T⁻¹ with K_MM = TᵀT: f = Φ w, w = T α, ‖w‖² = αᵀ K_MM α.
    # (1/n) Σ log(1+e^{−y f}) + (λ/2)‖w‖²  ⇔  sklearn's ½‖w‖² + C Σ log(...), C = 1 / (λ n).
    T = torch.linalg.cholesky(KMM).T
    Phi = KnM @ torch.linalg.inv(T)
    lr = LogisticRegression(C=1.0 / (lam * n), fit_intercept=False, tol=1e-12, max_iter=20000).fit(Phi.numpy(), y.numpy())
    f_ref = lr.decision_function(Phi.numpy())
    f = (KnM @ m.alpha_).numpy()
    assert np.max(np.abs(f - f_ref)) < 1e-4 * np.max(np.abs(f_ref))
    assert 0.5 < np.mean(np.sign(f) == y.numpy())


def test_float32_close_to_float64(reg):
    X, y, k = reg
    m64 = Falkon(k, penalty=1e-3, n_centres=40, tol=1e-12, max_iter=300).fit(X, y)
    m32 = Falkon(k, penalty=1e-3, n_centres=40, tol=1e-6, max_iter=300, dtype="float32").fit(X, y)
    assert m32.alpha_.dtype == torch.float32
    p64, p32 = m64.predict(X), m32.predict(X).double()
    assert float((p64 - p32).norm() / p64.norm()) < 1e-3


def test_deterministic_given_seed(reg):
    X, y, k = reg
    a = Falkon(k, penalty=1e-3, n_centres=30, seed=3).fit(X, y)
    b = Falkon(k, penalty=1e-3, n_centres=30, seed=3).fit(X, y)
    c = Falkon(k, penalty=1e-3, n_centres=30, seed=4).fit(X, y)
    assert torch.equal(a.alpha_, b.alpha_) and torch.equal(a.centres_, b.centres_)
    assert not torch.equal(a.centres_, c.centres_)


def test_pair_kernel_and_operator_products():
    rng = np.random.default_rng(2)
    Z = torch.tensor(rng.normal(size=(60, 4)))
    C = Z[:9]
    k = PairKernel("gpm", torch.tensor([1.0, 2.0]))
    u, w = torch.tensor(rng.normal(size=9)), torch.tensor(rng.uniform(size=60))
    K = k(Z, C)
    for cache in (0, 2**30):
        op = KnMOperator(k, Z, C, block_size=7, cache_bytes=cache)
        np.testing.assert_allclose(op.mv(u).numpy(), (K @ u).numpy(), rtol=1e-12)
        np.testing.assert_allclose(op.rmv(w).numpy(), (K.T @ w).numpy(), rtol=1e-12)
        np.testing.assert_allclose(op.gram_mv(u, w).numpy(), (K.T @ (w * (K @ u))).numpy(), rtol=1e-10)


def test_conjugate_gradient_solves_spd():
    rng = np.random.default_rng(3)
    A = rng.normal(size=(20, 20))
    A = torch.tensor(A @ A.T + 20 * np.eye(20))
    b = torch.tensor(rng.normal(size=20))
    x, it = conjugate_gradient(lambda v: A @ v, b, max_iter=100, tol=1e-13)
    np.testing.assert_allclose((A @ x).numpy(), b.numpy(), atol=1e-9)
    assert 0 < it <= 21


def test_default_centres_grow_as_sqrt_n():
    assert default_n_centres(10_000, 10.0) == 1000
    assert default_n_centres(40_000, 10.0) == 2000
    assert default_n_centres(50, 10.0) == 50


def test_bad_input_and_parameters(reg):
    X, y, k = reg
    with pytest.raises(InvalidInputError):
        Falkon(k).fit(X[:0], y[:0])
    Xn = X.clone()
    Xn[3, 1] = float("nan")
    with pytest.raises(InvalidInputError):
        Falkon(k).fit(Xn, y)
    with pytest.raises(InvalidInputError):
        Falkon(k).fit(X, y[:-1])
    with pytest.raises(InvalidInputError):
        Falkon(k, loss="logistic").fit(X, y * 0.5)
    with pytest.raises(InvalidParameterError):
        Falkon(k, penalty=-1.0).fit(X, y)
    with pytest.raises(InvalidParameterError):
        Falkon(k, loss="hinge").fit(X, y)
    with pytest.raises(NotFittedError):
        Falkon(k).predict(X)
    m = Falkon(k, n_centres=10).fit(X, y)
    with pytest.raises(InvalidInputError):
        m.predict(X[:, :2])


def test_rank_deficient_centres_use_the_range_of_kmm():
    # duplicated centres make K_MM singular: the eigen-based preconditioner keeps the Nyström closed form
    g = torch.Generator().manual_seed(1)
    X = torch.randn(150, 2, generator=g, dtype=torch.float64)
    y = torch.sign(X[:, 0])
    k = lambda a, b: rbf(a, b, torch.tensor([1.0, 1.0], dtype=torch.float64))  # noqa: E731
    C = torch.cat([X[:20], X[:20]], 0)
    assert Falkon._kmm_factor(k(C, C))[0] == "eig"
    assert Falkon._kmm_factor(k(X[:20], X[:20]))[0] == "chol"
    lam, n = 1e-3, 150
    m = Falkon(k, penalty=lam, tol=1e-14, max_iter=300).fit(X, y, centres=C)
    KnM, KMM = k(X, C), k(C, C)
    alpha = torch.linalg.pinv(KnM.T @ KnM + lam * n * KMM, hermitian=True) @ (KnM.T @ y)
    np.testing.assert_allclose((KnM @ m.alpha_).numpy(), (KnM @ alpha).numpy(), rtol=1e-6, atol=1e-8)
    m32 = Falkon(k, penalty=lam, loss="logistic", dtype="float32").fit(X, y, centres=C)
    assert np.mean(np.sign(m32.predict(X).numpy()) == y.numpy()) > 0.9
