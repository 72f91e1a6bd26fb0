"""The Shapley values of sums of product games in one compiled loop (numba).

Hu, Chau, Ferrando Huertas & Sejdinovic (2022), *Explaining Preferences with Shapley Values*, Section 3.1
with the product-marginal reference: every term of a GPM duel is a product game
v_t(S) = W_t Π_{j∈S} a_tj Π_{j∉S} b_tj, and its Shapley value is (docs/prefshap.md, "Exact method")

    φ_i = W_t (a_ti − b_ti) ∫_0^1 Π_{j≠i} (b_tj + s (a_tj − b_tj)) ds,

a polynomial of degree n − 1 in s, integrated exactly by the ⌈n/2⌉-node Gauss–Legendre rule on [0, 1].
:func:`sums_of_product_games` evaluates Σ_t of it for every player with one pass over the terms: for each
node, the products Π_{j<i} on the way up and Π_{j>i} on the way down (no division, so zero factors are
harmless), O(n·⌈n/2⌉) multiply-adds per term, all in registers. Held players (a duel's equal features,
Appendix A: b := a) are folded into the term's constant, so each duel costs only its varying players.

Why compiled: the same arithmetic in numpy makes eight passes over (n, Q, T) temporaries and spends most of
its time in memory; a GPM duel's factors are gathered from its per-centre kernel values here without being
materialised (``bench/prefshap_exact.py`` measures the gain against the coalition path).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numba import njit

__all__ = ["gauss_legendre01", "sums_of_product_games", "warm"]


def gauss_legendre01(q: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of the q-point Gauss–Legendre rule on [0, 1] (exact for degree ≤ 2q − 1).

    Examples
    --------
    >>> s, lam = gauss_legendre01(2)
    >>> round(float(lam @ s**3), 12), round(float(lam.sum()), 12)
    (0.25, 1.0)
    """
    x, w = np.polynomial.legendre.leggauss(max(1, int(q)))
    return (x + 1.0) / 2.0, w / 2.0


