"""The explainer worker's Kafka side: :class:`ExplainerLoop` on the shared consumer loop.

:class:`~stream.workers.explainer.ExplainerCore` holds the models and runs explainers (no
Kafka); :mod:`stream.workers.explain_queues` decides what is explained next (no Kafka). This
module joins them on :class:`stream.workers.loop.ConsumerLoop` (the module docstring of
:mod:`stream.workers.explainer` describes the worker as a whole):

* ``handle`` decodes each record once: preference events and click sessions count as *eligible*
  for every ``(model, method)`` that can explain them, feed the background reservoir, and — if
  their id is sampled — become one :class:`WorkItem` per method; a preference event is built into
  an example (features resolved, validated) only if it is sampled or the reservoir takes it
  (:meth:`ExplainerCore.intake_preference`); requests queue first;
* a drain task runs the requests, then the fairest method queue, in an executor thread; the
  records of a batch are delivered (``acks=all``) and only then counted, remembered for dedupe,
  timed (arrival → delivered) and released for the commit;
* once a second the safe offsets are committed and the fraction gauges and drift records go out.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict, deque
from concurrent.futures import ThreadPoolExecutor

import orjson

from learners.exceptions import NotFittedError
from stream.workers.explain_queues import BatchCap, FractionWindow, MethodQueues, OffsetTracker, WorkItem
from stream.workers.explainer import ExplainerCore, ExplainJob
from stream.workers.heap import HeapSettler
from stream.workers.loop import ConsumerLoop
from stream.workers.throttled_log import ThrottledCount

__all__ = ["ExplainerLoop", "run_explainer"]

log = logging.getLogger(__name__)

#: (id, model, method, version) keys of delivered explanations remembered for dedupe.
DEDUPE_CAPACITY = 500_000


#: Modules the built-in models' loaders and explainers import on first use (torch: seconds on a loaded machine;
#: river.drift, which a GPM snapshot's loader imports, 1.5 s of CPU in the explainer at 10,000 events/s;
#: numba, for exact Pref-SHAP's compiled loop).
PRELOAD = ("torch", "river.drift", "learners.gpm", "explainers.prefshap", "explainers.prefshap.compiled",
           "explainers.sharp", "explainers.distributional")


def preload_explainers(models=()) -> None:
    """Import :data:`PRELOAD` (those installed), and run the ``warm`` function of the explainers of ``models``
    (:func:`stream.workers.live_models.warm_explainers`: exact Pref-SHAP's compiled loop, ~0.3 s), so that no
    first snapshot or first call does it."""
    import importlib

    from stream.workers.live_models import warm_explainers

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:  # torch not installed: the models that need it are not used either
            if (exc.name or "").split(".")[0] != "torch":
                raise
    for name in models:
        warm_explainers(name)


class ExplainerLoop(ConsumerLoop):
    """The explainer worker (see :mod:`stream.workers.explainer`).

    Parameters
    ----------
    core : ExplainerCore
    executor : concurrent.futures.Executor, optional
        Where explainers run (default: the event loop's default executor).
    """

    role = "explainer"

    def __init__(self, core: ExplainerCore, executor=None) -> None:
        super().__init__(core.settings, core.metrics)
        s = core.settings
        self.core = core
        self.executor = executor
        self.queues = MethodQueues(s.explain_max_queue, s.explain_max_lag_s)
        self.requests: deque = deque()  # (job, tp, offset, generation, arrived, value, key)
        self._no_model_said = ThrottledCount(  # sampled before any snapshot: one line per 10 s, not per event
            log, logging.WARNING, "%d sampled events not explained: no model snapshot is loaded yet (a learner "
            "worker publishes its first after snapshot_every_events events or snapshot_every_seconds)")
        self.tracker = OffsetTracker()
        self.caps: dict = {}
        self._methods: dict = {}  # session? -> core.methods_for(session) of the batch being handled
        self.windows: dict = {}
        self.emitted: OrderedDict = OrderedDict()
        self.wake = asyncio.Event()
        self.models = None
        self.items = None
        self._followers: list = []
        self._drain = None
        self.out = self.dead = None  # stream.outputs.publish.ProducerTopic, made in starting()
        self.heap = HeapSettler()  # the catalog, reservoir and snapshots out of the collector's way

    # ------------------------------------------------------------------ ConsumerLoop hooks
    def topics(self) -> list[str]:
        s = self.settings
        return [s.topic_preferences, s.topic_clicks, s.topic_explain_requests]

    def group_id(self) -> str:
        return f"{self.settings.consumer_group}-explainer"

    def ready_line(self) -> str:
        return f"group {self.group_id()}, sample rate {self.settings.explain_sample_rate:g}"

    def done_offset(self, tp) -> int | None:
        p = self.tracker.parts.get(tp)
        if p is None or p.next_fetch is None:
            return None
        return min(p.pending) if p.pending else p.next_fetch

    async def revoked(self, revoked) -> None:
        # queued work of any partition may move: drop it uncounted (the next owner, maybe us,
        # reads it again from the commit, and the dedupe keeps what was delivered from repeating)
        self.queues.drop(lambda it: False)
        self.requests.clear()
        self.tracker.forget(lambda tp: False)

    async def assigned(self, assigned, gen: int) -> None:
        await self.read_back_explanations()

    async def starting(self) -> None:
        from stream.workers.follower import TopicFollower
        from stream.outputs.publish import ProducerTopic

        s, core = self.settings, self.core
        # before joining the group: the first GPM snapshot imported torch inside the event loop (the
        # model follower's callback), which on a loaded machine blocked the loop for 8.7 s and let the
        # group session (10 s) expire — a rebalance that dropped every queued explanation
        await asyncio.get_running_loop().run_in_executor(None, preload_explainers, list(s.models))
        from stream.broker.serializers import output_format

        self.out = ProducerTopic(self.producer, s.topic_explanations, output_format(s, "explanations"))
        self.dead = ProducerTopic(self.producer, s.topic_dead_letters, output_format(s, "dead_letters"))
        core.metrics.explain_fraction_requested.set(float(s.explain_sample_rate))
        self.models = TopicFollower(s, s.topic_models, lambda k, v, p, o: core.on_snapshot(k, v), "models",
                                    metrics=core.metrics)
        self.items = TopicFollower(s, s.topic_items, core.on_item, "items", metrics=core.metrics)
        self._followers = [asyncio.ensure_future(self.models.run()), asyncio.ensure_future(self.items.run())]
        while not self.items.caught_up.is_set() and not self.stop.is_set():  # resolve item references first
            await asyncio.sleep(0.05)
        self._drain = asyncio.ensure_future(self.drain())

    async def stopping(self) -> None:
        await self.commit_safe()

    async def closing(self) -> None:
        if self._drain is not None:
            self._drain.cancel()
        for f in (self.models, self.items):
            if f is not None:
                f.stop.set()
        for t in self._followers:
            t.cancel()

    # ------------------------------------------------------------------ intake
    async def handle(self, gen: int, batch: dict) -> None:
        s = self.settings
        eligible: dict = {}  # (model, method) -> events of this batch it could explain, counted once per batch
        self._methods = {}  # session? -> core.methods_for(session), once per batch
        try:
            for tp, recs in batch.items():
                if self.paused or gen != self.generation:
                    return  # rebalanced meanwhile: the new assignment starts at the commit (re-reads these)
                for off, value, _tok, arrived, _key in recs:
                    if tp.topic == s.topic_explain_requests:
                        invalid: list = []
                        job = self.core.on_request(value, invalid)
                        if job is not None:
                            self.requests.append((job, tp, off, gen, arrived, value, _key))
                        for reason, detail in invalid:  # the caller waits for records or a dead letter
                            self.spawn(self.send_dead_letter(tp, off, value, _key, reason, detail))
                        self.tracker.fetched(tp, off, 0 if job is None else 1)
                    else:
                        self.tracker.fetched(tp, off, self.intake(tp, off, value, arrived, gen, eligible))
        finally:
            now = time.monotonic()
            for (name, method), n in eligible.items():
                self.core.metrics.explain_eligible.labels(model=name, method=method).inc(n)
                self.window((name, method)).eligible(n, now)
            self.heap.maybe_settle()
        if len(self.requests) >= s.explain_max_queue:  # back-pressure on requests only
            self.pause(*[tp for tp in self.consumer.assignment() if tp.topic == s.topic_explain_requests])
        self.wake.set()

    def intake(self, tp, offset: int, value, arrived: float, gen: int, eligible: dict) -> int:
        """Count an event as eligible (in ``eligible``, applied to the metrics once per batch: at 3,500
        events/s two metric updates per event and method cost a fifth of a core), queue it for its methods
        if sampled; the work items made."""
        core = self.core
        session = tp.topic == self.settings.topic_clicks
        if session:
            got = core.parse_session(value)
            if got is None:
                return 0
            examples, params = got
            event_id = params["session"]["session_id"]
        else:  # built into an example only if sampled or taken by the reservoir (ExplainerCore.intake_preference)
            got = core.intake_preference(value, self.settings.explain_sample_rate)
            if got is None:
                return 0
            event_id, ex = got
            examples, params = [ex], None
        methods = self._methods.get(session)
        if methods is None:  # once per batch: no snapshot lands while a batch is handled (no await in it)
            methods = self._methods[session] = core.methods_for(session)
        for name, method, _fn in methods:
            eligible[(name, method)] = eligible.get((name, method), 0) + 1
        if (not session and examples[0] is None) or not core.sampled(event_id, self.settings.explain_sample_rate):
            return 0
        if not methods:  # sampled before any snapshot of a model exists
            core.metrics.explanations_skipped.labels(reason="no_model").inc()
            self._no_model_said.add()
            return 0
        for name, method, _fn in methods:
            key = (name, method)
            shed = self.queues.put(key, WorkItem(examples, event_id, arrived, tp, offset, gen, params))
            if shed is not None:
                self.shed(key, [shed], "backlog")
        return len(methods)

    def window(self, key) -> FractionWindow:
        w = self.windows.get(key)
        if w is None:
            w = self.windows[key] = FractionWindow(60)
            self.metrics.explanations_shed.labels(method=key[1], reason="backlog", error="")  # series from the start
        return w

    def shed(self, key, items, reason: str, error: str = "") -> None:
        """Count ``items`` not explained by ``key`` and release their offsets."""
        if not items:
            return
        self.metrics.explanations_shed.labels(method=key[1], reason=reason, error=error).inc(len(items))
        if reason != "invalid_record":  # the core counted those per record already
            self.metrics.explanations_skipped.labels(reason=reason).inc(len(items))
        for it in items:
            if it.generation == self.generation:
                self.tracker.finished(it.tp, it.offset)

    # ------------------------------------------------------------------ dedupe
    @staticmethod
    def dedupe_key(event_id: str, model: str, method: str, version: int | None) -> tuple:
        return (str(event_id), model, method, version)

    def remember(self, key: tuple) -> None:
        self.emitted[key] = None
        self.emitted.move_to_end(key)
        while len(self.emitted) > DEDUPE_CAPACITY:
            self.emitted.popitem(last=False)

    def remember_record(self, rec: dict) -> None:
        extra = rec.get("extra") if isinstance(rec.get("extra"), dict) else {}
        sample = extra.get("origin", "sample") == "sample"
        self.remember(self.dedupe_key(rec["request_id"], rec["model_name"], rec["method"],
                                      None if sample else int(rec.get("model_version", 0))))

    def explained_before(self, it: WorkItem, model: str, method: str) -> bool:
        ids = [x.event_id for x in it.examples]
        return all(self.dedupe_key(i, model, method, None) in self.emitted for i in ids)

    async def read_back_explanations(self) -> None:
        """Remember the explanations delivered in the last ``explain_dedupe_seconds`` (any process)."""
        from aiokafka import AIOKafkaConsumer, TopicPartition

        from stream.broker.clients import aiokafka_options, wait_for_partitions

        s = self.settings
        if s.explain_dedupe_seconds <= 0:
            return
        consumer = AIOKafkaConsumer(enable_auto_commit=False, group_id=None, **aiokafka_options(s))
        n = 0
        try:
            await consumer.start()
            parts = await wait_for_partitions(consumer, s.topic_explanations, timeout=10)
            tps = [TopicPartition(s.topic_explanations, p) for p in parts]
            consumer.assign(tps)
            since = int((time.time() - float(s.explain_dedupe_seconds)) * 1000)
            starts = await consumer.offsets_for_times({tp: since for tp in tps})
            ends = await consumer.end_offsets(tps)
            for tp in tps:
                consumer.seek(tp, ends[tp] if starts.get(tp) is None else starts[tp].offset)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                pending = [tp for tp in tps if await consumer.position(tp) < ends[tp]]
                if not pending:
                    break
                got = await consumer.getmany(*pending, timeout_ms=500)
                for msgs in got.values():
                    for m in msgs:
                        try:
                            self.remember_record(orjson.loads(self.out.fmt.unframe(m.value) if self.out.fmt
                                                             else m.value))
                            n += 1
                        except Exception:  # noqa: BLE001 - not an explanation record: nothing to remember
                            pass
        except Exception as exc:  # noqa: BLE001 - without it an event may be explained twice, never lost
            log.warning("reading back the explanation topic for dedupe failed: %r", exc)
        finally:
            await consumer.stop()
        log.info("dedupe: %d explanation records of the last %g s read back", n, s.explain_dedupe_seconds)

    # ------------------------------------------------------------------ explaining
    def cap(self, key, fn) -> BatchCap:
        c = self.caps.get(key)
        if c is None:
            s = self.settings
            c = self.caps[key] = BatchCap(int(getattr(fn, "max_batch", s.explain_max_batch)),
                                          float(getattr(fn, "budget_s", s.explain_budget_s)))
        return c

    async def drain(self) -> None:
        """Explain until stopped: requests first, then the fairest method queue."""
        try:
            await asyncio.wait_for(self.models.caught_up.wait(), timeout=60)  # know every published snapshot first
        except asyncio.TimeoutError:
            log.warning("the model topic is not caught up after 60 s; explaining with what is loaded")
        while not self.stop.is_set():
            try:
                for key, it in self.queues.expire():
                    self.shed(key, [it], "stale")
                if self.requests:
                    await self.run_request(*self.requests.popleft())
                    continue
                key = self.queues.next()
                if key is None or self.paused:
                    self.wake.clear()
                    try:
                        await asyncio.wait_for(self.wake.wait(), 0.25)
                    except asyncio.TimeoutError:
                        pass
                    continue
                await self.run_method(key)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the drain loop must survive any one batch
                log.exception("the explainer's drain loop failed on one batch; going on")

    async def run_method(self, key) -> None:
        from stream import registry

        core = self.core
        name, method = key
        fn = registry.explainers_for(name).get(method)
        session = bool(getattr(fn, "session_only", False))
        cap = self.cap(key, fn)
        items = self.queues.take(key, 1 if session else cap.size)
        hit = core.model(name)
        if hit is None or fn is None:
            self.shed(key, items, "no_model")
            return
        fresh = []
        for it in items:
            if it.generation != self.generation:
                continue  # fetched before a rebalance: re-read from the commit
            if self.explained_before(it, name, method):
                self.shed(key, [it], "duplicate")
            else:
                fresh.append(it)
        if not fresh:
            return
        learner, version = hit
        examples = [x for it in fresh for x in it.examples]
        job = ExplainJob(examples, models=[name], methods=[method], origin="sample",
                         params=fresh[0].params if session else None, session=session)
        entry = (name, method, learner, version, fn, int(core.rng.integers(2**63)))
        budgets = {**core.budgets, "budget_s": cap.budget_s}
        gen = self.generation
        t0 = time.perf_counter()
        unfinished = 0
        try:
            records, unfinished = await asyncio.get_running_loop().run_in_executor(self.executor, core.explain_one,
                                                                                   job, entry, budgets)
        except NotFittedError:  # e.g. a GPM before its first refit: no model to explain yet, not a failure
            self.shed(key, fresh, "no_model")
            return
        except Exception as exc:  # noqa: BLE001 - one failing method must not stop the others
            log.warning("%s/%s failed on %d events (%s ...): %s: %s", name, method, len(fresh),
                        [it.event_id for it in fresh][:3], type(exc).__name__, exc)
            self.shed(key, fresh, "error", type(exc).__name__)
            return
        finally:
            dt = time.perf_counter() - t0
            self.queues.charge(key, dt)
            cap.observe(max(len(examples) - unfinished, 1), dt)
        if gen != self.generation:
            return  # rebalanced during the call: the partitions' next owner explains them
        if unfinished:  # the call stopped at fn.budget_s: its unexplained tail goes back to the queue's front
            done, n = len(examples) - unfinished, 0
            for i, it in enumerate(fresh):
                n += len(it.examples)
                if n > done:
                    self.queues.queues.setdefault(key, deque()).extendleft(reversed(fresh[i:]))
                    fresh = fresh[:i]
                    break
            if not fresh:
                return
        # still the owner? (a member expelled while running must not publish what the new owner explains)
        safe = {tp: off for tp, off in self.tracker.safe_offsets().items() if tp in {it.tp for it in fresh}}
        if not await self.fence(safe):
            if gen == self.generation:  # not (yet) revoked: a passing coordinator error — try these again later
                self.queues.queues.setdefault(key, deque()).extendleft(reversed(fresh))
            return  # expelled: the revocation that follows drops the queues; the new owner explains them
        if gen != self.generation:
            return
        for tp, off in safe.items():
            self.tracker.committed(tp, off)
        core.monitor.observe(records)
        by_id: dict = {}
        for rec in records:
            by_id.setdefault(str(rec["request_id"]), []).append(rec)
        for it in fresh:
            recs = [r for x in it.examples for r in by_id.get(str(x.event_id), [])]
            self.spawn(self.deliver(key, it, recs))

    async def deliver(self, key, it: WorkItem, recs: list) -> None:
        """Deliver one event's records, then count, remember and release it."""
        from stream.outputs.publish import send_explanation

        core = self.core
        if not recs:  # every record of it was invalid (counted as invalid_record by the core)
            self.shed(key, [it], "invalid_record")
            return
        await asyncio.gather(*(send_explanation(self.out, r, core.metrics, self.limits, self.dead, wait=True)
                               for r in recs), return_exceptions=True)
        name, method = key
        for r in recs:
            self.remember_record(r)
        for x in it.examples:  # under the registry's method name too (a record may name its method otherwise)
            self.remember(self.dedupe_key(x.event_id, name, method, None))
        core.metrics.explained_events.labels(model=name, method=method).inc()
        core.metrics.explanation_lag.labels(method=method).observe(time.perf_counter() - it.arrived)
        self.window(key).explained(1, time.monotonic())
        if it.generation == self.generation:
            self.tracker.finished(it.tp, it.offset)

    async def send_dead_letter(self, tp, offset: int, value, key, reason: str, detail: str) -> None:
        """Dead-letter an explain request the explainer cannot answer (logged and counted)."""
        from stream.contract import dead_letter_record

        log.warning("explain request at %s[%d]@%d dead-lettered (%s): %s", tp.topic, tp.partition, offset, reason, detail)
        dl = dead_letter_record(value, reason, detail, tp.topic, tp.partition, offset)
        self.core.metrics.dead_letters.labels(reason=reason).inc()
        try:
            await self.producer.send_and_wait(self.settings.topic_dead_letters, key=key,
                                              value=self.dead_letter_bytes(dl, key))
        except Exception:  # noqa: BLE001 - counted and logged either way
            log.exception("publishing the dead letter of the explain request at %s[%d]@%d failed",
                          tp.topic, tp.partition, offset)

    async def run_request(self, job, tp, offset, gen, arrived, value=None, key=None) -> None:
        from stream.outputs.publish import send_explanation

        core = self.core
        try:
            plan = [e for e in core.plan(job)  # e = (model, method, learner, version, fn, seed)
                    if not all(self.dedupe_key(x.event_id, e[0], e[1], int(e[3])) in self.emitted for x in job.examples)]
            records = await asyncio.get_running_loop().run_in_executor(self.executor, core.explain, job, plan) \
                if plan else []
        except Exception as exc:  # noqa: BLE001
            core.metrics.explanations_skipped.labels(reason="error").inc()
            log.warning("explain request %s failed: %s: %s", [x.event_id for x in job.examples][:1],
                        type(exc).__name__, exc)
            records = []
            job.refused.append((None, None, "explain_failed", f"{type(exc).__name__}: {exc}"))

        async def send():
            await asyncio.gather(*(send_explanation(self.out, r, core.metrics, self.limits, self.dead, wait=True)
                                   for r in records), return_exceptions=True)
            for model, method, reason, detail in job.refused:  # the caller gets an answer either way
                await self.send_dead_letter(tp, offset, value, key, reason, detail)
            for r in records:
                self.remember_record(r)
            if gen == self.generation:
                self.tracker.finished(tp, offset)

        self.spawn(send())

    # ------------------------------------------------------------------ beside the loop
    async def commit_safe(self) -> None:
        owned = set(self.consumer.assignment()) if self.consumer is not None else set()
        for tp, off in self.tracker.to_commit().items():
            if tp in owned and not self.paused and await self.commit(tp, off):
                self.tracker.committed(tp, off)

    async def every_second(self) -> None:
        core, s = self.core, self.settings
        await self.commit_safe()
        if len(self.requests) <= s.explain_max_queue // 2 and self.paused_tps:
            self.resume(*list(self.paused_tps))
        now = time.monotonic()
        for (name, method), w in self.windows.items():
            f = w.fraction(now)
            if f is not None:
                core.metrics.explain_fraction_achieved.labels(model=name, method=method).set(f)
        for rec in core.monitor.drain():  # explanation-drift alarms go to the drift topic
            try:
                await self.producer.send(s.topic_drift, key=rec["model"].encode(), value=orjson.dumps(rec))
            except Exception:  # noqa: BLE001 - counted in prefstream_drift_total either way
                log.exception("publishing a drift record of %s failed", rec["model"])


def run_explainer(settings, loglevel: str | None = None) -> int:
    """Run the explainer worker until SIGTERM/SIGINT; returns the exit code."""
    from stream.metrics import build_metrics, start_metrics_server

    logging.basicConfig(level=str(loglevel or settings.log_level).upper(),
                        format="[%(asctime)s] [%(process)d] [%(levelname)s] %(name)s: %(message)s")
    logging.getLogger("aiokafka").setLevel(max(logging.WARNING, logging.getLogger().level))
    metrics = build_metrics()
    start_metrics_server(settings.port_for("explainer"), metrics.registry)
    core = ExplainerCore(settings, metrics=metrics)
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prefstream-explain")
    try:
        return asyncio.run(ExplainerLoop(core, executor).run())
    finally:
        executor.shutdown(wait=False, cancel_futures=True)
