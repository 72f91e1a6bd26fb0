"""Product RBF kernels and the kernels on *pairs* used by GPM, C-GPM and UPM.

Every item kernel is a product RBF on **scaled** features with one length-scale per feature,

.. math:: k(x, y) = \\prod_{j=1}^d \\exp\\!\\left(-\\frac{(x_j - y_j)^2}{2 \\ell_j^2}\\right),

the structure Pref-SHAP needs (Hu, Chau et al. 2022, Section 3). On pairs of items three kernels are built:

* the generalised preferential kernel (Hu, Chau et al. 2022, Section 2.1; Chau et al. 2022)
  :math:`k_E((a,b),(c,d)) = k(a,c)k(b,d) - k(a,d)k(b,c)` — :func:`pref_kernel`;
  with an optional constant ``c`` in the item kernel, :math:`(c + k)/\\sqrt{1 + c}`, it becomes
  :math:`(k_E + c\\,k_{UPM})/(1 + c)` (so its RKHS also holds UPM's :math:`f(a) - f(b)`);
* the context kernel of C-GPM, :math:`k_U(u,v)\\,k_E((a,b),(c,d))` — :func:`context_pref_kernel`;
* the utility (UPM) kernel :math:`k(a,c)+k(b,d)-k(a,d)-k(b,c)`, whose RKHS holds exactly the
  functions :math:`g(a,b) = f(a)-f(b)` of Hu, Chau et al. (2022) eq. (1) — :func:`utility_pair_kernel`.

All three are skew-symmetric in the pair order: swapping ``(a, b)`` negates every kernel row,
so any :math:`g = \\sum_m \\alpha_m k(\\cdot, z_m)` satisfies :math:`g(a,b) = -g(b,a)`.

:class:`PairKernel` packs a pair as one row ``[x_left, x_right(, u)]`` so that the FALKON solver
(:mod:`learners.falkon`) sees an ordinary kernel on rows; :func:`kernel_matvec` evaluates
:math:`K(Z, C)\\,v` block by block so an ``n × n`` (or even ``n × M``) matrix is never held.

Functions accept torch tensors (returning tensors) or anything array-like (returning ndarrays).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from learners.exceptions import InvalidInputError, InvalidParameterError

__all__ = [
    "PairKernel",
    "context_pref_kernel",
    "kernel_matvec",
    "median_heuristic",
    "pref_kernel",
    "rbf",
    "rbf_np",
    "utility_pair_kernel",
]


def _as_tensor(a, like: torch.Tensor | None = None, dtype=None) -> torch.Tensor:
    if isinstance(a, torch.Tensor):
        t = a
    else:
        t = torch.as_tensor(np.asarray(a, dtype=np.float64))
    if like is not None:
        t = t.to(dtype=like.dtype, device=like.device)
    elif dtype is not None:
        t = t.to(dtype=dtype)
    return t


def _check_2d(name: str, a: torch.Tensor, d: int | None = None) -> None:
    if a.ndim != 2:
        raise InvalidInputError(f"{name} must be a 2-D array of shape (n, d); got shape {tuple(a.shape)}.")
    if d is not None and a.shape[1] != d:
        raise InvalidInputError(
            f"{name} has {a.shape[1]} columns but the length-scales give d={d}; pass arrays with one column per feature."
        )


def _sqdist_scaled(X: torch.Tensor, Y: torch.Tensor, ls: torch.Tensor) -> torch.Tensor:
    """Σ_j (x_j − y_j)² / ℓ_j² for all rows, shape (n, m), clamped at 0."""
    Xs = X / ls
    Ys = Y / ls
    x2 = (Xs * Xs).sum(1, keepdim=True)
    y2 = (Ys * Ys).sum(1, keepdim=True).T
    d2 = x2 + y2 - 2.0 * (Xs @ Ys.T)
    return d2.clamp_min_(0.0)


def rbf(X, Y, lengthscales):
    """Product RBF kernel matrix with one length-scale per feature.

    Parameters
    ----------
    X : tensor or array of shape (n, d)
        Scaled item features.
    Y : tensor or array of shape (m, d)
        Scaled item features.
    lengthscales : tensor or array of shape (d,)
        Positive length-scales ℓ_j (same units as the scaled features).

    Returns
    -------
    K : same type as ``X`` (torch tensor or ndarray), shape (n, m)
        ``K[i, k] = Π_j exp(−(X[i,j] − Y[k,j])² / (2 ℓ_j²))``; torch in → torch out (dtype and
        device of ``X``), otherwise float64 ndarray.

    Raises
    ------
    InvalidInputError
        If the widths of ``X``, ``Y`` and ``lengthscales`` differ.
    InvalidParameterError
        If a length-scale is not positive and finite.

    Examples
    --------
    >>> import numpy as np
    >>> K = rbf(np.zeros((1, 2)), np.array([[1.0, 0.0]]), np.array([1.0, 2.0]))
    >>> float(np.round(K[0, 0], 6)) == float(np.round(np.exp(-0.5), 6))
    True
    """
    is_torch = isinstance(X, torch.Tensor)
    Xt = _as_tensor(X)
    Yt = _as_tensor(Y, like=Xt)
    ls = _as_tensor(lengthscales, like=Xt).reshape(-1)
    _check_2d("X", Xt, ls.shape[0])
    _check_2d("Y", Yt, ls.shape[0])
    if not bool(torch.all(torch.isfinite(ls) & (ls > 0))):
        raise InvalidParameterError(
            f"The 'lengthscales' parameter of rbf must be positive finite floats. Got {ls.tolist()!r} instead."
        )
    K = torch.exp(-0.5 * _sqdist_scaled(Xt, Yt, ls))
    return K if is_torch else K.cpu().numpy()


def rbf_np(X, Y, lengthscales) -> np.ndarray:
    """NumPy wrapper of :func:`rbf`: float64 ndarray of shape (n, m) whatever the input type."""
    K = rbf(_as_tensor(X, dtype=torch.float64), _as_tensor(Y, dtype=torch.float64), _as_tensor(lengthscales, dtype=torch.float64))
    return K.cpu().numpy()


def pref_kernel(XL, XR, CL, CR, ls, constant: float = 0.0):
    """Generalised preferential kernel k_E between pairs (Hu, Chau et al. 2022, Section 2.1).

    ``k_E((xl, xr), (cl, cr)) = k(xl, cl) k(xr, cr) − k(xl, cr) k(xr, cl)`` with ``k`` = :func:`rbf`.
    With ``constant = c > 0`` the item kernel is ``k_c = (c + k)/√(1 + c)`` and the pair kernel
    ``k_c(xl,cl)k_c(xr,cr) − k_c(xl,cr)k_c(xr,cl) = (k_E + c·k_UPM)/(1 + c)``
    (:func:`utility_pair_kernel`), evaluated in that form (no c² cancellation); its RKHS contains
    UPM's ``f(a) − f(b)`` as well as k_E's functions. The division by ``1 + c`` makes ``c`` a mixing
    weight at a fixed penalty: ``c = 0`` is k_E, ``c → ∞`` tends to the UPM kernel.

    Parameters
    ----------
    XL, XR : tensor or array of shape (n, d)
        Left and right items of the first pairs (scaled).
    CL, CR : tensor or array of shape (m, d)
        Left and right items of the second pairs (e.g. Nyström centres).
    ls : tensor or array of shape (d,)
        Length-scales.
    constant : float, default 0.0
        ``c ≥ 0``: item kernel ``(c + k)/√(1 + c)``.

    Returns
    -------
    K : tensor or ndarray of shape (n, m)

    Examples
    --------
    >>> import numpy as np
    >>> a, b = np.array([[0.0]]), np.array([[1.0]])
    >>> float(pref_kernel(a, b, a, b, [1.0])[0, 0]) == float(-pref_kernel(b, a, a, b, [1.0])[0, 0])
    True
    """
    K = rbf(XL, CL, ls) * rbf(XR, CR, ls) - rbf(XL, CR, ls) * rbf(XR, CL, ls)
    if constant:
        K = (K + constant * utility_pair_kernel(XL, XR, CL, CR, ls)) / (1.0 + constant)
    return K


def context_pref_kernel(XL, XR, U, CL, CR, CU, ls, ls_context, constant: float = 0.0):
    """C-GPM kernel ``k_U(u, u_m) · k_E((xl, xr), (cl_m, cr_m))`` (Hu, Chau et al. 2022, Section 2.1).

    Parameters
    ----------
    XL, XR : (n, d);  U : (n, p);  CL, CR : (m, d);  CU : (m, p)
    ls : (d,) item length-scales;  ls_context : (p,) context length-scales;
    constant : ``c ≥ 0`` of the item kernel ``(c + k)/√(1 + c)`` (see :func:`pref_kernel`).

    Returns
    -------
    K : tensor or ndarray of shape (n, m)
    """
    return rbf(U, CU, ls_context) * pref_kernel(XL, XR, CL, CR, ls, constant)


def utility_pair_kernel(XL, XR, CL, CR, ls):
    """UPM kernel on pairs ``k(a,c) + k(b,d) − k(a,d) − k(b,c)`` for pairs (a, b), (c, d).

    Its RKHS contains exactly the differences ``g(a, b) = f(a) − f(b)`` of Hu, Chau et al. (2022) eq. (1).

    Returns
    -------
    K : tensor or ndarray of shape (n, m)
    """
    return rbf(XL, CL, ls) + rbf(XR, CR, ls) - rbf(XL, CR, ls) - rbf(XR, CL, ls)


def median_heuristic(X, max_rows: int = 1000, seed: int = 0) -> np.ndarray:
    """Per-feature median heuristic for RBF length-scales.

    ``ℓ_j = median_{i<k} |X[i,j] − X[k,j]|`` over the non-zero differences of (at most
    ``max_rows`` randomly chosen) rows; 1.0 for a constant feature. Taking non-zero differences keeps
    binary/one-hot columns (whose median difference is often 0) usable.

    Parameters
    ----------
    X : array of shape (n, d)
        Scaled features.
    max_rows : int
        Sub-sample size (the cost is O(max_rows² d)).
    seed : int
        Seed of the sub-sample.

    Returns
    -------
    ndarray of shape (d,), float64, all entries positive.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] == 0:
        raise InvalidInputError(f"median_heuristic needs a non-empty 2-D array; got shape {X.shape}.")
    rng = np.random.default_rng(seed)
    if X.shape[0] > max_rows:
        X = X[rng.choice(X.shape[0], max_rows, replace=False)]
    iu = np.triu_indices(X.shape[0], k=1)
    out = np.ones(X.shape[1])
    for j in range(X.shape[1]):
        diff = np.abs(X[:, j][:, None] - X[:, j][None, :])[iu]
        diff = diff[diff > 1e-12]
        if diff.size:
            out[j] = float(np.median(diff))
    return out


