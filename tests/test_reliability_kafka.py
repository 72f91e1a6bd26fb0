"""No silent loss against the real broker (issue 12): replay failure reasons and request size,
every compression codec end to end, oversized output records."""

from __future__ import annotations

import json

import numpy as np
from typer.testing import CliRunner

from stream.cli import app

runner = CliRunner()


def _big_event(n_features: int, eid: str = "big-1") -> dict:
    feats = {f"feature_{j:06d}": float(j % 7) for j in range(n_features)}
    return {"schema_version": 1, "event_id": eid, "timestamp": 1700000000, "outcome": 1,
            "left": {"features": feats}, "right": {"features": {k: 1.0 for k in feats}}}


def test_replay_prints_each_failure_reason_and_takes_max_request_bytes(kafka_bootstrap, kafka_options, unique_topic, tmp_path):
    from kafka import KafkaConsumer

    topic = unique_topic("replay-big", config={"max.message.bytes": str(4 * 1024 * 1024)})
    f = tmp_path / "big.jsonl"
    big = json.dumps(_big_event(30_000))
    assert 1_048_576 < len(big) < 3_000_000
    f.write_text(big + "\n" + json.dumps(_big_event(3, "small-1")) + "\n")
    res = runner.invoke(app, ["replay", str(f), "--bootstrap", kafka_bootstrap, "--topic", topic, "--no-progress"])
    assert res.exit_code == 1
    assert "sent=1 skipped=0 failed=1" in res.stdout
    lines = [x for x in res.stderr.splitlines() if x.startswith("failed=")]
    assert len(lines) == 1 and lines[0].startswith("failed=1 reason=MessageSizeTooLargeError: ")
    assert "--max-request-bytes" in lines[0]
    # the flag (and the setting) raise the producer's limit: the record goes through
    res = runner.invoke(app, ["replay", str(f), "--bootstrap", kafka_bootstrap, "--topic", topic, "--no-progress",
                              "--max-request-bytes", str(3_500_000)])
    assert res.exit_code == 0, res.output
    assert "sent=2 skipped=0 failed=0" in res.stdout
    res = runner.invoke(app, ["replay", str(f), "--bootstrap", kafka_bootstrap, "--topic", topic, "--no-progress",
                              "--set", "max_request_bytes=3500000", "--set", "compression_type=zstd"])
    assert res.exit_code == 0 and "sent=2 skipped=0 failed=0" in res.stdout
    c = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=5000,
                      max_partition_fetch_bytes=8 * 1024 * 1024, fetch_max_bytes=16 * 1024 * 1024, **kafka_options)
    ids = [json.loads(m.value)["event_id"] for m in c]
    c.close()
    assert sorted(ids) == ["big-1", "big-1", "small-1", "small-1", "small-1"]


# ----------------------------------------------------------------------------- codecs
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def _kafka_libs():
    import os
    import shutil
    from pathlib import Path

    from tests.conftest import skip_or_fail

    home = os.environ.get("PREFSTREAM_KAFKA_HOME") or str(
        Path(os.environ.get("PREFSTREAM_CACHE", Path.home() / ".cache" / "prefstream")) / "kafka" / "4.4.0")
    libs = Path(home) / "libs"
    if shutil.which("java") is None or not list(libs.glob("kafka-clients-*.jar")):
        msg = f"needs java and the kafka-clients jar in {libs} (deploy/kafka/start.sh resolves it)"
        skip_or_fail(msg)
    return libs


