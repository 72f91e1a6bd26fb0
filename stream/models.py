"""The learners and explainers of prefstream, plugged into the workers through :mod:`stream.registry`.

=========  ==============================================  =========================================
model      learner                                         explanation methods
=========  ==============================================  =========================================
capacity   :class:`learners.capacity.CapacityRDA`           capacity-shapley, capacity-interaction,
           (RDA, or ADMM-RDA with ``constraints``)         sharp-rank, sharp-pairwise,
                                                           distributional-bernoulli,
                                                           distributional-categorical (click sessions)
gpm        :class:`learners.refit.RefittingGPM`             pref-shap, distributional-bernoulli,
                                                           distributional-categorical (click sessions)
cgpm       :class:`learners.refit.RefittingCGPM`            pref-shap, pref-shap-context,
                                                           distributional-bernoulli
linear-bt  :class:`learners.linear.LinearBT`                linear-shapley (registered by the registry)
=========  ==============================================  =========================================

Per-model parameters come from ``Settings.model_params[<model>]`` (config file, ``--param``);
item features from ``Settings.feature_names`` and, for ``cgpm``, contexts from
``Settings.context_names``.

Merging per-partition learners (:func:`stream.registry.merge_learners`):

* ``capacity`` — RDA's state is a gradient sum and a count; ``a += b`` pools them
  (:meth:`learners.capacity.CapacityRDA.merge` documents what this equals).
* ``gpm``/``cgpm`` — the count-weighted *ensemble* g = Σ_k w_k g_k. With equal length-scales the
  ensemble is again a GPM whose Nyström centres are the union of the parts' centres and whose
  coefficients are w_k α_k, so Pref-SHAP explains it exactly; parts with different length-scales
  cannot be pooled that way and the part with the most examples is used (logged).

Explanation budgets (settings ``explain_exact_players``, ``explain_max_coalitions``,
``explain_reference_size``, handed to the explainers as ``ctx.budgets``; every record's ``extra``
says what was used): data with more than ``exact_players`` features have their one-hot groups
(:func:`feature_groups`) explained as one player each by Pref-SHAP, ShaRP and the distributional
values. Up to ``exact_players`` players every coalition is enumerated (exact); above, Pref-SHAP
samples ``max_coalitions`` unique coalitions (Kernel SHAP), the distributional values use Monte
Carlo within about ``max_coalitions`` coalition evaluations and ShaRP samples permutations of the
players (``extra.estimator`` = ``"permutation-sampling"`` with standard errors). The reference
sample (Pref-SHAP's CME catalog, ShaRP's removal distribution) has ``reference_size`` items.

Explainers that only make sense for click sessions carry ``session_only = True``; the explainer
worker runs them on click-session jobs (``ctx.params["session"]``) and the others on preference
events.
"""

from __future__ import annotations

import copy
import logging
import threading
import weakref
from typing import Any

import numpy as np

from explainers._result import Explanation
from learners.exceptions import InvalidInputError, InvalidParameterError, NotFittedError

__all__ = ["register_all"]

log = logging.getLogger(__name__)

_DONE = False
_LOCK = threading.Lock()

#: Default explanation budgets per call (the settings override them through ``ctx.budgets``), so that
#: wide data (e.g. Pokémon, d = 26) stay bounded in the stream. Exact enumeration up to
#: EXACT_MAX_PLAYERS players (2^10 = 1024 coalitions); above, sampled estimators within
#: COALITION_BUDGET coalition evaluations; REFERENCE_SIZE reference items.
EXACT_MAX_PLAYERS = 10
COALITION_BUDGET = 2048
REFERENCE_SIZE = 128


def _budgets(ctx) -> dict:
    """The explanation budgets of this call: settings (``ctx.budgets``) over the module defaults."""
    b = {"exact_players": EXACT_MAX_PLAYERS, "max_coalitions": COALITION_BUDGET, "reference_size": REFERENCE_SIZE}
    b.update({k: int(v) for k, v in (getattr(ctx, "budgets", None) or {}).items() if k in b})
    return b


