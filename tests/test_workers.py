"""Learner/explainer worker cores and the registry, without a broker.

The Kafka round trips live in ``tests/test_workers_kafka.py``; here the state machines are
driven directly with (offset, bytes) pairs so that crash/replay schedules can be enumerated.
"""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from learners.base import PreferenceLearner
from learners.exceptions import InvalidParameterError
from learners.linear import LinearBT
from stream import registry
from stream.contract import decode_snapshot
from stream.settings import Settings
from stream.workers._snapshot import (
    digest_add,
    event_hash,
    parse_snapshot_key,
    snapshot_key,
    split_stream_meta,
)
from stream.workers.explainer import ExplainerCore, ExplainJob
from stream.workers.learner import LearnerCore

W = np.array([1.0, -2.0, 0.5])


def ev(i: int, rng, eid: str | None = None) -> bytes:
    xl, xr = rng.normal(size=3), rng.normal(size=3)
    return json.dumps({"schema_version": 1, "event_id": eid or f"e{i}", "timestamp": 1700000000 + i,
                       "left": {"features": dict(zip("abc", map(float, xl)))},
                       "right": {"features": dict(zip("abc", map(float, xr)))},
                       "outcome": 1 if W @ (xl - xr) > 0 else -1}).encode()


def settings(**kw):
    return Settings.load(None, {"snapshot_every_events": 1000, "snapshot_every_seconds": 3600, "snapshot_min_seconds": 0, **kw}, environ={})


def published(records) -> dict:
    return {k.decode(): v for k, v in records}


class Tok:
    def __init__(self, off):
        self.off = off


# ------------------------------------------------------------------------- registry
def test_registry_has_the_linear_model_and_its_explainer():
    assert "linear-bt" in registry.models()
    assert "linear-shapley" in registry.explainers_for("linear-bt")
    lr = registry.get_model("linear-bt").factory(settings(), {"learning_rate": 0.2})
    assert isinstance(lr, LinearBT) and lr.learning_rate == 0.2


def test_registry_rejects_duplicates_and_unknown_names():
    with pytest.raises(InvalidParameterError, match="already registered"):
        registry.register_model("linear-bt", lambda s, p: None, lambda st: None)
    with pytest.raises(InvalidParameterError, match="registered models"):
        registry.get_model("no-such-model")
    with pytest.raises(InvalidParameterError, match="without '@'"):
        registry.register_model("a@b", lambda s, p: None, lambda st: None)
    with pytest.raises(InvalidParameterError, match="callable"):
        registry.register_explainer("linear-bt", "x", 3)


def test_merge_of_linear_learners_is_the_count_weighted_average_of_weights():
    rng = np.random.default_rng(0)
    a, b = LinearBT(["a", "b", "c"]), LinearBT(["a", "b", "c"])
    for i in range(30):
        x = json.loads(ev(i, rng))
        a.learn_one(x["left"]["features"], x["right"]["features"], x["outcome"])
    for i in range(10):
        x = json.loads(ev(100 + i, rng))
        b.learn_one(x["left"]["features"], x["right"]["features"], x["outcome"])
    wa, wb = a.weights.copy(), b.weights.copy()
    m = registry.merge_learners("linear-bt", [(a, 30), (b, 10)])
    np.testing.assert_allclose(m.weights, (30 * wa + 10 * wb) / 40, rtol=1e-12)
    np.testing.assert_array_equal(a.weights, wa)  # the parts are not mutated


def test_generic_weighted_average_merge_for_a_learner_without_iadd():
    class Avg(PreferenceLearner):
        model_name = "avg"

        def __init__(self, w=None):
            self.w = np.zeros(2) if w is None else np.asarray(w, float)

        feature_names = property(lambda self: ["a", "b"])

        def learn_one(self, *a, **k):
            pass

        def margin_one(self, xl, xr, context=None):
            return float(self.w @ [xl["a"] - xr["a"], xl["b"] - xr["b"]])

        def state_dict(self):
            return {"meta": {}, "arrays": {"w": self.w}}

        @classmethod
        def from_state(cls, st):
            return cls(st["arrays"]["w"])

    m = registry.weighted_average_merge([(Avg([1.0, 0.0]), 1), (Avg([0.0, 4.0]), 3)], Avg.from_state)
    np.testing.assert_allclose(m.w, [0.25, 3.0])


