"""Prometheus scrapes, alert rules and the Grafana dashboard's metrics and queries.

``test_prometheus_scrapes_worker_metrics`` starts a real Prometheus (Debian's ``prometheus``
package, through deploy/prometheus/start.sh with the real deploy/prometheus/prometheus.yml)
on a free loopback port. It scrapes an endpoint served by ``prometheus_client.start_http_server``
in this process with the workers' own registry (``stream.metrics.build_metrics``), and the
test reads the counter back through Prometheus's HTTP query API.

``test_every_dashboard_panel_returns_a_series_from_real_workers`` runs the learner and explainer
workers as subprocesses on the real broker, feeds them events, lets the same Prometheus scrape
them, and requires a non-empty answer to every panel query of the dashboard; then the preference
flips and valid drift records must reach the drift topic and be counted in Prometheus.

``test_alert_rules_pass_their_promtool_unit_tests`` runs ``promtool test rules`` on
deploy/prometheus/alerts_test.yml. Tests that need ``prometheus``/``promtool`` skip without
them locally and fail under ``CI=true`` (.ci/run installs Debian's package).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import skip_or_fail

REPO = Path(__file__).resolve().parents[1]
PROM_DIR = REPO / "deploy" / "prometheus"
DASHBOARD = REPO / "deploy" / "grafana" / "prefstream-dashboard.json"

#: The worker metric names and their Prometheus types: the one list in stream.metrics.
from stream.metrics import METRIC_TYPES as FIXED_METRICS  # noqa: E402

_METRIC_RE = re.compile(r"\bprefstream_[a-z0-9_]+")


def _need(binary: str) -> str:
    path = shutil.which(binary)
    if path is None:
        msg = f"{binary} (Debian package prometheus) is not installed (apt-get install -y prometheus; .ci/run does it)"
        skip_or_fail(msg)
    return path


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _dashboard_exprs(dash: dict) -> list[str]:
    exprs = []
    for panel in dash["panels"]:
        for t in panel.get("targets", []):
            exprs.append(t["expr"])
        for sub in panel.get("panels", []):  # collapsed rows keep their panels inside
            exprs.extend(t["expr"] for t in sub.get("targets", []))
    return exprs


def _base_metric(name: str) -> str:
    """Map a histogram's series (_bucket/_sum/_count) back to the metric name."""
    for suffix in ("_bucket", "_sum", "_count"):
        base = name[: -len(suffix)]
        if name.endswith(suffix) and FIXED_METRICS.get(base) == "histogram":
            return base
    return name


def _query(base_url: str, promql: str) -> dict:
    url = f"{base_url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.load(resp)


def _metrics_registry():
    """The workers' registry if stream.metrics provides it, else an equivalent counter."""
    try:
        from stream.metrics import build_metrics
    except ImportError:
        build_metrics = None
    if build_metrics is not None:
        m = build_metrics()
        return m.registry, m.events_consumed
    from prometheus_client import CollectorRegistry, Counter

    reg = CollectorRegistry()
    return reg, Counter("prefstream_events_consumed", "Input messages consumed.", ["topic"], registry=reg)


# ------------------------------------------------------------------ real Prometheus server