def feature_groups(names) -> dict[str, list[str]]:
    """One-hot groups by naming convention: ``<group>=<level>`` or ``<group>_<level>`` shared by ≥ 3 features.

    E.g. the Pokémon adapter's ``type_Bug … type_Water`` become one player ``type`` (paper 000,
    Fig. 4 sums the type indicators' values); names without such a shared prefix stay single players.
    """
    by: dict[str, list[str]] = {}
    for n in names:
        key = n.split("=", 1)[0] if "=" in n else (n.split("_", 1)[0] if "_" in n else None)
        if key:
            by.setdefault(key, []).append(n)
    return {g: fs for g, fs in by.items() if len(fs) >= 3}


def _players(names, exact_players: int = EXACT_MAX_PLAYERS) -> tuple[list[str], np.ndarray]:
    """Players (groups for wide data, else features) and their (n_players, d) membership matrix."""
    groups = feature_groups(names) if len(names) > exact_players else {}
    players, rows, seen = [], [], set()
    for j, n in enumerate(names):
        g = next((g for g, fs in groups.items() if n in fs), None)
        if g is None:
            r = np.zeros(len(names), bool); r[j] = True
            players.append(n); rows.append(r)
        elif g not in seen:
            seen.add(g)
            players.append(g); rows.append(np.isin(names, groups[g]))
    return players, np.array(rows)


def _on_features(nu, member: np.ndarray):
    """A value function of player coalitions (K, P) from one of feature coalitions (K, d)."""
    return lambda C: nu((np.asarray(C, dtype=np.int64) @ member.astype(np.int64)) > 0)


