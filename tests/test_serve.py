"""``prefstream serve`` as a real process: bad input, auth, deadline, OpenAPI, health and readiness.

One server process (``python -m stream serve``) on a free port follows fresh topics on the real
broker; its model and item records are produced here (encoded exactly as a learner worker encodes
them). The end-to-end test with a real learner worker, agreement and hot swap is
tests/test_serve_kafka.py.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import numpy as np
import pytest

from stream.serving.datamodels import CompareResponse, ModelsResponse, RankResponse, ReadyResponse

pytestmark = pytest.mark.kafka

REPO = Path(__file__).resolve().parents[1]
TOKEN = "s3cret-token"
FEATURES = ["a", "b", "c"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(pred, timeout: float, what: str, proc: subprocess.Popen | None = None, log: Path | None = None,
               poll: float = 0.2):
    """Poll ``pred`` until it returns a truthy value (returned) or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = pred()
        except httpx.TransportError as exc:   # the server is not listening yet
            last = exc
        if last and not isinstance(last, Exception):
            return last
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the process exited with {proc.returncode} while waiting for {what}\n"
                        f"{log.read_text()[-4000:] if log else ''}")
        time.sleep(poll)
    pytest.fail(f"timed out after {timeout:g} s waiting for {what} (last: {last!r})\n"
                f"{log.read_text()[-4000:] if log and log.exists() else ''}")


