"""Coalition indexing, Möbius transforms, capacity features φ_S and constraint matrices.

Shared maths of the capacity learners (:mod:`learners.capacity`), after Herin, Perny &
Sokolovska, *Online Learning of Capacity-Based Preference Models*, IJCAI 2024,
Section 2.

Conventions
-----------
* Criteria are ``0 … n-1``; a coalition S ⊆ N is the bit mask ``Σ_{i∈S} 2**i`` (int64).
* A *Möbius vector* ``m`` has one entry per **non-empty** coalition kept by a
  :class:`SubsetIndex`, in increasing mask order (the binary order of Grabisch 2016). The paper
  indexes ``m ∈ R^d`` with ``d = 2**n`` including ∅; ``m(∅) = v(∅) = 0`` and its feature
  difference φ_∅(x) − φ_∅(y) vanishes identically, so its RDA coordinate stays 0 forever and
  dropping it changes nothing (``d = 2**n − 1`` here, or ``Σ_{1≤j≤k} C(n, j)`` for a
  k-additive truncation).
* A *full set function* (capacity ``v`` or Möbius inverse over all of 2^N) is a vector of length
  ``2**n`` indexed by the mask itself (entry 0 is ∅).
* Constraints are written ``B m ≤ 0`` as in the paper (Section 4.2, Example 2).

Features (Section 2, Equation (1)): F(x) = Σ_S m(S) φ_S(x_S) with φ_S = min (Choquet
integral, Chateauneuf & Jaffray 1989) or φ_S = Π (multilinear model, Owen 1972). All φ_S of a
batch are computed by a dynamic programme over subsets:
φ_S(x) = op(φ_{S∖{h}}(x), x_h) with h the highest element of S.
"""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np
import scipy.sparse as sp

from learners.exceptions import BudgetError, InvalidInputError, InvalidParameterError, check_param

__all__ = [
    "AGGREGATIONS",
    "ConstraintOperator",
    "SubsetIndex",
    "capacity_from_mobius",
    "constraint_matrix",
    "constraint_residuals",
    "mobius_from_capacity",
    "mobius_transform",
    "monotonicity_matrix",
    "supermodularity_matrix",
    "violation",
    "zeta_transform",
]

#: Local aggregators φ_S supported (Section 2): "choquet" → min, "multilinear" → product.
AGGREGATIONS = ("choquet", "multilinear")

#: Largest n for which full 2**n set functions are materialised (2**24 float64 = 128 MiB).
MAX_FULL_N = 24


def _popcount(a: np.ndarray) -> np.ndarray:
    return np.bitwise_count(np.asarray(a, dtype=np.int64)).astype(np.int64)


def _highest_bit(a: np.ndarray) -> np.ndarray:
    """Index of the highest set bit of positive int64 masks (exact below 2**53)."""
    return (np.frexp(np.asarray(a, dtype=np.float64))[1] - 1).astype(np.int64)


