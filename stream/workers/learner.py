"""The learner worker: consume preferences and click sessions, validate, learn, snapshot.

Processing guarantee — idempotent learning keyed by offsets (no event lost, none learned twice
after a SIGKILL; ``docs/workers.md`` has the argument in full):

1. **State per source.** Each partition of each input topic (a *source*, ``"<topic>:<p>"``) has
   its own learner per model. Its snapshot on the compacted model topic, key
   ``"<model>@<topic>:<p>"``, records ``next_offset``: every message of the source below it is
   in the state, none at or above it.
2. **Acknowledge after publishing.** A message is acknowledged to Faust (hence eligible for the
   offset commit) only after a snapshot whose ``next_offset`` exceeds it has been delivered
   (``acks=all``). So the committed offset never passes the latest snapshot.
3. **Restore and skip.** When partitions are assigned (start, restart, rebalance) every source
   state is dropped and rebuilt from its latest snapshot; Faust then seeks to the committed
   offset (≤ ``next_offset``) and the worker skips every message below ``next_offset``.

A crash anywhere therefore replays exactly the messages after the last snapshot into the state
of that snapshot. A bounded per-model window of the last ``dedupe_window`` event-id hashes
(saved in the snapshot too) additionally drops re-sent copies of one event (producer retries,
a replay run twice) that arrive at *different* offsets.

Two workers in one consumer group own disjoint partitions, hence disjoint sources; the
explainer merges the per-source learners of a model (:func:`stream.registry.merge_learners`).

The Faust agent is thin: it hands each message to :class:`LearnerCore` (plain Python, tested
without a broker) and publishes what the core returns.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from learners.exceptions import InvalidInputError, PrefstreamError, SnapshotError
from stream import registry
from stream.guard import FiniteGuard
from stream.contract import (
    DeadLetter,
    ItemCatalog,
    dead_letter_record,
    decode_snapshot,
    encode_snapshot,
    parse_click_session,
    parse_item,
    parse_preference,
)
from stream.metrics import Metrics, build_metrics
from stream.workers._snapshot import (
    attach_stream_meta,
    digest_add,
    event_hash,
    snapshot_key,
    source_name,
    split_stream_meta,
)

__all__ = ["DEFAULT_DEDUPE_WINDOW", "LearnerCore", "ModelSlot", "SourceState", "run_learner"]

log = logging.getLogger(__name__)

#: Event-id hashes remembered per model and source (64-bit each, ≈ 32 KiB in a snapshot).
DEFAULT_DEDUPE_WINDOW = 4096

#: Events over which the progressive ROC AUC is computed exactly (river.metrics.RollingROCAUC).
AUC_WINDOW = 10_000


@dataclass
class ModelSlot:
    """One model's state on one source."""

    learner: Any
    version: int = 0
    count: int = 0
    next_offset: int = 0
    digest: int = 0
    window: deque = field(default_factory=deque)
    window_set: set = field(default_factory=set)
    refit_running: bool = False
    restored: bool = False
    guard: Any = None  # stream.guard.FiniteGuard, made on the first update

    def remember(self, h: int, size: int) -> None:
        if size <= 0:
            return
        self.window.append(h)
        self.window_set.add(h)
        while len(self.window) > size:
            self.window_set.discard(self.window.popleft())


@dataclass
class SourceState:
    """All model slots of one source plus the messages waiting for a snapshot before their ack."""

    topic: str
    partition: int
    kind: str
    slots: dict = field(default_factory=dict)
    next_offset: int = 0
    published_next: int = 0
    pending: list = field(default_factory=list)
    since_snapshot: int = 0
    last_snapshot: float = field(default_factory=time.monotonic)
    force: bool = False
    publishing: bool = False
    generation: int = 0

    @property
    def source(self) -> str:
        return source_name(self.topic, self.partition)


