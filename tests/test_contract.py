"""Event contract: schemas, one test per dead-letter reason, click expansion, items, snapshots, explanations."""

from __future__ import annotations

import base64
import copy
import json
import math
import re
import time
from pathlib import Path

import numpy as np
import pytest
from jsonschema import Draft202012Validator

from learners.exceptions import InvalidInputError, InvalidParameterError, SnapshotError
from stream import contract as C
from stream.contract import (
    DEAD_LETTER_REASONS,
    DeadLetter,
    ItemCatalog,
    PreferenceExample,
    dead_letter_record,
    decode_snapshot,
    encode_snapshot,
    explanation_record_ok,
    parse_click_session,
    parse_explain_request,
    parse_item,
    parse_preference,
    validate_record,
)

REPO = Path(__file__).resolve().parents[1]


def event(**over) -> dict:
    ev = {
        "schema_version": 1,
        "event_id": "ev-1",
        "timestamp": 1_700_000_000.25,
        "left": {"features": {"price": 10.0, "rating": 4.5}},
        "right": {"features": {"price": 12, "rating": 3.0}},
        "outcome": 1,
    }
    ev.update(over)
    return {k: v for k, v in ev.items() if v is not _DROP}


_DROP = object()


def raw(doc) -> bytes:
    return json.dumps(doc).encode()


def catalog() -> ItemCatalog:
    cat = ItemCatalog()
    for i, (p, r) in enumerate([(10.0, 4.5), (12.0, 3.0), (8.0, 4.0), (20.0, 5.0), (15.0, 2.0)]):
        cat.upsert({"schema_version": 1, "item_id": f"i{i}", "features": {"price": p, "rating": r}})
    return cat


# ----------------------------------------------------------------------------- schemas
@pytest.mark.parametrize("name", ["preference", "item", "click_session", "model_snapshot", "explanation", "dead_letter",
                                  "explain_request"])
def test_schema_files_are_valid_draft_2020_12(name):
    schema = C.load_schema(name)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)
    assert (C.SCHEMA_DIR / f"{name}.v1.json").is_file()


def test_dead_letter_schema_lists_exactly_the_reasons():
    assert tuple(C.load_schema("dead_letter")["properties"]["reason"]["enum"]) == DEAD_LETTER_REASONS + C.REQUEST_REFUSALS


# ------------------------------------------------------------------------ valid events
def test_inline_event_parses_to_example():
    ex = parse_preference(raw(event(context={"age": 31, "mobile": 1.0}, weight=2)))
    assert isinstance(ex, PreferenceExample)
    assert ex.event_id == "ev-1" and ex.timestamp == 1_700_000_000.25 and ex.outcome == 1
    assert ex.left == {"price": 10.0, "rating": 4.5} and ex.right == {"price": 12.0, "rating": 3.0}
    assert all(type(v) is float for v in ex.right.values())
    assert ex.context == {"age": 31.0, "mobile": 1.0} and ex.weight == 2.0
    assert ex.left_id is None and ex.right_id is None


def test_defaults_and_outcomes():
    for y in (1, -1, 0):
        ex = parse_preference(raw(event(outcome=y)))
        assert ex.outcome == y and ex.weight == 1.0 and ex.context is None
    # 1.0 is the same JSON number as 1
    assert parse_preference(raw(event(outcome=-1.0))).outcome == -1


def test_ids_resolve_from_catalog_and_inline_wins():
    cat = catalog()
    ex = parse_preference(raw(event(left={"id": "i2"}, right={"id": "i3"})), cat)
    assert ex.left == {"price": 8.0, "rating": 4.0} and ex.right == {"price": 20.0, "rating": 5.0}
    assert (ex.left_id, ex.right_id) == ("i2", "i3")
    ex = parse_preference(raw(event(left={"id": "i2", "features": {"price": 1, "rating": 2}})), cat)
    assert ex.left == {"price": 1.0, "rating": 2.0} and ex.left_id == "i2"


def test_iso_timestamps():
    ex = parse_preference(raw(event(timestamp="2024-05-01T12:00:00Z")))
    assert ex.timestamp == 1714564800.0
    assert parse_preference(raw(event(timestamp="2024-05-01T14:00:00+02:00"))).timestamp == 1714564800.0
    assert parse_preference(raw(event(timestamp="2024-05-01T12:00:00"))).timestamp == 1714564800.0  # naive = UTC


def test_str_and_memoryview_payloads():
    doc = event()
    assert parse_preference(json.dumps(doc)) == parse_preference(memoryview(raw(doc)))


