"""Coalitions and Shapley-value solvers shared by the Shapley-type explainers.

A *coalition* is a subset S ⊆ Ω = {0, …, d−1} of players, stored as a row of a boolean matrix
``Z`` of shape (n_coalitions, d); integer ``i`` encodes the coalition whose bit ``j`` is set when
player ``j`` is in S (the base-2 map of Hu et al. 2022, Appendix A, Algorithm 2).

Given the values ν(S) of a cooperative game on the rows of ``Z`` (for one or many games at once),
:class:`CoalitionPlan` turns them into Shapley values, either

* **exactly** by the Shapley formula (Hu et al. 2022, Eq. 3) when all 2^d coalitions are enumerated, or
* by **Kernel SHAP** regression (Lundberg & Lee 2017; Hu et al. 2022, Algorithm 1 line 10) on
  unique sampled coalitions (Algorithm 2) with the Shapley kernel weights
  w(S) = (d−1) / (C(d,|S|) |S| (d−|S|)), solved as a weighted least-squares problem with a
  Cholesky factorisation (Appendix A, "Stabilizing the Shapley value estimation") and the
  efficiency axiom Σφ = ν(Ω) − ν(∅) imposed as an equality constraint (Lagrange multiplier).

Everything here is model-agnostic numpy; the value functions live with each explainer.

References
----------
Hu, Chau, Ferrando Huertas & Sejdinovic (2022). *Explaining Preferences with Shapley Values*,
Section 2.2 Eq. 3, Algorithm 1, Appendix A Algorithm 2.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg

from learners.exceptions import BudgetError, InvalidInputError, check_param

__all__ = [
    "CoalitionPlan",
    "all_coalitions",
    "coalitions_from_integers",
    "constrained_wls",
    "exact_shapley",
    "plan_coalitions",
    "popcount",
    "sample_unique_coalitions",
    "shapley_kernel_weights",
    "shapley_of_game",
    "shapley_size_weights",
]

#: Largest number of players for which coalitions are sampled as integers (Algorithm 2).
_MAX_INT_PLAYERS = 62
#: Largest number of players for which exact enumeration is ever attempted.
_MAX_EXACT_PLAYERS = 24


def coalitions_from_integers(ints, d: int) -> np.ndarray:
    """Base-2 representation of coalition integers (Hu et al. 2022, Algorithm 2, ``base2``).

    Parameters
    ----------
    ints : array-like of int, shape (n,)
        Integers in [0, 2^d).
    d : int
        Number of players.

    Returns
    -------
    ndarray of shape (n, d), bool
        Row ``i`` has column ``j`` set when bit ``j`` of ``ints[i]`` is 1.

    Examples
    --------
    >>> coalitions_from_integers([0, 5], 3).astype(int).tolist()
    [[0, 0, 0], [1, 0, 1]]
    """
    ints = np.asarray(ints, dtype=np.int64).reshape(-1)
    bits = np.arange(d, dtype=np.int64)
    return ((ints[:, None] >> bits[None, :]) & 1).astype(bool)


def popcount(codes) -> np.ndarray:
    """Number of set bits (coalition size) of each non-negative integer code; int64 array.

    Examples
    --------
    >>> popcount([0, 5, 7]).tolist()
    [0, 2, 3]
    """
    a = np.asarray(codes, dtype=np.int64).copy()
    out = np.zeros_like(a)
    while np.any(a):
        out += a & 1
        a >>= 1
    return out


def shapley_size_weights(d: int) -> np.ndarray:
    """Shapley weight of a coalition by its size: w(s) = s!(d−s−1)!/d! = 1/(d·C(d−1, s)), s = 0..d−1.

    The weight of the marginal contribution ν(S ∪ {j}) − ν(S) of a coalition S ∌ j of size s in the
    Shapley formula (Hu et al. 2022, Eq. 3); also the per-player coalition distribution of the
    Shapley value as a semivalue (Franceschi et al. 2024, Eq. 2) and the weight of line 8 of
    Algorithm 1 in Pliatsika et al. (2024).

    Examples
    --------
    >>> shapley_size_weights(3).tolist()
    [0.3333333333333333, 0.16666666666666666, 0.3333333333333333]
    """
    return np.array([1.0 / (d * math.comb(d - 1, s)) for s in range(d)], dtype=np.float64)


def all_coalitions(d: int) -> np.ndarray:
    """All 2^d coalitions, row ``i`` being the base-2 representation of ``i``.

    Raises
    ------
    BudgetError
        If ``d`` exceeds 24 (more than 16.7 million coalitions).
    """
    if d > _MAX_EXACT_PLAYERS:
        raise BudgetError(f"Exact enumeration of 2^{d} coalitions is too large; "
                          f"use at most {_MAX_EXACT_PLAYERS} players or sampled coalitions.")
    return coalitions_from_integers(np.arange(2 ** d, dtype=np.int64), d)


def shapley_kernel_weights(sizes, d: int) -> np.ndarray:
    """Kernel SHAP weights w(s) = (d−1) / (C(d,s) s (d−s)); ``inf`` for s ∈ {0, d}.

    Parameters
    ----------
    sizes : array-like of int
        Coalition sizes |S|.
    d : int
        Number of players.

    Returns
    -------
    ndarray of float64, same shape as ``sizes``.

    Examples
    --------
    >>> shapley_kernel_weights([1, 2], 3).tolist()
    [0.3333333333333333, 0.3333333333333333]
    """
    s = np.asarray(sizes, dtype=np.int64)
    out = np.full(s.shape, np.inf)
    inner = (s > 0) & (s < d)
    binom = np.array([math.comb(d, int(k)) for k in s[inner].reshape(-1)], dtype=np.float64)
    out[inner] = (d - 1) / (binom * s[inner] * (d - s[inner]))
    return out


def sample_unique_coalitions(d: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` distinct coalitions, excluding ∅ and Ω (Hu et al. 2022, Appendix A, Algorithm 2).

    Integers are drawn without replacement from [1, 2^d − 2] and converted to base 2, so every
    proper non-empty coalition has the same inclusion probability and no pairwise comparison of
    samples is needed. For d > 62 (integers overflow int64) binary rows are drawn i.i.d. and
    de-duplicated instead.

    Parameters
    ----------
    d : int
        Number of players, d ≥ 2.
    n : int
        Number of coalitions, 1 ≤ n ≤ 2^d − 2.
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of shape (n, d), bool

    Raises
    ------
    InvalidParameterError
        If ``n`` is out of range.
    """
    check_param("sample_unique_coalitions", "d", d, isinstance(d, (int, np.integer)) and d >= 2, "an int >= 2")
    n_proper = 2.0 ** d - 2
    check_param("sample_unique_coalitions", "n", n, isinstance(n, (int, np.integer)) and 1 <= n <= n_proper,
                f"an int in [1, 2^d - 2 = {n_proper:.0f}]")
    if d <= _MAX_INT_PLAYERS:
        ints = rng.choice(2 ** d - 2, size=n, replace=False) + 1
        return coalitions_from_integers(np.sort(ints), d)
    rows = np.zeros((0, d), dtype=bool)
    while len(rows) < n:
        draw = rng.random((2 * n, d)) < 0.5
        draw = draw[(draw.any(axis=1)) & (~draw.all(axis=1))]
        rows = np.unique(np.concatenate([rows, draw]), axis=0)
    return rows[rng.permutation(len(rows))[:n]]