class Server:
    """A ``prefstream serve`` subprocess on a free port, with an httpx client."""

    def __init__(self, env: dict, tmp: Path, token: str | None = None, *args: str) -> None:
        self.port = free_port()
        self.log = tmp / f"serve-{self.port}.log"
        full = dict(os.environ)
        full.update({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"})
        full.update(env)
        if token:
            full["PREFSTREAM_SERVE_TOKEN"] = token
        self.proc = subprocess.Popen([sys.executable, "-m", "stream", "serve", "--port", str(self.port), *args],
                                     cwd=REPO, env=full, stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", headers=headers, timeout=30)
        self.wait(lambda: self.client.get("/healthz").status_code == 200, 60, "/healthz")

    def wait(self, pred, timeout: float, what: str, poll: float = 0.2):
        return wait_until(pred, timeout, what, self.proc, self.log, poll)

    def close(self) -> None:
        self.client.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def make_topics(kafka_options: dict, prefix: str) -> dict[str, str]:
    """Fresh model and item topics (compacted, as `prefstream topics create` makes them)."""
    from stream.broker import TopicSpec, create_topics

    u = uuid.uuid4().hex[:10]
    topics = {"models": f"test.{prefix}.models.{u}", "items": f"test.{prefix}.items.{u}"}
    create_topics(None, {t: TopicSpec(1, {"cleanup.policy": "compact", "max.message.bytes": "8388608"})
                         for t in topics.values()}, client_options=kafka_options)
    return topics


def delete_topics(kafka_options: dict, topics) -> None:
    from kafka.admin import KafkaAdminClient

    try:
        admin = KafkaAdminClient(**kafka_options)
        admin.delete_topics(list(topics))
        admin.close()
    except Exception:  # best effort: the names are unique
        pass


def trained_models(n: int = 300, seed: int = 0):
    """A linear-bt and a capacity learner trained on the same synthetic stream over a, b, c."""
    from learners.capacity_stream import CapacityLogistic
    from learners.linear import LinearBT

    rng = np.random.default_rng(seed)
    lin, cap = LinearBT(FEATURES), CapacityLogistic(FEATURES)
    for _ in range(n):
        xl, xr = rng.normal(size=3), rng.normal(size=3)
        y = 1 if (xl - xr) @ [1.0, -2.0, 0.5] > 0 else -1
        a, b = dict(zip(FEATURES, xl)), dict(zip(FEATURES, xr))
        lin.learn_one(a, b, y)
        cap.learn_one(a, b, y)
    return lin, cap


def item_records(n: int, seed: int = 1) -> list[tuple[str, bytes]]:
    rng = np.random.default_rng(seed)
    return [(f"i{i}", json.dumps({"schema_version": 1, "item_id": f"i{i}",
                                   "features": dict(zip(FEATURES, map(float, rng.normal(size=3))))}).encode())
            for i in range(n)]


@pytest.fixture(scope="module")
def guarded(kafka_bootstrap, kafka_options, tmp_path_factory):
    """A server with a token, small limits and a 1 µs explanation deadline, serving linear-bt and capacity."""
    from kafka import KafkaProducer

    from stream.contract import encode_snapshot

    topics = make_topics(kafka_options, "serve")
    env = {"PREFSTREAM_BOOTSTRAP_SERVERS": kafka_bootstrap, "PREFSTREAM_TOPIC_MODELS": topics["models"],
           "PREFSTREAM_TOPIC_ITEMS": topics["items"], "PREFSTREAM_SERVE_MODELS": "linear-bt,capacity",
           "PREFSTREAM_SERVE_MAX_ITEMS": "50", "PREFSTREAM_SERVE_MAX_BODY_BYTES": "65536",
           "PREFSTREAM_SERVE_EXPLAIN_DEADLINE_S": "0.000001"}
    srv = Server(env, tmp_path_factory.mktemp("serve"), TOKEN)
    try:
        # readiness before any snapshot: 503 naming both models
        r = srv.client.get("/readyz")
        assert r.status_code == 503 and sorted(r.json()["missing"]) == ["capacity", "linear-bt"]
        assert r.json()["loading"] == []
        # one line once the socket accepts (printed before the first request is answered)
        assert f"serving on http://127.0.0.1:{srv.port} (models: linear-bt, capacity)\n" in srv.log.read_text()
        lin, cap = trained_models()
        producer = KafkaProducer(acks="all", **kafka_options)
        for k, v in item_records(20):
            producer.send(topics["items"], key=k.encode(), value=v)
        producer.send(topics["models"], key=b"linear-bt@p:0", value=encode_snapshot("linear-bt", 4, 300, lin.state_dict()))
        producer.send(topics["models"], key=b"capacity@p:0", value=encode_snapshot("capacity", 2, 300, cap.state_dict()))
        producer.flush(30)
        producer.close()
        srv.wait(lambda: srv.client.get("/readyz").status_code == 200, 60, "/readyz 200")
        yield srv
    finally:
        srv.close()
        delete_topics(kafka_options, topics.values())


# ============================================================================ health, readiness, OpenAPI
def test_health_ready_models_and_openapi(guarded):
    c = guarded.client
    assert httpx.get(f"http://127.0.0.1:{guarded.port}/healthz").json() == {"status": "ok"}   # no token needed
    ready = ReadyResponse.model_validate(c.get("/readyz").json())
    assert ready.ready and ready.missing == [] and ready.catalog_caught_up and ready.models_caught_up
    models = ModelsResponse.model_validate(c.get("/v1/models").json())
    by = {m.model: m for m in models.models}
    assert by["linear-bt"].version == 4 and by["linear-bt"].source_versions == {"p:0": 4}
    assert by["capacity"].examples_seen == 300 and by["capacity"].aggregate == "utility"
    assert models.catalog_items == 20
    doc = c.get("/openapi.json").json()
    assert set(doc["paths"]) >= {"/v1/rank", "/v1/compare", "/v1/explain", "/v1/models", "/healthz", "/readyz", "/metrics"}
    body = doc["paths"]["/v1/rank"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/RankRequest"}
    assert set(doc["components"]["schemas"]["RankRequest"]["properties"]) >= {"model", "ids", "columns", "items", "top_k"}


def test_rank_and_compare_answer_with_the_documented_types(guarded):
    c = guarded.client
    r = c.post("/v1/rank", json={"model": "capacity", "ids": ["i3", "i1", "i2"], "top_k": 2})
    rank = RankResponse.model_validate(r.json())
    assert r.status_code == 200 and [it.rank for it in rank.items] == [1, 2] and rank.items[0].score >= rank.items[1].score
    cmp = CompareResponse.model_validate(c.post("/v1/compare", json={"model": "linear-bt", "left": {"id": "i1"},
                                                                      "right": {"id": "i2"}}).json())
    back = c.post("/v1/compare", json={"model": "linear-bt", "left": {"id": "i2"}, "right": {"id": "i1"}}).json()
    assert abs(cmp.probability + back["probability"] - 1.0) < 1e-12      # P(a ≻ b) + P(b ≻ a) = 1


# ============================================================================ bad input
def _rows(n):
    return [[0.1, 0.2, 0.3]] * n


BAD = [
    # (name, body (dict) or raw bytes, status, error code, field)
    ("not json", b'{"model": "capacity", "ids": ["i1"', 422, "malformed", "body"),
    ("not an object", b'[1, 2]', 422, "malformed", "body"),
    ("empty body", b"", 422, "malformed", "body"),
    ("missing model", {"ids": ["i1"]}, 422, "malformed", "model"),
    ("unknown field", {"model": "capacity", "ids": ["i1"], "bogus": 1}, 422, "malformed", "bogus"),
    ("model not a string", {"model": 5, "ids": ["i1"]}, 422, "malformed", "model"),
    ("ids not a list", {"model": "capacity", "ids": "i1"}, 422, "malformed", "ids"),
    ("no candidates", {"model": "capacity"}, 422, "malformed", "ids"),
    ("two candidate forms", {"model": "capacity", "ids": ["i1"], "items": [{"id": "i1"}]}, 422, "malformed", "items"),
    ("feature as a string", {"model": "capacity", "items": [{"features": {"a": "1", "b": 0, "c": 0}}]}, 422,
     "malformed", "items[0].features.a"),
    ("feature as a bool", {"model": "capacity", "items": [{"features": {"a": True, "b": 0, "c": 0}}]}, 422,
     "malformed", "items[0].features.a"),
    ("missing feature", {"model": "capacity", "items": [{"features": {"a": 1, "b": 0}}]}, 422, "missing_feature",
     "items[0].features.c"),
    ("huge feature", {"model": "capacity", "items": [{"features": {"a": 1e16, "b": 0, "c": 0}}]}, 422,
     "out_of_range", "items[0].features.a"),
    ("overflowing feature", b'{"model": "capacity", "items": [{"features": {"a": 1e400, "b": 0, "c": 0}}]}', 422,
     "out_of_range", "items[0].features.a"),
    ("NaN token", b'{"model": "capacity", "columns": {"feature_names": ["a", "b", "c"], "rows": [[NaN, 0, 0]]}}', 422,
     None, None),
    ("huge column value", {"model": "capacity", "columns": {"feature_names": FEATURES, "rows": [[0, 0, 0], [0, -2e15, 0]]}},
     422, "out_of_range", "columns.rows[1][1]"),
    ("ragged rows", {"model": "capacity", "columns": {"feature_names": FEATURES, "rows": [[0, 0, 0], [0, 0]]}}, 422,
     "malformed", "columns.rows[1]"),
    ("string in a row", {"model": "capacity", "columns": {"feature_names": FEATURES, "rows": [[0, "1.5", 0]]}}, 422,
     "malformed", "columns.rows[0][1]"),
    ("bool in a row", {"model": "capacity", "columns": {"feature_names": FEATURES, "rows": [[0, 1.5, True]]}}, 422,
     "malformed", "columns.rows[0][2]"),
    ("null in a row", {"model": "capacity", "columns": {"feature_names": FEATURES, "rows": [[0, None, 1]]}}, 422,
     "malformed", "columns.rows[0][1]"),
    ("rows too narrow", {"model": "capacity", "columns": {"feature_names": FEATURES, "rows": [[0, 1], [2, 3]]}}, 422,
     "malformed", "columns.rows[0]"),
    ("column missing", {"model": "capacity", "columns": {"feature_names": ["a", "b"], "rows": [[0, 0]]}}, 422,
     "missing_feature", "columns.feature_names"),
    ("huge context", {"model": "linear-bt", "ids": ["i1"], "context": {"u": 1e300}}, 422, "out_of_range", "context.u"),
    ("negative top_k", {"model": "capacity", "ids": ["i1"], "top_k": 0}, 422, "malformed", "top_k"),
    ("unknown model", {"model": "nope", "ids": ["i1"]}, 404, "unknown_model", "model"),
    ("unknown item", {"model": "capacity", "ids": ["i1", "zzz"]}, 404, "unknown_item", "ids[1]"),
    ("unknown explain method", {"model": "capacity", "ids": ["i1", "i2"], "explain": "nope"}, 404, "unknown_method",
     "explain"),
    ("too many items", {"model": "capacity", "columns": {"feature_names": FEATURES, "rows": _rows(51)}}, 413,
     "too_large", "columns"),
    ("body too large", {"model": "capacity", "columns": {"feature_names": FEATURES, "rows": _rows(40)},
                        "pad": "x" * 70_000}, 413, "too_large", "body"),
]


@pytest.mark.parametrize("name,body,status,code,field", BAD, ids=[b[0] for b in BAD])
def test_bad_rank_input_is_a_4xx_naming_the_field(guarded, name, body, status, code, field):
    c = guarded.client
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    r = c.post("/v1/rank", content=raw, headers={"Content-Type": "application/json"})
    assert r.status_code == status, r.text
    err = r.json()
    if code is None:   # NaN is not JSON: refused either by the parser or by the numeric bound
        assert err["error"] in ("malformed", "out_of_range") and err["field"].startswith(("body", "columns.rows[0]"))
    else:
        assert err["error"] == code and err["field"] == field, err
    assert err["detail"] and "Traceback" not in r.text
    # the server keeps serving after every bad request
    assert c.post("/v1/rank", json={"model": "capacity", "ids": ["i1", "i2"]}).status_code == 200


def test_bad_compare_and_explain_input(guarded):
    c = guarded.client
    cases = [
        ("/v1/compare", {"model": "capacity", "left": {"id": "i1"}}, 422, "malformed", "right"),
        ("/v1/compare", {"model": "capacity", "left": {"id": "nope"}, "right": {"id": "i1"}}, 404, "unknown_item", "left.id"),
        ("/v1/compare", {"model": "capacity", "left": {}, "right": {"id": "i1"}}, 422, "malformed", "left"),
        ("/v1/compare", {"model": "capacity", "left": {"features": {"a": 1, "b": 2, "c": -3e15}}, "right": {"id": "i1"}},
         422, "out_of_range", "left.features.c"),
        ("/v1/explain", {"model": "gpm", "left": {"id": "i1"}, "right": {"id": "i2"}}, 404, "not_served", "model"),
        ("/v1/explain", {"model": "capacity", "method": "distributional-categorical", "left": {"id": "i1"},
                         "right": {"id": "i2"}}, 404, "unknown_method", "method"),   # a click-session method
    ]
    for path, body, status, code, field in cases:
        r = c.post(path, json=body)
        assert (r.status_code, r.json()["error"], r.json()["field"]) == (status, code, field), (path, body, r.text)
    assert c.get("/v1/nowhere").status_code == 404 and c.get("/v1/nowhere").json()["error"] == "not_found"
    detail = c.post("/v1/rank", json={"model": "gpm", "ids": ["i1"]}).json()["detail"]
    assert detail == ("Model 'gpm' is not served here; this server's models are ['linear-bt', 'capacity'] "
                      "(start it with --models to serve others).")


def test_explain_past_the_deadline_is_a_504_with_what_was_spent(guarded):
    c = guarded.client
    t0 = time.monotonic()
    r = c.post("/v1/explain", json={"model": "capacity", "method": "sharp-pairwise", "left": {"id": "i1"},
                                    "right": {"id": "i2"}})
    assert r.status_code == 504, r.text
    err = r.json()
    assert err["error"] == "deadline_exceeded" and err["deadline_s"] == 1e-6 and err["method"] == "sharp-pairwise"
    assert err["elapsed_s"] >= 1e-6 and err["model"] == "capacity" and err["budgets"]["max_coalitions"] == 2048
    assert time.monotonic() - t0 < 10
    assert c.post("/v1/compare", json={"model": "capacity", "left": {"id": "i1"}, "right": {"id": "i2"}}).status_code == 200


# ============================================================================ auth
def test_token_is_required_everywhere_but_healthz(guarded):
    base = f"http://127.0.0.1:{guarded.port}"
    calls = [("GET", "/readyz", None), ("GET", "/metrics", None), ("GET", "/v1/models", None),
             ("GET", "/openapi.json", None), ("POST", "/v1/rank", {"model": "capacity", "ids": ["i1"]}),
             ("POST", "/v1/compare", {"model": "capacity", "left": {"id": "i1"}, "right": {"id": "i2"}}),
             ("POST", "/v1/explain", {"model": "capacity", "left": {"id": "i1"}, "right": {"id": "i2"}}),
             ("GET", "/v1/nowhere", None)]
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}, {"Authorization": f"Bearer {TOKEN}x"}):
        for method, path, body in calls:
            r = httpx.request(method, base + path, json=body, headers=headers, timeout=10)
            assert r.status_code == 401, (headers, path, r.status_code)
            assert r.json()["error"] == "unauthorized" and r.headers["WWW-Authenticate"] == "Bearer"
    assert httpx.get(base + "/healthz").status_code == 200
    ok = httpx.get(base + "/v1/models", headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200


def test_metrics_count_requests_by_endpoint_and_status(guarded):
    from tests.test_workers_kafka import metric_value

    c = guarded.client
    before = metric_value(c.get("/metrics").text, "prefstream_serve_requests_total", endpoint="/v1/compare", status="404")
    for _ in range(3):
        c.post("/v1/compare", json={"model": "nope", "left": {"id": "i1"}, "right": {"id": "i2"}})
    text = c.get("/metrics").text
    assert metric_value(text, "prefstream_serve_requests_total", endpoint="/v1/compare", status="404") == before + 3
    assert metric_value(text, "prefstream_model_version", model="linear-bt") == 4
    assert metric_value(text, "prefstream_model_swaps_total", model="capacity") == 1
    assert 0 <= metric_value(text, "prefstream_model_snapshot_age_seconds", model="capacity") < 600
    assert 'prefstream_serve_request_latency_seconds_bucket{endpoint="/v1/compare",le="+Inf"}' in text


def test_columnar_rows_rank_exactly_as_the_per_item_form(guarded):
    """One table in another column order gives the same scores as per-item feature dicts."""
    c = guarded.client
    rows = [[0.25, -1.5, 3.0], [1.0, 0.0, -2.0], [-0.5, 2.5, 0.125]]
    cols = c.post("/v1/rank", json={"model": "capacity", "columns": {"feature_names": ["c", "a", "b"],
                                                                      "rows": [[r[2], r[0], r[1]] for r in rows]}}).json()
    items = c.post("/v1/rank", json={"model": "capacity",
                                     "items": [{"id": str(i), "features": dict(zip(FEATURES, r))} for i, r in enumerate(rows)]}).json()
    assert cols["items"] == items["items"]


def test_a_new_version_is_warmed_after_an_explanation_was_asked():
    """In-process: after an explain request, every swapped-in version gets its scorer built in the background."""
    import asyncio

    from stream.contract import encode_snapshot
    from stream.serving.datamodels import ExplainRequest
    from stream.serving.service import ServeState
    from stream.settings import Settings

    st = ServeState(Settings.load(None, {"models": ["capacity"]}, environ={}))
    lin, cap = trained_models(50)
    for k, v in item_records(5):
        st.on_item(k.encode(), v)
    st.live.on_snapshot(b"capacity@p:0", encode_snapshot("capacity", 1, 50, cap.state_dict()))
    st._warmer.submit(lambda: None).result(30)
    assert "scorer" not in st.live.get("capacity").cache        # no explanation asked yet: no warm-up
    req = ExplainRequest(model="capacity", left={"id": "i0"}, right={"id": "i1"})
    (rec,) = asyncio.run(st.run_explain(st.explain_job(req)))
    assert rec["model_version"] == 1
    st.live.on_snapshot(b"capacity@p:0", encode_snapshot("capacity", 2, 60, cap.state_dict()))
    st._warmer.submit(lambda: None).result(30)                  # the warm-up queued before this one is done
    assert st.live.get("capacity").version == 2 and "scorer" in st.live.get("capacity").cache


def test_cli_refuses_an_unknown_model_in_one_line():
    out = subprocess.run([sys.executable, "-m", "stream", "serve", "--models", "nope", "--port", "1"], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stderr.startswith("error: Unknown model 'nope'") and "Traceback" not in out.stderr


def test_settings_travel_to_server_worker_processes_with_their_secrets():
    from stream.serving.settings import export_settings, settings_from_env
    from stream.settings import Settings

    s = Settings.load(None, {"serve_token": "t0k", "serve_workers": 3, "models": ["gpm"]}, environ={})
    env: dict = {}
    export_settings(s, env)
    back = settings_from_env(env)
    assert back == s and back.serve_token == "t0k"
    assert s.as_dict()["serve_token"] == "***" and "t0k" not in repr(s)