# ------------------------------------------------------------- one test per reason
def _avro_wrap(value: bytes):
    """``value`` as an Avro topic's worker hands it to the contract (no schema fetched: an empty
    cache, so any framed id is unknown; the registry URL answers nothing and is never asked)."""
    from stream.broker.serializers import AvroFormat, SchemaRegistry

    return AvroFormat("prefstream.preferences", "preference", SchemaRegistry("http://127.0.0.1:9")).wrap(value)


#: dead-letter reasons that only values of a schema-registry topic have (tests/test_schema_registry.py
#: sends them through a worker)
_WIRE_REASONS = ("not_wire_format", "unknown_schema")


def _with_left_features(feats):
    return raw(event(left={"features": feats}))


BAD = {
    "malformed_json": [
        b"{",
        b'{"schema_version": 1,}',
        b"\xff\xfe\x00",  # not UTF-8
        b"",
        None,  # Kafka tombstone
        raw(event()) + b" {}",  # trailing data
    ],
    "not_an_object": [b"[]", b'"event"', b"3", b"null", b"true"],
    "unknown_schema_version": [raw(event(schema_version=2)), raw(event(schema_version=0))],
    "missing_field": [
        raw(event(event_id=_DROP)),
        raw(event(timestamp=_DROP)),
        raw(event(left=_DROP)),
        raw(event(right=_DROP)),
        raw(event(outcome=_DROP)),
        raw(event(schema_version=_DROP)),
        raw(event(right={})),  # neither id nor features
    ],
    "wrong_type": [
        raw(event(event_id=5)),
        raw(event(left="i1")),
        raw(event(context=[1, 2])),
        _with_left_features({"price": "10", "rating": 4.5}),
        _with_left_features({"price": True, "rating": 4.5}),
        raw(event(weight="2")),
        raw(event(schema_version="1")),
        raw(event(left={"id": 7})),
    ],
    "non_finite": [
        raw(event()).replace(b"10.0", b"NaN"),
        raw(event()).replace(b"4.5", b"Infinity"),
        raw(event(context={"age": 1.0})).replace(b"1.0}", b"-Infinity}"),
        raw(event(weight=1.0)).replace(b'"weight": 1.0', b'"weight": NaN'),
        raw(event()).replace(b"10.0", b"1e400"),
        raw(event(context={"age": 1.0})).replace(b"1.0}", b"-1e999}"),
        raw(event(weight=1.0)).replace(b'"weight": 1.0', b'"weight": 1e400'),
        raw(event()).replace(b"1700000000.25", b"1e400"),
    ],
    "out_of_range": [  # finite, but squares and sums of them overflow a model's arithmetic
        _with_left_features({"price": 1e308, "rating": 4.5}),
        raw(event(right={"features": {"price": -1e16, "rating": 4.5}})),
        raw(event(context={"age": 2e15})),
        _with_left_features({"price": 10**20, "rating": 4.5}),  # an integer of any size
        raw(event(weight=1e308)),
        raw(event(weight=1e7)),
        raw(event(weight=5e-324)),  # a denormal weight is numerically zero
    ],
    "unknown_item": [raw(event(left={"id": "nope"})), raw(event(right={"id": "i99"}))],
    # values of an Avro topic (stream.broker.serializers): not framed, or a schema id the registry lacks
    "not_wire_format": [_avro_wrap(raw(event())), _avro_wrap(b"\x00\x00\x01"), _avro_wrap(b"")],
    "unknown_schema": [_avro_wrap(b"\x00\x00\x00\x00\x2a" + b"\x02" * 12)],
    "oversize": [raw(event(event_id="x" * 2000))],
    "invalid_outcome": [raw(event(outcome=2)), raw(event(outcome="1")), raw(event(outcome=0.5)),
                        raw(event(outcome=True)), raw(event(outcome=None))],
    "schema_violation": [
        raw(event(extra_field=1)),
        raw(event(weight=0)),
        raw(event(weight=-1.5)),
        raw(event(event_id="")),
        raw(event(timestamp="yesterday at noon")),
        raw(event(timestamp=-5)),
        _with_left_features({"price": 10.0}),  # left and right feature names differ
        _with_left_features({}),  # empty inline features
        raw(event(left={"id": "i1", "colour": "red"})),
    ],
}


def test_every_reason_has_cases():
    assert set(BAD) == set(DEAD_LETTER_REASONS)


