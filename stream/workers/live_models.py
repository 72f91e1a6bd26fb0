"""The live models: the latest snapshot of every source, merged, swapped in as one immutable version.

The explainer worker and ``prefstream serve`` both follow the compacted model topic (outside any
consumer group, with :class:`stream.workers.follower.TopicFollower`) and need the same thing from it: per
model, the latest snapshot of every source (``"<model>@<topic>:<p>"``, written by the learner
workers), rebuilt with the registry loader and merged with :func:`stream.registry.merge_learners`.
:class:`LiveModels` is that store, written once.

* **Atomic swap.** Every accepted snapshot builds a new :class:`ModelVersion` (merged learner,
  merged version, source versions, examples seen, newest snapshot time) and replaces the old one
  by one reference assignment. A reader that took a version keeps a whole, consistent model for as
  long as it holds it; it never sees a half-loaded or half-merged one. Versions are immutable:
  nothing mutates a learner after it was published here.
* **Failures keep the previous model.** A snapshot that fails to decode, load or merge is logged
  (once per key and reason) and counted (``prefstream_model_load_failures_total{model}``); the
  previous version keeps serving.
* **Versions never go backwards within a source.** A snapshot whose version is not above the one
  loaded for its source is ignored (a follower that reconnects re-reads the topic from the
  beginning; the older, not yet compacted records must not roll the model back). A tombstone
  deletes the source; that source may then start again from any version.
* The merged version is the sum of the source versions (it grows whenever any source publishes),
  as the explainer's records have always carried.
* **Warm explainers.** After a model's first load in this process, each of its explainers that carries a
  ``warm`` function runs it once (exact Pref-SHAP loads its compiled loop: about 0.3 s that the first
  explanation, often one with a serving deadline, would otherwise pay).

Examples
--------
>>> from learners.linear import LinearBT
>>> from stream.contract import encode_snapshot
>>> from stream.models import register_all
>>> register_all()
>>> lm = LiveModels()
>>> m = LinearBT(["x"]); m.learn_one({"x": 1.0}, {"x": 0.0}, 1)
>>> lm.on_snapshot(b"linear-bt@t:0", encode_snapshot("linear-bt", 3, 1, m.state_dict()))
True
>>> lm.on_snapshot(b"linear-bt@t:0", encode_snapshot("linear-bt", 2, 1, m.state_dict()))   # older: ignored
False
>>> v = lm.get("linear-bt"); v.version, v.source_versions, v.training_count
(3, {'t:0': 3}, 1)
>>> lm.on_snapshot(b"linear-bt@t:1", b"not a snapshot")                                   # kept serving v3
False
>>> lm.model_version("linear-bt"), lm.load_failures["linear-bt"]
(3, 1)
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from learners.exceptions import PrefstreamError
from stream import registry
from stream.contract import decode_snapshot
from stream.workers._snapshot import parse_snapshot_key, split_stream_meta

__all__ = ["LiveModels", "ModelVersion", "SourcePart"]

log = logging.getLogger(__name__)

#: the explainers' ``warm`` functions already run in this process
_WARMED: set = set()


def warm_explainers(name: str) -> None:
    """Run, once per process, the ``warm`` function of each explainer of model ``name`` that has one."""
    for fn in registry.explainers_for(name).values():
        warm = getattr(fn, "warm", None)
        if warm is None or warm in _WARMED:
            continue
        _WARMED.add(warm)
        try:
            warm()
        except Exception as exc:  # noqa: BLE001 - warming is best effort: the first call does the work instead
            log.debug("warming an explainer of %s failed: %s", name, exc)


@dataclass(frozen=True)
class SourcePart:
    """One source's latest snapshot: the rebuilt learner, its training count, version and time."""

    learner: Any
    training_count: int
    version: int
    created_at: float


