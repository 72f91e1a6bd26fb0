"""Online, mergeable scalers of criteria for the capacity learners.

* :class:`MinMaxScaler` — online ranges onto [0, 1], the setting of Herin, Perny & Sokolovska
  (2024), Section 2 (criteria values in [0, 1]); merged by min of mins / max of maxes;
* :class:`StandardScaler` — running mean and standard deviation; merged by pooling count, Σx, Σx².

Both merges are exact (the merged statistics are those of the pooled data), and both offer
``learn_transform_pairs``: learn pairs row by row and scale each row with the statistics after it,
vectorised with cumulative minima / sums so that it equals the row-by-row loop.
"""

from __future__ import annotations

import numpy as np

__all__ = ["MinMaxScaler", "StandardScaler"]


class MinMaxScaler:
    """Online min-max scaler onto [0, 1], mergeable (min of mins, max of maxes).

    Parameters
    ----------
    n : int
        Number of criteria.

    Notes
    -----
    Before two distinct values of a criterion have been seen its scaled value is 0. Values
    outside the range seen so far are clipped to [0, 1] when transforming.
    """

    def __init__(self, n: int) -> None:
        self.lo = np.full(n, np.inf)
        self.hi = np.full(n, -np.inf)

    def learn(self, X: np.ndarray) -> None:
        """Widen the ranges with the rows of ``X`` (shape (b, n) or (n,))."""
        X = np.atleast_2d(X)
        np.minimum(self.lo, X.min(axis=0), out=self.lo)
        np.maximum(self.hi, X.max(axis=0), out=self.hi)

    def transform(self, X: np.ndarray) -> np.ndarray:
        """(x − lo) / (hi − lo) clipped to [0, 1]; 0 where hi ≤ lo."""
        span = self.hi - self.lo
        ok = np.isfinite(span) & (span > 0)
        out = np.where(ok, (X - np.where(ok, self.lo, 0.0)) / np.where(ok, span, 1.0), 0.0)
        return np.clip(out, 0.0, 1.0)

    def merge(self, other: "MinMaxScaler") -> None:
        """Unite the ranges (exact: the ranges of the pooled data)."""
        np.minimum(self.lo, other.lo, out=self.lo)
        np.maximum(self.hi, other.hi, out=self.hi)

    def learn_transform_pairs(self, L: np.ndarray, R: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Learn pairs row by row and scale each row with the ranges after it (as ``learn`` then ``transform``).

        L, R of shape (T, n); vectorised with cumulative minima/maxima, so the result equals the
        row-by-row loop exactly.
        """
        lo = np.minimum(np.minimum.accumulate(np.minimum(L, R), axis=0), self.lo)
        hi = np.maximum(np.maximum.accumulate(np.maximum(L, R), axis=0), self.hi)
        span = hi - lo
        ok = span > 0
        UL = np.clip(np.where(ok, (L - lo) / np.where(ok, span, 1.0), 0.0), 0.0, 1.0)
        UR = np.clip(np.where(ok, (R - lo) / np.where(ok, span, 1.0), 0.0), 0.0, 1.0)
        self.lo[:] = lo[-1]
        self.hi[:] = hi[-1]
        return UL, UR

    def arrays(self) -> dict:
        return {"scaler_lo": self.lo.copy(), "scaler_hi": self.hi.copy()}

    def load(self, arrays: dict) -> None:
        self.lo[:] = arrays["scaler_lo"]
        self.hi[:] = arrays["scaler_hi"]


class StandardScaler:
    """Online standardisation u = (x − mean) / sd per criterion, mergeable (sums of counts, x and x²).

    Parameters
    ----------
    n : int
        Number of criteria.

    Notes
    -----
    The statistics are the count, Σx and Σx² of every item seen (both sides of each pair), so a
    merge is exact: the pooled statistics are those of the pooled data. Before a criterion has
    two distinct values its scaled value is 0. Values are not clipped: a Choquet integral on
    standardised criteria is the asymmetric Choquet integral of real-valued profiles (the
    criteria stay commensurate — one unit is one standard deviation on every criterion).
    """

    def __init__(self, n: int) -> None:
        self.count = 0.0
        self.s1 = np.zeros(n)
        self.s2 = np.zeros(n)

    def _moments(self, count, s1, s2):
        c = np.maximum(count, 1.0)
        mean = s1 / c
        var = np.maximum(s2 / c - mean * mean, 0.0)
        sd = np.sqrt(var)
        ok = sd > 1e-12 * (1.0 + np.abs(mean))
        return mean, np.where(ok, sd, 1.0), ok

    def learn(self, X: np.ndarray) -> None:
        """Add the rows of ``X`` (shape (b, n) or (n,))."""
        X = np.atleast_2d(X)
        self.count += X.shape[0]
        self.s1 += X.sum(axis=0)
        self.s2 += (X * X).sum(axis=0)

    def transform(self, X: np.ndarray) -> np.ndarray:
        """(x − mean) / sd; 0 where sd = 0."""
        mean, sd, ok = self._moments(self.count, self.s1, self.s2)
        return np.where(ok, (X - mean) / sd, 0.0)

    def merge(self, other: "StandardScaler") -> None:
        """Pool the sums (exact)."""
        self.count += other.count
        self.s1 += other.s1
        self.s2 += other.s2

    def learn_transform_pairs(self, L: np.ndarray, R: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Row t scaled with the statistics after rows ≤ t (equals the ``learn``/``transform`` loop)."""
        # cumulative sums started from the state: the additions happen in the loop's order (bit-identical)
        cnt = self.count + 2.0 * np.arange(1, L.shape[0] + 1)[:, None]
        s1 = np.cumsum(np.concatenate([self.s1[None, :], L + R]), axis=0)[1:]
        s2 = np.cumsum(np.concatenate([self.s2[None, :], L * L + R * R]), axis=0)[1:]
        mean, sd, ok = self._moments(cnt, s1, s2)
        UL = np.where(ok, (L - mean) / sd, 0.0)
        UR = np.where(ok, (R - mean) / sd, 0.0)
        self.count, self.s1[:], self.s2[:] = float(cnt[-1, 0]), s1[-1], s2[-1]
        return UL, UR

    def arrays(self) -> dict:
        return {"scaler_count": np.array([self.count]), "scaler_s1": self.s1.copy(), "scaler_s2": self.s2.copy()}

    def load(self, arrays: dict) -> None:
        self.count = float(np.asarray(arrays["scaler_count"]).reshape(-1)[0])
        self.s1[:] = arrays["scaler_s1"]
        self.s2[:] = arrays["scaler_s2"]
