"""The explainer worker: keep the latest model snapshots, explain sampled events and requests.

* **Models.** A :class:`~stream.workers.follower.TopicFollower` reads the compacted model topic from the
  beginning (outside any consumer group, so it sees every key). Per model it keeps the latest
  snapshot of every source (``"<model>@<topic>:<p>"``) in a
  :class:`~stream.workers.live_models.LiveModels` (the store ``prefstream serve`` uses too),
  rebuilt with the registry loader and merged with :func:`stream.registry.merge_learners`
  (``__iadd__`` or count-weighted parameter averaging) into one version swapped in whole. The
  merged model's version is the sum of the source versions, so it grows whenever any source
  publishes.
* **The loop.** :class:`ExplainerLoop` runs on the shared consumer loop
  (:class:`stream.workers.loop.ConsumerLoop`) in its own group ``<consumer_group>-explainer``:
  it reads preference events, click sessions and explain requests in micro-batches. Corrupt
  input is counted and skipped by offset there; two explainer processes in the group split the
  partitions, and a killed one's partitions move to the other.
* **What is explained.** A fraction ``explain_sample_rate`` of the preference events and of the
  click sessions, chosen by a hash of the event id (the same events whichever process reads
  them; sessions go to the explainers marked ``session_only``, pairs to the others), and every
  message of the explain-request topic: ``{"request_id", "model", "method" (optional: all
  methods), "left", "right", "context" (optional), "params" (optional)}`` where ``left``/
  ``right`` are item references (``{"features": {...}}`` or ``{"id": ...}``) or bare feature dicts.
* **Keeping up** (:mod:`stream.workers.explain_queues`): every ``(model, method)`` has its own
  bounded queue; the explainer's time is shared fairly between them, each call gets a *batch* of
  events (``fn(learner, examples, ctx)``, at most ``fn.max_batch`` or ``explain_max_batch``,
  sized to take about ``fn.budget_s`` or ``explain_budget_s`` seconds), and a method that falls
  behind sheds its own oldest events (``backlog``) or those queued past ``explain_max_lag_s``
  (``stale``). Requests go first and are never shed: a full request queue pauses the request
  topic instead. Explainers run in an executor thread so the consumer keeps heart-beating.
* **Exactly one explanation per event and method.** A partition's offset is committed only up to
  the first event with work pending (delivered or shed, :class:`OffsetTracker`); on each
  assignment the worker reads back the last ``explain_dedupe_seconds`` of the explanation topic
  and never explains an event again for a method that already has its record (sampled events:
  key = event id, model, method; requests: also the model version).

Records are :meth:`Explanation.to_records` dicts (``explanation.v1.json``), key = event or
request id, carrying the model name and merged version.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from learners.exceptions import InvalidInputError, NotFittedError
from stream import registry
from stream.contract import (
    DeadLetter,
    ItemCatalog,
    explanation_record_ok,
    click_session_from_doc,
    parse_explain_request,
    parse_item,
    parse_preference,
)
from stream.contract.batch import decode
from stream.metrics import Metrics, build_metrics
from stream.plugins.budgets import budgets_from_settings
from stream.monitoring.monitor import Monitor
from stream.workers._snapshot import event_hash
from stream.workers.live_models import LiveModels

__all__ = ["ExplainJob", "ExplainerCore"]

log = logging.getLogger(__name__)


@dataclass
class ExplainJob:
    """One pending explanation: examples, which model/method (None = all), why."""

    examples: list
    models: list | None = None
    methods: list | None = None
    origin: str = "sample"
    params: dict | None = None
    session: bool = False
    #: ``(model, method, reason, detail)`` of what a request asked for and cannot get
    #: (:data:`stream.contract.REQUEST_REFUSALS`); the explainer loop dead-letters the request with them
    refused: list = field(default_factory=list)


class ExplainerCore:
    """State of the explainer worker, independent of Faust.

    Parameters
    ----------
    settings : Settings
        Uses ``explain_sample_rate``, ``explain_max_queue``, ``seed``, ``max_message_bytes``.
    metrics : Metrics, optional
    background_size : int, default 256
        Size of the uniform reservoir of recent preference examples handed to explainers.
    """

    def __init__(self, settings, metrics: Metrics | None = None, background_size: int = 256) -> None:
        self.settings = settings
        self.metrics = metrics or build_metrics()
        self.catalog = ItemCatalog()
        self.rng = np.random.default_rng(settings.seed)
        self.background: list = []
        self.background_size = int(background_size)
        self._seen = 0
        #: every model's latest snapshots, merged (shared with prefstream serve)
        self.models = LiveModels(metrics=self.metrics)
        self.queue: asyncio.Queue | None = None
        self.budgets = budgets_from_settings(settings)  # explain_exact_players, _max_coalitions, _reference_size, _target_se
        #: global importances and explanation-drift alarms (stream.monitoring.monitor)
        self.monitor = Monitor.from_settings(settings, self.metrics)

    # ------------------------------------------------------------------ models
    # The model store is stream.workers.live_models.LiveModels, shared with prefstream serve: the
    # latest snapshot per source, merged with the registry's merge rule, swapped in whole.
    def on_snapshot(self, key, value) -> None:
        """Apply one model-topic record (a tombstone deletes that source's part)."""
        self.models.on_snapshot(key, value)

    @property
    def parts(self) -> dict[str, dict[str, tuple[Any, int, int]]]:
        """``{model: {source: (learner, training_count, version)}}`` (:attr:`LiveModels.parts`)."""
        return self.models.parts

    def model_version(self, name: str) -> int:
        """Sum of the source versions of ``name`` (0 if none)."""
        return self.models.model_version(name)

    def training_count(self, name: str) -> int:
        """Sum of the source training counts of ``name``."""
        return self.models.training_count(name)

    def model(self, name: str) -> tuple[Any, int] | None:
        """``(merged learner, version)`` of ``name``, or None without any snapshot."""
        return self.models.model(name)

    # ------------------------------------------------------------------ inputs
    def observe(self, ex) -> None:
        """Add a preference example to the background reservoir (Vitter's algorithm R)."""
        self._seen += 1
        if len(self.background) < self.background_size:
            self.background.append(ex)
        else:
            j = int(self.rng.integers(0, self._seen))
            if j < self.background_size:
                self.background[j] = ex

    def sample_rate(self) -> float:
        """Configured rate scaled down by the queue's fill fraction."""
        rate = self.settings.explain_sample_rate
        if self.queue is not None and self.queue.maxsize > 0:
            rate *= max(0.0, 1.0 - self.queue.qsize() / self.queue.maxsize)
        return rate

    def sampled(self, event_id: str, rate: float | None = None) -> bool:
        """Whether ``event_id`` is in the sample: its 64-bit BLAKE2b hash below ``rate × 2⁶⁴``.

        The decision depends on the id only, so every explainer process (and a restarted one)
        samples the same events; ``rate`` defaults to :meth:`sample_rate`.
        """
        rate = self.sample_rate() if rate is None else rate
        return event_hash(event_id) < rate * 2.0**64

    def parse_event(self, value):
        """A preference event's example (fed to the reservoir), or None if invalid (the learner dead-letters it)."""
        try:
            ex = parse_preference(value, self.catalog, max_bytes=self.settings.max_message_bytes)
        except DeadLetter:
            return None  # the learner dead-letters it
        self.observe(ex)
        return ex

    def intake_preference(self, value, rate: float):
        """``(event_id, example or None)`` of a preference event, or None if it is invalid: the
        explainer's intake, which builds the example only where it is used.

        The value is decoded once (:func:`stream.contract.batch.decode`); an event whose id is not in
        the sample (``rate``) is built into an example (:func:`~stream.contract.preference_from_doc`:
        its features resolved and validated) only if the background reservoir takes it (Vitter's
        algorithm R, drawn before building it) — the other 99 % of a 1 % sample cost a JSON decode and
        a hash, not a parse (issue 29: parsing every event of 10,000/s in the event-loop thread held
        the GIL for the explainer calls and made the intake fall behind the stream). A sampled event
        is fully validated; an unsampled one with a well-formed id counts as eligible even if the
        rest of it is invalid (the learner dead-letters it).
        """
        from stream.contract import preference_from_doc

        try:
            doc = decode(value, self.settings.max_message_bytes)
        except DeadLetter:
            return None
        eid = doc.get("event_id") if type(doc) is dict else None
        if type(eid) is str and eid and len(eid) <= 512 and not self.sampled(eid, rate):
            self._seen += 1
            if len(self.background) < self.background_size:
                slot = len(self.background)
            else:
                slot = int(self.rng.integers(0, self._seen))
                if slot >= self.background_size:
                    return eid, None
            try:
                ex = preference_from_doc(doc, self.catalog)
            except DeadLetter:
                return None
            if slot == len(self.background):
                self.background.append(ex)
            else:
                self.background[slot] = ex
            return eid, None
        try:
            ex = preference_from_doc(doc, self.catalog)
        except DeadLetter:
            return None  # the learner dead-letters it
        self.observe(ex)
        return ex.event_id, ex

    def parse_session(self, value):
        """``(pairs, {"session": ...})`` of a click session (see :meth:`on_click`), or None."""
        try:  # decoded once: the pairs and the session's shown/clicked lists come from one document
            doc = decode(value, self.settings.max_message_bytes)
            pairs = click_session_from_doc(doc, self.catalog)
        except DeadLetter:
            return None
        if not pairs:
            return None
        feats = {}
        for ex in pairs:
            feats[ex.left_id] = ex.left
            feats[ex.right_id] = ex.right
        shown = [{"id": it["id"], "features": feats[it["id"]]} for it in doc["shown"] if it["id"] in feats]
        session = {"session_id": doc["session_id"], "shown": shown, "clicked": list(doc["clicked"]),
                   "context": pairs[0].context}
        return pairs, {"session": session}

    def methods_for(self, session: bool) -> list[tuple[str, str, Any]]:
        """``(model, method, fn)`` of every model with a snapshot whose explainer fits (sessions or pairs)."""
        out = []
        for name in sorted(self.parts):
            if not self.parts[name]:
                continue
            for method, fn in sorted(registry.explainers_for(name).items()):
                if bool(getattr(fn, "session_only", False)) == session:
                    out.append((name, method, fn))
        return out

    def on_preference(self, value) -> ExplainJob | None:
        """Parse a preference event, feed the reservoir, and maybe sample it for explanation."""
        ex = self.parse_event(value)
        if ex is None or not self.sampled(ex.event_id):
            return None
        return ExplainJob([ex], origin="sample")

    def offer(self, ex) -> ExplainJob | None:
        """An example decoded elsewhere (``prefstream run`` decodes once for learner and explainer):
        feed the reservoir and sample it by its id, as :meth:`on_preference` does."""
        self.observe(ex)
        if not self.sampled(ex.event_id):
            return None
        return ExplainJob([ex], origin="sample")

    def on_click(self, value) -> ExplainJob | None:
        """Parse a click session and maybe sample it for the session-only explainers.

        The job's examples are the session's clicked ≻ shown pairs and ``params["session"]`` is
        ``{"session_id", "shown": [{"id", "features"}], "clicked": [ids], "context"}`` with
        features resolved from the item catalog.
        """
        got = self.parse_session(value)
        if got is None or not self.sampled(got[1]["session"]["session_id"]):
            return None
        return ExplainJob(got[0], origin="sample", params=got[1], session=True)

    def on_request(self, value, invalid: list | None = None) -> ExplainJob | None:
        """Parse an explain request (:func:`stream.contract.parse_explain_request`, one decode);
        counts ``skipped{reason="invalid_request"}`` if it is invalid and appends its
        ``(reason, detail)`` to ``invalid`` (the loop dead-letters it)."""
        try:
            req = parse_explain_request(value, self.catalog, max_bytes=self.settings.max_message_bytes)
        except DeadLetter as exc:
            self.metrics.explanations_skipped.labels(reason="invalid_request").inc()
            log.warning("invalid explain request (%s): %s", exc.reason, exc.detail)
            if invalid is not None:
                invalid.append((exc.reason, exc.detail))
            return None
        return ExplainJob([req.example], models=[req.model] if req.model else None,
                          methods=[req.method] if req.method else None, origin="request", params=req.params or {})

    def on_item(self, key, value, partition, offset) -> None:  # noqa: ARG002
        try:
            self.catalog.upsert(parse_item(value, max_bytes=self.settings.max_message_bytes, key=key))
        except DeadLetter:
            pass  # counted and dead-lettered by the learner worker

    # ------------------------------------------------------------------ explaining
    def plan(self, job: ExplainJob) -> list[tuple[str, str, Any, int, Any]]:
        """``(model, method, learner, version, fn, seed)`` for every explanation of ``job`` now possible."""
        out = []
        names = job.models if job.models is not None else sorted(self.parts)
        if not names:
            self.metrics.explanations_skipped.labels(reason="no_model").inc()
            self.refuse(job, None, None, "unknown_model", "no model snapshot is loaded in this explainer yet (the "
                        "learner workers publish one per model of their `models` setting)")
            return out
        for name in names:
            hit = self.model(name)
            if hit is None:
                self.metrics.explanations_skipped.labels(reason="no_model").inc()
                self.refuse(job, name, None, "unknown_model",
                            f"no snapshot of model {name!r} is loaded in this explainer (loaded: "
                            f"{', '.join(sorted(self.parts)) or 'none yet'}); a learner worker running {name!r} "
                            "publishes it")
                continue
            # session-only explainers (``fn.session_only``) run on click sessions, the others on pairs
            fns = {k: f for k, f in registry.explainers_for(name).items()
                   if bool(getattr(f, "session_only", False)) == job.session}
            methods = job.methods if job.methods is not None else sorted(fns)
            for method in methods:
                fn = fns.get(method)
                if fn is None:
                    self.metrics.explanations_skipped.labels(reason="unknown_method").inc()
                    self.refuse(job, name, method, "unknown_method",
                                f"model {name!r} has no {'click-session' if job.session else 'pair'} explanation "
                                f"method {method!r} (it has: {', '.join(sorted(fns)) or 'none'})")
                    continue
                # the seed is drawn here, in the event-loop thread: numpy Generators are not thread-safe
                out.append((name, method, hit[0], hit[1], fn, int(self.rng.integers(2**63))))
        return out

    @staticmethod
    def refuse(job: ExplainJob, model: str | None, method: str | None, reason: str, detail: str) -> None:
        """Note on a *request* what it cannot get (``job.refused``); sampled events are only counted."""
        if job.origin == "request":
            job.refused.append((model, method, reason, detail))

    def explain_one(self, job: ExplainJob, entry, budgets: dict | None = None) -> tuple[list[dict], int]:
        """Run one planned explainer ``(model, method, learner, version, fn, seed)`` on ``job``.

        Returns ``(records, unfinished)``: the valid records (invalid ones are counted and logged)
        and how many of the job's last examples the call left unexplained because it ran past
        ``fn.budget_s`` (``extra["unfinished"]``, :func:`stream.plugins.budgets.capped`; the caller
        requeues them). Raises what the explainer raises. Thread-safe: snapshots are never mutated.
        """
        name, method, learner, version, fn, seed = entry
        ctx = registry.ExplainContext(model_name=name, model_version=version, background=list(self.background),
                                      catalog=self.catalog, rng=np.random.default_rng(seed),
                                      params=dict(job.params or {}), budgets=budgets or self.budgets)
        t0 = time.perf_counter()
        e = fn(learner, job.examples, ctx)
        dt = time.perf_counter() - t0
        e.model_name = name
        e.model_version = int(version)
        self.metrics.explanation_latency.labels(method=e.method).observe(dt)
        records = []
        ids = [x.event_id for x in job.examples]
        unfinished = int(e.extra.pop("unfinished", 0) or 0)  # a capped call explained a prefix only
        for rec in e.to_records(instance_ids=ids[:len(ids) - unfinished]):
            try:
                explanation_record_ok(rec)
            except InvalidInputError as exc:
                self.metrics.explanations_skipped.labels(reason="invalid_record").inc()
                log.warning("dropping invalid %s record: %s", method, exc)
                continue
            rec.setdefault("extra", {})
            if isinstance(rec["extra"], dict):
                rec["extra"].setdefault("origin", job.origin)
            records.append(rec)  # prefstream_explanations_total counts on delivery (stream.outputs.publish)
        return records, unfinished

    def explain(self, job: ExplainJob, plan) -> list[dict]:
        """Run the planned explainers (thread-safe: snapshots are never mutated); return records.

        A method that raises is skipped (``error``, logged with the exception class) and the
        others still run; ``NotFittedError`` counts as ``no_model``.
        """
        records = []
        for entry in plan:
            try:
                todo = job
                while todo.examples:  # a capped call returns a prefix: explain the rest in the next call
                    recs, unfinished = self.explain_one(todo, entry, self.budgets)
                    records.extend(recs)
                    if not unfinished:
                        break
                    todo = replace(todo, examples=todo.examples[len(todo.examples) - unfinished:])
            except NotFittedError as exc:  # e.g. a GPM before its first refit: no model to explain yet, not a failure
                self.metrics.explanations_skipped.labels(reason="no_model").inc()
                self.refuse(job, entry[0], entry[1], "not_fitted", f"model {entry[0]!r} v{entry[3]} cannot explain "
                            f"yet: {exc}")
            except Exception as exc:  # noqa: BLE001 - one failing method must not stop the others
                self.metrics.explanations_skipped.labels(reason="error").inc()
                log.warning("%s/%s failed on %s: %s: %s", entry[0], entry[1], [x.event_id for x in job.examples][:3],
                            type(exc).__name__, exc)
                self.refuse(job, entry[0], entry[1], "explain_failed", f"{entry[1]} on model {entry[0]!r} "
                            f"v{entry[3]} failed: {type(exc).__name__}: {exc}")
        self.monitor.observe(records)
        return records