def test_out_of_range_names_the_field_path_and_the_bound():
    from stream.contract import MAX_ABS_VALUE, WEIGHT_RANGE

    with pytest.raises(DeadLetter) as e:  # the poisoning pair passed the contract before
        parse_preference(raw(event(left={"features": {"price": 1e308, "rating": 4.5}},
                                   right={"features": {"price": -1e308, "rating": 4.5}})))
    assert e.value.reason == "out_of_range" and e.value.detail.startswith("left.features.price = 1e+308")
    assert "1e+15" in e.value.detail
    with pytest.raises(DeadLetter) as e:
        parse_preference(raw(event(context={"age": -3e15})))
    assert e.value.reason == "out_of_range" and e.value.detail.startswith("context.age = ")
    with pytest.raises(DeadLetter) as e:
        parse_preference(raw(event(weight=1e308)))
    assert e.value.reason == "out_of_range" and e.value.detail.startswith("weight = 1e+308")
    # the bounds themselves are accepted
    ex = parse_preference(raw(event(left={"features": {"price": MAX_ABS_VALUE, "rating": -MAX_ABS_VALUE}},
                                     weight=WEIGHT_RANGE[1])))
    assert ex.left == {"price": 1e15, "rating": -1e15} and ex.weight == 1e6
    assert parse_preference(raw(event(weight=WEIGHT_RANGE[0]))).weight == 1e-6
    with pytest.raises(DeadLetter) as e:  # item-catalog records carry the same bound
        parse_item(json.dumps({"schema_version": 1, "item_id": "x", "features": {"p": 1e200}}).encode())
    assert e.value.reason == "out_of_range" and e.value.detail.startswith("features.p = ")


@pytest.mark.parametrize("reason,payload", [(r, p) for r, ps in BAD.items() for p in ps],
                         ids=[f"{r}-{i}" for r, ps in BAD.items() for i in range(len(ps))])
def test_dead_letter_reason(reason, payload):
    with pytest.raises(DeadLetter) as info:
        parse_preference(payload, catalog(), max_bytes=1500)
    assert info.value.reason == reason, info.value.detail
    assert isinstance(info.value, InvalidInputError)
    assert info.value.detail and len(info.value.detail) <= 500
    # the record for the dead-letter topic validates and keeps the payload
    rec = dead_letter_record(payload, info.value.reason, info.value.detail, "prefstream.preferences", 3, 42)
    assert not list(C.validator("dead_letter").iter_errors(rec))
    assert rec["reason"] == reason and (rec["partition"], rec["offset"]) == (3, 42)


def test_unknown_item_without_catalog():
    with pytest.raises(DeadLetter) as info:
        parse_preference(raw(event(left={"id": "i1"})))
    assert info.value.reason == "unknown_item" and "no item catalog" in info.value.detail


def test_oversize_checked_before_parsing():
    # a payload that is also malformed is reported as oversize: the size check comes first
    with pytest.raises(DeadLetter) as info:
        parse_preference(b"{" * 100, max_bytes=99)
    assert info.value.reason == "oversize" and "100 bytes" in info.value.detail
    parse_preference(raw(event()), max_bytes=len(raw(event())))  # exactly at the limit is fine


def test_missing_field_detail_names_the_field():
    with pytest.raises(DeadLetter, match="outcome"):
        parse_preference(raw(event(outcome=_DROP)))


def test_dead_letter_rejects_unknown_reason():
    with pytest.raises(ValueError):
        DeadLetter("because", "x")
    with pytest.raises(InvalidParameterError, match="reason"):
        dead_letter_record(b"{}", "because", "x", "t", 0, 0)


# ------------------------------------------------ fast path agrees with jsonschema
def _mutations(rng) -> list:
    """Valid events and many single-point corruptions of them."""
    bases = [event(), event(context={"a": 1, "b": -2.5}, weight=0.5), event(left={"id": "i1"}, right={"id": "i2", "features": {"x": 1}}),
             event(outcome=0, timestamp=0), event(timestamp="2024-05-01T12:00:00+02:00")]
    junk = [None, True, False, 0, -1, 1.5, "", "x", "123456789", "x" * 65, [], [1], {}, {"a": 1}, {"a": "b"}, 2,
            10**30, -0.0]
    out = []
    for b in bases:
        out.append(b)
        for key in list(b) + ["extra", "context", "weight"]:
            for j in junk:
                d = copy.deepcopy(b)
                d[key] = j
                out.append(d)
            d = copy.deepcopy(b)
            d.pop(key, None)
            out.append(d)
        for side in ("left", "right"):
            for j in junk:
                d = copy.deepcopy(b)
                d[side] = dict(d[side])
                d[side][rng.choice(["id", "features", "other"])] = j
                out.append(d)
    return out


