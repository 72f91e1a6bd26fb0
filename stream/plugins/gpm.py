"""The ``gpm`` and ``cgpm`` plug-ins: periodically refitted GPM / context GPM and their explainers.

Learners: :class:`learners.refit.RefittingGPM` and :class:`learners.refit.RefittingCGPM`
(Hu, Chau et al. 2022, *Explaining Preferences with Shapley Values*, Sec. 2). Merge rule:
:func:`stream.plugins.gpm_merge.merge_gpm`.

Explainers: Pref-SHAP of each duel (Prop. 3.2; Table 1 row 1), of its context (``cgpm``,
Prop. 3.3; Table 1 row 3), Bernoulli distributional values from the Pref-SHAP value function
(Franceschi et al. 2024) and, for click sessions, the categorical values of
:mod:`stream.plugins.sessions`. One :class:`~explainers.prefshap.PrefSHAP` is kept per fitted
model snapshot and budgets, so its kernel blocks are computed once.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from explainers._result import Explanation
from learners.exceptions import InvalidInputError, NotFittedError
from stream.contract.arrays import context_array, reference_items, side_array
from stream.plugins.budgets import budgets, capped, dist_options, target_of, with_budgets
from stream.plugins.common import construct
from stream.plugins.groups import groups_of, on_features, players

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
#: Memory for the kernel blocks of one fit (Pokémon, 9 players, 128 reference items: 512 coalitions, 291 MiB
#: in float64); coalitions beyond it are recomputed on every call.
_CACHE_MB = 512.0


#: Per model class, the latest fit's explainer ``(fit key, budgets key, PrefSHAP)``: a new snapshot of an
#: unchanged fit (the learner publishes every ``snapshot_every_events`` events, refits far less often)
#: is a new object with the same arrays, and reuses its kernel blocks instead of filling them again
#: (Pokémon: 1.3 s of CPU per snapshot).
_LATEST_FIT: dict = {}


def _fit_key(model) -> bytes:
    """A digest of what Pref-SHAP reads from a fitted model: its arrays and its input transform (probed)."""
    import hashlib

    from explainers.prefshap.model import _parts

    p = _parts(model)
    h = hashlib.blake2b(digest_size=16)
    h.update(repr((type(model).__name__, p.kind, p.feature_names, p.context_names, p.constant)).encode())
    probe = np.vstack([np.zeros(len(p.feature_names)), np.arange(1.0, len(p.feature_names) + 1)])
    arrays = [p.ls, p.cl, p.cr, p.alpha, p.transform(probe)]
    if p.kind == "cgpm":
        arrays += [p.ls_u, p.cu, p.transform_context(np.vstack([np.zeros(len(p.context_names)),
                                                                 np.arange(1.0, len(p.context_names) + 1)]))]
    for a in arrays:
        h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
    return h.digest()


#: The stream's value function: the product-marginal reference, exact at any width (issue 29; docs/prefshap.md).
#: The observational CME of the paper's tables stays available as ``_prefshap_for(..., "observational")``.
STREAM_VALUE_FUNCTION = "product-marginal"


def _prefshap_for(learner, ctx, value_function: str = STREAM_VALUE_FUNCTION):
    """One :class:`PrefSHAP` per fitted model, budgets and value function (its kernel blocks or product-game
    factors are cached inside); snapshots of one fit share it.

    The product-marginal explainer (the stream's) plays every feature as its own player and is exact at any
    width; the observational one groups one-hot features beyond ``exact_players`` and fills its
    per-coalition kernel blocks here, once per fit."""
    from explainers.prefshap import PrefSHAP

    model = getattr(learner, "model", None)
    if model is None:
        raise NotFittedError("The GPM has not been refitted yet; nothing to explain.")
    b = budgets(ctx)
    key = (b["exact_players"], b["max_coalitions"], b["reference_size"], b["target_se"], value_function)
    per_model = _PREFSHAP_CACHE.get(model)
    ps = None if per_model is None else per_model.get(value_function)
    if ps is None or getattr(ps, "_budget_key", None) != key:
        fit = _fit_key(model)
        latest = _LATEST_FIT.get((type(model).__name__, value_function))
        if latest is not None and latest[:2] == (fit, key):
            ps = latest[2]
            _PREFSHAP_CACHE.setdefault(model, {})[value_function] = ps
            return model, ps, b
        import torch

        names = list(model.feature_names)
        ref = reference_items(ctx, names, limit=b["reference_size"])
        exact = value_function == "product-marginal"
        groups = None if exact else groups_of(names, b["exact_players"])
        # float64 throughout, so that a batch equals one call per event to 1e-9 (float32 matrix products
        # round differently with the batch's shape); the kernel blocks of every coalition are kept
        ps = PrefSHAP(model, reference_items=ref if len(ref) >= 2 else None, max_reference=b["reference_size"],
                      random_state=0, max_coalitions=b["max_coalitions"], feature_groups=groups or None,
                      dtype=torch.float64, cache_mb=0.0 if exact else _CACHE_MB, target_se=target_of(b),
                      value_function=value_function)
        ps._budget_key = key
        pl, member = players(names, b["exact_players"])
        if exact:
            ps._product()                   # the marginal means μ_j at the centres, once per fit
        elif 2 ** len(pl) <= b["max_coalitions"] and len(ref) >= 2:
            # fill the per-coalition kernel blocks once per snapshot, not on the first explained events
            from explainers._coalitions import coalitions_from_integers

            C = coalitions_from_integers(np.arange(2 ** len(pl)), len(pl))
            ps.coalition_values((C.astype(np.int64) @ member.astype(np.int64)) > 0, ref[:1], ref[:1])
        _PREFSHAP_CACHE.setdefault(model, {})[value_function] = ps
        _LATEST_FIT[(type(model).__name__, value_function)] = (fit, key, ps)
    return model, ps, b


#: Largest table (terms × 2^players floats) the Bernoulli values build by doubling (32 MiB).
_TABLE_FLOATS = 1 << 22


def _outcome(examples):
    """Outcomes in {+1, −1, 0}; Pref-SHAP orients decided duels winner-vs-loser and leaves ties left-right."""
    return np.array([ex.outcome for ex in examples], dtype=np.float64)


def _duel_arrays(model, examples):
    names = list(model.feature_names)
    XL, XR = side_array(examples, names, "left"), side_array(examples, names, "right")
    U = context_array(examples, model.context_names) if getattr(model, "context_names", None) else None
    return XL, XR, U


@capped(max_batch=64, budget_s=2.0)
def pref_shap(learner, examples, ctx) -> Explanation:
    """Pref-SHAP of each duel (Hu, Chau et al. 2022, Sec. 3.1, Table 1 row 1), oriented winner vs loser when decided.

    The product-marginal value function, exact at any width: every feature a player, each duel its own
    game (its equal features held), Shapley values in closed form (:mod:`explainers.prefshap.product`,
    O(T·d²) per duel); a batch equals one call per event to rounding.
    """
    model, ps, b = _prefshap_for(learner, ctx)
    XL, XR, U = _duel_arrays(model, examples)
    return with_budgets(ps.explain_duels(XL, XR, U, _outcome(examples)), b)


@capped(max_batch=64, budget_s=2.0)
def pref_shap_context(learner, examples, ctx) -> Explanation:
    """Pref-SHAP of the context of each duel (Hu, Chau et al. 2022, Prop. 3.3; Table 1 row 3).

    Product-marginal reference on the contexts, exact in closed form per duel (the dropped context players
    are those constant over the reference contexts, the same for every batch).
    """
    model, ps, b = _prefshap_for(learner, ctx)
    XL, XR, _ = _duel_arrays(model, examples)
    return with_budgets(ps.explain_duel_contexts(context_array(examples, model.context_names), XL, XR,
                                                 _outcome(examples)), b)


@capped(max_batch=64, budget_s=2.0)
def gpm_bernoulli(learner, examples, ctx) -> Explanation:
    """Bernoulli distributional values from the Pref-SHAP value function: P(a feature flips who wins).

    The value function is Pref-SHAP's product-marginal one, ν_S = Σ_t W_t Π_{j∈S} A_tj Π_{j∉S} B_tj, each
    coalition in O(T·d) from the duel's product-game terms
    (:func:`explainers.distributional.product_value_function`; under exact enumeration all 2^players
    values at once, :func:`explainers.prefshap.product.product_game_table`): no table of Pref-SHAP's is shared
    or waited for. Players are the budget's (one-hot groups beyond ``exact_players``); exact enumeration within the
    budget, else the stratified estimator with the target standard error and seed-0 draws per event, so a
    batch equals one call per event to 1e-9.
    """
    from explainers.distributional import (explain_preference, explain_preference_tables, product_value_function,
                                           table_value_function)
    from explainers.prefshap.product import product_game_table

    model, ps, b = _prefshap_for(learner, ctx)
    XL, XR, U = _duel_arrays(model, examples)
    pl, member = players(list(model.feature_names), b["exact_players"])
    opts = dist_options(len(pl), b)
    data = (XL - XR) @ member.T.astype(float)                                                    # (n, players)
    terms = [ps.product_terms(XL[k], XR[k], None if U is None else U[k], member) for k in range(len(examples))]
    if opts["method"] == "exact" and all((A.shape[0] << len(pl)) <= _TABLE_FLOATS for A, _, _ in terms):
        # every coalition of every event, by doubling; then one exact enumeration for the batch
        tables = np.stack([product_game_table(A, B, W) for A, B, W in terms], axis=1)
        return with_budgets(explain_preference_tables(tables, pl, data=data,
                                                      instance_ids=[ex.event_id for ex in examples]), b)
    out = []
    for k, ex in enumerate(examples):
        A, B, W = terms[k]
        nu = table_value_function(product_game_table(A, B, W)) if opts["method"] == "exact" and \
            (A.shape[0] << len(pl)) <= _TABLE_FLOATS else product_value_function(A, B, W)
        out.append(explain_preference(nu, pl, random_state=0, data=data[k], instance_id=ex.event_id, **opts))
    return with_budgets(Explanation.concat(out), b)


def _warm_exact() -> None:
    """Load exact Pref-SHAP's compiled loop (:func:`explainers.prefshap.compiled.warm`)."""
    from explainers.prefshap.compiled import warm

    warm()


# each explainer's values add up to its prediction (base + Σφ = prediction); tests/checks verifies it
for _fn in (pref_shap, pref_shap_context, gpm_bernoulli):
    _fn.additive = True
# what their first call would load, loaded with the model (stream.workers.live_models.warm_explainers)
for _fn in (pref_shap, pref_shap_context):
    _fn.warm = _warm_exact
