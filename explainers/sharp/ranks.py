"""Catalog ranks, tie rules, rank strata and the exact bucketed rank counter of ShaRP.

Pliatsika, Fonseca, Akhynko, Shevchenko & Stoyanovich (2024), *ShaRP: Explaining Rankings and
Preferences with Shapley Values*, Eq. 3 (rank QoI) and Section 7.2 (10 % strata).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from explainers.exceptions import check_param

__all__ = ["TIES", "TIE_RTOL", "catalog_ranks", "rank_strata", "snap_ties", "tie_tolerance"]

TIES = ("min", "max", "average")
#: Scores closer than TIE_RTOL × (score range) (plus a few ulps of the largest |score|) are tied.
TIE_RTOL = 1e-9


def tie_tolerance(scores, rtol: float = TIE_RTOL) -> float:
    """Absolute tie tolerance of a catalog's scores: ``rtol · (max − min) + 16 ε · max |s|``.

    Relative to the *spread* of the scores, so adding a constant or rescaling the scorer keeps the
    same ties; the ulp term absorbs the rounding of large offsets (``14.997499999999999`` and
    ``14.9975`` are one tie). Two scores are tied when they differ by at most this much.

    Examples
    --------
    >>> tie_tolerance([0.0, 10.0]) > 0, tie_tolerance([5.0, 5.0]) > 0
    (True, True)
    """
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    if s.size == 0:
        return 0.0
    return float(rtol * (s.max() - s.min()) + 16 * np.finfo(np.float64).eps * np.abs(s).max())


def snap_ties(scores, tol: float) -> np.ndarray:
    """Scores with each run of values closer than ``tol`` (in sorted order) replaced by the run's minimum.

    After snapping, scores that are tied (within ``tol``) are exactly equal and different ones are more
    than ``tol`` apart, so exact comparisons and comparisons with the tolerance agree.

    Examples
    --------
    >>> snap_ties([14.997499999999999, 14.9975, 3.0], 1e-9).tolist()
    [14.997499999999999, 14.997499999999999, 3.0]
    """
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    if s.size == 0 or tol <= 0:
        return s.copy()
    order = np.argsort(s, kind="stable")
    srt = s[order]
    start = np.concatenate([[True], np.diff(srt) > tol])
    rep = srt[np.flatnonzero(start)][np.cumsum(start) - 1]
    out = np.empty_like(s)
    out[order] = rep
    return out


def catalog_ranks(scores: Any, ties: str = "min", tol: float = 0.0) -> np.ndarray:
    """1-based ranks of catalog items from their scores (higher score = better = smaller rank).

    Parameters
    ----------
    scores : array-like of shape (n,), float
    ties : {"min", "max", "average"}
        ``"min"``: ``1 + #{strictly higher}`` (standard competition ranking, "1224");
        ``"max"``: ``#{higher or equal}`` (ties ranked behind); ``"average"``: their mean.

    Returns
    -------
    ndarray of shape (n,), float64

    Examples
    --------
    >>> catalog_ranks([3.0, 5.0, 3.0, 1.0]).tolist()
    [2.0, 1.0, 2.0, 4.0]
    >>> catalog_ranks([3.0, 5.0, 3.0, 1.0], ties="max").tolist()
    [3.0, 1.0, 3.0, 4.0]
    """
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    check_param("catalog_ranks", "ties", ties, ties in TIES, f"one of {TIES}")
    srt = np.sort(s)
    n = s.size
    gt = n - np.searchsorted(srt, s + tol, side="right")
    ge = n - np.searchsorted(srt, s - tol, side="left")
    if ties == "min":
        return (1 + gt).astype(np.float64)
    if ties == "max":
        return ge.astype(np.float64)
    return 1 + (gt + ge - 1) / 2.0


def rank_strata(ranks: Any, n: int, n_strata: int = 10) -> np.ndarray:
    """Stratum index of 1-based ranks in a catalog of ``n`` items (0 = best ``100/n_strata`` %).

    Section 7.2: box plots aggregate local contributions "across ranking strata, each covering
    10 % of the range". Item of rank ``r`` goes to stratum ``⌈r·n_strata / n⌉ − 1``, so stratum 0
    holds the ranks ``r ≤ n/10`` (the top 10 %).

    Examples
    --------
    >>> rank_strata([1, 10, 11, 100], n=100).tolist()
    [0, 0, 1, 9]
    >>> rank_strata([18, 19], n=189).tolist()
    [0, 1]
    """
    r = np.asarray(ranks, dtype=np.float64)
    check_param("rank_strata", "n", n, isinstance(n, (int, np.integer)) and n >= 1, "an int >= 1")
    check_param("rank_strata", "n_strata", n_strata,
                isinstance(n_strata, (int, np.integer)) and n_strata >= 1, "an int >= 1")
    return np.clip(np.ceil(r * n_strata / n - 1e-9) - 1, 0, n_strata - 1).astype(np.int64)


class _RankCounter:
    """Exact ``#{catalog scores ≤ s}`` / ``< s`` for many needles, faster than a binary search.

    The catalog's distinct scores are put into ``G`` equal-width buckets. The bucket of a needle
    is a monotone arithmetic function of it, so every catalog value in a lower bucket is smaller
    and every value in a higher bucket is larger; only the (at most one) value in the needle's own
    bucket is compared explicitly: one table lookup and one comparison per needle. ``G`` doubles
    (up to ``min(2^15, 64·#distinct)``, small enough to stay in cache) until at most 1 % of the
    distinct values share a bucket; needles that land in a bucket holding several distinct values
    or a tied value (multiplicity > 1) are resolved with :func:`numpy.searchsorted`. The result is
    always identical to ``np.searchsorted(sorted_scores, s, side="right"/"left")`` (tested).
    """

    def __init__(self, sorted_scores: np.ndarray, max_g: int = 1 << 15):
        self.srt = sorted_scores
        self.ok = False
        u, cnt = np.unique(sorted_scores, return_counts=True)
        if u.size < 32 or sorted_scores.size >= 2**31 - 1:   # tiny catalog: a binary search is cheap
            return
        max_g = min(max_g, 1 << int(np.ceil(np.log2(64 * u.size))))
        lo, hi = float(u[0]), float(u[-1])
        G = 1 << int(np.ceil(np.log2(max(16, 4 * u.size))))
        while True:
            scale = G / (hi - lo)
            if not np.isfinite(scale) or scale <= 0:
                return
            b = self._bucket(u, lo, scale, G)
            occ = np.bincount(b, minlength=G)
            shared = occ[b] > 1
            if shared.mean() <= 0.01 or 2 * G > max_g:
                break
            G *= 2
        self.lo, self.scale, self.G = lo, scale, G
        first = np.zeros(G + 1, np.int64)
        np.add.at(first, b + 1, cnt)
        first = np.cumsum(first)[:G]
        val = np.full(G, np.inf)
        single = ~shared & (cnt == 1)
        val[b[single]] = u[single]
        first[occ > 1] = -1                      # sentinels: resolve these needles by binary search
        first[b[cnt > 1]] = -1
        self.first = first.astype(np.int32)
        self.val = val
        self.has_shared = bool(np.any(first < 0))
        self.ok = True

    @staticmethod
    def _bucket(s: np.ndarray, lo: float, scale: float, G: int) -> np.ndarray:
        # clipped in float64 (any finite needle), then int32: G <= 2^15, and float -> int32 is several
        # times cheaper than float -> int64 (measured); the table lookups below need no bounds clip
        t = np.subtract(s, lo, dtype=np.float64)
        t *= scale
        np.clip(t, 0, G - 1, out=t)
        return t.astype(np.int32)

    def _count(self, s: np.ndarray, side: str) -> np.ndarray:
        if not self.ok:
            return np.searchsorted(self.srt, s, side=side)
        g = self._bucket(s, self.lo, self.scale, self.G)
        c = self.first.take(g, mode="wrap")      # g is in [0, G): "wrap" skips the bounds pass
        bad = np.flatnonzero(c < 0) if self.has_shared and c.min() < 0 else None
        v = self.val.take(g, mode="wrap")
        c += (v <= s) if side == "right" else (v < s)
        if bad is not None and bad.size:
            c.flat[bad] = np.searchsorted(self.srt, np.asarray(s).flat[bad], side=side)
        return c

    def count_le(self, s: np.ndarray) -> np.ndarray:
        """``#{catalog ≤ s}`` elementwise (int32 or int64, shape of ``s``)."""
        return self._count(s, "right")

    def count_lt(self, s: np.ndarray) -> np.ndarray:
        """``#{catalog < s}`` elementwise."""
        return self._count(s, "left")
