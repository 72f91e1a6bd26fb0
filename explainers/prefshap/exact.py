"""Table 1's tasks under the product-marginal value function, exact at any width.

Hu, Chau, Ferrando Huertas & Sejdinovic (2022), *Explaining Preferences with Shapley Values*, Section 3.1
(marginal reference), Table 1 rows 1–4, Appendix A (a duel's constant players held): each duel's value
function is a sum of product games (:mod:`explainers.prefshap.product`) and its Shapley values are the
closed form of those games, O(T·d²) per duel, with no coalition enumerated or sampled. Mixed into
:class:`explainers.prefshap.PrefSHAP` (``value_function="product-marginal"``).
"""

from __future__ import annotations

import numpy as np

from explainers.prefshap.product import product_game_shapley

__all__: list[str] = []

#: Duels per compiled pass: their per-centre kernel values, (2 M_u, n) each, stay in the cache.
_CHUNK = 16


class _ExactTasks:
    """Exact product-marginal Pref-SHAP (needs :class:`~explainers.prefshap.PrefSHAP`'s ``_p``, ``_product``,
    ``players``)."""

    def _per_duel_product(self, XL: np.ndarray, XR: np.ndarray, U, W, eng):
        """φ (P, n_players), ν(∅ ∪ held), ν(Ω) and the extras of a batch, each duel its own exact game.

        A player whose features are equal in x^ℓ and x^r is held in every coalition (φ = 0; Appendix A),
        as the coalition path does; its factor is a constant of every term."""
        pnames, member = self.players()
        n_pl, P = len(pnames), XL.shape[0]
        same = (XL == XR).astype(np.int64) @ member.T.astype(np.int64)
        dropped = same == member.sum(axis=1)[None, :]                          # (P, n_players)
        XLs, XRs = np.asarray(self._p.transform(XL), float), np.asarray(self._p.transform(XR), float)
        Wn = W.cpu().numpy()
        prod = self._product()
        grouped = None if n_pl == member.shape[1] else member
        phi, base, pred = np.zeros((P, n_pl)), np.empty(P), np.empty(P)
        # each duel holds its own players; duels that vary in the same players share a compiled pass
        _, pattern = np.unique(dropped, axis=0, return_inverse=True)
        order = np.argsort(pattern.reshape(-1), kind="stable")
        for c in range(0, P, _CHUNK):
            sl = order[c:c + _CHUNK]
            phi[sl], pred[sl], base[sl] = prod.duel_shapley(XLs[sl], XRs[sl], Wn if Wn.ndim == 1 else Wn[sl], grouped,
                                                            dropped[sl])
        names = np.empty(P, dtype=object)
        for p in range(P):
            names[p] = [pnames[i] for i in np.flatnonzero(dropped[p])]
        extra = {"coalitions": np.zeros(P, np.int64), "exact": np.ones(P, bool), "dropped_players": names,
                 "estimator": "product-exact"}
        return pnames, member, phi, base, pred, extra

    def _items_product(self, Xs: np.ndarray, Os: np.ndarray, Wn: np.ndarray, member, dropped):
        """Table 1 row 2: the game (1/n_o) Σ_o ν_S(x, x_o) is one sum of product games (all opponents' terms)."""
        prod = self._product()
        P = Xs.shape[0]
        phi, base, pred = np.zeros((P, member.shape[0])), np.empty(P), np.empty(P)
        grouped = None if member.shape[0] == member.shape[1] else member
        for p in range(P):
            parts = [prod.item_terms(Xs[p], o, Wn, grouped) for o in Os]
            A = np.concatenate([a for a, _, _ in parts])
            B = np.concatenate([b for _, b, _ in parts])
            Wt = np.concatenate([w for _, _, w in parts]) / Os.shape[0]
            phi[p], pred[p], base[p] = product_game_shapley(A, B, Wt, dropped)
        return phi, base, pred

    def _contexts_product(self, U: np.ndarray, xi_w: np.ndarray, dropped: np.ndarray):
        """Table 1 rows 3–4: context games Σ_m (α_m Ξ_m) Γ^U_{S'}(u_m, u); ``xi_w`` (P, M) = α ⊙ Ξ per game."""
        prod = self._product()
        Us = np.asarray(self._p.transform_context(U), float)
        P = Us.shape[0]
        phi, base, pred = np.zeros((P, Us.shape[1])), np.empty(P), np.empty(P)
        for p in range(P):
            A, B, Wt = prod.context_terms(Us[p], xi_w[p])
            phi[p], pred[p], base[p] = product_game_shapley(A, B, Wt, dropped)
        return phi, base, pred
