"""Serving per person (issue 28 item 5), in-process: the server's people store, personal scores, recommend, forget.

The oracle of every figure is the personal learner that learned the stream itself, with its people
in memory (``learner.score(X, user_id)``, ``predict_proba_many(..., user_ids=)``); the server gets
only what a learner worker publishes: a snapshot without people and one ``prefstream.people``
record per person (``stream.contract.people.encode_person``). The real-broker path is
tests/test_serve_people_kafka.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from stream.contract import encode_snapshot
from stream.contract.people import encode_person, person_key
from stream.serving.datamodels import CompareResponse, RankResponse, RecommendResponse
from stream.settings import Settings
from tests._serve import post as _post
from tests._serve import serving

FEATURES = ["a", "b", "c"]
N_ITEMS = 30
IDS = [f"i{i}" for i in range(N_ITEMS)]
MODELS = ["capacity-personal", "linear-bt-personal"]


def _items(seed: int = 3) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {i: rng.uniform(0.0, 1.0, size=3) for i in IDS}


def _learn(model, items, n: int, seed: int):
    """The population prefers a; 'ann' prefers c against it, 'bob' follows the population."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        a, b = rng.choice(IDS, 2, replace=False)
        xa, xb = items[a], items[b]
        user = rng.choice(["ann", "bob", None])
        w = [-0.5, 0.2, 3.0] if user == "ann" else [2.0, 0.5, -0.3]
        y = 1 if (xa - xb) @ w > 0 else -1
        model.learn_one(dict(zip(FEATURES, xa)), dict(zip(FEATURES, xb)), y, user_id=user)
    return model


def _fresh(name: str):
    from stream import registry

    return registry.get_model(name).factory(Settings.load(None, {"feature_names": FEATURES}, environ={}), {})


@pytest.fixture()
def served():
    """``(state, app, {model: trained learner}, items)``: both personal models, their people on the changelog."""
    items = _items()
    with serving({"models": MODELS, "feature_names": FEATURES}, items, FEATURES) as (st, app):
        trained = {}
        for name in MODELS:
            m = trained[name] = _learn(_fresh(name), items, 1500, seed=1)
            st.live.on_snapshot(f"{name}@p:0".encode(), encode_snapshot(name, 1, 1500, m.state_dict(people=False)))
            for user in m.people():
                st.on_person(person_key(name, user), encode_person(m.person_state(user), source="t:0", offset=1500))
        yield st, app, trained, items


def _X(items, ids) -> np.ndarray:
    return np.stack([items[i] for i in ids])


@pytest.mark.parametrize("name", MODELS)
def test_rank_and_compare_for_a_person_are_the_learners_own(served, name):
    st, app, trained, items = served
    m = trained[name]
    info = m.person_info("ann")
    assert info["personalized"] and info["version"] > 100
    r = _post(app, "/v1/rank", {"model": name, "ids": IDS, "user_id": "ann"}).json()
    RankResponse.model_validate(r)
    assert (r["user_id"], r["personalized"], r["person_version"]) == ("ann", True, info["version"])
    want = m.score(_X(items, IDS), "ann")
    got = {it["id"]: it["score"] for it in r["items"]}
    np.testing.assert_allclose([got[i] for i in IDS], want, rtol=0, atol=1e-9)
    assert [it["id"] for it in r["items"]] == [IDS[j] for j in np.argsort(-want, kind="stable")]
    for _ in range(2):   # the second request builds the person's catalog utilities, the third gathers from them
        again = _post(app, "/v1/rank", {"model": name, "ids": IDS[::-1], "user_id": "ann"}).json()
        np.testing.assert_allclose([{it["id"]: it["score"] for it in again["items"]}[i] for i in IDS], want,
                                   rtol=0, atol=1e-9)
    (full,) = [v for v in st.live.get(name).cache["person_catalog"].values() if isinstance(v, np.ndarray)]
    assert full.shape[0] >= N_ITEMS
    pop = _post(app, "/v1/rank", {"model": name, "ids": IDS}).json()
    assert (pop["user_id"], pop["personalized"], pop["person_version"]) == (None, False, 0)
    np.testing.assert_allclose([{it["id"]: it["score"] for it in pop["items"]}[i] for i in IDS],
                               m.score(_X(items, IDS)), rtol=0, atol=1e-9)
    assert [it["id"] for it in pop["items"]][:5] != [it["id"] for it in r["items"]][:5]   # ann differs
    stranger = _post(app, "/v1/rank", {"model": name, "ids": IDS, "user_id": "zoe"}).json()
    assert stranger["items"] == pop["items"] and not stranger["personalized"] and stranger["person_version"] == 0
    count = lambda v: st.metrics.registry.get_sample_value("prefstream_predictions_total",  # noqa: E731
                                                          {"model": name, "personalized": v})
    assert (count("true"), count("false")) == (3.0, 2.0)      # ann thrice; the population and the stranger
    c = _post(app, "/v1/compare", {"model": name, "left": {"id": "i1"}, "right": {"id": "i2"}, "user_id": "ann"}).json()
    CompareResponse.model_validate(c)
    p = m.predict_proba_many(_X(items, ["i1"]), _X(items, ["i2"]), user_ids=["ann"])[0]
    assert c["personalized"] and c["probability"] == pytest.approx(p, abs=1e-12)