def exact_shapley(values: np.ndarray, d: int) -> np.ndarray:
    """Shapley values from the values of all 2^d coalitions (Hu et al. 2022, Eq. 3).

    φ_j = Σ_{S ⊆ Ω∖{j}} |S|!(d−|S|−1)!/d! · (ν(S ∪ {j}) − ν(S)).

    Parameters
    ----------
    values : ndarray of shape (2^d,) or (2^d, n_games)
        ``values[i]`` is ν of the coalition with integer code ``i`` (see :func:`all_coalitions`).
    d : int

    Returns
    -------
    ndarray of shape (d,) or (n_games, d)

    Examples
    --------
    >>> v = np.array([0.0, 1.0, 2.0, 4.0])     # ν(∅), ν({0}), ν({1}), ν({0,1})
    >>> exact_shapley(v, 2).tolist()
    [1.5, 2.5]
    """
    v = np.asarray(values, dtype=np.float64)
    one = v.ndim == 1
    v = v.reshape(v.shape[0], -1)
    if v.shape[0] != 2 ** d:
        raise InvalidInputError(f"exact_shapley needs 2^d = {2 ** d} coalition values; got {v.shape[0]}.")
    codes = np.arange(2 ** d, dtype=np.int64)
    pop = popcount(codes)
    w = np.append(shapley_size_weights(d), 0.0)
    phi = np.empty((v.shape[1], d))
    for j in range(d):
        without = codes[((codes >> j) & 1) == 0]
        phi[:, j] = (w[pop[without]][:, None] * (v[without | (1 << j)] - v[without])).sum(axis=0)
    return phi[0] if one else phi