@dataclass(frozen=True)
class ModelVersion:
    """One whole, immutable version of a live model (what a request sees from start to end).

    Attributes
    ----------
    name : str
        The model name (``model_name`` of the snapshots).
    learner : PreferenceLearner
        The merged learner (:func:`stream.registry.merge_learners` over the sources).
    version : int
        Merged version: the sum of the source versions.
    sources : Mapping of str to SourcePart
        ``"<topic>:<partition>"`` (``""`` for a plain model key) → that source's part.
    training_count : int
        Examples seen by the served learner: the sum of the sources' training counts, or what the
        merger says its merged learner holds (``examples_served``, e.g. when a GPM merge serves one of
        several fits: :mod:`stream.plugins.gpm_merge`), so that ``/v1/models`` reports what is served.
    created_at : float
        Unix seconds of the newest source snapshot (``created_at`` of its envelope).
    loaded_at : float
        Unix seconds when this version was swapped in.
    cache : dict
        Per-version derived data (e.g. the server's scorer), filled lazily by its users; it lives
        and dies with this version.
    """

    name: str
    learner: Any
    version: int
    sources: Mapping[str, SourcePart]
    training_count: int
    created_at: float
    loaded_at: float
    cache: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def source_versions(self) -> dict[str, int]:
        """``{source: version}``."""
        return {s: p.version for s, p in self.sources.items()}

    def age_seconds(self, now: float | None = None) -> float:
        """Seconds since the newest source snapshot was written."""
        return max(0.0, (time.time() if now is None else now) - self.created_at)


def _served_count(learner, sources: Mapping[str, SourcePart]) -> int:
    """Examples the merged learner holds: its ``examples_served`` when the merger set it, else every source's."""
    served = getattr(learner, "examples_served", None)
    return int(served) if served is not None else sum(p.training_count for p in sources.values())


