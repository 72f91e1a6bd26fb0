"""The ``gpm`` and ``cgpm`` plug-ins: periodically refitted GPM / context GPM and their explainers.

Learners: :class:`learners.refit.RefittingGPM` and :class:`learners.refit.RefittingCGPM`
(Hu, Chau et al. 2022, *Explaining Preferences with Shapley Values*, Sec. 2). Merge rule:
:func:`stream.plugins.gpm_merge.merge_gpm`.

Explainers: Pref-SHAP of each duel (Prop. 3.2; Table 1 row 1), of its context (``cgpm``,
Prop. 3.3; Table 1 row 3), Bernoulli distributional values from the Pref-SHAP value function
(Franceschi et al. 2025) and, for click sessions, the categorical values of
:mod:`stream.plugins.sessions`. One :class:`~explainers.prefshap.PrefSHAP` is kept per fitted
model snapshot, so its Cholesky factors are computed once.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from explainers._result import Explanation
from learners.exceptions import InvalidInputError, NotFittedError
from stream.example_arrays import context_array, reference_items, side_array
from stream.plugins.budgets import EXACT_MAX_PLAYERS, WIDE_PREFSHAP_COALITIONS, dist_options
from stream.plugins.common import construct
from stream.plugins.groups import on_features, players

__all__ = ["cgpm_factory", "gpm_bernoulli", "gpm_factory", "gpm_loader", "pref_shap", "pref_shap_context"]


def gpm_factory(settings, params: dict):
    """A fresh :class:`~learners.refit.RefittingGPM` on the settings' feature names (unless ``params`` names them)."""
    from learners.refit import RefittingGPM

    p = dict(params)
    names = p.pop("feature_names", None) or list(settings.feature_names or [])
    if not names:
        raise InvalidInputError("The gpm model needs feature_names (settings.feature_names).")
    return construct("gpm", RefittingGPM, names, **p)


def cgpm_factory(settings, params: dict):
    """A fresh :class:`~learners.refit.RefittingCGPM` on the settings' feature and context names."""
    from learners.refit import RefittingCGPM

    p = dict(params)
    names = p.pop("feature_names", None) or list(settings.feature_names or [])
    ctx = p.pop("context_names", None) or list(settings.context_names or [])
    if not names or not ctx:
        raise InvalidInputError("The cgpm model needs feature_names and context_names.")
    return construct("cgpm", RefittingCGPM, names, context_names=ctx, **p)


def gpm_loader(state: dict):
    """Rebuild a RefittingCGPM (state with context names) or RefittingGPM from a snapshot state.

    Examples
    --------
    >>> from learners.refit import RefittingCGPM
    >>> type(gpm_loader(RefittingCGPM(["a"], context_names=["u"]).state_dict())).__name__
    'RefittingCGPM'
    """
    from learners.refit import RefittingCGPM, RefittingGPM

    if state.get("meta", {}).get("context_names"):
        return RefittingCGPM.from_state(state)
    return RefittingGPM.from_state(state)


_PREFSHAP_CACHE: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()


def _prefshap_for(learner, ctx):
    """One :class:`PrefSHAP` per fitted model snapshot (its CME Cholesky factors are cached inside)."""
    from explainers.prefshap import PrefSHAP

    model = getattr(learner, "model", None)
    if model is None:
        raise NotFittedError("The GPM has not been refitted yet; nothing to explain.")
    ps = _PREFSHAP_CACHE.get(model)
    if ps is None:
        import torch

        names = list(model.feature_names)
        ref = reference_items(ctx, names, limit=256)
        pl, member = players(names)
        groups = {p: [n for n, m in zip(names, row) if m] for p, row in zip(pl, member) if row.sum() > 1}
        wide = len(pl) > EXACT_MAX_PLAYERS
        ps = PrefSHAP(model, reference_items=ref if len(ref) >= 2 else None, max_reference=256, random_state=0,
                      max_coalitions=WIDE_PREFSHAP_COALITIONS if wide else 2048, feature_groups=groups or None,
                      dtype=torch.float32 if len(names) > EXACT_MAX_PLAYERS else torch.float64)
        _PREFSHAP_CACHE[model] = ps
    return model, ps


def _outcome(examples):
    y = np.array([ex.outcome for ex in examples], dtype=np.float64)
    return y if np.all(y != 0) else None


def _duel_arrays(model, examples):
    names = list(model.feature_names)
    XL, XR = side_array(examples, names, "left"), side_array(examples, names, "right")
    U = context_array(examples, model.context_names) if getattr(model, "context_names", None) else None
    return XL, XR, U


def pref_shap(learner, examples, ctx) -> Explanation:
    """Pref-SHAP of each duel (Hu, Chau et al. 2022, Prop. 3.2; Table 1 row 1), oriented winner vs loser when known."""
    model, ps = _prefshap_for(learner, ctx)
    XL, XR, U = _duel_arrays(model, examples)
    return ps.explain_duels(XL, XR, U, _outcome(examples))


def pref_shap_context(learner, examples, ctx) -> Explanation:
    """Pref-SHAP of the context of each duel (Hu, Chau et al. 2022, Prop. 3.3; Table 1 row 3)."""
    model, ps = _prefshap_for(learner, ctx)
    XL, XR, _ = _duel_arrays(model, examples)
    return ps.explain_duel_contexts(context_array(examples, model.context_names), XL, XR, _outcome(examples))


def gpm_bernoulli(learner, examples, ctx) -> Explanation:
    """Bernoulli distributional values from the Pref-SHAP value function: P(a feature flips who wins)."""
    from explainers.distributional import explain_preference

    model, ps = _prefshap_for(learner, ctx)
    XL, XR, U = _duel_arrays(model, examples)
    pl, member = players(list(model.feature_names))
    out = []
    for k, ex in enumerate(examples):
        u = None if U is None else U[k:k + 1]
        nu = on_features(lambda C, k=k, u=u: ps.coalition_values(C, XL[k:k + 1], XR[k:k + 1], u)[:, 0], member)
        out.append(explain_preference(nu, pl, random_state=0, data=member.astype(float) @ (XL[k] - XR[k]),
                                      instance_id=ex.event_id, **dist_options(len(pl))))
    return Explanation.concat(out)


# each explainer's values add up to its prediction (base + Σφ = prediction); tests/checks verifies it
for _fn in (pref_shap, pref_shap_context, gpm_bernoulli):
    _fn.additive = True
