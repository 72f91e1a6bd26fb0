"""The explainer's loop without a broker: batches explained once, dedupe, error labels, the commit fence."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from types import SimpleNamespace

import numpy as np
import pytest

from learners.linear import LinearBT
from stream import registry
from stream.outputs.publish import OutputLimits, ProducerTopic
from stream.settings import Settings
from stream.workers.explainer import ExplainerCore
from stream.workers.explainer_loop import ExplainerLoop
from stream.workers.learner import LearnerCore
from tests.test_consumer_loop import TP, FakeProducer, ev

N = 12


class Consumer:
    def __init__(self, tps):
        self.tps = set(tps)
        self.commits: list = []
        self.refuse = False

    def assignment(self):
        return set(self.tps)

    async def commit(self, offsets):
        if self.refuse:
            from aiokafka.errors import CommitFailedError

            raise CommitFailedError("the group has already rebalanced")
        self.commits.append(dict(offsets))

    def highwater(self, tp):
        return N


def boom(learner, examples, ctx):
    raise ZeroDivisionError("no coalition left")


def make(model="loop-bt"):
    registry.register_model(model, lambda s, p: LinearBT(), LinearBT.from_state, replace=True)
    registry.register_explainer(model, "linear-shapley", registry.get_explainer("linear-bt", "linear-shapley"),
                                replace=True)
    registry.register_explainer(model, "boom", boom, replace=True)
    s = Settings.load(None, {"models": [model], "explain_sample_rate": 1.0, "snapshot_every_events": 1000,
                             "max_output_bytes": 1_000_000}, environ={})
    lc = LearnerCore(s)
    st = lc.new_source(s.topic_preferences, 0, {})
    rng = np.random.default_rng(3)
    lc.process_batch(st, [(i, ev(f"w{i}", rng), None, None) for i in range(20)])
    loop, tp = wire(s, lc, st)
    batch = {tp: [(i, ev(f"x{i}", rng), None, time.perf_counter(), None) for i in range(N)]}
    return loop, tp, batch, model


def wire(s, lc, st):
    """``(loop, tp)``: an explainer loop holding the learner core's snapshots, on a fake consumer and producer."""
    core = ExplainerCore(s)
    for k, v in lc.build_snapshots(st)[0]:
        core.on_snapshot(k, v)
    loop = ExplainerLoop(core)
    tp = TP(topic=s.topic_preferences, partition=0)
    loop.consumer, loop.producer, loop.limits = Consumer([tp]), FakeProducer(), OutputLimits(s)
    loop.out, loop.dead = ProducerTopic(loop.producer, s.topic_explanations), ProducerTopic(loop.producer,
                                                                                             s.topic_dead_letters)
    loop.models = SimpleNamespace(caught_up=asyncio.Event())
    return loop, tp


async def explain_all(loop):
    while (key := loop.queues.next()) is not None:
        await loop.run_method(key)
    pending = [t for t in loop.tasks if not t.done()]
    if pending:
        await asyncio.wait(pending)


def sample(loop, name, **labels):
    return loop.metrics.registry.get_sample_value(name, labels) or 0.0


def test_sampled_events_are_explained_once_in_batches_and_an_error_names_its_exception(caplog):
    loop, tp, batch, model = make()

    async def go():
        await loop.handle(0, batch)
        assert len(loop.queues) == 2 * N  # one item per event and method
        await explain_all(loop)
        out = loop.producer.topics.get(loop.settings.topic_explanations, {})
        first = {k.decode(): json.loads(v) for k, v in out.items()}
        await loop.handle(0, batch)  # the same events read again (e.g. after a restart): nothing new
        await explain_all(loop)
        return first, dict(loop.producer.topics[loop.settings.topic_explanations])

    with caplog.at_level(logging.WARNING, logger="stream.workers.explainer_loop"):
        first, after = asyncio.run(go())
    assert sorted(first) == sorted(f"x{i}" for i in range(N)) and len(after) == N
    assert all(r["method"] == "linear-shapley" and r["model_name"] == model for r in first.values())
    assert sample(loop, "prefstream_explained_events_total", model=model, method="linear-shapley") == N
    assert sample(loop, "prefstream_explain_eligible_total", model=model, method="linear-shapley") == 2 * N
    assert sample(loop, "prefstream_explanations_shed_total", method="linear-shapley", reason="duplicate",
                  error="") == N
    assert sample(loop, "prefstream_explanations_shed_total", method="boom", reason="error",
                  error="ZeroDivisionError") == 2 * N
    assert sample(loop, "prefstream_explanation_lag_seconds_count", method="linear-shapley") == N
    assert any("ZeroDivisionError: no coalition left" in r.getMessage() for r in caplog.records)
    assert loop.caps[(model, "linear-shapley")].cost is not None  # batches were timed against the budget
    assert loop.tracker.to_commit() == {tp: N}  # every offset delivered or shed