# ------------------------------------------------------------------------- snapshot keys
def test_snapshot_keys_round_trip_and_digest_is_order_free():
    k = snapshot_key("linear-bt", "prefs:3")
    assert parse_snapshot_key(k.encode()) == ("linear-bt", "prefs:3")
    assert parse_snapshot_key("linear-bt") == ("linear-bt", None)
    ids = [f"e{i}" for i in range(50)]
    d1 = d2 = 0
    for e in ids:
        d1 = digest_add(d1, event_hash(e))
    for e in reversed(ids):
        d2 = digest_add(d2, event_hash(e))
    assert d1 == d2
    assert digest_add(d1, event_hash("e0")) != d1  # a duplicate changes the digest


# ------------------------------------------------------------------------- learner core
def _run(core, st, msgs, start=0, stop=None):
    dls = []
    for off, raw in msgs[start:stop]:
        dls += core.process(st, off, raw, Tok(off))
    return dls


@pytest.mark.parametrize("crash_after", [0, 7, 13, 20, 29])
@pytest.mark.parametrize("snapshot_after", [5, 12])
def test_crash_and_replay_learns_every_event_exactly_once(crash_after, snapshot_after):
    """Any crash point + replay from the committed offset gives the same model as one clean pass."""
    rng = np.random.default_rng(1)
    msgs = [(i, ev(i, rng)) for i in range(30)]
    s = settings()
    src = s.topic_preferences

    clean = LearnerCore(s)
    st = clean.new_source(src, 0, {})
    _run(clean, st, msgs)

    core = LearnerCore(s)
    st = core.new_source(src, 0, {})
    snaps, committed = {}, 0
    cut = min(snapshot_after, crash_after)
    _run(core, st, msgs, 0, cut)
    if snapshot_after <= crash_after:
        records, acks, versions = core.build_snapshots(st)
        snaps = published(records)
        core.snapshot_done(st, versions, True)
        committed = max((t.off for t in acks), default=-1) + 1  # what Faust may commit
        assert committed == snapshot_after
    _run(core, st, msgs, cut, crash_after)  # learned but not snapshotted: lost in the crash

    restarted = LearnerCore(s)
    st2 = restarted.new_source(src, 0, snaps)
    _run(restarted, st2, msgs, committed)  # Faust resumes at the committed offset
    a, b = clean.sources[f"{src}:0"].slots["linear-bt"], st2.slots["linear-bt"]
    assert b.count == a.count == 30
    assert b.digest == a.digest
    np.testing.assert_array_equal(b.learner.weights, a.learner.weights)


def test_replay_from_before_the_snapshot_skips_what_it_holds():
    """Faust may resume below the snapshot's next_offset (commit lags): those messages are skipped."""
    rng = np.random.default_rng(2)
    msgs = [(i, ev(i, rng)) for i in range(20)]
    s = settings()
    core = LearnerCore(s)
    st = core.new_source(s.topic_preferences, 1, {})
    _run(core, st, msgs, 0, 12)
    records, _, versions = core.build_snapshots(st)
    core.snapshot_done(st, versions, True)
    st2 = LearnerCore(s).new_source(s.topic_preferences, 1, published(records))
    assert st2.slots["linear-bt"].count == 12 and st2.next_offset == 12
    _run(core, st2, msgs, 0)  # from offset 0: the first 12 are skipped
    assert st2.slots["linear-bt"].count == 20