@pytest.mark.parametrize("name", MODELS)
def test_recommend_is_the_persons_top_k_of_the_catalog_minus_the_excluded(served, name):
    _, app, trained, items = served
    m = trained[name]
    scores = m.score(_X(items, IDS), "ann")
    order = [IDS[j] for j in np.argsort(-scores, kind="stable")]
    r = _post(app, "/v1/recommend", {"model": name, "user_id": "ann", "top_k": 5}).json()
    RecommendResponse.model_validate(r)
    assert [it["id"] for it in r["items"]] == order[:5] and r["personalized"] and r["catalog_items"] == N_ITEMS
    np.testing.assert_allclose([it["score"] for it in r["items"]], np.sort(scores)[::-1][:5], rtol=0, atol=1e-9)
    ex = _post(app, "/v1/recommend", {"model": name, "user_id": "ann", "top_k": 5,
                                      "exclude": order[:2] + ["not-in-catalog"]}).json()
    assert [it["id"] for it in ex["items"]] == order[2:7] and ex["excluded"] == 2
    pop = _post(app, "/v1/recommend", {"model": name}).json()
    assert [it["id"] for it in pop["items"]] == [IDS[j] for j in np.argsort(-m.score(_X(items, IDS)), kind="stable")][:10]
    r = _post(app, "/v1/recommend", {"model": name, "exclude": ["i1", "i1"]})
    assert r.status_code == 422 and r.json()["error"] == "duplicate_item"


