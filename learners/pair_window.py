"""A bounded store of recent preference pairs: a sliding window or a uniform reservoir.

The training set of the periodic refits of :class:`learners.refit.RefittingGPM`. Only strict pairs
(y = ±1) are stored. ``"sliding"`` keeps the last ``size`` pairs in a ring buffer; ``"reservoir"``
keeps a uniform sample of every pair offered so far (Vitter 1985, *Random Sampling with a
Reservoir*, Algorithm R: pair ``t`` replaces a random slot with probability ``size / t``).
Not thread-safe by itself: the owner holds its lock around every call.
"""

from __future__ import annotations

import numpy as np

__all__ = ["WINDOWS", "PairWindow"]

WINDOWS = ("sliding", "reservoir")


class PairWindow:
    """Ring buffer or reservoir of pairs ``(x_left, x_right, context, y)``.

    Parameters
    ----------
    size : int
        Most pairs kept.
    d, p : int
        Item features and context features per pair.
    kind : {"sliding", "reservoir"}
    rng : numpy.random.Generator
        Draws of the reservoir's slots.

    Examples
    --------
    >>> import numpy as np
    >>> w = PairWindow(3, 1, 0, "sliding", np.random.default_rng(0))
    >>> w.append(np.arange(5.0)[:, None], np.zeros((5, 1)), np.zeros((5, 0)), np.ones(5))
    >>> w.arrays()[0].ravel().tolist()    # the last three, oldest first
    [2.0, 3.0, 4.0]
    """

    def __init__(self, size: int, d: int, p: int, kind: str, rng: np.random.Generator):
        self.size, self.kind, self._rng = int(size), kind, rng
        self._XL = np.zeros((size, d))
        self._XR = np.zeros((size, d))
        self._U = np.zeros((size, p))
        self._y = np.zeros(size)
        self.len = 0           # stored pairs
        self.head = 0          # next slot (sliding window)
        self.n_offered = 0     # strict pairs offered so far (the reservoir's counter)

    def append(self, XL: np.ndarray, XR: np.ndarray, U: np.ndarray, Y: np.ndarray) -> None:
        """Offer ``k`` strict pairs in row order: (k, d), (k, d), (k, p), (k,).

        Sliding: one fancy-indexed write of the rows that survive (the last ``size``). Reservoir:
        one draw per row once full, in row order, so a batch equals the same rows offered one by one.
        """
        k = Y.shape[0]
        if self.kind == "sliding":
            ws = self.size
            take = slice(max(0, k - ws), k)      # only the last window_size rows survive
            pos = (self.head + max(0, k - ws) + np.arange(min(k, ws))) % ws
            self._XL[pos], self._XR[pos], self._U[pos], self._y[pos] = XL[take], XR[take], U[take], Y[take]
            self.head = (self.head + k) % ws
            self.len = min(self.len + k, ws)
            self.n_offered += k
            return
        for i in range(k):                       # Algorithm R, one draw per row
            self.n_offered += 1
            if self.len < self.size:
                slot = self.len
                self.len += 1
            else:
                j = int(self._rng.integers(0, self.n_offered))
                if j >= self.size:
                    continue
                slot = j
            self._XL[slot], self._XR[slot], self._U[slot], self._y[slot] = XL[i], XR[i], U[i], Y[i]

    def copy(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Copies of the stored pairs in slot order: (n, d), (n, d), (n, p), (n,)."""
        n = self.len
        return self._XL[:n].copy(), self._XR[:n].copy(), self._U[:n].copy(), self._y[:n].copy()

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The stored pairs oldest first for a full sliding window (else slot order), as copies."""
        n = self.len
        order = np.arange(n) if (self.kind != "sliding" or n < self.size) else (np.arange(n) + self.head) % n
        return self._XL[order], self._XR[order], self._U[order], self._y[order]

    def restore(self, XL: np.ndarray, XR: np.ndarray, U: np.ndarray | None, y: np.ndarray, n_offered: int) -> None:
        """Load pairs written by :meth:`arrays` (at most ``size``; ``U`` None = no context)."""
        n = min(int(y.shape[0]), self.size)
        self._XL[:n] = XL[:n]
        self._XR[:n] = XR[:n]
        if U is not None:
            self._U[:n] = U[:n]
        self._y[:n] = y[:n]
        self.len, self.head = n, n % self.size
        self.n_offered = int(n_offered)