def test_fast_path_is_a_strict_subset_of_the_schema():
    rng = np.random.default_rng(0)
    v = C.validator("preference")
    cases = _mutations(rng)
    assert len(cases) > 500
    fast_accepts = 0
    for d in cases:
        if C._fast_preference_ok(d):
            fast_accepts += 1
            assert v.is_valid(d), d
    assert fast_accepts >= 4
    # the ordinary valid events take the fast path
    for d in (event(), event(context={"a": 1.0}, weight=2.0), event(left={"id": "i1"}, right={"id": "i2"}),
              event(timestamp="2024-05-01T12:00:00Z")):
        assert C._fast_preference_ok(d) and v.is_valid(d)


def test_slow_path_agrees_with_schema_on_mutations():
    """Every mutated event either parses (schema-valid) or dead-letters with a reason; never crashes."""
    rng = np.random.default_rng(1)
    v = C.validator("preference")
    cat = catalog()
    cat.upsert({"schema_version": 1, "item_id": "i1", "features": {"x": 3.0}})
    cat.upsert({"schema_version": 1, "item_id": "i2", "features": {"x": 3.0}})
    for d in _mutations(rng):
        try:
            parse_preference(raw(d), cat)
        except DeadLetter as e:
            assert e.reason in DEAD_LETTER_REASONS
        else:
            assert v.is_valid(d), d


def test_parse_preference_valid_path_never_runs_jsonschema(monkeypatch):
    """The per-event budget rests on the hand-written fast path: a valid event must not reach the
    ~200 µs jsonschema validator (timings are measured in bench/, not asserted here)."""
    import stream.contract.preference as pref

    def boom(*a, **k):
        raise AssertionError("jsonschema ran on a valid event")

    monkeypatch.setattr(pref, "_schema_check", boom)
    doc = event(left={"features": {f"f{i}": i * 0.37 for i in range(10)}},
                right={"features": {f"f{i}": i * 0.11 - 1 for i in range(10)}}, context={"age": 30.0})
    ex = parse_preference(raw(doc))
    assert ex.left["f9"] == 9 * 0.37 and ex.context == {"age": 30.0}
    with pytest.raises(AssertionError, match="jsonschema ran"):  # an invalid one does
        parse_preference(raw(event(outcome=2)))


# ----------------------------------------------------------------- click sessions
def session(shown, clicked, **over):
    doc = {"schema_version": 1, "session_id": "s1", "timestamp": 1_700_000_000, "shown": [{"id": i} for i in shown],
           "clicked": list(clicked), "context": {"age": 40.0, "female": 1.0}}
    doc.update(over)
    return raw(doc)


@pytest.mark.parametrize("n,k", [(5, 1), (5, 2), (4, 3), (2, 1)])
def test_click_expansion_counts_ids_and_context(n, k):
    shown = [f"i{j}" for j in range(n)]
    clicked = shown[1:k + 1]
    pairs = parse_click_session(session(shown, clicked), catalog())
    assert len(pairs) == k * (n - k)
    expected = [f"s1:{c}>{o}" for c in clicked for o in shown if o not in clicked]
    assert [p.event_id for p in pairs] == expected
    cat = catalog()
    for p in pairs:
        assert p.outcome == 1 and p.left_id in clicked and p.right_id not in clicked
        assert p.left == cat.get(p.left_id) and p.right == cat.get(p.right_id)
        assert p.context == {"age": 40.0, "female": 1.0}
        assert p.timestamp == 1_700_000_000.0
    # every pair has its own copy of the context
    assert len({id(p.context) for p in pairs}) == len(pairs)
    # clicked items never play each other
    assert not any(p.right_id in clicked for p in pairs)


def test_click_sessions_without_contrast_give_no_pairs():
    assert parse_click_session(session(["i0", "i1", "i2"], []), catalog()) == []
    assert parse_click_session(session(["i0", "i1"], ["i0", "i1"]), catalog()) == []
    # no catalog needed when nothing is expanded
    assert parse_click_session(session(["zz"], [])) == []


def test_click_session_inline_features_and_weight():
    doc = {"schema_version": 1, "session_id": "s9", "timestamp": "2024-01-01T00:00:00Z", "weight": 0.5,
           "shown": [{"id": "a", "features": {"x": 1}}, {"id": "b", "features": {"x": 2}}, {"id": "c", "features": {"x": 3}}],
           "clicked": ["c"]}
    pairs = parse_click_session(raw(doc))
    assert [(p.left_id, p.right_id, p.left["x"], p.right["x"], p.weight) for p in pairs] == [
        ("c", "a", 3.0, 1.0, 0.5), ("c", "b", 3.0, 2.0, 0.5)]
    assert pairs[0].context is None