@pytest.mark.prometheus
def test_prometheus_scrapes_worker_metrics(tmp_path):
    if shutil.which("prometheus") is None:
        skip_or_fail("Debian's prometheus is not installed (apt-get install -y prometheus; .ci/run does it)")
    from prometheus_client import start_http_server

    registry, consumed = _metrics_registry()
    consumed.labels(topic="prefstream.preferences").inc(42)
    metrics_port = _free_port()
    server, thread = start_http_server(metrics_port, addr="127.0.0.1", registry=registry)

    prom_port = _free_port()
    env = dict(
        os.environ,
        PREFSTREAM_PROMETHEUS_PORT=str(prom_port),
        PREFSTREAM_PROMETHEUS_RUN=str(tmp_path / "prom"),
        PREFSTREAM_LEARNER_METRICS_PORT=str(metrics_port),
        PREFSTREAM_EXPLAINER_METRICS_PORT=str(_free_port()),  # nothing listens there: up == 0
        PREFSTREAM_SERVE_PORT=str(_free_port()),              # nor there
    )
    try:
        start = subprocess.run(["bash", str(PROM_DIR / "start.sh")], env=env, capture_output=True,
                               text=True, timeout=60)
        assert start.returncode == 0, f"deploy/prometheus/start.sh failed:\n{start.stderr}"
        base = start.stdout.strip().splitlines()[-1]
        assert base == f"http://127.0.0.1:{prom_port}"

        def wait_for(promql, predicate, timeout_s=45.0):
            deadline = time.monotonic() + timeout_s
            last = None
            while time.monotonic() < deadline:
                last = _query(base, promql)
                assert last["status"] == "success", last
                if predicate(last["data"]["result"]):
                    return last["data"]["result"]
                time.sleep(0.5)
            pytest.fail(f"Prometheus never returned the expected result for {promql!r}; last: {last}")

        # scrape_interval is 5 s in deploy/prometheus/prometheus.yml
        result = wait_for("prefstream_events_consumed_total", lambda r: len(r) > 0)
        assert len(result) == 1
        sample = result[0]
        assert sample["metric"]["__name__"] == "prefstream_events_consumed_total"
        assert sample["metric"]["topic"] == "prefstream.preferences"
        assert sample["metric"]["job"] == "prefstream-learner"
        assert sample["metric"]["role"] == "learner"
        assert float(sample["value"][1]) == 42.0

        # a later scrape sees the new value
        consumed.labels(topic="prefstream.preferences").inc(8)
        result = wait_for("prefstream_events_consumed_total",
                          lambda r: r and float(r[0]["value"][1]) == 50.0)
        assert float(result[0]["value"][1]) == 50.0

        ups = wait_for("up", lambda r: len(r) == 3)
        assert {u["metric"]["job"]: u["value"][1] for u in ups} == {
            "prefstream-learner": "1", "prefstream-explainer": "0", "prefstream-serve": "0"}

        # every dashboard expression is valid PromQL for this Prometheus
        dash = json.loads(DASHBOARD.read_text(encoding="utf-8"))
        for expr in _dashboard_exprs(dash):
            promql = expr.replace("$__rate_interval", "1m").replace("$model", ".*")
            answer = _query(base, promql)
            assert answer["status"] == "success", (expr, answer)
    finally:
        subprocess.run(["bash", str(PROM_DIR / "stop.sh")], env=env, capture_output=True, timeout=60)
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
    assert not (tmp_path / "prom" / "prometheus.pid").exists()


