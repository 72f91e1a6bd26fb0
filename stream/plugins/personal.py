"""The personal plug-ins: ``capacity-personal`` and ``linear-bt-personal`` (a population model plus a deviation per person).

Learners: :class:`learners.capacity_personal.CapacityPersonal` and
:class:`learners.linear_personal.LinearBTPersonal` (:mod:`learners.personal` holds the model and
the per-person state API). Parameters: ``person_l1``, ``person_l2``, ``person_gamma``, ``person_interaction`` (capacity), ``block`` are
the personal model's; every other parameter is the population learner's (``decreasing``,
``algorithm``, ``constraints``, ``learning_rate``, ...), as for the ``capacity`` and ``linear-bt``
models.

Merge rule (:func:`merge_personal`): events keyed by person put each person on one partition, so
the parts hold disjoint people; the merge is the population's merge rule (the ``capacity`` and
``linear-bt`` ones) plus the union of the people (a person held by two parts gets the sums of their
dual-averaging state). The parts are never modified.

Explanations per person (``capacity-personal``): ``capacity-shapley`` and ``capacity-interaction`` of
the person's capacity m + δ_u (the population's for an event without a held person), and "how
this person differs", ``capacity-shapley-deviation`` and ``capacity-interaction-deviation``: the same
indices of δ_u alone — the indices are linear in the masses, so these are exactly the person's
indices minus the population's. The same for ``linear-bt-personal``: ``linear-shapley`` of the
person's weights w + δ_u (φ_j = (w + δ_u)_j (D_j − μ_j), the ``linear-bt`` values under the person's
margin) and ``linear-shapley-deviation``, of δ_u alone (δ_u ⊙ (D − μ), with base δ_u·μ): the person's
values minus the population's. Every record names the person (``user_id``, top level and in
``extra``) with ``personalized`` and ``person_version``.
"""

from __future__ import annotations

import numpy as np

from learners.exceptions import InvalidInputError
from stream.plugins.budgets import capped
from stream.plugins.common import construct

__all__ = ["capacity_personal_factory", "linear_personal_factory", "merge_personal", "person_capacity_interaction",
           "person_capacity_shapley", "person_deviation_interaction", "person_deviation_shapley",
           "person_linear_deviation", "person_linear_shapley", "personal_loader"]

_PERSONAL_KEYS = ("population", "person_l1", "person_l2", "person_gamma", "person_interaction", "person_adaptive",
                  "block")


def _split(params: dict) -> tuple[dict, dict]:
    """(personal parameters, population parameters) of a flat parameter dict."""
    p = dict(params)
    own = {k: p.pop(k) for k in _PERSONAL_KEYS if k in p}
    pop = dict(own.pop("population", None) or {})
    pop.update(p)
    return own, pop


def capacity_personal_factory(settings, params: dict):
    """A fresh :class:`~learners.capacity_personal.CapacityPersonal` on ``criteria`` or the settings' feature names.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> m = capacity_personal_factory(SimpleNamespace(feature_names=["a", "b"]), {"decreasing": ["a"], "person_l2": 0.1})
    >>> m.population, m.person_l2, type(m.population_learner).__name__
    ({'decreasing': ['a']}, 0.1, 'CapacityLogistic')
    >>> type(capacity_personal_factory(SimpleNamespace(feature_names=["a", "b"]), {"constraints": ["monotone"]})
    ...      .population_learner).__name__
    'CapacityRDA'
    """
    from learners.capacity_personal import CapacityPersonal
    from learners.capacity_stream import PAPER_ONLY_PARAMS

    own, pop = _split(params)
    criteria = pop.pop("criteria", None) or list(getattr(settings, "feature_names", None) or [])
    if not criteria:
        raise InvalidInputError("The capacity-personal model needs its criteria: set feature_names "
                                "(or model_params.capacity-personal.criteria).")
    if "algorithm" not in pop and PAPER_ONLY_PARAMS & set(pop):
        pop["algorithm"] = "rda"
    return construct("capacity-personal", CapacityPersonal, criteria, population=pop or None, **own)