@dataclass
class PairKernel:
    """A kernel on packed pair rows ``z = [x_left (d), x_right (d), u (p)]``.

    Parameters
    ----------
    kind : {"gpm", "cgpm", "upm"}
        :func:`pref_kernel`, :func:`context_pref_kernel` or :func:`utility_pair_kernel`.
    lengthscales : tensor of shape (d,)
        Item length-scales.
    context_lengthscales : tensor of shape (p,) or None
        Context length-scales (``kind="cgpm"`` only).
    constant : float, default 0.0
        ``c ≥ 0`` of the item kernel ``(c + k)/√(1 + c)`` of ``"gpm"`` / ``"cgpm"``: pair kernel ``(k_E + c·k_UPM)/(1 + c)``
        (see :func:`pref_kernel`); must be 0 for ``"upm"``.

    Calling ``kernel(Z1, Z2)`` returns the (n1, n2) kernel matrix as a tensor on ``Z1``'s device.
    """

    kind: str
    lengthscales: torch.Tensor
    context_lengthscales: torch.Tensor | None = None
    constant: float = 0.0

    def __post_init__(self):
        if self.kind not in ("gpm", "cgpm", "upm"):
            raise InvalidParameterError(
                f"The 'kind' parameter of PairKernel must be one of 'gpm', 'cgpm', 'upm'. Got {self.kind!r} instead."
            )
        if self.kind == "cgpm" and self.context_lengthscales is None:
            raise InvalidParameterError("PairKernel(kind='cgpm') needs context_lengthscales of shape (p,).")
        c = float(self.constant)
        if not (np.isfinite(c) and c >= 0.0) or (self.kind == "upm" and c != 0.0):
            raise InvalidParameterError(
                f"The 'constant' parameter of PairKernel must be a finite float >= 0 (0 for kind='upm'). Got {self.constant!r} instead.")

    @property
    def d(self) -> int:
        return int(self.lengthscales.shape[0])

    @property
    def p(self) -> int:
        return 0 if self.context_lengthscales is None or self.kind != "cgpm" else int(self.context_lengthscales.shape[0])

    @property
    def width(self) -> int:
        """Number of columns of a packed pair row, ``2 d + p``."""
        return 2 * self.d + self.p

    def to(self, dtype, device) -> "PairKernel":
        cl = None if self.context_lengthscales is None else self.context_lengthscales.to(dtype=dtype, device=device)
        return PairKernel(self.kind, self.lengthscales.to(dtype=dtype, device=device), cl, self.constant)

    def __call__(self, Z1: torch.Tensor, Z2: torch.Tensor) -> torch.Tensor:
        d = self.d
        ls = self.lengthscales.to(dtype=Z1.dtype, device=Z1.device)
        L1, R1, L2, R2 = Z1[:, :d], Z1[:, d:2 * d], Z2[:, :d], Z2[:, d:2 * d]
        k_ll = torch.exp(-0.5 * _sqdist_scaled(L1, L2, ls))
        k_rr = torch.exp(-0.5 * _sqdist_scaled(R1, R2, ls))
        k_lr = torch.exp(-0.5 * _sqdist_scaled(L1, R2, ls))
        k_rl = torch.exp(-0.5 * _sqdist_scaled(R1, L2, ls))
        if self.kind == "upm":
            return k_ll + k_rr - k_lr - k_rl
        upm = (k_ll + k_rr - k_lr - k_rl).mul_(float(self.constant)) if self.constant else None
        K = k_ll.mul_(k_rr).sub_(k_lr.mul_(k_rl))
        if upm is not None:
            K.add_(upm).div_(1.0 + float(self.constant))
        if self.kind == "cgpm":
            lsu = self.context_lengthscales.to(dtype=Z1.dtype, device=Z1.device)
            K.mul_(torch.exp(-0.5 * _sqdist_scaled(Z1[:, 2 * d:], Z2[:, 2 * d:], lsu)))
        return K


def kernel_matvec(kernel, Z: torch.Tensor, C: torch.Tensor, v: torch.Tensor, block_size: int = 4096) -> torch.Tensor:
    """``K(Z, C) @ v`` computed in row blocks of ``block_size`` (peak memory O(block_size · m)).

    Parameters
    ----------
    kernel : callable ``(Z1, Z2) -> (n1, n2) tensor``
    Z : tensor of shape (n, w);  C : tensor of shape (m, w);  v : tensor of shape (m,) or (m, k)

    Returns
    -------
    tensor of shape (n,) or (n, k)
    """
    if block_size < 1:
        raise InvalidParameterError(f"The 'block_size' parameter of kernel_matvec must be an int >= 1. Got {block_size!r} instead.")
    out = []
    for s in range(0, Z.shape[0], block_size):
        out.append(kernel(Z[s:s + block_size], C) @ v)
    if not out:
        return v.new_zeros((0,) + tuple(v.shape[1:]))
    return torch.cat(out, 0)
