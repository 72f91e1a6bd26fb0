"""Explanations inside ``POST /v1/rank``: the version's cache, and a deadline that marks, never fails.

In-process (the ASGI app over a hand-fed :class:`~stream.serving.service.ServeState`, no broker):
the oracle of every value is the closed form of linear Bradley-Terry's Shapley values,
φ_j = w_j (x_l − x_r)_j with a zero background (Hu, Chau et al. 2022, Sec. 3.1), computed here.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from learners.exceptions import InvalidInputError
from stream import registry
from stream.contract import encode_snapshot
from stream.serving.datamodels import RankResponse
from tests._serve import post as _post
from tests._serve import serving

FEATURES = ["a", "b", "c"]
IDS = [f"i{i}" for i in range(8)]


def _model(n: int = 200, seed: int = 0):
    from learners.linear import LinearBT

    rng = np.random.default_rng(seed)
    m = LinearBT(FEATURES)
    for _ in range(n):
        xl, xr = rng.normal(size=3), rng.normal(size=3)
        m.learn_one(dict(zip(FEATURES, xl)), dict(zip(FEATURES, xr)), 1 if (xl - xr) @ [1.0, -2.0, 0.5] > 0 else -1)
    return m


@pytest.fixture()
def served():
    """``(state, app, model, items)``: linear-bt v1 and 8 catalog items, a 0.2 s ranking deadline."""
    rng = np.random.default_rng(3)
    items = {i: rng.normal(size=3) for i in IDS}
    with serving({"models": ["linear-bt"], "serve_rank_explain_deadline_s": 0.2, "serve_explain_deadline_s": 0.2},
                 items, FEATURES) as (st, app):
        m = _model()
        st.live.on_snapshot(b"linear-bt@p:0", encode_snapshot("linear-bt", 1, 200, m.state_dict()))
        yield st, app, m, items


def _oracle(m, items, left: str, right: str) -> np.ndarray:
    return np.asarray(m.weights) * (items[left] - items[right])


def _pair(rec: dict) -> tuple[str, str]:
    """``(left id, right id)`` of a ranking's record (``rank-<request>:<left>><right>``)."""
    a, b = rec["request_id"].split(":", 1)[1].split(">")
    return a, b


def test_rank_explanations_are_the_pairs_values_and_come_back_from_the_versions_cache(served):
    st, app, m, items = served
    body = {"model": "linear-bt", "ids": IDS, "top_k": 4, "explain": "linear-shapley"}
    first = _post(app, "/v1/rank", body).json()
    again = _post(app, "/v1/rank", body).json()
    RankResponse.model_validate(first)
    order = [it["id"] for it in first["items"]]
    assert [it["id"] for it in again["items"]] == order and len(first["explanations"]) == 4
    for k, (a, b) in enumerate(zip(first["explanations"], again["explanations"])):
        assert _pair(a) == _pair(b) and _pair(a)[0] == order[k] and (k == 3 or _pair(a)[1] == order[k + 1])
        want = _oracle(m, items, *_pair(a))
        np.testing.assert_allclose(a["values"], want, rtol=0, atol=1e-12)
        np.testing.assert_allclose(b["values"], want, rtol=0, atol=1e-12)
        assert "cached" not in a["extra"] and b["extra"]["cached"] is True
        assert b["request_id"] != a["request_id"]
        assert a["model_version"] == b["model_version"] == 1
    assert len(st.live.get("linear-bt").cache["explanations"]) == 4
    # a new version explains afresh: nothing of v1's cache is reused
    m2 = _model(seed=9)
    st.live.on_snapshot(b"linear-bt@p:0", encode_snapshot("linear-bt", 2, 200, m2.state_dict()))
    new = _post(app, "/v1/rank", body).json()
    for rec in new["explanations"]:
        assert rec["model_version"] == new["version"] == 2 and "cached" not in rec["extra"]
        np.testing.assert_allclose(rec["values"], _oracle(m2, items, *_pair(rec)), rtol=0, atol=1e-12)


