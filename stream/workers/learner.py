"""The learner worker: consume preferences and click sessions in micro-batches, learn, snapshot.

The state machine is :class:`~stream.workers.learner_core.LearnerCore` (plain Python, tested
without a broker; re-exported here). This module is the Kafka loop around it, written directly
on aiokafka's group consumer rather than on a Faust agent: Faust builds an ``Event`` and an
acknowledgement per message, which alone cost more than learning a whole batch (measured in
``bench/results/stream.md``). The loop

1. **fetches a micro-batch**: ``getmany`` until ``batch_max_events`` messages are in hand or
   ``batch_max_ms`` ms have passed since the first of them arrived, whichever comes first;
2. hands each partition's share to :meth:`LearnerCore.process_batch` (one decode-and-validate
   pass, one ``predict_proba_many`` and one ``learn_many`` per model) and publishes the dead
   letters it returns;
3. **publishes snapshots** when due (count, timer, refit) and, once every record of a
   snapshot round is delivered with ``acks=all``, **commits** the smallest ``next_offset`` of
   that round for the partition — the committed offset never passes the latest snapshot;
4. on a **revocation** waits for snapshot deliveries in flight, then neither learns nor publishes
   until the new assignment; on an **assignment** drops every source state (each is rebuilt from
   its latest snapshot when its first message arrives, and messages below ``next_offset`` are
   skipped); a batch fetched before a rebalance (an older generation) is dropped unprocessed —
   the consumer re-reads it from the committed offset; what a ``getmany`` returns while a
   rebalance completes inside it is dropped too, after seeking its partitions back to the first
   record returned (it may belong to the new assignment, whose positions moved past it);
5. on SIGTERM/SIGINT publishes final snapshots and commits them before leaving the group.

``docs/workers.md`` gives the guarantee's argument in full.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import orjson

from learners.exceptions import SnapshotError
from stream.workers._snapshot import source_name
from stream.workers.learner_core import DEFAULT_DEDUPE_WINDOW, LearnerCore, ModelSlot, SourceState

__all__ = ["DEFAULT_DEDUPE_WINDOW", "LearnerCore", "LearnerLoop", "ModelSlot", "SourceState", "run_learner"]

log = logging.getLogger(__name__)


class LearnerLoop:
    """The Kafka side of one learner worker process (see the module docstring).

    Parameters
    ----------
    core : LearnerCore
    """

    def __init__(self, core: LearnerCore) -> None:
        self.core = core
        self.settings = core.settings
        self.generation = 0
        self.paused = False
        self.snapshots: dict | None = None
        self.tasks: set = set()
        self.stop = asyncio.Event()
        self.consumer = None
        self.producer = None
        self.limits = None  # stream.publish.OutputLimits, made in run()
        self.fatal: Exception | None = None
        self.ready = asyncio.Event()  # set once the assigned sources are restored

    # ------------------------------------------------------------------ rebalance listener
    async def on_partitions_revoked(self, revoked) -> None:
        # Let snapshots already built land (and commit) *before* the partitions move: a snapshot
        # delivered after the new owner's first one would roll its state back. Until the new
        # assignment, neither learn nor publish.
        self.paused = True
        self.ready.clear()
        self.generation += 1
        pending = [t for t in self.tasks if not t.done()]
        log.info("partitions revoked (%d snapshot deliveries in flight): %s", len(pending), sorted(map(str, revoked)))
        if pending:
            await asyncio.wait(pending, timeout=30)
        for src in list(self.core.sources):
            self.core.drop_source(src)
        self.snapshots = None

    async def on_partitions_assigned(self, assigned) -> None:
        for src in list(self.core.sources):
            self.core.drop_source(src)
        self.snapshots = None
        self.generation += 1
        self.paused = False
        log.info("partitions assigned: %s", sorted(map(str, assigned)))
        # rebuild every assigned source now, before the first fetch (so that restoring is not
        # counted in any event's arrival → learned latency); ``ensure`` is the lazy fallback
        gen = self.generation
        try:
            for tp in assigned:
                if gen != self.generation:
                    return
                await self.ensure(tp.topic, tp.partition, gen)
        except SnapshotError as exc:  # a snapshot that cannot be loaded stops the worker
            self.fatal = exc
            self.stop.set()
        except Exception:  # noqa: BLE001 - e.g. the model topic is slow: restore lazily instead
            log.exception("restoring the assigned sources failed; restoring on first use")
        finally:
            if gen == self.generation:
                self.ready.set()

    # ------------------------------------------------------------------ sources
    async def ensure(self, topic: str, partition: int, generation: int):
        """The source state of a partition, rebuilt from the model topic on first use."""
        from stream.app import read_latest

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
        return core.new_source(topic, partition, self.snapshots, generation)

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
        task = asyncio.ensure_future(self.deliver(st, records, acks, versions))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def deliver(self, st: SourceState, records, acks, versions) -> None:
        from aiokafka.structs import TopicPartition

        core = self.core
        ok = False
        try:
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
        if covered is None:
            return
        try:
            await asyncio.wait_for(self.consumer.commit({TopicPartition(st.topic, st.partition): covered}), 15)
        except Exception as exc:  # noqa: BLE001 - not committing is always safe (replay is skipped)
            log.info("commit of %s@%d skipped: %r", st.source, covered, exc)

    async def final_snapshots(self) -> None:
        """On shutdown: publish what was learned since the last snapshot (a restart then skips it)."""
        for st in list(self.core.sources.values()):
            if st.since_snapshot > 0:
                st.force = True
                self.publish(st)
        pending = [t for t in self.tasks if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=30)

    # ------------------------------------------------------------------ the batch loop
    async def fetch(self) -> tuple[int, dict]:
        """One micro-batch: ``(generation, {tp: [(offset, value, None, arrived, key)]})``.

        ``arrived`` is the ``perf_counter`` time at which ``getmany`` handed the message over.
        """
        s = self.settings
        limit = int(s.batch_max_events)
        window = float(s.batch_max_ms) / 1000.0
        if not self.ready.is_set():  # records the client prefetched meanwhile wait in its buffer
            try:
                await asyncio.wait_for(self.ready.wait(), 0.2)
            except asyncio.TimeoutError:
                return self.generation, {}
        gen = self.generation
        out: dict = {}
        n, deadline = 0, None
        while n < limit and not self.stop.is_set():
            now = time.perf_counter()
            wait_ms = 200 if deadline is None else max(0, int((deadline - now) * 1000))
            got = await self.consumer.getmany(timeout_ms=wait_ms, max_records=limit - n)
            if gen != self.generation or self.paused:
                # a rebalance ran inside this getmany: what it returned may be records of the NEW
                # assignment, whose positions already moved past them — put each partition back at
                # its first returned record. Records fetched earlier belong to the old assignment,
                # whose positions the new one reset to the committed offsets: they are read again.
                self.rewind(got)
                return self.generation, {}
            now = time.perf_counter()
            for tp, msgs in got.items():
                out.setdefault(tp, []).extend((m.offset, m.value, None, now, m.key) for m in msgs)
                n += len(msgs)
            if deadline is None:
                if n == 0:
                    break
                deadline = now + window
            if now >= deadline:
                break
        return gen, out

    def rewind(self, got: dict) -> None:
        """Seek every partition of a ``getmany`` result back to its first record (to be read again).

        aiokafka hands out a partition's records only from its current position
        (``FetchResult.check_assignment``), so the first record returned is where the position
        was before the call: seeking there undoes the call exactly, whatever the assignment was.
        """
        for tp, msgs in got.items():
            if not msgs:
                continue
            try:
                self.consumer.seek(tp, msgs[0].offset)
            except Exception as exc:  # noqa: BLE001 - no longer assigned: its new owner reads it from the commit
                log.info("not rewinding %s to %d: %r", tp, msgs[0].offset, exc)

    def dead_letter_bytes(self, dl: dict, key) -> bytes:
        """A dead-letter record cut until it fits the dead-letter topic (stream.publish)."""
        from stream.publish import fit_dead_letter

        return fit_dead_letter(dl, self.limits.value_limit(self.settings.topic_dead_letters, key))

    async def handle(self, gen: int, batch: dict) -> None:
        core = self.core
        for tp, recs in batch.items():
            if self.paused or gen != self.generation:
                return  # rebalanced meanwhile: the new owner (maybe us) re-reads from the commit
            st = await self.ensure(tp.topic, tp.partition, gen)
            if st is None or gen != self.generation:
                return
            keys = {r[0]: r[4] for r in recs}
            dls = core.process_batch(st, [r[:4] for r in recs])
            for dl in dls:  # delivered in the background (dead letters are at-least-once)
                key = keys.get(dl["offset"])
                await self.producer.send(self.settings.topic_dead_letters, key=key, value=self.dead_letter_bytes(dl, key))
            self.publish(st)

    async def tick(self) -> None:
        while not self.stop.is_set():
            await asyncio.sleep(0.25)
            for st in list(self.core.sources.values()):
                self.publish(st)

    async def gauges(self) -> None:
        from aiokafka.structs import TopicPartition

        core = self.core
        while not self.stop.is_set():
            await asyncio.sleep(1.0)
            core.update_gauges()
            for rec in core.monitor.drain():  # model-drift alarms (stream.monitor) go to the drift topic
                try:
                    await self.producer.send(self.settings.topic_drift, key=rec["model"].encode(),
                                             value=orjson.dumps(rec))
                except Exception:  # noqa: BLE001 - the alarm is counted in prefstream_drift_total either way
                    log.exception("publishing a drift record of %s failed", rec["model"])
            for st in list(core.sources.values()):
                try:
                    hw = self.consumer.highwater(TopicPartition(st.topic, st.partition))
                except Exception:  # noqa: BLE001
                    hw = None
                if hw is not None:
                    core.metrics.consumer_lag.labels(topic=st.topic, partition=str(st.partition)).set(
                        max(hw - st.next_offset, 0))

    async def run(self) -> int:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
        from aiokafka.abc import ConsumerRebalanceListener
        from aiokafka.errors import KafkaError

        from stream.broker import BrokerError

        from stream.app import TopicFollower, aiokafka_options, env_int

        s, core = self.settings, self.core
        loop = asyncio.get_running_loop()
        core.loop = loop
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self.stop.set)
            except (NotImplementedError, RuntimeError):
                pass
        from stream.codecs import require_codecs
        from stream.publish import OutputLimits

        require_codecs()  # refuse to start (one line) rather than crash on the first compressed batch
        self.limits = OutputLimits(s)
        opts = aiokafka_options(s)
        opts["client_id"] = f"{s.client_id}-learner"
        self.producer = AIOKafkaProducer(acks="all", linger_ms=5, max_request_size=int(s.max_snapshot_bytes) + 65_536,
                                         compression_type=None if s.compression_type == "none" else s.compression_type,
                                         **opts)
        try:
            await self.producer.start()
        except KafkaError as exc:  # broker gone since the CLI's check: close the producer, one line, no traceback
            await self.producer.stop()
            raise BrokerError(f"No Kafka broker answered at {s.bootstrap_servers}: {exc!r}.") from None

        def on_item(key, value, partition, offset):
            core.items_live_from = items.start_ends  # bad records there at start were dead-lettered before
            dl = core.on_item(key, value, partition, offset)
            if dl is not None:
                task = asyncio.ensure_future(self.producer.send_and_wait(s.topic_dead_letters, key=key,
                                                                         value=self.dead_letter_bytes(dl, key)))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)

        items = TopicFollower(s, s.topic_items, on_item, name="items")
        items_task = asyncio.ensure_future(items.run())
        while not items.caught_up.is_set() and not self.stop.is_set():
            await asyncio.sleep(0.05)
        session_ms = int(env_int("PREFSTREAM_BROKER_SESSION_TIMEOUT_S", 10) * 1000)
        self.consumer = AIOKafkaConsumer(
            group_id=s.consumer_group, enable_auto_commit=False, auto_offset_reset="earliest",
            session_timeout_ms=session_ms, heartbeat_interval_ms=max(session_ms // 5, 500),
            max_poll_records=int(s.batch_max_events), max_partition_fetch_bytes=max(1_048_576, 2 * int(s.max_message_bytes)),
            **opts)
        outer = self

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked):
                await outer.on_partitions_revoked(revoked)

            async def on_partitions_assigned(self, assigned):
                await outer.on_partitions_assigned(assigned)

        self.consumer.subscribe([s.topic_preferences, s.topic_clicks], listener=Listener())
        try:
            await self.consumer.start()
        except KafkaError as exc:
            items.stop()
            items_task.cancel()
            await self.consumer.stop()
            await self.producer.stop()
            raise BrokerError(f"No Kafka broker answered at {s.bootstrap_servers}: {exc!r}.") from None
        helpers = [asyncio.ensure_future(self.tick()), asyncio.ensure_future(self.gauges())]
        # "Ready" is what scripts and tests wait for (as with the Faust workers)
        print(f"[prefstream learner] Ready: group {s.consumer_group}, models {core.models}", file=sys.stderr, flush=True)
        try:
            while not self.stop.is_set():
                gen, batch = await self.fetch()
                if batch:
                    await self.handle(gen, batch)
            if not self.paused and self.fatal is None:
                await self.final_snapshots()
        finally:
            for t in helpers:
                t.cancel()
            items.stop()
            items_task.cancel()
            pending = [t for t in self.tasks if not t.done()]
            if pending:
                await asyncio.wait(pending, timeout=10)
            await self.consumer.stop()
            await self.producer.stop()
        if self.fatal is not None:
            raise self.fatal
        return 0


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
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prefstream-refit")
    pool = None
    if settings.refit_executor == "PROCESS":  # refits fit in a spawned process: they never hold the learner's GIL
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        from learners.refit import refit_process_init

        pool = ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn"), initializer=refit_process_init)
    core = LearnerCore(settings, metrics=metrics, dedupe_window=dedupe_window, executor=executor, refit_pool=pool)
    try:
        return asyncio.run(LearnerLoop(core).run())
    finally:
        executor.shutdown(wait=False, cancel_futures=True)
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