def test_duplicate_event_ids_at_other_offsets_are_skipped_and_counted():
    rng = np.random.default_rng(3)
    s = settings()
    core = LearnerCore(s, dedupe_window=8)
    st = core.new_source(s.topic_preferences, 0, {})
    raw = ev(0, rng, eid="same")
    core.process(st, 0, raw)
    core.process(st, 1, raw)
    assert st.slots["linear-bt"].count == 1
    assert core.metrics.duplicate_events.labels(topic=s.topic_preferences)._value.get() == 1
    for i in range(2, 12):  # push "same" out of the 8-entry window
        core.process(st, i, ev(i, rng))
    core.process(st, 12, raw)
    assert st.slots["linear-bt"].count == 12
    # the window travels with the snapshot
    records, _, versions = core.build_snapshots(st)
    snap = decode_snapshot(published(records)[f"linear-bt@{s.topic_preferences}:0"])
    _, info = split_stream_meta(snap["state"])
    assert len(info["window"]) == 8 and event_hash("same") in info["window"]


def test_dead_letters_are_emitted_once_and_offsets_advance():
    rng = np.random.default_rng(4)
    s = settings()
    core = LearnerCore(s)
    st = core.new_source(s.topic_preferences, 0, {})
    msgs = [(0, ev(0, rng)), (1, b"{nope"), (2, b"[1]"), (3, ev(3, rng))]
    dls = _run(core, st, msgs)
    assert [d["reason"] for d in dls] == ["malformed_json", "not_an_object"]
    assert [d["offset"] for d in dls] == [1, 2]
    assert st.next_offset == 4 and st.slots["linear-bt"].count == 2
    assert _run(core, st, msgs) == []  # redelivery below next_offset: no second dead letter
    assert core.metrics.dead_letters.labels(reason="malformed_json")._value.get() == 1


def test_acks_only_cover_offsets_inside_the_published_snapshot():
    rng = np.random.default_rng(5)
    s = settings()
    core = LearnerCore(s)
    st = core.new_source(s.topic_preferences, 0, {})
    _run(core, st, [(i, ev(i, rng)) for i in range(5)])
    records, acks, versions = core.build_snapshots(st)
    core.process(st, 5, ev(5, rng), Tok(5))  # arrives while the snapshot is in flight
    assert [t.off for t in acks] == [0, 1, 2, 3, 4]
    assert [off for off, _ in st.pending] == [5]
    assert not core.snapshot_due(st)  # one publication at a time
    core.snapshot_done(st, versions, ok=False)
    assert st.force and core.snapshot_due(st)  # a failed publication is retried


def test_snapshot_due_by_count_and_by_time():
    now = [0.0]
    s = settings(snapshot_every_events=3, snapshot_every_seconds=10.0)
    core = LearnerCore(s, clock=lambda: now[0])
    st = core.new_source(s.topic_preferences, 0, {})
    rng = np.random.default_rng(6)
    core.process(st, 0, ev(0, rng))
    assert not core.snapshot_due(st)
    now[0] = 10.5
    assert core.snapshot_due(st)
    core.snapshot_done(st, core.build_snapshots(st)[2], True)
    core.process(st, 1, ev(1, rng))
    core.process(st, 2, ev(2, rng))
    assert not core.snapshot_due(st)
    core.process(st, 3, ev(3, rng))
    assert core.snapshot_due(st)


def test_an_event_count_snapshot_waits_for_snapshot_min_seconds():
    now = [0.0]
    s = settings(snapshot_every_events=3, snapshot_every_seconds=10.0, snapshot_min_seconds=1.0)
    core = LearnerCore(s, clock=lambda: now[0])
    st = core.new_source(s.topic_preferences, 0, {})
    rng = np.random.default_rng(6)
    for off in range(5):
        core.process(st, off, ev(off, rng))
    assert st.since_snapshot == 5 and not core.snapshot_due(st)  # the count is reached, 0 s since the start
    now[0] = 0.999
    assert not core.snapshot_due(st)
    now[0] = 1.0
    assert core.snapshot_due(st)
    core.snapshot_done(st, core.build_snapshots(st)[2], True)
    for off in range(5, 8):
        core.process(st, off, ev(off, rng))
    now[0] = 1.5
    assert not core.snapshot_due(st)
    st.force = True  # a refit's snapshot does not wait
    assert core.snapshot_due(st)
    st.force = False
    now[0] = 2.0
    assert core.snapshot_due(st)


