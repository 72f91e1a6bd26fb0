"""The demo's run-unique topics: read one to its end, delete them afterwards."""

from __future__ import annotations

import logging
import time

__all__ = ["delete_topics", "read_topic"]

log = logging.getLogger(__name__)


def read_topic(topic: str, opts: dict, timeout: float = 30.0) -> list[tuple[bytes | None, bytes | None]]:
    """Every record of ``topic`` from the beginning up to its current end offsets."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(enable_auto_commit=False, group_id=None, consumer_timeout_ms=1000, allow_auto_create_topics=False,
                      **opts)
    try:
        parts = c.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        if not tps:
            return []
        c.assign(tps)
        c.seek_to_beginning(*tps)
        ends = c.end_offsets(tps)
        out = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(c.position(tp) >= ends[tp] for tp in tps):
                break
            for batch in c.poll(timeout_ms=500).values():
                for m in batch:
                    if m.offset < ends[TopicPartition(m.topic, m.partition)]:
                        out.append((m.key, m.value))
        return out
    finally:
        c.close()


def delete_topics(names: list[str], opts: dict, quiet: bool = False) -> None:
    from kafka.admin import KafkaAdminClient

    try:
        admin = KafkaAdminClient(client_id="prefstream-demo-cleanup", **opts)
        try:
            admin.delete_topics(names)
        finally:
            admin.close()
    except Exception as exc:  # noqa: BLE001 - best effort; the names are unique anyway
        (log.debug if quiet else log.warning)("could not delete the demo topics %s: %s", names, exc)

