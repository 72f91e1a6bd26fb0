"""Corrupt or undecodable input on a Kafka consumer: counted and skipped by offset, never fatal.

aiokafka raises from ``getmany`` when a record batch fails its CRC check
(``CorruptRecordException``), and raises it again on every later call for the same batch
(aiokafka#321): a consumer that lets it through stops for good. Every prefstream reader —
the workers' consumer loop (:mod:`stream.workers.loop`) and the group-less followers
(:class:`stream.workers.follower.TopicFollower`) — fetches through :func:`getmany_skipping_bad_input`, which
keeps the good records around a bad batch and passes the bad offsets one by one.
"""

from __future__ import annotations

import re
import struct
from typing import Any, Callable

__all__ = ["INPUT_ERROR_REASONS", "bad_input_reason", "fetch_positions", "getmany_skipping_bad_input", "named_partition"]

#: the ``reason`` label values of ``prefstream_input_errors_total`` (:func:`bad_input_reason`)
INPUT_ERROR_REASONS = ("corrupt", "codec", "undecodable")

_TP = re.compile(r"TopicPartition\(topic='([^']*)', partition=(\d+)\)")


def bad_input_reason(exc: BaseException) -> str | None:
    """``"corrupt"``, ``"codec"`` or ``"undecodable"`` for an exception ``getmany`` raised on input;
    None for anything else (connection, authorisation, ...), which the loop does not skip."""
    from aiokafka.errors import CorruptRecordException, UnsupportedCodecError

    if isinstance(exc, CorruptRecordException):
        return "corrupt"
    if isinstance(exc, UnsupportedCodecError):
        return "codec"
    if isinstance(exc, (struct.error, UnicodeDecodeError, EOFError, ValueError, IndexError)):
        return "undecodable"
    return None


def named_partition(exc: BaseException):
    """The ``TopicPartition`` an aiokafka error message names (``"Invalid CRC - TopicPartition(...)"``)."""
    from aiokafka.structs import TopicPartition

    m = _TP.search(str(exc))
    return TopicPartition(m.group(1), int(m.group(2))) if m else None


def fetch_positions(consumer) -> dict:
    """The fetch position of every assigned partition that has one, read without waiting.

    Reads aiokafka's subscription state (``SubscriptionState.subscription.assignment``, the state
    ``AIOKafkaConsumer.position`` reads too) because ``position`` is a coroutine that waits for a
    position being reset; a partition without a valid position is left out.

    Returns
    -------
    dict of TopicPartition to int
    """
    sub = getattr(getattr(consumer, "_subscription", None), "subscription", None)
    assignment = getattr(sub, "assignment", None)
    if assignment is None:
        return {}
    out = {}
    for tp in sorted(assignment.tps):  # a fixed order (a frozenset's follows the string hash seed)
        state = assignment.state_value(tp)
        if state is not None and state.has_valid_position:
            out[tp] = state.position
    return out


async def getmany_skipping_bad_input(consumer, on_error: Callable[[Any, int, str, BaseException], None], *,
                                     timeout_ms: int, max_records: int | None = None) -> dict:
    """``consumer.getmany`` that passes over corrupt or undecodable records instead of raising.

    Parameters
    ----------
    consumer : aiokafka.AIOKafkaConsumer
    on_error : callable ``(tp, offset, reason, exc) -> None``
        Called once per skipped offset (count and log it there).
    timeout_ms, max_records
        As for ``getmany``.

    Returns
    -------
    dict of TopicPartition to list of ConsumerRecord
        Good records, in offset order per partition (those read before a bad one are kept).

    Raises
    ------
    Exception
        Whatever ``getmany`` raises that is not bad input (:func:`bad_input_reason` is None).

    Notes
    -----
    aiokafka drains the partitions of one ``getmany`` one after another, moving each one's
    position past what it drained (``Fetcher.fetched_records``); when the record iterator then
    fails on a bad batch of a later partition, the records drained so far are lost with the
    exception while their partitions' positions have moved past them. Every partition whose
    position moved in the failed call is therefore sought back to where it was before the call
    (:func:`fetch_positions`), and its records are fetched again — without this, a corrupt batch
    on one partition silently dropped records of the others (the chaos benchmark's loss).

    On the bad partition itself, the records the iterator yielded before the bad batch are lost
    with the exception too, but its position has not moved (aiokafka then discards the partly
    read buffer, whose next offset no longer matches the position, and fetches again). So
    the suspect partition is read one record at a time: the records before the bad batch come back
    normally, and when the error repeats with nothing returned the position is exactly the first
    bad offset, which is skipped (``seek(offset + 1)``). A bad batch of k records is passed in k
    fetches (the broker serves the whole batch for any offset inside it).
    """
    before = fetch_positions(consumer)
    try:
        return await consumer.getmany(timeout_ms=timeout_ms, max_records=max_records)
    except Exception as exc:  # noqa: BLE001 - sorted below: only bad input is skipped
        reason = bad_input_reason(exc)
        if reason is None:
            raise
        first = exc
    # the records drained from other partitions before the bad batch went down with the exception,
    # but their positions moved past them: put those partitions back, to be fetched again
    after = fetch_positions(consumer)
    for tp, pos in before.items():
        if after.get(tp, pos) != pos:
            try:
                consumer.seek(tp, pos)
            except Exception:  # noqa: BLE001 - no longer assigned: its new owner reads it from the commit
                pass
    named = named_partition(first)
    suspects = [named] if named is not None else sorted(consumer.assignment())
    out: dict = {}
    budget = max_records or 500
    for tp in suspects:
        if tp not in consumer.assignment():
            continue
        while budget > 0:
            try:
                got = await consumer.getmany(tp, timeout_ms=max(200, min(timeout_ms, 1000)), max_records=1)
            except Exception as exc:  # noqa: BLE001
                reason = bad_input_reason(exc)
                if reason is None:
                    raise
                pos = await consumer.position(tp)
                on_error(tp, pos, reason, exc)
                consumer.seek(tp, pos + 1)
                break
            msgs = got.get(tp, [])
            if not msgs:
                break  # nothing more in hand for this partition (the error was elsewhere, or is gone)
            out.setdefault(tp, []).extend(msgs)
            budget -= len(msgs)
    return out