@pytest.mark.parametrize("payload,reason", [
    (session(["i0", "i1"], ["i7"]), "schema_violation"),          # clicked but not shown
    (session(["i0", "i0", "i1"], ["i1"]), "schema_violation"),    # duplicate shown
    (session(["i0", "i1"], ["i0", "i0"]), "schema_violation"),    # duplicate clicks
    (session(["i0", "zz"], ["i0"]), "unknown_item"),
    (session([], []), "schema_violation"),
    (session(["i0"], ["i0"], session_id=None), "wrong_type"),
    (session(["i0", "i1"], ["i0"], context={"age": 1.0}).replace(b"1.0}", b"NaN}"), "non_finite"),
    (session(["i0"], [], schema_version=3), "unknown_schema_version"),
    (b'{"schema_version": 1, "session_id": "s", "timestamp": 1, "shown": [{"id": "i0"}]}', "missing_field"),
])
def test_click_session_dead_letters(payload, reason):
    with pytest.raises(DeadLetter) as info:
        parse_click_session(payload, catalog())
    assert info.value.reason == reason, info.value.detail


# --------------------------------------------------------------------------- items
def test_item_records_and_tombstones():
    cat = ItemCatalog()
    rec = parse_item(b'{"schema_version": 1, "item_id": "sku-1", "features": {"price": 3, "rating": 4.5}, "timestamp": 5}')
    assert rec["features"] == {"price": 3.0, "rating": 4.5} and rec["timestamp"] == 5.0
    cat.upsert(rec)
    assert "sku-1" in cat and len(cat) == 1 and cat.get("sku-1") == {"price": 3.0, "rating": 4.5}
    cat.upsert(parse_item(b'{"schema_version": 1, "item_id": "sku-1", "features": {"price": 4, "rating": 1}}'))
    assert cat.get("sku-1") == {"price": 4.0, "rating": 1.0} and len(cat) == 1  # latest record wins
    cat.upsert(parse_item(b'{"schema_version": 1, "item_id": "sku-2", "features": {"price": 1, "rating": 1}}'))
    assert dict(cat.items()).keys() == {"sku-1", "sku-2"}
    # features null deletes
    cat.upsert(parse_item(b'{"schema_version": 1, "item_id": "sku-1", "features": null}'))
    assert "sku-1" not in cat and len(cat) == 1
    with pytest.raises(DeadLetter) as info:
        cat.get("sku-1")
    assert info.value.reason == "unknown_item"
    # a Kafka tombstone (null value) under the key deletes too
    tomb = parse_item(None, key=b"sku-2")
    assert tomb == {"schema_version": 1, "item_id": "sku-2", "features": None}
    cat.upsert(tomb)
    assert len(cat) == 0
    cat.upsert(tomb)  # deleting twice is fine


@pytest.mark.parametrize("payload,reason", [
    (None, "missing_field"),  # tombstone without key
    (b'{"schema_version": 1, "features": {"x": 1}}', "missing_field"),
    (b'{"schema_version": 1, "item_id": "a"}', "missing_field"),
    (b'{"schema_version": 1, "item_id": "a", "features": {"x": NaN}}', "non_finite"),
    (b'{"schema_version": 1, "item_id": "a", "features": {"x": 1e999}}', "non_finite"),
    (b'{"schema_version": 1, "item_id": "a", "features": {"x": "1"}}', "wrong_type"),
    (b'{"schema_version": 1, "item_id": "a", "features": {}}', "schema_violation"),
    (b'{"schema_version": 2, "item_id": "a", "features": null}', "unknown_schema_version"),
    (b'["a"]', "not_an_object"),
    (b'{"item_id": ', "malformed_json"),
])
def test_item_dead_letters(payload, reason):
    with pytest.raises(DeadLetter) as info:
        parse_item(payload)
    assert info.value.reason == reason, info.value.detail


# -------------------------------------------------------------------- dead letters
def test_dead_letter_payload_encodings():
    ok = dead_letter_record(b'{"a": "\xc3\xa9"}', "missing_field", "d", "t", 0, 7)
    assert ok["payload"] == '{"a": "é"}' and ok["payload_encoding"] == "utf-8" and ok["payload_size"] == 11
    binary = b"\xff\x00\x10junk"
    rec = dead_letter_record(binary, "malformed_json", "d", "t", None, None)
    assert rec["payload_encoding"] == "base64" and base64.b64decode(rec["payload"]) == binary
    assert rec["partition"] is None and rec["offset"] is None
    big = dead_letter_record(b"x" * 1000, "oversize", "d", "t", 1, 2, max_payload_bytes=100)
    assert big["payload_truncated"] and len(big["payload"]) == 100 and big["payload_size"] == 1000
    tomb = dead_letter_record(None, "malformed_json", "d", "t", 1, 2)
    assert tomb["payload"] is None and tomb["payload_encoding"] == "none"
    for r in (ok, rec, big, tomb):
        json.dumps(r, allow_nan=False)
        assert not list(C.validator("dead_letter").iter_errors(r))
        assert abs(r["dead_lettered_at"] - time.time()) < 60