def test_a_personal_model_is_explained_per_person_on_the_worker_path():
    """linear-bt-personal through the explainer worker: every sampled event gets linear-shapley of its person's
    w + δ_u and linear-shapley-deviation of δ_u, records naming the person; with the record's μ (the worker's
    background), the deviation is δ_u ⊙ (D − μ), the person's values minus it are w ⊙ (D − μ) and base + Σφ is the
    learner's margin for that person (atol 1e-12 / 1e-9); an event without a person is the population's."""
    from stream.registry import get_explainer

    name, users = "linear-bt-personal", ["ann", "bob", None]
    s = Settings.load(None, {"models": [name], "feature_names": list("abc"), "explain_sample_rate": 1.0,
                             "snapshot_every_events": 1000, "max_output_bytes": 1_000_000}, environ={})
    rng = np.random.default_rng(4)

    def pev(eid, u):
        rec = json.loads(ev(eid, rng))
        return json.dumps({**rec, "user_id": u} if u else rec).encode()

    lc = LearnerCore(s)
    st = lc.new_source(s.topic_preferences, 0, {})
    lc.process_batch(st, [(i, pev(f"w{i}", users[i % 3]), None, None) for i in range(90)])
    m = st.slots[name].learner
    assert sorted(m.people()) == ["ann", "bob"] and get_explainer(name, "linear-shapley-deviation") is not None
    loop, tp = wire(s, lc, st)
    sent, send = [], loop.producer.send     # the fake keeps the latest record per key; both methods' are wanted

    async def keep(topic, key=None, value=None):
        sent.append((topic, value))
        return await send(topic, key, value)

    loop.producer.send = keep
    raws = [pev(f"x{i}", users[i % 3]) for i in range(N)]
    batch = {tp: [(i, r, None, time.perf_counter(), None) for i, r in enumerate(raws)]}

    async def go():
        await loop.handle(0, batch)
        await explain_all(loop)
        return [json.loads(v) for t, v in sent if t == s.topic_explanations]

    out = asyncio.run(go())
    by = {(r["request_id"], r["method"]): r for r in out}
    assert len(by) == 2 * N and {r["model_name"] for r in out} == {name}
    for i, raw in enumerate(raws):
        e, u = json.loads(raw), users[i % 3]
        xl, xr = (np.array([e[side]["features"][f] for f in "abc"]) for side in ("left", "right"))
        full, dev = by[(f"x{i}", "linear-shapley")], by[(f"x{i}", "linear-shapley-deviation")]
        mu = np.array(full["extra"]["background_mean_diff"])
        delta = m.deviation(u) if u else np.zeros(3)
        assert full["user_id"] == dev["user_id"] == u and full["extra"]["personalized"] is (u is not None)
        np.testing.assert_allclose(dev["values"], delta * (xl - xr - mu), rtol=0, atol=1e-12)
        np.testing.assert_allclose(np.subtract(full["values"], dev["values"]), m.weights * (xl - xr - mu),
                                   rtol=0, atol=1e-12)
        g = m.margin_many(xl[None], xr[None], user_ids=[u])[0]
        assert full["base_value"] + sum(full["values"]) == pytest.approx(g, abs=1e-9)


def test_an_expelled_member_publishes_nothing_and_keeps_the_events_for_later():
    loop, tp, batch, model = make("fence-bt")

    async def go():
        await loop.handle(0, batch)
        loop.consumer.refuse = True  # the coordinator refuses our commits: we may no longer own the partition
        await loop.run_method((model, "linear-shapley"))
        refused = dict(loop.producer.topics.get(loop.settings.topic_explanations, {}))
        loop.consumer.refuse = False
        await explain_all(loop)
        return refused, dict(loop.producer.topics[loop.settings.topic_explanations])

    refused, after = asyncio.run(go())
    assert refused == {} and len(after) == N
    assert loop.consumer.commits and all(c == {tp: 0} for c in loop.consumer.commits[:1])


