"""Kafka connection options and the raw readers the workers share, on aiokafka.

The workers themselves run on the one consumer loop of :mod:`stream.workers.loop` (no Faust:
``bench/stream_throughput.py`` measured a bare Faust agent, which only iterates and acks, at a
fraction of what the raw aiokafka client reads; README, *Architecture*). This module holds
:func:`aiokafka_options` (bootstrap servers and the ``PREFSTREAM_*`` security options) and the
small asyncio helpers that read a topic *outside* the consumer group (:func:`read_latest`,
:class:`TopicFollower`): every worker needs the whole compacted item catalog and the explainer
needs every model snapshot, whatever partitions the group gives it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from typing import Any, Callable

from learners.exceptions import InvalidParameterError

__all__ = ["TopicFollower", "aiokafka_options", "env_int", "read_latest"]

log = logging.getLogger(__name__)

def _ssl_context(settings) -> ssl.SSLContext | None:
    from stream.broker.diagnose import ssl_context

    return ssl_context(settings.security_protocol, settings.ssl_cafile)


def aiokafka_options(settings) -> dict[str, Any]:
    """Connection keyword arguments for ``aiokafka.AIOKafkaConsumer``/``AIOKafkaProducer``."""
    opts: dict[str, Any] = {
        "bootstrap_servers": [s.strip() for s in settings.bootstrap_servers.split(",") if s.strip()],
        "security_protocol": settings.security_protocol,
        "client_id": settings.client_id,
    }
    if settings.sasl_mechanism:
        opts["sasl_mechanism"] = settings.sasl_mechanism
    if settings.sasl_username is not None:
        opts["sasl_plain_username"] = settings.sasl_username
    if settings.sasl_password is not None:
        opts["sasl_plain_password"] = settings.sasl_password
    ctx = _ssl_context(settings)
    if ctx is not None:
        opts["ssl_context"] = ctx
    return opts


# ------------------------------------------------------------------------- raw readers
async def read_latest(settings, topic: str, timeout: float = 60.0,
                      keep: Callable[[bytes | None], bool] | None = None) -> dict[bytes, bytes | None]:
    """Latest value per key of a (compacted) topic, read from the beginning to the current end.

    Parameters
    ----------
    settings : Settings
    topic : str
    timeout : float, default 60
        Seconds before giving up.
    keep : callable ``(key) -> bool``, optional
        Only keep keys for which it returns True (saves memory on a large model topic).

    Returns
    -------
    dict of bytes to bytes or None
        ``None`` values are tombstones.

    Raises
    ------
    TimeoutError
        If the end is not reached within ``timeout`` seconds.
    """
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(enable_auto_commit=False, group_id=None, fetch_max_bytes=64 * 1024 * 1024,
                                max_partition_fetch_bytes=16 * 1024 * 1024, **aiokafka_options(settings))
    await consumer.start()
    out: dict[bytes, bytes | None] = {}
    try:
        parts = await _partitions(consumer, topic, timeout)
        tps = [TopicPartition(topic, p) for p in parts]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            pending = [tp for tp in tps if await consumer.position(tp) < ends[tp]]
            if not pending:
                break
            if loop.time() > deadline:
                raise TimeoutError(f"Reading topic {topic!r} to its end took more than {timeout:g} s.")
            batch = await consumer.getmany(*pending, timeout_ms=500)
            for msgs in batch.values():
                for m in msgs:
                    if keep is None or keep(m.key):
                        out[m.key] = m.value
    finally:
        await consumer.stop()
    return out


async def _partitions(consumer, topic: str, timeout: float) -> list[int]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        parts = consumer.partitions_for_topic(topic)
        if parts:
            return sorted(parts)
        await consumer._client.force_metadata_update()  # noqa: SLF001 - aiokafka has no public refresh
        parts = consumer.partitions_for_topic(topic)
        if parts:
            return sorted(parts)
        if loop.time() > deadline:
            raise TimeoutError(f"Topic {topic!r} does not exist; create it with `prefstream topics create`.")
        await asyncio.sleep(0.5)


class TopicFollower:
    """Follow every partition of a topic from the beginning, outside any consumer group.

    Parameters
    ----------
    settings : Settings
    topic : str
    on_message : callable ``(key, value, partition, offset) -> None``
        Called in the event loop for each record.
    name : str
        For log messages.
    metrics : Metrics, optional
        Where corrupt records skipped are counted (``prefstream_input_errors_total``); they are
        always logged.

    Attributes
    ----------
    caught_up : asyncio.Event
        Set once the follower reached the end offsets it saw at start.
    start_ends : dict of int to int
        Those end offsets per partition (records at or above them arrived while running).
    """

    def __init__(self, settings, topic: str, on_message: Callable, name: str = "", metrics=None) -> None:
        self.settings = settings
        self.metrics = metrics
        self.topic = topic
        self.on_message = on_message
        self.name = name or topic
        self.caught_up = asyncio.Event()
        self.start_ends: dict[int, int] = {}
        self._stopping = False

    async def run(self) -> None:
        """Consume until :meth:`stop`; reconnects after errors (logged)."""
        from aiokafka import AIOKafkaConsumer, TopicPartition

        from stream.broker.bad_input import getmany_skipping_bad_input

        while not self._stopping:
            consumer = AIOKafkaConsumer(enable_auto_commit=False, group_id=None,
                                        max_partition_fetch_bytes=16 * 1024 * 1024, **aiokafka_options(self.settings))
            try:
                await consumer.start()
                parts = await _partitions(consumer, self.topic, timeout=3600)
                tps = [TopicPartition(self.topic, p) for p in parts]
                consumer.assign(tps)
                await consumer.seek_to_beginning(*tps)
                ends = await consumer.end_offsets(tps)
                if not self.start_ends:  # records below these were there when the worker started
                    self.start_ends = {tp.partition: int(off) for tp, off in ends.items()}
                while not self._stopping:
                    if not self.caught_up.is_set():
                        if all([await consumer.position(tp) >= ends[tp] for tp in tps]):
                            self.caught_up.set()
                    # corrupt or undecodable records are counted and skipped by offset, as in the
                    # workers' consumer loop (stream.broker.bad_input), never a follower stuck for good
                    batch = await getmany_skipping_bad_input(consumer, self._input_error, timeout_ms=200)
                    for tp, msgs in batch.items():
                        for m in msgs:
                            try:
                                self.on_message(m.key, m.value, m.partition, m.offset)
                            except Exception:  # one bad record must not stop the follower
                                log.exception("%s: handler failed on %s[%d]@%d", self.name, self.topic, m.partition, m.offset)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: follower of %s failed; retrying in 1 s", self.name, self.topic)
                await asyncio.sleep(1.0)
            finally:
                try:
                    await consumer.stop()
                except Exception:
                    pass

    def _input_error(self, tp, offset: int, reason: str, exc: BaseException) -> None:
        if self.metrics is not None:
            self.metrics.input_errors.labels(topic=tp.topic, reason=reason).inc()
        log.error("%s: skipping %s record at %s[%d]@%d: %s", self.name, reason, tp.topic, tp.partition, offset, exc)

    def stop(self) -> None:
        """Ask :meth:`run` to return."""
        self._stopping = True


def env_int(name: str, default: int) -> int:
    """An integer from the environment variable ``name`` (``default`` if unset or empty)."""
    v = os.environ.get(name, "").strip()
    if not v:
        return default
    try:
        return int(v)
    except ValueError:
        raise InvalidParameterError(f"The environment variable {name} must be an integer. Got {v!r} instead.") from None