# ----------------------------------------------------------------------- snapshots
def _linear_state():
    from learners.linear import LinearBT

    m = LinearBT(feature_names=["price", "rating"])
    for i in range(50):
        m.learn_one({"price": 1.0 + i % 3, "rating": 4.0}, {"price": 2.0, "rating": 3.0 + i % 2}, 1 if i % 4 else -1)
    return m


def test_snapshot_round_trip():
    from learners.linear import LinearBT

    m = _linear_state()
    data = encode_snapshot("linear-bt", 7, m.n_learned, m.state_dict(), offsets={"prefstream.preferences:0": 51})
    assert isinstance(data, bytes) and b"__snapshot__" not in data[:4]
    snap = decode_snapshot(data)
    assert {k: snap[k] for k in ("schema_version", "model_name", "version", "training_count", "offsets")} == {
        "schema_version": 1, "model_name": "linear-bt", "version": 7, "training_count": 50,
        "offsets": {"prefstream.preferences:0": 51}}
    assert abs(snap["created_at"] - time.time()) < 60
    m2 = LinearBT.from_state(snap["state"])
    np.testing.assert_array_equal(m2.weights, m.weights)
    assert m2.n_learned == m.n_learned and m2.feature_names == m.feature_names
    meta = {k: v for k, v in snap.items() if k != "state"}
    assert not list(C.validator("model_snapshot").iter_errors(meta))


def test_snapshot_limits_and_garbage():
    m = _linear_state()
    with pytest.raises(SnapshotError, match="over the 100-byte limit"):
        encode_snapshot("linear-bt", 1, 50, m.state_dict(), max_bytes=100)
    big = {"meta": {}, "arrays": {"x": np.random.default_rng(0).normal(size=300_000)}}
    with pytest.raises(SnapshotError):
        encode_snapshot("big", 1, 0, big, max_bytes=1_000_000)
    with pytest.raises(SnapshotError):
        encode_snapshot("linear-bt", -1, 0, m.state_dict())
    with pytest.raises(SnapshotError):
        encode_snapshot("linear-bt", 1, 0, {"weights": [1, 2]})
    for junk in (b"", b"not an npz", None):
        with pytest.raises(SnapshotError):
            decode_snapshot(junk)
    from learners.state import dump_state

    with pytest.raises(SnapshotError, match="__snapshot__"):
        decode_snapshot(dump_state({"meta": {"x": 1}, "arrays": {}}))
    # an npz that needs pickle (object array) is refused
    import io

    buf = io.BytesIO()
    np.savez(buf, __meta__=np.frombuffer(b"{}", dtype=np.uint8), evil=np.array([{"a": 1}], dtype=object))
    with pytest.raises(SnapshotError):
        decode_snapshot(buf.getvalue())


# --------------------------------------------------------------------- explanations
def test_explanation_records_validate():
    from explainers._result import Explanation
    from explainers.linear import explain_linear

    e = explain_linear([1.0, -2.0, 0.5], np.ones((3, 3)), np.zeros((3, 3)), feature_names=["a", "b", "c"],
                       model_version=4, instance_ids=["e1", "e2", "e3"])
    for r in e.to_records():
        explanation_record_ok(r)
        explanation_record_ok(json.loads(json.dumps(r)))
    other = Explanation(values=[[np.nan, 1.0]], base_values=[0.0], feature_names=["x", "y"], method="sharp-rank",
                        extra={"qoi": "rank", "interactions": [[0.0, 0.1], [0.1, 0.0]]})
    rec = other.to_records()[0]
    assert rec["values"][0] is None and rec["prediction"] is None and rec["data"] is None
    explanation_record_ok(rec)
    explanation_record_ok({**rec, "event_id": "x", "emitted_at": 1.0})  # output records may gain fields


