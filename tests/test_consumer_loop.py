"""The consumer loop under a rebalance that completes *inside* ``getmany`` — deterministic, no broker.

A fake consumer keeps, per partition, a log, a position and a committed offset, and behaves like
aiokafka where it matters here: a (re)assignment resets every position to the committed offset
(eager rebalancing, ``SubscriptionState.assign_from_subscribed``) and ``getmany`` hands out a
partition's records only from its current position (``FetchResult.check_assignment``). On chosen
``getmany`` calls it runs the worker's rebalance listener (revoked, then assigned) *before* it
returns the records of the new assignment — the interleaving behind the stall of issue 22
(records of the new assignment tagged with the old generation and dropped although the
position had moved past them). Model snapshots go to a fake producer; ``read_latest`` reads them
back, so a restore sees exactly what was published.
"""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import numpy as np
import pytest

from stream.settings import Settings
from stream.workers._snapshot import digest_add, event_hash
from stream.workers.learner import LearnerCore, LearnerLoop

N_PER_PARTITION = 120
W = np.array([1.0, -2.0, 0.5])


def ev(eid: str, rng) -> bytes:
    xl, xr = rng.normal(size=3), rng.normal(size=3)
    return json.dumps({"schema_version": 1, "event_id": eid, "timestamp": 1700000000,
                       "left": {"features": dict(zip("abc", map(float, xl)))},
                       "right": {"features": dict(zip("abc", map(float, xr)))},
                       "outcome": 1 if W @ (xl - xr) > 0 else -1}).encode()


class TP(SimpleNamespace):
    def __hash__(self):
        return hash((self.topic, self.partition))

    def __eq__(self, other):
        return (self.topic, self.partition) == (other.topic, other.partition)

    def __lt__(self, other):
        return (self.topic, self.partition) < (other.topic, other.partition)


class FakeProducer:
    """Latest value per key of every topic; ``send`` resolves at once (a delivered record)."""

    def __init__(self):
        self.topics: dict[str, dict] = {}

    async def send(self, topic, key=None, value=None):
        self.topics.setdefault(topic, {})[key] = value
        fut = asyncio.get_running_loop().create_future()
        fut.set_result(None)
        return fut

    async def send_and_wait(self, topic, key=None, value=None):
        await self.send(topic, key, value)


class RebalancingConsumer:
    """A group consumer over in-memory logs that rebalances inside chosen ``getmany`` calls.

    Parameters
    ----------
    logs : dict of TP to list of (offset, value)
    listener : object with ``on_partitions_revoked``/``on_partitions_assigned`` coroutines
    rebalance_on : set of int
        1-based ``getmany`` call numbers during which a rebalance completes (same partitions
        re-assigned: every position goes back to the committed offset).
    per_call : int
        Records handed out per partition and call.
    """

    def __init__(self, logs, listener, rebalance_on, per_call=7):
        self.logs = logs
        self.listener = listener
        self.rebalance_on = set(rebalance_on)
        self.per_call = per_call
        self.committed = {tp: 0 for tp in logs}
        self.positions = dict(self.committed)
        self.calls = 0
        self.epoch = 0  # assignment generation as the broker sees it; served records carry it as key
        self.seeks: list = []

    async def start_assignment(self):
        await self.listener.on_partitions_assigned(set(self.logs))

    async def getmany(self, *partitions, timeout_ms=0, max_records=None):
        self.calls += 1
        await asyncio.sleep(0)
        if self.calls in self.rebalance_on:
            await self.listener.on_partitions_revoked(set(self.logs))
            self.epoch += 1
            self.positions = dict(self.committed)  # a new assignment starts at the committed offsets
            await self.listener.on_partitions_assigned(set(self.logs))
        out, budget = {}, max_records or 10**9
        for tp in sorted(self.logs):
            pos = self.positions[tp]
            take = self.logs[tp][pos:pos + min(self.per_call, budget)]
            if take:
                out[tp] = [SimpleNamespace(offset=o, value=v, key=str(self.epoch).encode(), partition=tp.partition)
                           for o, v in take]
                self.positions[tp] = take[-1][0] + 1
                budget -= len(take)
        if not out and timeout_ms:
            await asyncio.sleep(0.001)
        return out

    def assignment(self):
        return set(self.logs)

    async def position(self, tp):
        return self.positions[tp]

    def seek(self, tp, offset):
        self.seeks.append((tp, offset))
        self.positions[tp] = offset

    async def commit(self, offsets):
        for tp, off in offsets.items():
            self.committed[tp] = max(self.committed[tp], off)

    def highwater(self, tp):
        return len(self.logs[tp])

    def drained(self):
        return all(self.positions[tp] >= len(log) for tp, log in self.logs.items())