def linear_personal_factory(settings, params: dict):
    """A fresh :class:`~learners.linear_personal.LinearBTPersonal` (feature names from the settings unless given).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> linear_personal_factory(SimpleNamespace(feature_names=["a"]), {"learning_rate": 0.2}).population
    {'learning_rate': 0.2}
    """
    from learners.linear_personal import LinearBTPersonal

    own, pop = _split(params)
    names = pop.pop("feature_names", None) or list(getattr(settings, "feature_names", None) or [])
    if not names:
        raise InvalidInputError("The linear-bt-personal model needs its feature names: set feature_names "
                                "(or model_params.linear-bt-personal.feature_names).")
    return construct("linear-bt-personal", LinearBTPersonal, names, population=pop or None, **own)


def personal_loader(state: dict):
    """Rebuild a personal learner from its state (by ``meta["class"]``).

    Examples
    --------
    >>> from learners.linear_personal import LinearBTPersonal
    >>> type(personal_loader(LinearBTPersonal(["a"]).state_dict())).__name__
    'LinearBTPersonal'
    """
    from learners.capacity_personal import CapacityPersonal
    from learners.exceptions import SnapshotError
    from learners.linear_personal import LinearBTPersonal

    classes = {"CapacityPersonal": CapacityPersonal, "LinearBTPersonal": LinearBTPersonal}
    cls = classes.get(state.get("meta", {}).get("class"))
    if cls is None:
        raise SnapshotError(f"Not a personal model state: class {state.get('meta', {}).get('class')!r}.")
    return cls.from_state(state)


def merge_personal(parts: list):
    """Combine per-partition personal learners ``[(learner, training_count), ...]`` (module docstring).

    Examples
    --------
    >>> from learners.linear_personal import LinearBTPersonal
    >>> a, b = LinearBTPersonal(["x"]), LinearBTPersonal(["x"])
    >>> a.learn_one({"x": 1.0}, {"x": 0.0}, 1, user_id="ann"); b.learn_one({"x": 0.0}, {"x": 1.0}, 1, user_id="bob")
    >>> sorted(merge_personal([(a, 1), (b, 1)]).people()), a.people_held()
    (['ann', 'bob'], 1)
    """
    if len(parts) == 1:
        return parts[0][0]
    first = personal_loader(parts[0][0].state_dict())
    for lr, _ in parts[1:]:
        first += lr
    return first


# ------------------------------------------------------------------------------ explanations per person
def _person_explanations(learner, examples, ctx, deviation: bool, interaction: bool):
    """One capacity Shapley (or interaction) explanation per event, of m + δ_u (or of δ_u alone) for the event's person."""
    from explainers._result import Explanation
    from explainers.capacity import capacity_interaction, capacity_shapley
    from stream.plugins.common import require_trained

    require_trained(learner, "capacity-personal")
    explain = capacity_interaction if interaction else capacity_shapley
    names, index = list(learner.feature_names), learner.index
    cache: dict = {}
    out = []
    for ex in examples:
        u = getattr(ex, "user_id", None)
        if u not in cache:
            info = learner.person_info(u)
            masses = learner.deviation(u) if deviation else learner.person_mobius(u if info["personalized"] else None)
            e = explain(masses, index, names)
            e.method = e.method + ("-deviation" if deviation else "")
            e.extra = dict(e.extra, user_id=u, personalized=info["personalized"], person_version=info["version"])
            cache[u] = e
        out.append(cache[u])
    e = out[0] if len(out) == 1 else Explanation.concat(out)
    e.model_name, e.model_version = "capacity-personal", int(getattr(ctx, "model_version", 0) or 0)
    return e


