"""The explainer worker: keep the latest model snapshots, explain sampled events and requests.

* **Models.** A :class:`~stream.app.TopicFollower` reads the compacted model topic from the
  beginning (outside any consumer group, so it sees every key). Per model it keeps the latest
  snapshot of every source (``"<model>@<topic>:<p>"``), rebuilt with the registry loader, and
  merges them on demand with :func:`stream.registry.merge_learners` (``__iadd__`` or
  count-weighted parameter averaging). The merged model's version is the sum of the source
  versions, so it grows whenever any source publishes.
* **What is explained.** A fraction ``explain_sample_rate`` of the preference events and of the
  click sessions (its own consumer group ``<consumer_group>-explainer``; sessions go to the
  explainers marked ``session_only``, pairs to the others) and every message of the explain-request
  topic: ``{"request_id", "model", "method" (optional: all methods), "left", "right",
  "context" (optional), "params" (optional)}`` where ``left``/``right`` are item references
  (``{"features": {...}}`` or ``{"id": ...}``) or bare feature dicts.
* **Backlog.** Jobs wait in a bounded queue of ``explain_max_queue`` entries; the effective
  sampling rate falls linearly with the queue's fill, and a sampled event that finds the queue
  full is dropped and counted (``prefstream_explanations_skipped_total{reason="backlog"}``).
  Requests wait for room instead (back-pressure on the request topic only). Explainers run in
  an executor thread so the consumer keeps heart-beating. The learner is another process and
  never waits for explanations.

Records are :meth:`Explanation.to_records` dicts (``explanation.v1.json``), key = event or
request id, carrying the model name and merged version.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from learners.exceptions import InvalidInputError, NotFittedError, PrefstreamError
from stream import registry
from stream.contract import (
    DeadLetter,
    ItemCatalog,
    decode_snapshot,
    explanation_record_ok,
    click_session_from_doc,
    parse_explain_request,
    parse_item,
    parse_preference,
)
from stream.ingest import decode
from stream.metrics import Metrics, build_metrics
from stream.monitor import Monitor
from stream.workers._snapshot import parse_snapshot_key, split_stream_meta

__all__ = ["ExplainJob", "ExplainerCore", "run_explainer"]

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
        self.parts: dict[str, dict[str, tuple[Any, int, int]]] = {}
        self._merged: dict[str, tuple[Any, int]] = {}
        self.queue: asyncio.Queue | None = None
        self._ignored: set = set()
        self.budgets = {"exact_players": int(getattr(settings, "explain_exact_players", 10)),
                        "max_coalitions": int(getattr(settings, "explain_max_coalitions", 2048)),
                        "reference_size": int(getattr(settings, "explain_reference_size", 128))}
        #: global importances and explanation-drift alarms (stream.monitor)
        self.monitor = Monitor.from_settings(settings, self.metrics)

    # ------------------------------------------------------------------ models
    def on_snapshot(self, key, value) -> None:
        """Apply one model-topic record (a tombstone deletes that source's part)."""
        model_key, source = parse_snapshot_key(key)
        if value is None:
            if model_key in self.parts:
                self.parts[model_key].pop(source or "", None)
                self._merged.pop(model_key, None)
            return
        try:
            snap = decode_snapshot(value)
            name = snap["model_name"]
            spec = registry.get_model(name)
            clean, _info = split_stream_meta(snap["state"])
            learner = spec.loader(clean)
        except PrefstreamError as exc:
            # once per key and reason: an unregistered model publishes a snapshot every few seconds
            if (model_key, type(exc).__name__) not in self._ignored:
                self._ignored.add((model_key, type(exc).__name__))
                log.warning("ignoring model-topic records of %r: %s", model_key, exc)
            return
        self.parts.setdefault(name, {})[source or ""] = (learner, int(snap["training_count"]), int(snap["version"]))
        self._merged.pop(name, None)
        self.metrics.model_version.labels(model=name).set(self.model_version(name))

    def model_version(self, name: str) -> int:
        """Sum of the source versions of ``name`` (0 if none)."""
        return sum(v for _, _, v in self.parts.get(name, {}).values())

    def training_count(self, name: str) -> int:
        """Sum of the source training counts of ``name``."""
        return sum(n for _, n, _ in self.parts.get(name, {}).values())

    def model(self, name: str) -> tuple[Any, int] | None:
        """``(merged learner, version)`` of ``name``, or None without any snapshot."""
        hit = self._merged.get(name)
        if hit is not None:
            return hit
        parts = self.parts.get(name)
        if not parts:
            return None
        learner = registry.merge_learners(name, [(lr, n) for lr, n, _ in parts.values()])
        hit = self._merged[name] = (learner, self.model_version(name))
        return hit

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

    def on_preference(self, value) -> ExplainJob | None:
        """Parse a preference event, feed the reservoir, and maybe sample it for explanation."""
        try:
            ex = parse_preference(value, self.catalog, max_bytes=self.settings.max_message_bytes)
        except DeadLetter:
            return None  # the learner dead-letters it
        return self.offer(ex)

    def offer(self, ex) -> ExplainJob | None:
        """Feed a decoded preference example to the reservoir and maybe sample it for explanation."""
        self.observe(ex)
        if self.rng.random() >= self.sample_rate():
            return None
        return ExplainJob([ex], origin="sample")

    def on_click(self, value) -> ExplainJob | None:
        """Parse a click session and maybe sample it for the session-only explainers.

        The job's examples are the session's clicked ≻ shown pairs and ``params["session"]`` is
        ``{"session_id", "shown": [{"id", "features"}], "clicked": [ids], "context"}`` with
        features resolved from the item catalog.
        """
        try:  # decoded once: the pairs and the session's shown/clicked lists come from one document
            doc = decode(value, self.settings.max_message_bytes)
            pairs = click_session_from_doc(doc, self.catalog)
        except DeadLetter:
            return None
        if not pairs or self.rng.random() >= self.sample_rate():
            return None
        feats = {}
        for ex in pairs:
            feats[ex.left_id] = ex.left
            feats[ex.right_id] = ex.right
        shown = [{"id": it["id"], "features": feats[it["id"]]} for it in doc["shown"] if it["id"] in feats]
        session = {"session_id": doc["session_id"], "shown": shown, "clicked": list(doc["clicked"]),
                   "context": pairs[0].context}
        return ExplainJob(pairs, origin="sample", params={"session": session}, session=True)

    def on_request(self, value) -> ExplainJob | None:
        """Parse an explain request (:func:`stream.contract.parse_explain_request`, one decode);
        counts ``skipped{reason="invalid_request"}`` if it is invalid."""
        try:
            req = parse_explain_request(value, self.catalog, max_bytes=self.settings.max_message_bytes)
        except DeadLetter as exc:
            self.metrics.explanations_skipped.labels(reason="invalid_request").inc()
            log.warning("invalid explain request (%s): %s", exc.reason, exc.detail)
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
            return out
        for name in names:
            hit = self.model(name)
            if hit is None:
                self.metrics.explanations_skipped.labels(reason="no_model").inc()
                continue
            # session-only explainers (``fn.session_only``) run on click sessions, the others on pairs
            fns = {k: f for k, f in registry.explainers_for(name).items()
                   if bool(getattr(f, "session_only", False)) == job.session}
            methods = job.methods if job.methods is not None else sorted(fns)
            for method in methods:
                fn = fns.get(method)
                if fn is None:
                    self.metrics.explanations_skipped.labels(reason="unknown_method").inc()
                    continue
                # the seed is drawn here, in the event-loop thread: numpy Generators are not thread-safe
                out.append((name, method, hit[0], hit[1], fn, int(self.rng.integers(2**63))))
        return out

    def explain(self, job: ExplainJob, plan) -> list[dict]:
        """Run the planned explainers (thread-safe: snapshots are never mutated); return records."""
        records = []
        background = list(self.background)
        for name, method, learner, version, fn, seed in plan:
            ctx = registry.ExplainContext(model_name=name, model_version=version, background=background,
                                          catalog=self.catalog, rng=np.random.default_rng(seed),
                                          params=dict(job.params or {}), budgets=self.budgets)
            t0 = time.perf_counter()
            try:
                e = fn(learner, job.examples, ctx)
            except NotFittedError:  # e.g. a GPM before its first refit: no model to explain yet, not a failure
                self.metrics.explanations_skipped.labels(reason="no_model").inc()
                continue
            except Exception as exc:  # noqa: BLE001 - one failing method must not stop the others
                self.metrics.explanations_skipped.labels(reason="error").inc()
                log.warning("%s/%s failed on %s: %s", name, method, [x.event_id for x in job.examples], exc)
                continue
            dt = time.perf_counter() - t0
            e.model_name = name
            e.model_version = int(version)
            self.metrics.explanation_latency.labels(method=e.method).observe(dt)
            for rec in e.to_records(instance_ids=[x.event_id for x in job.examples]):
                try:
                    explanation_record_ok(rec)
                except InvalidInputError as exc:
                    self.metrics.explanations_skipped.labels(reason="invalid_record").inc()
                    log.warning("dropping invalid %s record: %s", method, exc)
                    continue
                rec.setdefault("extra", {})
                if isinstance(rec["extra"], dict):
                    rec["extra"].setdefault("origin", job.origin)
                records.append(rec)  # prefstream_explanations_total counts on delivery (stream.publish)
        self.monitor.observe(records)
        return records


# ============================================================================ Faust glue
def attach_explainer(app, core: ExplainerCore, executor=None) -> None:
    """Register the explainer's agents, followers and queue drainer on ``app``."""
    from stream.app import TopicFollower

    from stream.publish import OutputLimits, send_explanation

    settings = core.settings
    topics = app.prefstream_topics
    limits = OutputLimits(settings)
    models_follower = TopicFollower(settings, settings.topic_models, lambda k, v, p, o: core.on_snapshot(k, v), "models")
    items_follower = TopicFollower(settings, settings.topic_items, core.on_item, "items")

    def queue() -> asyncio.Queue:
        if core.queue is None:
            core.queue = asyncio.Queue(maxsize=settings.explain_max_queue)
        return core.queue

    @app.task
    async def followers():
        # keep references: the event loop holds tasks only weakly
        app.prefstream_follower_tasks = [asyncio.ensure_future(models_follower.run()),
                                         asyncio.ensure_future(items_follower.run())]

    async def sample_into_queue(stream, to_job) -> None:
        """Sampled jobs never wait: a full queue drops the job and counts it (learning never blocks)."""
        await items_follower.caught_up.wait()
        async for value in stream:
            job = to_job(value)
            if job is None:
                continue
            try:
                queue().put_nowait(job)
            except asyncio.QueueFull:
                core.metrics.explanations_skipped.labels(reason="backlog").inc()

    @app.agent(topics["preferences"], name="prefstream-explain-sample")
    async def sample(stream):
        await sample_into_queue(stream, core.on_preference)

    @app.agent(topics["clicks"], name="prefstream-explain-sessions")
    async def sessions(stream):
        await sample_into_queue(stream, core.on_click)

    @app.agent(topics["explain_requests"], name="prefstream-explain-requests")
    async def requests(stream):
        await items_follower.caught_up.wait()
        async for value in stream:
            job = core.on_request(value)
            if job is not None:
                await queue().put(job)

    @app.task
    async def drain():
        loop = asyncio.get_running_loop()
        q = queue()
        while True:
            job = await q.get()
            if not models_follower.caught_up.is_set():  # know every published snapshot first
                try:
                    await asyncio.wait_for(models_follower.caught_up.wait(), timeout=60)
                except asyncio.TimeoutError:
                    log.warning("the model topic is not caught up after 60 s; explaining with what is loaded")
            try:
                plan = core.plan(job)
                if not plan:
                    continue
                records = await loop.run_in_executor(executor, core.explain, job, plan)
                for rec in records:  # fitted to the topic or dead-lettered as oversize, counted on delivery
                    await send_explanation(topics["explanations"], rec, core.metrics, limits, topics["dead_letters"])
                for rec in core.monitor.drain():
                    await topics["drift"].send(key=rec["model"].encode(), value=json.dumps(rec).encode())
            except Exception:  # noqa: BLE001 - the drain loop must survive any one job
                core.metrics.explanations_skipped.labels(reason="error").inc()
                log.exception("explaining %s failed", [x.event_id for x in job.examples][:3])

    app.prefstream_explainer = core


def run_explainer(settings, loglevel: str | None = None) -> int:
    """Run the explainer worker until SIGTERM/SIGINT; returns the exit code."""
    from stream.app import build_app, run_faust_worker
    from stream.metrics import start_metrics_server

    metrics = build_metrics()
    start_metrics_server(settings.port_for("explainer"), metrics.registry)
    app = build_app(settings, "explainer")
    core = ExplainerCore(settings, metrics=metrics)
    attach_explainer(app, core, executor=ThreadPoolExecutor(max_workers=1, thread_name_prefix="prefstream-explain"))
    return run_faust_worker(app, loglevel or settings.log_level)