def constrained_wls(Z: np.ndarray, y: np.ndarray, weights: np.ndarray, total: np.ndarray,
                    jitter: float = 1e-10) -> np.ndarray:
    """Weighted least squares with the efficiency constraint, by Cholesky (Hu et al. 2022, Alg. 1 l.10).

    Solves, for each game b,  min_φ Σ_i w_i (y_ib − z_iᵀφ)²  subject to  1ᵀφ = total_b,
    i.e. φ = A⁻¹(b − μ 1) with A = ZᵀWZ, b = ZᵀW y and μ = (1ᵀA⁻¹b − total)/(1ᵀA⁻¹1).

    Parameters
    ----------
    Z : ndarray of shape (n_coalitions, d), bool or {0, 1}
        Coalitions, excluding ∅ and Ω.
    y : ndarray of shape (n_coalitions, n_games)
        ν(S) − ν(∅) for every coalition and game.
    weights : ndarray of shape (n_coalitions,)
        Positive regression weights (Kernel SHAP weights).
    total : ndarray of shape (n_games,)
        ν(Ω) − ν(∅) per game.
    jitter : float
        Relative ridge added to A's diagonal (times its mean diagonal) only if A is not
        numerically positive definite (too few coalitions to identify every player).

    Returns
    -------
    ndarray of shape (n_games, d), float64
    """
    Z = np.asarray(Z, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64).reshape(Z.shape[0], -1)
    w = np.asarray(weights, dtype=np.float64)
    total = np.asarray(total, dtype=np.float64).reshape(-1)
    d = Z.shape[1]
    A = Z.T @ (w[:, None] * Z)
    b = Z.T @ (w[:, None] * y)
    scale = float(np.mean(np.diag(A))) or 1.0
    for eps in (0.0, jitter, 1e-8, 1e-6, 1e-4):
        try:
            c = scipy.linalg.cho_factor(A + eps * scale * np.eye(d), lower=True, check_finite=False)
            break
        except np.linalg.LinAlgError:
            continue
    else:  # pragma: no cover - A + 1e-4·scale·I is always positive definite
        raise InvalidInputError("Kernel SHAP normal equations are singular; increase max_coalitions.")
    Ainv_b = scipy.linalg.cho_solve(c, b, check_finite=False)
    Ainv_1 = scipy.linalg.cho_solve(c, np.ones(d), check_finite=False)
    mu = (Ainv_b.sum(axis=0) - total) / Ainv_1.sum()
    return (Ainv_b - Ainv_1[:, None] * mu[None, :]).T


