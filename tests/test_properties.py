"""Property-based tests (hypothesis) over the contract, every registered learner and explainer.

Arbitrary JSON — floats at the extremes, denormals, integers of any size, strings, nesting,
unicode keys, missing and extra keys, NaN/Infinity tokens — and near-valid events mutated from a
valid one:

* the contract either returns a bounded, finite :class:`PreferenceExample` or raises
  :class:`DeadLetter` with one reason from :data:`DEAD_LETTER_REASONS`;
* the learner core over every registered model never raises; each message is learned, a dead
  letter or a duplicate, for every model (the counts add up); every state stays sound (no NaN,
  no new infinity) and encodes as a snapshot;
* the explainer core over every registered model and explainer never raises on arbitrary explain
  requests; each planned explanation is either a valid ``explanation.v1`` record or counted as
  skipped.
"""

from __future__ import annotations

import json
import math

import numpy as np

from tests.conftest import require_module

hypothesis = require_module("hypothesis")
from hypothesis import HealthCheck, example, given, settings as hsettings, strategies as st  # noqa: E402

from stream import registry  # noqa: E402
from stream.contract import (  # noqa: E402
    DEAD_LETTER_REASONS,
    MAX_ABS_VALUE,
    WEIGHT_RANGE,
    DeadLetter,
    decode_snapshot,
    explanation_record_ok,
    parse_preference,
)
from stream.workers.guard import state_defect  # noqa: E402
from stream.settings import Settings  # noqa: E402
from stream.workers.explainer import ExplainerCore  # noqa: E402
from stream.workers.learner import LearnerCore  # noqa: E402
from stream.models import register_all  # noqa: E402

register_all()  # the parametrisations below read the registry at collection time

NAMES = ["a", "b", "c"]
CONTEXT = ["u"]
PROFILE = hsettings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
                    derandomize=True)

# ------------------------------------------------------------------------ strategies
numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=-1e-300, max_value=1e-300),  # denormals and tiny numbers
    st.sampled_from([0.0, -0.0, 5e-324, 1e15, -1e15, 1e15 * (1 + 1e-15), 1e16, 1e308, -1e308, 1e-6, 1e6, 1e6 + 1]),
    st.integers(),  # of any size
    st.integers(min_value=-(10**400), max_value=10**400),
)
keys = st.one_of(st.sampled_from(NAMES + CONTEXT + ["", "x", "é", "🙂", "a b"]), st.text(max_size=8))
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), numbers, st.text(max_size=12)),
    lambda kids: st.one_of(st.lists(kids, max_size=4), st.dictionaries(keys, kids, max_size=4)),
    max_leaves=12,
)
feature_dicts = st.one_of(
    st.fixed_dictionaries({k: numbers for k in NAMES}),
    st.fixed_dictionaries({k: st.floats(-3, 3) for k in NAMES}),  # plenty of valid ones
    st.dictionaries(keys, numbers, max_size=4),
    json_values,
)
FIELDS = ["schema_version", "event_id", "timestamp", "left", "right", "outcome", "context", "weight"]


@st.composite
def near_valid_events(draw):
    ev = {"schema_version": 1, "event_id": draw(st.text(min_size=1, max_size=6)),
          "timestamp": draw(st.one_of(st.just(1700000000), numbers, st.text(max_size=30))),
          "left": {"features": draw(feature_dicts)}, "right": {"features": draw(feature_dicts)},
          "outcome": draw(st.one_of(st.sampled_from([1, -1, 0]), json_values))}
    if draw(st.booleans()):
        ev["context"] = draw(st.one_of(st.fixed_dictionaries({"u": numbers}), json_values))
    if draw(st.booleans()):
        ev["weight"] = draw(numbers)
    for f in draw(st.lists(st.sampled_from(FIELDS), max_size=2)):  # missing keys
        ev.pop(f, None)
    for k, v in draw(st.dictionaries(keys, json_values, max_size=2)).items():  # extra keys
        if draw(st.booleans()):
            ev[k] = v
    return ev


def encode(doc) -> bytes:
    return json.dumps(doc, allow_nan=True).encode("utf-8", "surrogatepass")


messages = st.one_of(near_valid_events().map(encode), json_values.map(encode), st.binary(max_size=40))


def _bounded(d: dict) -> bool:
    return all(type(v) is float and math.isfinite(v) and abs(v) <= MAX_ABS_VALUE for v in d.values())


# ------------------------------------------------------------------------ contract
@PROFILE
@given(messages)
def test_contract_returns_a_bounded_example_or_one_dead_letter_reason(raw):
    try:
        ex = parse_preference(raw)
    except DeadLetter as dl:
        assert dl.reason in DEAD_LETTER_REASONS and dl.detail
        return
    assert _bounded(ex.left) and _bounded(ex.right) and ex.left.keys() == ex.right.keys()
    assert ex.context is None or _bounded(ex.context)
    assert WEIGHT_RANGE[0] <= ex.weight <= WEIGHT_RANGE[1]
    assert ex.outcome in (1, -1, 0) and math.isfinite(ex.timestamp)


# ------------------------------------------------------------------------ learners
def _settings(**kw):
    from stream.models import BUILTIN_EXPLAINERS  # not the throw-away models other tests register

    return Settings.load(None, {"models": sorted(BUILTIN_EXPLAINERS), "feature_names": NAMES, "context_names": CONTEXT,
                                "snapshot_every_events": 10**6, "snapshot_every_seconds": 3600, **kw}, environ={})