def java_produce(bootstrap: str, topic: str, codec: str, records) -> int:
    """Send (key, value-bytes) records with Kafka's Java client and compression ``codec``."""
    import subprocess
    from pathlib import Path

    libs = _kafka_libs()
    src = Path(__file__).resolve().parents[1] / "deploy" / "kafka" / "CompressedProducer.java"
    text = "".join(f"{k}\t{v.decode()}\n" for k, v in records)
    out = subprocess.run(["java", "-cp", f"{libs}/*", str(src), bootstrap, topic, codec], input=text,
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    return int(out.stdout.strip().splitlines()[-1])


def test_both_workers_read_every_compression_codec_of_the_java_producer(kafka_bootstrap, kafka_options, tmp_path):
    """Finding 10: zstd, lz4 and snappy batches from Kafka's Java producer crashed both workers."""
    import numpy as np

    from tests.test_workers_kafka import Stack, expected_digest, pref_event

    _kafka_libs()
    s = Stack(kafka_bootstrap, kafka_options, tmp_path, partitions=1)
    try:
        rng = np.random.default_rng(10)
        ids = []
        for codec in CODECS:
            events = [pref_event(i, rng, prefix=f"{codec}-") for i in range(60)]
            assert java_produce(kafka_bootstrap, s.topics["preferences"], codec, events) == 60
            ids += [e for e, _ in events]
        # kafka-python (replay, tail, these tests) reads every codec back
        got = [json.loads(v)["event_id"] for _, v in s.read("preferences")]
        assert sorted(got) == sorted(ids)
        # aiokafka under Faust: the learner learns every event, and publishes lz4-compressed snapshots
        s.start("learn", PREFSTREAM_COMPRESSION_TYPE="lz4")
        s.wait(lambda: s.totals()[0] >= len(ids) or None, 120, f"{len(ids)} learned events")
        n, d = s.totals()
        assert n == len(ids) and d == expected_digest(ids)
        # the explainer (started once the model exists) consumed every codec too: it explained
        # events of each batch, and published its records zstd-compressed
        s.start("explain", PREFSTREAM_EXPLAIN_SAMPLE_RATE="1.0", PREFSTREAM_COMPRESSION_TYPE="zstd")
        def explained():
            recs = [json.loads(v) for _, v in s.read("explanations")]
            seen = {r["request_id"].split("-", 1)[0] for r in recs}
            return seen if seen >= set(CODECS) else None
        s.wait(explained, 120, "explanations of events from every codec")
        for p in s.procs:
            assert p.poll() is None, f"a worker died:\n{s.log_text()}"
        assert "UnsupportedCodecError" not in s.log_text()
    finally:
        s.close()


# ----------------------------------------------------------------------------- oversize output
def test_fit_explanation_drops_heavy_extra_fields_first_and_flags_them():
    from explainers._result import Explanation
    from stream.contract import explanation_record_ok
    from stream.outputs.publish import fit_explanation

    e = Explanation(values=np.array([[0.5, -0.25, 0.125]]), base_values=np.array([0.1]), data=np.array([[1.0, 2.0, 3.0]]),
                    feature_names=["a", "b", "c"], method="linear-shapley",
                    extra={"note": "x" * 3000, "tiny": 1, "mid": list(range(100))})
    rec = e.to_records(instance_ids=["q1"])[0]
    full = json.dumps(rec, separators=(",", ":")).encode()
    assert fit_explanation(rec, len(full)) == full  # fits: untouched
    v = json.loads(fit_explanation(rec, len(full) - 100))
    assert v["truncated"] == ["extra.note"] and v["extra"] == {"tiny": 1, "mid": list(range(100))}
    assert v["values"] == rec["values"] and v["data"] == rec["data"]
    explanation_record_ok(v)  # still a valid explanation.v1 record
    v = json.loads(fit_explanation(rec, 330))
    assert v["truncated"] == ["extra.note", "extra.mid"] and v["extra"] == {"tiny": 1} and v["data"] == rec["data"]
    bare = dict(rec, extra={}, data=None, truncated=["extra.note", "extra.mid", "extra.tiny", "data"])
    n = len(json.dumps(bare, separators=(",", ":")))
    for limit in range(n, len(full), 97):  # every limit the bare record fits: a valid record within it
        got = fit_explanation(rec, limit)
        assert len(got) <= limit and json.loads(got)["values"] == rec["values"]
        explanation_record_ok(json.loads(got))
    assert fit_explanation(rec, 200) is None  # even the bare record (234 bytes) does not fit


def test_an_explanation_over_the_topic_limit_is_dead_lettered_and_counted_not_lost(kafka_bootstrap, kafka_options,
                                                                                  tmp_path, unique_topic):
    """Finding 2: 300 features, explanations topic max.message.bytes = 4096."""
    from tests.test_workers_kafka import Stack, free_port, metric_value, scrape

    s = Stack(kafka_bootstrap, kafka_options, tmp_path, partitions=1)
    try:
        s.topics["explanations"] = unique_topic("explanations-small", config={"max.message.bytes": "4096"})
        rng = np.random.default_rng(20)
        names = [f"f{j:03d}" for j in range(300)]
        events = []
        for i in range(40):
            xl, xr = rng.normal(size=300), rng.normal(size=300)
            events.append((f"w{i}", json.dumps({
                "schema_version": 1, "event_id": f"w{i}", "timestamp": 1700000000 + i, "outcome": 1 if xl[0] > xr[0] else -1,
                "left": {"features": dict(zip(names, map(float, xl)))},
                "right": {"features": dict(zip(names, map(float, xr)))}}).encode()))
        s.send("preferences", events)
        s.start("learn")
        s.wait(lambda: s.totals()[0] >= 40 or None, 120, "40 learned events")
        port = free_port()
        s.start("explain", "--metrics-port", str(port), PREFSTREAM_EXPLAIN_SAMPLE_RATE="1.0")

        def oversize():  # every explained event (sampling may drop a few under backlog) is a dead letter
            try:
                skipped = metric_value(scrape(port), "prefstream_explanations_skipped_total", reason="oversize")
            except OSError:
                return None
            dls = [json.loads(v) for _, v in s.read("dead_letters")]
            dls = [d for d in dls if d["reason"] == "oversize"]
            return dls if skipped >= 30 and len(dls) == skipped else None

        dls = s.wait(oversize, 200, "oversize dead letters for the explained events")
        assert {d["source_topic"] for d in dls} == {s.topics["explanations"]}
        assert all("even without its optional fields" in d["detail"] for d in dls)
        assert all(d["payload_truncated"] and d["payload_size"] > 4096 for d in dls)
        assert s.read("explanations") == []
        assert metric_value(scrape(port), "prefstream_explanations_total") == 0  # counted on delivery only
    finally:
        s.close()
