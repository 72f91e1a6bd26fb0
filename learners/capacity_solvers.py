"""Solvers for capacity learning: hinge loss, RDA, ADMM-RDA, FOBOS and the batch LP.

Herin, Perny & Sokolovska, *Online Learning of Capacity-Based Preference Models*, IJCAI 2024
(Herin, Perny & Sokolovska 2024). Notation: an example is a feature difference ``d = φ(x_left) − φ(x_right)`` of
shape (d,) with an outcome ``y ∈ {+1, −1, 0}``; the paper's oriented difference is
``Δ = y·d`` for a strict preference (its x_t is the preferred item) and ``Δ = d`` for an
indifference. A Möbius vector ``m`` has shape (d,); ``B`` (shape (b, d), scipy.sparse) encodes
``B m ≤ 0``.

Everything here is a pure function or a small state object without Python loops over coalitions;
:mod:`learners.capacity` wraps them in river-style estimators.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from learners.exceptions import BudgetError, InvalidInputError

__all__ = [
    "ADMMState",
    "LPResult",
    "fobos_step",
    "hinge_loss",
    "hinge_subgradient_coef",
    "rda_closed_form",
    "rda_from_sum",
    "solve_lp",
    "solve_lp_colgen",
    "soft_threshold",
]


# -------------------------------------------------------------------- loss
def hinge_loss(margin: float, y: int, delta: float) -> float:
    """Instantaneous loss l_t of Section 3.1 (the error variables of problem (2)).

    Parameters
    ----------
    margin : float
        ``⟨m, φ(x_left) − φ(x_right)⟩``.
    y : {+1, −1, 0}
        +1 left preferred, −1 right preferred, 0 indifference.
    delta : float
        Discrimination threshold δ > 0.

    Returns
    -------
    float
        ``[δ − y·margin]₊`` for a strict preference, ``[margin − δ]₊ + [−δ − margin]₊`` for an
        indifference.
    """
    if y:
        return max(0.0, delta - y * margin)
    return max(0.0, margin - delta) + max(0.0, -delta - margin)


def hinge_subgradient_coef(margin: float, y: int, delta: float) -> float:
    """Coefficient c with g_t = c·(φ(x_left) − φ(x_right)) ∈ ∂l_t(m_t), exactly as Section 3.2 states it.

    With Δ the oriented difference (Δ = y·d for y = ±1, Δ = d for y = 0), the paper's subgradient is:
    for t ∈ P, g_t = −Δ if ⟨m_t, Δ⟩ < δ, else 0; for t ∈ I, g_t = −Δ if ⟨m_t, Δ⟩ < −δ,
    g_t = Δ if ⟨m_t, Δ⟩ > δ, else 0. In terms of d this is c = −y (strict, y·margin < δ) and
    c = −1 / +1 / 0 (indifference).

    Examples
    --------
    >>> hinge_subgradient_coef(0.0, -1, 0.1), hinge_subgradient_coef(0.5, 1, 0.1)
    (1.0, 0.0)
    >>> hinge_subgradient_coef(0.5, 0, 0.1), hinge_subgradient_coef(-0.5, 0, 0.1)
    (1.0, -1.0)
    """
    if y:
        return -float(y) if y * margin < delta else 0.0
    if margin < -delta:
        return -1.0
    if margin > delta:
        return 1.0
    return 0.0


# -------------------------------------------------------------------- RDA
try:  # single-pass clip ufunc (numpy ≥ 2); np.clip's Python wrapper costs ~20 µs per call
    from numpy._core.umath import clip as _uclip

    def clip_into(a: np.ndarray, lo: float, hi: float, out: np.ndarray) -> np.ndarray:
        """``out = min(max(a, lo), hi)`` in one pass."""
        return _uclip(a, lo, hi, out=out)
except ImportError:  # pragma: no cover
    def clip_into(a: np.ndarray, lo: float, hi: float, out: np.ndarray) -> np.ndarray:
        """``out = min(max(a, lo), hi)``."""
        np.minimum(a, hi, out=out)
        return np.maximum(out, lo, out=out)


def soft_threshold(u: np.ndarray, thr: float, out: np.ndarray | None = None) -> np.ndarray:
    """``[|u| − thr]₊ sign(u)`` computed as ``u − clip(u, −thr, thr)`` (two passes, no temporaries with ``out``)."""
    if out is None:
        out = np.empty_like(u)
    clip_into(u, -thr, thr, out)
    np.subtract(u, out, out=out)
    return out


def rda_closed_form(gbar: np.ndarray, t: float, gamma: float, l1: float) -> np.ndarray:
    """Algorithm 1, line 6 (Equation (5)): ``m_{t+1} = −(√t/γ) [|ḡ_t| − λ]₊ sign(ḡ_t)``.

    It is the minimiser of the linearised problem (4),
    ``⟨ḡ_t, m⟩ + λ‖m‖₁ + η_t‖m‖²₂`` with ``η_t = γ/(2√t)`` (Xiao 2009).

    Parameters
    ----------
    gbar : ndarray of shape (d,)
        Average subgradient ḡ_t = (1/t) Σ_{τ≤t} g_τ.
    t : float
        Number of rounds so far (≥ 1).
    gamma, l1 : float
        γ > 0 and λ ≥ 0.

    Returns
    -------
    ndarray of shape (d,)

    Examples
    --------
    >>> (rda_closed_form(np.array([0.5, -0.005, -0.2]), t=4, gamma=10.0, l1=0.01).round(6) + 0.0).tolist()
    [-0.098, 0.0, 0.038]
    """
    return soft_threshold(np.asarray(gbar, dtype=np.float64), l1) * (-math.sqrt(t) / gamma)


def rda_from_sum(G: np.ndarray, t: float, gamma: float, l1: float, out: np.ndarray | None = None) -> np.ndarray:
    """Same closed form from the gradient *sum* G_t = t·ḡ_t: ``−(1/(γ√t)) [|G_t| − λt]₊ sign(G_t)``.

    This is the form the learners store (a sum and a count merge by addition).
    """
    out = soft_threshold(G, l1 * t, out=out)
    out *= -1.0 / (gamma * math.sqrt(t))
    return out


@dataclass
class ADMMState:
    """State of Algorithm 2 (ADMM-RDA) beyond RDA's gradient sum, for ``b`` constraints.

    Attributes
    ----------
    z, mu : ndarray of shape (b,)
        Current splitting variable z_t (≤ 0) and multiplier µ_t.
    sum_z, sum_mu, sum_Bm : ndarray of shape (b,)
        Σ_{τ≤t} z_τ, Σ µ_τ and Σ B m_τ (so that B m̄_t = sum_Bm / t without a product).
    """

    z: np.ndarray
    mu: np.ndarray
    sum_z: np.ndarray
    sum_mu: np.ndarray
    sum_Bm: np.ndarray

    @classmethod
    def zeros(cls, b: int) -> "ADMMState":
        """State at t = 1: m_1 = µ_1 = z_1 = 0 (Algorithm 2, line 1)."""
        return cls(*(np.zeros(b) for _ in range(5)))

    def arrays(self) -> dict:
        return {"admm_z": self.z, "admm_mu": self.mu, "admm_sum_z": self.sum_z,
                "admm_sum_mu": self.sum_mu, "admm_sum_Bm": self.sum_Bm}


def admm_rda_step(G: np.ndarray, t: float, st: ADMMState, B: sp.csr_matrix, BT: sp.csr_matrix,
                  gamma: float, l1: float, rho: float, weight: float = 1.0,
                  out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 2, lines 6–9, after lines 4–5 have folded g_t into ``G`` (so ``t`` is already incremented).

    Line 6: ``ḡ^µ_t = ḡ_t − Bᵀ(µ̄_t − ρ(B m̄_t − z̄_t))``;
    line 7: ``m_{t+1} = −(√t/γ)[|ḡ^µ_t| − λ]₊ sign(ḡ^µ_t)``;
    line 8: ``z_{t+1} = −[µ_t/ρ − B m_{t+1}]₊``;
    line 9: ``µ_{t+1} = µ_t − ρ(B m_{t+1} − z_{t+1})``.
    Averages are over rounds 1 … t (ū_t = (1/t) Σ_{τ≤t} u_τ, Section 3.2), with m_1 = z_1 = µ_1 = 0.
    ``st`` is updated in place (z, µ and the running sums, weighted by ``weight``).

    Returns
    -------
    m_next : ndarray of shape (d,)
    Bm_next : ndarray of shape (b,)
    """
    inv_t = 1.0 / t
    w = st.sum_mu * inv_t - rho * (st.sum_Bm * inv_t - st.sum_z * inv_t)
    gmu = G * inv_t - BT @ w
    m_next = soft_threshold(gmu, l1, out=out)
    m_next *= -math.sqrt(t) / gamma
    Bm = B @ m_next
    z = np.minimum(Bm - st.mu / rho, 0.0)          # −[µ_t/ρ − B m_{t+1}]₊
    mu = st.mu - rho * (Bm - z)
    st.z, st.mu = z, mu
    st.sum_z += weight * z
    st.sum_mu += weight * mu
    st.sum_Bm += weight * Bm
    return m_next, Bm


