"""End to end through the real broker: click sessions with positions and propensities → IPS pairs.

A learner worker (``click_weighting=ips``, ``click_pairs=skipped_above``, hashed orientation)
consumes simulated sessions and two bad ones; its final snapshot must hold exactly the pairs the
contract makes of the good sessions (count and event-id digest), the same weights as learning
those pairs in-process, and the bad sessions must be dead letters with their reason.
"""

from __future__ import annotations

import json
import signal

import numpy as np
import pytest

from stream.clicks.log import ClickPairing, SessionExpander
from stream.clicks.simulate import ClickSimulation
from stream.contract import ItemCatalog, parse_click_session
from tests.test_workers_kafka import Stack, expected_digest, free_port, metric_value, scrape


@pytest.fixture
def stack(kafka_bootstrap, kafka_options, tmp_path):
    s = Stack(kafka_bootstrap, kafka_options, tmp_path, partitions=1)
    yield s
    s.close()


def test_click_replay_with_ips_through_the_broker(stack):
    from learners.linear import LinearBT
    from stream import registry
    from stream.workers._snapshot import split_stream_meta

    rng = np.random.default_rng(11)
    X = rng.normal(size=(40, 3))
    sim = ClickSimulation(X, ["a", "b", "c"], X @ np.array([1.0, 0.5, 0.0]), np.array([0.0, 0.0, 1.0]), k=5,
                          n_candidates=10, beta=0.5)
    sessions = sim.simulate(300, seed=4)
    items = list(sim.item_records())
    bad = [{"schema_version": 1, "session_id": "bad-pos", "timestamp": 1, "clicked": ["i0"],
            "shown": [{"id": "i0", "position": 0}, {"id": "i1", "position": 1}]},
           {"schema_version": 1, "session_id": "bad-prop", "timestamp": 1, "clicked": ["i0"],
            "shown": [{"id": "i0", "position": 1, "propensity": 0}, {"id": "i1", "position": 2}]}]
    stream_recs = sessions[:150] + bad + sessions[150:]

    # what the worker must learn, computed in-process with the same settings
    cat = ItemCatalog()
    for it in items:
        cat.upsert(it)
    ex = SessionExpander(ClickPairing(strategy="skipped_above", weighting="ips", orientation="hashed"))
    expected = [p for s in sessions for p in parse_click_session(json.dumps(s).encode(), cat, expander=ex)]
    assert len(expected) > 50 and {p.outcome for p in expected} == {1, -1} and len({p.weight for p in expected}) > 1
    ref = LinearBT()
    for p in expected:
        ref.learn_one(p.left, p.right, p.outcome, None, p.weight)

    stack.send("items", [(it["item_id"], json.dumps(it).encode()) for it in items])
    port = free_port()
    # max_delay=1: the worker's micro-batched LinearBT.learn_many is then exactly the learn_one loop
    w = stack.start("learn", "--metrics-port", str(port), "--param", "linear-bt.max_delay=1",
                    PREFSTREAM_CLICK_PAIRS="skipped_above",
                    PREFSTREAM_CLICK_WEIGHTING="ips", PREFSTREAM_CLICK_ORIENTATION="hashed")
    stack.send("clicks", [(r["session_id"], json.dumps(r).encode()) for r in stream_recs])

    def consumed():
        try:
            return metric_value(scrape(port), "prefstream_events_consumed_total", topic=stack.topics["clicks"])
        except OSError:
            return 0

    stack.wait(lambda: consumed() >= len(stream_recs) or None, 120, "click sessions consumed")
    w.send_signal(signal.SIGTERM)
    w.wait(30)
    n, d = stack.totals(topic_key="clicks")
    assert n == len(expected) and d == expected_digest([p.event_id for p in expected])
    dls = [json.loads(v) for _, v in stack.read("dead_letters")]
    assert sorted((json.loads(r["payload"])["session_id"], r["reason"]) for r in dls) == [
        ("bad-pos", "schema_violation"), ("bad-prop", "schema_violation")]
    (snap,) = [s for k, s in stack.snapshots().items() if k.startswith("linear-bt@")]
    learned = registry.get_model("linear-bt").loader(split_stream_meta(snap["state"])[0])
    assert learned.feature_names == ref.feature_names
    assert np.allclose(learned.weights, ref.weights, rtol=1e-9, atol=1e-12)
