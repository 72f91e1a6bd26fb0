"""The compiled schema check (fastjsonschema) is a fast first pass before jsonschema
(stream/contract/schemas.py): it must never accept a document jsonschema refuses. Checked on a valid
document of every contract schema and on every single mutation of it — each value anywhere replaced by
each of a pool of JSON values (wrong types, bounds, booleans where numbers go, empty and over-long
strings), each key removed, an unknown key added — and on random documents from hypothesis."""

from __future__ import annotations

import copy

import fastjsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream.contract.schemas import _SCHEMA_NAMES, compiled, validator

SEEDS = {
    "preference": {"schema_version": 1, "event_id": "e1", "timestamp": 1.5, "left": {"id": "a"},
                   "right": {"features": {"x": 1.0, "y": 0}}, "outcome": 1, "context": {"c": 2.0}, "weight": 0.5,
                   "user_id": "u1"},
    "item": {"schema_version": 1, "item_id": "a", "features": {"x": 1.0}, "timestamp": "2024-05-01T12:00:00Z"},
    "click_session": {"schema_version": 1, "session_id": "s1", "timestamp": 3, "user_id": "u",
                      "shown": [{"id": "a", "features": {"x": 1.0}, "position": 1}, {"id": "b", "position": 2}],
                      "clicked": ["a"], "context": {"c": 1.0}, "weight": 2.0},
    "model_snapshot": {"schema_version": 1, "model_name": "capacity", "version": 3, "training_count": 10,
                       "offsets": {"prefstream.preferences:0": 5}, "created_at": 1.0},
    "explanation": {"schema_version": 1, "request_id": "e1", "model_name": "m", "model_version": 2,
                    "method": "sharp-rank", "feature_names": ["a", "b"], "values": [0.5, None], "base_value": 0.1,
                    "prediction": None, "data": [1.0, 2.0], "extra": {"k": [1]}, "compute_time_s": 0.01,
                    "user_id": "u"},
    "dead_letter": {"schema_version": 1, "reason": "wrong_type", "detail": "d", "source_topic": "t", "partition": 0,
                    "offset": None, "line": 3, "payload": "{}", "payload_encoding": "utf-8", "payload_size": 2,
                    "payload_truncated": False, "dead_lettered_at": 1.0},
    "explain_request": {"schema_version": 1, "request_id": "r", "timestamp": 1, "model": "m", "method": "pref-shap",
                        "left": {"id": "a"}, "right": {"x": 1.0}, "context": {"c": 1.0}, "params": {"k": 1},
                        "user_id": "u"},
    "forget": {"schema_version": 1, "type": "forget", "user_id": "u", "requested_at": 1.0, "request_id": "r"},
}

POOL = [None, True, False, 0, -1, 1, 2, 1.5, 1.0, -0.5, 1e300, "", "x", "2024-05-01", "x" * 600, [], [1], ["a"],
        [{"id": "a"}], {}, {"a": 1}, {"": 1}, {"a": "x"}, {"id": "a"}, {"features": {}}]


def _paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, prefix + (i,))


def _set(doc, path, value):
    out = copy.deepcopy(doc)
    if not path:
        return value
    cur = out
    for p in path[:-1]:
        cur = cur[p]
    cur[path[-1]] = value
    return out


def _drop(doc, path):
    out = copy.deepcopy(doc)
    cur = out
    for p in path[:-1]:
        cur = cur[p]
    del cur[path[-1]]
    return out


def _mutations(doc):
    for path in _paths(doc):
        for v in POOL:
            yield _set(doc, path, v)
        if path:
            yield _drop(doc, path)
        target = doc
        for p in path:
            target = target[p]
        if isinstance(target, dict):
            yield _set(doc, path, {**target, "zz_unknown": 1})


def _fast_ok(name, doc) -> bool:
    try:
        compiled(name)(doc)
        return True
    except fastjsonschema.JsonSchemaException:
        return False


def test_every_schema_has_a_seed():
    assert set(SEEDS) >= set(_SCHEMA_NAMES) - {"drift"}


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_compiled_check_never_accepts_what_jsonschema_refuses(name):
    seed = SEEDS[name]
    assert _fast_ok(name, seed) and validator(name).is_valid(seed)
    n = refused = 0
    for doc in _mutations(seed):
        n += 1
        ok = validator(name).is_valid(doc)
        refused += not ok
        if _fast_ok(name, doc):
            assert ok, f"{name}: fastjsonschema accepts what jsonschema refuses: {doc!r}"
    assert n > 100 and refused > 20  # the mutations reach the schema's checks


json_values = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) |
                           st.text(max_size=3), lambda c: st.lists(c, max_size=3) |
                           st.dictionaries(st.sampled_from(["id", "features", "x", "", "a"]), c, max_size=3),
                           max_leaves=8)


@settings(max_examples=400, deadline=None)
@given(name=st.sampled_from(sorted(SEEDS)), data=st.data())
def test_random_replacements_agree_one_way(name, data):
    doc = SEEDS[name]
    for _ in range(data.draw(st.integers(1, 3))):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            break
        doc = _set(doc, data.draw(st.sampled_from(paths)), data.draw(json_values))
    if _fast_ok(name, doc):
        assert validator(name).is_valid(doc), doc
