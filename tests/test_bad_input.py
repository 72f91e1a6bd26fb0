"""A corrupt batch on one partition loses no record of the others — deterministic, no broker.

aiokafka's ``Fetcher.fetched_records`` drains the buffered partitions of one ``getmany`` one after
another and moves each one's position past what it drained; when the record iterator then raises
``CorruptRecordException`` on a later partition (for ever on the same batch, aiokafka#321), what
was drained is lost with the exception while those positions stay moved. The fake consumer below
does exactly that (positions in the same ``_subscription.subscription.assignment`` state that
aiokafka keeps), so :func:`stream.broker.bad_input.getmany_skipping_bad_input` must put the other
partitions back. This was the chaos benchmark's loss: a corrupt batch on partition 2 made the
learner skip 454 and 135 unlearned events of partitions 0 and 1 (``tests/test_chaos.py``).
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from aiokafka.errors import CorruptRecordException
from aiokafka.structs import TopicPartition

from stream.broker.bad_input import fetch_positions, getmany_skipping_bad_input

TOPIC = "prefs"
N = 40
CHUNK = 5  # records of one partition buffered per fetch (aiokafka: one FetchResult per partition)


class DrainingConsumer:
    """``getmany`` as aiokafka's ``fetched_records``: partitions drained in order, positions moved,
    a bad batch raising mid-drain (the records drained before it in that call are gone)."""

    def __init__(self, bad: dict, order: list[int]):
        self.tps = [TopicPartition(TOPIC, p) for p in order]
        self.pos = {tp: 0 for tp in self.tps}
        self.bad = {TopicPartition(TOPIC, p): set(offs) for p, offs in bad.items()}
        state = lambda tp: SimpleNamespace(has_valid_position=True, position=self.pos[tp])  # noqa: E731
        assignment = SimpleNamespace(tps=frozenset(self.tps), state_value=state)
        self._subscription = SimpleNamespace(subscription=SimpleNamespace(assignment=assignment))
        self.seeks: list = []

    def assignment(self):
        return set(self.tps)

    async def position(self, tp):
        return self.pos[tp]

    def seek(self, tp, offset):
        self.seeks.append((tp.partition, offset))
        self.pos[tp] = offset

    async def getmany(self, *partitions, timeout_ms=0, max_records=None):
        left = 500 if max_records is None else max_records
        drained = {}
        for tp in self.tps:
            if partitions and tp not in partitions:
                continue
            p = self.pos[tp]
            take = list(range(p, min(p + CHUNK, p + left, N)))
            if self.bad.get(tp, set()) & set(take):
                raise CorruptRecordException(f"Invalid CRC - {tp!r}")  # the drained records go with it
            if not take:
                continue
            self.pos[tp] = take[-1] + 1
            drained[tp] = [SimpleNamespace(offset=o, key=None, value=b"") for o in take]
            left -= len(take)
            if left == 0:
                break
        return drained


def _read_all(consumer) -> tuple[dict, list]:
    got: dict = {p.partition: [] for p in consumer.tps}
    skipped: list = []

    async def go():
        for _ in range(200):
            batch = await getmany_skipping_bad_input(consumer, lambda tp, off, reason, exc: skipped.append(
                (tp.partition, off, reason)), timeout_ms=0, max_records=100)
            for tp, msgs in batch.items():
                got[tp.partition].extend(m.offset for m in msgs)
            if all(consumer.pos[tp] >= N for tp in consumer.tps):
                return

    asyncio.run(go())
    return got, skipped


def test_a_corrupt_batch_on_one_partition_loses_no_record_of_the_partitions_drained_before_it():
    bad = {2: range(12, 16)}
    consumer = DrainingConsumer(bad, order=[0, 1, 2])  # 0 and 1 are drained before 2 raises
    got, skipped = _read_all(consumer)
    assert got[0] == list(range(N)) and got[1] == list(range(N))  # every record once, in order
    assert got[2] == [o for o in range(N) if o not in bad[2]]
    assert skipped == [(2, o, "corrupt") for o in range(12, 16)]
    # each of the 4 failed calls drained 10..14 of partitions 0 and 1 first: both put back at 10;
    # the bad partition is passed one offset at a time
    assert consumer.seeks == [s for o in range(13, 17) for s in ((0, 10), (1, 10), (2, o))]


def test_fetch_positions_reads_only_valid_positions():
    consumer = DrainingConsumer({}, order=[0, 1])
    consumer.pos[TopicPartition(TOPIC, 1)] = 7
    assert fetch_positions(consumer) == {TopicPartition(TOPIC, 0): 0, TopicPartition(TOPIC, 1): 7}
    assert fetch_positions(SimpleNamespace()) == {}