class SubsetIndex:
    """The coalitions whose Möbius masses a model keeps, with precomputed DP structures.

    Parameters
    ----------
    n : int
        Number of criteria, ``1 ≤ n ≤ 62``.
    k : int or None
        Keep coalitions of size ``1 … k`` (k-additive truncation, Grabisch 1997); ``None`` keeps
        all ``2**n − 1`` non-empty coalitions.
    max_size : int
        Budget on the number of kept coalitions ``d``.

    Attributes
    ----------
    masks : ndarray of shape (d,), int64
        Bit masks of the kept coalitions, strictly increasing.
    sizes : ndarray of shape (d,), int64
        Cardinalities |S|.
    full : bool
        True when every non-empty coalition is kept (then ``masks == arange(1, 2**n)``).

    Raises
    ------
    InvalidParameterError
        If ``n`` or ``k`` is out of range.
    BudgetError
        If ``d`` exceeds ``max_size``.

    Examples
    --------
    >>> idx = SubsetIndex(3, k=2)
    >>> idx.masks.tolist()      # {0} {1} {0,1} {2} {0,2} {1,2}
    [1, 2, 3, 4, 5, 6]
    >>> idx.d
    6
    """

    def __init__(self, n: int, k: int | None = None, max_size: int = 1 << 22) -> None:
        check_param("SubsetIndex", "n", n, isinstance(n, (int, np.integer)) and not isinstance(n, bool) and 1 <= n <= 62,
                    "an int in the range [1, 62]")
        n = int(n)
        if k is not None:
            check_param("SubsetIndex", "k", k, isinstance(k, (int, np.integer)) and not isinstance(k, bool) and k >= 1,
                        "None or an int >= 1")
            k = int(min(k, n))
        kk = n if k is None else k
        d = sum(math.comb(n, j) for j in range(1, kk + 1))
        if d > max_size:
            raise BudgetError(
                f"A capacity on n={n} criteria with k={k} keeps d={d} Möbius masses, above the budget of "
                f"{max_size}. Use a k-additive truncation (smaller k) or fewer criteria."
            )
        self.n = n
        self.k = None if kk == n else kk
        self.full = kk == n
        if self.full:
            masks = np.arange(1, 1 << n, dtype=np.int64)
        else:
            levels = [np.zeros(1, dtype=np.int64)]
            for _ in range(kk):
                prev = levels[-1]
                hb = np.where(prev == 0, -1, _highest_bit(np.maximum(prev, 1)))
                new = [prev[hb < j] | (1 << j) for j in range(n)]
                levels.append(np.concatenate(new))
            masks = np.sort(np.concatenate(levels[1:]))
        self.masks = masks
        self.d = int(masks.size)
        self.sizes = _popcount(masks)
        self.top = _highest_bit(masks)
        # DP by level: φ_S = op(φ_{S∖top}, x_top); parents have size−1 so levels are processed in order.
        self._levels = []
        for s in range(1, kk + 1):
            cols = np.flatnonzero(self.sizes == s)
            parent = masks[cols] & ~(np.int64(1) << self.top[cols])
            pcols = self.position(parent) if s > 1 else None
            self._levels.append((cols, pcols, self.top[cols]))
        # k = 2: in mask order the coalitions with highest criterion j are {j}, {0, j}, …, {j−1, j} —
        # contiguous columns, so φ is filled by slices (no gathers): cols[j] = position of {j}
        self._k2_cols = self.position(np.left_shift(np.int64(1), np.arange(n, dtype=np.int64))) if kk == 2 else None

    # ------------------------------------------------------------------ lookup
    def position(self, masks: np.ndarray) -> np.ndarray:
        """Column of each mask (−1 where the coalition is not kept); int64 array like ``masks``."""
        q = np.asarray(masks, dtype=np.int64)
        if self.full:
            return np.where((q >= 1) & (q < (1 << self.n)), q - 1, -1)
        pos = np.searchsorted(self.masks, q)
        pos_c = np.minimum(pos, self.d - 1)
        return np.where(self.masks[pos_c] == q, pos_c, -1)

    def subsets(self) -> list[tuple[int, ...]]:
        """The kept coalitions as sorted tuples of criterion indices (for reports; O(d n))."""
        return [tuple(i for i in range(self.n) if (int(s) >> i) & 1) for s in self.masks]

    def __eq__(self, other) -> bool:
        return isinstance(other, SubsetIndex) and other.n == self.n and other.k == self.k

    def __repr__(self) -> str:
        return f"SubsetIndex(n={self.n}, k={self.k}, d={self.d})"

    # ---------------------------------------------------------------- features
    def features(self, X: np.ndarray, aggregation: str = "choquet", out: np.ndarray | None = None) -> np.ndarray:
        """φ_S(x) for every kept coalition S and every row x of ``X``.

        Parameters
        ----------
        X : array_like of shape (n,) or (b, n), float64
            Criteria values (normally in [0, 1]; not checked here).
        aggregation : {"choquet", "multilinear"}
            φ_S = min_{i∈S} x_i (Choquet) or Π_{i∈S} x_i (multilinear); paper Section 2.
        out : ndarray of shape (b, d), optional
            Destination buffer (reused by the learners to avoid allocations).

        Returns
        -------
        ndarray of shape (d,) or (b, d), float64
            Columns in ``masks`` order.

        Notes
        -----
        Full index: the DP runs on a (b, 2**n) buffer with slices only,
        ``buf[:, 2**j : 2**(j+1)] = op(buf[:, :2**j], x_j)`` (every mask with highest bit j is a
        mask below 2**j plus j), i.e. 2**n element operations and no Python loop over subsets.
        k-additive index: one gather per cardinality level.
        """
        if aggregation not in AGGREGATIONS:
            raise InvalidParameterError(
                f"The 'aggregation' parameter must be one of {AGGREGATIONS}. Got {aggregation!r} instead.")
        X = np.asarray(X, dtype=np.float64)
        one = X.ndim == 1
        X2 = X.reshape(1, -1) if one else X
        if X2.ndim != 2 or X2.shape[1] != self.n:
            raise InvalidInputError(f"Expected criteria values of shape (n,) or (b, n) with n={self.n}; got shape {X.shape}.")
        b = X2.shape[0]
        op = np.minimum if aggregation == "choquet" else np.multiply
        if self.full:
            buf = np.empty((b, 1 << self.n)) if out is None or out.shape != (b, 1 << self.n) else out
            buf[:, 0] = np.inf if aggregation == "choquet" else 1.0
            for j in range(self.n):
                h = 1 << j
                op(buf[:, :h], X2[:, j:j + 1], out=buf[:, h:2 * h])
            res = buf[:, 1:]
        elif self._k2_cols is not None:
            res = np.empty((b, self.d)) if out is None or out.shape != (b, self.d) else out
            for j, c in enumerate(self._k2_cols.tolist()):
                res[:, c] = X2[:, j]
                op(X2[:, :j], X2[:, j:j + 1], out=res[:, c + 1:c + 1 + j])
        else:
            # coalitions × rows layout: each level gathers whole contiguous rows (fast), one transpose at the end
            XT = np.ascontiguousarray(X2.T)
            resT = np.empty((self.d, b))
            for cols, pcols, top in self._levels:
                if pcols is None:
                    resT[cols] = XT[top]
                else:
                    resT[cols] = op(resT[pcols], XT[top])
            res = np.empty((b, self.d)) if out is None or out.shape != (b, self.d) else out
            res[...] = resT.T
        return res[0] if one else res

    def feature_buffer_shape(self, b: int) -> tuple[int, int]:
        """Shape of the ``out`` buffer accepted by :meth:`features` for ``b`` rows."""
        return (b, (1 << self.n) if self.full else self.d)

    # -------------------------------------------------------- full set functions
    def to_full(self, m: np.ndarray) -> np.ndarray:
        """Embed a Möbius vector of shape (..., d) into a full set function of shape (..., 2**n) (∅ → 0).

        Raises
        ------
        BudgetError
            If ``n > MAX_FULL_N``.
        """
        _check_full_budget(self.n)
        m = np.asarray(m, dtype=np.float64)
        out = np.zeros(m.shape[:-1] + (1 << self.n,))
        out[..., self.masks] = m
        return out

    def from_full(self, f: np.ndarray) -> np.ndarray:
        """Restrict a full set function of shape (..., 2**n) to the kept coalitions, shape (..., d)."""
        f = np.asarray(f, dtype=np.float64)
        if f.shape[-1] != 1 << self.n:
            raise InvalidInputError(f"Expected a set function of length 2**n = {1 << self.n}; got shape {f.shape}.")
        return f[..., self.masks]