@dataclass
class CoalitionPlan:
    """The coalitions a Shapley estimate evaluates, and how it turns values into φ.

    Attributes
    ----------
    d : int
        Number of players.
    masks : ndarray of shape (n_coalitions, d), bool
        Rows to evaluate. ``exact``: all 2^d coalitions in integer order. Sampled: row 0 is ∅,
        row 1 is Ω, then the sampled coalitions.
    exact : bool
    """

    d: int
    masks: np.ndarray
    exact: bool
    row_scale: np.ndarray | None = None
    n_fixed: int = 0
    pair_strata: np.ndarray | None = None
    stratum_pairs: np.ndarray | None = None
    regression_adjust: bool = True
    _fit: dict | None = field(default=None, repr=False, compare=False)

    @property
    def n_coalitions(self) -> int:
        """Number of coalitions evaluated (including ∅ and Ω)."""
        return int(self.masks.shape[0])

    @property
    def empty_index(self) -> int:
        """Row of ∅ in :attr:`masks`."""
        return 0

    @property
    def full_index(self) -> int:
        """Row of Ω in :attr:`masks`."""
        return self.n_coalitions - 1 if self.exact else 1

    def solve(self, values: np.ndarray) -> np.ndarray:
        """Shapley values of the games whose coalition values are ``values``.

        Parameters
        ----------
        values : ndarray of shape (n_coalitions, n_games)

        Returns
        -------
        ndarray of shape (n_games, d); each row sums to ν(Ω) − ν(∅) (efficiency).
        """
        v = np.asarray(values, dtype=np.float64).reshape(self.n_coalitions, -1)
        if self.exact:
            return exact_shapley(v, self.d)
        v, phi_f = self._adjusted(v)
        v0, v1 = v[0], v[1]
        Z = self.masks[2:]
        return phi_f + constrained_wls(Z, v[2:] - v0[None, :], self._weights(), v1 - v0)

    def _adjusted(self, v: np.ndarray, want_leverage: bool = False):
        """Regression adjustment (Witter, Musco et al. 2025, *Regression-adjusted Monte Carlo estimators
        for Shapley values*): fit a game with pairwise interactions f̂(S) = c + Σ a_i + Σ_{i<j∈S} b_ij by
        weighted least squares on the evaluated coalitions; its Shapley values a_i + ½Σ_j b_ij are
        exact, and Kernel SHAP then only estimates those of the residual game ν − f̂. Returns the
        residual values and φ(f̂) (zeros, and ``v`` unchanged, when the plan has fewer than 2.5
        coalitions per parameter or ``regression_adjust`` is off)."""
        d = self.d
        terms = [c for k in (1, 2, 3) for c in itertools.combinations(range(d), k)]
        n_par = 1 + len(terms)
        zero = np.zeros((v.shape[1], d))
        if not self.regression_adjust or self.n_coalitions < 2.5 * n_par:
            return (v, zero, np.zeros(v.shape[0])) if want_leverage else (v, zero)
        if self._fit is None:                       # depends on the plan only: once per plan
            Z = self.masks.astype(np.float64)
            X = np.ones((Z.shape[0], n_par))
            for t, c in enumerate(terms):
                X[:, 1 + t] = Z[:, list(c)].prod(axis=1)
            w = self._weights()
            w = np.concatenate([[w.max(), w.max()], w])
            A = X.T @ (w[:, None] * X)
            A[np.diag_indices_from(A)] += 1e-9 * np.trace(A) / n_par
            share = np.zeros((d, n_par))                                       # Shapley of a term: b/|term| each
            for t, c in enumerate(terms):
                share[list(c), 1 + t] = 1.0 / len(c)
            self._fit = {"X": X, "w": w, "L": np.linalg.cholesky(A), "share": share}
        f = self._fit
        X, L = f["X"], f["L"]
        rhs = X.T @ (f["w"][:, None] * v)
        beta = scipy.linalg.cho_solve((L, True), rhs, check_finite=False)   # (n_par, n_games)
        out = (v - X @ beta, (f["share"] @ beta).T)
        if not want_leverage:
            return out
        if "h" not in f:                                                       # leverage of each row
            B = scipy.linalg.solve_triangular(L, X.T, lower=True, check_finite=False)
            f["h"] = np.clip(f["w"] * np.einsum("pk,pk->k", B, B), 0.0, 0.99)
        return out + (f["h"],)

    def _weights(self) -> np.ndarray:
        """Kernel SHAP weight of each sampled row, times its inverse inclusion rate (``row_scale``)."""
        w = shapley_kernel_weights(self.masks[2:].sum(axis=1), self.d)
        return w if self.row_scale is None else w * self.row_scale

    def stderr(self, values: np.ndarray) -> np.ndarray:
        """Standard errors of the sampled (Kernel SHAP) Shapley values; zeros when exact.

        Only the drawn coalitions are random: the enumerated sizes enter the normal equations
        A = ZᵀWZ, b = ZᵀWy exactly, the drawn complementary pairs through a Horvitz–Thompson
        estimate of their class's totals (random sampling of pairs without replacement per class). The
        delta method gives φ̂ − φ ≈ M (b̂ − Âφ) with M = P A⁻¹ and P the projection of the efficiency
        constraint, i.e. M times the estimated total of u_S = w_S z_S r_S (r the residual of the
        additive fit). Its variance is Σ_h N_h² (1 − n_h/N_h) s_h²/n_h, s_h² the sample variance over drawn
        pairs of M(u_S + u_{Ω∖S}), summed over the size classes the pairs are drawn in (stratified
        sampling; Covert & Lee 2021, paired sampling; Cochran 1977, Eq. 5.6 with the finite-population
        correction). Plans without pair information (uniform draws) fall back to
        the heteroscedasticity-consistent sandwich over every row.

        Parameters
        ----------
        values : ndarray of shape (n_coalitions, n_games)

        Returns
        -------
        ndarray of shape (n_games, d)
        """
        v = np.asarray(values, dtype=np.float64).reshape(self.n_coalitions, -1)
        if self.exact:
            return np.zeros((v.shape[1], self.d))
        v, _, lev = self._adjusted(v, want_leverage=True)             # φ(f̂) is exact: only the residual game varies
        Z = self.masks[2:].astype(np.float64)
        w = self._weights()
        y = v[2:] - v[0][None, :]
        r = y - Z @ constrained_wls(Z, y, w, v[1] - v[0]).T          # (K, n_games) residuals
        r = r / (1.0 - lev[2:, None])                                 # HC3: the fit of f̂ shrank them
        drawn = Z.shape[0] - self.n_fixed
        n_par = self._fit["X"].shape[1] if (self._fit is not None and lev.any()) else 0
        if n_par:                                                     # and the residual degrees of freedom
            r = r * np.sqrt(drawn / max(drawn - n_par, 1.0))
        A = Z.T @ (w[:, None] * Z)
        Ainv = np.linalg.pinv(A)
        a1 = Ainv.sum(axis=1)
        M = Ainv - np.outer(a1, a1) / a1.sum()                        # P A⁻¹ (symmetric)
        G = (w[:, None] * Z) @ M                                      # (K, d)
        if self.pair_strata is None:
            return np.sqrt((r ** 2).T @ (G ** 2))
        k0 = self.n_fixed
        Gs, rs = G[k0:], r[k0:]
        # u of each drawn pair, per game: (n_games, n_pairs, d), without the inverse inclusion rate
        U = (rs[0::2].T[:, :, None] * Gs[0::2][None] + rs[1::2].T[:, :, None] * Gs[1::2][None]) / self.row_scale[k0::2][None, :, None]
        var = np.zeros((U.shape[0], self.d))
        for h, Nh in enumerate(self.stratum_pairs):
            sel = self.pair_strata == h
            nh = int(sel.sum())
            if nh == 0 or nh >= Nh:
                continue                                  # an empty or fully drawn class adds no variance
            if nh < 2:
                return np.full((v.shape[1], self.d), np.inf)
            var += Nh ** 2 * (1.0 - nh / Nh) * U[:, sel].var(axis=1, ddof=1) / nh
        return np.sqrt(var)