def _dist_options(d: int, budgets: dict | None = None) -> dict:
    """method / n_samples for distributional values of a d-player game within the budget."""
    b = budgets or {"exact_players": EXACT_MAX_PLAYERS, "max_coalitions": COALITION_BUDGET}
    if d <= b["exact_players"] or 2 ** d <= b["max_coalitions"]:
        return {"method": "exact"}
    return {"method": "monte-carlo", "n_samples": max(16, b["max_coalitions"] // (d + 1))}


# ----------------------------------------------------------------------------- helpers
def _arrays(examples, names, side: str) -> np.ndarray:
    try:
        return np.array([[float(getattr(ex, side)[f]) for f in names] for ex in examples], dtype=np.float64)
    except KeyError as exc:
        raise InvalidInputError(f"The explained item lacks feature {exc.args[0]!r} of the model.") from None


def _contexts(examples, names) -> np.ndarray:
    try:
        return np.array([[float((ex.context or {})[c]) for c in names] for ex in examples], dtype=np.float64)
    except KeyError as exc:
        raise InvalidInputError(f"The explained event lacks context feature {exc.args[0]!r} of the model.") from None


def _reference_items(learner, ctx, names, limit: int = 512) -> np.ndarray:
    """The item catalog (or, for inline data, the items of the background reservoir)."""
    rows = []
    if ctx.catalog is not None and len(ctx.catalog):
        for _, feats in ctx.catalog.items():
            try:
                rows.append([float(feats[f]) for f in names])
            except KeyError:
                continue
    if len(rows) < 2:
        XL, XR = ctx.background_arrays(names)
        rows = np.concatenate([XL, XR]).tolist()
    X = np.unique(np.asarray(rows, dtype=np.float64).reshape(-1, len(names)), axis=0)
    if len(X) > limit:
        X = X[ctx.rng.choice(len(X), size=limit, replace=False)]
    return X


def _tile(e: Explanation, n: int) -> Explanation:
    """A model-level explanation repeated for ``n`` explained events (one record each)."""
    if n == 1:
        return e
    return Explanation(values=np.tile(np.asarray(e.values).reshape(1, -1), (n, 1)), base_values=np.repeat(e.base_values, n),
                       feature_names=e.feature_names, method=e.method,
                       prediction=None if e.prediction is None else np.repeat(e.prediction, n), model_name=e.model_name,
                       model_version=e.model_version, compute_time=e.compute_time, extra=e.extra)


def _session(ctx) -> dict:
    s = ctx.params.get("session") if ctx.params else None
    if not s:
        raise InvalidInputError("This explainer explains click sessions; the job carries none.")
    return s


# ----------------------------------------------------------------------------- capacity
def _capacity_factory(settings, params: dict):
    from learners.capacity import CapacityRDA

    p = dict(params)
    criteria = p.pop("criteria", None) or list(settings.feature_names or [])
    if not criteria:
        raise InvalidInputError("The capacity model needs its criteria: set feature_names (or model_params.capacity.criteria).")
    p.setdefault("scaler", "minmax")  # raw event features are rarely in [0, 1]; scaler="none" to require it
    return _construct("capacity", CapacityRDA, criteria, **p)


def _construct(model: str, cls, *args, **kwargs):
    """``cls(*args, **kwargs)`` with an unknown keyword turned into a clear InvalidParameterError."""
    try:
        return cls(*args, **kwargs)
    except TypeError as exc:
        import inspect

        known = [k for k in inspect.signature(cls.__init__).parameters if k not in ("self", "args", "kwargs")]
        raise InvalidParameterError(
            f"Model {model!r} got an unknown parameter ({exc}). Its parameters are {known}; set them with "
            f"--param {model}.<name>=<value> or model_params.{model} in the config file.") from None


def _capacity_loader(state: dict):
    from learners.capacity import CapacityFOBOS, CapacityRDA

    cls = {"CapacityRDA": CapacityRDA, "CapacityFOBOS": CapacityFOBOS}.get(state.get("meta", {}).get("class"), CapacityRDA)
    return cls.from_state(state)


def _trained(learner) -> None:
    if not getattr(learner, "n_seen", 1):
        raise NotFittedError("The capacity model has not learned any example yet; nothing to explain.")


def _capacity_shapley(learner, examples, ctx) -> Explanation:
    from explainers.capacity import capacity_shapley

    _trained(learner)
    return _tile(capacity_shapley(learner), len(examples))


def _capacity_interaction(learner, examples, ctx) -> Explanation:
    from explainers.capacity import capacity_interaction

    _trained(learner)
    return _tile(capacity_interaction(learner), len(examples))


def _with_budgets(e: Explanation, budgets: dict) -> Explanation:
    """Record the budgets the explanation ran under in its ``extra``."""
    e.extra["budgets"] = dict(budgets)
    return e


def _groups_of(names, budgets: dict) -> dict:
    """``{player: [features]}`` of the grouped players of wide data (empty when features are players)."""
    players, member = _players(names, budgets["exact_players"])
    return {p: [n for n, m in zip(names, row) if m] for p, row in zip(players, member) if row.sum() > 1}


def _sharp_catalog(learner, examples, ctx, exact_players: int | None = None):
    """The ShaRP explainer of a batch: a catalog of reference items plus the events' items.

    Exact ShaRP scores ``2^players × catalog`` hybrid rows per explained item; the catalog is the
    reference sample, cut to ``12 · max_coalitions / 2^players`` items (at least 16) when that is
    smaller than ``reference_size`` (Pokémon, 9 players: 48 items), so exact enumeration fits the
    budget. Above ``exact_players`` players orders are sampled (``n_permutations`` =
    ``max_coalitions / players``).
    """
    from explainers.sharp import SharpExplainer, learner_score_fn

    b = _budgets(ctx)
    names = list(learner.feature_names)
    groups = _groups_of(names, b)
    n_players = len(names) - sum(len(g) - 1 for g in groups.values())
    exact_players = min(b["exact_players"] if exact_players is None else exact_players, 20)
    limit = b["reference_size"]
    if n_players <= exact_players:
        limit = min(limit, max(16, (12 * b["max_coalitions"]) >> n_players))
    ref = _reference_items(learner, ctx, names, limit=limit)
    XL, XR = _arrays(examples, names, "left"), _arrays(examples, names, "right")
    X = np.concatenate([ref, XL, XR])
    n = len(ref)
    ex = SharpExplainer(learner_score_fn(learner), X, feature_names=names, feature_groups=groups or None,
                        max_exact_players=exact_players, score_rows=512,
                        n_permutations=max(4, b["max_coalitions"] // max(n_players, 1)))
    return ex, n, len(examples), b


def _sharp_rank(learner, examples, ctx) -> Explanation:
    """ShaRP rank QoI of the left item of each event within the catalog (Pliatsika et al. 2024, Eq. 3)."""
    ex, n, k, b = _sharp_catalog(learner, examples, ctx)
    return _with_budgets(ex.explain(np.arange(n, n + k), "rank", seed=ctx.rng), b)


def _sharp_pairwise(learner, examples, ctx) -> Explanation:
    """ShaRP pairwise rank explanation of left vs right (Pliatsika et al. 2024, Section 5, Eq. 7)."""
    ex, n, k, b = _sharp_catalog(learner, examples, ctx)
    pairs = np.stack([np.arange(n, n + k), np.arange(n + k, n + 2 * k)], axis=1)
    return _with_budgets(ex.explain_pairwise(pairs, "rank", seed=ctx.rng), b)


def _margin_bernoulli(learner, examples, ctx) -> Explanation:
    """Bernoulli distributional values of who is preferred, from the learner's batched margin."""
    from explainers.distributional import explain_preference, pairwise_margin_value_function

    b = _budgets(ctx)
    names = list(learner.feature_names)
    XL, XR = _arrays(examples, names, "left"), _arrays(examples, names, "right")
    margin = getattr(learner, "margins", None) or getattr(learner, "margin")
    players, member = _players(names, b["exact_players"])
    out = []
    for xl, xr, ex in zip(XL, XR, examples):
        nu = _on_features(pairwise_margin_value_function(margin, xl, xr), member)
        out.append(explain_preference(nu, players, random_state=0, data=member.astype(float) @ (xl - xr),
                                      instance_id=ex.event_id, **_dist_options(len(players), b)))
    return _with_budgets(Explanation.concat(out), b)


def _choice_utilities(learner, names):
    """Utilities of shown items: the capacity value F(x); for a GPM the mean margin against the others."""
    score = getattr(learner, "score", None)
    if callable(score):
        return lambda X: np.asarray(score(np.asarray(X, dtype=np.float64)), dtype=np.float64)
    gpm = getattr(learner, "model", learner)
    if getattr(gpm, "decision_function", None) is None:
        raise NotFittedError("The GPM has not been fitted yet; no utilities for the click session.")

    def u(X):
        X = np.asarray(X, dtype=np.float64)
        k = len(X)
        i, j = np.meshgrid(np.arange(k), np.arange(k), indexing="ij")
        g = np.asarray(gpm.decision_function(X[i.ravel()], X[j.ravel()]), dtype=np.float64).reshape(k, k)
        return g.mean(axis=1)

    return u


def _session_categorical(learner, examples, ctx) -> Explanation:
    """Categorical distributional values of a click among the shown items (paper 003, Lemma 3.7)."""
    from explainers.distributional import explain_choice

    s = _session(ctx)
    names = list(learner.feature_names)
    try:
        items = np.array([[float(it["features"][f]) for f in names] for it in s["shown"]], dtype=np.float64)
    except KeyError as exc:
        raise InvalidInputError(f"A shown item lacks feature {exc.args[0]!r} of the model.") from None
    ids = [str(it.get("id", k)) for k, it in enumerate(s["shown"])]
    target = ids.index(s["clicked"][0]) if s.get("clicked") and s["clicked"][0] in ids else None
    e = explain_choice(_choice_utilities(learner, names), items, items.mean(axis=0), feature_names=names, item_names=ids,
                       target=target, random_state=0, instance_id=str(s.get("session_id", "")),
                       **_dist_options(len(names), _budgets(ctx)))
    return _with_budgets(_tile(e, len(examples)), _budgets(ctx))


_session_categorical.session_only = True


# ----------------------------------------------------------------------------- GPM
def _gpm_factory(settings, params: dict):
    from learners.refit import RefittingGPM

    p = dict(params)
    names = p.pop("feature_names", None) or list(settings.feature_names or [])
    if not names:
        raise InvalidInputError("The gpm model needs feature_names (settings.feature_names).")
    return _construct("gpm", RefittingGPM, names, **p)


def _cgpm_factory(settings, params: dict):
    from learners.refit import RefittingCGPM

    p = dict(params)
    names = p.pop("feature_names", None) or list(settings.feature_names or [])
    ctx = p.pop("context_names", None) or list(settings.context_names or [])
    if not names or not ctx:
        raise InvalidInputError("The cgpm model needs feature_names and context_names.")
    return _construct("cgpm", RefittingCGPM, names, context_names=ctx, **p)


def _gpm_loader(state: dict):
    from learners.refit import RefittingCGPM, RefittingGPM

    if state.get("meta", {}).get("context_names"):
        return RefittingCGPM.from_state(state)
    return RefittingGPM.from_state(state)


def _gpm_merge(parts: list):
    """Count-weighted ensemble of per-partition GPMs (see the module docstring)."""
    fitted = [(lr, n) for lr, n in parts if getattr(lr, "model", None) is not None]
    if not fitted:
        return max(parts, key=lambda p: p[1])[0]
    if len(fitted) == 1:
        return fitted[0][0]
    models = [lr.model for lr, _ in fitted]
    ls0 = np.asarray(models[0].lengthscales_)
    same = all(np.allclose(np.asarray(m.lengthscales_), ls0) for m in models)
    same = same and all(np.allclose(_scaler_params(m), _scaler_params(models[0])) for m in models)
    ctx = getattr(models[0], "centres_context_", None) is not None
    if ctx:
        same = same and all(np.allclose(np.asarray(m.context_lengthscales_), np.asarray(models[0].context_lengthscales_))
                            for m in models)
    if not same:
        log.info("GPM parts have different length-scales or scalers; using the part with the most examples")
        return max(fitted, key=lambda p: p[1])[0]
    total = float(sum(n for _, n in fitted)) or 1.0
    base_lr = max(fitted, key=lambda p: p[1])[0]
    merged_lr = copy.copy(base_lr)
    merged = copy.copy(base_lr.model)
    merged.centres_left_ = np.concatenate([m.centres_left_ for m in models])
    merged.centres_right_ = np.concatenate([m.centres_right_ for m in models])
    merged.alpha_ = np.concatenate([np.asarray(m.alpha_) * (n / total) for m, (_, n) in zip(models, fitted)])
    if ctx:
        merged.centres_context_ = np.concatenate([m.centres_context_ for m in models])
    _set_model(merged_lr, merged)
    return merged_lr


def _scaler_params(model) -> np.ndarray:
    probe = np.linspace(-1.0, 1.0, 3)[:, None] * np.ones((1, len(model.feature_names)))
    return np.asarray(model.transform(probe), dtype=np.float64)


def _set_model(refitting, model) -> None:
    for attr in ("_model", "model_"):
        if hasattr(refitting, attr):
            setattr(refitting, attr, model)
            return
    raise InvalidInputError("Cannot install a merged GPM into this learner (no _model attribute).")


_PREFSHAP_CACHE: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()


def _prefshap_for(learner, ctx):
    """One :class:`PrefSHAP` per fitted model snapshot and budgets (its kernel blocks are cached inside)."""
    from explainers.prefshap import PrefSHAP

    model = getattr(learner, "model", None)
    if model is None:
        raise NotFittedError("The GPM has not been refitted yet; nothing to explain.")
    b = _budgets(ctx)
    key = (b["exact_players"], b["max_coalitions"], b["reference_size"])
    ps = _PREFSHAP_CACHE.get(model)
    if ps is None or getattr(ps, "_budget_key", None) != key:
        names = list(model.feature_names)
        ref = _reference_items(learner, ctx, names, limit=b["reference_size"])
        groups = _groups_of(names, b)
        # float32 on wide data: its largest deviation from float64 is measured in bench/explain_wide.py
        ps = PrefSHAP(model, reference_items=ref if len(ref) >= 2 else None, max_reference=b["reference_size"],
                      random_state=0, max_coalitions=b["max_coalitions"], feature_groups=groups or None,
                      dtype=_torch_float(len(names) > b["exact_players"]))
        ps._budget_key = key
        players, member = _players(names, b["exact_players"])
        if 2 ** len(players) <= b["max_coalitions"] and len(ref) >= 2:
            # fill the per-coalition kernel blocks once per snapshot, not on the first explained events
            from explainers._coalitions import coalitions_from_integers

            C = coalitions_from_integers(np.arange(2 ** len(players)), len(players))
            ps.coalition_values((C.astype(np.int64) @ member.astype(np.int64)) > 0, ref[:1], ref[:1])
        _PREFSHAP_CACHE[model] = ps
    return model, ps, b


def _torch_float(wide: bool):
    """float32 for wide data (error vs float64 measured < 1e-4 relative, bench/explain_wide.py), else float64."""
    import torch

    return torch.float32 if wide else torch.float64


def _outcome(examples):
    """Outcomes in {+1, −1, 0}; Pref-SHAP orients decided duels winner-vs-loser and leaves ties left-right."""
    return np.array([ex.outcome for ex in examples], dtype=np.float64)


def _pref_shap(learner, examples, ctx) -> Explanation:
    """Pref-SHAP of each duel (Hu et al. 2022, Prop. 3.2; Table 1 row 1), oriented winner vs loser when decided."""
    model, ps, b = _prefshap_for(learner, ctx)
    names = list(model.feature_names)
    XL, XR = _arrays(examples, names, "left"), _arrays(examples, names, "right")
    U = _contexts(examples, model.context_names) if getattr(model, "context_names", None) else None
    return _with_budgets(ps.explain_duels(XL, XR, U, _outcome(examples)), b)


def _pref_shap_context(learner, examples, ctx) -> Explanation:
    """Pref-SHAP of the context of each duel (Hu et al. 2022, Prop. 3.3; Table 1 row 3)."""
    model, ps, b = _prefshap_for(learner, ctx)
    names = list(model.feature_names)
    XL, XR = _arrays(examples, names, "left"), _arrays(examples, names, "right")
    return _with_budgets(ps.explain_duel_contexts(_contexts(examples, model.context_names), XL, XR,
                                                  _outcome(examples)), b)


def _gpm_bernoulli(learner, examples, ctx) -> Explanation:
    """Bernoulli distributional values from the Pref-SHAP value function: P(a feature flips who wins).

    With exact enumeration the value function of every event is evaluated on the same coalitions in
    one batched call (the kernel blocks are shared by all events); sampled estimators evaluate their
    own coalitions per event.
    """
    from explainers.distributional import all_coalitions, explain_preference, table_value_function

    model, ps, b = _prefshap_for(learner, ctx)
    names = list(model.feature_names)
    XL, XR = _arrays(examples, names, "left"), _arrays(examples, names, "right")
    U = _contexts(examples, model.context_names) if getattr(model, "context_names", None) else None
    players, member = _players(names, b["exact_players"])
    opts = _dist_options(len(players), b)
    table = None
    if opts["method"] == "exact":
        C = all_coalitions(len(players))
        table = ps.coalition_values((C.astype(np.int64) @ member.astype(np.int64)) > 0, XL, XR, U)   # (2^P, n)
    out = []
    for k, ex in enumerate(examples):
        if table is not None:
            nu = table_value_function(table[:, k])
        else:
            u = None if U is None else U[k:k + 1]
            nu = _on_features(lambda C, k=k, u=u: ps.coalition_values(C, XL[k:k + 1], XR[k:k + 1], u)[:, 0], member)
        out.append(explain_preference(nu, players, random_state=0, data=member.astype(float) @ (XL[k] - XR[k]),
                                      instance_id=ex.event_id, **opts))
    return _with_budgets(Explanation.concat(out), b)


# ----------------------------------------------------------------------------- registration
def register_all() -> None:
    """Register every built-in model and explainer (idempotent)."""
    global _DONE
    with _LOCK:
        if _DONE:
            return
        _DONE = True
    from stream.registry import register_explainer, register_model

    register_model("capacity", _capacity_factory, _capacity_loader, replace=True)
    for method, fn in (("capacity-shapley", _capacity_shapley), ("capacity-interaction", _capacity_interaction),
                       ("sharp-rank", _sharp_rank), ("sharp-pairwise", _sharp_pairwise),
                       ("distributional-bernoulli", _margin_bernoulli),
                       ("distributional-categorical", _session_categorical)):
        register_explainer("capacity", method, fn, replace=True)
    register_model("gpm", _gpm_factory, _gpm_loader, merger=_gpm_merge, replace=True)
    register_model("cgpm", _cgpm_factory, _gpm_loader, merger=_gpm_merge, replace=True)
    for name in ("gpm", "cgpm"):
        register_explainer(name, "pref-shap", _pref_shap, replace=True)
        register_explainer(name, "distributional-bernoulli", _gpm_bernoulli, replace=True)
    register_explainer("gpm", "distributional-categorical", _session_categorical, replace=True)
    register_explainer("cgpm", "pref-shap-context", _pref_shap_context, replace=True)