def _check_full_budget(n: int) -> None:
    if n > MAX_FULL_N:
        raise BudgetError(f"A full set function on n={n} criteria has 2**{n} entries, above the budget 2**{MAX_FULL_N}.")


def _n_of(f: np.ndarray) -> int:
    L = f.shape[-1]
    n = L.bit_length() - 1
    if L < 1 or (1 << n) != L:
        raise InvalidInputError(f"A full set function must have length 2**n; got {L}.")
    return n


def zeta_transform(m: np.ndarray) -> np.ndarray:
    """Capacity from Möbius masses, v(S) = Σ_{T⊆S} m(T) (paper Section 2), fast: O(n 2**n).

    Parameters
    ----------
    m : array_like of shape (..., 2**n)
        Full set function in mask order.

    Returns
    -------
    ndarray of shape (..., 2**n)

    Examples
    --------
    >>> zeta_transform([0.0, 0.25, 0.5, 0.25]).tolist()   # m({0})=.25, m({1})=.5, m({0,1})=.25
    [0.0, 0.25, 0.5, 1.0]
    """
    v = np.array(m, dtype=np.float64, copy=True)
    n = _n_of(v)
    lead = v.shape[:-1]
    for i in range(n):
        a = v.reshape(lead + (-1, 2, 1 << i))
        a[..., 1, :] += a[..., 0, :]
    return v


