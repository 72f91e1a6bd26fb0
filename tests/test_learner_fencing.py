"""The learner fenced against its own zombie — deterministic, no broker (the real one: tests/test_workers_kafka.py).

A member the group coordinator has expelled (paused past its session timeout while another
member took its partitions over) must neither publish a snapshot behind the new owner's nor keep
what it learned since its snapshots; and a snapshot that landed after a commit past it anyway
(a round already on the wire when the member froze) must be read on from its own offset, not
from the commit. The fake consumer of tests/test_consumer_loop.py serves in-memory logs and
refuses commits like aiokafka does for an expelled member (``CommitFailedError``).
"""

from __future__ import annotations

import asyncio

from tests.test_consumer_loop import N_PER_PARTITION, log_digest, make_loop


class Refusing:
    """Wraps the fake consumer: while ``refuse`` is set, every commit raises ``CommitFailedError``."""

    def __init__(self, consumer):
        self.inner = consumer
        self.refuse = False
        self.refused = 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def commit(self, offsets):
        if self.refuse:
            from aiokafka.errors import CommitFailedError

            self.refused += 1
            raise CommitFailedError("the group has already rebalanced")
        await self.inner.commit(offsets)


async def fetch_until(loop, pred, limit=400) -> bool:
    """Fetch, handle and run the timed work until ``pred()`` (True) or ``limit`` fetches (False)."""
    for _ in range(limit):
        if pred():
            return True
        gen, batch = await loop.fetch()
        if batch:
            await loop.handle(gen, batch)
        await loop.every_tick()
        pending = [t for t in loop.tasks if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=5)
    return bool(pred())


async def rejoin(loop, consumer) -> None:
    """What aiokafka does after a refused commit: revoke, then assign anew from the committed offsets."""
    tps = set(consumer.logs)
    await loop.on_partitions_revoked(tps)
    consumer.positions = dict(consumer.committed)
    await loop.on_partitions_assigned(tps)


def learned_exactly_once(loop, logs) -> None:
    for tp, log in logs.items():
        st = loop.core.sources[f"{tp.topic}:{tp.partition}"]
        want = log_digest(log)
        for name, slot in st.slots.items():
            assert (name, slot.next_offset, slot.count, slot.digest) == (name, N_PER_PARTITION, N_PER_PARTITION, want)


def models(loop) -> dict:
    return dict(loop.producer.topics.get(loop.settings.topic_models, {}))


def test_an_expelled_learner_publishes_no_snapshot_drops_its_state_and_relearns_from_the_snapshots(monkeypatch):
    loop, fake, logs = make_loop(monkeypatch, rebalance_on=(), partitions=1)
    consumer = loop.consumer = Refusing(fake)
    (tp,) = logs
    src = f"{tp.topic}:{tp.partition}"

    async def go():
        await loop.on_partitions_assigned(set(logs))
        assert await fetch_until(loop, lambda: fake.committed[tp] >= 50)  # snapshots delivered and committed
        before = models(loop)
        published = loop.core.sources[src].published_next
        consumer.refuse = True  # the coordinator expelled us: the next snapshot round must not go out
        gen = loop.generation
        await fetch_until(loop, lambda: loop.paused, limit=40)
        expelled = (models(loop) == before, dict(loop.core.sources), loop.generation > gen, loop.ready.is_set())
        consumer.refuse = False
        await rejoin(loop, fake)
        restored = loop.core.sources[src].next_offset
        await fetch_until(loop, fake.drained)
        return expelled, before, restored == published

    (unchanged, sources, new_gen, ready), before, from_snapshot = asyncio.run(go())
    assert consumer.refused >= 1
    assert unchanged, "the expelled member published a snapshot"
    assert sources == {} and new_gen and not ready, "the expelled member kept its state or kept fetching"
    assert from_snapshot, "not rebuilt from the last delivered snapshots"
    learned_exactly_once(loop, logs)
    assert models(loop) != before  # and the new generation publishes again


def test_a_snapshot_that_landed_behind_the_commit_is_read_on_from_its_own_offset(monkeypatch):
    """A zombie's round delivered after the new owner committed further: the next owner restores that
    older snapshot; reading from the commit would skip every event between the two."""
    loop, fake, logs = make_loop(monkeypatch, rebalance_on=())
    tps = set(logs)

    async def go():
        await loop.on_partitions_assigned(tps)
        assert await fetch_until(loop, lambda: all(fake.committed[tp] >= 50 for tp in tps))
        stale = models(loop)
        stale_at = {tp: loop.core.sources[f"{tp.topic}:{tp.partition}"].published_next for tp in tps}
        assert await fetch_until(loop, lambda: fake.drained() and all(
            st.next_offset >= N_PER_PARTITION and not st.since_snapshot for st in loop.core.sources.values()))
        assert await fetch_until(loop, lambda: all(fake.committed[tp] == N_PER_PARTITION for tp in tps))
        loop.producer.topics[loop.settings.topic_models].update(stale)  # the late, older rounds land last
        await rejoin(loop, fake)
        placed = {tp: fake.positions[tp] for tp in tps}
        await fetch_until(loop, fake.drained)
        return stale_at, placed

    stale_at, placed = asyncio.run(go())
    assert all(50 <= stale_at[tp] < N_PER_PARTITION for tp in tps)
    assert placed == stale_at, "the partitions were not read from the restored snapshots' offsets"
    learned_exactly_once(loop, logs)


def test_shutdown_publishes_a_final_round_after_the_round_in_flight(monkeypatch):
    """SIGTERM while a source's snapshot round is still on the wire: once it lands, a final round
    covers what was learned after its cut (before: the worker stopped with those events learned
    and unpublished, for a restart to learn again)."""
    from stream.contract import decode_snapshot

    loop, consumer, _logs = make_loop(monkeypatch, set())

    class Slow(type(loop.producer)):
        async def send(self, topic, key=None, value=None):
            fut = await super().send(topic, key, value)
            slow = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_later(0.3, slow.set_result, None)
            await asyncio.sleep(0)
            return slow if topic == loop.settings.topic_models else fut

    slow = Slow()
    slow.topics = loop.producer.topics
    loop.producer = slow

    async def go():
        await consumer.start_assignment()
        in_flight = False
        for _ in range(200):
            gen, batch = await loop.fetch()
            if batch:
                await loop.handle(gen, batch)
            if any(st.publishing for st in loop.core.sources.values()):
                in_flight = True
            if in_flight and all(st.since_snapshot > 0 for st in loop.core.sources.values()):
                break  # a round on the wire and events learned after its cut
        assert in_flight
        await loop.final_snapshots(timeout=20)

    asyncio.run(go())
    snaps = {k.decode(): decode_snapshot(v) for k, v in slow.topics[loop.settings.topic_models].items()}
    for src, st in loop.core.sources.items():
        assert st.since_snapshot == 0
        for name in st.slots:
            assert snaps[f"{name}@{src}"]["offsets"][src] == st.next_offset