@hsettings(PROFILE, max_examples=60)
@given(st.lists(messages, min_size=1, max_size=25))
@example([encode({"schema_version": 1, "event_id": "p", "timestamp": 1, "outcome": 1,
                  "left": {"features": {"a": 1e308, "b": 0, "c": 0}}, "right": {"features": {"a": -1e308, "b": 0, "c": 0}}}),
          b'{"schema_version": 1, "event_id": "w", "timestamp": 1, "outcome": 1, "weight": 1e308, '
          b'"left": {"features": {"a": 1, "b": 0, "c": 0}}, "right": {"features": {"a": 0, "b": 1, "c": 0}}}'])
def test_every_learner_learns_finite_state_or_dead_letters_and_the_counts_add_up(msgs):
    s = _settings()
    core = LearnerCore(s)
    src = core.new_source(s.topic_preferences, 0, {})
    fresh = {m: src.slots[m].learner.state_dict() for m in core.models}
    for off, raw in enumerate(msgs):
        for dl in core.process(src, off, raw):
            assert dl["reason"] in DEAD_LETTER_REASONS
    for m in core.models:
        t = core.tally[m]
        assert t["learned"] + t["dead_letters"] + t["duplicates"] == len(msgs), (m, t)
        assert src.slots[m].count == t["learned"]
        ref = {k: int(np.isinf(v).sum()) for k, v in fresh[m]["arrays"].items() if np.asarray(v).dtype.kind == "f"}
        assert state_defect(src.slots[m].learner.state_dict(), ref) is None, m
    records, _, _ = core.build_snapshots(src)  # every state encodes (no NaN, within the size limit)
    assert len(records) == len(core.models)
    for _, value in records:
        decode_snapshot(value)


# ------------------------------------------------------------------------ explainers
_TRAINED: dict = {}


def _trained_explainer() -> ExplainerCore:
    """An explainer core holding snapshots of every registered model after 300 valid events."""
    if "core" not in _TRAINED:
        s = _settings(model_params={"gpm": {"refit_every": 100, "min_train": 50},
                                    "cgpm": {"refit_every": 100, "min_train": 50}})
        core = LearnerCore(s)
        src = core.new_source(s.topic_preferences, 0, {})
        rng = np.random.default_rng(0)
        w = np.array([1.0, -2.0, 0.5])
        for i in range(300):
            xl, xr = rng.normal(size=3), rng.normal(size=3)
            ev = {"schema_version": 1, "event_id": f"t{i}", "timestamp": 1700000000 + i,
                  "left": {"features": dict(zip(NAMES, xl.tolist()))}, "right": {"features": dict(zip(NAMES, xr.tolist()))},
                  "context": {"u": float(rng.normal())}, "outcome": 1 if w @ (xl - xr) > 0 else -1}
            assert core.process(src, i, encode(ev)) == []
        records, _, _ = core.build_snapshots(src)
        ex = ExplainerCore(s)
        for k, v in records:
            ex.on_snapshot(k, v)
        for i in range(20):
            ex.observe(parse_preference(encode({"schema_version": 1, "event_id": f"b{i}", "timestamp": 1,
                                                 "left": {"features": {"a": 0.1 * i, "b": 0.0, "c": 1.0}},
                                                 "right": {"features": {"a": 0.0, "b": 0.2 * i, "c": 0.0}},
                                                 "context": {"u": 0.0}, "outcome": 1})))
        _TRAINED["core"] = ex
    return _TRAINED["core"]


@st.composite
def explain_requests(draw):
    d = {"request_id": draw(st.one_of(st.text(min_size=1, max_size=5), json_values)),
         "left": draw(st.one_of(feature_dicts, st.fixed_dictionaries({"features": feature_dicts}))),
         "right": draw(st.one_of(feature_dicts, st.fixed_dictionaries({"features": feature_dicts})))}
    if draw(st.booleans()):
        d["model"] = draw(st.one_of(st.sampled_from(registry.models()), json_values))
    if draw(st.booleans()):
        d["context"] = draw(st.one_of(st.fixed_dictionaries({"u": numbers}), json_values))
    if draw(st.booleans()):
        d["params"] = draw(json_values)
    for f in draw(st.lists(st.sampled_from(["request_id", "left", "right"]), max_size=1)):
        d.pop(f, None)
    return d


def _skipped(metrics) -> float:
    return sum(s.value for m in metrics.explanations_skipped.collect() for s in m.samples if s.name.endswith("_total"))


@hsettings(PROFILE, max_examples=40)
@given(st.one_of(explain_requests().map(encode), json_values.map(encode), st.binary(max_size=30)))
@example(b'{"request_id": "q", "left": {"a": 1}, "right": {"a": 2}, "params": [1, 2]}')  # crashed the agent
@example(b"[" * 100_000)  # RecursionError in json.loads crashed the agent
@example(b'{"request_id": "q", "left": {"a": 1e300, "b": 0, "c": 0}, "right": {"a": -1e300, "b": 0, "c": 0}}')
@example(b'{"request_id": "q", "left": {"a": 1, "b": 0, "c": 0}, "right": {"a": 0, "b": 1, "c": 0}, "context": {"u": 1}}')
def test_every_explainer_answers_arbitrary_requests_with_valid_records_or_counted_skips(raw):
    core = _trained_explainer()
    before = _skipped(core.metrics)
    job = core.on_request(raw)
    if job is None:
        assert _skipped(core.metrics) == before + 1
        return
    plan = core.plan(job)
    after_plan = _skipped(core.metrics)
    records = core.explain(job, plan) if plan else []
    for rec in records:
        explanation_record_ok(rec)
    # every planned explanation is a record or a counted skip (a method may emit one record per instance)
    assert len(records) + (_skipped(core.metrics) - after_plan) >= len(plan)
    assert {(r["model_name"], r["method"]) for r in records} <= {(p[0], p[1]) for p in plan}