class LearnerCore:
    """The learner worker's state machine, independent of Faust and of the broker.

    Parameters
    ----------
    settings : Settings
        Uses ``models``, ``model_params``, topic names, ``snapshot_every_events``,
        ``snapshot_every_seconds``, ``max_message_bytes``, ``max_snapshot_bytes``.
    metrics : Metrics, optional
        Fresh registry if omitted.
    dedupe_window : int, default 4096
        Event-id hashes remembered per model and source; 0 disables event-id dedupe.
    loop, executor : optional
        Where ``refit()`` runs; without a loop refits run inline (tests).

    Raises
    ------
    InvalidParameterError
        If a configured model is not registered.
    """

    def __init__(self, settings, metrics: Metrics | None = None, dedupe_window: int = DEFAULT_DEDUPE_WINDOW,
                 loop: asyncio.AbstractEventLoop | None = None, executor=None, clock=time.monotonic) -> None:
        from river import metrics as rm

        self.settings = settings
        self.metrics = metrics or build_metrics()
        self.dedupe_window = int(dedupe_window)
        self.loop = loop
        self.executor = executor
        self.clock = clock
        self.models = list(settings.models)
        self.specs = {m: registry.get_model(m) for m in self.models}
        self.catalog = ItemCatalog()
        self.sources: dict[str, SourceState] = {}
        self.kinds = {settings.topic_preferences: "preferences", settings.topic_clicks: "clicks"}
        # ROC AUC over the last AUC_WINDOW scored events, exact (rank-based): river's ROCAUC bins
        # probabilities into 10 thresholds, which flattens margin models whose σ(g) stays near 0.5.
        self.progressive = {m: (rm.Accuracy(), rm.LogLoss(), rm.RollingROCAUC(window_size=AUC_WINDOW)) for m in self.models}
        # labelled children resolved once (``labels()`` costs ~10 µs per call)
        self._m_learned = {m: self.metrics.events_learned.labels(model=m) for m in self.models}
        self._m_relearned = {m: self.metrics.events_relearned.labels(model=m) for m in self.models}
        #: per "<model>@<source>", the offset below which this process has learned every message
        #: once already: learning below it again (after a restore) counts as re-learned
        self._learned_below: dict[str, int] = {}
        #: per model, examples learned / dead-lettered / dropped as duplicates (prefstream run's summary)
        self.tally = {m: {"learned": 0, "dead_letters": 0, "duplicates": 0} for m in self.models}
        self._m_latency = {m: self.metrics.learn_latency.labels(model=m) for m in self.models}
        self._m_consumed: dict[str, Any] = {}
        #: per item-topic partition, the end offset when the worker started: bad item records
        #: below it are counted but not dead-lettered again (an earlier run did that)
        self.items_live_from: dict[int, int] = {}

    # ------------------------------------------------------------------ sources
    def new_source(self, topic: str, partition: int, snapshots: dict, generation: int = 0) -> SourceState:
        """Create (or replace) the state of a source from its latest snapshots.

        Parameters
        ----------
        topic, partition
        snapshots : dict of str to bytes
            Latest model-topic value per key (only keys ``"<model>@<topic>:<partition>"`` are used).
        generation : int
            Consumer-group generation the state belongs to.

        Raises
        ------
        SnapshotError
            If a snapshot exists but cannot be decoded or loaded: starting from scratch instead
            would silently break the processing guarantee.
        """
        kind = self.kinds.get(topic)
        if kind is None:
            raise InvalidInputError(f"Topic {topic!r} is not an input topic of the learner ({sorted(self.kinds)}).")
        st = SourceState(topic=topic, partition=int(partition), kind=kind, generation=generation,
                         last_snapshot=self.clock())
        src = st.source
        fresh = []
        for model in self.models:
            raw = snapshots.get(snapshot_key(model, src))
            if raw is None:
                fresh.append(model)
                continue
            try:
                snap = decode_snapshot(raw)
                clean, info = split_stream_meta(snap["state"])
                learner = self.specs[model].loader(clean)
            except PrefstreamError as exc:
                raise SnapshotError(f"Cannot restore {snapshot_key(model, src)} from the model topic: {exc}. "
                                    "Delete the key (tombstone) to start this model afresh.") from exc
            slot = ModelSlot(learner=learner, version=int(snap["version"]), count=int(snap["training_count"]),
                             next_offset=int(snap["offsets"].get(src, info.get("next_offset", 0))),
                             digest=int(info.get("digest", 0)), restored=True)
            for h in info.get("window", [])[-self.dedupe_window:] if self.dedupe_window > 0 else []:
                slot.remember(h, self.dedupe_window)
            st.slots[model] = slot
        start = max((s.next_offset for s in st.slots.values()), default=0)
        for model in fresh:
            st.slots[model] = ModelSlot(learner=self.specs[model].factory(self.settings, self.settings.params_for(model)),
                                        next_offset=start)
        st.next_offset = start
        st.published_next = min(s.next_offset for s in st.slots.values())
        self.sources[src] = st
        self._set_versions()
        log.info("source %s restored: %s", src, {m: (s.version, s.count, s.next_offset) for m, s in st.slots.items()})
        return st

    def drop_source(self, source: str) -> None:
        """Forget a source (revoked partition); unacknowledged messages stay unacknowledged."""
        self.sources.pop(source, None)

    # ------------------------------------------------------------------ processing
    def process(self, st: SourceState, offset: int, value: bytes | None, ack_token: Any = None) -> list[dict]:
        """Validate and learn one input message of ``st``.

        Returns
        -------
        list of dict
            Dead-letter records to publish (empty for a good or a skipped message).
        """
        m = self.metrics
        consumed = self._m_consumed.get(st.topic)
        if consumed is None:
            consumed = self._m_consumed[st.topic] = m.events_consumed.labels(topic=st.topic)
        consumed.inc()
        offset = int(offset)
        if ack_token is not None:
            st.pending.append((offset, ack_token))
        if offset < st.published_next:  # redelivered after a seek: already in every published snapshot
            return []
        live = [(name, s) for name, s in st.slots.items() if offset >= s.next_offset]
        if not live:
            return []
        fresh = offset >= st.next_offset
        if fresh and offset > st.next_offset and st.since_snapshot == 0 and any(s.restored for s in st.slots.values()):
            log.warning("source %s: offset gap %d -> %d (retention or transactional markers?)", st.source,
                        st.next_offset, offset)
        out: list[dict] = []
        try:
            if st.kind == "clicks":
                examples = parse_click_session(value, self.catalog, max_bytes=self.settings.max_message_bytes)
            else:
                examples = [parse_preference(value, self.catalog, max_bytes=self.settings.max_message_bytes)]
        except DeadLetter as dl:
            examples = []
            if fresh:
                out.append(self._dead_letter(value, dl.reason, dl.detail, st, offset))
                for name, _ in live:
                    self.tally[name]["dead_letters"] += 1
        learn_error = None
        learn_reason = "schema_violation"
        dup = 0
        for ex in examples:
            h = event_hash(ex.event_id)
            for name, slot in live:
                if h in slot.window_set:
                    dup += 1
                    self.tally[name]["duplicates"] += 1
                    continue
                self._validate_progressively(name, slot.learner, ex)
                t0 = time.perf_counter()
                try:
                    if slot.guard is None:
                        slot.guard = FiniteGuard(slot.learner, self.specs[name].loader)
                    slot.learner = slot.guard.learn_one(slot.learner, ex.left, ex.right, ex.outcome, ex.context,
                                                        ex.weight)
                except Exception as exc:  # noqa: BLE001 - one event must not crash the agent
                    # (a crash would let the next snapshot's offsets cover this event unlearned)
                    slot.learner = getattr(exc, "learner", slot.learner)  # the guard's restored state
                    if not isinstance(exc, (InvalidInputError, ValueError, KeyError, TypeError)):
                        log.exception("model %s failed on event %s", name, ex.event_id)
                    if learn_error is None:
                        learn_reason = getattr(exc, "reason", "schema_violation")
                        learn_error = f"model {name!r} rejected event {ex.event_id!r}: {type(exc).__name__}: {exc}"
                    self.tally[name]["dead_letters"] += 1
                    continue
                self._m_latency[name].observe(time.perf_counter() - t0)
                key = f"{name}@{st.source}"
                if offset >= self._learned_below.get(key, 0):
                    self._m_learned[name].inc()
                else:
                    self._m_relearned[name].inc()
                self.tally[name]["learned"] += 1
                slot.count += 1
                slot.digest = digest_add(slot.digest, h)
                slot.remember(h, self.dedupe_window)
                self._maybe_refit(st, name, slot)
        if dup:
            m.duplicate_events.labels(topic=st.topic).inc(dup)
        if learn_error is not None and fresh:
            out.append(self._dead_letter(value, learn_reason, learn_error, st, offset))
        for name, slot in live:
            slot.next_offset = offset + 1
            key = f"{name}@{st.source}"
            if offset >= self._learned_below.get(key, 0):
                self._learned_below[key] = offset + 1
        if fresh:
            st.next_offset = offset + 1
            st.since_snapshot += 1
        return out

    def _dead_letter(self, value, reason: str, detail: str, st: SourceState, offset: int) -> dict:
        self.metrics.dead_letters.labels(reason=reason).inc()
        return dead_letter_record(value, reason, detail, st.topic, st.partition, offset)

    def _validate_progressively(self, name: str, learner, ex) -> None:
        """Predict before learning (progressive validation); ties (outcome 0) are not scored."""
        if ex.outcome == 0:
            return
        try:
            p = float(learner.predict_proba_one(ex.left, ex.right, ex.context)[1])
        except Exception:  # noqa: BLE001 - not fitted yet, or features it cannot score: learn_one decides
            return
        acc, ll, auc = self.progressive[name]
        y = ex.outcome == 1
        acc.update(y, p > 0.5)
        ll.update(y, p)
        auc.update(y, p)

    # ------------------------------------------------------------------ refits
    def _maybe_refit(self, st: SourceState, name: str, slot: ModelSlot) -> None:
        wants = getattr(slot.learner, "wants_refit", None)
        if wants is None or slot.refit_running or not wants():
            return
        slot.refit_running = True
        t0 = time.perf_counter()
        if self.loop is None:
            try:
                res = slot.learner.refit()
            except Exception as exc:  # noqa: BLE001 - a failed refit must not stop learning
                self._refit_failed(name, exc, slot)
            else:
                self._refit_done(st, name, slot, t0, res)
            return
        fut = self.loop.run_in_executor(self.executor, slot.learner.refit)

        def done(f):
            if f.cancelled():
                slot.refit_running = False
            elif f.exception() is not None:
                self._refit_failed(name, f.exception(), slot)
            else:
                self._refit_done(st, name, slot, t0, f.result())

        fut.add_done_callback(done)

    def _refit_failed(self, name, exc, slot) -> None:
        slot.refit_running = False
        log.error("refit of %s failed: %r", name, exc)

    def _refit_done(self, st, name, slot, t0, res) -> None:
        slot.refit_running = False
        if slot.guard is not None:
            slot.guard.mark(slot.learner)  # the refitted model is the state to fall back on
        res = res if isinstance(res, dict) else {}
        m = self.metrics
        m.refit_duration.labels(model=name).observe(float(res.get("duration_s", time.perf_counter() - t0)))
        if res.get("n_train") is not None:
            m.refit_training_size.labels(model=name).set(float(res["n_train"]))
        if res.get("val_auc") is not None:
            m.refit_validation_auc.labels(model=name).set(float(res["val_auc"]))
        if self.sources.get(st.source) is st:
            st.force = True  # publish the refitted model with the next snapshot round

    # ------------------------------------------------------------------ snapshots
    def snapshot_due(self, st: SourceState, now: float | None = None) -> bool:
        """True when ``st`` has unsnapshotted work and the event count, the timer or a refit says so."""
        if st.publishing:
            return False
        now = self.clock() if now is None else now
        if st.force:
            return True
        if st.since_snapshot <= 0:
            return False
        return (st.since_snapshot >= self.settings.snapshot_every_events
                or now - st.last_snapshot >= self.settings.snapshot_every_seconds)

    def build_snapshots(self, st: SourceState) -> tuple[list[tuple[bytes, bytes]], list, dict]:
        """Encode one snapshot per model of ``st`` and take the messages they cover.

        Returns
        -------
        records : list of (key, value) bytes
        acks : list
            Ack tokens of messages below every snapshot's ``next_offset``; acknowledge them only
            after all records are delivered.
        versions : dict
            ``{model: (version, next_offset)}`` to pass to :meth:`snapshot_done`.

        Raises
        ------
        SnapshotError
            If a model's state cannot be encoded (e.g. over ``max_snapshot_bytes``); nothing is
            taken then, so nothing is acknowledged.
        """
        records, versions = [], {}
        for name, slot in st.slots.items():
            state = attach_stream_meta(slot.learner.state_dict(), source=st.source, next_offset=slot.next_offset,
                                       training_count=slot.count, digest=slot.digest, window=slot.window)
            value = encode_snapshot(name, slot.version + 1, slot.count, state, offsets={st.source: slot.next_offset},
                                    max_bytes=self.settings.max_snapshot_bytes)
            records.append((snapshot_key(name, st.source).encode(), value))
            versions[name] = (slot.version + 1, slot.next_offset)
        covered = min(n for _, n in versions.values()) if versions else st.next_offset
        acks = [tok for off, tok in st.pending if off < covered]
        st.pending = [(off, tok) for off, tok in st.pending if off >= covered]
        st.since_snapshot = 0
        st.force = False
        st.last_snapshot = self.clock()
        st.publishing = True
        return records, acks, versions

    def snapshot_done(self, st: SourceState, versions: dict, ok: bool) -> None:
        """Record the outcome of publishing the records of :meth:`build_snapshots`."""
        st.publishing = False
        if not ok:
            st.force = True
            return
        for name, (version, _) in versions.items():
            slot = st.slots.get(name)
            if slot is not None:
                slot.version = max(slot.version, version)
        self._set_versions()
        if versions:
            st.published_next = max(st.published_next, min(n for _, n in versions.values()))

    def _set_versions(self) -> None:
        """``prefstream_model_version{model}`` = Σ of the versions of this worker's sources
        (the explainer reports the same sum over all sources, i.e. the merged model's version)."""
        for name in self.models:
            total = sum(st.slots[name].version for st in self.sources.values() if name in st.slots)
            self.metrics.model_version.labels(model=name).set(total)

    # ------------------------------------------------------------------ items
    def on_item(self, key, value, partition: int, offset: int) -> dict | None:
        """Apply one item-catalog record; a dead-letter record for a bad *live* record, else None."""
        try:
            self.catalog.upsert(parse_item(value, max_bytes=self.settings.max_message_bytes, key=key))
        except DeadLetter as dl:
            self.metrics.dead_letters.labels(reason=dl.reason).inc()
            if offset >= self.items_live_from.get(partition, 0):
                return dead_letter_record(value, dl.reason, dl.detail, self.settings.topic_items, partition, offset)
        return None

    # ------------------------------------------------------------------ gauges
    def update_gauges(self) -> None:
        """Push the progressive metrics to their gauges (cheap; call about once a second)."""
        m = self.metrics
        for name, (acc, ll, auc) in self.progressive.items():
            m.progressive_accuracy.labels(model=name).set(acc.get())
            m.progressive_log_loss.labels(model=name).set(ll.get())
            m.progressive_roc_auc.labels(model=name).set(auc.get())
        for st in self.sources.values():
            for name, slot in st.slots.items():
                for attr, gauge in (("nonzero_masses", m.capacity_nonzero_masses),
                                    ("constraint_violation", m.capacity_constraint_violation),
                                    ("regret_proxy", m.capacity_regret_proxy)):
                    fn = getattr(slot.learner, attr, None)
                    if fn is None:
                        continue
                    try:
                        v = fn() if callable(fn) else fn
                        gauge.labels(model=name).set(float(v))
                    except Exception:  # noqa: BLE001 - a diagnostic must never stop learning
                        pass


