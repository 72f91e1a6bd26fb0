"""Constraints of a capacity in Möbius coordinates, written ``B m ≤ 0``: matrices and a matrix-free operator.

Herin, Perny & Sokolovska, *Online Learning of Capacity-Based Preference Models*, IJCAI 2024,
Section 2 (monotonicity, supermodularity) and Section 4.2, Example 2 (the form ``B m ≤ 0``). Vectors
follow the conventions of :mod:`learners._subsets`; residuals are computed on the full capacity
(:func:`learners._mobius.zeta_transform`).
"""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np
import scipy.sparse as sp

from learners._mobius import _n_of, zeta_transform
from learners._subsets import SubsetIndex, _check_full_budget
from learners.exceptions import BudgetError, InvalidInputError, InvalidParameterError

__all__ = [
    "CONSTRAINTS",
    "ConstraintOperator",
    "constraint_matrix",
    "constraint_residuals",
    "monotonicity_matrix",
    "supermodularity_matrix",
    "violation",
]


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
