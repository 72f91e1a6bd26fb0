"""A batch of duels explained in one call, each duel as if it were explained alone.

Hu, Chau, Ferrando Huertas & Sejdinovic (2022), *Explaining Preferences with Shapley Values*, Table 1
row 1 and Appendix A: a player constant in the explained data is held at its common value in every
coalition (φ = 0) and the game is played by the others. For one duel that is every player whose
features are equal in x^ℓ and x^r, so two duels of a batch generally play different games. This
module explains a batch with the games of its duels taken one by one, and still in one pass over
the kernel blocks:

* **exact** (every player's game fits the budget): the value function ν̂_S(x^ℓ_p, x^r_p) of the
  duels on the 2^n player coalitions is one table (:meth:`_DuelBatch.player_table`, one matrix
  product per group of duels and chunk of coalitions, kernel blocks of the snapshot reused); duel
  p's own game with dropped players D_p and active players A_p needs only the rows T ∪ D_p,
  T ⊆ A_p, and its Shapley values are :func:`~explainers._coalitions.exact_shapley` of that
  sub-table. Equal to one call per duel up to floating-point rounding (tests/test_explain_batch.py:
  ≤ 1e-9 in float64). The table holds every coalition of every duel (one pass over the kernel
  blocks in their stored order: about the cost of the scattered rows one duel's game needs), and its
  columns are kept per duel, so the distributional values of the same events compute nothing more.
* **sampled**: duels with the same dropped players share one coalition plan (shared draws; the
  target standard error of :mod:`explainers._target_se` is met by every duel of the group). A duel's
  estimate differs from a one-duel call (which draws its own coalitions) by the sampling error,
  within the standard errors recorded in ``extra["stderr"]``.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from explainers._coalitions import _MAX_EXACT_PLAYERS, all_coalitions, exact_shapley
from explainers._players import _players
from explainers._target_se import solve_to_target

__all__: list[str] = []

#: Duels whose player-table columns are kept per explainer (Pokémon, 9 players: 4.5 KiB a duel, 18 MiB in all):
#: the methods of one model explain the same sampled events in batches of their own sizes and order.
COLUMNS_KEPT = 4096


class _DuelBatch:
    """Per-duel games for a batch of duels (mixed into :class:`~explainers.prefshap.PrefSHAP`)."""

    def players(self) -> tuple[list, np.ndarray]:
        """Player names and membership (n_players, d) of the item features (``feature_groups`` applied)."""
        return _players(self._p.feature_names, self.feature_groups)

    def player_table(self, XL, XR, U=None, need: np.ndarray | None = None) -> np.ndarray:
        """ν̂_S(x^ℓ_p, x^r_p) on player coalitions S (rows in :func:`all_coalitions` order): (2^n_players, P).

        Parameters
        ----------
        XL, XR : array-like of shape (P, d);  U : array-like of shape (P, p), optional
        need : bool ndarray of shape (2^n_players, P), optional
            The entries wanted (default: all). Entries not needed and not computed before are NaN.

        Notes
        -----
        The columns of the last ``COLUMNS_KEPT`` duels are kept (keyed by the duel's bytes) with the
        entries computed so far, and a later call, whatever duels it batches with them, computes only
        the missing ones, grouped by duels that miss the same rows (one matrix product per group and
        chunk of coalitions). Pref-SHAP fills the whole table of its duels (exact enumeration; one
        pass over the kernel blocks, in the order they are stored) and the Bernoulli distributional
        values of the same events read it: the two methods cost one table.
        """
        from explainers.prefshap.model import _check_matrix

        d = len(self._p.feature_names)
        XL = _check_matrix("XL", XL, d)
        XR = _check_matrix("XR", XR, d)
        U = None if U is None else _check_matrix("U", U, len(self._p.context_names))
        _, member = self.players()
        K, P = 2 ** member.shape[0], XL.shape[0]
        kept = self.__dict__.setdefault("_columns", OrderedDict())
        keys = [XL[p].tobytes() + XR[p].tobytes() + (b"" if U is None else U[p].tobytes()) for p in range(P)]
        table, have = np.full((K, P), np.nan), np.zeros((K, P), bool)
        for p, k in enumerate(keys):
            got = kept.get(k)
            if got is not None:
                table[:, p], have[:, p] = got
                kept.move_to_end(k)
        missing = ~have if need is None else (need & ~have)
        if missing.any():
            C = all_coalitions(member.shape[0])
            masks = (C.astype(np.int64) @ member.astype(np.int64)) > 0
            eng = self._engine()
            W = self._context_weights(eng, U)
            XLs, XRs = np.asarray(self._p.transform(XL), float), np.asarray(self._p.transform(XR), float)
            cols = np.flatnonzero(missing.any(axis=0))
            patterns, which = np.unique(missing[:, cols].T, axis=0, return_inverse=True)
            for g, rows in enumerate(patterns):
                idx = cols[which.reshape(-1) == g]
                r = np.flatnonzero(rows)
                table[np.ix_(r, idx)] = self._item_values(masks[r], XLs[idx], XRs[idx],
                                                          W if W.ndim == 1 else W[idx], eng)
                have[np.ix_(r, idx)] = True
            for p in cols:
                kept[keys[p]] = (table[:, p].copy(), have[:, p].copy())
                kept.move_to_end(keys[p])
            while len(kept) > COLUMNS_KEPT:
                kept.popitem(last=False)                  # the oldest first
        return table

    def _per_duel(self, XL: np.ndarray, XR: np.ndarray, U, W, eng):
        """φ (P, n_players), ν(∅), ν(Ω), and the per-duel extras of a batch explained duel by duel."""
        pnames, member = self.players()
        n_pl, P = len(pnames), XL.shape[0]
        same = (XL == XR).astype(np.int64) @ member.T.astype(np.int64)
        dropped = same == member.sum(axis=1)[None, :]                          # (P, n_players)
        exact_all = n_pl <= _MAX_EXACT_PLAYERS and 2 ** n_pl <= self.max_coalitions
        table = None
        if exact_all:                     # per duel, the coalitions T ∪ D_p (T among its active players)
            # the whole table, though a duel's game needs only the rows that hold its dropped players: in
            # one pass over the stored kernel blocks it costs about what the scattered rows it needs
            # cost alone, and the distributional values of the same duels read the rest
            table = self.player_table(XL, XR, U)
        phi = np.zeros((P, n_pl))
        se = np.zeros((P, n_pl))
        base, pred = np.empty(P), np.empty(P)
        coal, exact, met = np.zeros(P, np.int64), np.ones(P, bool), np.ones(P, bool)
        keys, inv = np.unique(dropped, axis=0, return_inverse=True)
        bit = np.int64(1) << np.arange(n_pl, dtype=np.int64)
        for g, D in enumerate(keys):
            idx = np.flatnonzero(inv.reshape(-1) == g)
            active = np.flatnonzero(~D)
            if table is not None:
                sub = all_coalitions(len(active)).astype(np.int64) @ bit[active] + int(bit[D].sum())
                v = table[sub][:, idx]
                phi[np.ix_(idx, active)] = exact_shapley(v, len(active)) if len(active) else 0.0
                base[idx], pred[idx], coal[idx] = v[0], v[-1], (0 if len(active) == 0 else len(sub))
                continue
            XLs = np.asarray(self._p.transform(XL[idx]), float)
            XRs = np.asarray(self._p.transform(XR[idx]), float)
            Wg = W if W.ndim == 1 else W[idx]
            held = member[D].any(axis=0)

            def evaluate(player_masks, active=active, held=held, XLs=XLs, XRs=XRs, Wg=Wg):
                masks = (player_masks.astype(np.int64) @ member[active].astype(np.int64)).astype(bool) | held
                return self._item_values(masks, XLs, XRs, Wg, eng)

            if len(active) == 0:
                v = evaluate(np.zeros((1, 0), bool))
                base[idx] = pred[idx] = v[0]
                continue
            r = solve_to_target(len(active), self.max_coalitions, self._rng, evaluate, self.target_se)
            phi[np.ix_(idx, active)] = r.phi
            se[np.ix_(idx, active)] = r.stderr
            base[idx], pred[idx] = r.values[r.plan.empty_index], r.values[r.plan.full_index]
            coal[idx], exact[idx], met[idx] = r.evaluated, r.plan.exact, r.target_met
        names = np.empty(P, dtype=object)
        for p in range(P):
            names[p] = [pnames[i] for i in np.flatnonzero(dropped[p])]
        extra = {"coalitions": coal, "exact": exact, "dropped_players": names}
        if not exact.all():
            extra.update(stderr=se, estimator="kernel-shap", target_se=self.target_se, target_met=met)
        return pnames, member, phi, base, pred, extra