# ============================================================================ Faust glue
def attach_learner(app, core: LearnerCore) -> None:
    """Register the learner's agent, item follower, snapshot timer and rebalance hooks on ``app``."""
    from stream.app import TopicFollower, read_latest

    from stream.publish import OutputLimits, fit_dead_letter

    settings = core.settings
    topics = app.prefstream_topics
    limits = OutputLimits(settings)

    def dead_letter_bytes(dl: dict, key) -> bytes:  # cut the payload until it fits the dead-letter topic
        return fit_dead_letter(dl, limits.value_limit(settings.topic_dead_letters, key))

    inputs = app.topic(settings.topic_preferences, settings.topic_clicks, key_type=bytes, value_type=bytes,
                       key_serializer="raw", value_serializer="raw", allow_empty=True)
    ctl = {"snapshots": None, "lock": asyncio.Lock(), "paused": False, "tasks": set()}
    items_follower = TopicFollower(settings, settings.topic_items, lambda *a: _on_item(*a), name="items")

    def _on_item(key, value, partition, offset):
        # bad records already in the topic at start were dead-lettered by an earlier run
        core.items_live_from = items_follower.start_ends
        dl = core.on_item(key, value, partition, offset)
        if dl is not None:
            asyncio.ensure_future(topics["dead_letters"].send(key=key, value=dead_letter_bytes(dl, key)))

    @app.on_partitions_revoked.connect
    async def _revoked(sender, revoked, **kwargs):  # noqa: ARG001
        # Let snapshots already built land *before* the partitions move: a snapshot delivered
        # after the new owner's first one would roll its state back behind its committed offset.
        # Until the new assignment, neither learn nor publish: another worker may already own
        # these partitions, and buffered messages come back after Faust's seek anyway.
        ctl["paused"] = True
        pending = [t for t in ctl.get("tasks", ()) if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=30)
        for src in list(core.sources):
            core.drop_source(src)
        ctl["snapshots"] = None

    @app.on_partitions_assigned.connect
    async def _assigned(sender, assigned, **kwargs):  # noqa: ARG001
        for src in list(core.sources):
            core.drop_source(src)
        ctl["snapshots"] = None
        ctl["paused"] = False

    async def ensure(tp, generation):
        src = source_name(tp.topic, tp.partition)
        st = core.sources.get(src)
        if st is not None and st.generation == generation:
            return st
        async with ctl["lock"]:
            st = core.sources.get(src)
            if st is not None and st.generation == generation:
                return st
            if ctl["snapshots"] is None:
                names = tuple(f"{m}@".encode() for m in core.models)
                ctl["snapshots"] = await read_latest(settings, settings.topic_models,
                                                     keep=lambda k: k is not None and k.startswith(names))
            snaps = {k.decode(): v for k, v in ctl["snapshots"].items() if v is not None}
            return core.new_source(tp.topic, tp.partition, snaps, generation)

    def publish(st) -> None:
        """Encode now (a consistent state), deliver and acknowledge in the background."""
        if ctl["paused"] or not core.snapshot_due(st):
            return
        try:
            records, acks, versions = core.build_snapshots(st)
        except SnapshotError as exc:
            log.error("snapshot of %s failed: %s", st.source, exc)
            st.force = False
            st.last_snapshot = core.clock()
            return
        task = asyncio.ensure_future(deliver(st, records, acks, versions))
        ctl["tasks"].add(task)
        task.add_done_callback(ctl["tasks"].discard)

    async def deliver(st, records, acks, versions) -> None:
        ok = False
        try:
            futs = [await topics["models"].send(key=k, value=v) for k, v in records]
            for f in futs:
                await f
            ok = True
        except Exception:  # noqa: BLE001
            log.exception("publishing the snapshots of %s failed; retrying later", st.source)
        finally:
            if core.sources.get(st.source) is st:
                core.snapshot_done(st, versions, ok)
        if ok and core.sources.get(st.source) is st:
            for tok in acks:
                tok.ack()

    @app.on_before_shutdown.connect
    async def _final_snapshots(sender, **kwargs):  # noqa: ARG001
        """On SIGTERM: publish what was learned since the last snapshot (a restart then skips it)."""
        for st in list(core.sources.values()):
            if st.since_snapshot > 0:
                st.force = True
                publish(st)
        pending = [t for t in ctl.get("tasks", ()) if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=30)

    @app.agent(inputs, name="prefstream-learner")
    async def learn(stream):
        await items_follower.caught_up.wait()
        async for event in stream.noack().events():
            msg = event.message
            gen = getattr(msg, "generation_id", None)
            if ctl["paused"] or (gen is not None and gen != app.consumer_generation_id):
                continue  # rebalancing, or stale (from before a rebalance): will be redelivered
            st = await ensure(msg.tp, app.consumer_generation_id)
            dls = core.process(st, msg.offset, msg.value, event)
            for dl in dls:
                await topics["dead_letters"].send(key=msg.key, value=dead_letter_bytes(dl, msg.key))
            if core.snapshot_due(st):
                publish(st)

    @app.timer(0.25)
    async def tick():
        for st in list(core.sources.values()):
            publish(st)

    @app.timer(1.0)
    async def gauges():
        core.update_gauges()
        consumer = app.consumer
        for st in list(core.sources.values()):
            try:
                from faust.types import TP

                hw = consumer.highwater(TP(st.topic, st.partition))
            except Exception:  # noqa: BLE001
                hw = None
            if hw is not None:
                core.metrics.consumer_lag.labels(topic=st.topic, partition=str(st.partition)).set(max(hw - st.next_offset, 0))

    @app.task
    async def follow_items():
        ctl["items_task"] = asyncio.ensure_future(items_follower.run())

    app.prefstream_learner = core