def test_a_new_record_updates_the_person_and_a_tombstone_forgets_them(served):
    st, app, trained, items = served
    name = "linear-bt-personal"
    m = trained[name]
    import copy

    from stream.plugins.personal import personal_loader

    before = _post(app, "/v1/rank", {"model": name, "ids": IDS, "user_id": "ann"}).json()
    served_population = copy.deepcopy(m.state_dict(people=False))
    _learn(m, items, 300, seed=7)                                   # more of ann's events, a new record
    st.on_person(person_key(name, "ann"), encode_person(m.person_state("ann"), source="t:0", offset=1800))
    after = _post(app, "/v1/rank", {"model": name, "ids": IDS, "user_id": "ann"}).json()
    assert after["person_version"] == m.person_info("ann")["version"] > before["person_version"]
    oracle = personal_loader(served_population)                     # the served population + ann's new state
    oracle.load_person("ann", m.person_state("ann"))
    np.testing.assert_allclose([{it["id"]: it["score"] for it in after["items"]}[i] for i in IDS],
                               oracle.score(_X(items, IDS), "ann"), rtol=0, atol=1e-9)
    assert np.abs(oracle.score(_X(items, IDS), "ann") - [{it["id"]: it["score"] for it in before["items"]}[i]
                                                         for i in IDS]).max() > 1e-6
    # forget: the store, the served learner and every answer stop knowing ann
    st.on_person(person_key(name, "ann"), None)
    assert (name, "ann") not in st.people and "ann" not in st.live.get(name).learner.people()
    gone = _post(app, "/v1/rank", {"model": name, "ids": IDS, "user_id": "ann"}).json()
    pop = _post(app, "/v1/rank", {"model": name, "ids": IDS}).json()
    assert (gone["personalized"], gone["person_version"]) == (False, 0) and gone["items"] == pop["items"]
    # a version swapped in later whose snapshot still holds ann forgets her too; bob's newer state (the snapshot's)
    # wins over his older record, and a newer record of his wins over the snapshot's
    st.live.on_snapshot(f"{name}@p:0".encode(), encode_snapshot(name, 2, 1800, m.state_dict(people=True)))
    assert "ann" in st.live.get(name).learner.people()
    again = _post(app, "/v1/rank", {"model": name, "ids": IDS, "user_id": "ann"}).json()
    assert again["version"] == 2 and not again["personalized"] and "ann" not in st.live.get(name).learner.people()
    bob = _post(app, "/v1/compare", {"model": name, "left": {"id": "i1"}, "right": {"id": "i2"}, "user_id": "bob"}).json()
    assert bob["personalized"] and bob["person_version"] == m.person_info("bob")["version"]
    _learn(m, items, 100, seed=8)
    st.on_person(person_key(name, "bob"), encode_person(m.person_state("bob"), source="t:0", offset=1900))
    bob2 = _post(app, "/v1/compare", {"model": name, "left": {"id": "i1"}, "right": {"id": "i2"}, "user_id": "bob"}).json()
    assert bob2["person_version"] == m.person_info("bob")["version"] > bob["person_version"]


def test_a_non_personal_model_answers_for_a_person_with_the_population():
    from learners.linear import LinearBT
    with serving({"models": ["linear-bt"]}, _items(), FEATURES) as (st, app):
        m = LinearBT(FEATURES)
        m.learn_one({"a": 1.0, "b": 0.0, "c": 0.0}, {"a": 0.0, "b": 0.0, "c": 0.0}, 1)
        st.live.on_snapshot(b"linear-bt@p:0", encode_snapshot("linear-bt", 1, 1, m.state_dict()))
        r = _post(app, "/v1/rank", {"model": "linear-bt", "ids": IDS[:4], "user_id": "ann"}).json()
        assert (r["user_id"], r["personalized"], r["person_version"]) == ("ann", False, 0)
        rec = _post(app, "/v1/explain", {"model": "linear-bt", "left": {"id": "i1"}, "right": {"id": "i2"},
                                         "user_id": "ann"}).json()
        assert rec["extra"]["user_id"] == "ann" and rec["extra"]["personalized"] is False


