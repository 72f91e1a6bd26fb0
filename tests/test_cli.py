"""The prefstream CLI: commands, configuration precedence, demo placeholder, replay + tail on the broker."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

from typer.testing import CliRunner

from stream.cli import _parse_sets, _settings, _with_params, _worker_overrides, app

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()


def test_help_lists_every_command():
    res = runner.invoke(app, ["--help"])
    assert res.exit_code == 0
    for cmd in ("broker", "topics", "worker", "replay", "tail", "demo"):
        assert cmd in res.output
    res = runner.invoke(app, ["worker", "learn", "--help"])
    for opt in ("--config", "--bootstrap", "--models", "--metrics-port", "--group", "--set"):
        assert opt in res.output


def test_precedence_flags_over_env_over_file(tmp_path, monkeypatch):
    cfg = tmp_path / "p.toml"
    cfg.write_text('snapshot_every_events = 5\nmodels = ["linear-bt"]\nbootstrap_servers = "file:1"\n')
    for var in ("PREFSTREAM_BOOTSTRAP", "PREFSTREAM_BOOTSTRAP_SERVERS", "PREFSTREAM_CONFIG", "PREFSTREAM_METRICS_PORT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PREFSTREAM_SNAPSHOT_EVERY_EVENTS", "7")
    s = _settings(str(cfg), _worker_overrides(None, None, None, None, None, None, None, None))
    assert s.snapshot_every_events == 7 and s.bootstrap_servers == "file:1"
    s = _settings(str(cfg), _worker_overrides("flag:2", None, 0, None, 9, None, None, ["topic_models=m.x"]))
    assert (s.snapshot_every_events, s.bootstrap_servers, s.metrics_port, s.topic_models) == (9, "flag:2", 0, "m.x")


def test_set_parses_json_values():
    assert _parse_sets(["a=1", "b=x", 'c=["p","q"]', "d=0.5"]) == {"a": 1, "b": "x", "c": ["p", "q"], "d": 0.5}


def test_unknown_model_and_bad_setting_exit_2():
    res = runner.invoke(app, ["worker", "learn", "--models", "no-such-model"])
    assert res.exit_code == 2 and "no-such-model" in res.output
    res = runner.invoke(app, ["worker", "learn", "--set", "snapshot_every_event=3"])
    assert res.exit_code == 2 and "snapshot_every_events" in res.output  # did-you-mean from Settings


def test_demo_placeholder_says_not_available(monkeypatch):
    monkeypatch.setitem(sys.modules, "stream.demo", None)  # import of stream.demo fails
    res = runner.invoke(app, ["demo"])
    assert res.exit_code == 2 and "not available yet" in res.output


def test_demo_forwards_only_the_given_options(monkeypatch):
    import types

    import stream

    calls = []
    fake = types.ModuleType("stream.demo")
    fake.run_demo = lambda **kw: calls.append(kw) or {"ok": True}
    monkeypatch.setitem(sys.modules, "stream.demo", fake)
    monkeypatch.setattr(stream, "demo", fake, raising=False)
    res = runner.invoke(app, ["demo", "--max-events", "50", "--models", "linear-bt,capacity", "--sample-rate", "0.5"])
    assert res.exit_code == 0, res.output
    assert calls == [{"max_events": 50, "models": ["linear-bt", "capacity"], "explain_sample_rate": 0.5}]


def test_console_entry_point_runs_as_module():
    out = subprocess.run([sys.executable, "-m", "stream", "--help"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "replay" in out.stdout


def test_topics_create_replay_and_tail_on_the_broker(kafka_bootstrap, tmp_path):
    u = uuid.uuid4().hex[:8]
    sets = [f"topic_{k}=test.cli.{k}.{u}" for k in
            ("preferences", "clicks", "items", "models", "explain_requests", "explanations", "dead_letters")]
    args = [a for s in sets for a in ("--set", s)]
    res = runner.invoke(app, ["topics", "create", "--bootstrap", kafka_bootstrap, *args])
    assert res.exit_code == 0, res.output
    assert f"test.cli.preferences.{u}" in res.output
    f = tmp_path / "p.jsonl"
    rows = [{"event_id": f"c{i}", "left": {"features": {"a": 1.0}}, "right": {"features": {"a": 0.0}}, "outcome": 1}
            for i in range(5)]
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\nnot json\n")
    res = runner.invoke(app, ["replay", str(f), "--bootstrap", kafka_bootstrap, "--no-progress", *args])
    assert res.exit_code == 0, res.output
    assert "sent=5 skipped=1 failed=0" in res.output
    rec = {"schema_version": 1, "request_id": "r", "model_name": "linear-bt", "model_version": 1,
           "method": "linear-shapley", "feature_names": ["a"], "values": [0.5], "base_value": 0.0, "prediction": 0.5}
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    p.send(f"test.cli.explanations.{u}", json.dumps(rec).encode())
    p.flush()
    p.close()
    res = runner.invoke(app, ["tail", "--bootstrap", kafka_bootstrap, "--from-beginning", "--max", "1", "--json",
                              "--timeout", "20", *args])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output.strip().splitlines()[-1]) == rec
    res = runner.invoke(app, ["tail", "--bootstrap", kafka_bootstrap, "--from-beginning", "--max", "1",
                              "--timeout", "20", *args])
    assert "r  linear-bt v1  linear-shapley" in res.output and "+0.5" in res.output


def test_param_merges_into_model_params_over_the_file(tmp_path, monkeypatch):
    monkeypatch.delenv("PREFSTREAM_MODEL_PARAMS", raising=False)
    monkeypatch.delenv("PREFSTREAM_CONFIG", raising=False)
    cfg = tmp_path / "p.json"
    cfg.write_text(json.dumps({"model_params": {"linear-bt": {"learning_rate": 0.2, "l2": 0.1}}}))
    o = _with_params(str(cfg), {}, ["linear-bt.learning_rate=0.05", "capacity.criteria=[\"a\",\"b\"]"])
    s = _settings(str(cfg), o)
    assert s.model_params == {"linear-bt": {"learning_rate": 0.05, "l2": 0.1}, "capacity": {"criteria": ["a", "b"]}}
    res = runner.invoke(app, ["worker", "learn", "--param", "oops"])
    assert res.exit_code != 0 and "model.parameter=value" in res.output
