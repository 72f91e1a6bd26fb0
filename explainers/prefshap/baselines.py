"""The two baselines of Pref-SHAP's Section 4: SHAP of a UPM's utility and naive concatenation.

Hu, Chau, Ferrando Huertas & Sejdinovic (2022), *Explaining Preferences with Shapley Values*, Section 3.1,
Section 4 and Appendix B. Mixed into :class:`explainers.prefshap.PrefSHAP`.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from explainers._result import Explanation
from explainers.prefshap.engine import _Space, _unique_rows
from explainers.prefshap.model import _check_matrix, _outcome_sign
from learners.exceptions import InvalidInputError

__all__: list[str] = []


class _Baselines:
    """``upm-shap`` and ``concat-shap`` of :class:`~explainers.prefshap.PrefSHAP` (Section 4 baselines)."""

    def explain_upm_duels(self, XL, XR, outcome=None) -> Explanation:
        """SHAP of a UPM's utility, differenced: φ(x^ℓ) − φ(x^r) (Section 4 baseline, "upm-shap").

        The utility f(x) = Σ_m α_m [k(x, c^ℓ_m) − k(x, c^r_m)] is explained with the RKHS-SHAP
        value function ν_S(x) = E[f(X) | X_S = x_S] (Eqs. 5–6) on the same reference catalog.
        ``prediction`` = f(x^ℓ) − f(x^r).
        """
        if self._p.kind != "upm":
            raise InvalidInputError(
                f"upm-shap explains a utility model (UPM); got a {self._p.kind.upper()}. Fit a UPM for the baseline.")
        e = self.explain_duels(XL, XR, outcome=outcome)
        e.method = "upm-shap"
        return e

    def explain_concat_duels(self, XL, XR, reference_duels=None, outcome=None) -> Explanation:
        """Naive concatenation z = (x^ℓ, x^r) with 2d players (Section 3.1, Appendix B; "concat-shap").

        g(z) = Σ_m α_m [k₂(z, (c^ℓ_m, c^r_m)) − k₂(z, (c^r_m, c^ℓ_m))] is a function of 2d features
        with a product kernel, explained with the standard value function E[g(Z) | Z_S = z_S]
        (observational CME on the reference duels, or marginal with ``value_function=
        "interventional"``). Feature names are ``"<name>(l)"`` and ``"<name>(r)"``.

        Parameters
        ----------
        reference_duels : tuple (XL_ref, XR_ref), optional
            Reference sample of duels (raw units); default: the model's centre pairs.
        """
        t0 = time.perf_counter()
        p = self._p
        if p.kind == "cgpm":
            W = self._context_weights(self._engine(), None)
        elif p.kind == "gpm":
            W = None
        else:
            raise InvalidInputError("concat-shap explains a GPM or C-GPM preference function g.")
        if self.exact_product:
            raise InvalidInputError(
                "concat-shap (a baseline of the paper's Section 4) is implemented for the observational and "
                "interventional value functions; build the PrefSHAP with value_function='observational' for it.")
        if p.constant:
            raise InvalidInputError(
                f"concat-shap (a baseline) is implemented for the pure k_E kernel; this model has item_constant_="
                f"{p.constant:g}. Fit the baseline GPM with item_constant=0, or use explain_duels (exact for c + k).")
        d = len(p.feature_names)
        XL = _check_matrix("XL", XL, d); XR = _check_matrix("XR", XR, d)
        if XL.shape != XR.shape:
            raise InvalidInputError(f"XL and XR must have the same shape; got {XL.shape} and {XR.shape}.")
        sign = _outcome_sign(outcome, XL.shape[0])
        if reference_duels is None:
            Zref = np.concatenate([p.cl, p.cr], axis=1)
        else:
            RL = _check_matrix("reference_duels[0]", reference_duels[0], d)
            RR = _check_matrix("reference_duels[1]", reference_duels[1], d)
            Zref = np.concatenate([np.asarray(p.transform(RL), float), np.asarray(p.transform(RR), float)], axis=1)
        Zref = self._subsample(np.unique(Zref, axis=0))
        Z = np.concatenate([np.asarray(p.transform(XL), float), np.asarray(p.transform(XR), float)], axis=1)
        names = [f"{n}(l)" for n in p.feature_names] + [f"{n}(r)" for n in p.feature_names]
        eng = self._engine()
        alpha = eng.tensor(p.alpha) if W is None else W
        ls2 = np.concatenate([p.ls, p.ls])
        pnames, member, dropped, active, plan, masks = self._players_for(names, None, Z, self._rng)
        uniq, (iz,) = _unique_rows(Z)
        space = _Space(eng, Zref, uniq, [np.concatenate([p.cl, p.cr], 1), np.concatenate([p.cr, p.cl], 1)], ls2)
        w = self._signed_weights(space, alpha)
        cols = torch.as_tensor(iz, device=eng.device)
        v = np.empty((masks.shape[0], Z.shape[0]))
        for sl, G in eng.gammas(space, masks, key_space="concat"):
            v[sl] = torch.matmul(G, w)[:, cols].cpu().numpy()
        phi, base, pred = self._shapley(plan, v, len(pnames), active)
        data = np.concatenate([XL, XR], axis=1)
        phi, base, pred = phi * sign[:, None], base * sign, pred * sign
        return self._finish("concat-shap", phi, base, pred, pnames, data, t0, plan, dropped, pnames,
                            {"reference_size": int(Zref.shape[0])})