def test_prometheus_config_is_valid_and_targets_the_workers():
    text = (PROM_DIR / "prometheus.yml").read_text(encoding="utf-8")
    assert '"127.0.0.1:9464"' in text and '"127.0.0.1:9465"' in text and '"127.0.0.1:8000"' in text
    assert "job_name: prefstream-learner" in text and "job_name: prefstream-explainer" in text
    assert "job_name: prefstream-serve" in text
    promtool = _need("promtool")
    out = subprocess.run([promtool, "check", "config", str(PROM_DIR / "prometheus.yml")],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr


# ------------------------------------------------------------------ Grafana dashboard


def test_grafana_dashboard_uses_exactly_the_fixed_metrics():
    dash = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert dash["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"

    used = set()
    texts = _dashboard_exprs(dash) + [json.dumps(v) for v in dash["templating"]["list"]]
    for text in texts:
        used |= {_base_metric(n) for n in _METRIC_RE.findall(text)}
    assert used - set(FIXED_METRICS) == set(), "dashboard uses metrics outside the fixed list"
    assert set(FIXED_METRICS) - used == set(), "fixed metrics without a panel"

    # histograms are only read through their _bucket series, never as a bare name
    for expr in _dashboard_exprs(dash):
        for name in _METRIC_RE.findall(expr):
            if FIXED_METRICS.get(name) == "histogram":
                pytest.fail(f"histogram {name} used without _bucket/_sum/_count in {expr!r}")

    panels = [p for p in dash["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in dash["panels"]}) == len(dash["panels"])
    for p in panels:
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert p["targets"] and all(t["datasource"]["uid"] == "${datasource}" for t in p["targets"])
    # no two panels overlap on the 24-column grid
    cells = set()
    for p in dash["panels"]:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"panel {p['title']!r} overlaps another"
                cells.add((x, y))


def test_grafana_dashboard_is_generated_from_its_script():
    spec = importlib.util.spec_from_file_location("build_dashboard", REPO / "deploy/grafana/build_dashboard.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.METRICS == FIXED_METRICS
    assert DASHBOARD.read_text(encoding="utf-8") == mod.render(), (
        "deploy/grafana/prefstream-dashboard.json is stale: run python deploy/grafana/build_dashboard.py")


def test_fixed_metrics_exist_in_the_worker_registry():
    metrics = pytest.importorskip("stream.metrics")
    m = metrics.build_metrics()
    assert set(FIXED_METRICS) <= set(metrics.METRIC_NAMES)
    types = {}
    for family in m.registry.collect():
        name = family.name + ("_total" if family.type == "counter" else "")
        types[name] = family.type
    for name, kind in FIXED_METRICS.items():
        assert types.get(name) == kind, (name, types.get(name), kind)


# ------------------------------------------------------------------ alert rules


def _alert_names() -> list[str]:
    """The alert names in deploy/prometheus/alerts.yml, as written (duplicates kept)."""
    return re.findall(r"^\s*- alert: (\w+)\s*$", (PROM_DIR / "alerts.yml").read_text(), re.M)


def test_alert_rules_pass_their_promtool_unit_tests():
    promtool = _need("promtool")
    check = subprocess.run([promtool, "check", "rules", str(PROM_DIR / "alerts.yml")], capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"SUCCESS: {len(_alert_names())} rules found" in check.stdout
    out = subprocess.run([promtool, "test", "rules", "alerts_test.yml"], cwd=PROM_DIR, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout
    # every rule of alerts.yml has a unit test in which it fires (``exp_alerts:`` with a list below)
    rules = set(_alert_names())
    tested, current = set(), None
    for line in (PROM_DIR / "alerts_test.yml").read_text().splitlines():
        m = re.match(r"\s*alertname: (\w+)", line)
        current = m.group(1) if m else current
        if re.match(r"\s*exp_alerts:\s*$", line):
            tested.add(current)
    assert rules == tested, f"rules without a firing unit test: {sorted(rules - tested)}"


# ------------------------------------------------------------------ the dashboard against real workers


def _post(url: str, body: dict) -> int | None:
    """Status of a JSON POST (None while nothing listens)."""
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


@pytest.mark.prometheus
def test_every_dashboard_panel_returns_a_series_from_real_workers(kafka_bootstrap, kafka_options, tmp_path):
    """Learner + explainer subprocesses on the broker, a real Prometheus, every panel query answered."""
    _need("prometheus")
    from tests.test_workers_kafka import Stack, free_port, pref_event

    stack = Stack(kafka_bootstrap, kafka_options, tmp_path)  # run-unique topics, the drift topic included
    lport, eport, sport, prom_port = free_port(), free_port(), free_port(), free_port()
    env = dict(PREFSTREAM_MODELS="linear-bt,capacity,gpm,linear-bt-personal", PREFSTREAM_FEATURE_NAMES="a,b,c",
               PREFSTREAM_MODEL_PARAMS=json.dumps({"gpm": {"refit_every": 100, "min_train": 50, "window_size": 300}}),
               PREFSTREAM_MONITOR_WINDOW="20", PREFSTREAM_MONITOR_WARMUP="0", PREFSTREAM_MONITOR_CHECK_EVERY="10",
               PREFSTREAM_EXPLAIN_MAX_QUEUE="100000")
    prom_env = dict(os.environ, PREFSTREAM_PROMETHEUS_PORT=str(prom_port),
                    PREFSTREAM_PROMETHEUS_RUN=str(tmp_path / "prom"),
                    PREFSTREAM_LEARNER_METRICS_PORT=str(lport), PREFSTREAM_EXPLAINER_METRICS_PORT=str(eport),
                    PREFSTREAM_SERVE_PORT=str(sport))
    try:
        stack.start("learn", "--metrics-port", str(lport), **env)
        stack.start("explain", "--metrics-port", str(eport), "--sample-rate", "1.0", **env)
        serve_log = tmp_path / "serve.log"   # prefstream serve: its /metrics on its HTTP port
        stack.procs.append(subprocess.Popen([sys.executable, "-m", "stream", "serve", "--port", str(sport)], cwd=REPO,
                                            env=stack.env(**env), stdout=open(serve_log, "w"), stderr=subprocess.STDOUT))
        stack.logs.append(serve_log)
        start = subprocess.run(["bash", str(PROM_DIR / "start.sh")], env=prom_env, capture_output=True, text=True,
                               timeout=60)
        assert start.returncode == 0, f"deploy/prometheus/start.sh failed:\n{start.stderr}"
        base = start.stdout.strip().splitlines()[-1]

        rng = np.random.default_rng(3)
        events = [pref_event(i, rng, prefix="dash", user_id=f"u{i % 7}") for i in range(600)]   # people: the People row
        stack.send("preferences", events[:300])
        stack.wait(lambda: stack.totals()[0] >= 300 or None, 120, "300 learned events")
        # events after the first snapshots get explained; a duplicate, a malformed event, a bad request
        stack.send("preferences", events[300:] + [events[0], ("bad", b"{not json")])
        stack.send("explain_requests", [("r-bad", b'{"request_id": "r-bad"}')])
        pair = {"model": "linear-bt", "left": {"features": {"a": 1, "b": 0, "c": 0}},
                "right": {"features": {"a": 0, "b": 1, "c": 0}}}
        served = stack.wait(lambda: _post(f"http://127.0.0.1:{sport}/v1/compare", pair) == 200 or None, 120,
                            "prefstream serve to answer with the live linear-bt")
        assert served and _post(f"http://127.0.0.1:{sport}/v1/compare", {**pair, "model": "nope"}) == 404

        dash = json.loads(DASHBOARD.read_text(encoding="utf-8"))
        queries = [e.replace("$__rate_interval", "1m").replace("$model", ".*").replace("$method", ".*")
                   for e in _dashboard_exprs(dash)]
        assert len(queries) == len(set(queries)) >= len(FIXED_METRICS)

        def empty():
            return [q for q in queries if not _query(base, q)["data"]["result"]]

        deadline = time.monotonic() + 240
        missing = empty()
        while missing and time.monotonic() < deadline:
            assert all(p.poll() is None for p in stack.procs), f"a worker exited\n{stack.log_text()}"
            time.sleep(2.0)
            missing = empty()
        assert missing == [], f"dashboard queries without a series: {missing}\n{stack.log_text()}"
        # the global-importance gauges are bounded: at most top-K (20) + other per (model, method)
        res = _query(base, "count by (model, method) (prefstream_global_mean_abs_phi)")["data"]["result"]
        assert res and all(1 <= float(r["value"][1]) <= 21 for r in res)
        assert {r["metric"]["model"] for r in res} >= {"linear-bt"}
        # the rules are loaded by the running Prometheus
        with urllib.request.urlopen(f"{base}/api/v1/rules", timeout=5) as resp:
            groups = json.load(resp)["data"]["groups"]
        assert sum(len(g["rules"]) for g in groups) == len(_alert_names())

        # the preference flips (feature a now counts 4x, b 0.1x): a drift record reaches the drift topic
        from stream.monitoring.monitor import drift_record_ok

        flipped = []
        for i in range(600):
            xl, xr = rng.normal(size=3), rng.normal(size=3)
            y = 1 if np.array([4.0, -0.1, 0.5]) @ (xl - xr) > 0 else -1
            flipped.append((f"flip{i}", json.dumps({
                "schema_version": 1, "event_id": f"flip{i}", "timestamp": 1700001000 + i, "outcome": y,
                "left": {"features": dict(zip("abc", map(float, xl)))},
                "right": {"features": dict(zip("abc", map(float, xr)))}}).encode()))
        # two waves: the second is sent once the explainer serves a linear-bt that learned the first, so its
        # explanations come from the flipped model whatever the timing (a fast explainer could explain all 600
        # with the model of before, whose attributions of such events have not drifted)
        from tests.test_workers_kafka import metric_value, scrape

        before = stack.totals()[0]
        stack.send("preferences", flipped[:300])
        stack.wait(lambda: stack.totals()[0] >= before + 300 or None, 120, "the first flipped wave learned")
        published = sum(snap["version"] for key, snap in stack.snapshots().items() if key.startswith("linear-bt@"))
        stack.wait(lambda: metric_value(scrape(eport), "prefstream_model_version", model="linear-bt") >= published
                   or None, 60, "the explainer to load the linear-bt that learned the first wave")
        stack.send("preferences", flipped[300:])
        def explanation_drift():
            recs = [json.loads(v) for _, v in stack.read("drift")]
            ok = any(r["kind"] in ("ranking", "feature") and (r["model"], r["method"]) == ("linear-bt", "linear-shapley")
                     for r in recs)
            return [r for r in recs if r["kind"] in ("ranking", "feature")] if ok else None

        drift = stack.wait(explanation_drift, 180, "a linear-bt explanation drift record on the drift topic")
        for rec in drift:  # every model's records are valid drift.v1 records (a window of 20 is noisy)
            drift_record_ok(rec)
        def counted():
            res = _query(base, 'sum(prefstream_drift_total{kind=~"ranking|feature"})')["data"]["result"]
            return bool(res) and float(res[0]["value"][1]) >= len(drift) or None

        assert stack.wait(counted, 60, "prefstream_drift_total, scraped by Prometheus, to count every record")
    finally:
        subprocess.run(["bash", str(PROM_DIR / "stop.sh")], env=prom_env, capture_output=True, timeout=60)
        stack.close()
