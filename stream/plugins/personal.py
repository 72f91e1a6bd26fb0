"""The personal plug-ins: ``capacity-personal`` and ``linear-bt-personal`` (a population model plus a deviation per person).

Learners: :class:`learners.capacity_personal.CapacityPersonal` and
:class:`learners.linear_personal.LinearBTPersonal` (:mod:`learners.personal` holds the model and
the per-person state API). Parameters: ``person_l1``, ``person_l2``, ``person_gamma``, ``block`` are
the personal model's; every other parameter is the population learner's (``decreasing``,
``algorithm``, ``constraints``, ``learning_rate``, ...), as for the ``capacity`` and ``linear-bt``
models.

Merge rule (:func:`merge_personal`): events keyed by person put each person on one partition, so
the parts hold disjoint people; the merge is the population's merge rule (the ``capacity`` and
``linear-bt`` ones) plus the union of the people (a person held by two parts gets the sums of their
dual-averaging state). The parts are never modified.
"""

from __future__ import annotations

from learners.exceptions import InvalidInputError
from stream.plugins.common import construct

__all__ = ["capacity_personal_factory", "linear_personal_factory", "merge_personal", "personal_loader"]

_PERSONAL_KEYS = ("population", "person_l1", "person_l2", "person_gamma", "block")


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
