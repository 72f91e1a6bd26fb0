"""``prefstream serve`` is true to its generated OpenAPI document (issue 30 item 5).

Schemathesis drives the document that the app generates from its types with property-based
requests (positive and negative bodies, every check: no 5xx, documented status codes and
content types, responses valid under their schemas, schema-valid bodies accepted or refused for a
documented reason, schema-invalid ones refused, ``Allow`` on a 405). In-process over ASGI, against
a hand-fed server state (linear-bt and capacity, 8 catalog items), no broker; the examples are
bounded so the module stays a few seconds. Half of the generated rank / compare / explain bodies
are pointed at a served model and catalog ids (a ``map_body`` hook), so the scoring paths are
driven, not only the refusals of unknown models.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

schemathesis = pytest.importorskip("schemathesis")   # pinned in requirements.txt
from hypothesis import HealthCheck, settings  # noqa: E402

FEATURES = ["a", "b", "c"]
IDS = [f"i{i}" for i in range(8)]


def _trained():
    from learners.capacity_stream import CapacityLogistic
    from learners.linear import LinearBT

    rng = np.random.default_rng(0)
    lin, cap = LinearBT(FEATURES), CapacityLogistic(FEATURES)
    for _ in range(200):
        xl, xr = rng.normal(size=3), rng.normal(size=3)
        y = 1 if (xl - xr) @ [1.0, -2.0, 0.5] > 0 else -1
        a, b = dict(zip(FEATURES, xl)), dict(zip(FEATURES, xr))
        lin.learn_one(a, b, y)
        cap.learn_one(a, b, y)
    return lin, cap


@pytest.fixture(scope="module")
def api_schema():
    from stream.contract import encode_snapshot
    from tests._serve import serving

    rng = np.random.default_rng(1)
    items = {i: rng.normal(size=3) for i in IDS}
    # deadlines far above any explanation here: a 504 (documented, a 5xx) must not come from the machine's load
    with serving({"models": ["linear-bt", "capacity"], "serve_max_items": 50, "serve_rank_explain_deadline_s": 30.0,
                  "serve_explain_deadline_s": 30.0}, items, FEATURES) as (st, app):
        lin, cap = _trained()
        st.live.on_snapshot(b"linear-bt@p:0", encode_snapshot("linear-bt", 1, 200, lin.state_dict()))
        st.live.on_snapshot(b"capacity@p:0", encode_snapshot("capacity", 1, 200, cap.state_dict()))
        st.catalog.version  # noqa: B018 - the catalog is filled before the first request
        schema = schemathesis.openapi.from_asgi("/openapi.json", app)
        schema.hook(map_body)
        yield schema


#: map_body points bodies at the served models only while positive (schema-valid) bodies are generated
_POINT = {"on": False}


def map_body(ctx, body):
    """Point half of the object bodies at a served model and the catalog (deterministic in the body)."""
    if not _POINT["on"] or not isinstance(body, dict) or not isinstance(body.get("model"), str):
        return body
    h = sum(map(ord, json.dumps(body, sort_keys=True, default=str))) % 4
    if h >= 2:
        return body
    body = dict(body)
    body["model"] = ("linear-bt", "capacity")[h]
    for side, i in (("left", 1), ("right", 3)):
        if isinstance(body.get(side), dict):
            body[side] = {"id": IDS[i]}
    path = getattr(getattr(ctx, "operation", None), "path", "")
    if path == "/v1/rank":
        body.pop("columns", None)
        body.pop("items", None)
        body["ids"] = IDS[: 2 + h * 3]
        if "explain" in body:
            body["explain"] = ("linear-shapley", "capacity-shapley")[h]
    if isinstance(body.get("method"), str):
        body["method"] = ("linear-shapley", "capacity-shapley")[h]
    return body


@pytest.mark.parametrize("mode", ["positive", "negative"])
def test_every_generated_request_is_answered_as_the_document_says(api_schema, mode):
    """Every check of schemathesis on bounded examples of every operation (``derandomize``: the same
    examples each run)."""
    from hypothesis import given

    strategy = api_schema.as_strategy(generation_mode=schemathesis.GenerationMode(mode))
    seen: list = []

    @given(case=strategy)
    @settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
              database=None)
    def run(case):
        # /readyz is a documented 503 here (this state follows no topics): every other check still runs on it
        skip = [schemathesis.checks.not_a_server_error] if case.path == "/readyz" else []
        response = case.call_and_validate(excluded_checks=skip)
        seen.append((case.path, response.status_code))

    _POINT["on"] = mode == "positive"
    try:
        run()
    finally:
        _POINT["on"] = False
    paths = {p for p, _ in seen}
    assert {"/v1/rank", "/v1/compare", "/v1/explain", "/v1/recommend"} <= paths, paths
    if mode == "positive":   # the scoring paths were driven, not only refusals
        assert any(p == "/v1/rank" and c == 200 for p, c in seen), seen


# ---------------------------------------------------------------------------- the findings of issue 30, one by one
def _client(api_schema):
    """A test client of the app; used in ``with`` (the app's lifespan runs, as under uvicorn)."""
    from starlette.testclient import TestClient

    return TestClient(api_schema.app)


def test_a_405_carries_allow_with_the_documented_methods(api_schema):
    """RFC 9110 §15.5.6: a 405 lists the methods the path supports, the same ones the document has."""
    with _client(api_schema) as c:
        _allow(c)


def _allow(c):
    doc = c.get("/openapi.json").json()
    for path, ops in doc["paths"].items():
        documented = {m.upper() for m in ops}
        wrong = "DELETE" if "DELETE" not in documented else "PATCH"
        r = c.request(wrong, path)
        assert r.status_code == 405, (path, r.status_code)
        assert r.json()["error"] == "method_not_allowed"
        allowed = {m.strip() for m in r.headers["allow"].split(",")}
        assert documented <= allowed <= documented | {"HEAD"}, (path, allowed)


def test_integer_valued_numbers_are_integers(api_schema):
    with _client(api_schema) as c:
        _integers(c)


def _integers(c):
    base = {"model": "linear-bt", "ids": IDS, "explain": "linear-shapley"}
    want = c.post("/v1/rank", json={**base, "top_k": 5, "seed": 5741}).json()
    got = c.post("/v1/rank", content=json.dumps({**base, "top_k": 5.0, "seed": 5741.0}).encode(),
                 headers={"Content-Type": "application/json"})
    assert got.status_code == 200, got.text
    assert got.json()["items"] == want["items"] and len(got.json()["explanations"]) == 5
    for bad in (5.5, "5", True):
        r = c.post("/v1/rank", json={**base, "top_k": bad})
        assert r.status_code == 422 and r.json()["field"] == "top_k", (bad, r.text)
    r = c.post("/v1/explain", json={"model": "linear-bt", "left": {"id": "i0"}, "right": {"id": "i1"}, "seed": 7.0})
    assert r.status_code == 200, r.text


def test_bounds_are_in_the_document(api_schema):
    with _client(api_schema) as c:
        doc = c.get("/openapi.json").json()["components"]["schemas"]
    top_k, seed = (next(s for s in doc["RankRequest"]["properties"][k]["anyOf"] if s.get("type") == "integer")
                   for k in ("top_k", "seed"))
    assert top_k["minimum"] == 1 and seed["minimum"] == 0 and seed["maximum"] == 2**63 - 1
    feat = doc["ItemRef"]["properties"]["features"]["anyOf"][0]["additionalProperties"]
    assert feat == {"type": "number", "minimum": -1e15, "maximum": 1e15}
    assert doc["RankRequest"]["properties"]["ids"]["uniqueItems"] is True
    assert doc["Columns"]["properties"]["feature_names"]["uniqueItems"] is True


@pytest.mark.parametrize("body,field,dups", [
    ({"ids": ["i4", "i4"]}, "ids[1]", ["i4"]),
    ({"ids": ["i1", "i4", "i2", "i4", "i1"]}, "ids[3]", ["i1", "i4"]),
    ({"items": [{"id": "i4"}, {"id": "i5"}, {"id": "i4", "features": {"a": 0.0, "b": 0.0, "c": 0.0}}]}, "items[2]", ["i4"]),
    ({"columns": {"feature_names": FEATURES, "ids": ["x", "x"], "rows": [[0, 0, 0], [1, 1, 1]]}}, "columns.ids[1]", ["x"]),
    ({"columns": {"feature_names": ["a", "b", "c", "a"], "rows": [[0, 0, 0, 1]]}}, "columns.feature_names[3]", ["a"]),
])
def test_duplicate_candidates_are_refused_naming_them(api_schema, body, field, dups):
    with _client(api_schema) as c:
        r = c.post("/v1/rank", json={"model": "capacity", **body})
    assert r.status_code == 422, r.text
    err = r.json()
    assert err["error"] == "duplicate_item" and err["field"] == field and err["duplicates"] == dups
    assert repr(dups[0]) in err["detail"]
