"""The extension point where learners and explainers plug into the workers.

The learner and explainer workers never name a model class: they look models and explainers
up here by name. A new learner needs two calls, in its own module, and nothing in the workers
changes::

    from learners.linear import LinearBT
    from stream.registry import register_explainer, register_model

    register_model("my-bt", factory=lambda settings, params: LinearBT(settings.feature_names, **params),
                   loader=LinearBT.from_state)                 # optional merger=...
    register_explainer("my-bt", "my-shapley", lambda learner, examples, ctx: ...)

* ``factory(settings, params) -> PreferenceLearner`` builds a fresh learner (``params`` is
  ``settings.params_for(name)``; the factory may add ``settings.feature_names``);
* ``loader(state) -> PreferenceLearner`` rebuilds it from a snapshot's state dict;
* ``merger(parts) -> PreferenceLearner`` (optional) combines learners trained on different
  partitions, ``parts`` being ``[(learner, training_count), ...]``. Without one,
  :func:`merge_learners` uses the learner's ``__iadd__`` if it has one (mergeable state, as
  ``river.stats.Mean.__iadd__``), else a count-weighted average of the floating-point state
  arrays (parameter mixing), else the part with the largest training count. A merger that leaves
  parts out sets ``examples_served`` (int) on the learner it returns: the training count of what it
  holds, which the served model reports (``/v1/models`` ``examples_seen``; the default is every part's).
* ``fn(learner, examples, ctx) -> Explanation`` explains a list of
  :class:`~stream.contract.PreferenceExample` with an :class:`ExplainContext`.

This module knows no model: the built-ins (``linear-bt``, ``capacity``, ``gpm``, ``cgpm``) are
registered by :func:`stream.models.register_all` (``stream.load_builtins()``), which imports this
module, never the reverse. A name is never silently re-registered: pass ``replace=True``.
It imports no Kafka client; it may be used from notebooks and tests.

Examples
--------
>>> from learners.linear import LinearBT
>>> spec = register_model("doc-bt", lambda settings, params: LinearBT(["a"]), LinearBT.from_state)
>>> get_model("doc-bt").name
'doc-bt'
>>> register_model("doc-bt", spec.factory, spec.loader)
Traceback (most recent call last):
...
learners.exceptions.InvalidParameterError: A model named 'doc-bt' is already registered; pass replace=True to override it.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from learners.exceptions import InvalidInputError, InvalidParameterError, PrefstreamError
from stream.contract.arrays import background_arrays

__all__ = [
    "ExplainContext",
    "ModelSpec",
    "explainers_for",
    "get_explainer",
    "get_model",
    "merge_learners",
    "models",
    "register_explainer",
    "register_model",
    "weighted_average_merge",
]

log = logging.getLogger(__name__)


@dataclass
class ExplainContext:
    """What an explainer may use besides the learner and the explained examples.

    Attributes
    ----------
    model_name : str
    model_version : int
        Version of the (merged) snapshot the learner was rebuilt from; goes into every record.
    background : list of PreferenceExample
        A uniform reservoir sample of recent preference examples (background / reference data
        for Shapley value functions), possibly empty.
    catalog : ItemCatalog or None
        The current item catalog (for explainers that rank or sample items).
    rng : numpy.random.Generator
        Per-worker generator for sampling explainers.
    params : dict
        Per-method options from the explain request (e.g. ``{"k": 5}``), possibly empty.
    budgets : dict
        Explanation budgets from the settings (``exact_players``, ``max_coalitions``,
        ``reference_size``); empty = the explainers' defaults.

    Examples
    --------
    >>> ctx = ExplainContext("linear-bt", model_version=4, params={"k": 5})
    >>> ctx.model_name, ctx.model_version, ctx.background, ctx.params["k"]
    ('linear-bt', 4, [], 5)
    """

    model_name: str
    model_version: int = 0
    background: list = field(default_factory=list)
    catalog: Any = None
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))
    params: dict = field(default_factory=dict)
    budgets: dict = field(default_factory=dict)

    def background_arrays(self, feature_names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Background items as arrays ``(X_left, X_right)`` of shape (n_background, n_features).

        Examples whose items lack one of ``feature_names`` are left out
        (:func:`stream.contract.arrays.background_arrays`).

        Examples
        --------
        >>> from types import SimpleNamespace as Ex
        >>> ctx = ExplainContext("m", background=[Ex(left={"a": 1.0}, right={"a": 3.0})])
        >>> [x.tolist() for x in ctx.background_arrays(["a"])]
        [[[1.0]], [[3.0]]]
        """
        return background_arrays(self.background, feature_names)


@dataclass(frozen=True)
class ModelSpec:
    """A registered model: name, factory, loader and optional merger.

    Examples
    --------
    >>> from learners.linear import LinearBT
    >>> spec = ModelSpec("bt", lambda settings, params: LinearBT(["a"]), LinearBT.from_state)
    >>> spec.factory(None, {}).feature_names, spec.merger is None
    (['a'], True)
    """

    name: str
    factory: Callable[[Any, dict], Any]
    loader: Callable[[dict], Any]
    merger: Callable[[list], Any] | None = None