def test_progressive_validation_predicts_before_learning():
    calls = []

    class Spy(LinearBT):
        def predict_proba_one(self, *a, **k):
            calls.append(("predict", self.n_learned, 1))
            return super().predict_proba_one(*a, **k)

        def learn_one(self, *a, **k):
            calls.append(("learn", self.n_learned, 1))
            return super().learn_one(*a, **k)

        def predict_proba_many(self, XL, *a, **k):
            calls.append(("predict", self.n_learned, len(XL)))
            return super().predict_proba_many(XL, *a, **k)

        def learn_many(self, XL, *a, **k):
            calls.append(("learn", self.n_learned, len(XL)))
            return super().learn_many(XL, *a, **k)

    registry.register_model("spy-bt", lambda s, p: Spy(), lambda st: Spy.from_state(st), replace=True)
    s = settings(models=["spy-bt"])
    core = LearnerCore(s)
    st = core.new_source(s.topic_preferences, 0, {})
    rng = np.random.default_rng(7)
    msgs = [(i, ev(i, rng)) for i in range(6)]
    _run(core, st, msgs, 0, 1)  # the first example also fixes the feature names: learn_one
    acc, ll, _ = core.progressive["spy-bt"]
    assert ll.get() == pytest.approx(np.log(2), abs=1e-12)  # the unfitted model predicts σ(0) = ½
    _run(core, st, msgs, 1, 3)  # batches of one
    # one batch of three: predicted together with the state before the batch, then learned together
    core.process_batch(st, [(off, raw, Tok(off), None) for off, raw in msgs[3:]])
    assert calls == [("predict", 0, 1), ("learn", 0, 1), ("predict", 1, 1), ("learn", 1, 1),
                     ("predict", 2, 1), ("learn", 2, 1), ("predict", 3, 3), ("learn", 3, 3)]
    assert acc.cm.total_weight == 6 and st.slots["spy-bt"].count == 6 and st.next_offset == 6


def test_refit_protocol_runs_in_an_executor_and_forces_a_snapshot():
    class Refitting(LinearBT):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self.refits = 0

        def wants_refit(self):
            return self.n_learned >= 3 and self.refits == 0

        def refit(self):
            self.refits += 1
            return {"duration_s": 1.5, "n_train": 3, "val_auc": 0.75}

    registry.register_model("refit-bt", lambda s, p: Refitting(), lambda st: Refitting.from_state(st), replace=True)
    s = settings(models=["refit-bt"])

    async def go():
        from concurrent.futures import ThreadPoolExecutor

        core = LearnerCore(s, loop=asyncio.get_running_loop(), executor=ThreadPoolExecutor(1))
        st = core.new_source(s.topic_preferences, 0, {})
        rng = np.random.default_rng(8)
        _run(core, st, [(i, ev(i, rng)) for i in range(3)])
        slot = st.slots["refit-bt"]
        assert slot.refit_running
        _run(core, st, [(i, ev(i, rng)) for i in range(3, 6)])  # learning continues meanwhile
        for _ in range(100):
            await asyncio.sleep(0.01)
            if not slot.refit_running:
                break
        return core, st, slot

    core, st, slot = asyncio.run(go())
    assert slot.learner.refits == 1 and slot.count == 6
    assert st.force and core.snapshot_due(st)
    m = core.metrics
    assert m.refit_training_size.labels(model="refit-bt")._value.get() == 3
    assert m.refit_validation_auc.labels(model="refit-bt")._value.get() == 0.75
    assert m.refit_duration.labels(model="refit-bt")._sum.get() == 1.5


def test_corrupt_snapshot_stops_the_worker_instead_of_starting_afresh():
    from learners.exceptions import SnapshotError

    s = settings()
    core = LearnerCore(s)
    with pytest.raises(SnapshotError, match="tombstone"):
        core.new_source(s.topic_preferences, 0, {f"linear-bt@{s.topic_preferences}:0": b"not a snapshot"})


