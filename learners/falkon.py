"""FALKON: Nyström kernel ridge regression / logistic regression by preconditioned CG, in torch.

Implements the method of Rudi, Carratino & Rosasco (2017, "FALKON: an optimal large scale kernel
method", Alg. 1) as engineered by Meanti et al. (2020, Hu, Chau et al. 2022, ref. [42]) and its logistic
extension by approximate Newton steps over a decreasing penalty list (Marteau-Ferey, Bach & Rudi
2019, "Globally convergent Newton methods for ill-conditioned generalized self-concordant losses").

Problem. Given ``n`` rows ``Z``, labels ``y`` and ``M`` Nyström centres ``C`` (a uniform random
subset of the rows), find ``f = Σ_m α_m k(·, c_m)`` minimising

.. math:: \\frac1n \\sum_i L(y_i, f(z_i)) + \\frac{\\lambda}{2} \\alpha^\\top K_{MM} \\alpha,

with ``L(y, f) = ½ (y − f)²`` (``loss="squared"``) or ``log(1 + e^{−y f})`` (``loss="logistic"``).
For the squared loss the minimiser is the closed form
``α = (K_nMᵀ K_nM + λ n K_MM)^† K_nMᵀ y``.

Preconditioner (Rudi et al. 2017, Sec. 3): ``T = chol(K_MM + ε M I)`` (upper, ``K_MM ≈ TᵀT``),
``A = chol(T D Tᵀ / M + λ I)`` (``D`` = Hessian weights at the centres; ``D = I`` for the squared
loss), ``B = T⁻¹ A⁻¹``; conjugate gradient runs on ``Bᵀ H B β = Bᵀ b`` and ``α = B β``. Here
``H = K_nMᵀ W K_nM / n + λ K_MM`` uses the *exact* ``K_MM`` (the jitter ε only enters the
preconditioner), so the fixed point is exactly the Nyström estimator above.

Memory: ``K_nM`` is either cached (when ``n · M`` entries fit in ``cache_bytes``) or recomputed
block by block (``block_size`` rows at a time) at each product, so peak memory is
O(block_size · M + M²) and an ``n × n`` matrix never exists.
"""

from __future__ import annotations

import math
import time
from typing import Callable, Sequence

import numpy as np
import torch

from learners.cg import conjugate_gradient  # noqa: F401  (one CG for the project; re-exported)

from learners.exceptions import InvalidInputError, InvalidParameterError, NotFittedError, check_param

__all__ = ["BLOCK_BYTES", "Falkon", "KnMOperator", "conjugate_gradient", "default_block_size", "default_n_centres",
           "select_centres"]


def default_n_centres(n: int, factor: float = 10.0, max_centres: int = 5000) -> int:
    """``M = min(n, max_centres, ceil(factor · √n))`` — the O(√n) rule of Rudi et al. (2017, Thm. 3)."""
    return int(max(1, min(n, max_centres, math.ceil(factor * math.sqrt(max(n, 1))))))


#: Bytes of kernel-block temporaries (about 6 blocks of ``rows × M``) by device type: 64 MiB on the CPU
#: (cache-sized), 2 GiB on CUDA, where a CPU-sized block (~560 rows at M = 5,000) leaves the GPU
#: launch-bound: 48.3 s vs 11.0 s with 16,384-row blocks for n = 10^6 uncached on an H200
#: (bench/results/falkon.md, 2026-12-04).
BLOCK_BYTES = {"cpu": 64 * 2**20, "cuda": 2 * 2**30}


