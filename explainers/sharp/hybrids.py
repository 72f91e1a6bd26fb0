"""Scores of ShaRP's hybrids for a model that is a form of pairs of features (e.g. a 2-additive capacity).

ShaRP (Pliatsika et al. 2024, Section 3, Algorithm 1 lines 4–7) scores, for every coalition S of
removed features, the hybrids z = (v on S^c, u on S) of an explained item v and reference rows u.
When the score is F(z) = Σ_i w_i z_i + ½ Σ_{i≠j} W_ij op(z_i, z_j) (a 2-additive capacity in Möbius
form, Grabisch 1997: op = min for the Choquet integral), with k = 1_{S^c} the indicator of the kept
features,

    F(z) = Σ_{ij} k_i k_j A^v_ij + Σ_{ij} (1−k_i)(1−k_j) A^u_ij + Σ_{i≠j} k_i (1−k_j) W_ij op(v_i, u_j),

A^x = diag(w ⊙ x) + ½ W ⊙ op(x_i, x_j): a term of the item, one of the reference row and one cross term,
each one matrix product over all coalitions. Features always removed together (a player's) are summed
into one block first, so the products run over players² rather than features². The hybrids are never
built: for Pokémon's 9 players and a 50-row catalog that is 510 × 81 × 50 multiply-adds per item instead
of scoring 25,500 rows of 351 Choquet terms.

The scores equal those of the hybrid rows up to rounding (a few ulps of the score range); ShaRP
compares scores with its tie tolerance (``tie_rtol``), so the ranks, and the values, are the same.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable

import numpy as np

__all__: list[str] = []


class PairwiseHybrids:
    """``hyb(V, R, removed) -> scores (B, C, m)`` of the hybrids of rows ``V`` and reference rows ``R``.

    Parameters
    ----------
    prep : callable ``X (N, d) -> U (N, d)``
        The model's input transform (checks, scaling), applied row-wise and feature-wise.
    w : ndarray of shape (d,)
    W : ndarray of shape (d, d), symmetric with a zero diagonal
    op : numpy ufunc
        ``np.minimum`` (Choquet) or ``np.multiply`` (multilinear).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> w, W = rng.random(3), rng.random((3, 3)); W = np.triu(W, 1) + np.triu(W, 1).T
    >>> F = lambda X: X @ w + 0.5 * np.einsum("ij,nij->n", W, np.minimum(X[:, :, None], X[:, None, :]))
    >>> V, R = rng.random((2, 3)), rng.random((1, 4, 3))
    >>> removed = np.array([[True, False, False], [False, True, True]])
    >>> s = PairwiseHybrids(lambda X: X, w, W, np.minimum)(V, R, removed)       # (2, 2, 4)
    >>> z = np.where(removed[1], R[0, 3], V[0])                                 # item 0, coalition 1, row 3
    >>> bool(abs(s[0, 1, 3] - F(z[None])[0]) < 1e-12)
    True
    """

    def __init__(self, prep: Callable[[np.ndarray], np.ndarray], w: np.ndarray, W: np.ndarray, op):
        self.prep, self.w, self.W, self.op = prep, np.asarray(w, float), np.asarray(W, float), op

    def _own(self, U: np.ndarray, G: np.ndarray) -> np.ndarray:
        """A^x summed into blocks: (N, g, g) for rows U (N, d)."""
        A = 0.5 * self.W * self.op(U[:, :, None], U[:, None, :])
        idx = np.arange(U.shape[1])
        A[:, idx, idx] = self.w * U
        return G.T @ A @ G

    def __call__(self, V: np.ndarray, R: np.ndarray, removed: np.ndarray) -> np.ndarray:
        """Scores of the hybrids.

        Parameters
        ----------
        V : ndarray of shape (B, d)
            Explained rows (raw units).
        R : ndarray of shape (B', m, d), B' ∈ {1, B}
            Reference rows (shared when B' = 1, else per item).
        removed : bool ndarray of shape (C, d)
            Per coalition, the features taken from the reference row.

        Returns
        -------
        ndarray of shape (B, C, m)
        """
        B, d = V.shape
        Bp, m, _ = R.shape
        C = removed.shape[0]
        G, kk, rr, kr = _blocks(np.ascontiguousarray(removed).tobytes(), removed.shape)
        g = G.shape[1]
        Uv = self.prep(V)
        Ur = self.prep(R.reshape(-1, d))
        Av = self._own(Uv, G).reshape(B, g * g)
        Ar = self._own(Ur, G).reshape(Bp * m, g * g)
        Y = self.W * self.op(Uv[:, None, :, None], Ur.reshape(Bp, m, 1, d))      # (B, m, d, d): W_ij op(v_i, u_j)
        Y = G.T @ Y @ G                                                          # (B, m, g, g)
        out = (kr @ Y.reshape(-1, g * g).T).reshape(C, B, m).transpose(1, 0, 2)          # cross terms
        out += (kk @ Av.T).T[:, :, None]                                                 # the item's own
        out += (rr @ Ar.T).reshape(C, Bp, m).transpose(1, 0, 2)                          # the row's own
        return out


@lru_cache(maxsize=32)
def _blocks(removed_bytes: bytes, shape: tuple) -> tuple:
    """The player blocks of a set of removal masks ``(C, d)``: ``(G (d, g), kk, rr, kr)`` where ``G`` maps
    features to blocks (features removed together form one block, a player) and ``kk``/``rr``/``kr``
    ``(C, g·g)`` are the kept×kept, removed×removed and kept×removed indicators of each coalition.
    Cached by the masks' bytes: the stream explains every event with the same coalitions."""
    removed = np.frombuffer(removed_bytes, dtype=bool).reshape(shape)
    C, d = shape
    first: dict[bytes, int] = {}
    inv = np.array([first.setdefault(col.tobytes(), len(first)) for col in np.ascontiguousarray(removed.T)])
    g = len(first)
    G = np.zeros((d, g))
    G[np.arange(d), inv] = 1.0
    kf = (~removed[:, np.unique(inv, return_index=True)[1]]).astype(np.float64)   # (C, g) kept blocks
    rf = 1.0 - kf
    out = (G, (kf[:, :, None] * kf[:, None, :]).reshape(C, g * g), (rf[:, :, None] * rf[:, None, :]).reshape(C, g * g),
           (kf[:, :, None] * rf[:, None, :]).reshape(C, g * g))
    for a in out:
        a.flags.writeable = False
    return out
