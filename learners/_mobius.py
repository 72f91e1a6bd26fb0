"""Möbius and zeta transforms between a capacity and its Möbius masses (fast, O(n 2**n)).

Herin, Perny & Sokolovska, *Online Learning of Capacity-Based Preference Models*, IJCAI 2024,
Section 2: ``v(S) = Σ_{T⊆S} m(T)`` and its inverse. Vectors follow the conventions of
:mod:`learners._subsets` (full set functions of length ``2**n`` in mask order; a model's Möbius
vector over the non-empty coalitions of a :class:`~learners._subsets.SubsetIndex`).

The coalition index is re-exported here (``from learners._mobius import SubsetIndex`` keeps
working); the constraints moved to :mod:`learners.capacity_constraints`.
"""

from __future__ import annotations

import numpy as np

from learners._subsets import AGGREGATIONS, MAX_FULL_N, SubsetIndex
from learners.exceptions import InvalidInputError

__all__ = [
    "AGGREGATIONS",
    "MAX_FULL_N",
    "SubsetIndex",
    "capacity_from_mobius",
    "mobius_from_capacity",
    "mobius_transform",
    "zeta_transform",
]


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