# ------------------------------------------------------------------------- explainer core
def _snapshots_for_two_partitions(s):
    rng = np.random.default_rng(9)
    core = LearnerCore(s)
    out = {}
    for p, n in ((0, 12), (1, 4)):
        st = core.new_source(s.topic_preferences, p, {})
        _run(core, st, [(i, ev(i + 100 * p, rng)) for i in range(n)])
        records, _, versions = core.build_snapshots(st)
        out.update(published(records))
    return out, core


def test_explainer_merges_partition_snapshots_and_emits_additive_records():
    s = settings(explain_sample_rate=1.0)
    snaps, learner_core = _snapshots_for_two_partitions(s)
    ex = ExplainerCore(s)
    for k, v in snaps.items():
        ex.on_snapshot(k.encode(), v)
    model, version = ex.model("linear-bt")
    assert version == 2 and ex.training_count("linear-bt") == 16
    parts = [learner_core.sources[f"{s.topic_preferences}:{p}"].slots["linear-bt"].learner for p in (0, 1)]
    np.testing.assert_allclose(model.weights, (12 * parts[0].weights + 4 * parts[1].weights) / 16, rtol=1e-12)

    job = ex.on_preference(ev(500, np.random.default_rng(10), eid="x1"))
    assert isinstance(job, ExplainJob)
    recs = ex.explain(job, ex.plan(job))
    assert len(recs) == 1
    r = recs[0]
    assert r["request_id"] == "x1" and r["model_version"] == 2 and r["method"] == "linear-shapley"
    assert r["base_value"] + sum(r["values"]) == pytest.approx(r["prediction"], abs=1e-12)
    x = json.loads(ev(500, np.random.default_rng(10), eid="x1"))
    assert r["prediction"] == pytest.approx(model.margin_one(x["left"]["features"], x["right"]["features"]), abs=1e-12)


def test_explainer_requests_and_skip_reasons():
    s = settings()
    ex = ExplainerCore(s)
    req = {"request_id": "r1", "model": "linear-bt", "left": {"a": 1, "b": 2, "c": 3}, "right": {"a": 0, "b": 0, "c": 0}}
    job = ex.on_request(json.dumps(req).encode())
    assert ex.plan(job) == []  # no snapshot yet
    m = ex.metrics
    assert m.explanations_skipped.labels(reason="no_model")._value.get() == 1
    assert ex.on_request(b'{"request_id": "r2"}') is None
    assert m.explanations_skipped.labels(reason="invalid_request")._value.get() == 1
    snaps, _ = _snapshots_for_two_partitions(s)
    for k, v in snaps.items():
        ex.on_snapshot(k.encode(), v)
    bad = ex.on_request(json.dumps({**req, "method": "no-such-method"}).encode())
    assert ex.plan(bad) == []
    assert m.explanations_skipped.labels(reason="unknown_method")._value.get() == 1
    (rec,) = ex.explain(job, ex.plan(job))
    assert rec["extra"]["origin"] == "request" and rec["data"] == [1.0, 2.0, 3.0]


def test_sampling_rate_falls_with_the_backlog():
    s = settings(explain_sample_rate=0.5, explain_max_queue=4)

    async def go():
        ex = ExplainerCore(s)
        ex.queue = asyncio.Queue(maxsize=4)
        rates = [ex.sample_rate()]
        for i in range(4):
            ex.queue.put_nowait(i)
            rates.append(ex.sample_rate())
        return rates

    assert asyncio.run(go()) == pytest.approx([0.5, 0.375, 0.25, 0.125, 0.0], abs=1e-12)


def test_model_version_gauge_is_the_sum_over_sources():
    s = settings()
    core = LearnerCore(s)
    rng = np.random.default_rng(11)
    for p in (0, 1):
        st = core.new_source(s.topic_preferences, p, {})
        for _ in range(p + 1):  # partition 0 publishes once, partition 1 twice
            core.process(st, st.next_offset, ev(st.next_offset + 10 * p, rng))
            core.snapshot_done(st, core.build_snapshots(st)[2], True)
    assert core.metrics.model_version.labels(model="linear-bt")._value.get() == 3


