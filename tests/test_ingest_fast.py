"""The learner's batch validation of preference events (stream.contract.batch._fast_preferences) against the
contract's per-message validator, its oracle."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from stream.contract import DeadLetter, preference_from_doc
from stream.contract.batch import _fast_preferences, decode, parse_batch


def _event(i: int, rng) -> dict:
    names = [f"f{j}" for j in range(5)]
    ev = {"schema_version": 1, "event_id": f"e{i}", "timestamp": 1_700_000_000 + i,
          "left": {"id": f"a{i}", "features": {n: float(rng.normal()) for n in names}},
          "right": {"features": {n: int(rng.integers(-3, 3)) for n in names}}, "outcome": int(rng.choice([1, -1, 0]))}
    if i % 3 == 0:
        ev["context"] = {"u": float(rng.random())}
    if i % 4 == 0:
        ev["weight"] = float(rng.random() + 0.5)
    return ev


MUTATIONS = [
    lambda e: e["left"]["features"].update(f0=float("nan")),
    lambda e: e["left"]["features"].update(f1=True),
    lambda e: e["right"]["features"].update(f2="1.0"),
    lambda e: e["right"]["features"].update(f3=2e15),
    lambda e: e["right"]["features"].update(f3=10 ** 400),
    lambda e: e["right"]["features"].pop("f4"),
    lambda e: e.update(outcome=2),
    lambda e: e.update(outcome=True),
    lambda e: e.update(outcome=1.0),
    lambda e: e.update(timestamp=-1),
    lambda e: e.update(timestamp="2024-05-01T12:00:00Z"),
    lambda e: e.update(timestamp=10 ** 30),
    lambda e: e.update(weight=0),
    lambda e: e.update(weight=1e7),
    lambda e: e.update(weight=None),
    lambda e: e.update(context=None),
    lambda e: e.update(context={}),
    lambda e: e.update(context={"": 1.0}),
    lambda e: e.update(extra=1),
    lambda e: e.update(event_id=""),
    lambda e: e.update(event_id="x" * 513),
    lambda e: e.update(schema_version=1.0),
    lambda e: e["left"].update(id=None),
    lambda e: e["left"].update(id=7),
    lambda e: e["left"].pop("features"),
    lambda e: e["left"].update(features={}),
    lambda e: e["left"].update(features={"f0": 1.0, "f1": 2.0, "f2": 3.0, "f4": 4.0, "f3": 5.0}),  # same names, other order
    lambda e: e["left"]["features"].update({"x" * 257: 1.0}),
    lambda e: e.pop("outcome"),
]


def _oracle(doc):
    try:
        return [preference_from_doc(doc, None)]
    except DeadLetter as dl:
        return ("dead", dl.reason, dl.detail)


def _got(res):
    return ("dead", res.reason, res.detail) if isinstance(res, DeadLetter) else res


@pytest.mark.parametrize("seed", [0, 1])
def test_batch_validation_agrees_with_the_contract_on_valid_and_broken_events(seed):
    rng = np.random.default_rng(seed)
    docs = []
    for i in range(400):
        ev = _event(i, rng)
        if rng.random() < 0.4:
            MUTATIONS[int(rng.integers(len(MUTATIONS)))](ev)
        docs.append(ev)
    fast = _fast_preferences([copy.deepcopy(d) for d in docs])
    # through parse_batch, from the bytes (NaN and huge integers take the reference decoder)
    raws = [json.dumps(d).encode() for d in docs]
    parsed = parse_batch("preferences", raws, None, 1 << 20)
    expect = []
    for r in raws:
        try:
            expect.append(_oracle(decode(r, 1 << 20)))
        except DeadLetter as dl:
            expect.append(("dead", dl.reason, dl.detail))
    assert [_got(p) for p in parsed] == expect
    # the fast path took the clean events (and only events the validator accepts, as the same example)
    took = [j for j, ex in enumerate(fast) if ex is not None]
    assert len(took) >= 200
    for j in took:
        assert [fast[j]] == _oracle(docs[j])
    for m in MUTATIONS:  # every broken shape goes the validator's way
        ev = _event(0, np.random.default_rng(9))
        m(ev)
        ex = _fast_preferences([ev])[0]
        assert ex is None or [ex] == _oracle(ev)


def test_batched_loss_monitor_gives_the_alarms_of_one_by_one():
    from stream.metrics import build_metrics
    from stream.monitoring.monitor import Monitor

    rng = np.random.default_rng(2)
    ys, ps = [], []
    for n, acc in ((3000, 0.6), (3000, 0.9), (3000, 0.6)):
        for _ in range(n):
            y = bool(rng.random() < 0.5)
            ys.append(y)
            ps.append(acc if (y == (rng.random() < acc)) else 1 - acc)
    one = Monitor(build_metrics(), loss_warmup=500)
    a = [r for y, p in zip(ys, ps) for r in one.observe_loss("lin", y, p)]
    many = Monitor(build_metrics(), loss_warmup=500)
    b = [r for k in range(0, len(ys), 500) for r in many.observe_losses("lin", ys[k:k + 500], ps[k:k + 500])]
    strip = lambda rs: [{k: v for k, v in r.items() if k not in ("detected_at", "drift_id")} for r in rs]
    assert len(a) >= 1 and strip(a) == strip(b)


def test_batch_arrays_from_the_parsed_rows_equal_the_arrays_of_the_validators_examples():
    from stream.contract.batch import RowExample, _block_arrays, learner_arrays

    rng = np.random.default_rng(6)
    docs = [_event(i, rng) for i in range(60)]
    for d in docs[::7]:  # a second feature-name tuple in the same batch: a second block
        for side in ("left", "right"):
            d[side]["features"] = {"g0": 1.5, "f1": d[side]["features"]["f1"]}
    for d in docs:
        d.pop("context", None)
    parsed = parse_batch("preferences", [json.dumps(d).encode() for d in docs], None, 1 << 20)
    assert len(parsed.blocks) == 2
    rows = [r[0] for r in parsed]
    assert all(type(r) is RowExample for r in rows)
    oracle = [preference_from_doc(d, None) for d in docs]
    assert rows == oracle and oracle == rows and [r.example() for r in rows] == oracle
    main = [k for k, d in enumerate(docs) if "f0" in d["left"]["features"]]
    assert _block_arrays([rows[k] for k in main], ["f3", "f1"], None) is not None  # the indexing path is taken
    for names in (["f0", "f1", "f2", "f3", "f4"], ["f3", "f1"], ["f1"], ["f1", "f9"]):
        for pick in (main, main[::2], list(range(len(docs)))):
            got = learner_arrays([rows[k] for k in pick], names, None, "m")
            ref = learner_arrays([oracle[k] for k in pick], names, None, "m")
            assert got.rows == ref.rows and got.rejected == ref.rejected
            for a in ("X_left", "X_right", "y", "weight"):
                np.testing.assert_array_equal(getattr(got, a), getattr(ref, a))
                assert getattr(got, a).dtype == getattr(ref, a).dtype
    # an example kept past its batch holds no reference to the batch's arrays, and keeps its values
    kept = rows[3]
    del parsed, rows
    assert kept.block() is None and kept == oracle[3] and kept.left == oracle[3].left