def mobius_transform(v: np.ndarray) -> np.ndarray:
    """Möbius inverse m(S) = Σ_{T⊆S} (−1)^{|S∖T|} v(T) (paper Section 2), fast: O(n 2**n).

    Parameters
    ----------
    v : array_like of shape (..., 2**n)

    Returns
    -------
    ndarray of shape (..., 2**n)

    Examples
    --------
    >>> mobius_transform([0.0, 0.25, 0.5, 1.0]).tolist()
    [0.0, 0.25, 0.5, 0.25]
    """
    m = np.array(v, dtype=np.float64, copy=True)
    n = _n_of(m)
    lead = m.shape[:-1]
    for i in range(n):
        a = m.reshape(lead + (-1, 2, 1 << i))
        a[..., 1, :] -= a[..., 0, :]
    return m


def capacity_from_mobius(m: np.ndarray, index: SubsetIndex) -> np.ndarray:
    """Full capacity v (length 2**n, v(∅)=0) of a model's Möbius vector ``m`` of shape (d,)."""
    return zeta_transform(index.to_full(m))


def mobius_from_capacity(v: np.ndarray, index: SubsetIndex | None = None) -> np.ndarray:
    """Möbius vector of a full capacity ``v`` (length 2**n), restricted to ``index`` if given.

    Raises
    ------
    InvalidInputError
        If ``v(∅) ≠ 0``.
    """
    v = np.asarray(v, dtype=np.float64)
    if abs(v[..., 0]).max() > 1e-12:
        raise InvalidInputError(f"A capacity has v(∅) = 0; got v(∅) = {v[..., 0]}.")
    m = mobius_transform(v)
    return m if index is None else index.from_full(m)


# ---------------------------------------------------------------- constraints
def _subset_pairs(k: int) -> tuple[np.ndarray, np.ndarray]:
    """All (A, R) with R ⊆ A ⊆ {0..k-1}, as compressed masks, ordered by A then R (3**k pairs)."""
    A = np.zeros(1, dtype=np.int64)
    R = np.zeros(1, dtype=np.int64)
    for e in range(k):
        bit = np.int64(1) << e
        A = np.concatenate([A, A | bit, A | bit])
        R = np.concatenate([R, R, R | bit])
    return A, R


def _insert_zero_bits(c: np.ndarray, positions: Iterable[int]) -> np.ndarray:
    """Expand compressed masks by inserting 0 bits at the given (ascending) positions."""
    c = np.asarray(c, dtype=np.int64)
    for p in sorted(positions):
        low = c & ((np.int64(1) << p) - 1)
        c = low | ((c >> p) << (p + 1))
    return c


