"""A newcomer's first session from a fresh clone (issue: the fresh-clone findings): each finding is
one clear line and the right exit status, never lost data or a traceback."""

from __future__ import annotations

import os

import pytest

from typer.testing import CliRunner

from stream.cli import app

runner = CliRunner()

CSV = "event_id,outcome,left.a,right.a\n" + "".join(f"e{i},1,{i},{i + 1}\n" for i in range(5))


def test_run_refuses_an_output_that_is_its_input(tmp_path, monkeypatch):
    f = tmp_path / "same.csv"
    f.write_text(CSV)
    monkeypatch.chdir(tmp_path)
    os.symlink(f, tmp_path / "link.csv")
    for out in (["-o", "same.csv"], ["-o", "./link.csv"], ["-o", str(tmp_path / "sub" / ".." / "same.csv")]):
        res = runner.invoke(app, ["run", "-q", "-i", "same.csv", *out])
        assert res.exit_code == 2, res.output
        err = res.stderr.strip().splitlines()
        assert len(err) == 1 and "is the input file 'same.csv'" in err[0] and "-o" in err[0], err
        assert f.read_text() == CSV
    # the dead-letters file of the output, and the report's records.jsonl
    (tmp_path / "x.dead-letters.jsonl").write_text(CSV)
    res = runner.invoke(app, ["run", "-q", "-i", "x.dead-letters.jsonl", "-o", "x.jsonl"])
    assert res.exit_code == 2 and "the dead-letters file" in res.stderr, res.output
    assert (tmp_path / "x.dead-letters.jsonl").read_text() == CSV
    (tmp_path / "rep").mkdir()
    (tmp_path / "rep" / "records.jsonl").write_text("{}\n")
    res = runner.invoke(app, ["run", "-q", "-i", "rep/records.jsonl", "-o", "y.jsonl", "--report-dir", "rep"])
    assert res.exit_code == 2 and "the report file" in res.stderr and "--report-dir" in res.stderr, res.output
    assert (tmp_path / "rep" / "records.jsonl").read_text() == "{}\n"


def _run_cli(argv, env=None, timeout=60):
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "OMP_NUM_THREADS": "1", **(env or {})}
    env.pop("PREFSTREAM_CONFIG", None)
    return subprocess.run([sys.executable, "-m", "stream", *argv], capture_output=True, text=True, timeout=timeout,
                          env=env)


