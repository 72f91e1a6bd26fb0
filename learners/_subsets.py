"""Coalitions of criteria as bit masks, the kept coalitions of a model, and the features φ_S.

Shared by the capacity learners (:mod:`learners.capacity`), after Herin, Perny & Sokolovska,
*Online Learning of Capacity-Based Preference Models*, IJCAI 2024, Section 2. The Möbius / zeta
transforms are in :mod:`learners._mobius`, the constraints ``B m ≤ 0`` in
:mod:`learners.capacity_constraints`.

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

import numpy as np

from learners.exceptions import BudgetError, InvalidInputError, InvalidParameterError, check_param

__all__ = ["AGGREGATIONS", "MAX_FULL_N", "SubsetIndex"]

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
