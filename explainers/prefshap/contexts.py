"""Pref-SHAP of contexts: Table 1, rows 3 and 4 (Proposition 3.3).

Hu, Chau, Ferrando Huertas & Sejdinovic (2022), *Explaining Preferences with Shapley Values*, Section 3.1 and
Proposition 3.3: ν_{S'}(u, x^ℓ, x^r) = Σ_m α_m Γ^U_{S'}(u_m, u) Ξ_m(x^ℓ, x^r), the CME construction on the
context space of a C-GPM. Mixed into :class:`explainers.prefshap.PrefSHAP`.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from explainers._result import Explanation
from explainers.prefshap.engine import _Engine, _masked_kernel, _Space, _unique_rows
from explainers.prefshap.model import _check_matrix, _orientation, _outcome_sign
from learners.exceptions import InvalidInputError

__all__: list[str] = []


class _ContextTasks:
    """Table 1, rows 3–4 of :class:`~explainers.prefshap.PrefSHAP` (needs its ``_p``, ``_ref_u``, ``_rng``,
    ``_engine``, ``_players_for``, ``_shapley`` and ``_finish``)."""

    def _context_values(self, masks_u: np.ndarray, U: np.ndarray, Xi: torch.Tensor, eng: _Engine,
                        pair_u: np.ndarray | None) -> np.ndarray:
        """ν̂_{S'} (Prop. 3.3): Σ_m α_m Γ^U_{S'}(u_m, u) Ξ_m for every coalition (rows) and column of Ξ."""
        p = self._p
        Us = np.asarray(p.transform_context(U), float)
        uniq, (iu,) = _unique_rows(Us)
        space = _Space(eng, self._ref_u, uniq, [p.cu], p.ls_u)
        alpha = eng.tensor(p.alpha)
        cols = torch.as_tensor(iu if pair_u is None else iu[pair_u], device=eng.device)
        out = np.empty((masks_u.shape[0], Xi.shape[1]))
        for sl, Gu in eng.gammas(space, masks_u, key_space="contexts"):
            (G,) = space.split(Gu)
            out[sl] = torch.matmul(G[:, cols] * Xi.T.unsqueeze(0), alpha).cpu().numpy()
        return out

    def _xi(self, eng: _Engine, XL: np.ndarray, XR: np.ndarray) -> torch.Tensor:
        """Ξ_m(x^ℓ_p, x^r_p) = k(x^ℓ,c^ℓ_m)k(x^r,c^r_m) − k(x^ℓ,c^r_m)k(x^r,c^ℓ_m): (M, P), with the item
        kernel (c + k)/√(1 + c) when the model has a constant (= (k_E + c·k_UPM)/(1 + c))."""
        p = self._p
        ls = p.ls
        L = eng.tensor(np.asarray(p.transform(XL), float) / ls)
        R = eng.tensor(np.asarray(p.transform(XR), float) / ls)
        cl, cr = eng.tensor(p.cl / ls), eng.tensor(p.cr / ls)
        ones = torch.ones((1, len(ls)), dtype=eng.dtype, device=eng.device)
        k = lambda A, C: _masked_kernel(C, A, ones)[0]    # (M, P)
        kll, krr, klr, krl = k(L, cl), k(R, cr), k(L, cr), k(R, cl)
        xi = kll * krr - klr * krl
        if p.constant:
            xi = (xi + p.constant * (kll + krr - klr - krl)) / (1.0 + p.constant)
        return xi

    def _require_cgpm(self):
        if self._p.kind != "cgpm":
            raise InvalidInputError(
                f"Context explanations need a C-GPM (a model with context features); got a {self._p.kind.upper()}.")

    def explain_duel_contexts(self, U, XL, XR, outcome=None) -> Explanation:
        """Which context features drove each duel (Table 1, row 3; Prop. 3.3).

        Parameters
        ----------
        U : array-like of shape (P, p)
            Contexts (raw units).
        XL, XR : array-like of shape (P, d)
        outcome : array-like of shape (P,), optional
            Orient winner-vs-loser as in :meth:`explain_duels`.

        Returns
        -------
        Explanation
            method ``"pref-shap-context"``; players are the context features;
            ``base_values`` = ν(∅') = ḡ(x^ℓ, x^r); ``prediction`` = g_U(u, x^ℓ, x^r); ``data`` = u.
        """
        t0 = time.perf_counter()
        self._require_cgpm()
        p = self._p
        d, q = len(p.feature_names), len(p.context_names)
        U = _check_matrix("U", U, q)
        XL = _check_matrix("XL", XL, d); XR = _check_matrix("XR", XR, d)
        if not (U.shape[0] == XL.shape[0] == XR.shape[0]):
            raise InvalidInputError(f"U, XL, XR must have the same number of rows; got {U.shape[0]}, {XL.shape[0]}, {XR.shape[0]}.")
        sign = _outcome_sign(outcome, XL.shape[0])
        eng = self._engine()
        Xi = self._xi(eng, XL, XR)
        pnames, member, dropped, active, plan, masks = self._players_for(
            p.context_names, None, np.concatenate([np.asarray(p.transform_context(U), float), self._ref_u]), self._rng)
        if self.exact_product:
            xi_w = (Xi * eng.tensor(p.alpha)[:, None]).T.cpu().numpy()               # (P, M)
            phi, base, pred = self._contexts_product(U, xi_w, dropped)
            plan = None
        else:
            v = self._context_values(masks, U, Xi, eng, np.arange(U.shape[0]))
            phi, base, pred = self._shapley(plan, v, len(pnames), active)
        return self._finish("pref-shap-context", phi * sign[:, None], base * sign, pred * sign, pnames, U, t0,
                            plan, dropped, pnames, {"task": "duel-context", "oriented": _orientation(outcome, U.shape[0]),
                                                    "reference_contexts": int(self._ref_u.shape[0])})

    def explain_contexts(self, U, XL_duels, XR_duels) -> Explanation:
        """Which context features matter on average (Table 1, row 4).

        Value function (1/m) Σ_j ν̂_{S'}(u, x^ℓ_j, x^r_j) over the given duels, for each context u.

        Parameters
        ----------
        U : array-like of shape (n_u, p)
            Contexts explained (raw units).
        XL_duels, XR_duels : array-like of shape (m, d)
            The duels averaged over.

        Returns
        -------
        Explanation
            method ``"pref-shap-context"``, one row per context; ``data`` = u.
        """
        t0 = time.perf_counter()
        self._require_cgpm()
        p = self._p
        d, q = len(p.feature_names), len(p.context_names)
        U = _check_matrix("U", U, q)
        XL = _check_matrix("XL_duels", XL_duels, d); XR = _check_matrix("XR_duels", XR_duels, d)
        if XL.shape != XR.shape:
            raise InvalidInputError(f"XL_duels and XR_duels must have the same shape; got {XL.shape} and {XR.shape}.")
        eng = self._engine()
        Xi_mean = self._xi(eng, XL, XR).mean(dim=1, keepdim=True)          # (M, 1)
        pnames, member, dropped, active, plan, masks = self._players_for(
            p.context_names, None, np.concatenate([np.asarray(p.transform_context(U), float), self._ref_u]), self._rng)
        Xi_rep = Xi_mean.expand(-1, U.shape[0])
        if self.exact_product:
            phi, base, pred = self._contexts_product(U, (Xi_rep * eng.tensor(p.alpha)[:, None]).T.cpu().numpy(), dropped)
            plan = None
        else:
            v = self._context_values(masks, U, Xi_rep, eng, np.arange(U.shape[0]))
            phi, base, pred = self._shapley(plan, v, len(pnames), active)
        return self._finish("pref-shap-context", phi, base, pred, pnames, U, t0, plan, dropped, pnames,
                            {"task": "context-average", "n_duels": int(XL.shape[0]),
                             "reference_contexts": int(self._ref_u.shape[0])})
