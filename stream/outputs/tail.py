"""Follow explanation records (``prefstream tail``).

:func:`follow` reads the explanation topic with kafka-python, outside any consumer group (every
partition, from the end by default, or from the beginning), and yields the decoded records;
:func:`format_record` renders one record for a terminal.

Examples
--------
>>> rec = {"request_id": "e1", "model_name": "linear-bt", "model_version": 3, "method": "linear-shapley",
...        "feature_names": ["price", "rating"], "values": [-0.5, 1.25], "base_value": 0.0, "prediction": 0.75}
>>> print(format_record(rec, top=2))
e1  linear-bt v3  linear-shapley  prediction=0.75 base=0
    rating  +1.25
    price   -0.5
"""

from __future__ import annotations

import json
import time
from typing import Iterator

__all__ = ["follow", "format_record"]


def follow(settings, max_records: int | None = None, timeout: float | None = None,
           from_beginning: bool = False) -> Iterator[dict]:
    """Yield explanation records from ``settings.topic_explanations`` as they arrive.

    Parameters
    ----------
    settings : Settings
    max_records : int, optional
        Stop after this many records.
    timeout : float, optional
        Stop when no record arrived for this many seconds.
    from_beginning : bool, default False
        Start at the earliest offsets instead of the end.

    Yields
    ------
    dict
        One explanation record (undecodable messages are yielded as ``{"error": ..., "raw": ...}``).
    """
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(enable_auto_commit=False, group_id=None, allow_auto_create_topics=False,
                             **settings.kafka_client_options())
    try:
        deadline = time.monotonic() + 30
        parts = None
        while not parts:
            parts = consumer.partitions_for_topic(settings.topic_explanations)
            if not parts:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"Topic {settings.topic_explanations!r} does not exist; "
                                       "create it with `prefstream topics create`.")
                time.sleep(0.5)
        tps = [TopicPartition(settings.topic_explanations, p) for p in sorted(parts)]
        consumer.assign(tps)
        if from_beginning:
            consumer.seek_to_beginning(*tps)
        else:
            consumer.seek_to_end(*tps)
        n = 0
        framed = getattr(settings, "format_explanations", "json") != "json"
        last = time.monotonic()
        while max_records is None or n < max_records:
            batch = consumer.poll(timeout_ms=200)
            got = False
            for msgs in batch.values():
                for m in msgs:
                    got = True
                    try:  # format_explanations=jsonschema: the JSON after the Confluent header
                        rec = json.loads(m.value[5:] if framed and m.value[:1] == b"\x00" else m.value)
                    except (TypeError, ValueError) as exc:
                        rec = {"error": str(exc), "raw": repr(m.value)[:200]}
                    yield rec
                    n += 1
                    if max_records is not None and n >= max_records:
                        return
            if got:
                last = time.monotonic()
            elif timeout is not None and time.monotonic() - last > timeout:
                return
    finally:
        consumer.close()


def format_record(rec: dict, top: int = 5) -> str:
    """One record as a header line plus the ``top`` features by |value|."""
    if "error" in rec and "values" not in rec:
        return f"<undecodable record: {rec['error']}>"

    def num(v):
        return "null" if v is None else f"{v:.4g}"

    head = (f"{rec.get('request_id')}  {rec.get('model_name')} v{rec.get('model_version')}  {rec.get('method')}  "
            f"prediction={num(rec.get('prediction'))} base={num(rec.get('base_value'))}")
    pairs = [(n, v) for n, v in zip(rec.get("feature_names") or [], rec.get("values") or []) if v is not None]
    pairs.sort(key=lambda p: -abs(p[1]))
    width = max((len(n) for n, _ in pairs[:top]), default=0)
    lines = [head] + [f"    {n:<{width}}  {v:+.4g}" for n, v in pairs[:top]]
    return "\n".join(lines)
