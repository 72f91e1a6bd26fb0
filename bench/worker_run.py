"""Shared teardown of the benchmarks that start a worker process on a real broker."""

from __future__ import annotations

import signal
import subprocess


def stop_worker(worker: subprocess.Popen, timeout: float = 20.0) -> None:
    """SIGTERM (the worker publishes its final snapshots), then SIGKILL after ``timeout`` seconds."""
    worker.send_signal(signal.SIGTERM)
    try:
        worker.wait(timeout)
    except subprocess.TimeoutExpired:
        worker.kill()


def delete_topics(opts: dict, names) -> None:
    """Delete the run's topics (best effort: a benchmark's result does not depend on it)."""
    try:
        from kafka.admin import KafkaAdminClient

        a = KafkaAdminClient(**opts)
        a.delete_topics(list(names))
        a.close()
    except Exception:  # noqa: BLE001 - the broker may be gone already
        pass


#: topic kinds a learner-worker benchmark run creates (settings ``topic_<kind>``)
RUN_TOPIC_KINDS = ("preferences", "clicks", "items", "models", "explain_requests", "explanations", "dead_letters")


def create_run_topics(prefix: str, bootstrap: str, partitions: int = 1, kinds=RUN_TOPIC_KINDS,
                      preferences_config: dict | None = None) -> tuple[dict, dict, str]:
    """Fresh topics ``<prefix>.<kind>.<run id>`` for one benchmark run.

    The models topic is compacted with an 8 MiB message limit, the items topic compacted, the
    preferences topic has ``partitions`` partitions (and ``preferences_config``, e.g. a small
    ``segment.bytes``), the others one. ``kinds``: the topic kinds (``RUN_TOPIC_KINDS``; add
    ``"drift"`` when an explainer runs).

    Returns
    -------
    (topics, opts, run_id)
        ``{kind: topic name}``, the kafka-python client options, and the 8-hex run id.
    """
    import uuid

    from stream.broker import TopicSpec, create_topics

    u = uuid.uuid4().hex[:8]
    topics = {k: f"{prefix}.{k}.{u}" for k in kinds}
    specs = {v: TopicSpec(partitions if k == "preferences" else 1,
                          {"cleanup.policy": "compact", "max.message.bytes": "8388608"} if k == "models" else
                          ({"cleanup.policy": "compact"} if k == "items" else
                           dict(preferences_config or {}) if k == "preferences" else {}))
             for k, v in topics.items()}
    opts = {"bootstrap_servers": bootstrap}
    create_topics(None, specs, client_options=opts)
    return topics, opts, u


def metrics_text(port: int, timeout: float = 2.0) -> str:
    """The worker's Prometheus exposition on ``127.0.0.1:port`` ("" when it does not answer)."""
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout) as resp:
            return resp.read().decode()
    except OSError:
        return ""


def latest_snapshots(opts: dict, topic: str, timeout_ms: int = 1500) -> dict:
    """``{key: value}`` of the model topic's latest record per key (partition 0, read to its end;
    tombstones kept as None), with kafka-python client options ``opts``."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(enable_auto_commit=False, group_id=None, consumer_timeout_ms=timeout_ms,
                      max_partition_fetch_bytes=32 << 20, **opts)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    latest = {}
    for m in c:
        latest[m.key] = m.value
    c.close()
    return latest

