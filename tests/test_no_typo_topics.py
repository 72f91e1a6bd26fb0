"""No typo topics (issue 30 item 3): every command refuses a topic that does not exist, naming it, and
nothing of ours ever has the broker create one."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def broker_topics(kafka_options) -> set:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(client_id="prefstream-test-topics", **kafka_options)
    try:
        return set(admin.list_topics())
    finally:
        admin.close()


def cli(argv, bootstrap, tmp_path, **env):
    return subprocess.run([sys.executable, "-m", "stream", *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PREFSTREAM_BOOTSTRAP_SERVERS": bootstrap,
                                            "PREFSTREAM_STATE_DIR": str(tmp_path / "state"),
                                            "PREFSTREAM_METRICS_PORT": "0", **env})


def test_every_command_refuses_a_missing_topic_and_creates_none(kafka_bootstrap, kafka_options, unique_topic, tmp_path):
    typo = f"test.typo.prefstream.preferencs.{uuid.uuid4().hex[:8]}"
    events = tmp_path / "one.jsonl"
    events.write_text('{"schema_version": 1, "event_id": "e1", "timestamp": 1, "left": {"features": {"a": 1}}, '
                      '"right": {"features": {"a": 2}}, "outcome": 1}\n')
    real = {k: unique_topic(k) for k in ("items", "models", "clicks", "requests", "explanations")}
    base = {"PREFSTREAM_TOPIC_ITEMS": real["items"], "PREFSTREAM_TOPIC_MODELS": real["models"],
            "PREFSTREAM_TOPIC_CLICKS": real["clicks"], "PREFSTREAM_TOPIC_EXPLAIN_REQUESTS": real["requests"],
            "PREFSTREAM_TOPIC_EXPLANATIONS": real["explanations"], "PREFSTREAM_TOPIC_PREFERENCES": typo}
    runs = {
        "replay": (["replay", str(events), "--topic", typo, "--no-progress"], {}),
        "learn": (["worker", "learn"], base),
        "explain": (["worker", "explain"], base),
        "serve": (["serve", "--port", "0"], {**base, "PREFSTREAM_TOPIC_MODELS": typo}),
        "tail": (["tail", "--max", "1"], {**base, "PREFSTREAM_TOPIC_EXPLANATIONS": typo}),
    }
    for name, (argv, env) in runs.items():
        proc = cli(argv, kafka_bootstrap, tmp_path, **env)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert proc.returncode == 2, (name, proc.stdout, proc.stderr)
        assert lines == [f"error: Topic {typo!r} does not exist; create it with `prefstream topics create`."], name
        assert "Traceback" not in proc.stderr
    assert typo not in broker_topics(kafka_options)  # refused, not created


def test_aiokafka_metadata_requests_never_ask_for_auto_creation():
    """aiokafka has no option for it: its MetadataRequest (v4+) asks the broker to auto-create the topics
    it names unless told otherwise; stream.broker.clients tells it otherwise once per process."""
    from aiokafka.protocol.metadata import MetadataRequest, MetadataRequest_v5

    from stream.broker.clients import aiokafka_options
    from stream.settings import Settings

    aiokafka_options(Settings.load(None, {}, environ={}))
    built = MetadataRequest(["a-typo"]).build(MetadataRequest_v5)
    assert built.topics == ["a-typo"] and built.allow_auto_topic_creation is False


def test_the_local_broker_config_refuses_auto_creation():
    lines = (REPO / "deploy" / "kafka" / "server.properties").read_text().splitlines()
    assert "auto.create.topics.enable=false" in lines and "auto.create.topics.enable=true" not in lines
