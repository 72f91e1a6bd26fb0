"""The ``capacity`` plug-in: the online Möbius capacity learners and their explainers.

Learner: the stream default :class:`learners.capacity_stream.CapacityLogistic` (logistic loss,
AdaGrad, calibrated; see docs/capacity.md), or with ``algorithm="rda"`` (or any paper-only
parameter) :class:`learners.capacity.CapacityRDA` — RDA (Algorithm 1) or, with ``constraints``,
ADMM-RDA (Algorithm 2) of Herin, Perny & Sokolovska (2024), *Online Learning of Capacity-Based
Preference Models*; a snapshot of class ``CapacityFOBOS`` loads as the FOBOS baseline.

Merge rule (:func:`merge_capacity`, the one rule used by every worker and the demo): RDA parts
pool their state with ``+=`` (gradient sums and counts; exact when the subgradients coincide,
see :mod:`learners.capacity`); the stream default's ``+=`` pools its sufficient statistics and
averages the masses by count (:meth:`learners.capacity_stream.CapacityLogistic.__iadd__`). Parts that cannot be pooled — ADMM-RDA and FOBOS keep
path-dependent last iterates with no additive sufficient statistic (Herin et al. 2024, Sec. 4.2),
or parts with different parameters — are not averaged: the part with the largest training count
is explained, and the choice is logged.

Explainers: capacity Shapley and interaction indices (model level, one record per event),
ShaRP rank and pairwise QoIs against the item catalog (Pliatsika et al. 2024), Bernoulli
distributional values of who is preferred (Franceschi et al. 2024) and, for click sessions, the
categorical values of :mod:`stream.plugins.sessions`.
"""

from __future__ import annotations

import logging

import numpy as np

from explainers._result import Explanation
from learners.exceptions import InvalidInputError, InvalidParameterError
from stream.contract.arrays import reference_items, side_array
from stream.plugins.budgets import budgets, capped, dist_options, with_budgets
from stream.plugins.common import construct, require_trained, tile
from stream.plugins.groups import groups_of, on_features, players

__all__ = ["capacity_factory", "capacity_interaction", "capacity_loader", "capacity_shapley", "margin_bernoulli",
           "merge_capacity", "sharp_pairwise", "sharp_rank"]

log = logging.getLogger(__name__)


def capacity_factory(settings, params: dict):
    """A fresh capacity learner on ``params["criteria"]`` or the settings' feature names.

    ``algorithm`` picks the learner: ``"logistic"`` (the stream default,
    :class:`~learners.capacity_stream.CapacityLogistic`: logistic loss, AdaGrad, online
    standardisation, calibrated probabilities), ``"rda"`` (the paper's RDA / ADMM-RDA,
    :class:`~learners.capacity.CapacityRDA`) or ``"fobos"``. A paper-only parameter
    (``constraints``, ``gamma``, ``delta``, ...) without an ``algorithm`` selects ``"rda"``. The paper's
    learners use the min-max scaler by default (raw event features are rarely in [0, 1]); pass
    ``scaler="none"`` to require criteria in [0, 1].

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> s = SimpleNamespace(feature_names=["price", "time"])
    >>> m = capacity_factory(s, {"decreasing": ["price"]})
    >>> type(m).__name__, m.criteria
    ('CapacityLogistic', ['price', 'time'])
    >>> type(capacity_factory(s, {"constraints": ["monotone"]})).__name__
    'CapacityRDA'
    """
    from learners.capacity import CapacityFOBOS, CapacityRDA
    from learners.capacity_stream import PAPER_ONLY_PARAMS, CapacityLogistic

    p = dict(params)
    criteria = p.pop("criteria", None) or list(settings.feature_names or [])
    if not criteria:
        raise InvalidInputError("The capacity model needs its criteria: set feature_names (or model_params.capacity.criteria).")
    algo = p.pop("algorithm", None) or ("rda" if PAPER_ONLY_PARAMS & set(p) else "logistic")
    classes = {"logistic": CapacityLogistic, "rda": CapacityRDA, "fobos": CapacityFOBOS}
    if algo not in classes:
        raise InvalidParameterError(f"The 'algorithm' parameter of the capacity model must be one of {sorted(classes)}. "
                                    f"Got {algo!r} instead.")
    if algo != "logistic":
        p.setdefault("scaler", "minmax")
    return construct("capacity", classes[algo], criteria, **p)


def capacity_loader(state: dict):
    """Rebuild a ``CapacityLogistic``, ``CapacityRDA`` or ``CapacityFOBOS`` (by the state's ``meta["class"]``).

    Examples
    --------
    >>> from learners.capacity import CapacityFOBOS
    >>> type(capacity_loader(CapacityFOBOS(["x", "y"]).state_dict())).__name__
    'CapacityFOBOS'
    """
    from learners.capacity import CapacityFOBOS, CapacityRDA
    from learners.capacity_stream import CapacityLogistic

    cls = {"CapacityRDA": CapacityRDA, "CapacityFOBOS": CapacityFOBOS,
           "CapacityLogistic": CapacityLogistic}.get(state.get("meta", {}).get("class"), CapacityRDA)
    return cls.from_state(state)