@pytest.mark.parametrize("role", ["learn", "explain"])
def test_a_worker_started_before_topics_create_fails_at_once_with_one_line(kafka_bootstrap, kafka_options, role):
    import uuid

    from stream.broker import missing_topics

    u = uuid.uuid4().hex[:10]
    keys = ("preferences", "clicks", "items", "models", "explain_requests", "explanations", "dead_letters", "drift")
    env = {f"PREFSTREAM_TOPIC_{k.upper()}": f"test.nocreate.{k}.{u}" for k in keys}
    proc = _run_cli(["worker", role, "--metrics-port", "0", "-b", kafka_bootstrap, "--group", f"nocreate-{u}"], env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: Topics 'test.nocreate.preferences.{u}'"), lines
    assert lines[0].endswith("do not exist; create them with `prefstream topics create`."), lines
    # nothing was auto-created by a consumer or producer
    assert missing_topics(kafka_bootstrap, list(env.values()), client_options=kafka_options) == list(env.values())
    read = ["preferences", "clicks", "items", "models"] if role == "learn" else \
        ["preferences", "clicks", "explain_requests", "items", "models", "explanations"]
    assert lines[0] == ("error: Topics " + ", ".join(repr(env[f"PREFSTREAM_TOPIC_{k.upper()}"]) for k in read)
                        + " do not exist; create them with `prefstream topics create`.")


TOPIC_KEYS = ("preferences", "clicks", "items", "models", "explain_requests", "explanations", "dead_letters", "drift")


@pytest.fixture
def topics_env(kafka_bootstrap, kafka_options):
    """PREFSTREAM_TOPIC_* of a fresh set of existing topics (one partition each)."""
    import uuid

    from stream.broker import create_topics

    u = uuid.uuid4().hex[:10]
    env = {f"PREFSTREAM_TOPIC_{k.upper()}": f"test.fresh.{k}.{u}" for k in TOPIC_KEYS}
    create_topics(None, {t: None for t in env.values()}, client_options=kafka_options)
    return {**env, "PREFSTREAM_BOOTSTRAP_SERVERS": kafka_bootstrap, "PREFSTREAM_CONSUMER_GROUP": f"fresh-{u}"}


@pytest.mark.parametrize("role", ["learn", "explain"])
def test_a_metrics_port_in_use_is_one_line_and_exit_2(topics_env, role):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _run_cli(["worker", role, "--metrics-port", str(port)], topics_env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: Cannot serve metrics on 127.0.0.1:{port}"), lines
    assert "Pick another port with --metrics-port" in lines[0]


def test_a_serve_port_in_use_is_one_line_and_exit_2(topics_env):
    """Before: uvicorn's own "[Errno 98]" line and exit 3, after the broker check and the app's start."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _run_cli(["serve", "--port", str(port)], topics_env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    assert lines == [f"error: Cannot listen on 127.0.0.1:{port}: the address is in use (another prefstream serve or "
                     "program); pick another port with --port or PREFSTREAM_SERVE_PORT."], lines


def test_serve_says_whether_a_missing_model_is_loading_unpublished_or_not_served():
    import asyncio
    import types

    from stream.models import register_all
    from stream.serving.errors import APIError
    from stream.serving.service import ServeState
    from stream.settings import Settings

    register_all()
    st = ServeState(Settings.load(None, {"serve_models": ["capacity", "gpm"], "topic_models": "m"}, environ={}))
    caught = asyncio.Event()
    st.followers = [types.SimpleNamespace(caught_up=caught), types.SimpleNamespace(caught_up=caught)]

    def detail(name):
        try:
            st.version(name)
        except APIError as exc:
            return exc.status, exc.code, exc.detail
        raise AssertionError("no error")

    assert detail("gpm") == (503, "not_loaded", "Model 'gpm' is not loaded yet: the server is still reading m.")
    caught.set()
    assert detail("gpm") == (503, "not_loaded", "Model 'gpm' has no published snapshot on m yet (a learner worker "
                                                "running it publishes one).")
    st.published.add("gpm")  # read from the topic, not loaded yet
    assert detail("gpm") == (503, "not_loaded", "Model 'gpm' is loading (its snapshot was read from m); retry in a "
                                                "few seconds.")
    assert st.readiness() == {"ready": False, "missing": ["capacity", "gpm"], "loading": ["gpm"],
                              "catalog_caught_up": True, "models_caught_up": True, "people_caught_up": False}
    assert detail("linear-bt") == (404, "not_served", "Model 'linear-bt' is not served here; this server's models "
                                                      "are ['capacity', 'gpm'] (start it with --models to serve "
                                                      "others).")


@pytest.mark.parametrize("content, why", [
    ("", "error: no records in {f}."),
    ("event_id,outcome,left.a,right.a\n", "error: no records in {f}."),
    ("event_id,outcome,left.a,right.a\ne1,maybe,1,2\ne2,1,,1\n",
     "error: nothing sent: all 2 records of {f} were skipped (reasons above)."),
])
def test_replay_that_sends_nothing_exits_1_with_the_reason(tmp_path, kafka_bootstrap, unique_topic, content, why):
    topic = unique_topic("empty")
    f = tmp_path / "empty.csv"
    f.write_text(content)
    res = runner.invoke(app, ["replay", str(f), "--bootstrap", kafka_bootstrap, "--topic", topic, "--no-progress"])
    assert res.exit_code == 1, res.output
    assert res.stderr.splitlines()[-1] == why.format(f=f)
    assert "Traceback" not in res.output


def test_run_on_an_empty_file_says_no_records(tmp_path, caplog):
    f = tmp_path / "empty.csv"
    f.write_text("event_id,outcome,left.a,right.a\n")
    with caplog.at_level("WARNING"):
        res = runner.invoke(app, ["run", "-q", "-i", str(f), "-o", str(tmp_path / "x.jsonl"), "-m", "linear-bt",
                                  "--set", 'feature_names=["a"]'])
    assert res.exit_code == 3, res.output  # a model that learned nothing is no success (issue 31)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == [f"no records in {f}"], warnings
    assert res.stderr.strip().splitlines()[-1] == "error: 'linear-bt' learned no record (exit status 3): the input holds no record."


@pytest.mark.parametrize("ts", ["notatime", "this is not a time at all"])
def test_a_bad_timestamp_says_what_a_timestamp_is(tmp_path, ts):
    from stream.contract import DeadLetter, validate_record

    doc = {"schema_version": 1, "event_id": "e", "timestamp": ts, "left": {"features": {"a": 1}},
           "right": {"features": {"a": 2}}, "outcome": 1}
    with pytest.raises(DeadLetter) as err:
        validate_record("preference", doc)
    assert (err.value.reason, err.value.detail) == (
        "schema_violation", f"'timestamp' must be unix seconds (a number) or an ISO-8601 date-time such as "
                            f"'2024-05-01T12:00:00Z'; got {ts!r}.")


@pytest.mark.parametrize("argv, line", [
    (["replay", "{f}", "--rate", "0"], "error: --rate must be a positive number of events per second (omit it for "
                                       "as fast as possible); got 0."),
    (["replay", "{f}", "--rate", "-3"], "error: --rate must be a positive number of events per second (omit it for "
                                        "as fast as possible); got -3."),
    (["run", "-i", "{f}", "-o", "{out}", "--kind", "item"], "error: --kind must be preference or click; got 'item'."),
    (["replay", "{f}", "-b", "garbage"], "error: The 'bootstrap_servers' setting must be a comma-separated list of "
                                         "host:port (e.g. '127.0.0.1:9092'). Got 'garbage' instead (from the command "
                                         "line (a flag or --set))."),
    (["worker", "learn", "-b", "host:notaport"], None),
    (["tail", "-b", "a:9092,:9093"], None),
])
def test_cli_flag_errors_name_the_flag_at_once(tmp_path, argv, line):
    import time

    f = tmp_path / "e.csv"
    f.write_text(CSV)
    t0 = time.monotonic()
    res = runner.invoke(app, [a.format(f=f, out=tmp_path / "o.jsonl") for a in argv])
    assert res.exit_code == 2, res.output
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and (err[0] == line if line else "must be a comma-separated list of host:port" in err[0]), err
    assert time.monotonic() - t0 < 2  # no broker wait: the format is checked first


def test_a_replayed_event_is_one_duplicate_whatever_the_number_of_models(caplog):
    import json as _json
    import logging

    import numpy as np

    from stream.models import register_all
    from stream.settings import Settings
    from stream.workers.learner_core import LearnerCore

    register_all()
    s = Settings.load(None, {"models": ["linear-bt", "capacity"], "feature_names": ["a", "b"],
                             "snapshot_every_events": 10_000, "snapshot_every_seconds": 3600}, environ={})
    rng = np.random.default_rng(0)
    raw = [_json.dumps({"schema_version": 1, "event_id": f"e{i}", "timestamp": 1700000000 + i,
                        "left": {"features": {"a": float(rng.normal()), "b": float(rng.normal())}},
                        "right": {"features": {"a": float(rng.normal()), "b": float(rng.normal())}},
                        "outcome": 1}).encode() for i in range(30)]
    core = LearnerCore(s)
    st = core.new_source(s.topic_preferences, 0, {})
    core.process_batch(st, [(i, r, None, None) for i, r in enumerate(raw)])
    with caplog.at_level(logging.INFO, logger="stream.workers.learner_core"):
        core.process_batch(st, [(30 + i, r, None, None) for i, r in enumerate(raw)])  # the same events again
        core.process_batch(st, [(60 + i, r, None, None) for i, r in enumerate(raw[:5])])
    assert {m: t["learned"] for m, t in core.tally.items()} == {"linear-bt": 30, "capacity": 30}
    assert {m: t["duplicates"] for m, t in core.tally.items()} == {"linear-bt": 35, "capacity": 35}
    counted = core.metrics.registry.get_sample_value("prefstream_duplicate_events_total",
                                                     {"topic": s.topic_preferences})
    assert counted == 35  # not 70: one per event, not one per event and model
    lines = [r.getMessage() for r in caplog.records if "duplicate" in r.getMessage()]
    assert lines == ["30 duplicate events skipped (already learned)"]  # the next batch's 5 wait (rate limit)


def _end_offset(kafka_options, topic) -> int:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(**kafka_options)
    try:
        tp = TopicPartition(topic, 0)
        return c.end_offsets([tp])[tp]
    finally:
        c.close()


def _wait(pred, timeout, what):
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


def _start_cli(argv, env, log):
    import subprocess
    import sys
    from pathlib import Path

    full = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "OMP_NUM_THREADS": "1",
            "PYTHONUNBUFFERED": "1", **env}
    full.pop("PREFSTREAM_CONFIG", None)
    return subprocess.Popen([sys.executable, "-m", "stream", *argv], env=full, stdout=open(log, "w"),
                            stderr=subprocess.STDOUT)


def test_ctrl_c_during_a_paced_replay_says_how_many_were_sent(tmp_path, kafka_bootstrap, kafka_options, unique_topic):
    import signal

    topic = unique_topic("ctrlc")
    f = tmp_path / "many.csv"
    f.write_text("event_id,outcome,left.a,right.a\n" + "".join(f"e{i},1,{i},{i + 1}\n" for i in range(2000)))
    log = tmp_path / "replay.log"
    proc = _start_cli(["replay", str(f), "--rate", "50", "--no-progress", "-b", kafka_bootstrap, "--topic", topic],
                      {}, log)
    try:
        _wait(lambda: _end_offset(kafka_options, topic) >= 10, 60, "10 records on the topic")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 130, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    lines = [ln for ln in log.read_text().splitlines() if ln.strip()]
    sent = _end_offset(kafka_options, topic)
    assert lines == [f"interrupted: sent={sent} skipped=0 failed=0"], lines
    assert 10 <= sent < 2000


def test_a_learner_prints_one_line_when_it_stops(tmp_path, topics_env, kafka_options):
    import json as _json
    import signal

    from kafka import KafkaProducer

    log = tmp_path / "learner.log"
    env = {**topics_env, "PREFSTREAM_SNAPSHOT_EVERY_EVENTS": "5", "PREFSTREAM_SNAPSHOT_EVERY_SECONDS": "0.3",
           "PREFSTREAM_STATE_DIR": str(tmp_path / "state")}
    proc = _start_cli(["worker", "learn", "-m", "linear-bt", "--set", 'feature_names=["a"]', "--metrics-port", "0"],
                      env, log)
    topic, group = env["PREFSTREAM_TOPIC_PREFERENCES"], env["PREFSTREAM_CONSUMER_GROUP"]
    try:
        _wait(lambda: "Ready" in log.read_text(), 60, "Ready")
        producer = KafkaProducer(acks="all", **kafka_options)
        for i in range(20):
            producer.send(topic, key=f"e{i}".encode(), value=_json.dumps({
                "schema_version": 1, "event_id": f"e{i}", "timestamp": 1700000000 + i, "left": {"features": {"a": i}},
                "right": {"features": {"a": i + 1}}, "outcome": 1}).encode())
        producer.flush(30)
        producer.close()
        _wait(lambda: _committed(kafka_options, group, topic) == 20, 60, "the commit at offset 20")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    stops = [ln for ln in log.read_text().splitlines() if "stopped" in ln]
    assert stops == [f"[prefstream learner] stopped: 20 events learned (linear-bt 20); group {group}, "
                     f"committed {topic}[0]@20"], log.read_text()


def _committed(kafka_options, group, topic) -> int | None:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(group_id=group, enable_auto_commit=False, **kafka_options)  # reads the commit, joins nothing
    try:
        return c.committed(TopicPartition(topic, 0))
    finally:
        c.close()


def test_version_and_help_without_flag_types():
    from importlib.metadata import version

    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0 and res.stdout == f"prefstream {version('prefstream')}\n", res.output
    for argv in (["--help"], ["run", "--help"], ["replay", "--help"]):
        out = runner.invoke(app, argv, env={"COLUMNS": "200"}).stdout
        assert "--help" in out and "<bool>" not in out, out
    out = runner.invoke(app, ["run", "--help"], env={"COLUMNS": "200"}).stdout
    assert "<str>" in out  # options that take a value still show its type


def test_a_missing_data_dir_does_not_suggest_itself(tmp_path):
    from learners.exceptions import InvalidInputError
    from stream.adapters import resolve_data_dir

    with pytest.raises(InvalidInputError) as err:
        resolve_data_dir("../shared/data-nowhere", "pokemon")
    msg = str(err.value)
    assert msg.count("shared/data") == 1 and "leave --data-dir out for the bundled sets (train, open_bandit)" in msg


def test_readme_quick_start_demo_runs_on_bundled_data():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    demo_lines = [ln for ln in readme.splitlines() if ln.startswith("prefstream demo")]
    assert demo_lines and demo_lines[0].split("#")[0].split() == ["prefstream", "demo"], demo_lines
    assert "../shared/data" not in "\n".join(demo_lines)


@pytest.mark.parametrize("d", [1, 3, 12])
def test_distributional_importance_bars_lay_out_without_a_warning(tmp_path, d):
    import warnings

    import numpy as np

    from explainers import Explanation
    from explainers.distributional_plots import plot_importance_bars

    rng = np.random.default_rng(d)
    expl = Explanation(method="distributional-bernoulli", values=rng.normal(size=d), base_values=0.0,
                       feature_names=[f"feature_with_a_long_name_{j}" for j in range(d)], model_name="m",
                       extra={"variance": rng.random(d), "importance": rng.random(d)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Tight layout not applied" was a UserWarning here
        plot_importance_bars(expl, path=tmp_path / "bars.png")
    assert (tmp_path / "bars.png").stat().st_size > 0


def test_the_report_is_titled_by_what_produced_it(tmp_path):
    from stream.report import write_report

    write_report(tmp_path / "demo", {"dataset": "train"}, [])
    write_report(tmp_path / "run", {"input": str(tmp_path / "events.csv")}, [])
    assert "<h1>prefstream demo report — train</h1>" in (tmp_path / "demo" / "index.html").read_text()
    assert "<h1>prefstream run report — events.csv</h1>" in (tmp_path / "run" / "index.html").read_text()


def test_an_event_feature_no_model_uses_is_warned_once_per_name(tmp_path, caplog, monkeypatch):
    import json as _json
    import logging

    monkeypatch.setattr("stream.contract.batch._WARNED_UNKNOWN", set())  # once per process: start afresh

    from stream.batch import run_batch
    from stream.settings import Settings

    f = tmp_path / "ev.jsonl"
    f.write_text("".join(_json.dumps({
        "schema_version": 1, "event_id": f"e{i}", "timestamp": 1700000000 + i,
        "left": {"features": {"a": float(i), "color": 1.0, "size": 0.0}},
        "right": {"features": {"a": i + 1.0, "color": 0.0, "size": 2.0}},
        "outcome": 1}) + "\n" for i in range(40)))
    s = Settings.load(None, {"models": ["linear-bt"], "feature_names": ["a"]}, environ={})
    with caplog.at_level(logging.WARNING, logger="stream.contract.batch"):
        res = run_batch(f, tmp_path / "o.jsonl", settings=s, progress=False, inline_refits=True)
    assert res.learned == {"linear-bt": 40}
    got = sorted(r.getMessage() for r in caplog.records if r.name == "stream.contract.batch")
    assert got == [f"model 'linear-bt' ignores event feature {n!r}: it is not one of its feature_names ['a'] "
                   "(logged once per feature)" for n in ("color", "size")], got


def test_serve_refuses_a_feature_the_model_does_not_use():
    import types

    from stream.serving.errors import APIError
    from stream.serving.inputs import candidates, item_vector

    ref = types.SimpleNamespace(features={"a": 1.0, "b": 2.0, "color": 3.0}, id=None)
    with pytest.raises(APIError) as err:
        item_vector(ref, ["a", "b"], None, "items[0]")
    assert (err.value.status, err.value.code, err.value.field, err.value.detail) == (
        422, "unknown_feature", "items[0].features.color",
        "items[0].features has features ['color'] that the model does not use (its features: ['a', 'b']); remove them.")
    req = types.SimpleNamespace(ids=None, items=None, columns=types.SimpleNamespace(
        feature_names=["a", "b", "color"], rows=[[1, 2, 3]], ids=None))
    with pytest.raises(APIError) as err:
        candidates(req, ["a", "b"], None, 10)
    assert (err.value.code, err.value.field) == ("unknown_feature", "columns.feature_names.color")