def test_click_sessions_go_to_session_only_explainers_and_pairs_to_the_others():
    from explainers._result import Explanation

    seen = []

    def session_fn(learner, examples, ctx):
        s = ctx.params["session"]
        seen.append(s)
        n = len(examples)
        return Explanation(values=np.zeros((n, 3)), base_values=np.zeros(n), feature_names=list("abc"),
                           method="distributional-categorical", prediction=np.zeros(n))

    session_fn.session_only = True
    registry.register_model("sess-bt", lambda s, p: LinearBT(), LinearBT.from_state, replace=True)
    registry.register_explainer("sess-bt", "linear-shapley", registry.get_explainer("linear-bt", "linear-shapley"),
                                replace=True)
    registry.register_explainer("sess-bt", "distributional-categorical", session_fn, replace=True)
    s = settings(models=["sess-bt"], explain_sample_rate=1.0)
    lc = LearnerCore(s)
    st = lc.new_source(s.topic_preferences, 0, {})
    rng = np.random.default_rng(12)
    _run(lc, st, [(i, ev(i, rng)) for i in range(5)])
    ex = ExplainerCore(s)
    for k, v in published(lc.build_snapshots(st)[0]).items():
        ex.on_snapshot(k.encode(), v)
    for j, f in enumerate(({"a": 1.0, "b": 0.0, "c": 0.0}, {"a": 0.0, "b": 1.0, "c": 0.0}, {"a": 0.0, "b": 0.0, "c": 1.0})):
        ex.catalog.upsert({"item_id": f"i{j}", "features": f})
    raw = json.dumps({"schema_version": 1, "session_id": "s1", "timestamp": 1, "shown": [{"id": "i0"}, {"id": "i1"},
                      {"id": "i2"}], "clicked": ["i1"]}).encode()
    job = ex.on_click(raw)
    assert [m for _, m, *_ in ex.plan(job)] == ["distributional-categorical"]
    recs = ex.explain(job, ex.plan(job))
    assert [r["request_id"] for r in recs] == ["s1:i1>i0", "s1:i1>i2"]
    assert seen[0]["clicked"] == ["i1"] and [it["id"] for it in seen[0]["shown"]] == ["i0", "i1", "i2"]
    assert seen[0]["shown"][2]["features"] == {"a": 0.0, "b": 0.0, "c": 1.0}
    pair_job = ex.on_preference(ev(99, rng))
    assert [m for _, m, *_ in ex.plan(pair_job)] == ["linear-shapley"]


def test_merge_falls_back_when_iadd_refuses_and_a_crashing_model_dead_letters():
    class Stubborn(LinearBT):
        def __iadd__(self, other):
            raise InvalidParameterError("ADMM-RDA parts cannot be pooled")

    registry.register_model("stubborn", lambda s, p: Stubborn(), Stubborn.from_state, replace=True)
    rng = np.random.default_rng(13)
    a, b = Stubborn(["a", "b", "c"]), Stubborn(["a", "b", "c"])
    for i in range(6):
        x = json.loads(ev(i, rng))
        (a if i < 4 else b).learn_one(x["left"]["features"], x["right"]["features"], x["outcome"])
    m = registry.merge_learners("stubborn", [(a, 4), (b, 2)])
    # generic parameter averaging of the state arrays
    for k in ("w", "G", "sq"):
        np.testing.assert_allclose(m.state_dict()["arrays"][k],
                                   (4 * a.state_dict()["arrays"][k] + 2 * b.state_dict()["arrays"][k]) / 6, rtol=1e-12)

    class Crashing(LinearBT):
        def learn_one(self, *a, **k):
            raise RuntimeError("bug")

    registry.register_model("crashing", lambda s, p: Crashing(), Crashing.from_state, replace=True)
    s = settings(models=["crashing", "linear-bt"])
    core = LearnerCore(s)
    st = core.new_source(s.topic_preferences, 0, {})
    dls = core.process(st, 0, ev(0, rng))
    assert [d["reason"] for d in dls] == ["schema_violation"] and "RuntimeError" in dls[0]["detail"]
    assert st.slots["linear-bt"].count == 1 and st.slots["crashing"].count == 0 and st.next_offset == 1
