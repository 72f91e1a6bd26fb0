"""Exact Pref-SHAP under the product-marginal reference: Shapley values of sums of product games.

Hu, Chau, Ferrando Huertas & Sejdinovic (2022), *Explaining Preferences with Shapley Values*, Section 3.1
(the marginal reference in place of the observational one, "follows analogously"), with each absent
feature integrated out under its **own** marginal over the reference catalog Z = {z_i}_{i=1}^n::

    E[k_j(X_j, c_j)] = μ_j(c_j) = (1/n) Σ_i k_j(z_ij, c_j)                   (k_j → μ_j)

For the product RBF k = Π_j k_j and two independent items, every kernel factor of the model integrates
feature by feature, so each term of g is a *product game* over the features,

    v(S) = w · Π_{j∈S} a_j · Π_{j∉S} b_j,

e.g. for the first cross term of k_E and centre m: a_j = k_j(x^ℓ_j, c^ℓ_mj) k_j(x^r_j, c^r_mj),
b_j = μ_j(c^ℓ_mj) μ_j(c^r_mj), w = α_m (docs/prefshap.md lists all of them: the four cross terms of k_E,
the item kernel's constant c, UPM, and the context kernel of a C-GPM).

Shapley value of a product game (docs/prefshap.md, "Exact method"): for player i,

    φ_i = (a_i − b_i) Σ_{k=0}^{d−1} [k!(d−1−k)!/d!] e_k,   e_k = [t^k] Π_{j≠i} (b_j + a_j t),

and since k!(d−1−k)!/d! = ∫_0^1 s^k (1−s)^{d−1−k} ds (a Beta integral),

    φ_i = (a_i − b_i) ∫_0^1 Π_{j≠i} ((1−s) b_j + s a_j) ds,

the integral of a polynomial of degree d − 1 in s: Gauss–Legendre quadrature with ⌈d/2⌉ nodes on [0, 1]
evaluates it exactly. With exclusive prefix/suffix products over j the cost is O(d²) per term
(no division, so zero factors are harmless), O(T·d²) per duel for T terms. Linearity in the games gives
the model's Shapley values as the weighted sum over its terms. A player held in every coalition
(a duel's equal features, Appendix A) is the same game with b_i := a_i: its factor is the constant a_i,
φ_i = 0, and the other players' weights become those of the smaller game automatically.

The coalition values themselves, ν_S = Σ_t w_t Π_{j∈S} a_tj Π_{j∉S} b_tj, cost O(T·d) per coalition
(:func:`product_game_values`), which is what the distributional values of a GPM evaluate.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

__all__: list[str] = []

#: Terms × nodes per block of the quadrature (the working arrays (d, Q, block) stay in the cache).
_BLOCK = 1 << 15
#: Smallest factor for which Π_j / C_i stands in for Π_{j≠i} (kernel values and marginal means are ≤ 1).
_SAFE = 1e-250


@lru_cache(maxsize=64)
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


def product_game_shapley(A: np.ndarray, B: np.ndarray, W: np.ndarray):
    """Exact Shapley values of v(S) = Σ_t W_t Π_{j∈S} A_tj Π_{j∉S} B_tj (T terms, d players), for one game or P.

    Parameters
    ----------
    A : ndarray of shape (T, d), or (P, T, d) for P games
        Per-term factors of player j present.
    B : ndarray of shape (T, d) (shared by the games) or (P, T, d)
        Per-term factors of player j absent. B_tj = A_tj makes j a null player held in every coalition.
    W : ndarray of shape (T,) or (P, T)

    Returns
    -------
    phi : ndarray (d,) or (P, d);  v_full : v(Ω), float or (P,);  v_empty : v(∅), float or (P,)

    Examples
    --------
    >>> A = np.array([[2.0, 3.0]]); B = np.array([[1.0, 1.0]])     # v(S) = Π_{j∈S} a_j
    >>> phi, full, empty = product_game_shapley(A, B, np.array([1.0]))
    >>> phi.tolist(), full, empty          # v({0}) = 2, v({1}) = 3, v(Ω) = 6
    ([2.0, 3.0], 6.0, 1.0)
    """
    one = A.ndim == 2
    A3 = A[None] if one else A
    P, T, d = A3.shape
    W2 = np.asarray(W, dtype=np.float64).reshape(P, T)
    # (d, P·T), terms of game p at columns p·T … p·T + T − 1: every reduction over players runs along rows
    At = np.ascontiguousarray(A3.transpose(2, 0, 1)).reshape(d, P * T)
    Bt = np.ascontiguousarray(np.broadcast_to(B, A3.shape).transpose(2, 0, 1)).reshape(d, P * T)
    v_full = (W2 * np.prod(At, axis=0).reshape(P, T)).sum(axis=1)
    v_empty = (W2 * np.prod(Bt, axis=0).reshape(P, T)).sum(axis=1)
    phi = np.zeros((P, d))
    if d and T:
        s, lam = gauss_legendre01((d + 1) // 2)
        Q = s.shape[0]
        Dt = At - Bt
        Wf = W2.reshape(-1)
        safe = min(float(At.min()), float(Bt.min())) > _SAFE      # then every (1−s) b + s a is too
        step = max(1, _BLOCK // (Q * d))
        for a in range(0, P * T, step):
            b = min(P * T, a + step)
            D = Dt[:, a:b]
            C = Bt[:, None, a:b] + s[None, :, None] * D[:, None, :]        # (d, Q, t): (1−s) b + s a
            Y = _excluded_integrals(C, lam, safe) * D * Wf[a:b]            # (d, t) per-term contributions
            g0, g1 = a // T, (b - 1) // T                                  # the games this block touches
            cuts = np.maximum(np.arange(g0, g1 + 1) * T - a, 0)
            phi[g0:g1 + 1] += np.add.reduceat(Y, cuts, axis=1).T
    if one:
        return phi[0], float(v_full[0]), float(v_empty[0])
    return phi, v_full, v_empty


def _excluded_integrals(C: np.ndarray, lam: np.ndarray, safe: bool) -> np.ndarray:
    """Σ_q λ_q Π_{j≠i} C[j, q, t] for every i: (d, Q, t) → (d, t) (C is overwritten).

    Π_{j≠i} = Π_j / C_i when every factor is a normal float (relative error O(d·eps)); a block with a
    zero or subnormal factor (``safe`` False) takes exclusive prefix/suffix products instead (no division)."""
    d = C.shape[0]
    if safe:
        Pi = np.prod(C, axis=0) * lam[:, None]                     # (Q, t)
        np.divide(Pi[None], C, out=C)
        return C.sum(axis=1)
    pre = np.empty_like(C)                                         # Π_{j<i}
    pre[0] = 1.0
    for j in range(1, d):
        np.multiply(pre[j - 1], C[j - 1], out=pre[j])
    suf = np.ones(C.shape[1:])                                     # Π_{j>i}, built downwards
    for j in range(d - 1, -1, -1):
        pre[j] *= suf
        suf *= C[j]
    return np.einsum("q,jqt->jt", lam, pre)


def product_game_values(A: np.ndarray, B: np.ndarray, W: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """v(S) = Σ_t W_t Π_{j∈S} A_tj Π_{j∉S} B_tj for each coalition row of ``masks``: ndarray (K,).

    O(T·d) per coalition: one matrix product in log space (factors are kernel values, ≥ 0; a zero
    factor is floored at the smallest normal float, an absolute change below 1e-300 per term).

    Examples
    --------
    >>> A = np.array([[2.0, 3.0]]); B = np.array([[1.0, 1.0]])
    >>> product_game_values(A, B, np.array([1.0]), np.array([[0, 0], [1, 0], [0, 1], [1, 1]], bool)).round(12).tolist()
    [1.0, 2.0, 3.0, 6.0]
    """
    tiny = np.finfo(np.float64).tiny
    lA = np.log(np.maximum(A, tiny))
    lB = np.log(np.maximum(B, tiny))
    Z = np.asarray(masks, dtype=np.float64)
    E = Z @ (lA - lB).T + lB.sum(axis=1)[None, :]                  # (K, T) log Π
    np.exp(E, out=E)
    return E @ np.asarray(W, dtype=np.float64).reshape(-1)


def product_game_table(A: np.ndarray, B: np.ndarray, W: np.ndarray) -> np.ndarray:
    """v(S) for all 2^d coalitions, row i the coalition whose bit j is player j (the order of
    :func:`explainers._coalitions.all_coalitions`): ndarray (2^d,).

    Meet in the middle: the products over the first h players for each of their 2^h coalitions (built by
    doubling: the coalitions without player j times b_j, then with it times a_j), the same for the other
    d − h, and v = (left ⊙ W) · rightᵀ, one matrix product over the terms: 2^d · T multiply-adds in BLAS
    and no exponentials.

    Examples
    --------
    >>> product_game_table(np.array([[2.0, 3.0]]), np.array([[1.0, 1.0]]), np.array([1.0])).tolist()
    [1.0, 2.0, 3.0, 6.0]
    """
    T, d = A.shape

    def half(cols):
        table = np.ones((1, T))
        for j in cols:
            table = np.concatenate([table * B[:, j], table * A[:, j]])
        return table                                                   # (2^len(cols), T)

    h = d // 2
    low, high = half(range(h)), half(range(h, d))
    V = (low * np.asarray(W, dtype=np.float64).reshape(1, -1)) @ high.T   # V[s_low, s_high]
    return V.T.reshape(-1)                                             # code = s_low + 2^h · s_high


def marginal_means(ref: np.ndarray, centres: np.ndarray, ls: np.ndarray) -> np.ndarray:
    """μ_j(c_uj) = (1/n) Σ_i exp(−(z_ij − c_uj)² / (2 ℓ_j²)) for each centre row: ndarray (M_u, d).

    Examples
    --------
    >>> marginal_means(np.array([[0.0], [2.0]]), np.array([[0.0]]), np.array([1.0])).round(6).tolist()
    [[0.567668]]
    """
    out = np.empty(centres.shape)
    for j in range(centres.shape[1]):
        diff = (centres[:, j][:, None] - ref[:, j][None, :]) / ls[j]
        out[:, j] = np.exp(-0.5 * diff * diff).mean(axis=1)
    return out


def feature_kernels(X: np.ndarray, centres: np.ndarray, ls: np.ndarray) -> np.ndarray:
    """k_j(x_pj, c_uj) per feature: (P, d), (M_u, d) → (P, M_u, d)."""
    diff = (X[:, None, :] - centres[None, :, :]) / ls
    return np.exp(-0.5 * diff * diff)


class _ProductModel:
    """The factors of a fitted GPM / C-GPM / UPM as sums of product games (module docstring).

    Parameters
    ----------
    parts : :class:`explainers.prefshap.model._Parts`
    ref : ndarray (n, d)
        Reference catalog, scaled units.
    ref_u : ndarray (n_u, p), optional
        Reference contexts (C-GPM), scaled units.
    """

    def __init__(self, parts, ref: np.ndarray, ref_u: np.ndarray | None = None):
        self.p = parts
        uniq, inv = np.unique(np.concatenate([parts.cl, parts.cr]), axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        M = parts.cl.shape[0]
        self.centres = uniq                                        # distinct centre items (M_u, d)
        self.L, self.R = inv[:M], inv[M:]
        self.mu = marginal_means(ref, uniq, parts.ls)              # (M_u, d)
        self._means: dict = {}
        c = float(parts.constant)
        self.pair_scale = 1.0 / (1.0 + c) if parts.kind != "upm" else 0.0
        self.util_scale = 1.0 if parts.kind == "upm" else c / (1.0 + c)
        if parts.kind == "cgpm":
            self.mu_u = marginal_means(ref_u, parts.cu, parts.ls_u)    # (M, p)

    def signed(self, W: np.ndarray) -> np.ndarray:
        """Σ_m W_m ([L_m = u] − [R_m = u]) on the distinct centres: (M_u,) or (P, M_u) from (M,) or (P, M)."""
        W2 = np.atleast_2d(W)
        out = np.zeros((W2.shape[0], self.centres.shape[0]))
        for r in range(W2.shape[0]):
            out[r] = np.bincount(self.L, W2[r], self.centres.shape[0]) - np.bincount(self.R, W2[r], self.centres.shape[0])
        return out if W.ndim == 2 else out[0]

    def _player_means(self, member: np.ndarray | None) -> np.ndarray:
        """Π_{j∈player} μ_j(c_uj) per distinct centre and player: (M_u, n_players) (cached per membership)."""
        if member is None:
            return self.mu
        key = member.tobytes() + bytes(member.shape)
        got = self._means.get(key)
        if got is None:
            got = self._means[key] = np.exp(np.log(np.maximum(self.mu, np.finfo(float).tiny)) @ member.T.astype(float))
        return got

    def _pair_means(self, member: np.ndarray | None) -> np.ndarray:
        """The absent factors of both cross terms of k_E, μ(c^ℓ_m) μ(c^r_m) per centre and player: (M, n_players)."""
        key = b"pair" + (b"" if member is None else member.tobytes() + bytes(member.shape))
        got = self._means.get(key)
        if got is None:
            mu_pl = self._player_means(member)
            got = self._means[key] = mu_pl[self.L] * mu_pl[self.R]
        return got

    def item_terms(self, xl: np.ndarray, xr: np.ndarray, w: np.ndarray, member: np.ndarray | None = None,
                   held: np.ndarray | None = None):
        """(A (T, n'), B (T, n'), W (T,)) of ν_S(x^ℓ, x^r) for one duel: :meth:`item_terms_many` of one duel."""
        A, B, W = self.item_terms_many(xl[None], xr[None], w, member, held)
        return A[0], B, W[0]

    def item_terms_many(self, XL: np.ndarray, XR: np.ndarray, w: np.ndarray, member: np.ndarray | None = None,
                        held: np.ndarray | None = None):
        """(A (k, T, n'), B (T, n'), W (k, T)) of ν_S(x^ℓ, x^r) for k duels that hold the same players (scaled
        items (k, d); ``w`` the (M,) centre weights α, or per duel (k, M), α ⊙ k_U(u, u_m) for a C-GPM).

        ``member`` (n_players, d) bool: players as groups of features (default: every feature a player); a
        player's factors are the product kernel and the product of the marginal means over its features.
        ``held`` (n_players,) bool: players equal in both items, held in every coalition; they leave the factors
        (n' = the other players) and enter the weights through their product kernel
        k_H(x, c) = exp(−½ Σ_{j∈H} (x_j − c_j)²/ℓ_j²), the same for both items and both cross terms."""
        ls = self.p.ls
        k, d = XL.shape
        mem = np.eye(d, dtype=bool) if member is None else member
        mu_pl = self._player_means(member)
        B_pair = self._pair_means(member) if self.pair_scale else None
        h = None
        if held is not None and held.any():
            hf = mem[held].any(axis=0)
            xh, ch = XL[:, hf] / ls[hf], self.centres[:, hf] / ls[hf]
            h = np.exp(np.minimum(0.0, xh @ ch.T - 0.5 * (xh * xh).sum(1)[:, None] - 0.5 * (ch * ch).sum(1)[None]))
            mem, mu_pl = mem[~held], mu_pl[:, ~held]
            B_pair = None if B_pair is None else B_pair[:, ~held]
        if member is None and h is None:
            Kl = feature_kernels(XL, self.centres, ls)                          # (k, M_u, d)
            Kr = feature_kernels(XR, self.centres, ls)
        else:
            used = mem.any(axis=0)
            m = mem[:, used].T.astype(float)                                     # (d_used, n')
            cs = self.centres[:, used] / ls[used]
            c2 = (cs * cs) @ m                                                   # (M_u, n')
            # Σ_{j∈player} (x_j − c_j)²/ℓ_j² = x²·m + c²·m − 2 c·(x ⊙ m): matrix products, no (k, M_u, d) differences
            Kl, Kr = (np.exp(np.minimum(0.0, (cs @ (xs[:, :, None] * m[None])) - 0.5 * ((xs * xs) @ m)[:, None, :]
                                        - 0.5 * c2[None])) for xs in (XL[:, used] / ls[used], XR[:, used] / ls[used]))
        w2 = np.broadcast_to(w, (k, w.shape[-1]))
        A, B, Wt = [], [], []
        if self.pair_scale:
            wp = w2 * self.pair_scale if h is None else w2 * (self.pair_scale * h[:, self.L] * h[:, self.R])
            A += [Kl[:, self.L] * Kr[:, self.R], Kl[:, self.R] * Kr[:, self.L]]
            B += [B_pair, B_pair]
            Wt += [wp, -wp]
        if self.util_scale:
            sw = np.broadcast_to(self.signed(w) * self.util_scale, (k, self.centres.shape[0]))
            keep = np.flatnonzero(sw.any(axis=0))
            su = sw[:, keep] if h is None else sw[:, keep] * h[:, keep]
            A += [Kl[:, keep], Kr[:, keep]]
            B += [mu_pl[keep], mu_pl[keep]]
            Wt += [su, -su]
        return np.concatenate(A, axis=1), np.concatenate(B), np.concatenate(Wt, axis=1)

    def context_terms(self, u: np.ndarray, xi_w: np.ndarray):
        """(A (M, p), B (M, p), W (M,)) of the context game ν_{S'}(u, x^ℓ, x^r) = Σ_m α_m Ξ_m Γ^U_{S'}(u_m, u)
        (Prop. 3.3 with the product-marginal reference); ``xi_w`` = α ⊙ Ξ(x^ℓ, x^r) (M,)."""
        Ku = feature_kernels(u[None], self.p.cu, self.p.ls_u)[0]         # (M, p)
        return Ku, self.mu_u, xi_w


def held_game(A: np.ndarray, B: np.ndarray, W: np.ndarray, held: np.ndarray):
    """The game with the players ``held`` (bool (d,)) in every coalition, on the others only:
    (A', B', W') with W' = W ⊙ Π_{held} A (the held factors are constants of every coalition)."""
    if not held.any():
        return A, B, W
    act = ~held
    return A[:, act], B[:, act], W * np.prod(A[:, held], axis=1)