def plan_coalitions(d: int, max_coalitions: int = 2048, rng: np.random.Generator | None = None,
                    stratified: bool = True) -> CoalitionPlan:
    """Exact enumeration when 2^d ≤ ``max_coalitions``, else ∅, Ω and unique sampled coalitions.

    Parameters
    ----------
    d : int
        Number of players (≥ 1).
    max_coalitions : int
        Coalition budget (≥ 4 when sampling is needed; ∅ and Ω count towards it).
    rng : numpy.random.Generator, optional
        Source of randomness for sampling (``default_rng(0)`` if omitted).
    stratified : bool, default True
        Fill whole coalition sizes in order of Kernel SHAP weight (1 and d−1, then 2 and d−2, …) and
        draw the rest uniformly among the remaining sizes, each drawn row weighted by its inverse
        inclusion rate (Lundberg & Lee's KernelExplainer). ``False``: unique coalitions drawn
        uniformly among all proper ones (Hu et al. 2022, Appendix A, Algorithm 2). At half the
        coalitions of d = 10 the stratified plan's error is far smaller (bench/explain_wide.py).

    Returns
    -------
    CoalitionPlan

    Examples
    --------
    >>> p = plan_coalitions(3, 64)
    >>> p.exact, p.n_coalitions
    (True, 8)
    >>> plan_coalitions(10, 100).n_coalitions
    100
    """
    check_param("plan_coalitions", "d", d, isinstance(d, (int, np.integer)) and d >= 1, "an int >= 1")
    check_param("plan_coalitions", "max_coalitions", max_coalitions,
                isinstance(max_coalitions, (int, np.integer)) and max_coalitions >= 4, "an int >= 4")
    if d <= _MAX_EXACT_PLAYERS and 2 ** d <= max_coalitions:
        return CoalitionPlan(d=d, masks=all_coalitions(d), exact=True)
    rng = np.random.default_rng(0) if rng is None else rng
    if not stratified:
        sampled = sample_unique_coalitions(d, int(min(max_coalitions - 2, 2.0 ** d - 2)), rng)
        masks = np.concatenate([np.zeros((1, d), bool), np.ones((1, d), bool), sampled])
        return CoalitionPlan(d=d, masks=masks, exact=False)
    sampled, scale, n_fixed, strata, pool = _size_stratified_coalitions(d, int(max_coalitions - 2), rng)
    masks = np.concatenate([np.zeros((1, d), bool), np.ones((1, d), bool), sampled])
    return CoalitionPlan(d=d, masks=masks, exact=False, row_scale=scale, n_fixed=n_fixed, pair_strata=strata,
                         stratum_pairs=pool)