def log_digest(log) -> int:
    """The learned-state digest of every event of an in-memory partition log learned once."""
    want = 0
    for _off, raw in log:
        want = digest_add(want, event_hash(json.loads(raw)["event_id"]))
    return want


def make_loop(monkeypatch, rebalance_on, partitions=2):
    s = Settings.load(None, {"snapshot_every_events": 25, "snapshot_every_seconds": 3600, "snapshot_min_seconds": 0,
                             "batch_max_events": 40, "batch_max_ms": 20, "max_output_bytes": 1_000_000},
                      environ={})
    rng = np.random.default_rng(7)
    logs = {TP(topic=s.topic_preferences, partition=p): [(i, ev(f"p{p}-e{i}", rng)) for i in range(N_PER_PARTITION)]
            for p in range(partitions)}
    loop = LearnerLoop(LearnerCore(s))
    producer = FakeProducer()
    consumer = RebalancingConsumer(logs, loop, rebalance_on)

    async def read_latest(settings, topic, timeout=60.0, keep=None):
        await asyncio.sleep(0)
        return {k: v for k, v in producer.topics.get(topic, {}).items() if keep is None or keep(k)}

    monkeypatch.setattr("stream.broker.clients.read_latest", read_latest)
    from stream.outputs.publish import OutputLimits

    loop.consumer, loop.producer, loop.limits = consumer, producer, OutputLimits(s)
    return loop, consumer, logs


async def drive(loop, consumer, handled):
    """Fetch and handle until every log is read and learned, or 400 fetches (a stall)."""
    await consumer.start_assignment()
    for _ in range(400):
        gen, batch = await loop.fetch()
        if batch:
            handled.append((gen, loop.generation, {tp: [r[4] for r in recs] for tp, recs in batch.items()}))
            await loop.handle(gen, batch)
        done = consumer.drained() and all(st.next_offset >= N_PER_PARTITION for st in loop.core.sources.values())
        if done and len(loop.core.sources) == len(consumer.logs):
            break
    loop.stop.set()
    pending = [t for t in loop.tasks if not t.done()]
    if pending:
        await asyncio.wait(pending, timeout=5)


@pytest.mark.parametrize("rebalance_on", [{1}, {2}, {3}, {2, 9}, {4, 5, 13}],
                         ids=["first-call", "second-call", "mid-batch", "twice", "three-times"])
def test_a_rebalance_inside_getmany_loses_nothing_and_never_mixes_generations(monkeypatch, rebalance_on):
    """Every event is learned exactly once (count and event-id digest per model and partition),
    and no batch handed to ``handle`` holds records served under two assignments."""
    loop, consumer, logs = make_loop(monkeypatch, rebalance_on)
    handled: list = []
    asyncio.run(drive(loop, consumer, handled))
    assert consumer.epoch == len(rebalance_on)  # every planned rebalance happened
    for _gen, _now, keys in handled:  # one batch, one assignment
        epochs = {k for ks in keys.values() for k in ks}
        assert len(epochs) == 1, f"a batch mixed records of assignments {sorted(epochs)}"
    for tp, log in logs.items():
        st = loop.core.sources[f"{tp.topic}:{tp.partition}"]
        want = log_digest(log)
        for name, slot in st.slots.items():
            assert (name, slot.next_offset, slot.count) == (name, N_PER_PARTITION, N_PER_PARTITION)
            assert slot.digest == want