def test_a_request_that_cannot_be_answered_is_dead_lettered_with_its_reason():
    """A caller waits for records or a dead letter: a request for a model this explainer has no
    snapshot of, for a method the model lacks, one whose method fails, and an invalid one each get
    a dead letter naming why (before, they were only counted); a valid request gets its record."""
    loop, tp, _, model = make()
    s = loop.settings
    rtp = TP(topic=s.topic_explain_requests, partition=0)
    loop.consumer.tps.add(rtp)
    sides = {"left": {"features": {"a": 1.0, "b": 0.0, "c": 2.0}}, "right": {"features": {"a": 0.0, "b": 1.0, "c": 0.5}}}
    asks = {b"ok": {"model": model, "method": "linear-shapley"}, b"gpm": {"model": "gpm", "method": "pref-shap"},
            b"bogus": {"model": model, "method": "bogus"}, b"boom": {"model": model, "method": "boom"}}
    recs = [(k, json.dumps({"request_id": k.decode(), **a, **sides}).encode(), k) for k, a in asks.items()]
    recs.append((b"bad", b'{"request_id": "bad", "left": {}}', b"bad"))
    batch = {rtp: [(i, v, None, time.perf_counter(), key) for i, (_, v, key) in enumerate(recs)]}

    async def main():
        await loop.handle(loop.generation, batch)
        while loop.requests:
            await loop.run_request(*loop.requests.popleft())
        await asyncio.wait([t for t in loop.tasks if not t.done()] or [asyncio.sleep(0)])

    asyncio.run(main())
    dead = {k: json.loads(v) for k, v in loop.producer.topics.get(s.topic_dead_letters, {}).items()}
    assert {k: d["reason"] for k, d in dead.items()} == {b"gpm": "unknown_model", b"bogus": "unknown_method",
                                                        b"boom": "explain_failed", b"bad": "missing_field"}
    assert "'gpm'" in dead[b"gpm"]["detail"] and model in dead[b"gpm"]["detail"]
    assert "linear-shapley" in dead[b"bogus"]["detail"] and "ZeroDivisionError" in dead[b"boom"]["detail"]
    for k, d in dead.items():
        assert d["source_topic"] == s.topic_explain_requests and json.loads(d["payload"])["request_id"] == k.decode()
    out = [json.loads(v) for v in loop.producer.topics.get(s.topic_explanations, {}).values()]
    assert [(r["request_id"], r["method"]) for r in out] == [("ok", "linear-shapley")]
    for reason in ("unknown_model", "unknown_method", "explain_failed", "missing_field"):
        assert loop.core.metrics.dead_letters.labels(reason=reason)._value.get() == 1


def test_sampled_events_before_any_snapshot_are_counted_and_logged_once(caplog):
    """Before the first snapshot a sampled event cannot be explained: counted as no_model and said in
    the log (one line for the lot, not one per event) — before, only the counter knew."""
    loop, tp, batch, model = make()
    loop.core.methods_for = lambda session: []     # no snapshot loaded yet
    with caplog.at_level(logging.WARNING, logger="stream.workers.explainer_loop"):
        asyncio.run(loop.handle(loop.generation, batch))
    lines = [r.getMessage() for r in caplog.records if "no model snapshot" in r.getMessage()]
    assert lines == ["1 sampled events not explained: no model snapshot is loaded yet (a learner worker publishes "
                     "its first after snapshot_every_events events or snapshot_every_seconds)"]
    assert loop.core.metrics.explanations_skipped.labels(reason="no_model")._value.get() == N


def test_the_explainers_modules_are_imported_before_the_group_is_joined():
    """torch imported by the first GPM snapshot inside the event loop had blocked it past the group session; river
    (the GPM loader's drift detector) and exact Pref-SHAP's compiled loop cost the first snapshot and the first
    explanation 1.5 s and 0.3 s of CPU beside a learner at 10,000 events/s (py-spy on the explainer)."""
    import sys

    from stream.workers.explainer_loop import PRELOAD, preload_explainers

    preload_explainers(["gpm"])
    assert all(name in sys.modules for name in PRELOAD)
    assert {"torch", "river.drift", "explainers.prefshap.compiled"} <= set(PRELOAD)
    assert sys.modules["explainers.prefshap.compiled"]._games.signatures        # loaded, not compiled on first use