# -------------------------------------------------------------------- FOBOS
def fobos_step(m: np.ndarray, g: np.ndarray, eta: float, l1: float) -> np.ndarray:
    """One FOBOS step for the ℓ1-regularised loss (Duchi & Singer 2009, Section 6), in place on ``m``.

    ``m_{t+1/2} = m_t − η_t g_t``; ``m_{t+1} = [|m_{t+1/2}| − η_t λ]₊ sign(m_{t+1/2})``.
    """
    m -= eta * g
    soft_threshold(m.copy(), eta * l1, out=m)
    return m


# -------------------------------------------------------------------- LP
@dataclass
class LPResult:
    """Solution of the batch problem (2).

    Attributes
    ----------
    m : ndarray of shape (d,)
        Möbius vector.
    objective : float
        ``(1/T) Σ_t w_t ε_t + λ‖m‖₁`` at the optimum.
    status : int
        ``scipy.optimize.linprog`` status (0 = optimal).
    seconds : float
        Wall-clock solve time (model building included).
    n_columns : int
        Möbius columns in the final LP (< d under column generation).
    rounds : int
        Column-generation rounds (1 for a direct solve).
    """

    m: np.ndarray
    objective: float
    status: int
    seconds: float
    n_columns: int = 0
    rounds: int = 1
    message: str = ""
    extra: dict = field(default_factory=dict)