def test_records_returned_across_a_rebalance_are_read_again_from_where_they_started(monkeypatch):
    """The getmany during which the rebalance completes is undone by seeks to its first offsets."""
    loop, consumer, _logs = make_loop(monkeypatch, {3})
    asyncio.run(drive(loop, consumer, []))
    # call 3 served offsets 0..6 of each partition (positions were reset to the commit, 0): rewound there
    assert sorted((tp.partition, off) for tp, off in consumer.seeks) == [(0, 0), (1, 0)]


# ------------------------------------------------------------------ corrupt input, real broker
class _BadCRC:
    """A record batch whose CRC check fails (as for bytes flipped on disk); the rest is the real batch."""

    def __init__(self, batch):
        self._batch = batch

    def validate_crc(self):
        return False

    def __getattr__(self, name):
        return getattr(self._batch, name)


def _topic_with_a_corrupt_batch(kafka_options, unique_topic, monkeypatch) -> tuple[str, dict]:
    """40 records in 4 batches on partition 0; aiokafka sees the batch holding offset 15 as corrupt.

    Returns the topic and a dict whose ``"range"`` becomes ``(base offset, next offset)`` of that
    batch once it was fetched.
    """
    from aiokafka.consumer import fetcher
    from kafka import KafkaProducer

    topic = unique_topic("crc")
    producer = KafkaProducer(linger_ms=20, **kafka_options)
    for chunk in range(4):
        for i in range(10 * chunk, 10 * chunk + 10):
            producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0)
        producer.flush()
    producer.close()

    bad: dict = {}
    orig_init = fetcher.PartitionRecords.__init__

    class Records:
        def __init__(self, records):
            self._records = records

        def has_next(self):
            return self._records.has_next()

        def next_batch(self):
            b = self._records.next_batch()
            if b.base_offset <= 15 < b.next_offset:  # the batch holding offset 15 is corrupt, every time
                bad["range"] = (b.base_offset, b.next_offset)
                return _BadCRC(b)
            return b

    def init(self, tp, records, *a, **kw):
        orig_init(self, tp, Records(records), *a, **kw)

    monkeypatch.setattr(fetcher.PartitionRecords, "__init__", init)
    return topic, bad


def _assert_skipped_exactly_the_corrupt_batch(got: list[int], bad: dict, metrics, topic: str) -> None:
    lo, hi = bad["range"]
    assert 0 < lo <= 15 < hi <= 40
    assert got == [o for o in range(40) if not lo <= o < hi]  # in order, nothing twice, nothing else lost
    assert metrics.input_errors.labels(topic=topic, reason="corrupt")._value.get() == hi - lo


def test_a_corrupt_batch_is_counted_and_skipped_by_offset_and_the_records_around_it_are_kept(
        kafka_bootstrap, kafka_options, unique_topic, monkeypatch):
    """aiokafka raises CorruptRecordException from getmany on the same batch for ever (aiokafka#321):
    the loop keeps every record before and after it, skips exactly its offsets and counts them."""
    import os
    import uuid

    from stream.metrics import build_metrics
    from stream.workers.loop import ConsumerLoop

    topic, bad = _topic_with_a_corrupt_batch(kafka_options, unique_topic, monkeypatch)
    s = Settings.load(None, {"bootstrap_servers": kafka_bootstrap, "batch_max_events": 50, "batch_max_ms": 20},
                      environ=dict(os.environ))
    metrics = build_metrics()
    got: list[int] = []

    class Collect(ConsumerLoop):
        role = "test"

        def topics(self):
            return [topic]

        def group_id(self):
            return f"test-crc-{uuid.uuid4().hex[:8]}"

        async def handle(self, gen, batch):
            for recs in batch.values():
                got.extend(r[0] for r in recs)
            if "range" in bad and len(got) >= 40 - (bad["range"][1] - bad["range"][0]):
                self.stop.set()

    loop = Collect(s, metrics)
    assert asyncio.run(asyncio.wait_for(loop.run(), 60)) == 0
    _assert_skipped_exactly_the_corrupt_batch(got, bad, metrics, topic)