def test_explain_for_a_person_is_their_weights_values_and_how_they_differ(served):
    """``POST /v1/explain`` on linear-bt-personal with ``user_id``: linear-shapley of the served person's w + δ_u,
    (w + δ_u) ⊙ (a − b) (μ = 0: a server holds no background), base 0 + Σφ = the learner's own margin for them
    (atol 1e-9: the learner adds ⟨δ_u, z⟩ in scaled units); linear-shapley-deviation is δ_u ⊙ (a − b) and the
    population's values plus it are the person's (atol 1e-12); a stranger gets the population's, personalized
    false; rank with ``explain`` and ``user_id`` explains each consecutive pair of the person's ranking."""
    from stream.contract.explain import explanation_record_ok

    st, app, trained, items = served
    name = "linear-bt-personal"
    m = trained[name]
    a, b = "i1", "i2"
    D = items[a] - items[b]
    body = {"model": name, "left": {"id": a}, "right": {"id": b}}
    me = _post(app, "/v1/explain", {**body, "user_id": "ann"}).json()
    dev = _post(app, "/v1/explain", {**body, "user_id": "ann", "method": "linear-shapley-deviation"}).json()
    pop = _post(app, "/v1/explain", body).json()
    zoe = _post(app, "/v1/explain", {**body, "user_id": "zoe"}).json()
    for r in (me, dev, pop, zoe):
        explanation_record_ok(r)
    assert (me["method"], dev["method"], pop["method"]) == ("linear-shapley", "linear-shapley-deviation",
                                                            "linear-shapley")
    delta = m.deviation("ann")
    np.testing.assert_allclose(me["values"], (m.weights + delta) * D, rtol=0, atol=1e-12)
    g = m.margin_many(_X(items, [a]), _X(items, [b]), user_ids=["ann"])[0]
    assert me["base_value"] + sum(me["values"]) == pytest.approx(g, abs=1e-9) and me["prediction"] == pytest.approx(g, abs=1e-9)
    np.testing.assert_allclose(dev["values"], delta * D, rtol=0, atol=1e-12)
    assert np.abs(delta * D).max() > 1e-3
    np.testing.assert_allclose(np.add(pop["values"], dev["values"]), me["values"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(pop["values"], m.weights * D, rtol=0, atol=1e-12)
    assert (me["user_id"], me["extra"]["personalized"], me["extra"]["person_version"]) == \
        ("ann", True, m.person_info("ann")["version"])
    assert (zoe["user_id"], zoe["extra"]["personalized"], zoe["extra"]["person_version"]) == ("zoe", False, 0)
    assert zoe["values"] == pop["values"] and pop["extra"]["personalized"] is False
    r = _post(app, "/v1/rank", {"model": name, "ids": IDS, "top_k": 4, "user_id": "ann",
                                "explain": "linear-shapley-deviation"}).json()
    RankResponse.model_validate(r)
    order = [IDS[j] for j in np.argsort(-m.score(_X(items, IDS), "ann"), kind="stable")]   # the top 4 and the 5th
    assert r["personalized"] and [it["id"] for it in r["items"]] == order[:4] and len(r["explanations"]) == 4
    for k, rec in enumerate(r["explanations"]):
        left, right = rec["request_id"].split(":", 1)[1].split(">")
        assert (left, right) == (order[k], order[k + 1]) and rec["user_id"] == "ann" and rec["extra"]["personalized"]
        np.testing.assert_allclose(rec["values"], delta * (items[left] - items[right]), rtol=0, atol=1e-12)


def test_the_demo_shows_a_persons_ranking_beside_the_populations_and_what_sets_them_apart(served):
    """stream/demo/serve.py's person view, against the app: the person's top 5 are the learner's own, and the
    model's deviation method (linear-shapley-deviation, δ_u ⊙ (a − b)) explains their #1 vs #2."""
    from starlette.testclient import TestClient

    from stream.demo.serve import DEVIATION_METHODS, format_person, person_view

    st, app, trained, items = served
    name = "linear-bt-personal"
    m = trained[name]
    with TestClient(app) as c:
        v = person_view(c, name, "ann", {"ids": IDS, "top_k": 5})
    order = [IDS[j] for j in np.argsort(-m.score(_X(items, IDS), "ann"), kind="stable")]
    assert v["personalized"] and v["person_version"] == m.person_info("ann")["version"]
    assert [it["id"] for it in v["top"]] == order[:5]
    assert v["population_top"] == [IDS[j] for j in np.argsort(-m.score(_X(items, IDS)), kind="stable")][:5]
    d = m.deviation("ann") * (items[order[0]] - items[order[1]])
    assert v["apart"]["method"] == DEVIATION_METHODS[name] == "linear-shapley-deviation"
    assert [f for f, _ in v["apart"]["top_features"]] == [FEATURES[j] for j in np.argsort(-np.abs(d))]
    np.testing.assert_allclose([x for _, x in v["apart"]["top_features"]], d[np.argsort(-np.abs(d))], rtol=0, atol=1e-12)
    text = "\n".join(format_person(v))
    assert "for person ann" in text and "what sets ann apart (linear-shapley-deviation" in text