class LiveModels:
    """Latest snapshot per source of every model on the model topic, merged and swapped atomically.

    Parameters
    ----------
    metrics : Metrics, optional
        Updates ``model_version{model}``, ``model_swaps_total{model}``,
        ``model_load_failures_total{model}`` and (:meth:`update_age_gauges`)
        ``model_snapshot_age_seconds{model}``.
    on_swap : callable ``(ModelVersion) -> None``, optional
        Called after each swap, in the writer's thread (e.g. to warm caches of the new version);
        its exceptions are logged and ignored.

    Notes
    -----
    Feed it with ``TopicFollower(settings, settings.topic_models, lambda k, v, p, o: live.on_snapshot(k, v))``.
    :meth:`on_snapshot` runs in the follower's event loop; readers in other threads (explainer
    executors) read whole versions through :meth:`get` without locks: a swap is one reference
    assignment of a fresh mapping.
    """

    def __init__(self, metrics=None, on_swap=None) -> None:
        self.metrics = metrics
        self.on_swap = on_swap
        self._versions: Mapping[str, ModelVersion] = MappingProxyType({})
        self._write = threading.Lock()   # writers only (one follower normally); readers never wait
        self._ignored: set = set()
        #: snapshots that failed to load, per model name (or model-topic key prefix)
        self.load_failures: dict[str, int] = {}
        #: the last load error per model, for /v1/models and /readyz
        self.last_error: dict[str, str] = {}
        #: accepted snapshots (swaps) per model
        self.swaps: dict[str, int] = {}

    # ------------------------------------------------------------------ writing
    def on_snapshot(self, key, value) -> bool:
        """Apply one model-topic record; True when a new version was swapped in.

        A tombstone (``value`` None) deletes that source. A snapshot that cannot be decoded,
        loaded or merged is counted and logged, and changes nothing.
        """
        model_key, source = parse_snapshot_key(key)
        source = source or ""
        if value is None:
            return self._delete(model_key, source)
        name = model_key
        try:
            snap = decode_snapshot(value)
            name = snap["model_name"]
            current = self._versions.get(name)
            old = current.sources.get(source) if current is not None else None
            if old is not None and int(snap["version"]) <= old.version:
                return False   # a re-read older record: versions never go backwards within a source
            spec = registry.get_model(name)
            clean, _info = split_stream_meta(snap["state"])
            learner = spec.loader(clean)
            part = SourcePart(learner, int(snap["training_count"]), int(snap["version"]), float(snap["created_at"]))
            with self._write:
                current = self._versions.get(name)
                sources = dict(current.sources) if current is not None else {}
                sources[source] = part
                self._swap(name, sources)
        except Exception as exc:  # noqa: BLE001 - any failure keeps the previous version serving
            self._failed(name, model_key, exc)
            return False
        warm_explainers(name)
        return True

    def _delete(self, name: str, source: str) -> bool:
        with self._write:
            current = self._versions.get(name)
            if current is None or source not in current.sources:
                return False
            sources = {s: p for s, p in current.sources.items() if s != source}
            if not sources:
                self._versions = MappingProxyType({k: v for k, v in self._versions.items() if k != name})
                return True
            try:
                self._swap(name, sources)
            except Exception as exc:  # noqa: BLE001
                self._failed(name, name, exc)
                return False
        return True

    def _swap(self, name: str, sources: dict[str, SourcePart]) -> None:
        learner = registry.merge_learners(name, [(p.learner, p.training_count) for p in sources.values()])
        mv = ModelVersion(name=name, learner=learner, version=sum(p.version for p in sources.values()),
                          sources=MappingProxyType(dict(sources)),
                          training_count=_served_count(learner, sources),
                          created_at=max(p.created_at for p in sources.values()), loaded_at=time.time())
        self._versions = MappingProxyType({**self._versions, name: mv})   # the swap: one assignment
        self.swaps[name] = self.swaps.get(name, 0) + 1
        if self.metrics is not None:
            self.metrics.model_version.labels(model=name).set(mv.version)
            self.metrics.model_swaps.labels(model=name).inc()
            self.metrics.model_load_failures.labels(model=name).inc(0)   # the child exists from the first version on
            self.metrics.model_snapshot_age.labels(model=name).set(mv.age_seconds())
        if self.on_swap is not None:
            try:
                self.on_swap(mv)
            except Exception:  # noqa: BLE001 - a warm-up must never undo a swap
                log.exception("the on_swap hook failed for %s v%d", name, mv.version)

    def _failed(self, name: str, model_key: str, exc: BaseException) -> None:
        self.load_failures[name] = self.load_failures.get(name, 0) + 1
        self.last_error[name] = f"{type(exc).__name__}: {exc}"
        if self.metrics is not None:
            self.metrics.model_load_failures.labels(model=name).inc()
        # once per key and reason: an unregistered model publishes a snapshot every few seconds
        tag = (model_key, type(exc).__name__)
        if tag not in self._ignored:
            self._ignored.add(tag)
            if isinstance(exc, PrefstreamError):
                log.warning("ignoring a model-topic record of %r (the previous version keeps serving): %s", model_key, exc)
            else:
                log.exception("loading a model-topic record of %r failed (the previous version keeps serving)", model_key)

    # ------------------------------------------------------------------ reading
    def get(self, name: str) -> ModelVersion | None:
        """The current version of ``name`` (one whole, immutable version), or None."""
        return self._versions.get(name)

    def versions(self) -> Mapping[str, ModelVersion]:
        """Every model's current version, read at one instant (a read-only mapping)."""
        return self._versions

    def names(self) -> list[str]:
        """Names of the models with at least one loaded snapshot, sorted."""
        return sorted(self._versions)

    def __contains__(self, name: object) -> bool:
        return name in self._versions

    # the explainer's API (ExplainerCore used these names before the store moved here)
    @property
    def parts(self) -> dict[str, dict[str, tuple[Any, int, int]]]:
        """``{model: {source: (learner, training_count, version)}}`` of the current versions."""
        return {n: {s: (p.learner, p.training_count, p.version) for s, p in mv.sources.items()}
                for n, mv in self._versions.items()}

    def model(self, name: str) -> tuple[Any, int] | None:
        """``(merged learner, version)`` of ``name``, or None without any snapshot."""
        mv = self._versions.get(name)
        return None if mv is None else (mv.learner, mv.version)

    def model_version(self, name: str) -> int:
        """Sum of the source versions of ``name`` (0 if none)."""
        mv = self._versions.get(name)
        return 0 if mv is None else mv.version

    def training_count(self, name: str) -> int:
        """Sum of the source training counts of ``name`` (0 if none)."""
        mv = self._versions.get(name)
        return 0 if mv is None else mv.training_count

    def update_age_gauges(self, now: float | None = None) -> None:
        """Set ``model_snapshot_age_seconds{model}`` (call before a scrape)."""
        if self.metrics is None:
            return
        now = time.time() if now is None else now
        for name, mv in self._versions.items():
            self.metrics.model_snapshot_age.labels(model=name).set(mv.age_seconds(now))