def test_a_group_less_follower_skips_a_corrupt_batch_the_same_way(
        kafka_bootstrap, kafka_options, unique_topic, monkeypatch):
    """The followers of the item and model topics (learner, explainer, ``prefstream serve``) read on
    the same micro-batch loop: the same corrupt batch is skipped by offset and counted, the records
    around it reach ``on_message`` in order, ``caught_up`` is set, and a handler error on one record
    does not stop the others."""
    import os

    from stream.metrics import build_metrics
    from stream.workers.follower import TopicFollower

    topic, bad = _topic_with_a_corrupt_batch(kafka_options, unique_topic, monkeypatch)
    s = Settings.load(None, {"bootstrap_servers": kafka_bootstrap, "batch_max_events": 50, "batch_max_ms": 20},
                      environ=dict(os.environ))
    metrics = build_metrics()
    got: list[int] = []

    def on_message(key, value, partition, offset):
        assert (key, value, partition) == (f"k{offset}".encode(), f"v{offset}".encode(), 0)
        got.append(offset)
        if offset == 3:
            raise ValueError("a handler error on one record")

    follower = TopicFollower(s, topic, on_message, name="test", metrics=metrics)

    async def main():
        task = asyncio.ensure_future(follower.run())
        try:
            while not ("range" in bad and len(got) >= 40 - (bad["range"][1] - bad["range"][0])):
                assert not task.done(), task
                await asyncio.sleep(0.02)
            await asyncio.wait_for(follower.caught_up.wait(), 10)
        finally:
            follower.stop.set()
            await asyncio.wait_for(task, 10)

    asyncio.run(asyncio.wait_for(main(), 60))
    assert follower.start_ends == {0: 40}
    _assert_skipped_exactly_the_corrupt_batch(got, bad, metrics, topic)


# ------------------------------------------------------------------ lag and stall gauges
def test_stall_seconds_grow_only_while_a_partition_has_lag_and_does_not_move():
    from stream.metrics import build_metrics
    from stream.workers.loop import ConsumerLoop

    a, b = TP(topic="t", partition=0), TP(topic="t", partition=1)

    class Owned:
        def __init__(self):
            self.tps = {a, b}
            self.hw = {a: 100, b: 50}

        def assignment(self):
            return set(self.tps)

        def highwater(self, tp):
            return self.hw[tp]

    done = {a: 40, b: 50}

    class Loop(ConsumerLoop):
        def done_offset(self, tp):
            return done[tp]

    m = build_metrics()
    loop = Loop(Settings.load(None, {}, environ={}), m)
    loop.consumer = Owned()

    def stall(tp):
        return m.registry.get_sample_value("prefstream_partition_stall_seconds",
                                           {"topic": tp.topic, "partition": str(tp.partition)})

    def lag(tp):
        return m.registry.get_sample_value("prefstream_consumer_lag", {"topic": tp.topic, "partition": str(tp.partition)})

    loop.update_lag_and_stall(now=1000.0)
    assert (stall(a), lag(a), stall(b), lag(b)) == (0.0, 60.0, 0.0, 0.0)
    loop.update_lag_and_stall(now=1007.5)  # a has lag and has not moved for 7.5 s; b is caught up
    assert (stall(a), stall(b)) == pytest.approx((7.5, 0.0), abs=1e-9)
    done[a] = 41  # a moves: the clock restarts
    loop.update_lag_and_stall(now=1010.0)
    assert stall(a) == pytest.approx(0.0, abs=1e-9)
    loop.update_lag_and_stall(now=1013.0)
    assert stall(a) == pytest.approx(3.0, abs=1e-9)
    loop.consumer.hw[b] = 60  # new records on b: its clock runs from when it was last seen caught up (1013)
    loop.update_lag_and_stall(now=1020.0)
    loop.update_lag_and_stall(now=1024.0)
    assert (stall(a), stall(b), lag(b)) == (14.0, 11.0, 10.0)
    loop.consumer.tps = {b}  # a revoked: its series go (a stale value would keep an alert firing)
    loop.update_lag_and_stall(now=1025.0)
    assert (stall(a), lag(a), stall(b)) == (None, None, 12.0)