def merge_capacity(parts: list):
    """Combine per-partition capacity learners ``[(learner, training_count), ...]`` (see the module docstring).

    The parts are never modified: the pooled learner starts from a copy of the first part.

    Examples
    --------
    >>> from learners.capacity import CapacityRDA
    >>> a, b = CapacityRDA(["x", "y"], scaler="none"), CapacityRDA(["x", "y"], scaler="none")
    >>> a.learn_one({"x": 1, "y": 0}, {"x": 0, "y": 1}, 1); b.learn_one({"x": 0, "y": 1}, {"x": 1, "y": 0}, -1)
    >>> int(merge_capacity([(a, 1), (b, 1)]).n_seen)
    2
    >>> c = CapacityRDA(["x", "y"], scaler="none", constraints=["monotone"])
    >>> merge_capacity([(a, 1), (c, 5)]) is c      # cannot be pooled: the larger part
    True
    """
    if len(parts) == 1:
        return parts[0][0]
    first = capacity_loader(parts[0][0].state_dict())
    try:
        for lr, _ in parts[1:]:
            first += lr
        return first
    except (InvalidParameterError, InvalidInputError) as exc:
        best = max(parts, key=lambda p: p[1])
        log.info("capacity parts cannot be pooled (%s); explaining the part with the most examples (%d)", exc, best[1])
        return best[0]


@capped(max_batch=4096, budget_s=2.0, step=4096)
def capacity_shapley(learner, examples, ctx) -> Explanation:
    """Shapley values of the learned capacity (:func:`explainers.capacity.capacity_shapley`), one record per event.

    Examples
    --------
    >>> from learners.capacity import CapacityRDA
    >>> m = CapacityRDA(["x", "y"], scaler="none")
    >>> for _ in range(30):
    ...     m.learn_one({"x": 0.9, "y": 0.2}, {"x": 0.1, "y": 0.3}, 1)
    >>> e = capacity_shapley(m, [None, None], None)     # two events: the same model-level values twice
    >>> e.values.shape, bool(e.values[0, 0] > e.values[0, 1])
    ((2, 2), True)
    """
    from explainers.capacity import capacity_shapley as shapley

    require_trained(learner, "capacity")
    return tile(shapley(learner), len(examples))


@capped(max_batch=4096, budget_s=2.0, step=4096)
def capacity_interaction(learner, examples, ctx) -> Explanation:
    """Shapley interaction indices of the learned capacity (:func:`explainers.capacity.capacity_interaction`)."""
    from explainers.capacity import capacity_interaction as interaction

    require_trained(learner, "capacity")
    return tile(interaction(learner), len(examples))


def _sharp_reference(learner, ctx):
    """The ShaRP reference sample of a call, drawn once for all its events.

    Exact ShaRP scores ``2^players × catalog`` hybrid rows per explained item; the catalog is the
    reference sample, cut to ``12 · max_coalitions / 2^players`` items (at least 16) when that is
    smaller than ``reference_size`` (Pokémon, 9 players: 48 items), so exact enumeration fits the
    budget. Above ``exact_players`` players (at most 20) ``max_coalitions`` coalitions are evaluated
    (paired, size-stratified Kernel SHAP; :func:`explainers._coalitions.shapley_of_game`).

    Returns ``(ref, make, budgets, score)``: ``make(XL, XR, item_scores=None)`` is the
    :class:`~explainers.sharp.SharpExplainer` whose catalog is ``ref`` followed by the rows of ``XL`` and
    ``XR`` (``item_scores``: their ``score``, when the caller scored them already); ``ref`` is scored once.
    """
    from explainers.sharp import SharpExplainer, learner_score_fn

    b = budgets(ctx)
    names = list(learner.feature_names)
    groups = groups_of(names, b["exact_players"])
    n_players = len(names) - sum(len(g) - 1 for g in groups.values())
    exact_players = min(b["exact_players"], 20)
    limit = b["reference_size"]
    if n_players <= exact_players:
        limit = min(limit, max(16, (12 * b["max_coalitions"]) >> n_players))
    ref = reference_items(ctx, names, limit=limit)
    score = learner_score_fn(learner)
    ref_scores = score(ref)                     # scored once for every explainer of the call

    def make(XL, XR, item_scores=None):
        return SharpExplainer(score, np.concatenate([ref, XL, XR]), feature_names=names, feature_groups=groups or None,
                              max_exact_players=exact_players, score_rows=512, max_coalitions=b["max_coalitions"],
                              scores=None if item_scores is None else np.concatenate([ref_scores, item_scores]))

    return ref, make, b, score


def _sharp_catalog(learner, examples, ctx):
    """One ShaRP explainer for all of ``examples``: the reference sample plus every event's items
    (``(explainer, n_reference, n_events, budgets)``); the catalog of one event is :func:`_sharp_events`'."""
    ref, make, b, _ = _sharp_reference(learner, ctx)
    names = list(learner.feature_names)
    XL, XR = side_array(examples, names, "left"), side_array(examples, names, "right")
    return make(XL, XR), len(ref), len(examples), b