def test_record_values_are_plain_json_types_with_non_finite_as_null_whatever_their_numpy_type():
    """explainers._result._jsonable takes exact-type fast paths (an interaction matrix by ndarray.tolist);
    the result must equal the element-by-element conversion: floats (NaN/inf → None), ints, bools, strings,
    nested dicts/lists/tuples, numpy scalars and arrays of every kind, Mapping subclasses."""
    from collections import OrderedDict

    from explainers._result import _jsonable

    def reference(o):
        if isinstance(o, np.ndarray):
            return [reference(v) for v in o] if o.ndim else reference(o[()])
        if isinstance(o, (bool, np.bool_)):
            return bool(o)
        if isinstance(o, (int, np.integer)):
            return int(o)
        if isinstance(o, (float, np.floating)):
            return float(o) if np.isfinite(o) else None
        if isinstance(o, dict):
            return {str(k): reference(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [reference(v) for v in o]
        return o

    rng = np.random.default_rng(5)
    m = rng.normal(size=(26, 26))
    holes = m.copy()
    holes[3, 4], holes[0, 0], holes[7, 1] = np.nan, np.inf, -np.inf
    doc = {"interactions": m, "holes": holes, "ints": np.arange(5, dtype=np.int32), "flags": np.array([True, False]),
           "f32": np.float32(0.5), "i64": np.int64(7), "b": np.bool_(True), "nan": float("nan"), "inf": np.float64(np.inf),
           "pairs": [("a", "b", np.float64(0.25)), ("c", "d", 1.5)], "od": OrderedDict(x=np.float32(2.0)), 3: None,
           "zero_d": np.array(1.25), "zero_d_nan": np.array(np.nan), "s": "text", "n": 4, "t": True}
    got = _jsonable(doc)
    assert got == reference(doc)
    assert json.loads(json.dumps(got, allow_nan=False)) == got  # strict JSON: no NaN/Infinity left
    assert all(type(v) is float for row in got["interactions"] for v in row)
    assert type(got["ints"][0]) is int and type(got["flags"][0]) is bool and got["holes"][3][4] is None


@pytest.mark.parametrize("change,reason", [
    ({"values": [1.0]}, "schema_violation"),
    ({"method": "magic"}, "schema_violation"),
    ({"model_version": "3"}, "wrong_type"),
    ({"values": "1,2"}, "wrong_type"),
    ({"request_id": None}, "wrong_type"),
    ({"schema_version": 9}, "unknown_schema_version"),
])
def test_bad_explanation_records(change, reason):
    from explainers.linear import explain_linear

    rec = explain_linear([1.0, 2.0], [1.0, 1.0], [0.0, 0.0], feature_names=["a", "b"]).to_records(["r"])[0]
    rec.update(change)
    with pytest.raises(InvalidInputError) as info:
        explanation_record_ok(rec)
    assert info.value.reason == reason


def test_explanation_record_missing_field():
    from explainers.linear import explain_linear

    rec = explain_linear([1.0, 2.0], [1.0, 1.0], [0.0, 0.0], feature_names=["a", "b"]).to_records(["r"])[0]
    del rec["feature_names"]
    with pytest.raises(DeadLetter, match="feature_names") as info:
        explanation_record_ok(rec)
    assert info.value.reason == "missing_field"
    with pytest.raises(DeadLetter) as info:
        explanation_record_ok(["not", "a", "dict"])
    assert info.value.reason == "not_an_object"


# ---------------------------------------------------------------- explain requests
def test_explain_requests():
    cat = catalog()
    r = parse_explain_request(b'{"request_id": "q1", "left": {"id": "i0"}, "right": {"features": {"price": 1, "rating": 2}}, '
                              b'"method": "linear-shapley", "params": {"k": 3}, "context": {"age": 5}}', cat)
    assert (r.request_id, r.model, r.method, r.params) == ("q1", None, "linear-shapley", {"k": 3})
    ex = r.example
    assert ex.event_id == "q1" and ex.outcome == 0 and ex.left == cat.get("i0") and ex.left_id == "i0"
    assert ex.right == {"price": 1.0, "rating": 2.0} and ex.context == {"age": 5.0}
    assert abs(ex.timestamp - time.time()) < 60
    bare = parse_explain_request(b'{"schema_version": 1, "request_id": "q2", "timestamp": "2024-05-01T12:00:00Z", '
                                 b'"left": {"id": 1.5, "x": 2}, "right": {"id": 0, "x": 1}}')
    assert bare.example.left == {"id": 1.5, "x": 2.0} and bare.example.timestamp == 1714564800.0  # a feature named "id"


@pytest.mark.parametrize("payload,reason", [
    (b'{"left": {"x": 1}, "right": {"x": 2}}', "missing_field"),
    (b'{"request_id": "q", "left": {"x": "1"}, "right": {"x": 2}}', "wrong_type"),
    (b'{"request_id": "q", "left": {"x": NaN}, "right": {"x": 2}}', "non_finite"),
    (b'{"request_id": "q", "left": {"x": 1}, "right": {"y": 2}}', "schema_violation"),
    (b'{"request_id": "q", "left": {"id": "nope"}, "right": {"x": 2}}', "unknown_item"),
    (b'{"request_id": "q", "left": {}, "right": {"x": 2}}', "missing_field"),
    (b'{"request_id": "q", "left": {"x": 1}, "right": {"x": 2}, "urgent": true}', "schema_violation"),
    (b'{"schema_version": 2, "request_id": "q", "left": {"x": 1}, "right": {"x": 2}}', "unknown_schema_version"),
    (b'[]', "not_an_object"),
])
def test_explain_request_dead_letters(payload, reason):
    with pytest.raises(DeadLetter) as info:
        parse_explain_request(payload, catalog())
    assert info.value.reason == reason, info.value.detail


# ---------------------------------------------------------------- validate_record
def test_validate_record_skips_catalog_lookup():
    validate_record("preference", event(left={"id": "unknown"}, right={"id": "also-unknown"}))
    validate_record("click", json.loads(session(["a", "b"], ["a"])))
    validate_record("item", {"schema_version": 1, "item_id": "a", "features": None})
    with pytest.raises(DeadLetter) as info:
        validate_record("preference", event(outcome=3))
    assert info.value.reason == "invalid_outcome"
    with pytest.raises(DeadLetter):
        validate_record("preference", event(left={"features": {"price": 1.0}}))
    with pytest.raises(InvalidParameterError):
        validate_record("explanation", {})


# ---------------------------------------------------------------------- the docs
def _doc_examples():
    text = (REPO / "docs" / "contract.md").read_text(encoding="utf-8")
    return re.findall(r"```json\s+// (\w+)\n(.*?)```", text, flags=re.S)


def test_docs_examples_follow_the_contract():
    examples = _doc_examples()
    kinds = {k for k, _ in examples}
    assert {"preference", "item", "click_session", "explanation", "dead_letter", "model_snapshot",
            "explain_request", "forget"} <= kinds
    cat = ItemCatalog()
    for kind, body in examples:
        if kind == "item":
            cat.upsert(parse_item(body.encode()))
    for kind, body in examples:
        doc = json.loads(body)
        if kind == "preference":
            parse_preference(body.encode(), cat)
        elif kind == "click_session":
            assert parse_click_session(body.encode(), cat)
        elif kind == "explanation":
            explanation_record_ok(doc)
        elif kind == "explain_request":
            parse_explain_request(body.encode(), cat)
        elif kind in ("dead_letter", "model_snapshot"):
            assert not list(C.validator(kind).iter_errors(doc))
        elif kind == "forget":
            from stream.contract.people import forget_user

            assert forget_user(body.encode()) == doc["user_id"]


# --------------------------------------------------------- through the real broker
def test_dead_letters_through_the_broker(kafka_options, unique_topic):
    """One bad message per reason: sent raw, consumed, dead-lettered, read back with payload and coordinates."""
    from kafka import KafkaConsumer, KafkaProducer

    src, dlq = unique_topic("prefs"), unique_topic("dlq")
    bad = {reason: cases[0] for reason, cases in BAD.items() if cases[0] is not None and reason not in _WIRE_REASONS}
    bad["malformed_json"] = b"\xff\xfe not utf-8 {"  # also checks the base64 path end to end
    good = raw(event(event_id="good-1"))
    producer = KafkaProducer(acks="all", **kafka_options)
    for reason, payload in bad.items():
        producer.send(src, key=reason.encode(), value=payload)
    producer.send(src, key=b"good", value=good)
    producer.flush()

    def drain(topic, n):
        consumer = KafkaConsumer(topic, auto_offset_reset="earliest", enable_auto_commit=False,
                                 consumer_timeout_ms=1000, **kafka_options)
        out, deadline = [], time.time() + 20
        while len(out) < n and time.time() < deadline:
            out.extend(consumer)
        consumer.close()
        return out

    learned = []
    for msg in drain(src, len(bad) + 1):
        try:
            learned.append(parse_preference(msg.value, catalog(), max_bytes=1500))
        except DeadLetter as dl:
            rec = dead_letter_record(msg.value, dl.reason, dl.detail, msg.topic, msg.partition, msg.offset)
            producer.send(dlq, key=msg.key, value=json.dumps(rec, allow_nan=False).encode())
    producer.flush()
    producer.close()
    assert [ex.event_id for ex in learned] == ["good-1"]
    records = {m.key.decode(): json.loads(m.value) for m in drain(dlq, len(bad))}
    assert set(records) == set(bad) == set(DEAD_LETTER_REASONS) - set(_WIRE_REASONS)
    for reason, rec in records.items():
        assert rec["reason"] == reason and rec["source_topic"] == src and rec["partition"] == 0
        payload = base64.b64decode(rec["payload"]) if rec["payload_encoding"] == "base64" else rec["payload"].encode()
        assert payload == bad[reason]
    assert records["malformed_json"]["payload_encoding"] == "base64"
    assert sorted(r["offset"] for r in records.values()) == list(range(len(bad)))
