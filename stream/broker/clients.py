"""Kafka connection options and the raw readers the workers share, on aiokafka.

The workers themselves run on the one consumer loop of :mod:`stream.workers.loop` (no Faust:
``bench/stream_throughput.py`` measured a bare Faust agent, which only iterates and acks, at a
fraction of what the raw aiokafka client reads; README, *Architecture*). This module holds
:func:`aiokafka_options` (bootstrap servers and the ``PREFSTREAM_*`` security options) and the
one-shot reader of a whole topic outside the consumer group (:func:`read_latest`); the followers
that keep reading one are :class:`stream.workers.follower.TopicFollower`, on the workers' loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from typing import Any, Callable

from learners.exceptions import InvalidParameterError

__all__ = ["aiokafka_options", "env_int", "read_latest", "wait_for_partitions"]

log = logging.getLogger(__name__)

def _ssl_context(settings) -> ssl.SSLContext | None:
    from stream.broker.diagnose import ssl_context

    return ssl_context(settings.security_protocol, settings.ssl_cafile)


def no_auto_create_aiokafka() -> None:
    """Make aiokafka's metadata requests ask the broker NOT to create the topics they name.

    aiokafka (0.14) has no ``allow_auto_create_topics`` option: its ``MetadataRequest`` (v4+)
    always sends ``allow_auto_topic_creation=True``, so a consumer subscribing to, or a producer
    sending to, a misspelt topic has a broker with ``auto.create.topics.enable=true`` create it.
    The request's default is set to False here, once per process (prefstream's clients never
    create topics: ``prefstream topics create`` does; issue 30).
    """
    from aiokafka.protocol import metadata

    cls = metadata.MetadataRequest
    if getattr(cls, "_prefstream_no_auto_create", False):
        return
    init = cls.__init__

    def __init__(self, topics=None, allow_auto_topic_creation=False):
        init(self, topics, allow_auto_topic_creation)

    cls.__init__ = __init__
    cls._prefstream_no_auto_create = True


def aiokafka_options(settings) -> dict[str, Any]:
    """Connection keyword arguments for ``aiokafka.AIOKafkaConsumer``/``AIOKafkaProducer`` (whose
    metadata requests never auto-create a topic: :func:`no_auto_create_aiokafka`)."""
    no_auto_create_aiokafka()
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
        parts = await wait_for_partitions(consumer, topic, timeout)
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


async def wait_for_partitions(consumer, topic: str, timeout: float, on_missing=None) -> list[int]:
    """The sorted partition ids of ``topic``, refreshing metadata until it exists (``TimeoutError`` after ``timeout`` s).

    ``on_missing`` (optional, no arguments) is called once when a fresh metadata read shows no such topic,
    before the waiting starts (a follower reports the missing topic instead of "still reading" it).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    said = False
    while True:
        parts = consumer.partitions_for_topic(topic)
        if parts:
            return sorted(parts)
        await consumer._client.force_metadata_update()  # noqa: SLF001 - aiokafka has no public refresh
        parts = consumer.partitions_for_topic(topic)
        if parts:
            return sorted(parts)
        if on_missing is not None and not said:
            said = True
            on_missing()
        if loop.time() > deadline:
            raise TimeoutError(f"Topic {topic!r} does not exist; create it with `prefstream topics create`.")
        await asyncio.sleep(0.5)


def env_int(name: str, default: int) -> int:
    """An integer from the environment variable ``name`` (``default`` if unset or empty)."""
    v = os.environ.get(name, "").strip()
    if not v:
        return default
    try:
        return int(v)
    except ValueError:
        raise InvalidParameterError(f"The environment variable {name} must be an integer. Got {v!r} instead.") from None
