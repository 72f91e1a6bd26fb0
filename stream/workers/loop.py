"""The consumer loop every prefstream worker runs: micro-batches on aiokafka's group consumer.

A worker is a :class:`ConsumerLoop` subclass that supplies what it does with a batch
(:meth:`ConsumerLoop.handle`) and, if it keeps per-partition state, what happens when
partitions are assigned or revoked (:meth:`~ConsumerLoop.assigned`,
:meth:`~ConsumerLoop.revoked`). The loop owns everything else, written once here:

1. **Micro-batches** (:meth:`~ConsumerLoop.fetch`): ``getmany`` until ``batch_max_events``
   records are in hand or ``batch_max_ms`` ms have passed since the first of them arrived.
2. **Generations.** Every revocation and every assignment increments ``generation``; a batch
   carries the generation it was fetched under and :meth:`handle` drops a batch (or the rest of
   it) whose generation is no longer current. A new assignment starts at the committed offsets
   (aiokafka's eager rebalancing), so what was fetched before it is read again. Records that a
   ``getmany`` returns while a rebalance completes *inside* that call may already belong to the
   new assignment, whose positions moved past them: each such partition is sought back to the
   first record returned (:meth:`~ConsumerLoop.rewind`) and the batch is dropped — nothing
   fetched is ever dropped without being read again, and no batch mixes two generations
   (issue 22; ``tests/test_consumer_loop.py``).
3. **Revocation** waits for the deliveries in flight (:meth:`~ConsumerLoop.spawn`; a snapshot
   delivered after the new owner's first one would roll it back), then neither handles nor
   publishes until the new assignment (``paused``); **assignment** lets the worker rebuild its
   state before the first fetch (``ready``).
4. **Corrupt or undecodable input** — a CRC error (aiokafka raises ``CorruptRecordException``
   from ``getmany`` for ever on the same batch, aiokafka#321), a codec the client cannot
   decompress — is logged, counted in ``prefstream_input_errors_total{topic,reason}`` and
   skipped by offset (:func:`~stream.broker.bad_input.getmany_skipping_bad_input`): the good
   records before it are kept, the bad offsets are passed one by one, and the other partitions
   whose records the failed ``getmany`` drained (and lost with the exception) are sought back
   and read again. It is never fatal.
5. **Commit after delivery** (:meth:`~ConsumerLoop.commit`): auto-commit is off; a worker
   commits a partition only once what covers the offset has been delivered.
6. **Pause/resume** of partitions (:meth:`~ConsumerLoop.pause`), re-applied after a rebalance.
7. **Metrics** once a second: ``prefstream_consumer_lag{topic,partition}`` (high watermark −
   the worker's :meth:`~ConsumerLoop.done_offset`) and the stall detector
   ``prefstream_partition_stall_seconds{topic,partition}``: seconds since ``done_offset`` last
   moved or the lag was last 0, while the lag is > 0 (0 when caught up); the series of partitions no longer owned are
   removed.

8. **Wire formats** (:meth:`~MicroBatchLoop.wire_decode`): on a topic whose format is Avro or
   JSON Schema (``format_*`` settings, :mod:`stream.broker.serializers`) each value of a batch
   becomes a :class:`~stream.contract.decoding.Decoded` the contract's parsers take in place of
   the bytes, after the schemas of the batch's ids not seen yet are fetched. While the schema
   registry does not answer, the loop says so in one line, waits and tries the same batch again
   (nothing is handled, nothing committed), and says when it answers again. Plain JSON topics
   are not touched (the contract decodes their bytes on its orjson fast path).

Points 1, 4 and 8 — the micro-batch and the corrupt-input path — live in :class:`MicroBatchLoop`, which
the group-less followers of compacted topics (:class:`stream.workers.follower.TopicFollower`: the
item catalog every worker needs, the model topic the explainer and ``prefstream serve`` read) share
with :class:`ConsumerLoop`: each of them only supplies what it does with a batch.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import time
from typing import Awaitable, Callable

from learners.exceptions import SnapshotError
from stream.broker.bad_input import INPUT_ERROR_REASONS, getmany_skipping_bad_input

__all__ = ["ConsumerLoop", "MicroBatchLoop"]

log = logging.getLogger(__name__)

class MicroBatchLoop:
    """Micro-batches from one aiokafka consumer, with corrupt input skipped: what every reader shares.

    Parameters
    ----------
    settings : Settings
        Uses ``batch_max_events`` and ``batch_max_ms``.
    metrics : Metrics or None
        ``input_errors`` counts the corrupt records skipped (always logged).

    Attributes
    ----------
    consumer : aiokafka.AIOKafkaConsumer or None
        Set by the subclass's ``run``.
    stop : asyncio.Event
        Set to make ``run`` return.
    """

    def __init__(self, settings, metrics) -> None:
        self.settings = settings
        self.metrics = metrics
        self.consumer = None
        self.stop = asyncio.Event()
        self.formats: dict = {}  # topic -> wire format (stream.broker.serializers) of the non-JSON topics read
        self._registry_down_since: float | None = None

    def read_formats(self, topics) -> None:
        """Set :attr:`formats` for those of ``topics`` whose format is not plain JSON."""
        from stream.broker.serializers import input_formats

        self.formats = {t: f for t, f in input_formats(self.settings).items() if t in set(topics)}

    async def wire_decode(self, batch: dict) -> dict | None:
        """``batch`` with the values of the Avro / JSON Schema topics as :class:`Decoded` (module
        docstring, point 8); None when :attr:`stop` was set while the registry did not answer."""
        if not self.formats:
            return batch
        from stream.broker.serializers import RegistryUnavailable

        for tp, recs in batch.items():
            fmt = self.formats.get(tp.topic)
            if fmt is None:
                continue
            ids = fmt.missing([r[1] for r in recs])  # inline: a thread hop per batch cost the GIL's switch interval
            while ids:
                try:
                    await asyncio.to_thread(fmt.fetch, ids)  # the network call, off the event loop
                    break
                except RegistryUnavailable as exc:
                    if self._registry_down_since is None:
                        self._registry_down_since = time.monotonic()
                        print(f"[prefstream {getattr(self, 'role', 'worker')}] {exc}; waiting for it (records of "
                              f"{tp.topic} are not handled until it answers)", file=sys.stderr, flush=True)
                    try:
                        await asyncio.wait_for(self.stop.wait(), 2.0)
                        return None
                    except asyncio.TimeoutError:
                        pass
            if self._registry_down_since is not None:
                print(f"[prefstream {getattr(self, 'role', 'worker')}] the schema registry answers again after "
                      f"{time.monotonic() - self._registry_down_since:.0f} s", file=sys.stderr, flush=True)
                self._registry_down_since = None
            wrap = fmt.wrap
            batch[tp] = [(off, wrap(v), tok, arr, key) for off, v, tok, arr, key in recs]
        return batch

    def on_input_error(self, tp, offset: int, reason: str, exc: BaseException) -> None:
        """A corrupt or undecodable record skipped: counted and logged."""
        if self.metrics is not None:
            self.metrics.input_errors.labels(topic=tp.topic, reason=reason).inc()
        log.error("skipping %s record at %s[%d]@%d: %s", reason, tp.topic, tp.partition, offset, exc)

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

    async def collect(self, current: Callable[[], bool] | None = None) -> dict | None:
        """One micro-batch ``{tp: [(offset, value, None, arrived, key)]}`` (empty after 200 ms idle).

        ``getmany`` until ``batch_max_events`` records are in hand or ``batch_max_ms`` ms have
        passed since the first of them arrived; ``arrived`` is the ``perf_counter`` time at which
        ``getmany`` handed the record over. When ``current()`` turns False after a ``getmany``
        (a rebalance ran inside it), what that call returned is put back (:meth:`rewind`) and the
        result is None.
        """
        s = self.settings
        limit = int(s.batch_max_events)
        window = float(s.batch_max_ms) / 1000.0
        out: dict = {}
        n, deadline = 0, None
        while n < limit and not self.stop.is_set():
            now = time.perf_counter()
            wait_ms = 200 if deadline is None else max(0, int((deadline - now) * 1000))
            got = await getmany_skipping_bad_input(self.consumer, self.on_input_error, timeout_ms=wait_ms,
                                                   max_records=limit - n)
            if current is not None and not current():
                self.rewind(got)
                return None
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
        return out


class ConsumerLoop(MicroBatchLoop):
    """One worker's group consumer, micro-batch loop, rebalance listener and producer.

    Subclasses set :attr:`role` and implement :meth:`topics`, :meth:`group_id` and
    :meth:`handle`; optionally :meth:`assigned`, :meth:`revoked`, :meth:`done_offset`,
    :meth:`starting`, :meth:`stopping`, :meth:`closing`, :meth:`every_second`,
    :meth:`every_tick` and :meth:`ready_line`.

    Parameters
    ----------
    settings : Settings
        Uses ``batch_max_events``, ``batch_max_ms``, ``max_message_bytes``,
        ``max_snapshot_bytes``, ``compression_type``, the connection options.
    metrics : Metrics
        ``consumer_lag``, ``partition_stall_seconds`` and ``input_errors`` are set here.
    """

    role = "worker"
    #: exceptions of the assignment hook that stop the worker (anything else is logged)
    fatal_errors: tuple = (SnapshotError,)

    def __init__(self, settings, metrics) -> None:
        super().__init__(settings, metrics)
        self.generation = 0
        self.paused = False
        self.tasks: set = set()
        self.ready = asyncio.Event()  # set once the assigned partitions' state is rebuilt
        self.producer = None
        self.limits = None  # stream.outputs.publish.OutputLimits, made in run()
        self.fatal: Exception | None = None
        self.paused_tps: set = set()
        self._progress: dict = {}  # tp -> (done offset, monotonic time it last moved)
        self.committed: dict = {}  # tp -> the last offset this process committed (the stop line names them)

    # ------------------------------------------------------------------ what a worker supplies
    def topics(self) -> list[str]:
        """The topics the group consumer subscribes to."""
        raise NotImplementedError

    def group_id(self) -> str:
        """The consumer group."""
        raise NotImplementedError

    async def handle(self, gen: int, batch: dict) -> None:
        """Process one micro-batch ``{tp: [(offset, value, None, arrived, key)]}`` fetched under ``gen``.

        Must stop (and drop the rest) as soon as ``gen != self.generation`` or ``self.paused``.
        """
        raise NotImplementedError

    async def assigned(self, assigned, gen: int) -> None:
        """Rebuild state for the newly ``assigned`` partitions (before the first fetch)."""

    async def revoked(self, revoked) -> None:
        """Forget state of the ``revoked`` partitions (deliveries in flight have landed)."""

    def done_offset(self, tp) -> int | None:
        """Next offset of ``tp`` not yet fully processed (for lag and stall), None if unknown."""
        return None

    async def starting(self) -> None:
        """After the producer started, before the consumer joins the group."""

    async def stopping(self) -> None:
        """On a clean stop while still owning partitions (e.g. final snapshots)."""

    async def closing(self) -> None:
        """Always, before the consumer and producer stop (stop followers here)."""

    async def every_second(self) -> None:
        """Periodic work beside the loop (gauges, drift records)."""

    async def every_tick(self) -> None:
        """Work every 250 ms beside the loop (timed snapshots)."""

    def ready_line(self) -> str:
        return f"group {self.group_id()}"

    def stopped_line(self) -> str:
        """What the worker did, printed once after a clean stop (``[prefstream <role>] stopped: …``)."""
        done = ", ".join(f"{tp.topic}[{tp.partition}]@{off}" for tp, off in
                         sorted(self.committed.items(), key=lambda kv: (kv[0].topic, kv[0].partition)))
        return f"group {self.group_id()}, committed {done or 'nothing'}"

    def consumer_options(self) -> dict:
        """Extra ``AIOKafkaConsumer`` keyword arguments."""
        return {}

    # ------------------------------------------------------------------ rebalance listener
    async def on_partitions_revoked(self, revoked) -> None:
        self.paused = True
        self.ready.clear()
        self.generation += 1
        pending = [t for t in self.tasks if not t.done()]
        log.info("partitions revoked (%d deliveries in flight): %s", len(pending), sorted(map(str, revoked)))
        if pending:
            await asyncio.wait(pending, timeout=30)
        await self.revoked(revoked)

    async def on_partitions_assigned(self, assigned) -> None:
        self.generation += 1
        self.paused = False
        gen = self.generation
        log.info("partitions assigned: %s", sorted(map(str, assigned)))
        try:
            await self.assigned(assigned, gen)
            if self.paused_tps and gen == self.generation and self.consumer is not None:
                keep = [tp for tp in self.paused_tps if tp in set(assigned)]
                self.paused_tps = set(keep)
                if keep:
                    self.consumer.pause(*keep)
        except self.fatal_errors as exc:
            self.fatal = exc
            self.stop.set()
        except Exception:  # noqa: BLE001 - e.g. a slow topic: the worker rebuilds lazily instead
            log.exception("preparing the assigned partitions failed; continuing lazily")
        finally:
            if gen == self.generation:
                self.ready.set()

    # ------------------------------------------------------------------ helpers for workers
    def spawn(self, coro: Awaitable) -> asyncio.Future:
        """Run a delivery in the background; a revocation waits for it."""
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def commit(self, tp, offset: int, timeout: float = 15.0) -> bool:
        """Commit ``offset`` for ``tp`` (call only once what covers it is delivered); False if skipped."""
        try:
            await asyncio.wait_for(self.consumer.commit({tp: int(offset)}), timeout)
            self.committed[tp] = int(offset)
            return True
        except Exception as exc:  # noqa: BLE001 - not committing is always safe (the replay is skipped)
            log.info("commit of %s@%d skipped: %r", tp, offset, exc)
            return False

    async def owns(self, offsets: dict, timeout: float = 15.0) -> bool | None:
        """Whether this process still owns ``offsets``' partitions, proven by committing them.

        aiokafka commits with the member id and generation this member joined with; the group
        coordinator refuses them (``UNKNOWN_MEMBER_ID``, ``ILLEGAL_GENERATION``,
        ``REBALANCE_IN_PROGRESS``, raised as ``CommitFailedError``) from a member it has expelled
        — a "zombie" that missed its heartbeats for a session timeout while still running (a
        SIGSTOP, a long GC pause, an overloaded machine) — or once a rebalance has begun.

        Returns
        -------
        True
            Committed: this member owned the partitions at that moment.
        False
            Refused by the coordinator (``CommitFailedError``): the partitions may belong to
            another member now; aiokafka rejoins the group (a revocation and an assignment follow).
        None
            Unknown (timeout, coordinator unreachable, partition no longer assigned here).
        """
        from aiokafka.errors import CommitFailedError

        if not offsets:
            return True
        try:
            await asyncio.wait_for(self.consumer.commit({tp: int(o) for tp, o in offsets.items()}), timeout)
            self.committed.update({tp: int(o) for tp, o in offsets.items()})
            return True
        except CommitFailedError as exc:
            log.warning("not the owner of %s any more (%r)", sorted(map(str, offsets)), exc)
            return False
        except Exception as exc:  # noqa: BLE001 - e.g. the broker is down: nothing proven either way
            log.info("ownership of %s not proven (%r)", sorted(map(str, offsets)), exc)
            return None

    async def fence(self, offsets: dict, timeout: float = 15.0) -> bool:
        """Whether this process still owns ``offsets``' partitions (:meth:`owns` is True).

        Committing the offsets a worker may commit anyway just before publishing results fences
        a zombie off: on False, drop the results — the partitions' new owner reads the events
        again from the commit.
        """
        return await self.owns(offsets, timeout) is True

    def expelled(self, gen: int) -> bool:
        """Stop handling and publishing after the coordinator refused a commit made under ``gen``.

        Like the start of a revocation (``paused``, a new generation, no fetch until the next
        assignment), which aiokafka then runs: it rejoins the group after such a refusal. Does
        nothing — and returns False — when a rebalance has already moved the generation on
        since ``gen`` (its revocation did this; its assignment may even be done).
        """
        if gen != self.generation:
            return False
        self.paused = True
        self.ready.clear()
        self.generation += 1
        return True

    def pause(self, *tps) -> None:
        """Stop fetching ``tps`` until :meth:`resume` (kept across rebalances while assigned)."""
        tps = [tp for tp in tps if tp not in self.paused_tps]
        if tps:
            self.paused_tps.update(tps)
            self.consumer.pause(*tps)

    def resume(self, *tps) -> None:
        tps = [tp for tp in tps if tp in self.paused_tps]
        if tps:
            self.paused_tps.difference_update(tps)
            self.consumer.resume(*tps)

    def dead_letter_bytes(self, dl: dict, key) -> bytes:
        """A dead-letter record cut until it fits the dead-letter topic (stream.outputs.publish), in
        the ``format_dead_letters`` wire format."""
        from stream.outputs.publish import fit_dead_letter

        value = fit_dead_letter(dl, self.limits.value_limit(self.settings.topic_dead_letters, key))
        if self.settings.format_dead_letters == "json":
            return value
        if getattr(self, "_dead_letter_format", None) is None:
            from stream.broker.serializers import output_format

            self._dead_letter_format = output_format(self.settings, "dead_letters")
        return self._dead_letter_format.frame_or_json(value)

    # ------------------------------------------------------------------ the batch loop
    async def fetch(self) -> tuple[int, dict]:
        """One micro-batch: ``(generation, {tp: [(offset, value, None, arrived, key)]})``.

        ``arrived`` is the ``perf_counter`` time at which ``getmany`` handed the message over.
        Every record of the batch was handed out under ``generation`` (see the module docstring).
        """
        if not self.ready.is_set():  # records the client prefetched meanwhile wait in its buffer
            try:
                await asyncio.wait_for(self.ready.wait(), 0.2)
            except asyncio.TimeoutError:
                return self.generation, {}
        gen = self.generation
        # a rebalance that runs inside a getmany may hand out records of the NEW assignment, whose
        # positions already moved past them: collect puts each partition back at its first returned
        # record. Records fetched earlier belong to the old assignment, whose positions the new one
        # reset to the committed offsets: they are read again.
        out = await self.collect(lambda: gen == self.generation and not self.paused)
        if out is None:
            return self.generation, {}
        return gen, out

    async def _ticks(self) -> None:
        while not self.stop.is_set():
            await asyncio.sleep(0.25)
            await self.every_tick()

    async def _seconds(self) -> None:
        while not self.stop.is_set():
            await asyncio.sleep(1.0)
            try:
                await self.every_second()
                self.update_lag_and_stall()
            except Exception:  # noqa: BLE001 - gauges must never stop the worker
                log.exception("periodic metrics failed")

    def update_lag_and_stall(self, now: float | None = None) -> None:
        """Set ``consumer_lag`` and ``partition_stall_seconds`` for every owned partition."""
        now = time.monotonic() if now is None else now
        lag_g, stall_g = self.metrics.consumer_lag, self.metrics.partition_stall_seconds
        owned = set(self.consumer.assignment()) if self.consumer is not None and not self.paused else set()
        for tp in list(self._progress):
            if tp not in owned:
                del self._progress[tp]
                for g in (lag_g, stall_g):
                    try:
                        g.remove(tp.topic, str(tp.partition))
                    except KeyError:
                        pass
        for tp in owned:
            done = self.done_offset(tp)
            try:
                hw = self.consumer.highwater(tp)
            except Exception:  # noqa: BLE001
                hw = None
            if done is None or hw is None:
                continue
            last = self._progress.get(tp)
            if last is None or last[0] != done:
                last = self._progress[tp] = (done, now)
            lag = max(hw - done, 0)
            labels = {"topic": tp.topic, "partition": str(tp.partition)}
            lag_g.labels(**labels).set(lag)
            stall_g.labels(**labels).set(now - last[1] if lag > 0 else 0.0)
            if lag == 0:
                self._progress[tp] = (done, now)

    # ------------------------------------------------------------------ run
    async def run(self) -> int:
        """Start, loop until SIGTERM/SIGINT (or :attr:`stop`), shut down; the exit code.

        Raises
        ------
        BrokerError
            If the producer or the consumer cannot start (one line, no traceback).
        Exception
            What the assignment hook raised among :attr:`fatal_errors`.
        """
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
        from aiokafka.abc import ConsumerRebalanceListener
        from aiokafka.errors import KafkaError

        from stream.broker.clients import aiokafka_options, env_int
        from stream.broker import BrokerError
        from stream.broker.codecs import require_codecs
        from stream.outputs.publish import OutputLimits

        s = self.settings
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self.stop.set)
            except (NotImplementedError, RuntimeError):
                pass
        require_codecs()  # refuse to start (one line) rather than crash on the first compressed batch
        self.read_formats(self.topics())
        self.limits = OutputLimits(s)
        opts = aiokafka_options(s)
        opts["client_id"] = f"{s.client_id}-{self.role}"
        # 1 MiB batches (aiokafka's default is 16 KiB): a learner's snapshot round delivers the records of
        # thousands of people to one changelog partition, one request per batch (stream.workers.people)
        self.producer = AIOKafkaProducer(acks="all", linger_ms=5, max_request_size=int(s.max_snapshot_bytes) + 65_536,
                                         max_batch_size=1_048_576,
                                         compression_type=None if s.compression_type == "none" else s.compression_type,
                                         **opts)
        try:
            await self.producer.start()
        except KafkaError as exc:  # broker gone since the CLI's check: close the producer, one line, no traceback
            await self.producer.stop()
            raise BrokerError(f"No Kafka broker answered at {s.bootstrap_servers}: {exc!r}.") from None
        helpers: list = []
        try:
            await self.starting()
            session_ms = int(env_int("PREFSTREAM_BROKER_SESSION_TIMEOUT_S", 10) * 1000)
            self.consumer = AIOKafkaConsumer(
                group_id=self.group_id(), enable_auto_commit=False, auto_offset_reset="earliest",
                session_timeout_ms=session_ms, heartbeat_interval_ms=max(session_ms // 5, 500),
                max_poll_records=int(s.batch_max_events),
                max_partition_fetch_bytes=max(1_048_576, 2 * int(s.max_message_bytes)),
                **{**opts, **self.consumer_options()})
            outer = self

            class Listener(ConsumerRebalanceListener):
                async def on_partitions_revoked(self, revoked):
                    await outer.on_partitions_revoked(revoked)

                async def on_partitions_assigned(self, assigned):
                    await outer.on_partitions_assigned(assigned)

            self.consumer.subscribe(self.topics(), listener=Listener())
            for topic in self.topics():  # every series exists from the start (0 until an error)
                for reason in INPUT_ERROR_REASONS:
                    self.metrics.input_errors.labels(topic=topic, reason=reason)
            try:
                await self.consumer.start()
            except KafkaError as exc:
                raise BrokerError(f"No Kafka broker answered at {s.bootstrap_servers}: {exc!r}.") from None
            helpers = [asyncio.ensure_future(self._ticks()), asyncio.ensure_future(self._seconds())]
            # "Ready" is what scripts and tests wait for
            print(f"[prefstream {self.role}] Ready: {self.ready_line()}", file=sys.stderr, flush=True)
            while not self.stop.is_set():
                gen, batch = await self.fetch()
                if batch:
                    batch = await self.wire_decode(batch)
                    if batch:
                        await self.handle(gen, batch)
            if not self.paused and self.fatal is None:
                await self.stopping()
        finally:
            for t in helpers:
                t.cancel()
            await self.closing()
            pending = [t for t in self.tasks if not t.done()]
            if pending:
                await asyncio.wait(pending, timeout=10)
            if self.consumer is not None:
                await self.consumer.stop()
            await self.producer.stop()
        if self.fatal is not None:
            raise self.fatal
        print(f"[prefstream {self.role}] stopped: {self.stopped_line()}", file=sys.stderr, flush=True)
        return 0