def _check_nnz(kind: str, n: int, nnz: int, max_nnz: int) -> None:
    if nnz > max_nnz:
        raise BudgetError(
            f"The {kind} constraint matrix on n={n} criteria has {nnz} non-zeros, above max_nnz={max_nnz}. "
            "Use fewer criteria, a k-additive model, or drop the constraint (Algorithm 1 has none)."
        )


def monotonicity_matrix(index: SubsetIndex, max_nnz: int = 30_000_000) -> sp.csr_matrix:
    """Monotonicity constraints in Möbius coordinates, as ``B m ≤ 0`` (paper Section 2).

    Row (i, S) for each criterion i and each coalition S ∋ i is ``−Σ_{T⊆S, T∋i} m(T)``, i.e.
    ``v(S∖{i}) − v(S) ≤ 0``. Rows are ordered by i, then by the mask of S∖{i} with bit i
    deleted (so ``n·2**(n−1)`` rows); columns are ``index.masks``. For a k-additive index the
    columns with |T| > k are absent (their masses are 0).

    Returns
    -------
    scipy.sparse.csr_matrix of shape (n·2**(n−1), d), float64, entries in {0, −1}
        ``n·3**(n−1)`` non-zeros for a full index.

    Raises
    ------
    BudgetError
        If the number of non-zeros exceeds ``max_nnz``.
    """
    n = index.n
    half = 1 << (n - 1)
    _check_nnz("monotonicity", n, n * 3 ** (n - 1) if index.full else 0, max_nnz)
    _check_nnz("monotonicity (subset-pair enumeration)", n, 3 ** (n - 1), 4 * max_nnz)  # before allocating 3**(n-1) pairs
    A, R = _subset_pairs(n - 1)
    rows, cols = [], []
    for i in range(n):
        T = _insert_zero_bits(R, [i]) | (np.int64(1) << i)
        c = index.position(T)
        keep = c >= 0
        rows.append(i * half + A[keep])
        cols.append(c[keep])
        _check_nnz("monotonicity", n, sum(r.size for r in rows), max_nnz)
    rows = np.concatenate(rows)
    cols = np.concatenate(cols)
    return sp.csr_matrix((np.full(rows.size, -1.0), (rows, cols)), shape=(n * half, index.d))


def supermodularity_matrix(index: SubsetIndex, max_nnz: int = 30_000_000) -> sp.csr_matrix:
    """Supermodularity constraints in Möbius coordinates, as ``B m ≤ 0``.

    Derivation: v is supermodular iff for all i < j and S ⊆ N∖{i, j},
    ``v(S∪{i,j}) − v(S∪{i}) − v(S∪{j}) + v(S) ≥ 0`` (the local form of
    ``v(S∪T) + v(S∩T) ≥ v(S) + v(T)``, Section 2). With v(A) = Σ_{T⊆A} m(T), inclusion–exclusion
    leaves exactly the T ⊆ S∪{i,j} that contain both i and j::

        v(S∪{i,j}) − v(S∪{i}) − v(S∪{j}) + v(S) = Σ_{ {i,j} ⊆ T ⊆ S∪{i,j} } m(T) ≥ 0.

    Row (i, j, S) is minus that sum. Rows are ordered by the pair (i, j), i < j, in lexicographic
    order, then by the mask of S with bits i and j deleted: ``C(n,2)·2**(n−2)`` rows. For n = 2
    this is the fifth row of the paper's Example 2, ``−m({1,2}) ≤ 0``.

    Returns
    -------
    scipy.sparse.csr_matrix of shape (C(n,2)·2**(n−2), d), float64, entries in {0, −1}

    Raises
    ------
    BudgetError
        If the number of non-zeros exceeds ``max_nnz``.
    """
    n = index.n
    if n < 2:
        return sp.csr_matrix((0, index.d))
    q = 1 << (n - 2)
    _check_nnz("supermodularity", n, math.comb(n, 2) * 3 ** (n - 2) if index.full else 0, max_nnz)
    _check_nnz("supermodularity (subset-pair enumeration)", n, 3 ** (n - 2), 4 * max_nnz)
    A, R = _subset_pairs(n - 2)
    rows, cols = [], []
    p = 0
    for i in range(n):
        for j in range(i + 1, n):
            T = _insert_zero_bits(R, [i, j]) | (np.int64(1) << i) | (np.int64(1) << j)
            c = index.position(T)
            keep = c >= 0
            rows.append(p * q + A[keep])
            cols.append(c[keep])
            p += 1
    rows = np.concatenate(rows)
    cols = np.concatenate(cols)
    _check_nnz("supermodularity", n, rows.size, max_nnz)
    return sp.csr_matrix((np.full(rows.size, -1.0), (rows, cols)), shape=(p * q, index.d))