_LOCK = threading.RLock()
_MODELS: dict[str, ModelSpec] = {}
_EXPLAINERS: dict[str, dict[str, Callable]] = {}


def register_model(name: str, factory: Callable[[Any, dict], Any], loader: Callable[[dict], Any],
                   merger: Callable[[list], Any] | None = None, replace: bool = False) -> ModelSpec:
    """Register a learner under ``name`` (the snapshot's ``model_name`` and the ``--models`` value).

    Parameters
    ----------
    name : str
        E.g. ``"linear-bt"``.
    factory : callable ``(Settings, dict params) -> PreferenceLearner``
    loader : callable ``(state dict) -> PreferenceLearner``
    merger : callable ``(list of (learner, training_count)) -> PreferenceLearner``, optional
    replace : bool, default False
        Allow re-registering an existing name.

    Returns
    -------
    ModelSpec

    Raises
    ------
    InvalidParameterError
        For an empty name, non-callables, or a name already registered (without ``replace``).
    """
    if not isinstance(name, str) or not name or "@" in name:
        raise InvalidParameterError(f"The 'name' parameter of register_model must be a non-empty string without '@'. "
                                    f"Got {name!r} instead.")
    for what, fn in (("factory", factory), ("loader", loader)):
        if not callable(fn):
            raise InvalidParameterError(f"The '{what}' parameter of register_model must be callable. Got {fn!r} instead.")
    if merger is not None and not callable(merger):
        raise InvalidParameterError(f"The 'merger' parameter of register_model must be callable or None. Got {merger!r} instead.")
    with _LOCK:
        if name in _MODELS and not replace:
            raise InvalidParameterError(f"A model named {name!r} is already registered; pass replace=True to override it.")
        spec = _MODELS[name] = ModelSpec(name, factory, loader, merger)
    return spec


def register_explainer(model_name: str, method: str, fn: Callable[[Any, list, ExplainContext], Any],
                       replace: bool = False) -> None:
    """Register explanation method ``method`` for the model ``model_name``.

    Parameters
    ----------
    model_name : str
        A name passed to :func:`register_model` (it may be registered later).
    method : str
        The Explanation ``method`` it emits, e.g. ``"linear-shapley"``.
    fn : callable ``(learner, list[PreferenceExample], ExplainContext) -> Explanation``
    replace : bool, default False

    Raises
    ------
    InvalidParameterError
        For empty names, a non-callable ``fn`` or a duplicate (without ``replace``).

    Examples
    --------
    >>> register_explainer("doc-model", "doc-zero", lambda learner, examples, ctx: None)
    >>> sorted(explainers_for("doc-model"))
    ['doc-zero']
    >>> register_explainer("doc-model", "doc-zero", print)
    Traceback (most recent call last):
    ...
    learners.exceptions.InvalidParameterError: Explainer 'doc-zero' is already registered for 'doc-model'; pass replace=True to override it.
    """
    for what, v in (("model_name", model_name), ("method", method)):
        if not isinstance(v, str) or not v:
            raise InvalidParameterError(f"The '{what}' parameter of register_explainer must be a non-empty string. "
                                        f"Got {v!r} instead.")
    if not callable(fn):
        raise InvalidParameterError(f"The 'fn' parameter of register_explainer must be callable. Got {fn!r} instead.")
    with _LOCK:
        per = _EXPLAINERS.setdefault(model_name, {})
        if method in per and not replace:
            raise InvalidParameterError(f"Explainer {method!r} is already registered for {model_name!r}; "
                                        "pass replace=True to override it.")
        per[method] = fn


def models() -> list[str]:
    """Names of all registered models, sorted.

    Examples
    --------
    >>> from learners.linear import LinearBT
    >>> _ = register_model("doc-listed", lambda settings, params: LinearBT(), LinearBT.from_state)
    >>> "doc-listed" in models()
    True
    """
    with _LOCK:
        return sorted(_MODELS)


def get_model(name: str) -> ModelSpec:
    """The :class:`ModelSpec` registered under ``name``.

    Raises
    ------
    InvalidParameterError
        If no model of that name is registered (the message lists the known ones).
    """
    with _LOCK:
        try:
            return _MODELS[name]
        except KeyError:
            raise InvalidParameterError(f"Unknown model {name!r}; registered models: {sorted(_MODELS)}. "
                                        "The built-ins are registered by stream.load_builtins() (the CLI and the "
                                        "workers call it); register your own with stream.registry.register_model.") from None


def explainers_for(model_name: str) -> dict[str, Callable]:
    """``{method: fn}`` of the explainers registered for ``model_name`` (a copy; may be empty).

    Examples
    --------
    >>> explainers_for("no-such-model")
    {}
    """
    with _LOCK:
        return dict(_EXPLAINERS.get(model_name, {}))