def _lp_restricted(D: np.ndarray, y: np.ndarray, w: np.ndarray, delta: float, l1: float,
                   B: sp.spmatrix | None):
    """Build and solve problem (2) on the columns of ``D`` (T, c); returns (res, m, duals)."""
    from scipy.optimize import linprog

    T, c = D.shape
    P = np.flatnonzero(y != 0)
    I = np.flatnonzero(y == 0)
    nP, nI = P.size, I.size
    # variables: m+ (c), m- (c), eps (nP), eps+ (nI), eps- (nI)
    Dp = D[P] * y[P, None]
    blocks = [
        sp.hstack([sp.csr_matrix(-Dp), sp.csr_matrix(Dp), -sp.identity(nP), sp.csr_matrix((nP, 2 * nI))]),
    ]
    b = [np.full(nP, -delta)]
    if nI:
        DI = D[I]
        blocks.append(sp.hstack([sp.csr_matrix(DI), sp.csr_matrix(-DI), sp.csr_matrix((nI, nP)), -sp.identity(nI),
                                 sp.csr_matrix((nI, nI))]))
        blocks.append(sp.hstack([sp.csr_matrix(-DI), sp.csr_matrix(DI), sp.csr_matrix((nI, nP)), sp.csr_matrix((nI, nI)),
                                 -sp.identity(nI)]))
        b += [np.full(nI, delta), np.full(nI, delta)]
    if B is not None and B.shape[0]:
        Bc = sp.csr_matrix(B)
        blocks.append(sp.hstack([Bc, -Bc, sp.csr_matrix((B.shape[0], nP + 2 * nI))]))
        b.append(np.zeros(B.shape[0]))
    A = sp.vstack(blocks, format="csc")
    cost = np.concatenate([np.full(2 * c, l1), w[P] / T, w[I] / T, w[I] / T])
    res = linprog(cost, A_ub=A, b_ub=np.concatenate(b), bounds=(0, None), method="highs")
    m = None if res.x is None else res.x[:c] - res.x[c:2 * c]
    return res, m, (P, I)


