"""One GPM fit over every partition (issue 30 item 2): learners/refit_group.py, the worker's group refit,
the merge of the served model and what it reports.

Oracles: the fit of the same pairs through one learner (partition invariance, to 1e-9); the group's
trigger counts against the per-learner ones; the merge of one fit equal to that fit, with the summed
count; the served count of a merge that must drop a fit equal to the fit it keeps.
"""

from __future__ import annotations

import numpy as np
import pytest

from learners.refit import RefittingGPM
from learners.refit_group import group_refit, group_wants_refit

FAST = {"penalty_grid": (1e-3, 1e-5), "multiplier_grid": (1.0, 2.0), "constant_grid": (0.0, 1.0), "max_centres": 60}
W = np.array([1.0, -0.5, 0.25])


def events(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    XL, XR = rng.normal(size=(n, 3)), rng.normal(size=(n, 3))
    y = np.where((XL - XR) @ W > 0, 1, -1)
    return XL, XR, y


def learner(**kw) -> RefittingGPM:
    p = dict(refit_every=None, min_train=20, drift=False, model_params=FAST)
    p.update(kw)
    return RefittingGPM(["a", "b", "c"], **p)


def split(XL, XR, y, k: int, **kw) -> list[RefittingGPM]:
    """The events dealt to ``k`` learners by a hash-like rule (event i to i*7 mod k), in stream order."""
    parts = [learner(**kw) for _ in range(k)]
    owner = (np.arange(len(y)) * 7 + 3) % k
    for j, lr in enumerate(parts):
        sel = owner == j
        for s in range(0, int(sel.sum()), 50):   # a few micro-batches each
            idx = np.flatnonzero(sel)[s:s + 50]
            lr.learn_many(XL[idx], XR[idx], y[idx])
    return parts


def test_the_fit_of_three_partitions_is_the_fit_of_one():
    XL, XR, y = events(300)
    (one,) = split(XL, XR, y, 1)
    three = split(XL, XR, y, 3)
    group_refit([one])
    infos = group_refit(three)
    A, B, _ = events(40, seed=9)
    want = one.model.decision_function(A, B)
    assert len(infos) == 3 and all(i["n_train"] == one.model.n_train_ for i in infos)
    for lr in three:   # every partition serves the same fit, of every partition's pairs
        np.testing.assert_allclose(lr.model.decision_function(A, B), want, rtol=1e-9, atol=1e-12)
        assert lr.model.fit_id == one.model.fit_id
    assert one.model.n_train_ == pytest.approx(0.9 * 300, abs=2)   # the 10 % hold-out of all 300 pairs


def test_the_union_is_capped_at_window_size_with_each_partitions_most_recent_share():
    XL, XR, y = events(300)
    three = split(XL, XR, y, 3, window_size=120)
    assert [lr.n_window for lr in three] == [100, 100, 100]
    from learners.refit_group import group_refit_begin

    job = group_refit_begin(three)
    assert job["y"].shape[0] == 120 and job["members"] == 3
    recent = {tuple(r) for lr in three for r in lr._window.arrays()[0][-40:]}
    assert {tuple(r) for r in job["XL"]} == recent


def test_the_group_triggers_count_over_every_partition():
    XL, XR, y = events(90)
    parts = split(XL, XR, y, 3, min_train=50, refit_every=60)
    assert all(not lr.wants_refit() for lr in parts)         # 30 pairs each: under min_train alone
    assert group_wants_refit(parts)                          # 90 together
    group_refit(parts)
    assert not group_wants_refit(parts)
    XL2, XR2, y2 = events(45, seed=2)
    for j, lr in enumerate(parts):                           # 15 events each since the refit: 45 < 60
        lr.learn_many(XL2[15 * j:15 * (j + 1)], XR2[15 * j:15 * (j + 1)], y2[15 * j:15 * (j + 1)])
    assert not group_wants_refit(parts) and all(lr._since == 15 for lr in parts)
    parts[0].learn_many(XL2[:15], XR2[:15], y2[:15])         # 60 together
    assert group_wants_refit(parts)


def test_restored_parts_of_different_fits_want_one_refit():
    XL, XR, y = events(200)
    a, b = split(XL, XR, y, 2)
    group_refit([a])
    group_refit([b])                                         # two fits (e.g. restored after a rebalance)
    assert a.model.fit_id != b.model.fit_id and group_wants_refit([a, b])
    group_refit([a, b])
    assert a.model.fit_id == b.model.fit_id and not group_wants_refit([a, b])


def test_the_served_merge_of_one_fit_is_that_fit_with_every_partitions_count():
    from learners.state import dump_state, load_state
    from stream import registry
    from stream.models import register_all

    register_all()
    XL, XR, y = events(300)
    three = split(XL, XR, y, 3)
    group_refit(three)
    # through snapshots, as the server loads them (float32 arrays)
    loaded = [registry.get_model("gpm").loader(load_state(dump_state(lr.state_dict()))) for lr in three]
    merged = registry.merge_learners("gpm", [(lr, 100) for lr in loaded])
    A, B, _ = events(40, seed=9)
    np.testing.assert_allclose(merged.model.decision_function(A, B), loaded[0].model.decision_function(A, B),
                               rtol=1e-9, atol=1e-12)
    assert merged.model.centres_left_.shape == three[0].model.centres_left_.shape   # not three copies
    assert merged.examples_served == 300


def test_what_is_served_is_what_is_reported_when_fits_cannot_be_pooled():
    """Two workers' fits with different length-scales: the bigger fit is served, and the count is its own."""
    from learners.state import dump_state
    from stream.contract import encode_snapshot
    from stream.models import register_all
    from stream.workers.live_models import LiveModels

    register_all()
    XL, XR, y = events(400)
    a = split(XL[:150], XR[:150], y[:150], 1, model_params={**FAST, "lengthscale_multiplier": 1.0})[0]
    b = split(XL[150:], XR[150:] * 3.0, y[150:], 1, model_params={**FAST, "lengthscale_multiplier": 2.0})[0]
    group_refit([a])
    group_refit([b])
    assert not np.allclose(a.model.lengthscales_, b.model.lengthscales_)
    live = LiveModels()
    assert live.on_snapshot(b"gpm@t:0", encode_snapshot("gpm", 1, 150, a.state_dict()))
    assert live.on_snapshot(b"gpm@t:1", encode_snapshot("gpm", 1, 250, b.state_dict()))
    mv = live.get("gpm")
    assert mv.training_count == 250                     # not 400: the 150 examples of the other fit are not served
    A, B, _ = events(30, seed=4)
    np.testing.assert_allclose(mv.learner.model.decision_function(A, B), b.model.decision_function(A, B),
                               rtol=1e-4, atol=1e-5)    # float32 snapshot arrays
    assert dump_state(a.state_dict())                   # the parts were not modified by the merge
    assert not hasattr(live.get("gpm").sources["t:1"].learner, "examples_served")


def test_the_learner_core_refits_its_partitions_as_one():
    """LearnerCore (no loop: refits inline) with 3 sources: one fit, installed in every source's learner."""
    import json

    from stream.models import register_all
    from stream.settings import Settings
    from stream.workers.learner_core import LearnerCore

    register_all()
    s = Settings(models=["gpm"], feature_names=["a", "b", "c"],
                 model_params={"gpm": {"min_train": 120, "refit_every": None, "drift": False, "model_params": FAST}})
    core = LearnerCore(s)
    XL, XR, y = events(150)
    srcs = [core.new_source(s.topic_preferences, p, {}) for p in range(3)]
    for i in range(150):
        ev = {"schema_version": 1, "event_id": f"e{i}", "timestamp": 1700000000 + i,
              "left": {"features": dict(zip("abc", map(float, XL[i])))},
              "right": {"features": dict(zip("abc", map(float, XR[i])))}, "outcome": int(y[i])}
        st = srcs[i % 3]
        core.process_batch(st, [(i // 3, json.dumps(ev).encode(), None, None)])
    models = [st.slots["gpm"].learner.model for st in srcs]
    assert all(m is not None for m in models)
    assert len({m.fit_id for m in models}) == 1
    assert models[0].n_train_ == pytest.approx(0.9 * 120, abs=2)   # the union's 120 pairs at the trigger
    assert all(st.force for st in srcs)                             # every source publishes the new fit
    assert core.metrics.refit_duration.labels(model="gpm")._sum.get() > 0
    assert _refits(core) == 1                                       # one fit, counted once (not once a source)


def _refits(core) -> int:
    got = core.metrics.registry.get_sample_value("prefstream_refit_duration_seconds_count", {"model": "gpm"})
    return int(got or 0)


def test_the_group_refits_every_refit_every_events_of_the_whole_stream():
    """refit_every counts the events of every partition together: 180 events over 3 sources, the first fit at
    min_train = 60 pairs stored, then one every 30 events → fits at 60, 90, 120, 150, 180: 5, and the
    refit metric counts those 5 fits (not 15: one per source). Per partition (the learners on their own)
    the first fit would wait for 60 pairs of that partition: 3 fits, all at the 180th event."""
    import json

    from stream.models import register_all
    from stream.settings import Settings
    from stream.workers.learner_core import LearnerCore

    register_all()
    s = Settings(models=["gpm"], feature_names=["a", "b", "c"],
                 model_params={"gpm": {"min_train": 60, "refit_every": 30, "drift": False, "model_params": FAST}})
    core = LearnerCore(s)
    XL, XR, y = events(180)
    srcs = [core.new_source(s.topic_preferences, p, {}) for p in range(3)]
    fits_at = []
    for i in range(180):
        ev = {"schema_version": 1, "event_id": f"e{i}", "timestamp": 1700000000 + i,
              "left": {"features": dict(zip("abc", map(float, XL[i])))},
              "right": {"features": dict(zip("abc", map(float, XR[i])))}, "outcome": int(y[i])}
        before = _refits(core)
        core.process_batch(srcs[i % 3], [(i // 3, json.dumps(ev).encode(), None, None)])
        if _refits(core) > before:
            fits_at.append(i + 1)
    assert fits_at == [60, 90, 120, 150, 180] and _refits(core) == 5
    assert len({st.slots["gpm"].learner.model.fit_id for st in srcs}) == 1


# ----------------------------------------------------------------------------- real broker, worker and server
@pytest.mark.kafka
@pytest.mark.timeout(300)
def test_three_partitions_serve_one_fit_of_the_whole_stream_and_report_it(kafka_bootstrap, kafka_options, tmp_path):
    """A real learner worker on a 3-partition topic and a real ``prefstream serve``: /v1/models reports every
    event, and /v1/compare is the fit of all of them — the same model an in-process learner fits on the
    same events through one partition (float32 snapshot arrays: 1e-5)."""
    import json

    from tests.test_serve import Server
    from tests.test_workers_kafka import Stack, pref_event

    n = 240
    params = {"gpm": {"min_train": n, "refit_every": None, "drift": False, "model_params": FAST}}
    stack = Stack(kafka_bootstrap, kafka_options, tmp_path, partitions=3)
    srv = None
    try:
        rng = np.random.default_rng(5)
        evs = [pref_event(i, rng) for i in range(n)]
        stack.start("learn", "--models", "gpm", PREFSTREAM_MODEL_PARAMS=json.dumps(params),
                    PREFSTREAM_FEATURE_NAMES="a,b,c")
        srv = Server(stack.env(PREFSTREAM_SERVE_MODELS="gpm"), tmp_path)
        stack.send("preferences", evs)

        def served():
            ms = {m["model"]: m for m in srv.client.get("/v1/models").json()["models"]}
            g = ms.get("gpm")
            return g if g and g["ready"] and g["examples_seen"] == n and len(g["source_versions"]) >= 3 else None

        g = stack.wait(served, 240, "/v1/models to report the refitted gpm on every event", poll=1.0)
        parts = {k: s for k, s in stack.snapshots().items() if k.startswith("gpm@") and "preferences" in k}
        assert len(parts) == 3 and all(s["training_count"] > 0 for s in parts.values())   # all 3 partitions used
        assert sum(s["training_count"] for s in parts.values()) == g["examples_seen"] == n
        # the oracle: one learner, all events, one partition
        one = learner(min_train=n)
        rows = [json.loads(v) for _, v in evs]
        XL = np.array([[r["left"]["features"][f] for f in "abc"] for r in rows])
        XR = np.array([[r["right"]["features"][f] for f in "abc"] for r in rows])
        one.learn_many(XL, XR, np.array([r["outcome"] for r in rows]))
        group_refit([one])
        A, B, _ = events(8, seed=11)
        want = one.model.predict_proba(A, B)
        for a, b, p in zip(A, B, want):
            body = {"model": "gpm", "left": {"features": dict(zip("abc", map(float, a)))},
                    "right": {"features": dict(zip("abc", map(float, b)))}}
            out = srv.client.post("/v1/compare", json=body)
            assert out.status_code == 200, out.text
            assert out.json()["probability"] == pytest.approx(p, abs=1e-5)
    finally:
        if srv is not None:
            srv.close()
        stack.close()


def test_a_partition_that_starts_after_the_fit_adopts_it_without_a_refit():
    from learners.refit_group import group_adopt

    XL, XR, y = events(200)
    a, b = split(XL, XR, y, 2)
    late = learner()
    group_refit([a, b])
    late.learn_many(XL[:5], XR[:5], y[:5])
    assert group_adopt([a, b, late]) == [2]
    assert late.model.fit_id == a.model.fit_id and late.model_version == 1
    assert not group_wants_refit([a, b, late])            # one fit: nothing to do until the triggers say so
    assert group_adopt([a, b, late]) == []
