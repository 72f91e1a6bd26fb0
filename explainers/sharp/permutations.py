"""Approximate ShaRP by sampled permutations of the players, shared by every explained item.

The exact weights of Pliatsika, Fonseca, Akhynko, Shevchenko & Stoyanovich (2024, *ShaRP: Explaining
Rankings and Preferences with Shapley Values*, Algorithm 1 line 8; Eq. 6) need all 2^d coalitions.
Their approximation (Algorithm 1's ``m`` and ``c``, Section 8.3) samples reference rows and caps the
coalition size; above ``max_exact_players`` players we sample *orders* of the players instead: for
a random order π, player π_k's contribution is Q(S_{k−1}) − Q(S_k) with S_k = {π_1, …, π_k} removed,
which is an unbiased estimate of its Shapley value (the Shapley value is the mean over uniform
orders). Each order is paired with its reverse (antithetic sampling), the pairs are i.i.d., and the
standard error of each player's value is the standard deviation over pairs / √pairs. Every order
telescopes to Q(∅) − Q(A), so the estimate is exactly efficient. The coalitions of all orders are
evaluated once for the whole batch of explained items.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

__all__ = ["permutation_shapley"]


def permutation_shapley(game: Callable[[np.ndarray], np.ndarray], p: int, n_permutations: int,
                        rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Shapley values of the removal games ``Q`` from ``n_permutations`` antithetic orders.

    Parameters
    ----------
    game : callable
        ``game(codes (K,) int64) -> Q (B, K)``: the value of each coalition of removed players (bit ``j``
        set = player ``j`` removed) for each of ``B`` explained items.
    p : int
        Number of players (≤ 62).
    n_permutations : int
        Orders drawn (rounded up to an even number, ≥ 4).
    rng : numpy.random.Generator

    Returns
    -------
    phi : ndarray of shape (B, p)
        ``mean_π [Q(S_{k−1}) − Q(S_k)]`` per player (multiply by α for the QoI's sign).
    stderr : ndarray of shape (B, p)
        Standard error of ``phi`` over the antithetic pairs.
    n_coalitions, n_orders : int
        Distinct coalitions evaluated and orders used.

    Examples
    --------
    >>> w = np.array([1.0, 2.0, 3.0])           # additive game: exact after one order
    >>> def game(codes):
    ...     bits = (codes[:, None] >> np.arange(3)) & 1
    ...     return -(bits @ w)[None, :]
    >>> phi, se, k, t = permutation_shapley(game, 3, 4, np.random.default_rng(0))
    >>> phi.round(12).tolist(), float(se.max())
    ([[1.0, 2.0, 3.0]], 0.0)
    """
    half = max(2, (int(n_permutations) + 1) // 2)
    perms = np.argsort(rng.random((half, p)), axis=1)
    perms = np.concatenate([perms, perms[:, ::-1]])
    T = perms.shape[0]
    chains = np.concatenate([np.zeros((T, 1), np.int64), np.cumsum(np.left_shift(1, perms, dtype=np.int64), axis=1)],
                            axis=1)                                      # (T, p + 1): S_0 = ∅ … S_p = A
    flat = chains.reshape(-1)
    uniq, first, inv = np.unique(flat, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")                              # chain order: few runs per feature
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    Q = np.asarray(game(uniq[order]), dtype=np.float64)
    Qc = Q[:, rank[inv.reshape(-1)]].reshape(Q.shape[0], T, p + 1)
    marg = Qc[:, :, :-1] - Qc[:, :, 1:]                                   # (B, T, p) in order position
    phi_t = np.empty_like(marg)
    np.put_along_axis(phi_t, np.broadcast_to(perms[None], marg.shape), marg, axis=2)
    pairs = (phi_t[:, :half] + phi_t[:, half:]) / 2.0
    phi = pairs.mean(axis=1)
    stderr = pairs.std(axis=1, ddof=1) / math.sqrt(half)
    return phi, stderr, int(uniq.size), int(T)