def test_a_slow_explainer_marks_the_explanations_missing_and_the_ranking_still_answers(served):
    st, app, m, items = served
    calls, release = [], threading.Event()
    lin = registry.get_explainer("linear-bt", "linear-shapley")

    def slow(learner, examples, ctx):
        calls.append(len(examples))
        release.wait(10)
        return lin(learner, examples, ctx)

    registry.register_explainer("linear-bt", "test-slow", slow)
    plain = _post(app, "/v1/rank", {"model": "linear-bt", "ids": IDS, "top_k": 3}).json()
    body = {"model": "linear-bt", "ids": IDS, "top_k": 3, "explain": "test-slow"}
    t0 = time.monotonic()
    r = _post(app, "/v1/rank", body)
    assert r.status_code == 200 and time.monotonic() - t0 < 2.0
    out = r.json()
    RankResponse.model_validate(out)
    assert out["items"] == plain["items"]
    assert [e["missing"] for e in out["explanations"]] == [True] * 3
    assert {e["reason"] for e in out["explanations"]} == {"deadline_exceeded"}
    assert "serve_rank_explain_deadline_s" in out["explanations"][0]["detail"]
    order = [it["id"] for it in out["items"]]
    assert [e["left_id"] for e in out["explanations"]] == order
    assert [e["right_id"] for e in out["explanations"]][:2] == order[1:]
    assert [e["waited_s"] for e in out["explanations"]] == [pytest.approx(0.2, abs=0.05)] * 3
    # asked again while it runs: not started a second time, and not waited for again past the first deadline
    again = _post(app, "/v1/rank", body).json()["explanations"]
    assert all(e["missing"] for e in again) and calls == [3] and [e["waited_s"] for e in again] == [0.0] * 3
    release.set()
    deadline = time.monotonic() + 10
    while len(st.live.get("linear-bt").cache.get("explanations") or ()) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    done = _post(app, "/v1/rank", body).json()
    assert calls == [3]
    for rec, gap in zip(done["explanations"], out["explanations"]):   # finished in the background, in the cache
        assert rec["extra"]["cached"] is True and _pair(rec) == (gap["left_id"], gap["right_id"])
        np.testing.assert_allclose(rec["values"], _oracle(m, items, *_pair(rec)), rtol=0, atol=1e-12)


def test_an_explainer_that_refuses_is_a_missing_explanation_with_its_reason(served):
    _, app, _, _ = served

    def refuses(learner, examples, ctx):
        raise InvalidInputError("this pair cannot be explained")

    registry.register_explainer("linear-bt", "test-refuses", refuses)
    r = _post(app, "/v1/rank", {"model": "linear-bt", "ids": IDS, "top_k": 2, "explain": "test-refuses"})
    assert r.status_code == 200
    ex = r.json()["explanations"]
    assert [e["reason"] for e in ex] == ["failed", "failed"] and "this pair cannot be explained" in ex[0]["detail"]
    # the same refusal through /v1/explain stays a 422, and an unknown method a 404 in both
    r = _post(app, "/v1/explain", {"model": "linear-bt", "method": "test-refuses", "left": {"id": "i0"},
                                   "right": {"id": "i1"}})
    assert r.status_code == 422 and r.json()["error"] == "invalid_input"
    r = _post(app, "/v1/rank", {"model": "linear-bt", "ids": IDS, "explain": "nope"})
    assert r.status_code == 404 and r.json()["field"] == "explain"


def test_explain_past_its_deadline_is_a_504_and_the_finished_record_is_served_next(served):
    st, app, m, items = served
    release = threading.Event()
    lin = registry.get_explainer("linear-bt", "linear-shapley")
    registry.register_explainer("linear-bt", "test-late",
                                lambda learner, examples, ctx: (release.wait(10), lin(learner, examples, ctx))[1])
    body = {"model": "linear-bt", "method": "test-late", "left": {"id": "i2"}, "right": {"id": "i5"}}
    r = _post(app, "/v1/explain", body)
    assert r.status_code == 504 and r.json()["error"] == "deadline_exceeded" and r.json()["deadline_s"] == pytest.approx(0.2, abs=1e-12)
    release.set()
    deadline = time.monotonic() + 10
    while not st.live.get("linear-bt").cache.get("explanations") and time.monotonic() < deadline:
        time.sleep(0.02)
    r = _post(app, "/v1/explain", {**body, "request_id": "q-2"})
    assert r.status_code == 200 and r.json()["request_id"] == "q-2" and r.json()["extra"]["cached"] is True
    np.testing.assert_allclose(r.json()["values"], _oracle(m, items, "i2", "i5"), rtol=0, atol=1e-12)