def get_explainer(model_name: str, method: str) -> Callable:
    """The explainer ``method`` of ``model_name``.

    Raises
    ------
    InvalidParameterError
        If that pair is not registered (the message lists the methods that are).

    Examples
    --------
    >>> get_explainer("no-such-model", "shapley")
    Traceback (most recent call last):
    ...
    learners.exceptions.InvalidParameterError: No explainer 'shapley' for model 'no-such-model'; registered: [].
    """
    per = explainers_for(model_name)
    try:
        return per[method]
    except KeyError:
        raise InvalidParameterError(f"No explainer {method!r} for model {model_name!r}; registered: {sorted(per)}.") from None


# ------------------------------------------------------------------------------ merging
def weighted_average_merge(parts: list, loader: Callable[[dict], Any]) -> Any:
    """Count-weighted average of the floating-point state arrays of several learners.

    For a model trained by SGD on disjoint partitions, averaging the parameters weighted by the
    number of examples each saw is *parameter mixing* (Zinkevich et al., "Parallelized
    Stochastic Gradient Descent", NeurIPS 2010). Integer arrays and the meta dict come from the
    part with the largest count.

    Parameters
    ----------
    parts : list of (learner, int)
        Learners and their training counts; all must share feature names and array shapes.
    loader : callable ``(state) -> learner``

    Returns
    -------
    PreferenceLearner

    Raises
    ------
    InvalidInputError
        If the parts disagree on feature names, array names or shapes.

    Examples
    --------
    >>> from learners.linear import LinearBT
    >>> a, b = LinearBT(["x"]), LinearBT(["x"])
    >>> a.learn_one({"x": 1.0}, {"x": 0.0}, 1)
    >>> merged = weighted_average_merge([(a, 3), (b, 1)], LinearBT.from_state)
    >>> bool(np.allclose(merged.state_dict()["arrays"]["w"], 0.75 * a.state_dict()["arrays"]["w"]))
    True
    """
    if not parts:
        raise InvalidInputError("weighted_average_merge needs at least one (learner, count) pair.")
    if len(parts) == 1:
        return parts[0][0]
    states = [(lr.state_dict(), max(int(n), 0)) for lr, n in parts]
    names = [list(getattr(lr, "feature_names", []) or []) for lr, _ in parts]
    if any(n != names[0] for n in names):
        raise InvalidInputError(f"Cannot merge learners with different feature names: {names}.")
    total = sum(n for _, n in states)
    base_state, _ = max(states, key=lambda s: s[1])
    keys = set(base_state["arrays"])
    arrays = {}
    for k in keys:
        ref = np.asarray(base_state["arrays"][k])
        if not np.issubdtype(ref.dtype, np.floating):
            arrays[k] = ref
            continue
        acc = np.zeros(ref.shape, dtype=np.float64)
        for st, n in states:
            a = np.asarray(st["arrays"].get(k))
            if a.shape != ref.shape:
                raise InvalidInputError(f"Cannot merge state array {k!r}: shapes {a.shape} and {ref.shape} differ.")
            w = (n / total) if total > 0 else 1.0 / len(states)
            acc += w * a
        arrays[k] = acc.astype(ref.dtype)
    return loader({"meta": base_state["meta"], "arrays": arrays})


def merge_learners(model_name: str, parts: list) -> Any:
    """Combine learners of ``model_name`` trained on different partitions into one.

    Uses the registered merger, else ``learner.__iadd__`` (mergeable state), else (or if ``+=``
    refuses the parts) :func:`weighted_average_merge`, else (if the parts cannot be averaged,
    e.g. different feature sets) the part with the largest training count.

    Parameters
    ----------
    model_name : str
    parts : list of (learner, int)

    Returns
    -------
    PreferenceLearner

    Examples
    --------
    >>> from learners.linear import LinearBT
    >>> _ = register_model("doc-merged", lambda settings, params: LinearBT(["x"]), LinearBT.from_state)
    >>> only = LinearBT(["x"])
    >>> merge_learners("doc-merged", [(only, 10), (None, 0)]) is only
    True
    """
    parts = [(lr, n) for lr, n in parts if lr is not None]
    if not parts:
        raise InvalidInputError(f"No learner of {model_name!r} to merge.")
    if len(parts) == 1:
        return parts[0][0]
    spec = get_model(model_name)
    if spec.merger is not None:
        return spec.merger(parts)
    if hasattr(type(parts[0][0]), "__iadd__"):
        try:
            first = spec.loader(parts[0][0].state_dict())  # a copy: never mutate the cached parts
            for lr, _ in parts[1:]:
                first += lr
            return first
        except (PrefstreamError, ValueError, TypeError) as exc:  # e.g. ADMM-RDA parts refuse +=
            log.warning("merging %s with += failed (%s); trying parameter averaging", model_name, exc)
    try:
        return weighted_average_merge(parts, spec.loader)
    except (PrefstreamError, ValueError, KeyError, TypeError) as exc:
        log.warning("merging %s by parameter averaging failed (%s); using the part with the most examples",
                    model_name, exc)
        import copy

        best, n = max(parts, key=lambda p: p[1])
        best = copy.copy(best)   # never mutate the cached part
        best.examples_served = int(n)
        return best
