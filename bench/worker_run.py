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