def test_unsampled_events_are_counted_eligible_but_only_built_when_the_reservoir_takes_them(monkeypatch):
    """Issue 29: the intake built every event into an example (features resolved and validated) in the
    event-loop thread, 99 % of them at a 1 % sample only to be dropped; at 10,000 events/s that held the
    GIL the explainer calls needed. Now an unsampled event is decoded and hashed; it is built only when the
    background reservoir takes it, and a sampled one is built, validated and queued as before."""
    import stream.contract as contract
    import stream.contract.preference as preference

    loop, tp, _, model = make("intake-bt")
    from dataclasses import replace

    loop.settings = loop.core.settings = s = replace(loop.settings, explain_sample_rate=0.05)
    core = loop.core
    core.background_size = 8
    built = []
    real = contract.preference_from_doc
    for where in (contract, preference):  # what the intake calls, and what parse_preference calls
        monkeypatch.setattr(where, "preference_from_doc", lambda d, c=None: built.append(d["event_id"]) or real(d, c))
    rng = np.random.default_rng(11)
    n = 2000
    batch = {tp: [(i, ev(f"u{i}", rng), None, time.perf_counter(), None) for i in range(n)]}
    sampled = {f"u{i}" for i in range(n) if core.sampled(f"u{i}", s.explain_sample_rate)}
    before = list(core.background)
    taken = []
    gen = core.rng

    class Draws:  # records algorithm R's draws: whether the reservoir takes the event
        def integers(self, lo, hi):
            j = int(gen.integers(lo, hi))
            taken.append(j < core.background_size)
            return j

    core.rng = Draws()
    asyncio.run(loop.handle(0, batch))
    assert 20 < len(sampled) < 200
    assert set(built) >= sampled                                   # every sampled event is built and validated
    unsampled_built = len(built) - len(sampled)
    assert 8 <= unsampled_built <= 8 + sum(taken)  # the reservoir's fills and takes (draws of sampled ones too), no more
    assert len(built) < n // 4                      # not every event, as before
    assert len(core.background) == 8 and before == []
    assert {x.event_id for x in core.background} <= {f"u{i}" for i in range(n)}  # built examples, any of them
    assert len(loop.queues) == 2 * len(sampled)                     # each sampled event queued for both methods
    assert sample(loop, "prefstream_explain_eligible_total", model=model, method="linear-shapley") == n


def test_an_explainers_warm_function_runs_once_when_its_model_first_loads():
    """stream.workers.live_models.warm_explainers: exact Pref-SHAP's compiled loop is loaded with the GPM, so
    that a first explanation under a serving deadline does not pay for it; the warm function runs once per
    process, and a failing one is only logged (the first call then does the work)."""
    from stream.contract import encode_snapshot
    from stream.plugins import gpm as gpm_plugin
    from stream.workers.live_models import LiveModels

    runs = []

    def warm():
        runs.append(1)
        raise RuntimeError("no compiler today")

    def shapley(learner, examples, ctx):
        return registry.get_explainer("linear-bt", "linear-shapley")(learner, examples, ctx)

    shapley.warm = warm
    registry.register_model("warm-bt", lambda s, p: LinearBT(["x"]), LinearBT.from_state, replace=True)
    registry.register_explainer("warm-bt", "warm-shapley", shapley, replace=True)
    m = LinearBT(["x"])
    m.learn_one({"x": 1.0}, {"x": 0.0}, 1)
    lm = LiveModels()
    assert lm.on_snapshot(b"warm-bt@t:0", encode_snapshot("warm-bt", 1, 1, m.state_dict()))
    assert lm.on_snapshot(b"warm-bt@t:0", encode_snapshot("warm-bt", 2, 1, m.state_dict()))
    assert runs == [1] and lm.model_version("warm-bt") == 2
    assert gpm_plugin.pref_shap.warm is gpm_plugin.pref_shap_context.warm
