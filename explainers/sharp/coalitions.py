"""Coalitions of *removed* features and the Shapley weight matrix of ShaRP (Algorithm 1).

Pliatsika, Fonseca, Akhynko, Shevchenko & Stoyanovich (2024), *ShaRP: Explaining Rankings and
Preferences with Shapley Values*, Eq. 6 and Algorithm 1 (line 8). Bit ``j`` of a coalition code set
means feature ``j`` is taken from the reference row (removed from the explained item); codes and
sizes come from :mod:`explainers._coalitions`.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from explainers._coalitions import popcount, shapley_size_weights

__all__ = ["coalition_weights"]


@lru_cache(maxsize=64)
def _coalition_masks(d: int, c: int) -> np.ndarray:
    """All coalition bit masks with at most ``c + 1`` removed features, in Gray-code order (one bit
    flips between neighbours, so each feature column of the hybrid buffer is a few long runs).
    Computed once per ``(d, c)`` (read-only: the stream builds an explainer per event)."""
    i = np.arange(1 << d, dtype=np.int64)
    g = i ^ (i >> 1)
    out = g[popcount(g) <= c + 1] if c < d - 1 else g
    out.flags.writeable = False
    return out


def coalition_weights(d: int, max_coalition_size: int | None = None) -> np.ndarray:
    """Shapley weight matrix ``W`` of shape ``(d, 2**d)`` with ``φ = α · W @ Q``.

    Column ``S`` is the bit mask of a coalition of *removed* features (bit ``j`` set = feature
    ``j`` taken from the reference row). ``W[i, S] = +1/(d·C(d−1,|S|))`` and
    ``W[i, S ∪ {i}] = −1/(d·C(d−1,|S|))`` for every ``S ∌ i`` with ``|S| ≤ c`` (Algorithm 1,
    line 8; Eq. 6).

    Parameters
    ----------
    d : int
        Number of features, ``1 ≤ d ≤ 20``.
    max_coalition_size : int, optional
        ``c`` of Algorithm 1 in ``[0, d−1]``; ``None`` = ``d − 1`` (exact).

    Returns
    -------
    ndarray of shape (d, 2**d), float64
        Read-only: computed once per ``(d, c)`` (the stream builds an explainer per event).

    Examples
    --------
    >>> W = coalition_weights(2)
    >>> W.tolist()
    [[0.5, -0.5, 0.5, -0.5], [0.5, 0.5, -0.5, -0.5]]
    """
    return _weights(int(d), d - 1 if max_coalition_size is None else int(max_coalition_size))


@lru_cache(maxsize=64)
def _weights(d: int, c: int) -> np.ndarray:
    masks = np.arange(1 << d, dtype=np.int64)
    sizes = popcount(masks)
    by_size = shapley_size_weights(d)
    W = np.zeros((d, 1 << d))
    for i in range(d):
        bit = 1 << i
        S = masks[((masks & bit) == 0) & (sizes <= c)]
        w = by_size[sizes[S]]
        W[i, S] += w
        W[i, S | bit] -= w
    W.flags.writeable = False
    return W

