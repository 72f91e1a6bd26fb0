"""The dead-letter topic as an operator reads it: summary, export and re-drive (``prefstream dead-letters``).

Issue 30 item 4. The workers write one ``dead_letter.v1.json`` record per refused message
(:func:`stream.contract.dead_letter_record`: reason, detail, source topic / partition / offset, the
raw payload as UTF-8 or base64). This module reads the whole topic and

* **summarises** it by ``(reason, source_topic)``: count, the first and last dead-letter offsets
  (``partition:offset``), a sample payload (:func:`summarize`);
* **exports** the records as JSON lines, each with its place on the dead-letter topic
  (:func:`export`);
* **re-drives** them (:func:`redrive`): the raw payload, byte for byte, back to its source topic,
  keyed by its id (``event_id`` / ``session_id`` / ``item_id`` / ``request_id``, as ``prefstream
  replay`` keys records) and with a header ``prefstream-redrive: <dead-letter topic>:<partition>:<offset>``.

Re-drive is **idempotent by event id**: a dead letter is not sent when its id was already received on
its source topic after it was first dead-lettered (a re-drive, or the producer re-sending it), nor when
its own header marker is already there; payloads without an id (``malformed_json``) are identified by
that marker alone. So a second ``--redrive`` sends nothing new, and an event that fails again after a
re-drive (a new dead letter with the same id) is not sent round again. The check reads the source
topics from the time of the oldest candidate dead letter (``offsets_for_times``) to their end.
Truncated payloads (``oversize``, cut at 256 KiB) and records without a payload cannot be re-driven
and are counted as such.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

__all__ = ["DeadLetterEntry", "REDRIVE_HEADER", "export", "payload_bytes", "payload_id", "read_dead_letters",
           "redrive", "summarize"]

#: Header of a re-driven record: ``<dead-letter topic>:<partition>:<offset>`` of the dead letter it re-sends.
REDRIVE_HEADER = "prefstream-redrive"

_ID_FIELDS = ("event_id", "session_id", "item_id", "request_id")


@dataclass(frozen=True)
class DeadLetterEntry:
    """One record of the dead-letter topic: where it is and what it says (``record`` None: not a dead-letter record)."""

    partition: int
    offset: int
    record: dict | None

    @property
    def marker(self) -> str:
        return f"{self.partition}:{self.offset}"


def _consumer(opts: dict):
    from kafka import KafkaConsumer

    return KafkaConsumer(enable_auto_commit=False, group_id=None, consumer_timeout_ms=1000,
                         max_partition_fetch_bytes=16 << 20, allow_auto_create_topics=False, **opts)


def _read(consumer, tps, starts: dict | None, timeout: float):
    """Every message of ``tps`` from ``starts`` (default: the beginning) to the end offsets seen now."""
    from kafka import TopicPartition

    consumer.assign(tps)
    ends = consumer.end_offsets(tps)
    for tp in tps:
        start = (starts or {}).get(tp)
        if start is None:
            consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, start)
    deadline = time.monotonic() + timeout
    while any(consumer.position(tp) < ends[tp] for tp in tps):
        if time.monotonic() > deadline:
            raise TimeoutError(f"reading {sorted({tp.topic for tp in tps})} took over {timeout:g} s")
        for batch in consumer.poll(timeout_ms=500).values():
            for m in batch:
                if m.offset < ends[TopicPartition(m.topic, m.partition)]:
                    yield m


def read_dead_letters(opts: dict, topic: str, timeout: float = 120.0) -> list[DeadLetterEntry]:
    """Every record of the dead-letter ``topic`` (kafka-python options ``opts``), in partition and offset order."""
    from kafka import TopicPartition

    c = _consumer(opts)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic) or [])]
        out = []
        for m in _read(c, tps, None, timeout):
            try:
                rec = json.loads(m.value) if m.value is not None else None
            except ValueError:
                rec = None
            out.append(DeadLetterEntry(m.partition, m.offset, rec if isinstance(rec, dict) and "reason" in rec else None))
        return sorted(out, key=lambda e: (e.partition, e.offset))
    finally:
        c.close()


def payload_bytes(record: dict) -> bytes | None:
    """The raw payload of a dead-letter record, or None when it has none or it was truncated.

    Examples
    --------
    >>> from stream.contract import dead_letter_record
    >>> payload_bytes(dead_letter_record(b"\\xff\\x00", "malformed_json", "x", "t", 0, 1))
    b'\\xff\\x00'
    >>> payload_bytes(dead_letter_record(b'{"a": 1}', "missing_field", "x", "t", 0, 1))
    b'{"a": 1}'
    """
    if record.get("payload") is None or record.get("payload_truncated"):
        return None
    if record.get("payload_encoding") == "base64":
        return base64.b64decode(record["payload"])
    return str(record["payload"]).encode("utf-8", "surrogatepass")


def payload_id(raw: bytes | None) -> str | None:
    """The id a payload carries (``event_id``, ``session_id``, ``item_id`` or ``request_id``), or None.

    Examples
    --------
    >>> payload_id(b'{"event_id": "e1", "outcome": 3}'), payload_id(b"not json"), payload_id(b'{"item_id": 7}')
    ('e1', None, '7')
    """
    if not raw:
        return None
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    for f in _ID_FIELDS:
        v = doc.get(f)
        if isinstance(v, (str, int)) and not isinstance(v, bool) and str(v):
            return str(v)
    return None


def _select(entries: Iterable[DeadLetterEntry], reason: str | None, source: str | None) -> list[DeadLetterEntry]:
    return [e for e in entries if e.record is not None and (reason is None or e.record.get("reason") == reason)
            and (source is None or e.record.get("source_topic") == source)]


def summarize(entries: list[DeadLetterEntry], reason: str | None = None, source: str | None = None,
              sample_chars: int = 160) -> dict:
    """Counts by ``(reason, source_topic)`` with the first and last dead-letter offset and a sample payload.

    Returns
    -------
    dict
        ``total`` (dead letters selected), ``unreadable`` (records of the topic that are not dead-letter
        records), ``groups``: list of ``{"reason", "source_topic", "count", "first", "last",
        "source_offsets": [min, max], "sample", "sample_encoding", "detail"}``, largest first; ``first`` and
        ``last`` are ``"partition:offset"`` on the dead-letter topic.
    """
    sel = _select(entries, reason, source)
    groups: dict[tuple, dict] = {}
    for e in sel:
        r = e.record
        key = (str(r.get("reason")), str(r.get("source_topic")))
        g = groups.get(key)
        if g is None:
            sample = r.get("payload")
            sample = None if sample is None else (sample if len(sample) <= sample_chars else sample[:sample_chars] + "…")
            g = groups[key] = {"reason": key[0], "source_topic": key[1], "count": 0, "first": e.marker, "last": e.marker,
                               "source_offsets": [None, None], "sample": sample,
                               "sample_encoding": r.get("payload_encoding"), "detail": r.get("detail")}
        g["count"] += 1
        g["last"] = e.marker
        so = r.get("offset")
        if isinstance(so, int):
            lo, hi = g["source_offsets"]
            g["source_offsets"] = [so if lo is None else min(lo, so), so if hi is None else max(hi, so)]
    return {"total": len(sel), "unreadable": sum(1 for e in entries if e.record is None),
            "groups": sorted(groups.values(), key=lambda g: (-g["count"], g["reason"], g["source_topic"]))}


def export(entries: list[DeadLetterEntry], path: str | Path, topic: str, reason: str | None = None,
           source: str | None = None) -> int:
    """Write the selected dead letters to ``path`` as JSON lines (each record plus ``dead_letter_topic``,
    ``dead_letter_partition``, ``dead_letter_offset``); the number written."""
    sel = _select(entries, reason, source)
    with Path(path).open("w", encoding="utf-8") as fh:
        for e in sel:
            fh.write(json.dumps({**e.record, "dead_letter_topic": topic, "dead_letter_partition": e.partition,
                                 "dead_letter_offset": e.offset}) + "\n")
    return len(sel)


def _seen_on_sources(opts: dict, since: dict[str, float], timeout: float) -> tuple[dict[str, dict[str, int]], set[str]]:
    """Per source topic, ``{id: latest timestamp in ms}`` of its records from ``since[topic]`` (unix s) on,
    and every re-drive marker found in their headers."""
    from kafka import TopicPartition

    ids: dict[str, dict[str, int]] = {}
    markers: set[str] = set()
    c = _consumer(opts)
    try:
        for topic, t0 in since.items():
            parts = c.partitions_for_topic(topic)
            if not parts:
                continue
            tps = [TopicPartition(topic, p) for p in sorted(parts)]
            found = c.offsets_for_times({tp: max(0, int(t0 * 1000) - 1000) for tp in tps})
            ends = c.end_offsets(tps)
            starts = {tp: (found[tp].offset if found.get(tp) is not None else ends[tp]) for tp in tps}
            seen = ids.setdefault(topic, {})
            for m in _read(c, tps, starts, timeout):
                for k, v in m.headers or []:
                    if k == REDRIVE_HEADER and v:
                        markers.add(v.decode("utf-8", "replace"))
                i = payload_id(m.value)
                if i is not None:
                    seen[i] = max(seen.get(i, 0), int(m.timestamp))
        return ids, markers
    finally:
        c.close()


def redrive(entries: list[DeadLetterEntry], opts: dict, topic: str, reason: str | None = None,
            source: str | None = None, timeout: float = 120.0) -> dict[str, Any]:
    """Re-send the selected dead letters' raw payloads to their source topics, idempotent by event id.

    Parameters
    ----------
    entries : list of DeadLetterEntry
        :func:`read_dead_letters` of ``topic``.
    opts : dict
        kafka-python client options.
    topic : str
        The dead-letter topic (named in the re-drive header).
    reason, source : str, optional
        Only dead letters of this reason / source topic.

    Returns
    -------
    dict
        ``sent`` (records delivered), ``already_redriven``, ``truncated``, ``no_payload``,
        ``missing_topic`` (source topics that do not exist: not sent), ``by_topic`` ``{topic: sent}``.
    """
    from kafka import KafkaProducer

    sel = _select(entries, reason, source)
    out: dict[str, Any] = {"sent": 0, "already_redriven": 0, "truncated": 0, "no_payload": 0, "missing_topic": 0,
                           "by_topic": {}}
    # per (source topic, id): when it was first dead-lettered (the whole topic's history, not only the selection)
    first_dead: dict[tuple[str, str], float] = {}
    todo = []
    for e in _select(entries, None, None):
        raw = payload_bytes(e.record)
        i = payload_id(raw)
        if i is not None:
            k = (str(e.record.get("source_topic")), i)
            first_dead[k] = min(first_dead.get(k, float("inf")), float(e.record.get("dead_lettered_at") or 0.0))
    for e in sel:
        if e.record.get("payload") is None:
            out["no_payload"] += 1
            continue
        raw = payload_bytes(e.record)
        if raw is None:
            out["truncated"] += 1
            continue
        todo.append((e, raw, payload_id(raw)))
    if not todo:
        return out
    since: dict[str, float] = {}
    for e, _, _ in todo:
        t = str(e.record.get("source_topic"))
        since[t] = min(since.get(t, float("inf")), float(e.record.get("dead_lettered_at") or 0.0))
    from stream.broker import missing_topics

    absent = set(missing_topics(None, sorted(since), client_options=opts))
    seen, markers = _seen_on_sources(opts, {t: s for t, s in since.items() if t not in absent}, timeout)
    producer = KafkaProducer(acks="all", **opts)
    futures = []
    sent_ids: set[tuple[str, str]] = set()
    try:
        for e, raw, i in todo:
            t = str(e.record.get("source_topic"))
            if t in absent:
                out["missing_topic"] += 1
                continue
            marker = f"{topic}:{e.marker}"
            again = marker in markers
            if i is not None:
                first = first_dead.get((t, i), 0.0)
                again = again or seen.get(t, {}).get(i, -1) >= int(first * 1000) or (t, i) in sent_ids
            if again:
                out["already_redriven"] += 1
                continue
            futures.append((t, producer.send(t, value=raw, key=None if i is None else i.encode("utf-8"),
                                             headers=[(REDRIVE_HEADER, marker.encode("utf-8"))])))
            if i is not None:
                sent_ids.add((t, i))
        producer.flush(timeout)
        for t, f in futures:
            f.get(timeout=timeout)   # raises if the broker refused it
            out["sent"] += 1
            out["by_topic"][t] = out["by_topic"].get(t, 0) + 1
    finally:
        producer.close(timeout=10)
    return out