CONSTRAINTS = ("monotone", "supermodular")


def constraint_matrix(index: SubsetIndex, constraints: Iterable[str] = ("monotone",),
                      max_nnz: int = 30_000_000) -> sp.csr_matrix:
    """Stack the requested constraint blocks (``"monotone"`` then ``"supermodular"``) as one CSR matrix B.

    For N = {1, 2} with both constraints this is the paper's Example 2 (columns m1, m2, m12)::

        [[-1,  0,  0],      m({1}) ≥ 0                 (i=1, S={1})
         [-1,  0, -1],      m({1}) + m({1,2}) ≥ 0      (i=1, S={1,2})
         [ 0, -1,  0],      m({2}) ≥ 0                 (i=2, S={2})
         [ 0, -1, -1],      m({2}) + m({1,2}) ≥ 0      (i=2, S={1,2})
         [ 0,  0, -1]]      m({1,2}) ≥ 0               supermodularity

    Raises
    ------
    InvalidParameterError
        If a constraint name is unknown.
    """
    blocks = []
    for c in constraints:
        if c not in CONSTRAINTS:
            raise InvalidParameterError(f"Unknown constraint {c!r}; expected a subset of {CONSTRAINTS}.")
    if "monotone" in constraints:
        blocks.append(monotonicity_matrix(index, max_nnz))
    if "supermodular" in constraints:
        blocks.append(supermodularity_matrix(index, max_nnz))
    if not blocks:
        return sp.csr_matrix((0, index.d))
    return sp.vstack(blocks, format="csr")


def constraint_residuals(v: np.ndarray, constraints: Iterable[str] = ("monotone",)) -> np.ndarray:
    """``B m`` computed from the full capacity ``v = zeta(m)`` without forming B: O(n² 2**n).

    Same row order as :func:`constraint_matrix`; positive entries are violations.

    Parameters
    ----------
    v : ndarray of shape (2**n,)
        Full capacity (mask order).

    Returns
    -------
    ndarray of shape (b,)
    """
    v = np.asarray(v, dtype=np.float64)
    n = _n_of(v)
    out = []
    if "monotone" in constraints:
        for i in range(n):
            a = v.reshape(-1, 2, 1 << i)
            out.append((a[:, 0, :] - a[:, 1, :]).reshape(-1))
    if "supermodular" in constraints and n >= 2:
        for i in range(n):
            for j in range(i + 1, n):
                a = v.reshape(-1, 2, 1 << (j - i - 1), 2, 1 << i)
                r = a[:, 1, :, 1, :] - a[:, 1, :, 0, :] - a[:, 0, :, 1, :] + a[:, 0, :, 0, :]
                out.append(-r.reshape(-1))
    return np.concatenate(out) if out else np.zeros(0)


def violation(residuals: np.ndarray) -> float:
    """Constraint violation ‖[B m]₊‖²₂ (paper Section 5, Fig. 1a, before averaging over t)."""
    r = np.asarray(residuals, dtype=np.float64)
    return float(np.square(np.maximum(r, 0.0)).sum())


