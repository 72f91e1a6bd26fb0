"""The micro-batched stream path: learner batch methods, batch ingest, LearnerCore.process_batch.

Oracles: the one-by-one methods (``learn_one`` / ``margin_one`` loops) where the batch method is
exact; a hand-written delayed-gradient recursion for LinearBT's documented mini-batch variant;
the per-message contract parser for every message of a batch; one clean pass for crash/replay
schedules whose batch boundaries differ before and after the crash.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings as hsettings, strategies as st

from learners.capacity import CapacityRDA
from learners.linear import LinearBT
from learners.refit import RefittingGPM
from stream import registry
from stream.contract import DeadLetter, parse_preference
from stream.contract.batch import decode, learner_arrays, parse_batch
from stream.metrics import build_metrics
from stream.settings import Settings
from stream.workers.learner import LearnerCore
from stream.workers.learner_core import observe_n

W = np.array([1.0, -2.0, 0.5])
NAMES = ["a", "b", "c"]


def ev(i, rng, eid=None, **extra) -> bytes:
    xl, xr = rng.normal(size=3), rng.normal(size=3)
    d = {"schema_version": 1, "event_id": eid or f"e{i}", "timestamp": 1700000000 + i,
         "left": {"features": dict(zip(NAMES, map(float, xl)))},
         "right": {"features": dict(zip(NAMES, map(float, xr)))},
         "outcome": 1 if W @ (xl - xr) > 0 else -1}
    d.update(extra)
    return json.dumps(d).encode()


def settings(**kw):
    return Settings.load(None, {"snapshot_every_events": 1000, "snapshot_every_seconds": 3600, "snapshot_min_seconds": 0, **kw}, environ={})


def rows(X):
    return [dict(zip(NAMES, r)) for r in X.tolist()]


# ------------------------------------------------------------------------- LinearBT
@hsettings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(1, 40), scale=st.booleans(), l2=st.sampled_from([0.0, 0.01]),
       indiff=st.sampled_from(["split", "skip"]))
def test_linear_learn_many_with_max_delay_one_is_the_learn_one_loop(seed, n, scale, l2, indiff):
    rng = np.random.default_rng(seed)
    XL, XR = rng.normal(size=(n, 3)) * [1, 10, 0.1], rng.normal(size=(n, 3))
    y = rng.choice([-1, 0, 1], size=n)
    w = rng.uniform(0.1, 3, size=n)
    a = LinearBT(NAMES, scale=scale, l2=l2, indifference=indiff)
    b = LinearBT(NAMES, scale=scale, l2=l2, indifference=indiff, max_delay=1)
    for xl, xr, yi, wi in zip(rows(XL), rows(XR), y.tolist(), w.tolist()):
        a.learn_one(xl, xr, yi, weight=wi)
    b.learn_many(XL, XR, y, weight=w)
    np.testing.assert_allclose(b.weights, a.weights, rtol=1e-10, atol=1e-13)
    assert a.n_learned == b.n_learned


def test_linear_learn_many_is_the_delayed_gradient_recursion():
    """Oracle: a plain loop of the documented recursion (gradients at the pre-chunk weights)."""
    rng = np.random.default_rng(0)
    n, delay, lr = 50, 16, 0.1
    XL, XR = rng.normal(size=(n, 3)), rng.normal(size=(n, 3))
    y = np.where((XL - XR) @ W > 0, 1, -1)
    m = LinearBT(NAMES, learning_rate=lr, max_delay=delay)
    m.learn_many(XL, XR, y)
    w, G, sq, sw = np.zeros(3), np.zeros(3), np.zeros(3), 0.0
    for s0 in range(0, n, delay):
        w0 = w.copy()
        for k in range(s0, min(s0 + delay, n)):
            d = XL[k] - XR[k]
            sq, sw = sq + d * d, sw + 1.0
            z = d / np.sqrt(sq / sw)
            g = (1 / (1 + np.exp(-(w0 @ z))) - (1 + y[k]) / 2) * z
            G = G + g * g
            w = w - lr * g / (np.sqrt(G) + 1e-8)
    np.testing.assert_allclose(m.weights, w / np.sqrt(sq / sw), rtol=1e-10)
    assert m.n_learned == n


def test_linear_batch_margins_equal_the_one_by_one_margins_and_refuse_bad_input():
    rng = np.random.default_rng(1)
    m = LinearBT(NAMES)
    XL, XR = rng.normal(size=(20, 3)), rng.normal(size=(20, 3))
    m.learn_many(XL, XR, np.where((XL - XR) @ W > 0, 1, -1))
    np.testing.assert_allclose(m.margin_many(XL, XR), [m.margin_one(a, b) for a, b in zip(rows(XL), rows(XR))],
                               rtol=1e-12)
    before = m.weights.copy()
    with pytest.raises(Exception, match="y must have shape"):
        m.learn_many(XL, XR, np.full(20, 2))
    np.testing.assert_array_equal(m.weights, before)  # refused before any change
    assert np.array_equal(LinearBT().margin_many(XL, XR), np.zeros(20))  # names unknown: the zero model


# ------------------------------------------------------------------------- RefittingGPM
@pytest.mark.parametrize("window", ["sliding", "reservoir"])
def test_gpm_learn_many_equals_the_learn_one_loop_and_batch_margins_are_one_kernel_block(window):
    rng = np.random.default_rng(2)
    n = 700
    XL, XR = rng.normal(size=(n, 3)), rng.normal(size=(n, 3))
    y = np.where((XL - XR) @ W > 0, 1, -1)
    y[::17] = 0
    kw = dict(window_size=300, window=window, min_train=100, refit_every=10**6, drift=True,
              model_params={"penalty_grid": (1e-4,), "multiplier_grid": (1.0,), "max_centres": 100})
    a, b = RefittingGPM(NAMES, **kw), RefittingGPM(NAMES, **kw)
    for i in range(250):
        a.learn_one(*rows(XL[i:i + 1]), *rows(XR[i:i + 1]), int(y[i]))
    b.learn_many(XL[:250], XR[:250], y[:250])
    a.refit()
    b.refit()
    for i in range(250, n):
        a.learn_one(*rows(XL[i:i + 1]), *rows(XR[i:i + 1]), int(y[i]))
    for s0 in (250, 400, 401, 650):  # uneven batches, one of a single row
        b.learn_many(XL[s0:s0 + (150 if s0 == 250 else 1 if s0 == 400 else 249 if s0 == 401 else 50)],
                     XR[s0:s0 + (150 if s0 == 250 else 1 if s0 == 400 else 249 if s0 == 401 else 50)],
                     y[s0:s0 + (150 if s0 == 250 else 1 if s0 == 400 else 249 if s0 == 401 else 50)])
    wa, wb = a._window, b._window
    assert (a.n_seen, a.n_window, wa.head, wa.n_offered) == (b.n_seen, b.n_window, wb.head, wb.n_offered)
    np.testing.assert_array_equal(wa._XL, wb._XL)
    np.testing.assert_array_equal(wa._y, wb._y)
    assert a._loss_sum == pytest.approx(b._loss_sum, rel=1e-12) and a._loss_n == b._loss_n
    one = [a.margin_one(p, q) for p, q in zip(rows(XL[:64]), rows(XR[:64]))]
    np.testing.assert_allclose(a.margin_many(XL[:64], XR[:64]), one, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(a.margin_many(XR[:64], XL[:64]), -np.array(one), atol=1e-10)  # skew-symmetry
    fresh = RefittingGPM(NAMES, **kw)
    assert np.array_equal(fresh.margin_many(XL[:3], XR[:3]), np.zeros(3))
    with pytest.raises(Exception, match="not been refitted"):
        fresh.predict_proba_many(XL[:3], XR[:3])


def test_capacity_margin_many_equals_the_one_by_one_margins():
    rng = np.random.default_rng(3)
    m = CapacityRDA(NAMES, scaler="minmax")
    XL, XR = rng.uniform(size=(60, 3)), rng.uniform(size=(60, 3))
    m.learn_many(XL, XR, np.where((XL - XR) @ W > 0, 1, -1))
    np.testing.assert_allclose(m.margin_many(XL, XR), [m.margin_one(a, b) for a, b in zip(rows(XL), rows(XR))],
                               rtol=1e-12, atol=1e-14)


# ------------------------------------------------------------------------- batch ingest
BAD = [
    (b"{oops", "malformed_json"),
    (b"[1, 2]", "not_an_object"),
    (b'{"schema_version": 1, "event_id": "n", "timestamp": 1, "left": {"features": {"a": NaN}}, '
     b'"right": {"features": {"a": 1}}, "outcome": 1}', "non_finite"),
    (b'{"schema_version": 1, "event_id": "o", "timestamp": 1, "left": {"features": {"a": 1e400}}, '
     b'"right": {"features": {"a": 1}}, "outcome": 1}', "non_finite"),
    (b"\xff\xfe{}", "malformed_json"),
    (b'{"schema_version": 2, "event_id": "v"}', "unknown_schema_version"),
    (b'{"schema_version": 1, "event_id": "q", "timestamp": 1, "left": {"features": {"a": 1}}, '
     b'"right": {"features": {"a": 1}}, "outcome": 3}', "invalid_outcome"),
    (b'{"schema_version": 1, "event_id": "u", "timestamp": 1, "left": {"id": "nope"}, '
     b'"right": {"features": {"a": 1}}, "outcome": 1}', "unknown_item"),
    (b"x" * 2000, "oversize"),
    (None, "malformed_json"),
]


def test_parse_batch_dead_letters_each_bad_message_with_the_contract_reason():
    rng = np.random.default_rng(4)
    good = [ev(i, rng) for i in range(5)]
    values = [good[0], *[v for v, _ in BAD[:5]], good[1], *[v for v, _ in BAD[5:]], *good[2:]]
    out = parse_batch("preferences", values, None, max_bytes=1000)
    assert len(out) == len(values)
    reasons = [r.reason for r in out if isinstance(r, DeadLetter)]
    assert reasons == [why for _, why in BAD]
    for raw, res in zip(values, out):
        try:
            ref = parse_preference(raw, None, max_bytes=1000)
        except DeadLetter as dl:
            assert isinstance(res, DeadLetter) and (res.reason, res.detail) == (dl.reason, dl.detail)
        else:
            assert res == [ref]


def test_decode_accepts_exactly_what_the_reference_decoder_accepts():
    for raw in (b'{"a": 1, "a": 2}', b'{"s": "\\ud800"}', b'{"x": 1.5e3, "y": [true, null]}'):
        assert decode(raw, 1000) == json.loads(raw)


def test_learner_arrays_reject_rows_without_the_model_features():
    rng = np.random.default_rng(5)
    exs = [parse_preference(ev(i, rng)) for i in range(3)]
    odd = parse_preference(b'{"schema_version": 1, "event_id": "z", "timestamp": 1, "left": {"features": {"a": 1}},'
                           b' "right": {"features": {"a": 2}}, "outcome": 1}')
    arr = learner_arrays([exs[0], odd, exs[1], exs[2]], NAMES, None, "m")
    assert arr.rows == [0, 2, 3] and list(arr.rejected) == [1] and "expects feature 'b'" in arr.rejected[1]
    np.testing.assert_array_equal(arr.X_left[1], [exs[1].left[f] for f in NAMES])


def test_observe_n_equals_n_observations():
    m1, m2 = build_metrics(), build_metrics()
    for v, n in ((3e-3, 7), (0.2, 2), (5.0, 1), (1e-6, 4)):
        observe_n(m1.learn_latency.labels(model="x"), v, n)
        for _ in range(n):
            m2.learn_latency.labels(model="x").observe(v)
    dump = lambda m: sorted((s.name, tuple(sorted(s.labels.items())), round(s.value, 9))  # noqa: E731
                            for f in m.registry.collect() if f.name == "prefstream_learn_latency_seconds"
                            for s in f.samples if not s.name.endswith("_created"))
    assert dump(m1) == dump(m2)  # buckets and count exactly; the sum up to rounding


# ------------------------------------------------------------------------- LearnerCore batches
def _batches(core, st, msgs, sizes):
    dls, k = [], 0
    for size in sizes:
        dls += core.process_batch(st, [(off, raw, None, None) for off, raw in msgs[k:k + size]])
        k += size
    return dls


@pytest.mark.parametrize("before,after", [((7, 5), (13, 17)), ((1, 11), (30,)), ((12,), (4, 4, 4, 18))])
def test_crash_between_batches_replays_exactly_once_whatever_the_batch_boundaries(before, after):
    registry.register_model("bt-exact", lambda s, p: LinearBT(NAMES, max_delay=1), LinearBT.from_state, replace=True)
    rng = np.random.default_rng(6)
    msgs = [(i, ev(i, rng)) for i in range(30)]
    msgs[9] = (9, ev(3, rng, eid="e3"))  # a re-sent copy inside the stream
    msgs[20] = (20, b"{bad")
    s = settings(models=["bt-exact"])
    src = s.topic_preferences
    clean = LearnerCore(s)
    cst = clean.new_source(src, 0, {})
    clean_dls = _batches(clean, cst, msgs, [30])
    core = LearnerCore(s)
    st0 = core.new_source(src, 0, {})
    _batches(core, st0, msgs, [before[0]])
    records, _, versions = core.build_snapshots(st0)
    core.snapshot_done(st0, versions, True)
    _batches(core, st0, msgs[before[0]:], before[1:])  # learned after the snapshot: lost in the crash
    restarted = LearnerCore(s)
    st2 = restarted.new_source(src, 0, {k.decode(): v for k, v in records})
    dls = _batches(restarted, st2, msgs, list(after))  # the consumer resumes at offset 0 (commit lagging)
    a, b = cst.slots["bt-exact"], st2.slots["bt-exact"]
    assert a.count == b.count == 28 and a.digest == b.digest
    np.testing.assert_allclose(b.learner.weights, a.learner.weights, rtol=1e-12)
    assert [d["offset"] for d in clean_dls] == [20]
    assert [d["offset"] for d in dls] == [20]  # after the snapshot: dead-lettered again (at-least-once)


def test_a_batch_dead_letters_each_bad_message_and_skips_copies_within_it():
    rng = np.random.default_rng(7)
    s = settings()
    core = LearnerCore(s)
    st = core.new_source(s.topic_preferences, 0, {})
    first = ev(0, rng, eid="x")
    odd = (b'{"schema_version": 1, "event_id": "w", "timestamp": 1, "left": {"features": {"a": 1}}, '
           b'"right": {"features": {"a": 2}}, "outcome": 1}')
    msgs = [first, ev(1, rng), b"{bad", first, ev(4, rng), b"[]", ev(6, rng)]
    _batches(core, st, [(0, ev(99, rng))], [1])  # LinearBT learns its names (a, b, c) from a first event
    dls = core.process_batch(st, [(i + 1, m, None, None) for i, m in enumerate(msgs + [odd])])
    assert [(d["offset"], d["reason"]) for d in dls] == [(3, "malformed_json"), (6, "not_an_object"),
                                                         (8, "schema_violation")]
    assert "expects feature 'b'" in dls[-1]["detail"]
    slot = st.slots["linear-bt"]
    assert slot.count == 1 + 4 and st.next_offset == 9 and st.since_snapshot == 9
    assert core.metrics.duplicate_events.labels(topic=s.topic_preferences)._value.get() == 1
    assert core.metrics.events_learned.labels(model="linear-bt")._value.get() == 5
    assert core.metrics.events_consumed.labels(topic=s.topic_preferences)._value.get() == 9


def test_gpm_refit_in_a_worker_process_installs_the_same_model_as_in_process():
    """The split refit protocol: begin here, fit_window in a spawned process, finish here."""
    import asyncio
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

    params = {"window_size": 400, "min_train": 120, "refit_every": 10**6, "drift": False,
              "model_params": {"penalty_grid": [1e-4], "multiplier_grid": [1.0], "max_centres": 80}}
    s = settings(models=["gpm"], feature_names=NAMES, model_params={"gpm": params})
    rng = np.random.default_rng(9)
    msgs = [(i, ev(i, rng)) for i in range(200)]

    async def go(pool):
        core = LearnerCore(s, loop=asyncio.get_running_loop(), executor=ThreadPoolExecutor(1), refit_pool=pool)
        st = core.new_source(s.topic_preferences, 0, {})
        core.process_batch(st, [(off, raw, None, None) for off, raw in msgs[:150]])
        slot = st.slots["gpm"]
        assert slot.refit_running  # asked once, after the batch
        core.process_batch(st, [(off, raw, None, None) for off, raw in msgs[150:]])  # learning goes on
        for _ in range(600):
            await asyncio.sleep(0.1)
            if not slot.refit_running:
                break
        return st, slot

    with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as pool:
        st, slot = asyncio.run(go(pool))
    assert slot.learner.model_version == 1 and st.force and slot.count == 200
    from learners.refit_group import group_refit

    ref = RefittingGPM(NAMES, **params)  # the same window fitted in this process (the worker's group refit)
    XL, XR = slot.learner._window._XL[:150], slot.learner._window._XR[:150]
    ref.learn_many(XL, XR, slot.learner._window._y[:150])
    group_refit([ref])
    np.testing.assert_allclose(slot.learner.margin_many(XL[:20], XR[:20]), ref.margin_many(XL[:20], XR[:20]),
                               rtol=1e-8, atol=1e-10)


def test_snapshot_stores_next_offset_and_count_once_in_the_envelope():
    from stream.contract import decode_snapshot
    from stream.workers._snapshot import STREAM_META_KEY, split_stream_meta

    rng = np.random.default_rng(12)
    s = settings()
    core = LearnerCore(s)
    st0 = core.new_source(s.topic_preferences, 2, {})
    _batches(core, st0, [(i, ev(i, rng)) for i in range(7)], [7])
    records, _, _ = core.build_snapshots(st0)
    snap = decode_snapshot(records[0][1])
    src = f"{s.topic_preferences}:2"
    assert snap["offsets"] == {src: 7} and snap["training_count"] == 7
    assert set(snap["state"]["meta"][STREAM_META_KEY]) == {"source", "digest", "window_size"}
    _, info = split_stream_meta(snap["state"])
    assert "next_offset" not in info and "training_count" not in info and len(info["window"]) == 7
    restored = LearnerCore(s).new_source(s.topic_preferences, 2, {k.decode(): v for k, v in records})
    assert (restored.next_offset, restored.slots["linear-bt"].count) == (7, 7)


@pytest.mark.parametrize("size", [0, 1, 7, 4096])
def test_remember_many_keeps_the_window_of_one_remember_per_event(size):
    from stream.workers.sources import ModelSlot

    rng = np.random.default_rng(size)
    one, many = ModelSlot(learner=None), ModelSlot(learner=None)
    hs = [int(h) for h in rng.permutation(1 << 16)[:6000]]
    for k in range(0, len(hs), 450):
        chunk = hs[k:k + 450]
        for h in chunk:
            one.remember(h, size)
        many.remember_many(chunk, size)
        assert list(many.window) == list(one.window) and many.window_set == one.window_set
