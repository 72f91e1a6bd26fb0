"""The learner worker: consume preferences and click sessions in micro-batches, learn, snapshot.

The state machine is :class:`~stream.workers.learner_core.LearnerCore` (plain Python, tested
without a broker; re-exported here). This module is that core on the shared consumer loop
(:class:`stream.workers.loop.ConsumerLoop`: micro-batches, generations, rebalance listener,
corrupt-input skipping, commit after delivery, lag and stall gauges), written directly on
aiokafka's group consumer rather than on a Faust agent: Faust builds an ``Event`` and an
acknowledgement per message, which alone cost more than learning a whole batch (measured in
``bench/results/stream.md``). What the learner adds:

1. each partition's share of a micro-batch goes to :meth:`LearnerCore.process_batch` (one
   decode-and-validate pass, one ``predict_proba_many`` and one ``learn_many`` per model); the
   dead letters it returns are published;
2. **snapshots** are published when due (count, timer, refit) — each round only once this member
   has **proved it still owns the partition** by a commit under its group generation (an
   expelled "zombie" is refused, publishes nothing and drops its unpublished state:
   :meth:`LearnerLoop.deliver`) — and, once every record of a snapshot round is delivered with
   ``acks=all``, the smallest ``next_offset`` of that round is **committed** for the partition —
   the committed offset never passes the latest snapshot;
3. on a **revocation** (after the loop waited for deliveries in flight) and on an
   **assignment** every source state is dropped; on an assignment each is rebuilt from its latest
   snapshot before the first fetch (in a thread: heartbeats go on), the partition is read from
   the snapshots' smallest ``next_offset`` (:meth:`LearnerLoop.place`), and messages below each
   model's ``next_offset`` are skipped;
4. on SIGTERM/SIGINT final snapshots are published and committed before leaving the group (a
   refit in flight is not waited for: ``stream.workers.refits.shutdown_executors``);
5. **personal models** keep their people in a local store behind the compacted changelog
   ``prefstream.people`` (:mod:`stream.workers.people`, ``docs/personal.md``): a snapshot round
   first delivers the records of the people it touched (``acks=all``, to the changelog partition
   of the input partition's number), then the snapshots, then commits; an assignment restores
   each assigned partition's people from its changelog partition into the store (in the
   assignment hook, under the same generation check as the snapshots) before the first fetch.

``docs/workers.md`` gives the guarantee's argument in full.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time

import orjson

from learners.exceptions import SnapshotError
from stream.workers._snapshot import source_name
from stream.workers.learner_core import DEFAULT_DEDUPE_WINDOW, LearnerCore, ModelSlot, SourceState
from stream.workers.people import PeopleKeeper, is_personal
from stream.workers.loop import ConsumerLoop

__all__ = ["DEFAULT_DEDUPE_WINDOW", "LearnerCore", "LearnerLoop", "ModelSlot", "SourceState", "run_learner"]

log = logging.getLogger(__name__)


class LearnerLoop(ConsumerLoop):
    """The learner worker on the shared consumer loop (see the module docstring).

    Parameters
    ----------
    core : LearnerCore
    """

    role = "learner"

    def __init__(self, core: LearnerCore) -> None:
        super().__init__(core.settings, core.metrics)
        self.core = core
        self.snapshots: dict | None = None
        self.items = None  # stream.workers.follower.TopicFollower of the item topic, made in starting()
        self._items_task = None
        #: sources rebuilt from their snapshots whose partition is not yet read from the snapshot's offset
        self.unplaced: set[str] = set()
        #: first offset read of sources without snapshots (what their ownership proof commits)
        self.fence_at: dict[str, int] = {}
        #: partitions of the changelog topic (read at the first restore)
        self.people_partitions: int | None = None

    def topics(self) -> list[str]:
        return [self.settings.topic_preferences, self.settings.topic_clicks]

    def group_id(self) -> str:
        return self.settings.consumer_group

    def ready_line(self) -> str:
        return f"group {self.settings.consumer_group}, models {self.core.models}"

    def stopped_line(self) -> str:
        learned = {m: t["learned"] for m, t in self.core.tally.items()}
        per_model = ", ".join(f"{m} {n}" for m, n in learned.items())
        return f"{max(learned.values(), default=0)} events learned ({per_model}); {super().stopped_line()}"

    def done_offset(self, tp) -> int | None:
        st = self.core.sources.get(source_name(tp.topic, tp.partition))
        return None if st is None else st.next_offset

    # ------------------------------------------------------------------ rebalance hooks
    async def revoked(self, revoked) -> None:
        # deliveries in flight have landed (the loop waited): a late snapshot cannot roll the new
        # owner back; until the new assignment, neither learn nor publish
        self.forget()

    def forget(self) -> None:
        """Drop every source state (and the model topic read for them): rebuilt on the next assignment."""
        for src in list(self.core.sources):
            self.core.drop_source(src)
        if self.core.people is not None:  # rebuilt from the changelog for the next assignment
            self.core.people.clear()
        self.snapshots = None
        self.unplaced.clear()
        self.fence_at.clear()

    async def assigned(self, assigned, gen: int) -> None:
        self.forget()
        # rebuild every assigned source now, before the first fetch (so that restoring is not
        # counted in any event's arrival → learned latency), and read each partition from where
        # its snapshots end; ``ensure`` is the lazy fallback. A snapshot that cannot be loaded
        # (SnapshotError) stops the worker (ConsumerLoop.fatal_errors).
        for tp in assigned:
            if gen != self.generation:
                return
            st = await self.ensure(tp.topic, tp.partition, gen)
            if st is not None and gen == self.generation:
                self.place(tp, st)

    @staticmethod
    def snapshot_start(st: SourceState) -> int | None:
        """Where a restored source's partition must be read from: the smallest ``next_offset`` of its
        snapshots (None when no model was restored: the committed offset stands)."""
        if not any(s.restored for s in st.slots.values()):
            return None
        return min(s.next_offset for s in st.slots.values())

    def place(self, tp, st: SourceState) -> None:
        """Read ``tp`` from its snapshots' offset, not from the committed one.

        The two agree unless a snapshot landed after the commit it should precede: a member
        expelled while its snapshot round was already on the wire (paused past its session
        timeout) can still deliver it after the new owner committed further. The snapshot is a
        consistent state — exactly the events below its ``next_offset`` — so reading from there
        learns every later event once; starting at the commit would skip the ones between.
        """
        self.unplaced.discard(st.source)
        start = self.snapshot_start(st)
        if start is None:
            return
        try:
            self.consumer.seek(tp, start)
        except Exception as exc:  # noqa: BLE001 - no longer assigned: its next owner places it
            log.info("not seeking %s to its snapshot offset %d: %r", tp, start, exc)

    # ------------------------------------------------------------------ sources
    async def ensure(self, topic: str, partition: int, generation: int):
        """The source state of a partition, rebuilt from the model topic on first use."""
        from stream.broker.clients import read_latest

        core = self.core
        st = core.sources.get(source_name(topic, partition))
        if st is not None and st.generation == generation:
            return st
        if self.snapshots is None:
            names = tuple(f"{m}@".encode() for m in core.models)
            snaps = await read_latest(self.settings, self.settings.topic_models,
                                      keep=lambda k: k is not None and k.startswith(names))
            if generation != self.generation:
                return None
            self.snapshots = {k.decode(): v for k, v in snaps.items() if v is not None}
        # decoding and loading snapshots is CPU work (seconds for a GPM under load): in a thread, so
        # that the consumer's heartbeats go on meanwhile (a member blocked past its session timeout
        # is expelled — and comes back a zombie)
        st = await asyncio.to_thread(core.new_source, topic, partition, self.snapshots, generation)
        if generation != self.generation:  # rebalanced meanwhile: the revocation may have run already
            if core.sources.get(st.source) is st:
                core.drop_source(st.source)
            return None
        if core.people is not None and core.people.has_source(st.source):
            await self.restore_people(st, generation)
            if generation != self.generation:
                if core.sources.get(st.source) is st:
                    core.drop_source(st.source)
                return None
        self.unplaced.add(st.source)
        return st

    # ------------------------------------------------------------------ people (personal models)
    async def changelog_partitions(self) -> int:
        """Partitions of the people changelog (read once)."""
        if self.people_partitions is None:
            parts = await self.producer.partitions_for(self.settings.topic_people)
            self.people_partitions = max(1, len(parts))
        return self.people_partitions

    async def restore_people(self, st: SourceState, generation: int) -> int:
        """Fill the store with ``st``'s people from the changelog partition of its number.

        Reads that partition from its beginning to its end at the start
        (:meth:`~stream.workers.people.PeopleKeeper.restore` keeps what is ``st``'s). Returns the
        records kept (stops early, unfinished, when the generation moves on).
        """
        from aiokafka import AIOKafkaConsumer, TopicPartition

        from stream.broker.clients import aiokafka_options

        core, s = self.core, self.settings
        keeper = core.people
        floors = {name: st.slots[name].next_offset for name in st.slots if (st.source, name) in keeper.slots}
        tp = TopicPartition(s.topic_people, st.partition % await self.changelog_partitions())
        t0 = time.perf_counter()
        consumer = AIOKafkaConsumer(enable_auto_commit=False, group_id=None, fetch_max_bytes=32 * 1024 * 1024,
                                    max_partition_fetch_bytes=16 * 1024 * 1024, **aiokafka_options(s))
        await consumer.start()
        seen, kept = 0, {}
        try:
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            end = (await consumer.end_offsets([tp]))[tp]
            while await consumer.position(tp) < end:
                if generation != self.generation:
                    return sum(kept.values())
                got = await consumer.getmany(tp, timeout_ms=500, max_records=20_000)
                msgs = [(m.key, m.value) for m in got.get(tp, ()) if m.offset < end]
                seen += len(msgs)
                for model, n in keeper.restore(st.source, floors, msgs).items():
                    kept[model] = kept.get(model, 0) + n
        finally:
            await consumer.stop()
        for model, n in kept.items():
            self.metrics.people_restored.labels(model=model).inc(n)
        ahead = sum(len(keeper.slots[(st.source, m)].ahead) for m in floors)
        log.info("people of %s restored from %s in %.1f s: %d records read, %d kept%s", st.source, tp,
                 time.perf_counter() - t0, seen, sum(kept.values()),
                 f", {ahead} standing past the snapshot (their earlier events learned by the population alone)"
                 if ahead else "")
        return sum(kept.values())

    async def send_people(self, st: SourceState, records) -> None:
        """Deliver a round's person records (``acks=all``) to the changelog partition of ``st``'s
        partition number, in batches (one future per batch, not per record); raises on failure."""
        topic = self.settings.topic_people
        part = st.partition % await self.changelog_partitions()
        futs, batch = [], self.producer.create_batch()
        for k, v in records:
            if batch.append(key=k, value=v, timestamp=None) is None:
                futs.append(await self.producer.send_batch(batch, topic, partition=part))
                batch = self.producer.create_batch()
                if batch.append(key=k, value=v, timestamp=None) is None:  # one record over the batch size
                    futs.append(await self.producer.send(topic, key=k, value=v, partition=part))
        if batch.record_count():
            futs.append(await self.producer.send_batch(batch, topic, partition=part))
        await asyncio.gather(*futs)
        counts: dict[tuple[str, str], int] = {}
        for k, v in records:
            key = (k.split(b"@", 1)[0].decode(), "state" if v is not None else "tombstone")
            counts[key] = counts.get(key, 0) + 1
        for (model, kind), n in counts.items():
            self.metrics.people_changelog_records.labels(model=model, kind=kind).inc(n)

    # ------------------------------------------------------------------ snapshots
    def publish(self, st: SourceState) -> None:
        """Encode now (a consistent state); deliver, then commit, in the background."""
        core = self.core
        if self.paused or core.sources.get(st.source) is not st or not core.snapshot_due(st):
            return
        try:
            records, acks, versions = core.build_snapshots(st)
        except SnapshotError as exc:
            log.error("snapshot of %s failed: %s", st.source, exc)
            st.force = False
            st.last_snapshot = core.clock()
            return
        self.spawn(self.deliver(st, records, acks, versions, st.people_round))

    async def deliver(self, st: SourceState, records, acks, versions, people=()) -> None:
        """Prove ownership, deliver one snapshot round (``acks=all``), then commit what it covers.

        The proof is a commit of ``published_next`` (what the last delivered or restored
        snapshots cover; for a source without any, the first offset read — nothing moves)
        under this member's generation: a member the
        coordinator has expelled — paused past its session timeout, its partitions learned on
        by another member meanwhile — is refused, and instead of publishing a snapshot behind
        the new owner's it drops every source state and waits for the rejoin's assignment,
        which rebuilds them from the snapshots on the model topic (:meth:`drop_as_zombie`).
        """
        from aiokafka.structs import TopicPartition

        core = self.core
        tp = TopicPartition(st.topic, st.partition)
        gen = self.generation
        owner = await self.owns({tp: max(st.published_next, self.fence_at.get(st.source, 0))})
        if owner is not True or self.paused or core.sources.get(st.source) is not st:
            if core.sources.get(st.source) is st:
                core.snapshot_done(st, versions, False)  # not delivered: the next round retries
            if owner is False:
                self.drop_as_zombie(gen)
            return
        ok = False
        try:
            if people:  # the people first: a snapshot on the model topic never covers a person update not delivered
                await self.send_people(st, people)
            futs = [await self.producer.send(self.settings.topic_models, key=k, value=v) for k, v in records]
            await asyncio.gather(*futs)
            ok = True
        except Exception:  # noqa: BLE001
            log.exception("publishing the snapshots of %s failed; retrying later", st.source)
        finally:
            if core.sources.get(st.source) is st:
                core.snapshot_done(st, versions, ok)
        if not ok or core.sources.get(st.source) is not st:
            return
        for tok in acks:
            tok.ack()
        covered = min((n for _, n in versions.values()), default=None)
        if covered is not None and await self.owns({tp: covered}) is False:
            self.drop_as_zombie(gen)

    def drop_as_zombie(self, gen: int) -> None:
        """The coordinator refused a commit made under ``gen``: this member was expelled.

        Drop everything learned since the snapshots (every source state) and neither learn nor
        publish until the rejoin's assignment rebuilds the sources from the model topic; the
        partitions are read again from there (:meth:`place`). Nothing when a rebalance already
        moved past ``gen`` (its revocation dropped the states).
        """
        if self.expelled(gen):
            log.warning("expelled from group %s (a commit was refused): dropped %d source states unpublished; "
                        "they are rebuilt from the snapshots when the group is rejoined",
                        self.group_id(), len(self.core.sources))
            self.forget()

    async def final_snapshots(self, timeout: float = 30.0) -> None:
        """On shutdown: publish what was learned since the last snapshot (a restart then skips it).

        A source whose round is still on the wire gets its final round once that one landed
        (within ``timeout`` seconds in all): a round covers only the events before its cut.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            for st in list(self.core.sources.values()):
                if st.since_snapshot > 0:
                    st.force = True
                    self.publish(st)
            pending = [t for t in self.tasks if not t.done()]
            left = deadline - loop.time()
            if not pending or left <= 0:
                return
            await asyncio.wait(pending, timeout=left)

    async def stopping(self) -> None:
        await self.final_snapshots()

    # ------------------------------------------------------------------ the batch
    async def handle(self, gen: int, batch: dict) -> None:
        core = self.core
        for tp, recs in batch.items():
            if self.paused or gen != self.generation:
                return  # rebalanced meanwhile: the new assignment starts at the commit (re-reads these)
            st = await self.ensure(tp.topic, tp.partition, gen)
            if st is None or gen != self.generation:
                return
            if st.source in self.unplaced:  # rebuilt lazily here: read from its snapshots' offset first
                self.unplaced.discard(st.source)
                start = self.snapshot_start(st)
                if start is not None and recs[0][0] > start:
                    self.place(tp, st)
                    continue  # fetched past the snapshots (from the commit): read again from `start`
            if not st.published_next:  # no snapshot yet: the fence commits where reading started
                self.fence_at.setdefault(st.source, recs[0][0])
            keys = {r[0]: r[4] for r in recs}
            dls = core.process_batch(st, [r[:4] for r in recs])
            for dl in dls:  # delivered in the background (dead letters are at-least-once)
                key = keys.get(dl["offset"])
                await self.producer.send(self.settings.topic_dead_letters, key=key, value=self.dead_letter_bytes(dl, key))
            self.publish(st)

    # ------------------------------------------------------------------ beside the loop
    async def every_tick(self) -> None:
        for st in list(self.core.sources.values()):
            self.publish(st)

    async def every_second(self) -> None:
        core = self.core
        core.update_gauges()
        self.write_curve()
        for rec in core.monitor.drain():  # model-drift alarms (stream.monitoring.monitor) go to the drift topic
            try:
                await self.producer.send(self.settings.topic_drift, key=rec["model"].encode(), value=orjson.dumps(rec))
            except Exception:  # noqa: BLE001 - the alarm is counted in prefstream_drift_total either way
                log.exception("publishing a drift record of %s failed", rec["model"])

    async def starting(self) -> None:
        from stream.workers.follower import TopicFollower

        s, core = self.settings, self.core
        core.loop = asyncio.get_running_loop()
        warm_up(core)  # before joining the group: no import inside the first assignment

        def on_item(key, value, partition, offset):
            core.items_live_from = self.items.start_ends  # bad records there at start were dead-lettered before
            dl = core.on_item(key, value, partition, offset)
            if dl is not None:
                self.spawn(self.producer.send_and_wait(s.topic_dead_letters, key=key,
                                                       value=self.dead_letter_bytes(dl, key)))

        self.items = TopicFollower(s, s.topic_items, on_item, name="items", metrics=core.metrics)
        self._items_task = asyncio.ensure_future(self.items.run())
        while not self.items.caught_up.is_set() and not self.stop.is_set():
            await asyncio.sleep(0.05)

    def write_curve(self, final: bool = False) -> None:
        """Append the learning-curve points taken since the last call to ``progress_log`` (if set);
        ``final``: first a point at each model's final count (the worker is stopping)."""
        if final:
            self.core.end_curve()
        pts = self.core.drain_curve()
        path = self.settings.progress_log
        if not pts or not path:
            return
        try:
            with open(path, "ab") as fh:
                fh.write(b"".join(orjson.dumps(p) + b"\n" for p in pts))
        except OSError as exc:  # a curve file must never stop learning
            log.warning("cannot append the learning curve to %s: %s", path, exc)

    async def closing(self) -> None:
        self.write_curve(final=True)
        if self.items is not None:
            self.items.stop.set()
            self._items_task.cancel()


def warm_up(core: LearnerCore) -> None:
    """Build each model fresh and load it back from its state once, before the worker joins its group.

    A model's loader may import heavy modules on first use (the GPM's imports torch: 2–5 s on
    the 2-core benchmark machine, far more under load). Paid inside the first assignment, that
    time passes without heartbeats and without learning; paid here, before the consumer starts,
    it delays only the worker's start. Best effort: a model that cannot do it is restored as usual.
    """
    for name in core.models:
        spec = core.specs[name]
        try:
            spec.loader(spec.factory(core.settings, core.settings.params_for(name)).state_dict())
        except Exception as exc:  # noqa: BLE001 - e.g. a plug-in model whose fresh state does not load
            log.debug("warming %s up failed: %r", name, exc)


def run_learner(settings, dedupe_window: int = DEFAULT_DEDUPE_WINDOW, loglevel: str | None = None) -> int:
    """Run the learner worker until SIGTERM/SIGINT.

    Parameters
    ----------
    settings : Settings
    dedupe_window : int, default 4096
    loglevel : str, optional
        Log level (defaults to ``settings.log_level``).

    Returns
    -------
    int
        Process exit code.
    """
    from stream.metrics import build_metrics, start_metrics_server

    logging.basicConfig(level=str(loglevel or settings.log_level).upper(),
                        format="[%(asctime)s] [%(process)d] [%(levelname)s] %(name)s: %(message)s")
    logging.getLogger("aiokafka").setLevel(max(logging.WARNING, logging.getLogger().level))
    metrics = build_metrics()
    start_metrics_server(settings.port_for("learner"), metrics.registry)
    from stream.workers.refits import refit_executors, shutdown_executors

    # refits fit in a spawned process by default: they never hold the learner's GIL
    executor, pool = refit_executors(settings)
    core = LearnerCore(settings, metrics=metrics, dedupe_window=dedupe_window, executor=executor, refit_pool=pool,
                       curve=bool(settings.progress_log))   # the curve's points go to progress_log alone
    keeper = attach_people(core)
    try:
        return asyncio.run(LearnerLoop(core).run())
    finally:
        shutdown_executors(executor, pool)
        if keeper is not None:
            keeper.store.destroy()


def personal_models(settings) -> list[str]:
    """The configured models that keep per-person state (built once each to ask)."""
    from stream import registry

    import dataclasses

    out = []
    for name in settings.models:
        spec = registry.get_model(name)
        for s in (settings, dataclasses.replace(settings, feature_names=["a", "b"])):  # names from the first event
            try:
                learner = spec.factory(s, s.params_for(name))
            except Exception:  # noqa: BLE001 - a model that cannot be built here fails later, as before
                continue
            if is_personal(learner):
                out.append(name)
            break
    return out


def attach_people(core: LearnerCore, path: str | None = None) -> PeopleKeeper | None:
    """Give ``core`` a :class:`PeopleKeeper` with a fresh local store under ``state_dir`` when
    one of its models is personal (None otherwise)."""
    from stream.workers.person_store import PersonStore

    s = core.settings
    if not personal_models(s):
        return None
    path = path or os.path.join(s.state_dir, f"people-{s.consumer_group}-{os.getpid()}")
    store = PersonStore(path, cache_bytes=s.people_store_cache_bytes)
    core.people = PeopleKeeper(store, s.people_ttl_seconds, s.people_memory_bytes, metrics=core.metrics,
                               clock=core.clock)
    return core.people