def solve_lp(D: np.ndarray, y: np.ndarray, delta: float, l1: float, B: sp.spmatrix | None = None,
             weights: np.ndarray | None = None, max_nnz: int = 60_000_000) -> LPResult:
    """Batch problem (2) of Section 3.1 as one linear programme, ``scipy.optimize.linprog(method="highs")``.

    ::

        min_{m, ε}  (1/T) [Σ_{t∈P} w_t ε_t + Σ_{t∈I} w_t (ε⁺_t + ε⁻_t)] + λ‖m‖₁
        s.t.  ⟨m, Δ_t⟩ ≥ δ − ε_t                       (t ∈ P)
              −δ − ε⁻_t ≤ ⟨m, Δ_t⟩ ≤ δ + ε⁺_t            (t ∈ I)
              B m ≤ 0  (optional normative constraints), ε ≥ 0,

    with ``m = m⁺ − m⁻``, m± ≥ 0 (standard ℓ1 linearisation).

    Parameters
    ----------
    D : ndarray of shape (T, d)
        Feature differences φ(x_left) − φ(x_right).
    y : ndarray of shape (T,), int
        Outcomes in {+1, −1, 0}.
    delta, l1 : float
        δ > 0 and λ ≥ 0.
    B : sparse matrix of shape (b, d), optional
        Constraints ``B m ≤ 0``.
    weights : ndarray of shape (T,), optional
        Example weights w_t (default 1).
    max_nnz : int
        Budget on the constraint-matrix non-zeros.

    Returns
    -------
    LPResult

    Raises
    ------
    BudgetError
        If the LP would exceed ``max_nnz`` non-zeros.
    """
    D = np.asarray(D, dtype=np.float64)
    y = np.asarray(y).astype(np.int64)
    if D.ndim != 2 or y.shape != (D.shape[0],):
        raise InvalidInputError(f"solve_lp expects D of shape (T, d) and y of shape (T,); got {D.shape} and {y.shape}.")
    T = D.shape[0]
    w = np.ones(T) if weights is None else np.asarray(weights, dtype=np.float64)
    nnz = 2 * np.count_nonzero(D) * (1 + (y == 0).mean()) + (0 if B is None else 2 * B.nnz)
    if nnz > max_nnz:
        raise BudgetError(f"The LP of problem (2) would have about {int(nnz)} non-zeros, above max_nnz={max_nnz}. "
                          "Use the online learners (Algorithm 1/2) or solve_lp_colgen.")
    t0 = time.perf_counter()
    res, m, _ = _lp_restricted(D, y, w, delta, l1, B)
    secs = time.perf_counter() - t0
    if m is None:
        m = np.zeros(D.shape[1])
    return LPResult(m=m, objective=float(res.fun) if res.fun is not None else math.nan, status=int(res.status),
                    seconds=secs, n_columns=D.shape[1], rounds=1, message=str(res.message))


