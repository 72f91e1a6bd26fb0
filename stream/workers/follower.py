"""Follow a whole topic outside any consumer group, on the workers' micro-batch loop.

Every worker needs the whole compacted item catalog, the explainer and ``prefstream serve`` need
every model snapshot, whatever partitions the group gives them: a :class:`TopicFollower` assigns
itself every partition of one topic from the beginning and hands each micro-batch to its
:meth:`~TopicFollower.handle`. The batching and the corrupt-input path (counted, logged, skipped
by offset, never fatal) are :class:`stream.workers.loop.MicroBatchLoop`'s, the same as the group
workers'. It has no commits, no generations and no producer: a follower always reads from the
beginning, and nothing it does is delivered anywhere but into its worker's memory.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

from stream.workers.loop import MicroBatchLoop

__all__ = ["TopicFollower"]

log = logging.getLogger(__name__)


class TopicFollower(MicroBatchLoop):
    """Read every partition of ``topic`` from the beginning until :attr:`stop` is set.

    Parameters
    ----------
    settings : Settings
        Connection options, ``batch_max_events`` and ``batch_max_ms``.
    topic : str
    on_message : callable ``(key, value, partition, offset) -> None``
        Called in the event loop for each record by the default :meth:`handle`; an exception
        there is logged and the follower goes on with the next record.
    name : str
        For log messages.
    metrics : Metrics, optional
        Where corrupt records skipped are counted (``prefstream_input_errors_total``).

    Attributes
    ----------
    caught_up : asyncio.Event
        Set once the follower reached the end offsets it saw at start.
    start_ends : dict of int to int
        Those end offsets per partition (records at or above them arrived while running).
    missing : bool
        True while the topic does not exist on the broker (the follower waits for it to be created;
        logged once as a WARNING naming the topic and ``prefstream topics create``).
    """

    def __init__(self, settings, topic: str, on_message: Callable, name: str = "", metrics=None) -> None:
        super().__init__(settings, metrics)
        self.topic = topic
        self.on_message = on_message
        self.name = name or topic
        self.caught_up = asyncio.Event()
        self.start_ends: dict[int, int] = {}
        self.missing = False

    def handle(self, batch: dict) -> None:
        """Pass each record of a micro-batch ``{tp: [(offset, value, None, arrived, key)]}`` to ``on_message``."""
        for tp, records in batch.items():
            for offset, value, _, _, key in records:
                try:
                    self.on_message(key, value, tp.partition, offset)
                except Exception:  # noqa: BLE001 - one bad record must not stop the follower
                    log.exception("%s: handler failed on %s[%d]@%d", self.name, tp.topic, tp.partition, offset)

    def _on_missing(self) -> None:
        self.missing = True
        log.warning("%s: topic %s does not exist on the broker; waiting for it (create it with `prefstream "
                    "topics create`, or serve a demo's topics with the command `prefstream demo --keep` prints)",
                    self.name, self.topic)

    async def run(self) -> None:
        """Consume until :attr:`stop` is set; reconnects after errors (logged)."""
        from aiokafka import AIOKafkaConsumer, TopicPartition

        from stream.broker.clients import aiokafka_options, wait_for_partitions

        self.read_formats([self.topic])
        while not self.stop.is_set():
            self.consumer = consumer = AIOKafkaConsumer(
                enable_auto_commit=False, group_id=None, max_partition_fetch_bytes=16 * 1024 * 1024,
                **aiokafka_options(self.settings))
            try:
                await consumer.start()
                parts = await wait_for_partitions(consumer, self.topic, timeout=3600, on_missing=self._on_missing)
                self.missing = False
                tps = [TopicPartition(self.topic, p) for p in parts]
                consumer.assign(tps)
                await consumer.seek_to_beginning(*tps)
                ends = await consumer.end_offsets(tps)
                if not self.start_ends:  # records below these were there when the worker started
                    self.start_ends = {tp.partition: int(off) for tp, off in ends.items()}
                while not self.stop.is_set():
                    if not self.caught_up.is_set():
                        if all([await consumer.position(tp) >= ends[tp] for tp in tps]):
                            self.caught_up.set()
                    batch = await self.collect()
                    if batch:
                        batch = await self.wire_decode(batch)
                    if batch:
                        self.handle(batch)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - a follower reconnects rather than leave its worker blind
                log.exception("%s: follower of %s failed; retrying in 1 s", self.name, self.topic)
                await asyncio.sleep(1.0)
            finally:
                try:
                    await consumer.stop()
                except Exception:  # noqa: BLE001
                    pass