def _sharp_events(learner, examples, ctx, explain_one):
    """ShaRP of each event in its own catalog (the reference sample plus the event's two items), the
    reference drawn once for the batch and the scoring function built once.

    ShaRP ranks a hybrid among the catalog, so each event's catalog holds only its own items (the
    reference's scores computed once, the events' items in one call): a batch equals one call per event
    (same seed) to 1e-9 under exact enumeration; sampled orders (above
    ``exact_players``) draw from ``ctx.rng`` in turn and agree within their standard errors.
    """
    ref, make, b, score = _sharp_reference(learner, ctx)
    names = list(learner.feature_names)
    XL, XR = side_array(examples, names, "left"), side_array(examples, names, "right")
    n = len(ref)
    sl, sr = np.split(np.asarray(score(np.concatenate([XL, XR])), dtype=np.float64), 2)
    out = [explain_one(make(XL[k:k + 1], XR[k:k + 1], np.array([sl[k], sr[k]])), n) for k in range(len(examples))]
    return with_budgets(out[0] if len(out) == 1 else Explanation.stack(out), b)


@capped(max_batch=32, budget_s=2.0, step=8)
def sharp_rank(learner, examples, ctx) -> Explanation:
    """ShaRP rank QoI of the left item of each event within its catalog (Pliatsika et al. 2024, Eq. 3)."""
    return _sharp_events(learner, examples, ctx, lambda ex, n: ex.explain([n], "rank", seed=ctx.rng))


@capped(max_batch=128, budget_s=2.0, step=32)
def sharp_pairwise(learner, examples, ctx) -> Explanation:
    """ShaRP pairwise rank explanation of left vs right (Pliatsika et al. 2024, Section 5, Eq. 7)."""
    return _sharp_events(learner, examples, ctx, lambda ex, n: ex.explain_pairwise(np.array([[n, n + 1]]), "rank",
                                                                                   seed=ctx.rng))


@capped(max_batch=256, budget_s=2.0, step=64)
def margin_bernoulli(learner, examples, ctx) -> Explanation:
    """Bernoulli distributional values of who is preferred, from the learner's batched margin
    (Franceschi et al. 2024).

    Exact enumeration: the margins of every event on every player coalition are one call of the
    learner's margin (removed features at the duel's midpoint, as
    :func:`~explainers.distributional.pairwise_margin_value_function`), and their distributional values
    one :func:`~explainers.distributional.explain_preference_tables` for the batch, equal to one call per
    event to 1e-9. Sampled (stratified) values run per event with seed 0, as one call per event does.
    """
    from explainers.distributional import (all_coalitions, explain_preference, explain_preference_tables, masked_inputs,
                                           pairwise_margin_value_function)

    b = budgets(ctx)
    names = list(learner.feature_names)
    XL, XR = side_array(examples, names, "left"), side_array(examples, names, "right")
    margin = getattr(learner, "margins", None) or getattr(learner, "margin")
    pl, member = players(names, b["exact_players"])
    opts = dist_options(len(pl), b)
    table = None
    if opts["method"] == "exact":
        M = (all_coalitions(len(pl)).astype(np.int64) @ member.astype(np.int64)) > 0          # (K, d)
        mid = (XL + XR) / 2
        form = learner.pairwise_form() if callable(getattr(learner, "pairwise_form", None)) else None
        if form is not None and getattr(learner, "margins", None) is not None:
            # a 2-additive capacity: F of the hybrids (x on S, the midpoint elsewhere) without building them
            from explainers.sharp.hybrids import PairwiseHybrids

            hyb = PairwiseHybrids(*form)
            table = (hyb(XL, mid[:, None, :], ~M) - hyb(XR, mid[:, None, :], ~M))[:, :, 0].T            # (K, n)
        else:
            L = np.concatenate([masked_inputs(xl, m, M) for xl, m in zip(XL, mid)])
            R = np.concatenate([masked_inputs(xr, m, M) for xr, m in zip(XR, mid)])
            table = np.asarray(margin(L, R), dtype=np.float64).reshape(len(examples), -1).T    # (K, n)
    data = (XL - XR) @ member.T.astype(float)                                                    # (n, players)
    if table is not None:                       # every event's table at hand: one exact enumeration for all
        return with_budgets(explain_preference_tables(table, pl, data=data, instance_ids=[ex.event_id for ex in examples]),
                            b)
    out = []
    for k, (xl, xr, ex) in enumerate(zip(XL, XR, examples)):
        nu = on_features(pairwise_margin_value_function(margin, xl, xr), member)
        out.append(explain_preference(nu, pl, random_state=0, data=data[k], instance_id=ex.event_id, **opts))
    return with_budgets(Explanation.concat(out), b)


# each explainer's values add up to its prediction (base + Σφ = prediction); tests/checks verifies it
for _fn in (capacity_shapley, capacity_interaction, sharp_rank, sharp_pairwise, margin_bernoulli):
    _fn.additive = True
