"""Newcomer mistakes end as one clear ``error:`` line and a non-zero exit, never a traceback."""

from __future__ import annotations

import json
import logging
import sys
import types

import numpy as np
import pytest
from typer.testing import CliRunner

from learners.exceptions import InvalidParameterError, NotFittedError
from stream.cli import app
from stream.plugins.linear import linear_factory
from stream.settings import Settings
from stream.workers.explainer import ExplainerCore, ExplainJob

runner = CliRunner()


def test_unknown_linear_bt_parameter_is_the_common_message():
    with pytest.raises(InvalidParameterError, match=r"Model 'linear-bt' got an unknown parameter .*'foo'.* Its parameters are \[.*'learning_rate'"):
        linear_factory(types.SimpleNamespace(feature_names=["a"]), {"foo": 1})


def test_run_with_an_unknown_linear_bt_parameter_exits_1_with_one_line(tmp_path):
    rng = np.random.default_rng(0)
    inp = tmp_path / "events.jsonl"
    inp.write_text("".join(json.dumps({
        "schema_version": 1, "event_id": f"e{i}", "timestamp": 1700000000 + i,
        "left": {"features": {"a": float(rng.normal())}}, "right": {"features": {"a": float(rng.normal())}},
        "outcome": 1}) + "\n" for i in range(3)))
    res = runner.invoke(app, ["run", "-i", str(inp), "-o", str(tmp_path / "x.jsonl"), "-m", "linear-bt", "-q",
                              "--set", 'feature_names=["a"]', "--param", "linear-bt.foo=1"])
    assert res.exit_code == 1, res.output
    assert "error: Model 'linear-bt' got an unknown parameter" in res.output and "Its parameters are" in res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)


def test_demo_rejects_unknown_models_before_starting_anything(monkeypatch):
    import stream

    fake = types.ModuleType("stream.demo")
    fake.run_demo = lambda **kw: pytest.fail("the demo started despite an unknown model")
    monkeypatch.setitem(sys.modules, "stream.demo", fake)
    monkeypatch.setattr(stream, "demo", fake, raising=False)
    res = runner.invoke(app, ["demo", "--models", "linear-bt,foo"])
    assert res.exit_code == 2, res.output
    assert "error: Unknown model 'foo'" in res.output


def test_a_not_yet_fitted_model_is_skipped_as_no_model_not_logged_as_a_failure(caplog):
    s = Settings.load(None, {"feature_names": ["a"]}, environ={})
    ex = ExplainerCore(s)

    def not_fitted(learner, examples, ctx):
        raise NotFittedError("The GPM has not been refitted yet; nothing to explain.")

    def broken(learner, examples, ctx):
        raise ValueError("boom")

    job = ExplainJob(examples=[types.SimpleNamespace(event_id="e2")])
    m = ex.metrics
    with caplog.at_level(logging.WARNING):
        assert ex.explain(job, [("gpm", "pref-shap", object(), 1, not_fitted, 0)]) == []
    assert m.explanations_skipped.labels(reason="no_model")._value.get() == 1
    assert m.explanations_skipped.labels(reason="error")._value.get() == 0
    assert not [r for r in caplog.records if "failed on" in r.getMessage()]
    with caplog.at_level(logging.WARNING):  # a real failure is still counted and logged
        assert ex.explain(job, [("gpm", "pref-shap", object(), 1, broken, 0)]) == []
    assert m.explanations_skipped.labels(reason="error")._value.get() == 1
    assert [r for r in caplog.records if "failed on" in r.getMessage()]


def test_a_bad_flag_value_names_the_command_line_not_the_environment():
    with pytest.raises(InvalidParameterError) as info:
        Settings.load(None, {"explain_sample_rate": 2}, environ={})
    msg = str(info.value)
    assert "from the command line (a flag or --set)" in msg
    assert "overrides" not in msg and "PREFSTREAM_EXPLAIN_SAMPLE_RATE" not in msg
    res = runner.invoke(app, ["run", "-i", "x.jsonl", "-o", "y.jsonl", "--sample-rate", "2"])
    assert res.exit_code == 2 and "from the command line (a flag or --set)" in res.output


def test_a_bad_file_value_names_only_the_config_file(tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"explain_sample_rate": 2}))
    with pytest.raises(InvalidParameterError) as err:
        Settings.load(cfg, {}, environ={})
    assert str(err.value).endswith(f"Got 2.0 instead (from config file {cfg}).")  # no environment variable never set


@pytest.mark.parametrize("argv", [
    ["worker", "learn", "--models", "capacity", "--set", 'feature_names=["a"]', "--metrics-port", "0"],
    ["worker", "explain", "--metrics-port", "0"],
    ["tail", "--timeout", "3"],
    ["replay", "{events}"],
    ["topics", "create"],
])
def test_no_broker_is_one_error_line_and_exit_1_within_the_wait(tmp_path, argv):
    import os
    import subprocess
    import time
    from pathlib import Path

    events = tmp_path / "events.jsonl"
    events.write_text("{}\n")
    argv = [a.replace("{events}", str(events)) for a in argv]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    env.pop("PREFSTREAM_CONFIG", None)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "stream", *argv, "--bootstrap", "127.0.0.1:1",
                           "--set", "broker_wait_seconds=1"], capture_output=True, text=True, timeout=60, env=env)
    wall = time.monotonic() - t0
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "Traceback" not in out and "Unclosed" not in out, out
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: No Kafka broker answered at 127.0.0.1:1 within 1 s"), out
    assert wall < 30, wall  # the 1 s wait, not aiokafka's or kafka-python's 30-60 s defaults


def test_learner_loop_without_a_broker_closes_its_producer_and_raises_one_line():
    import gc
    import warnings

    from stream.broker import BrokerError
    from stream.workers.learner import run_learner

    s = Settings.load(None, {"bootstrap_servers": "127.0.0.1:1", "metrics_port": 0}, environ={})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(BrokerError, match=r"No Kafka broker answered at 127.0.0.1:1"):
            run_learner(s)
        gc.collect()
    assert not [w for w in caught if "Unclosed" in str(w.message)]