@capped(max_batch=4096, budget_s=2.0, step=4096)
def person_capacity_shapley(learner, examples, ctx):
    """Shapley importance of the person's capacity m + δ_u, one record per event (the population's for an event
    without a held person, ``personalized: false``); ``extra`` names the person (``user_id``) and their state's
    version (Herin, Perny & Sokolovska 2024, Section 2; Grabisch 1997: φ_i = Σ_{S∋i} m(S)/|S|)."""
    return _person_explanations(learner, examples, ctx, deviation=False, interaction=False)


@capped(max_batch=4096, budget_s=2.0, step=4096)
def person_capacity_interaction(learner, examples, ctx):
    """Shapley interaction indices I_ij of the person's m + δ_u (``extra["interactions"]``, ``extra["pairs"]``)."""
    return _person_explanations(learner, examples, ctx, deviation=False, interaction=True)


@capped(max_batch=4096, budget_s=2.0, step=4096)
def person_deviation_shapley(learner, examples, ctx):
    """How the person differs: the Shapley importance of δ_u alone (φ(m + δ_u) − φ(m), by linearity); zeros for a
    person not held. Method ``capacity-shapley-deviation``."""
    return _person_explanations(learner, examples, ctx, deviation=True, interaction=False)


@capped(max_batch=4096, budget_s=2.0, step=4096)
def person_deviation_interaction(learner, examples, ctx):
    """The interaction indices of δ_u alone (I(m + δ_u) − I(m)). Method ``capacity-interaction-deviation``."""
    return _person_explanations(learner, examples, ctx, deviation=True, interaction=True)


def _person_linear(learner, examples, ctx, deviation: bool):
    """``linear-shapley`` of each event's person's weights w + δ_u (or of δ_u alone), one row per event."""
    from stream.plugins.common import require_trained
    from stream.plugins.linear import shapley_of_weights

    require_trained(learner, "linear-bt-personal")
    users = [getattr(ex, "user_id", None) for ex in examples]
    delta, versions = learner.deviations(users)          # one read-out for the batch's people
    personalized = versions > 0
    W = delta if deviation else learner.weights + np.where(personalized[:, None], delta, 0.0)
    e = shapley_of_weights(W, list(learner.feature_names), examples, ctx)
    e.method = e.method + ("-deviation" if deviation else "")
    e.extra = dict(e.extra, user_id=users, personalized=personalized.tolist(), person_version=versions.tolist())
    e.model_name, e.model_version = "linear-bt-personal", int(getattr(ctx, "model_version", 0) or 0)
    return e


@capped(max_batch=4096, budget_s=2.0, step=4096)
def person_linear_shapley(learner, examples, ctx):
    """Exact Shapley values of the person's margin (w + δ_u)·(x_l − x_r), one record per event (the population's
    w for an event without a held person, ``personalized: false``): φ_j = (w + δ_u)_j (D_j − μ_j), the
    ``linear-shapley`` values (Hu, Chau et al. 2022, Sec. 3.1, Eq. (8); Lundberg & Lee 2017, linear SHAP)."""
    return _person_linear(learner, examples, ctx, deviation=False)


@capped(max_batch=4096, budget_s=2.0, step=4096)
def person_linear_deviation(learner, examples, ctx):
    """How the person differs: the Shapley values of δ_u·(x_l − x_r) alone, δ_u ⊙ (D − μ) (φ(w + δ_u) − φ(w), by
    linearity); zeros for a person not held. Method ``linear-shapley-deviation``."""
    return _person_linear(learner, examples, ctx, deviation=True)


# the values add up: Σ_i φ_i = Σ_S masses(S) = the record's prediction (base 0 = v(∅)), and base + Σφ = the person's
# margin (or δ_u·D) for the linear ones; tests/checks verifies it
for _fn in (person_capacity_shapley, person_capacity_interaction, person_deviation_shapley,
            person_deviation_interaction, person_linear_shapley, person_linear_deviation):
    _fn.additive = True