def run_learner(settings, dedupe_window: int = DEFAULT_DEDUPE_WINDOW, loglevel: str | None = None) -> int:
    """Run the learner worker until SIGTERM/SIGINT.

    Parameters
    ----------
    settings : Settings
    dedupe_window : int, default 4096
    loglevel : str, optional
        Faust worker log level (defaults to ``settings.log_level``).

    Returns
    -------
    int
        Process exit code.
    """
    from stream.app import build_app
    from stream.metrics import start_metrics_server

    metrics = build_metrics()
    start_metrics_server(settings.port_for("learner"), metrics.registry)
    app = build_app(settings, "learner")
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prefstream-refit")
    core = LearnerCore(settings, metrics=metrics, dedupe_window=dedupe_window, executor=executor)

    @app.task
    async def _bind_loop():
        core.loop = asyncio.get_running_loop()

    attach_learner(app, core)
    return _run_worker(app, loglevel or settings.log_level)


def _run_worker(app, loglevel: str) -> int:
    """Run a Faust worker in this process (signal handling by Faust)."""
    import faust

    level = {"DEBUG": "debug", "INFO": "info", "WARNING": "warn", "ERROR": "error"}.get(str(loglevel).upper(), "info")
    worker = faust.Worker(app, loglevel=level, quiet=True, redirect_stdouts=False)
    worker.execute_from_commandline()
    return 0
