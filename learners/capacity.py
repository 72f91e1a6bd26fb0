"""Online capacity learners: Choquet integral / multilinear model in Möbius coordinates.

Implements Herin, Perny & Sokolovska, *Online Learning of Capacity-Based Preference Models*,
IJCAI 2024:

* the model F(x) = Σ_S m(S) φ_S(x_S) (Section 2, Equation (1)) with φ_S = min (Choquet) or
  Π (multilinear), over all coalitions or a k-additive truncation;
* the hinge loss l_t with discrimination threshold δ (problem (2), Section 3.1);
* :class:`CapacityRDA` — Algorithm 1 (RDA, closed form (5)) and, with ``constraints``,
  Algorithm 2 (ADMM-RDA, Section 4.2) which reduces exactly to Algorithm 1 when B is empty;
* :class:`CapacityFOBOS` — the FOBOS baseline of Section 5 (Duchi & Singer 2009);
* an online min-max scaler for criteria on arbitrary scales and "less is better" criteria.

Merging (:meth:`CapacityRDA.__iadd__`): Algorithm 1's state is the subgradient sum G_t and the
round count t; ``a += b`` sets G = G_a + G_b, t = t_a + t_b (so ḡ is the count-weighted average
of the two ḡ's) and recomputes m by the closed form at t. This is *exactly* the RDA iterate of
the concatenated stream (in any order) whenever each subgradient g_τ is the same vector in the
partition run as in the union run — e.g. while every hinge is active (margins below δ, the usual
regime with γ = 10³), or for any fixed evaluation points. In general g_τ depends on the iterate
path, so the merge is an approximation of the union run (still a valid dual average of
subgradients of the union's losses, evaluated at other points). ADMM-RDA and FOBOS keep
path-dependent last iterates (µ_t, z_t, m_t) with no additive sufficient statistic, so merging
them raises :class:`~learners.exceptions.InvalidParameterError`.

Examples
--------
>>> import numpy as np
>>> model = CapacityRDA(criteria=["price", "quality"], decreasing=["price"])
>>> rng = np.random.default_rng(0)
>>> for _ in range(200):
...     a, b = rng.random(2), rng.random(2)
...     fa, fb = min(1 - a[0], a[1]), min(1 - b[0], b[1])
...     model.learn_one({"price": a[0], "quality": a[1]}, {"price": b[0], "quality": b[1]}, 1 if fa > fb else -1)
>>> model.predict_one({"price": 0.1, "quality": 0.9}, {"price": 0.9, "quality": 0.1})
1
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from learners.capacity_constraints import CONSTRAINTS, ConstraintOperator, constraint_matrix
from learners.capacity_base import (
    MAX_IMPLICIT_N,
    MinMaxScaler,
    _CapacityLearner,
    _clip,
    _is_real,
    choquet_from_capacity,
)
from learners.capacity_solvers import ADMMState, admm_rda_step, fobos_step, rda_from_sum
from learners.exceptions import BudgetError, InvalidParameterError, check_param

__all__ = ["CapacityFOBOS", "CapacityRDA", "MinMaxScaler", "choquet_from_capacity"]


class CapacityRDA(_CapacityLearner):
    """Online capacity learning by RDA (Algorithm 1) or, with ``constraints``, ADMM-RDA (Algorithm 2).

    Model: F(x) = Σ_{S ⊆ N, S ≠ ∅} m(S) φ_S(x_S) (Equation (1)), φ_S = min (``"choquet"``) or Π
    (``"multilinear"``), x ∈ [0, 1]^n. Each :meth:`learn_one` is one round t of the algorithm:

    1. d_t = φ(x_left) − φ(x_right); margin ⟨m_t, d_t⟩;
    2. subgradient g_t of the hinge loss l_t exactly as Section 3.2 states it
       (:func:`~learners.capacity_solvers.hinge_subgradient_coef`);
    3. G_t = G_{t−1} + g_t (so ḡ_t = G_t / t);
    4. Algorithm 1: m_{t+1} = −(√t/γ)[|ḡ_t| − λ]₊ sign(ḡ_t) (Equation (5));
       Algorithm 2: lines 6–9 with the sparse constraint matrix B and penalty ρ.

    No normalisation v(N) = 1 is imposed (the paper learns on M = R^d; only the direction of m
    matters for preferences). Use :meth:`capacity` with ``normalize=True`` to read the normalised
    capacity.

    Parameters
    ----------
    criteria : sequence of str
        Criterion names (keys of the item dicts), n = len(criteria).
    aggregation : {"choquet", "multilinear"}, default "choquet"
    k_additive : int or None, default None
        Keep only coalitions of size ≤ k (None: all 2**n − 1).
    l1 : float, default 0.01
        ℓ1 strength λ ≥ 0.
    gamma : float, default 1e3
        γ > 0 of the strongly convex term η_t‖m‖² with η_t = γ/(2√t).
    delta : float, default 0.01
        Discrimination threshold δ > 0 of problem (2).
    scaler : {"none", "minmax"}, default "none"
        "none" requires inputs in [0, 1]; "minmax" rescales online by the ranges seen so far.
    decreasing : sequence of str, default ()
        Criteria where less is better: x ↦ 1 − x after scaling.
    constraints : sequence of {"monotone", "supermodular"}, default ()
        Rows of B m ≤ 0 (Section 4). Empty: Algorithm 1; otherwise Algorithm 2.
    rho : float, default 1.0
        ADMM penalty ρ > 0 (Algorithm 2).
    max_nnz : int, default 30_000_000
        Budget on non-zeros of the sparse B (n·3**(n−1) for monotonicity).
    constraint_backend : {"auto", "sparse", "implicit"}, default "auto"
        B as a scipy.sparse CSR matrix, or matrix-free through fast Möbius transforms
        (:class:`~learners.capacity_constraints.ConstraintOperator`, O(n 2**n) per product, no storage);
        "auto" uses the sparse matrix when it fits ``max_nnz``.

    Raises
    ------
    InvalidParameterError
        Any parameter outside its domain.
    BudgetError
        If the coalition index or B exceeds its budget.

    References
    ----------
    Herin, Perny, Sokolovska (2024), IJCAI, Sections 3.2 (Algorithm 1, Equation (5)) and 4.2
    (Algorithm 2); Xiao (2009), *Dual averaging methods for regularized stochastic learning*.
    """

    _algorithm = "rda"

    def __init__(self, criteria: Sequence[str], aggregation: str = "choquet", k_additive: int | None = None,
                 l1: float = 0.01, gamma: float = 1e3, delta: float = 0.01, scaler: str = "none",
                 decreasing: Sequence[str] = (), constraints: Sequence[str] = (), rho: float = 1.0,
                 max_nnz: int = 30_000_000, constraint_backend: str = "auto") -> None:
        super().__init__(criteria, aggregation, k_additive, l1, gamma, delta, scaler, decreasing)
        check_param("CapacityRDA", "constraint_backend", constraint_backend,
                    constraint_backend in ("auto", "sparse", "implicit"), "one of ('auto', 'sparse', 'implicit')")
        check_param("CapacityRDA", "constraints", constraints,
                    not isinstance(constraints, str) and set(constraints) <= set(CONSTRAINTS),
                    f"a sequence of names among {CONSTRAINTS}")
        check_param("CapacityRDA", "rho", rho, _is_real(rho) and 0 < rho < math.inf, "a float in the range (0, inf)")
        self.constraints = [c for c in CONSTRAINTS if c in constraints]
        self.rho = float(rho)
        self.max_nnz = int(max_nnz)
        self.constraint_backend = constraint_backend
        self._G = np.zeros(self._index.d)
        if self.constraints:
            self._algorithm = "admm-rda"
            B = None
            if constraint_backend in ("auto", "sparse"):
                try:
                    B = constraint_matrix(self._index, self.constraints, max_nnz=self.max_nnz)
                    BT = B.T.tocsr()
                except BudgetError:
                    if constraint_backend == "sparse":
                        raise
            if B is None:
                if self._index.n > MAX_IMPLICIT_N:
                    raise BudgetError(
                        f"ADMM-RDA constraints on n={self._index.n} criteria need O(n·2**n) = "
                        f"{self._index.n * 2 ** self._index.n:.2e} operations per step and 2**n-long vectors; the limit "
                        f"is n <= {MAX_IMPLICIT_N}. Drop the constraints (Algorithm 1) or use fewer criteria.")
                B = ConstraintOperator(self._index, self.constraints)
                BT = B.T
            self._B, self._BT = B, BT
            self._admm = ADMMState.zeros(self._B.shape[0])
        else:
            self._B = self._BT = self._admm = None

    def _run(self, UL: np.ndarray, UR: np.ndarray, Y: list, W: list) -> np.ndarray:
        """Algorithm 1 with the per-round work inlined (same rule as :meth:`_step`).

        Inside the loop the iterate is kept unscaled, s_t = clip(G, ±λt) − G, so that
        m_{t+1} = s_t/(γ√t) costs no pass over the d masses: the margin is ⟨d, s⟩/(γ√t)
        (equal to ⟨d, m⟩ up to rounding). m is materialised once at the end.
        """
        if self._B is not None:
            return super()._run(UL, UR, Y, W)
        G = self._G
        s_vec = np.empty_like(G)
        delta, lam, gamma = self.delta, self.l1, self.gamma
        t = self._t
        if t > 0:
            _clip(G, -lam * t, lam * t, s_vec)
            s_vec -= G
            k = 1.0 / (gamma * math.sqrt(t))
        else:
            s_vec[:] = 0.0
            k = 0.0
        losses = np.empty(len(Y))
        dot, sqrt = np.dot, math.sqrt
        for start, D in self._diff_blocks(UL, UR):
            for r in range(D.shape[0]):
                d = D[r]
                j = start + r
                y, w = Y[j], W[j]
                margin = k * float(dot(d, s_vec))
                if y:
                    ym = y * margin
                    if ym < delta:
                        losses[j], c = delta - ym, -y * w          # g_t = −Δ (Section 3.2)
                    else:
                        losses[j], c = 0.0, 0.0
                else:
                    losses[j] = max(0.0, margin - delta) + max(0.0, -delta - margin)
                    c = -w if margin < -delta else (w if margin > delta else 0.0)
                if c == 1.0:
                    G += d
                elif c == -1.0:
                    G -= d
                elif c != 0.0:
                    G += c * d
                t += w
                th = lam * t
                _clip(G, -th, th, s_vec)                          # m_{t+1} = (clip(G, ±λt) − G)/(γ√t)
                s_vec -= G
                k = 1.0 / (gamma * sqrt(t))
        self._t = t
        np.multiply(s_vec, k, out=self._m)
        return losses

    @property
    def gradient_sum(self) -> np.ndarray:
        """G_t = Σ_{τ≤t} w_τ g_τ, ndarray of shape (d,) (copy)."""
        return self._G.copy()

    @property
    def constraint_matrix(self):
        """B (scipy.sparse CSR or ConstraintOperator, shape (b, d)) of Algorithm 2, or None for Algorithm 1."""
        return self._B

    def _update(self, c: float, w: float, d: np.ndarray) -> None:
        if c == 1.0:
            self._G += d
        elif c == -1.0:
            self._G -= d
        elif c != 0.0:
            self._G += c * d
        self._t += w
        if self._B is None:
            rda_from_sum(self._G, self._t, self.gamma, self.l1, out=self._m)
        else:
            self._m, _ = admm_rda_step(self._G, self._t, self._admm, self._B, self._BT, self.gamma, self.l1,
                                       self.rho, weight=w, out=self._m)

    # ---------------------------------------------------------------- merge
    def _check_mergeable(self, other) -> None:
        if not isinstance(other, CapacityRDA) or type(other) is not type(self):
            raise InvalidParameterError(f"Cannot merge a {type(other).__name__} into a {type(self).__name__}.")
        if self.constraints or other.constraints:
            raise InvalidParameterError(
                "Merging is defined for Algorithm 1 (RDA) only: ADMM-RDA's state holds the last multiplier µ_t and "
                "splitting variable z_t, which depend on the order of the stream and have no additive sufficient "
                "statistic. Train one ADMM-RDA learner per model, or merge unconstrained RDA learners.")
        mine, theirs = self._params(), other._params()
        if mine != theirs:
            diff = {k: (mine[k], theirs[k]) for k in mine if mine[k] != theirs[k]}
            raise InvalidParameterError(f"Cannot merge capacity learners with different parameters: {diff}.")

    def __iadd__(self, other: "CapacityRDA") -> "CapacityRDA":
        """Merge ``other`` (trained on a disjoint part of the stream) into ``self``.

        G ← G + G', t ← t + t', m ← −(1/(γ√t))[|G| − λt]₊ sign(G); ḡ of the result is the
        count-weighted average (t ḡ + t' ḡ')/(t + t'). Scaler ranges are united (min of mins,
        max of maxes); the regret window keeps the most recent examples of both. See the module
        docstring for when this equals the RDA iterate of the union stream.

        Raises
        ------
        InvalidParameterError
            Different classes or parameters, or ADMM-RDA learners (not mergeable).
        """
        self._check_mergeable(other)
        if other._t == 0:
            return self
        self._G += other._G
        self._t += other._t
        rda_from_sum(self._G, self._t, self.gamma, self.l1, out=self._m)
        if self._scaler is not None:
            self._scaler.merge(other._scaler)
        self._merge_window(other)
        return self

    def __add__(self, other: "CapacityRDA") -> "CapacityRDA":
        """A new learner equal to ``copy(self) += other``."""
        out = type(self).from_state(self.state_dict())
        out += other
        return out

    def merge(self, other: "CapacityRDA") -> "CapacityRDA":
        """In-place merge (same as ``self += other``); returns ``self``."""
        self += other
        return self

    # ---------------------------------------------------------------- state
    def _extra_arrays(self) -> dict:
        out = {"gradient_sum": self._G.copy()}
        if self._admm is not None:
            out.update({k: v.copy() for k, v in self._admm.arrays().items()})
        return out

    def _load_extra(self, arrays: dict) -> None:
        self._G[:] = arrays["gradient_sum"]
        if self._admm is not None:
            self._admm = ADMMState(*(np.array(arrays[k], dtype=np.float64) for k in
                                     ("admm_z", "admm_mu", "admm_sum_z", "admm_sum_mu", "admm_sum_Bm")))


class CapacityFOBOS(_CapacityLearner):
    """FOBOS baseline of Section 5 (Duchi & Singer 2009) on the same model and loss.

    m_{t+1} = [|m_t − η_t g_t| − η_t λ]₊ sign(m_t − η_t g_t) with η_t = η₁/√t.

    Parameters
    ----------
    eta1 : float or None, default None
        η₁ > 0. The paper uses "the recommended value in [Duchi and Singer, 2009]" without
        printing it; FOBOS's regret bound for η_t = c/√t is minimised by c ∝ D/G (D: radius of the
        comparator, G: subgradient-norm bound). With D = 1 (normalised capacity) and
        G = √d (‖φ(x) − φ(y)‖₂ ≤ √d on [0, 1]^n), ``None`` means η₁ = 1/√d.
    Other parameters as :class:`CapacityRDA` (``gamma`` is unused by FOBOS).
    """

    _algorithm = "fobos"

    def __init__(self, criteria: Sequence[str], aggregation: str = "choquet", k_additive: int | None = None,
                 l1: float = 0.01, gamma: float = 1e3, delta: float = 0.01, scaler: str = "none",
                 decreasing: Sequence[str] = (), eta1: float | None = None) -> None:
        super().__init__(criteria, aggregation, k_additive, l1, gamma, delta, scaler, decreasing)
        check_param("CapacityFOBOS", "eta1", eta1, eta1 is None or (_is_real(eta1) and eta1 > 0),
                    "None or a float in the range (0, inf)")
        self.eta1 = eta1
        self._eta1 = 1.0 / math.sqrt(self._index.d) if eta1 is None else float(eta1)

    def _update(self, c: float, w: float, d: np.ndarray) -> None:
        self._t += w
        eta = self._eta1 / math.sqrt(self._t)
        fobos_step(self._m, c * d, eta, self.l1)

    def __iadd__(self, other):
        raise InvalidParameterError("FOBOS keeps only its last iterate m_t, which is path-dependent: it has no "
                                    "mergeable sufficient statistic. Use CapacityRDA to merge partition learners.")
