"""A real ``prefstream serve`` process follows ``prefstream.people`` on the real broker: it serves a person
from their changelog record, and after the person's tombstone it does not know them any more.

The records are the learner worker's (``stream.contract.people.encode_person`` of
``person_state``, key ``<model>@<user_id>``); the snapshot carries the population only, as a
worker publishes it. The oracle is the personal learner that learned the stream, people in memory.
"""

from __future__ import annotations

import json
import uuid

import numpy as np
import pytest

from tests.test_serve import Server, delete_topics

pytestmark = pytest.mark.kafka

FEATURES = ["a", "b", "c"]
IDS = [f"i{i}" for i in range(20)]
NAME = "linear-bt-personal"


def test_the_server_serves_a_person_from_the_changelog_and_forgets_them_on_the_tombstone(
        kafka_bootstrap, kafka_options, tmp_path):
    from kafka import KafkaProducer

    from learners.linear_personal import LinearBTPersonal
    from stream.broker import TopicSpec, create_topics
    from stream.contract import encode_snapshot
    from stream.contract.people import encode_person, person_key

    u = uuid.uuid4().hex[:10]
    topics = {k: f"test.serve-people.{k}.{u}" for k in ("models", "items", "people")}
    create_topics(None, {t: TopicSpec(1, {"cleanup.policy": "compact", "max.message.bytes": "8388608"})
                         for t in topics.values()}, client_options=kafka_options)
    rng = np.random.default_rng(0)
    items = {i: rng.uniform(size=3) for i in IDS}
    m = LinearBTPersonal(FEATURES)
    for _ in range(800):
        a, b = rng.choice(IDS, 2, replace=False)
        user = rng.choice(["ann", None])
        w = [-1.0, 0.0, 3.0] if user == "ann" else [2.0, 0.5, -0.5]
        y = 1 if (items[a] - items[b]) @ w > 0 else -1
        m.learn_one(dict(zip(FEATURES, items[a])), dict(zip(FEATURES, items[b])), y, user_id=user)
    X = np.stack([items[i] for i in IDS])
    want_ann, want_pop = m.score(X, "ann"), m.score(X)
    env = {"PREFSTREAM_BOOTSTRAP_SERVERS": kafka_bootstrap, "PREFSTREAM_TOPIC_MODELS": topics["models"],
           "PREFSTREAM_TOPIC_ITEMS": topics["items"], "PREFSTREAM_TOPIC_PEOPLE": topics["people"],
           "PREFSTREAM_SERVE_MODELS": NAME, "PREFSTREAM_FEATURE_NAMES": ",".join(FEATURES)}
    producer = KafkaProducer(acks="all", **kafka_options)
    srv = None
    try:
        # everything is on the topics before the server starts: /readyz 200 then means ann is known
        for i, x in items.items():
            producer.send(topics["items"], key=i.encode(), value=json.dumps(
                {"schema_version": 1, "item_id": i, "features": dict(zip(FEATURES, x.tolist()))}).encode())
        producer.send(topics["models"], key=f"{NAME}@p:0".encode(),
                      value=encode_snapshot(NAME, 1, 800, m.state_dict(people=False)))
        producer.send(topics["people"], key=person_key(NAME, "ann"),
                      value=encode_person(m.person_state("ann"), source="t:0", offset=800))
        producer.flush(30)
        srv = Server(env, tmp_path)
        srv.wait(lambda: srv.client.get("/readyz").status_code == 200, 60, "/readyz 200")
        assert srv.client.get("/readyz").json()["people_caught_up"] is True

        def rank():
            return srv.client.post("/v1/rank", json={"model": NAME, "ids": IDS, "user_id": "ann"}).json()

        r = rank()
        assert r["personalized"] and r["person_version"] == m.person_info("ann")["version"] > 0
        np.testing.assert_allclose([{it["id"]: it["score"] for it in r["items"]}[i] for i in IDS], want_ann,
                                   rtol=0, atol=1e-9)
        rec = srv.client.post("/v1/recommend", json={"model": NAME, "user_id": "ann", "top_k": 3}).json()
        assert [it["id"] for it in rec["items"]] == [IDS[j] for j in np.argsort(-want_ann, kind="stable")[:3]]
        # forget: the tombstone reaches the server, which answers for ann as for a stranger
        producer.send(topics["people"], key=person_key(NAME, "ann"), value=None)
        producer.flush(30)
        gone = srv.wait(lambda: (lambda r: r if not r.get("personalized") else None)(rank()), 60, "ann forgotten")
        assert gone["person_version"] == 0
        np.testing.assert_allclose([{it["id"]: it["score"] for it in gone["items"]}[i] for i in IDS], want_pop,
                                   rtol=0, atol=1e-9)
        rec = srv.client.post("/v1/recommend", json={"model": NAME, "user_id": "ann", "top_k": 3}).json()
        assert not rec["personalized"] and [it["id"] for it in rec["items"]] == \
            [IDS[j] for j in np.argsort(-want_pop, kind="stable")[:3]]
    finally:
        producer.close()
        if srv is not None:
            srv.close()
        delete_topics(kafka_options, topics.values())