@lru_cache(maxsize=16)
def _node_tables(n_max: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss–Legendre nodes and weights on [0, 1], row q holding the q-point rule: two (Q+1, Q) arrays."""
    Q = max(1, (n_max + 1) // 2)
    s, lam = np.zeros((Q + 1, Q)), np.zeros((Q + 1, Q))
    for q in range(1, Q + 1):
        s[q, :q], lam[q, :q] = gauss_legendre01(q)
    s.setflags(write=False)
    lam.setflags(write=False)
    return s, lam


def sums_of_product_games(F: np.ndarray, first: tuple, second: tuple, B: np.ndarray, b_row: np.ndarray,
                          W: np.ndarray, held: np.ndarray | None = None):
    """Exact Shapley values of P games v_p(S) = Σ_t W_pt Π_{j∈S} a_ptj Π_{j∉S} b_ptj on n players.

    The present factors are products of at most two rows of ``F``: a_ptj = F[σ_t, p, ρ_t, j] · F[σ'_t, p, ρ'_t, j]
    with ``first`` = (σ, ρ) and ``second`` = (σ', ρ') (σ'_t < 0: the first row alone), so that a GPM's four
    cross terms are read from its per-centre kernel values of both items without being formed; the absent
    factors are rows of ``B``: b_ptj = B[p or 0, b_row_t, j].

    Parameters
    ----------
    F : ndarray (S, P, R, n)
        S sources of factor rows (a GPM's: the kernel values of x^ℓ and of x^r at its centres).
    first, second : (int ndarray (T,), int ndarray (T,))
        Source and row of each term's first and second factor.
    B : ndarray (R_b, n) shared by the games, or (P, R_b, n)
    b_row : int ndarray (T,)
    W : ndarray (P, T)
    held : bool ndarray (P, n), optional
        Players in every coalition (b := a): φ = 0 for them and ``empty`` is v(held).

    Returns
    -------
    phi : ndarray (P, n);  full : v(Ω) (P,);  empty : v(held) (P,)

    Examples
    --------
    >>> F = np.array([[[[2.0, 3.0]]]]); B = np.array([[1.0, 1.0]])       # v(S) = Π_{j∈S} a_j
    >>> one, none = (np.array([0]), np.array([0])), (np.array([-1]), np.array([0]))
    >>> phi, full, empty = sums_of_product_games(F, one, none, B, np.array([0]), np.ones((1, 1)))
    >>> phi.round(12).tolist(), full.tolist(), empty.tolist()             # v({0}) = 2, v({1}) = 3, v(Ω) = 6
    ([[2.0, 3.0]], [6.0], [1.0])
    """
    F = np.ascontiguousarray(F, dtype=np.float64)
    _, P, _, n = F.shape
    T = first[0].shape[0]
    B3 = np.ascontiguousarray(B if B.ndim == 3 else B[None], dtype=np.float64)
    W = np.ascontiguousarray(np.broadcast_to(W, (P, T)), dtype=np.float64)
    held = np.zeros((P, n), np.bool_) if held is None else np.ascontiguousarray(held, dtype=np.bool_)
    s, lam = _node_tables(n)
    phi, full, empty = np.zeros((P, n)), np.empty(P), np.empty(P)
    idx = [np.ascontiguousarray(a, dtype=np.int64) for a in (*first, *second, b_row)]
    _games(F, *idx, B3, W, held, s, lam, phi, full, empty)
    return phi, full, empty


def warm() -> None:
    """Load the compiled loop now (from numba's cache: about 0.3 s; compiling it: about 1.5 s), so that a worker's
    first explanation does not (the ``warm`` of the ``pref-shap`` explainers, :mod:`stream.plugins.gpm`).

    Examples
    --------
    >>> warm()
    """
    one = np.zeros(1, np.int64)
    sums_of_product_games(np.ones((1, 1, 1, 1)), (one, one), (one - 1, one), np.ones((1, 1)), one, np.ones((1, 1)))


#: Above this many nodes the nodes' product chains run side by side (independent multiplies in flight);
#: below it one node at a time is faster (measured on the Pokémon GPM: 9 varying players, and all 26).
_SIDE_BY_SIDE = 6


@njit(cache=True, nogil=True, boundscheck=False, fastmath={"reassoc", "contract"})
def _games(F, s1, r1, s2, r2, b_row, B, W, held, s, lam, phi, full, empty):  # pragma: no cover - compiled
    _, P, _, n = F.shape
    T = r1.shape[0]
    Qm = s.shape[1]
    act = np.empty(n, np.int64)                      # a duel's varying players
    hl = np.empty(n, np.int64)                       # and its held ones
    a = np.empty(n)
    b = np.empty(n)
    D = np.empty(n)
    pre = np.empty(n)
    pre_q = np.empty((n, Qm))
    r_q = np.empty(Qm)
    acc = np.empty(n)
    for p in range(P):
        na = 0
        nh = 0
        for j in range(n):
            if held[p, j]:
                hl[nh] = j
                nh += 1
            else:
                act[na] = j
                na += 1
        Q = (na + 1) // 2
        pb = p if B.shape[0] > 1 else 0
        acc[:] = 0.0
        v_full = 0.0
        v_empty = 0.0
        for t in range(T):
            w = W[p, t]
            if w == 0.0:
                continue
            a1 = F[s1[t], p, r1[t]]
            bt = B[pb, b_row[t]]
            if s2[t] >= 0:
                a2 = F[s2[t], p, r2[t]]
                for k in range(nh):                  # held players: constants of every coalition
                    w *= a1[hl[k]] * a2[hl[k]]
                for k in range(na):
                    a[k] = a1[act[k]] * a2[act[k]]
            else:
                for k in range(nh):
                    w *= a1[hl[k]]
                for k in range(na):
                    a[k] = a1[act[k]]
            pa = w
            pe = w
            for k in range(na):
                b[k] = bt[act[k]]
                D[k] = a[k] - b[k]
                pa *= a[k]
                pe *= b[k]
            v_full += pa
            v_empty += pe
            if Q > _SIDE_BY_SIDE:
                r_q[:Q] = 1.0
                for k in range(na):                  # Π_{j<i} at every node
                    for q in range(Q):
                        pre_q[k, q] = r_q[q]
                        r_q[q] *= b[k] + s[Q, q] * D[k]
                for q in range(Q):
                    r_q[q] = lam[Q, q] * w
                for k in range(na - 1, -1, -1):      # times Π_{j>i}, built downwards
                    tot = 0.0
                    for q in range(Q):
                        tot += pre_q[k, q] * r_q[q]
                        r_q[q] *= b[k] + s[Q, q] * D[k]
                    acc[k] += D[k] * tot
                continue
            for q in range(Q):
                x = s[Q, q]
                r = 1.0
                for k in range(na):                  # Π_{j<i} at node s_q
                    pre[k] = r
                    r *= b[k] + x * D[k]
                r = lam[Q, q] * w
                for k in range(na - 1, -1, -1):      # times Π_{j>i}, built downwards
                    acc[k] += D[k] * pre[k] * r
                    r *= b[k] + x * D[k]
        for k in range(na):
            phi[p, act[k]] = acc[k]
        full[p] = v_full
        empty[p] = v_empty