def default_block_size(M: int, itemsize: int, device=None) -> int:
    """Rows per kernel block so that ~6 blocks of ``rows × M`` fit :data:`BLOCK_BYTES` of the device type
    (on CUDA also at most 1/8 of the free device memory), clipped to [256, 65536].

    >>> default_block_size(5000, 4), default_block_size(5000, 4, "cpu")
    (559, 559)
    """
    dev = torch.device(device) if device is not None else torch.device("cpu")
    budget = BLOCK_BYTES.get(dev.type, BLOCK_BYTES["cpu"])
    if dev.type == "cuda":
        budget = min(budget, torch.cuda.mem_get_info(dev)[0] // 8)
    return int(max(256, min(65536, budget // max(1, 6 * M * itemsize))))


def select_centres(n: int, M: int, generator: torch.Generator, candidates: torch.Tensor | None = None) -> torch.Tensor:
    """Uniform Nyström centre indices without replacement (sorted, int64 tensor of shape (M,)).

    ``candidates`` (optional index tensor) restricts the draw, e.g. to pairs with two distinct items.
    """
    pool = torch.arange(n) if candidates is None else candidates.reshape(-1).cpu()
    M = min(M, pool.shape[0])
    perm = torch.randperm(pool.shape[0], generator=generator)[:M]
    return torch.sort(pool[perm]).values


class KnMOperator:
    """Products with ``K_nM = k(Z, C)`` evaluated block-wise (or from a cache).

    Parameters
    ----------
    kernel : callable ``(Z1, Z2) -> tensor``
    Z : tensor of shape (n, w)
    C : tensor of shape (M, w)
    block_size : int
        Rows of ``K_nM`` formed at once.
    cache_bytes : int
        Cache the full ``K_nM`` when ``n · M · itemsize`` ≤ this; 0 disables caching.
    """

    def __init__(self, kernel: Callable, Z: torch.Tensor, C: torch.Tensor, block_size: int = 4096, cache_bytes: int = 0):
        self.kernel, self.Z, self.C = kernel, Z, C
        self.n, self.M = Z.shape[0], C.shape[0]
        self.block_size = int(block_size)
        self.cache = None
        if cache_bytes and self.n * self.M * Z.element_size() <= cache_bytes:
            self.cache = torch.cat([kernel(Z[s:s + self.block_size], C) for s in range(0, self.n, self.block_size)], 0)

    def _blocks(self):
        if self.cache is not None:
            yield 0, self.n, self.cache
            return
        for s in range(0, self.n, self.block_size):
            e = min(self.n, s + self.block_size)
            yield s, e, self.kernel(self.Z[s:e], self.C)

    def mv(self, u: torch.Tensor) -> torch.Tensor:
        """``K_nM u`` for ``u`` of shape (M,); returns (n,)."""
        out = u.new_empty(self.n)
        for s, e, K in self._blocks():
            out[s:e] = K @ u
        return out

    def rmv(self, v: torch.Tensor) -> torch.Tensor:
        """``K_nMᵀ v`` for ``v`` of shape (n,); returns (M,)."""
        out = v.new_zeros(self.M)
        for s, e, K in self._blocks():
            out += K.T @ v[s:e]
        return out

    def gram_mv(self, u: torch.Tensor, w: torch.Tensor | None = None) -> torch.Tensor:
        """``K_nMᵀ diag(w) K_nM u`` (``w = 1`` when None) in one pass; returns (M,)."""
        out = u.new_zeros(self.M)
        for s, e, K in self._blocks():
            t = K @ u
            if w is not None:
                t = t * w[s:e]
            out += K.T @ t
        return out


def _chol_lower(A: torch.Tensor, jitter: float) -> torch.Tensor:
    """Lower Cholesky factor ``L`` (row-major) of ``A + jitter·I`` — the upper factor is ``L.mT`` —
    raising the jitter ×10 on failure (at most 8 times)."""
    eye = torch.eye(A.shape[0], dtype=A.dtype, device=A.device)
    j = jitter
    for _ in range(9):
        L, info = torch.linalg.cholesky_ex(A + j * eye)
        if int(info) == 0:
            return L
        j = max(j * 10.0, 1e-12)
    raise InvalidInputError(
        "FALKON preconditioner: K_MM is not positive definite even with jitter "
        f"{j:.1e}; the Nyström centres are probably duplicated — use fewer centres or deduplicate pairs."
    )


class Falkon:
    """Nyström kernel regression / classification solved by FALKON.

    Parameters
    ----------
    kernel : callable ``(Z1 (n1, w), Z2 (n2, w)) -> (n1, n2) tensor``
        Any positive semi-definite kernel on rows, e.g. :class:`learners.kernels.PairKernel`.
    penalty : float, default=1e-6
        λ > 0 in the objective of the module docstring.
    n_centres : int or None, default=None
        M; None → :func:`default_n_centres` with ``centre_factor``.
    centre_factor : float, default=10.0
        ``c`` in ``M = c √n`` when ``n_centres`` is None.
    loss : {"squared", "logistic"}, default="squared"
        Squared loss on ±1 (or real) labels, or logistic loss on ±1 labels.
    penalty_list : sequence of float or None
        Logistic loss only: decreasing penalties, one approximate Newton step each (Marteau-Ferey et
        al. 2019); None → ``[λ·10^k for k = 4..1 if λ·10^k < 1] + [λ] * newton_final``.
    newton_final : int, default=4
        Newton steps at the final penalty (logistic loss).
    max_iter : int, default=100
        CG iterations per solve (per Newton step for the logistic loss).
    tol : float, default=1e-10
        Relative residual tolerance of CG.
    dtype : torch.dtype or {"float32", "float64"}, default=torch.float64
    device : str or torch.device or None
        None → CPU.
    seed : int, default=0
        Seed of the centre draw (a private ``torch.Generator``).
    block_size : int or None
        Rows of ``K_nM`` formed at once; None → :func:`default_block_size` (blocks of ~64 MB on the
        CPU, ~2 GB on CUDA).
    cache_bytes : int, default=512 MiB
        Cache ``K_nM`` when it fits (0 disables).

    Attributes
    ----------
    centres_ : tensor (M, w);  alpha_ : tensor (M,);  centre_indices_ : tensor (M,) or None
    n_iter_ : list[int] — CG iterations of each solve;  fit_time_ : float (s)

    Examples
    --------
    >>> import torch
    >>> from learners.kernels import rbf
    >>> X = torch.linspace(-1, 1, 50, dtype=torch.float64)[:, None]
    >>> y = torch.sin(3 * X[:, 0])
    >>> m = Falkon(lambda a, b: rbf(a, b, torch.tensor([0.5])), penalty=1e-8, n_centres=50).fit(X, y)
    >>> bool((m.predict(X) - y).abs().max() < 1e-3)
    True
    """

    def __init__(self, kernel: Callable, penalty: float = 1e-6, n_centres: int | None = None, centre_factor: float = 10.0,
                 loss: str = "squared", penalty_list: Sequence[float] | None = None, newton_final: int = 4,
                 max_iter: int = 100, tol: float = 1e-10, dtype=torch.float64, device=None, seed: int = 0,
                 block_size: int | None = None, cache_bytes: int = 512 * 2**20):
        self.kernel = kernel
        self.penalty = penalty
        self.n_centres = n_centres
        self.centre_factor = centre_factor
        self.loss = loss
        self.penalty_list = penalty_list
        self.newton_final = newton_final
        self.max_iter = max_iter
        self.tol = tol
        self.dtype = dtype
        self.device = device
        self.seed = seed
        self.block_size = block_size
        self.cache_bytes = cache_bytes

    # ------------------------------------------------------------------ helpers
    def _validate(self):
        o = "Falkon"
        check_param(o, "penalty", self.penalty, isinstance(self.penalty, (int, float)) and math.isfinite(self.penalty) and self.penalty > 0, "a float in the range (0, inf)")
        check_param(o, "loss", self.loss, self.loss in ("squared", "logistic"), "one of 'squared', 'logistic'")
        check_param(o, "n_centres", self.n_centres, self.n_centres is None or (isinstance(self.n_centres, int) and self.n_centres >= 1), "None or an int >= 1")
        check_param(o, "centre_factor", self.centre_factor, self.centre_factor > 0, "a float in the range (0, inf)")
        check_param(o, "max_iter", self.max_iter, isinstance(self.max_iter, int) and self.max_iter >= 1, "an int >= 1")
        check_param(o, "newton_final", self.newton_final, isinstance(self.newton_final, int) and self.newton_final >= 1, "an int >= 1")
        check_param(o, "tol", self.tol, self.tol >= 0, "a float in the range [0, inf)")
        check_param(o, "block_size", self.block_size, self.block_size is None or (isinstance(self.block_size, int) and self.block_size >= 1), "None or an int >= 1")

    @property
    def torch_dtype(self) -> torch.dtype:
        if isinstance(self.dtype, torch.dtype):
            dt = self.dtype
        else:
            dt = {"float32": torch.float32, "float64": torch.float64}.get(str(self.dtype))
        check_param("Falkon", "dtype", self.dtype, dt in (torch.float32, torch.float64), "torch.float32/float64 or 'float32'/'float64'")
        return dt

    def _prepare(self, Z, y=None):
        dt, dev = self.torch_dtype, torch.device(self.device) if self.device is not None else torch.device("cpu")
        Zt = torch.as_tensor(np.asarray(Z, dtype=np.float64)) if not isinstance(Z, torch.Tensor) else Z
        Zt = Zt.to(dtype=dt, device=dev)
        if Zt.ndim != 2 or Zt.shape[0] == 0:
            raise InvalidInputError(f"Falkon needs a non-empty 2-D input of shape (n, w); got shape {tuple(Zt.shape)}.")
        if not bool(torch.isfinite(Zt).all()):
            raise InvalidInputError("Falkon input contains NaN or infinite values; drop or impute them before fitting.")
        if y is None:
            return Zt
        yt = torch.as_tensor(np.asarray(y, dtype=np.float64)) if not isinstance(y, torch.Tensor) else y
        yt = yt.to(dtype=dt, device=dev).reshape(-1)
        if yt.shape[0] != Zt.shape[0]:
            raise InvalidInputError(f"Falkon: y has {yt.shape[0]} entries but Z has {Zt.shape[0]} rows.")
        if not bool(torch.isfinite(yt).all()):
            raise InvalidInputError("Falkon labels contain NaN or infinite values.")
        if self.loss == "logistic" and not bool(((yt == 1) | (yt == -1)).all()):
            raise InvalidInputError("Falkon(loss='logistic') needs labels in {+1, -1}; map or drop other outcomes first.")
        return Zt, yt

    def _block(self, M: int, itemsize: int) -> int:
        """Rows of ``K_nM`` formed at once: ``block_size``, else :func:`default_block_size` on this solver's device."""
        if self.block_size is not None:
            return self.block_size
        return default_block_size(M, itemsize, self.device)

    @staticmethod
    def _kmm_factor(KMM: torch.Tensor):
        """Factor ``K_MM = TᵀT`` for the preconditioner.

        First ``T = chol(K_MM + ε M I)ᵀ`` with ``ε`` = machine epsilon × max diag (Rudi et al. 2017,
        Alg. 1). If a pivot collapses to the jitter level, K_MM is numerically rank-deficient (UPM on
        few distinct items, duplicated centres) and ``T⁻¹`` would blow up in float32; then
        ``T = Λ_r^{1/2} V_rᵀ`` from the eigen-pairs above ``ε M λ_max`` is used instead, restricting α to
        range(K_MM) — which loses nothing because null(K_MM) ⊂ null(K_nM).

        Returns ``("chol", L)`` (lower, ``T = Lᵀ``) or ``("eig", (Λ_r, V_r))``.
        """
        M = KMM.shape[0]
        eps = torch.finfo(KMM.dtype).eps
        jitter = eps * M * max(1.0, float(KMM.diagonal().abs().max()))
        L, info = torch.linalg.cholesky_ex(KMM + jitter * torch.eye(M, dtype=KMM.dtype, device=KMM.device))
        if int(info) == 0 and float(L.diagonal().min()) ** 2 > 100.0 * jitter:
            return ("chol", L)
        evals, evecs = torch.linalg.eigh(KMM)
        keep = evals > eps * M * max(float(evals[-1]), 1e-300)
        return ("eig", (evals[keep], evecs[:, keep].contiguous()))

    def _preconditioner(self, factor, lam: float, d_centres: torch.Tensor | None):
        """Dense ``B = T⁻¹ A⁻¹`` (M × r) and ``B⁺ = A T`` (r × M) with ``A = chol(T D Tᵀ / M + λ I)``
        (Rudi et al. 2017, Sec. 3; D = Hessian weights at the centres, identity for the squared loss)."""
        kind, f = factor
        if kind == "chol":
            T = f.mT                                  # upper (M, M)
            M = r = T.shape[0]
        else:
            evals, V = f
            M, r = V.shape
            T = evals.sqrt()[:, None] * V.mT          # (r, M)
        TT = T @ T.mT if d_centres is None else (T * d_centres[None, :]) @ T.mT
        eye = torch.eye(r, dtype=T.dtype, device=T.device)
        LA = _chol_lower(TT / M + lam * eye, 0.0)
        Ainv = torch.linalg.solve_triangular(LA.mT, eye, upper=True)      # BLAS-3, once per solve
        if kind == "chol":
            B = torch.linalg.solve_triangular(T, Ainv, upper=True)
        else:
            B = (V / evals.sqrt()[None, :]) @ Ainv
        return B, LA.mT @ T

    def _solve(self, op: KnMOperator, KMM, lam, rhs, w=None, d_centres=None, x0=None, eig=None):
        """Solve ``(K_nMᵀ W K_nM / n + λ K_MM) α = rhs`` by preconditioned CG; returns (α, iters)."""
        n = op.n
        B, Binv = self._preconditioner(eig if eig is not None else self._kmm_factor(KMM), lam, d_centres)
        Bt = B.mT.contiguous()

        def BHB(u):
            Bu = B @ u
            return Bt @ (op.gram_mv(Bu, w) / n + lam * (KMM @ Bu))

        b = Bt @ rhs
        beta0 = None if x0 is None else Binv @ x0
        beta, it = conjugate_gradient(BHB, b, beta0, self.max_iter, self.tol)
        return B @ beta, it

    # ------------------------------------------------------------------ API
    def fit(self, Z, y, centres=None, centre_indices=None, candidates=None, alpha0=None, operator: KnMOperator | None = None) -> "Falkon":
        """Fit on rows ``Z`` (n, w) with labels ``y`` (n,).

        Parameters
        ----------
        Z : tensor or array of shape (n, w)
        y : tensor or array of shape (n,)
            Real targets (squared loss) or ±1 labels.
        centres : tensor or array of shape (M, w), optional
            Fixed Nyström centres (otherwise drawn uniformly from ``Z``).
        centre_indices : int tensor of shape (M,), optional
            Rows of ``Z`` to use as centres (lets the logistic preconditioner use the Hessian weights at the centres).
        candidates : int tensor, optional
            Rows eligible for the uniform centre draw.
        alpha0 : tensor (M,), optional
            Warm start (same centres).
        operator : KnMOperator, optional
            Re-use a prepared operator (and its cached ``K_nM``) for the same ``Z`` and centres.

        Returns
        -------
        self

        Raises
        ------
        InvalidInputError
            Empty input, NaN/inf, length mismatch, non ±1 labels for the logistic loss.
        InvalidParameterError
            A constructor argument out of range.
        """
        self._validate()
        t0 = time.perf_counter()
        Zt, yt = self._prepare(Z, y)
        n = Zt.shape[0]
        dt, dev = Zt.dtype, Zt.device
        if operator is not None:
            op = operator
            C = op.C
            idx = centre_indices
        else:
            if centres is not None:
                C = self._prepare(centres)
                if C.shape[1] != Zt.shape[1]:
                    raise InvalidInputError(f"Falkon: centres have {C.shape[1]} columns but Z has {Zt.shape[1]}.")
                idx = None if centre_indices is None else torch.as_tensor(centre_indices)
            else:
                if centre_indices is None:
                    M = self.n_centres if self.n_centres is not None else default_n_centres(n, self.centre_factor)
                    gen = torch.Generator().manual_seed(int(self.seed))
                    idx = select_centres(n, M, gen, candidates)
                else:
                    idx = torch.as_tensor(centre_indices).reshape(-1)
                C = Zt[idx.to(dev)]
            op = KnMOperator(self.kernel, Zt, C, self._block(C.shape[0], Zt.element_size()), self.cache_bytes)
        self.centres_ = C
        self.centre_indices_ = idx
        KMM = self.kernel(C, C)
        KMM = 0.5 * (KMM + KMM.T)
        eig = getattr(op, "_eig", None)
        if eig is None:
            eig = op._eig = self._kmm_factor(KMM)
        lam = float(self.penalty)
        self.n_iter_ = []
        if self.loss == "squared":
            rhs = op.rmv(yt) / n
            alpha, it = self._solve(op, KMM, lam, rhs, x0=None if alpha0 is None else alpha0.to(device=dev, dtype=dt), eig=eig)
            self.n_iter_.append(it)
        else:
            alpha = torch.zeros(C.shape[0], dtype=dt, device=dev) if alpha0 is None else alpha0.to(device=dev, dtype=dt).clone()
            f = op.mv(alpha) if alpha0 is not None else torch.zeros(n, dtype=dt, device=dev)
            for lam_k in self._penalties():
                # gradient and Hessian of (1/n) Σ log(1+e^{−y f}) + (λ/2) αᵀ K_MM α
                s = torch.sigmoid(-yt * f)
                grad = op.rmv(-yt * s) / n + lam_k * (KMM @ alpha)
                w = s * (1.0 - s)
                dc = w[idx.to(dev)] if idx is not None else None
                if dc is None:
                    dc = torch.full((C.shape[0],), float(w.mean()), dtype=dt, device=dev)
                delta, it = self._solve(op, KMM, lam_k, grad, w=w, d_centres=dc, eig=eig)
                self.n_iter_.append(it)
                Kd = op.mv(delta)
                # backtracking on the current objective (rarely triggered on the penalty path)
                obj0 = self._objective(f, yt, alpha, KMM, lam_k)
                step = 1.0
                for _ in range(30):
                    a_new, f_new = alpha - step * delta, f - step * Kd
                    if self._objective(f_new, yt, a_new, KMM, lam_k) <= obj0 + 1e-12 * abs(obj0):
                        break
                    step *= 0.5
                alpha, f = a_new, f_new
        self.alpha_ = alpha
        self.fit_time_ = time.perf_counter() - t0
        return self

    @staticmethod
    def _objective(f, y, alpha, KMM, lam):
        return float(torch.nn.functional.softplus(-y * f).mean() + 0.5 * lam * (alpha @ (KMM @ alpha)))

    def _penalties(self) -> list[float]:
        if self.penalty_list is not None:
            pl = [float(p) for p in self.penalty_list]
            check_param("Falkon", "penalty_list", self.penalty_list, len(pl) > 0 and all(p > 0 for p in pl), "a non-empty list of positive floats")
            return pl
        lam = float(self.penalty)
        pre = [lam * 10.0**k for k in range(4, 0, -1) if lam * 10.0**k < 1.0]
        return pre + [lam] * self.newton_final

    def decision_function(self, Z) -> torch.Tensor:
        """``f(Z) = K(Z, C) α`` as a tensor of shape (n,) (block-wise)."""
        if not hasattr(self, "alpha_"):
            raise NotFittedError("This Falkon instance is not fitted yet; call fit(Z, y) first.")
        Zt = self._prepare(Z)
        if Zt.shape[1] != self.centres_.shape[1]:
            raise InvalidInputError(f"Falkon: input has {Zt.shape[1]} columns, the model was fitted on {self.centres_.shape[1]}.")
        from learners.kernels import kernel_matvec

        return kernel_matvec(self.kernel, Zt, self.centres_, self.alpha_, self._block(self.centres_.shape[0], Zt.element_size()))

    predict = decision_function