def _features_for_masks(X: np.ndarray, masks: np.ndarray, n: int, aggregation: str) -> np.ndarray:
    """φ_S(x) for the given coalitions only, shape (b, len(masks)); chunked over coalitions."""
    member = ((masks[:, None] >> np.arange(n)[None, :]) & 1).astype(bool)        # (k, n)
    out = np.empty((X.shape[0], masks.size))
    step = max(1, (1 << 22) // max(1, X.shape[0] * n))
    for s in range(0, masks.size, step):
        M = member[s:s + step][None, :, :]
        if aggregation == "choquet":
            out[:, s:s + step] = np.where(M, X[:, None, :], np.inf).min(axis=2)
        else:
            out[:, s:s + step] = np.where(M, X[:, None, :], 1.0).prod(axis=2)
    return out


def solve_lp_colgen(index, UL: np.ndarray, UR: np.ndarray, y: np.ndarray, delta: float, l1: float,
                    aggregation: str = "choquet", weights: np.ndarray | None = None, add: int = 512,
                    tol: float = 1e-7, max_rounds: int = 100) -> LPResult:
    """Problem (2) solved exactly by column generation, without forming the (T, d) difference matrix.

    The ℓ1 term makes the LP optimum sparse, so the restricted LP over a small working set W of
    coalitions is solved with HiGHS, and the dual prices π of its preference rows price every
    other coalition: the reduced costs of m⁺_S and m⁻_S are λ ∓ u_S with
    ``u_S = Σ_t a_t (φ_S(x_t) − φ_S(y_t))`` (a_t = −y_t π_t for strict rows, π⁺_t − π⁻_t for
    indifferences), computed for all S by streaming blocks of φ (the subset DP). Columns with
    |u_S| > λ + tol enter (the ``add`` most violated per round); when none is left the restricted
    optimum is the optimum of the full LP (LP duality), which the tests check against
    :func:`solve_lp`.

    Parameters
    ----------
    index : SubsetIndex
    UL, UR : ndarray of shape (T, n)
        Scaled criteria of the left and right items.
    y : ndarray of shape (T,)
        Outcomes in {+1, −1, 0}.
    delta, l1 : float
    aggregation : {"choquet", "multilinear"}
    weights : ndarray of shape (T,), optional
    add : int
        Columns added per round.
    tol : float
        Reduced-cost tolerance.
    max_rounds : int

    Returns
    -------
    LPResult
        ``n_columns`` is |W| at the end, ``rounds`` the number of restricted solves,
        ``extra["max_violation"]`` the final max_S |u_S| − λ (≤ tol at optimality).
    """
    t0 = time.perf_counter()
    y = np.asarray(y).astype(np.int64)
    T = y.size
    w = np.ones(T) if weights is None else np.asarray(weights, dtype=np.float64)
    n = index.n
    cols = np.zeros(0, dtype=np.int64)
    DW = np.zeros((T, 0))
    width = index.feature_buffer_shape(1)[1]
    blk = max(1, (1 << 21) // width)
    buf = np.empty(index.feature_buffer_shape(2 * blk))
    res = None
    m_w = np.zeros(0)
    worst = math.inf
    for rnd in range(1, max_rounds + 1):
        res, m_w, (P, I) = _lp_restricted(DW, y, w, delta, l1, None)
        if m_w is None:
            break
        mg = res.ineqlin.marginals            # ∂obj/∂b_ub ≤ 0, rows: P, I (upper), I (lower)
        a = np.zeros(T)
        a[P] = -y[P] * (-mg[:P.size])
        if I.size:
            a[I] = (-mg[P.size:P.size + I.size]) - (-mg[P.size + I.size:])
        # u = Φ(UL)ᵀ a − Φ(UR)ᵀ a over all coalitions, streamed by blocks of rows
        u = np.zeros(index.d)
        for s in range(0, T, blk):
            b = min(blk, T - s)
            F = index.features(np.concatenate([UL[s:s + b], UR[s:s + b]]), aggregation, out=buf[:2 * b])
            u += a[s:s + b] @ F[:b] - a[s:s + b] @ F[b:]
        viol = np.abs(u) - l1
        viol[cols] = -np.inf
        worst = float(viol.max()) if viol.size else -math.inf
        if worst <= tol:
            break
        new = np.argsort(-viol)[:add]
        new = new[viol[new] > tol]
        newD = _features_for_masks(UL, index.masks[new], n, aggregation) - \
            _features_for_masks(UR, index.masks[new], n, aggregation)
        cols = np.concatenate([cols, new])
        DW = np.concatenate([DW, newD], axis=1)
    m = np.zeros(index.d)
    if m_w is not None:
        m[cols] = m_w
    return LPResult(m=m, objective=float(res.fun) if res is not None and res.fun is not None else math.nan,
                    status=int(res.status) if res is not None else -1, seconds=time.perf_counter() - t0,
                    n_columns=int(cols.size), rounds=rnd, message=str(res.message) if res is not None else "",
                    extra={"max_violation": worst})
