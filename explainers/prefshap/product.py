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

import numpy as np

__all__: list[str] = []

def product_game_shapley(A: np.ndarray, B: np.ndarray, W: np.ndarray, held: np.ndarray | None = None):
    """Exact Shapley values of v(S) = Σ_t W_t Π_{j∈S} A_tj Π_{j∉S} B_tj (T terms, d players), for one game or P.

    The closed form of the module docstring, computed by :func:`explainers.prefshap.compiled.sums_of_product_games`.

    Parameters
    ----------
    A : ndarray of shape (T, d), or (P, T, d) for P games
        Per-term factors of player j present.
    B : ndarray of shape (T, d) (shared by the games) or (P, T, d)
        Per-term factors of player j absent. B_tj = A_tj makes j a null player held in every coalition.
    W : ndarray of shape (T,) or (P, T)
    held : bool ndarray of shape (d,) or (P, d), optional
        Players held in every coalition (their factor A is a constant of every term; φ = 0 for them).

    Returns
    -------
    phi : ndarray (d,) or (P, d);  v_full : v(Ω), float or (P,);  v_empty : v(∅ ∪ held), float or (P,)

    Examples
    --------
    >>> A = np.array([[2.0, 3.0]]); B = np.array([[1.0, 1.0]])     # v(S) = Π_{j∈S} a_j
    >>> phi, full, empty = product_game_shapley(A, B, np.array([1.0]))
    >>> phi.round(12).tolist(), full, empty          # v({0}) = 2, v({1}) = 3, v(Ω) = 6
    ([2.0, 3.0], 6.0, 1.0)
    """
    from explainers.prefshap.compiled import sums_of_product_games

    one = A.ndim == 2
    A3 = A[None] if one else A
    P, T, d = A3.shape
    rows = np.arange(T)
    W2 = np.asarray(W, dtype=np.float64).reshape(P, T)
    H = None if held is None else np.broadcast_to(np.asarray(held, dtype=bool), (P, d))
    phi, v_full, v_empty = sums_of_product_games(A3[None], (np.zeros(T, np.int64), rows), (np.full(T, -1), rows),
                                                 B, rows, W2, H)
    if one:
        return phi[0], float(v_full[0]), float(v_empty[0])
    return phi, v_full, v_empty


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
    inv = 1.0 / np.asarray(ls, dtype=np.float64)
    z = (X * inv)[:, None, :] - (centres * inv)[None, :, :]
    np.square(z, out=z)
    z *= -0.5
    return np.exp(z, out=z)


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

    def _kernels(self, X: np.ndarray, member: np.ndarray | None) -> np.ndarray:
        """Each player's product kernel k_player(x_p, c_u) = exp(−½ Σ_{j∈player} (x_pj − c_uj)²/ℓ_j²): (k, M_u, n)
        (``member`` (n, d) bool, any groups of features; None: every feature a player)."""
        if member is None:
            return feature_kernels(X, self.centres, self.p.ls)
        if np.all(member.sum(axis=1) == 1):                                     # players of one feature each
            f = member.argmax(axis=1)
            return feature_kernels(X[:, f], self.centres[:, f], self.p.ls[f])
        c_aug = self._means.get(b"aug")
        if c_aug is None:
            cs = self.centres / self.p.ls
            c_aug = self._means[b"aug"] = np.concatenate([cs, cs * cs, np.ones((cs.shape[0], 1))], axis=1)
        m = member.T.astype(float)                                              # (d, n)
        k, n = X.shape[0], m.shape[1]
        xs = X / self.p.ls
        # Σ_{j∈player} (x_j − c_j)²/ℓ_j² = c²·m − 2 c·(x ⊙ m) + x²·m: one matrix product [c, c², 1] · [−2 x ⊙ m; m; x²·m]
        y_aug = np.concatenate([(-2.0 * xs[:, :, None] * m[None]).transpose(1, 0, 2).reshape(-1, k * n),
                                np.broadcast_to(m[:, None, :], (m.shape[0], k, n)).reshape(-1, k * n),
                                ((xs * xs) @ m).reshape(1, k * n)])
        E = c_aug @ y_aug                                                       # (M_u, k·n)
        E *= -0.5
        np.minimum(E, 0.0, out=E)
        out = np.empty((k, c_aug.shape[0], n))
        return np.exp(E.reshape(-1, k, n).transpose(1, 0, 2), out=out)

    def _term_rows(self, member: np.ndarray | None):
        """Where each term's factors live (cached per membership): (first, second, B, b_row) for
        :func:`~explainers.prefshap.compiled.sums_of_product_games`, ``first`` and ``second`` as (source, row)
        with source 0 the kernel values K(x^ℓ, c_u) and 1 the K(x^r, c_u) (u a distinct centre).

        The terms, in order: the two cross terms of k_E per centre pair m (present k(x^ℓ, c^ℓ_m) k(x^r, c^r_m) and
        k(x^ℓ, c^r_m) k(x^r, c^ℓ_m), absent μ(c^ℓ_m) μ(c^r_m)) when the pair kernel is in the model, then the item
        kernel's constant c (or a UPM's utilities) per distinct centre u: present k(x^ℓ, c_u), then k(x^r, c_u),
        absent μ(c_u)."""
        key = b"rows" + (b"" if member is None else member.tobytes() + bytes(member.shape))
        got = self._means.get(key)
        if got is None:
            Mu, M = self.centres.shape[0], self.L.shape[0]
            s1, r1, s2, r2, B, b_row = [], [], [], [], [], []
            if self.pair_scale:
                s1 += [np.zeros(M), np.zeros(M)]
                r1 += [self.L, self.R]
                s2 += [np.ones(M), np.ones(M)]
                r2 += [self.R, self.L]
                B.append(self._pair_means(member))
                b_row += [np.arange(M)] * 2
            if self.util_scale:
                u = np.arange(Mu)
                s1 += [np.zeros(Mu), np.ones(Mu)]
                r1 += [u, u]
                s2 += [np.full(Mu, -1)] * 2
                r2 += [u, u]
                b_row += [u + sum(b.shape[0] for b in B)] * 2
                B.append(self._player_means(member))
            s1, r1, s2, r2, b_row = (np.concatenate(a).astype(np.int64) for a in (s1, r1, s2, r2, b_row))
            got = self._means[key] = ((s1, r1), (s2, r2), np.ascontiguousarray(np.concatenate(B)), b_row)
        return got

    def _term_weights(self, w: np.ndarray, k: int) -> np.ndarray:
        """W (k, T) in the order of :meth:`_term_rows`: ±α_m/(1 + c) for the cross terms, ±(c/(1 + c)) Σ_m α_m
        ([L_m = u] − [R_m = u]) for the item constant (a UPM: the utilities' weights, c-free)."""
        w2 = np.broadcast_to(w, (k, w.shape[-1]))
        W = []
        if self.pair_scale:
            wp = w2 * self.pair_scale
            W += [wp, -wp]
        if self.util_scale:
            sw = np.broadcast_to(self.signed(w) * self.util_scale, (k, self.centres.shape[0]))
            W += [sw, -sw]
        return np.concatenate(W, axis=1)

    def item_terms(self, xl: np.ndarray, xr: np.ndarray, w: np.ndarray, member: np.ndarray | None = None):
        """(A (T, n), B (T, n), W (T,)) of ν_S(x^ℓ, x^r) for one duel (scaled items (d,); ``w`` the (M,) centre
        weights α, or α ⊙ k_U(u, u_m) for a C-GPM), in the order of :meth:`_term_rows`.

        ``member`` (n_players, d) bool: players as groups of features (default: every feature a player); a
        player's factors are the product kernel and the product of the marginal means over its features.
        Terms of weight zero are left out; a duel's held players stay players (pass them as ``held`` to
        :func:`product_game_shapley`)."""
        (s1, r1), (s2, r2), Bt, b_row = self._term_rows(member)
        F = np.stack([self._kernels(xl[None], member)[0], self._kernels(xr[None], member)[0]])   # (2, M_u, n)
        A = F[s1, r1]
        pair = s2 >= 0
        A[pair] *= F[s2[pair], r2[pair]]
        W = self._term_weights(w, 1)[0]
        keep = W != 0
        return A[keep], Bt[b_row][keep], W[keep]

    def duel_shapley(self, XL: np.ndarray, XR: np.ndarray, w: np.ndarray, member: np.ndarray | None = None,
                     held: np.ndarray | None = None):
        """Exact φ (k, n_players) of ν_S(x^ℓ, x^r) for k duels, with ν(Ω) and ν(held) (k,) each: the terms of
        :meth:`item_terms` summed in one compiled pass, each duel holding its own ``held`` (k, n_players)
        players (φ = 0 for them), without forming the terms' factors.

        Only the players that vary in some duel of the batch get kernel values per player; the players held in
        all of them are one factor, their joint product kernel k_H(x, c_u) (x^ℓ = x^r on them), held too."""
        from explainers.prefshap.compiled import sums_of_product_games

        d = XL.shape[1]
        mem = np.eye(d, dtype=bool) if member is None else member
        k, n = XL.shape[0], mem.shape[0]
        held = np.zeros((k, n), bool) if held is None else held
        everywhere = held.all(axis=0)
        cols = np.flatnonzero(~everywhere)
        first, second, Bt, b_row = self._term_rows(member)
        K = self._kernels(np.concatenate([XL, XR]), mem[cols])
        K = K.reshape(2, k, *K.shape[1:])                                        # (x^ℓ | x^r, duel, centre, player)
        W = self._term_weights(w, k)
        if everywhere.any():                 # their joint kernel, a factor of each present term's weight
            h = self._kernels(XL, mem[everywhere].any(axis=0)[None])[:, :, 0]    # (k, M_u)
            W = W * h[:, first[1]] * np.where(second[0] >= 0, h[:, second[1]], 1.0)
        phi = np.zeros((k, n))
        phi[:, cols], full, empty = sums_of_product_games(K, first, second, Bt if cols.size == n else Bt[:, cols],
                                                          b_row, W, held[:, cols])
        return phi, full, empty

    def context_terms(self, u: np.ndarray, xi_w: np.ndarray):
        """(A (M, p), B (M, p), W (M,)) of the context game ν_{S'}(u, x^ℓ, x^r) = Σ_m α_m Ξ_m Γ^U_{S'}(u_m, u)
        (Prop. 3.3 with the product-marginal reference); ``xi_w`` = α ⊙ Ξ(x^ℓ, x^r) (M,)."""
        Ku = feature_kernels(u[None], self.p.cu, self.p.ls_u)[0]         # (M, p)
        return Ku, self.mu_u, xi_w

