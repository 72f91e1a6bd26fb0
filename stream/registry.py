"""The extension point where learners and explainers plug into the workers.

The learner and explainer workers never name a model class: they look models and explainers
up here by name. A new learner needs three calls, in its own module or in
:func:`_register_builtins` below, and nothing in the workers changes::

    register_model("capacity", factory=lambda settings, params: CapacityLearner(**params),
                   loader=CapacityLearner.from_state)
    register_explainer("capacity", "capacity-shapley", explain_capacity_shapley)

* ``factory(settings, params) -> PreferenceLearner`` builds a fresh learner (``params`` is
  ``settings.params_for(name)``; the factory may add ``settings.feature_names``);
* ``loader(state) -> PreferenceLearner`` rebuilds it from a snapshot's state dict;
* ``merger(parts) -> PreferenceLearner`` (optional) combines learners trained on different
  partitions, ``parts`` being ``[(learner, training_count), ...]``. Without one,
  :func:`merge_learners` uses the learner's ``__iadd__`` if it has one (the mergeable RDA
  state of the capacity learner, as ``river.stats.Mean.__iadd__``), else a count-weighted
  average of the floating-point state arrays (parameter mixing), else the part with the
  largest training count.
* ``fn(learner, examples, ctx) -> Explanation`` explains a list of
  :class:`~stream.contract.PreferenceExample` with an :class:`ExplainContext`.

This module imports no Kafka client; it may be used from notebooks and tests.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from learners.exceptions import InvalidInputError, InvalidParameterError, PrefstreamError

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

        Examples whose items lack one of ``feature_names`` are left out.
        """
        rows_l, rows_r = [], []
        for ex in self.background:
            try:
                row_l = [float(ex.left[f]) for f in feature_names]
                row_r = [float(ex.right[f]) for f in feature_names]
            except (KeyError, TypeError, ValueError):
                continue
            rows_l.append(row_l)
            rows_r.append(row_r)
        d = len(feature_names)
        return (np.asarray(rows_l, dtype=np.float64).reshape(-1, d), np.asarray(rows_r, dtype=np.float64).reshape(-1, d))


@dataclass(frozen=True)
class ModelSpec:
    """A registered model: name, factory, loader and optional merger."""

    name: str
    factory: Callable[[Any, dict], Any]
    loader: Callable[[dict], Any]
    merger: Callable[[list], Any] | None = None


_LOCK = threading.RLock()
_MODELS: dict[str, ModelSpec] = {}
_EXPLAINERS: dict[str, dict[str, Callable]] = {}
_BUILTINS_DONE = False


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
    """Names of all registered models, sorted."""
    _register_builtins()
    with _LOCK:
        return sorted(_MODELS)


def get_model(name: str) -> ModelSpec:
    """The :class:`ModelSpec` registered under ``name``.

    Raises
    ------
    InvalidParameterError
        If no model of that name is registered (the message lists the known ones).
    """
    _register_builtins()
    with _LOCK:
        try:
            return _MODELS[name]
        except KeyError:
            raise InvalidParameterError(f"Unknown model {name!r}; registered models: {sorted(_MODELS)}. "
                                        "Register it with stream.registry.register_model.") from None


def explainers_for(model_name: str) -> dict[str, Callable]:
    """``{method: fn}`` of the explainers registered for ``model_name`` (a copy; may be empty)."""
    _register_builtins()
    with _LOCK:
        return dict(_EXPLAINERS.get(model_name, {}))


def get_explainer(model_name: str, method: str) -> Callable:
    """The explainer ``method`` of ``model_name``.

    Raises
    ------
    InvalidParameterError
        If that pair is not registered (the message lists the methods that are).
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
        return max(parts, key=lambda p: p[1])[0]


# ----------------------------------------------------------------------------- builtins
def _register_builtins() -> None:
    """Register the built-in models and explainers (idempotent; imports lazily)."""
    global _BUILTINS_DONE
    if _BUILTINS_DONE:
        return
    with _LOCK:
        if _BUILTINS_DONE:
            return
        _BUILTINS_DONE = True
        _register_linear()
        from stream.models import register_all  # capacity, gpm, cgpm and their explainers

        register_all()


# -- linear-bt / linear-shapley (the first model of the spine) --------------------------------
def _linear_factory(settings, params: dict):
    from learners.linear import LinearBT

    kw = dict(params)
    if getattr(settings, "feature_names", None) and "feature_names" not in kw:
        kw["feature_names"] = list(settings.feature_names)
    return LinearBT(**kw)


def _linear_loader(state: dict):
    from learners.linear import LinearBT

    return LinearBT.from_state(state)


def _explain_linear_shapley(learner, examples: list, ctx: ExplainContext):
    """Exact Shapley values of w·(x_l − x_r) (:func:`explainers.linear.explain_linear`).

    The background mean difference μ = E[b_l − b_r] comes from ``ctx.background`` when it
    holds examples, else μ = 0 (left and right items i.i.d., Hu et al. 2022, Sec. 3.1).
    """
    from explainers.linear import explain_linear

    names = list(learner.feature_names)
    if not names:
        raise InvalidInputError("The linear-bt model has not learned any example yet; nothing to explain.")
    try:
        XL = np.array([[float(ex.left[f]) for f in names] for ex in examples], dtype=np.float64)
        XR = np.array([[float(ex.right[f]) for f in names] for ex in examples], dtype=np.float64)
    except KeyError as exc:
        raise InvalidInputError(f"The explained items lack feature {exc.args[0]!r} of the linear-bt model "
                                f"(features {names}).") from None
    BL, BR = ctx.background_arrays(names)
    mu = (BL - BR) if len(BL) else None
    return explain_linear(learner, XL, XR, background_mean_diff=mu, feature_names=names,
                          model_version=ctx.model_version, instance_ids=[ex.event_id for ex in examples])


def _register_linear() -> None:
    if "linear-bt" not in _MODELS:
        register_model("linear-bt", _linear_factory, _linear_loader)
    if "linear-shapley" not in _EXPLAINERS.get("linear-bt", {}):
        register_explainer("linear-bt", "linear-shapley", _explain_linear_shapley)
