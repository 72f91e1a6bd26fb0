"""Nothing silently dropped on output: fit every record to its topic, or dead-letter it as ``oversize``.

A Kafka topic refuses a record larger than its ``max.message.bytes``; the producer then fails
*after* the worker handed the record over, so without care the record vanishes (issue 12: the
explainer logged Faust's ``MessageSizeTooLargeError``, counted the explanation as emitted, and
neither it nor a dead letter reached Kafka). The workers therefore publish through this module:

1. :class:`OutputLimits` knows each output topic's limit: the ``max_output_bytes`` setting, else
   the topic's effective ``max.message.bytes`` read once from the broker
   (:func:`stream.broker.topic_max_message_bytes`), else 1 MiB; minus :data:`RECORD_OVERHEAD`
   bytes for the record batch framing and the key.
2. :func:`fit_explanation` serialises an explanation record; if it is too large it drops the
   optional heavy fields — ``extra`` entries, largest first, then ``data`` — and lists what it
   dropped in the record's ``"truncated"`` field (``explanation.v1`` allows extra top-level
   fields). If even the bare record (names, values, base value) does not fit, it returns
   ``None``: the caller dead-letters it with reason ``oversize`` (:func:`oversize_dead_letter`)
   and counts ``prefstream_explanations_skipped_total{reason="oversize"}``.
3. :func:`fit_dead_letter` applies the same rule to dead letters: their raw payload is cut
   (``payload_truncated``) until the record fits the dead-letter topic.
4. :func:`send_explanation` sends through a topic (:class:`ProducerTopic` over aiokafka) and counts
   ``prefstream_explanations_total`` in the **delivery** callback, so the counter means
   "delivered to Kafka"; a record the broker still refuses as too large is dead-lettered as
   ``oversize`` from that callback, any other failed delivery is counted as skipped
   (``reason="delivery"``) and logged.

Model snapshots follow the rule at encoding time: :func:`stream.contract.encode_snapshot`
refuses a state over ``max_snapshot_bytes`` (keep it ≤ the model topic's ``max.message.bytes``)
with a message naming both limits, and the learner retries later instead of acknowledging.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Mapping

import orjson

from stream.contract import dead_letter_record

__all__ = ["DEFAULT_LIMIT", "RECORD_OVERHEAD", "OutputLimits", "ProducerTopic", "fit_dead_letter", "fit_explanation",
           "oversize_dead_letter", "send_explanation"]

log = logging.getLogger(__name__)

#: Limit used when neither the setting nor the broker says (Kafka's default max.message.bytes ≈ 1 MiB).
DEFAULT_LIMIT = 1_048_576
#: Bytes kept free for the record batch header (61), the record framing and headers.
RECORD_OVERHEAD = 512


class OutputLimits:
    """Largest value, in bytes, that each output topic accepts (cached per topic).

    Parameters
    ----------
    settings : Settings
        ``max_output_bytes`` (a fixed limit for every output topic) or the connection to ask
        the broker.
    lookup : callable, optional
        ``lookup(topic) -> int | None``; default asks the broker once per topic.
    """

    def __init__(self, settings, lookup=None) -> None:
        self.settings = settings
        self._lookup = lookup
        self._cache: dict[str, int] = {}

    def _ask_broker(self, topic: str) -> int | None:
        from stream.broker import topic_max_message_bytes

        try:
            return topic_max_message_bytes(topic, client_options=self.settings.kafka_client_options())
        except Exception as exc:  # noqa: BLE001 - an unknown limit falls back to the default
            log.warning("cannot read max.message.bytes of %s (%s); assuming %d", topic, exc, DEFAULT_LIMIT)
            return None

    def value_limit(self, topic: str, key: bytes | None = None) -> int:
        """Largest serialised value for ``topic`` with this ``key``."""
        if topic not in self._cache:
            fixed = getattr(self.settings, "max_output_bytes", None)
            limit = fixed or (self._lookup or self._ask_broker)(topic) or DEFAULT_LIMIT
            self._cache[topic] = int(limit)
        return max(self._cache[topic] - RECORD_OVERHEAD - (len(key) if key else 0), 256)


def _dumps(record: Mapping[str, Any]) -> bytes:
    """Compact JSON bytes of an output record: orjson (~10x the standard library's encoder, which was
    5.6 % of the explainer's CPU at 1 % of 10,000 events/s), the standard library for what orjson refuses
    (integers beyond 64 bits, non-string keys).

    Examples
    --------
    >>> _dumps({"a": [1.5, None], "b": "é"})
    b'{"a":[1.5,null],"b":"\xc3\xa9"}'
    >>> _dumps({1: 2**70})
    b'{"1":1180591620717411303424}'
    """
    try:
        return orjson.dumps(record)
    except TypeError:
        return json.dumps(record, separators=(",", ":")).encode("utf-8")


def fit_explanation(record: Mapping[str, Any], limit: int) -> bytes | None:
    """The record as bytes within ``limit``, dropping heavy optional fields if needed; None if impossible.

    Parameters
    ----------
    record : dict
        An ``explanation.v1`` record (not modified).
    limit : int
        Largest value size in bytes (:meth:`OutputLimits.value_limit`).

    Returns
    -------
    bytes or None
        JSON bytes; when fields were dropped, the record carries ``"truncated": [names]``
        (``"extra.<key>"`` and/or ``"data"``).

    Examples
    --------
    >>> rec = {"request_id": "q", "values": [0.5], "extra": {"small": 1, "big": "x" * 500}, "data": [1.0]}
    >>> json.loads(fit_explanation(rec, 200))["truncated"]
    ['extra.big']
    >>> fit_explanation(rec, 20) is None
    True
    """
    value = _dumps(record)
    if len(value) <= limit:
        return value
    rec = dict(record)
    extra = dict(rec.get("extra") or {}) if isinstance(rec.get("extra"), Mapping) else {}
    dropped: list[str] = []
    heavy = sorted(extra, key=lambda k: len(_dumps({"v": extra[k]})), reverse=True)
    for k in heavy + ["<data>"]:
        if k == "<data>":
            if rec.get("data") is None:
                continue
            rec["data"] = None
            dropped.append("data")
        else:
            del extra[k]
            dropped.append(f"extra.{k}")
        rec["extra"] = extra
        rec["truncated"] = dropped
        value = _dumps(rec)
        if len(value) <= limit:
            return value
    return None


def oversize_dead_letter(value: bytes, record: Mapping[str, Any], topic: str, limit: int) -> dict:
    """Dead letter (reason ``oversize``) for an output record that cannot be made to fit ``topic``."""
    detail = (f"The {record.get('method', 'output')} record for {record.get('request_id')!r} of model "
              f"{record.get('model_name')!r} is {len(value)} bytes even without its optional fields; the topic "
              f"{topic} takes {limit}. Raise the topic's max.message.bytes (or max_output_bytes), or explain "
              "fewer features (feature groups).")
    return dead_letter_record(value, "oversize", detail, topic, None, None, max_payload_bytes=min(len(value), 4096))


def fit_dead_letter(dl: Mapping[str, Any], limit: int) -> bytes:
    """A dead-letter record as bytes within ``limit``: its payload is cut further if needed.

    The reason, detail and source coordinates always survive; ``payload_truncated`` says that the
    payload is a prefix.
    """
    value = _dumps(dl)
    if len(value) <= limit:
        return value
    rec = dict(dl)
    payload = rec.get("payload") or ""
    keep = max(0, len(payload) - (len(value) - limit) - 64)
    while True:
        rec["payload"] = payload[:keep]
        rec["payload_truncated"] = True
        value = _dumps(rec)
        if len(value) <= limit or keep == 0:
            return value
        keep //= 2


class ProducerTopic:
    """A topic of an ``aiokafka.AIOKafkaProducer`` with the two methods of a ``faust.Topic`` used here.

    Parameters
    ----------
    producer : aiokafka.AIOKafkaProducer
    name : str
    fmt : wire format, optional
        A :mod:`stream.broker.serializers` format: the JSON values are framed in it (the Confluent
        header of a JSON Schema or an Avro record) before they are sent; None = plain JSON.
    """

    def __init__(self, producer, name: str, fmt=None) -> None:
        self.producer = producer
        self.name = name
        self.fmt = None if fmt is None or fmt.name == "json" else fmt

    def get_topic_name(self) -> str:
        return self.name

    async def send(self, key=None, value=None):
        """Hand the record to the producer; returns its delivery future."""
        if self.fmt is not None and value is not None:
            value = self.fmt.frame_or_json(value)
        return await self.producer.send(self.name, key=key, value=value)


async def send_explanation(topic, record: Mapping[str, Any], metrics, limits: OutputLimits,
                           dead_letter_topic, wait: bool = False) -> str:
    """Publish one explanation record (fitted) or its ``oversize`` dead letter; count on delivery.

    Parameters
    ----------
    topic, dead_letter_topic : faust.Topic or ProducerTopic
        The explanations and dead-letter topics (raw bytes).
    record : dict
    metrics : Metrics
    limits : OutputLimits
    wait : bool, default False
        Return only once the record is delivered (or failed; the failure is counted, not raised).

    Returns
    -------
    str
        ``"sent"`` (handed to the producer; counted when delivered) or ``"oversize"``.
    """
    key = str(record["request_id"]).encode()
    limit = limits.value_limit(topic.get_topic_name(), key)
    value = fit_explanation(record, limit)
    method = record.get("method", "unknown")
    def dead_letter(raw: bytes, lim: int):
        dl = oversize_dead_letter(raw, record, topic.get_topic_name(), lim)
        metrics.explanations_skipped.labels(reason="oversize").inc()
        metrics.dead_letters.labels(reason="oversize").inc()
        log.warning("explanation %s/%s is %d bytes, over the %d-byte limit of %s: dead-lettered as oversize",
                    record.get("model_name"), method, len(raw), lim, topic.get_topic_name())
        dl_limit = limits.value_limit(dead_letter_topic.get_topic_name(), key)
        return dead_letter_topic.send(key=key, value=fit_dead_letter(dl, dl_limit))

    if value is None:
        await dead_letter(_dumps(record), limit)
        return "oversize"

    def delivered(fut) -> None:
        exc = fut.exception() if not fut.cancelled() else None
        if exc is not None and type(exc).__name__ == "MessageSizeTooLargeError":
            # the broker's limit was lower than known (e.g. changed since): still not lost
            asyncio.ensure_future(dead_letter(value, len(value) - 1))
        elif fut.cancelled() or exc is not None:
            metrics.explanations_skipped.labels(reason="delivery").inc()
            log.error("explanation %s/%s for %s was not delivered: %r", record.get("model_name"), method,
                      record.get("request_id"), exc)
        else:
            metrics.explanations.labels(method=method).inc()

    fut = await topic.send(key=key, value=value)
    fut.add_done_callback(delivered)
    if wait:
        await asyncio.wait([fut])
    return "sent"