class ConstraintOperator:
    """Matrix-free B of :func:`constraint_matrix` (same rows, same order), through fast transforms.

    ``B @ m`` is :func:`constraint_residuals` of ``v = zeta(m)``: O(n 2**n) for monotonicity,
    O(n² 2**n) with supermodularity, and no O(n 3**n) non-zeros to store — for the n where the
    sparse B no longer fits (n ≥ 14 or so). ``B.T @ u`` is the exact adjoint: scatter the rows
    back onto a full set function w, then apply the superset-sum transform
    (ζᵀ w)(T) = Σ_{S⊇T} w(S) and keep the model's coalitions.

    Parameters
    ----------
    index : SubsetIndex
        Requires n ≤ MAX_FULL_N (full set functions are materialised).
    constraints : sequence of {"monotone", "supermodular"}

    Examples
    --------
    >>> idx = SubsetIndex(3)
    >>> B = ConstraintOperator(idx, ("monotone", "supermodular"))
    >>> bool(np.allclose(B.toarray(), constraint_matrix(idx, ("monotone", "supermodular")).toarray()))
    True
    """

    def __init__(self, index: SubsetIndex, constraints: Iterable[str] = ("monotone",), _transposed: bool = False):
        _check_full_budget(index.n)
        for c in constraints:
            if c not in CONSTRAINTS:
                raise InvalidParameterError(f"Unknown constraint {c!r}; expected a subset of {CONSTRAINTS}.")
        self.index = index
        self.constraints = tuple(c for c in CONSTRAINTS if c in constraints)
        n = index.n
        rows = (n << (n - 1) if "monotone" in self.constraints else 0) + \
            (math.comb(n, 2) << (n - 2) if "supermodular" in self.constraints and n >= 2 else 0)
        self._rows = rows
        self._transposed = _transposed
        self.shape = (index.d, rows) if _transposed else (rows, index.d)

    @property
    def T(self) -> "ConstraintOperator":
        return ConstraintOperator(self.index, self.constraints, not self._transposed)

    def __matmul__(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if x.shape != (self.shape[1],):
            raise InvalidInputError(f"ConstraintOperator of shape {self.shape} cannot multiply a vector of shape {x.shape}.")
        return self._rmatvec(x) if self._transposed else self._matvec(x)

    def _matvec(self, m: np.ndarray) -> np.ndarray:
        return constraint_residuals(zeta_transform(self.index.to_full(m)), self.constraints)

    def _rmatvec(self, u: np.ndarray) -> np.ndarray:
        n = self.index.n
        w = np.zeros(1 << n)
        pos = 0
        if "monotone" in self.constraints:
            half = 1 << (n - 1)
            for i in range(n):
                ui = u[pos:pos + half].reshape(-1, 1 << i)
                a = w.reshape(-1, 2, 1 << i)
                a[:, 0, :] += ui           # row = v(S∖i) − v(S)
                a[:, 1, :] -= ui
                pos += half
        if "supermodular" in self.constraints and n >= 2:
            q = 1 << (n - 2)
            for i in range(n):
                for j in range(i + 1, n):
                    uij = u[pos:pos + q].reshape(-1, 1 << (j - i - 1), 1 << i)
                    a = w.reshape(-1, 2, 1 << (j - i - 1), 2, 1 << i)
                    a[:, 1, :, 1, :] -= uij   # row = −(v(S∪ij) − v(S∪i) − v(S∪j) + v(S))
                    a[:, 1, :, 0, :] += uij
                    a[:, 0, :, 1, :] += uij
                    a[:, 0, :, 0, :] -= uij
                    pos += q
        for i in range(n):                 # superset sums: (ζᵀ w)(T) = Σ_{S ⊇ T} w(S)
            a = w.reshape(-1, 2, 1 << i)
            a[:, 0, :] += a[:, 1, :]
        return self.index.from_full(w)

    def toarray(self) -> np.ndarray:
        """Dense matrix (for tests on small n)."""
        eye = np.eye(self.shape[1])
        return np.stack([self @ e for e in eye], axis=1)