def _size_stratified_coalitions(d: int, n: int, rng: np.random.Generator, enumerate_share: float = 0.5,
                                allocation: str = "kernel"):
    """``n`` coalitions: whole sizes in order of Kernel SHAP weight (1 and d−1, then 2 and d−2, …),
    the rest drawn as complementary pairs (S, Ω∖S) without replacement within each remaining size
    class {k, d−k} (Covert & Lee 2021, *Improving KernelSHAP*, paired sampling). Whole sizes take at
    most ``enumerate_share`` of the budget; the drawn pairs are allocated to the size classes in
    proportion to their Kernel SHAP mass 1/(k(d−k)) (``allocation="kernel"``) or to their number of
    coalitions (``"uniform"``: uniform pairs over all remaining sizes). On a logistic game with
    pairwise interactions (tests/test_explain_sampling.py) these choices gave the smallest errors at
    d = 8, 10, 12 with half the coalitions.

    Returns the rows (enumerated first, then each drawn S followed by Ω∖S), each row's inverse
    inclusion rate (1 for the enumerated sizes, #pairs in its class / #drawn in its class) so that
    the weighted normal equations estimate those of full enumeration without bias, the number of
    enumerated rows, and per drawn pair its class and per class its number of pairs (``None`` when
    nothing is drawn).
    """
    import itertools

    rows, left = [], n
    pairs = [(k, d - k) for k in range(1, d // 2 + 1)]
    rest: list[tuple[int, int]] = []
    for i, (a, b) in enumerate(pairs):
        sizes = [a] if a == b else [a, b]
        count = sum(math.comb(d, k) for k in sizes)
        if count > left or n - left + count > enumerate_share * n:
            rest = pairs[i:]
            break
        for k in sizes:
            for c in itertools.combinations(range(d), k):
                r = np.zeros(d, bool)
                r[list(c)] = True
                rows.append(r)
        left -= count
    n_fixed = len(rows)
    scale = [1.0] * n_fixed
    n_pairs = left // 2
    if not rest or n_pairs < 1:
        return np.array(rows, dtype=bool).reshape(-1, d), np.array(scale), n_fixed, None, None
    pool = np.array([math.comb(d, a) if a != b else math.comb(d, a) // 2 for a, b in rest], dtype=np.float64)
    mass = np.array([1.0 / (a * b) for a, b in rest]) if allocation == "kernel" else pool.copy()
    alloc = np.zeros(len(rest), dtype=np.int64)
    todo = n_pairs
    open_ = np.ones(len(rest), bool)
    while todo > 0 and open_.any():                 # proportional, capped at the class size
        share = mass * open_ / (mass * open_).sum() * todo
        add = np.minimum(np.floor(share).astype(np.int64), (pool - alloc).astype(np.int64))
        if add.sum() == 0:
            j = int(np.argmax(np.where(open_, share - np.floor(share), -1.0)))
            add[j] = 1
        alloc += add
        todo -= int(add.sum())
        open_ = alloc < pool
    drawn, strata = [], []
    for h, ((a, b), m) in enumerate(zip(rest, alloc)):
        seen: set = set()
        while len(seen) < m:
            r = np.zeros(d, bool)
            r[rng.choice(d, size=a, replace=False)] = True
            if r[0]:                                                  # canonical member: 0 ∉ S
                r = ~r
            key = r.tobytes()
            if key not in seen:
                seen.add(key)
                drawn += [r, ~r]
                strata.append(h)
                scale += [pool[h] / m] * 2
    rows += drawn
    return (np.array(rows, dtype=bool).reshape(-1, d), np.array(scale), n_fixed, np.array(strata, dtype=np.int64),
            pool)


def shapley_of_game(game, d: int, max_coalitions: int, rng: np.random.Generator | None = None):
    """Shapley values of a batch of scalar games given as a function of coalition codes.

    Exact enumeration when 2^d ≤ ``max_coalitions``, else the paired, size-stratified Kernel SHAP
    plan of :func:`plan_coalitions` (exact efficiency, honest standard errors from
    :meth:`CoalitionPlan.stderr`).

    Parameters
    ----------
    game : callable
        ``game(codes (K,) int64) -> values (B, K)``, bit ``j`` of a code set when player ``j`` is in
        the coalition.
    d : int
        Number of players (≤ 62).
    max_coalitions : int
        Evaluation budget, ∅ and Ω included.
    rng : numpy.random.Generator, optional

    Returns
    -------
    phi, stderr : ndarray of shape (B, d)
    plan : CoalitionPlan

    Examples
    --------
    >>> w = np.array([1.0, 2.0, 3.0])
    >>> game = lambda codes: (((codes[:, None] >> np.arange(3)) & 1) @ w)[None, :]
    >>> phi, se, plan = shapley_of_game(game, 3, 8)
    >>> phi.round(12).tolist(), plan.exact
    ([[1.0, 2.0, 3.0]], True)
    """
    plan = plan_coalitions(d, max_coalitions, rng)
    codes = plan.masks.astype(np.int64) @ (np.int64(1) << np.arange(d, dtype=np.int64))
    V = np.asarray(game(codes), dtype=np.float64)
    V = V.reshape(-1, codes.size).T                                   # (K, B)
    return plan.solve(V), plan.stderr(V), plan
