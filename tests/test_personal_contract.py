"""The person on the event contract: ``user_id`` on preference events, through the batch path, the replay and its key."""

from __future__ import annotations

import json

import numpy as np
import pytest

from stream.contract import DeadLetter, parse_preference, validate_record
from stream.contract.batch import learner_arrays, parse_batch


def _event(i: int, **extra) -> dict:
    return {"schema_version": 1, "event_id": f"e{i}", "timestamp": 1_700_000_000 + i,
            "left": {"features": {"a": 0.25 * (i % 4), "b": 1.0}}, "right": {"features": {"a": 0.5, "b": 0.0}},
            "outcome": 1 if i % 2 else -1, **extra}


def test_user_id_is_optional_and_v1_events_stay_valid():
    old = parse_preference(json.dumps(_event(1)).encode())
    assert old.user_id is None
    new = parse_preference(json.dumps(_event(1, user_id="ann")).encode())
    assert new.user_id == "ann" and new.outcome == 1
    validate_record("preference", _event(2, user_id="x" * 512))


@pytest.mark.parametrize("bad", ["", "x" * 513, 7, None])
def test_a_bad_user_id_is_a_dead_letter(bad):
    with pytest.raises(DeadLetter) as err:
        parse_preference(json.dumps(_event(1, user_id=bad)).encode())
    assert err.value.reason in ("schema_violation", "wrong_type")
    assert "user_id" in err.value.detail


def test_the_batch_fast_path_carries_the_person_to_the_learner_arrays():
    raws = [json.dumps(_event(i, **({"user_id": f"u{i % 3}"} if i != 4 else {}))).encode() for i in range(8)]
    raws.append(json.dumps(_event(9, user_id="")).encode())        # refused: one dead letter, the others kept
    parsed = parse_batch("preferences", raws, None, 1 << 20)
    assert isinstance(parsed[8], DeadLetter)
    exs = [p[0] for p in parsed[:8]]
    assert type(exs[0]).__name__ == "RowExample"
    assert [ex.user_id for ex in exs] == ["u0", "u1", "u2", "u0", None, "u2", "u0", "u1"]
    assert exs[1].example() == parse_preference(raws[1])            # the validator's example, person included
    arr = learner_arrays(exs, ["a", "b"], None, "m")
    assert arr.user_ids == ["u0", "u1", "u2", "u0", None, "u2", "u0", "u1"]
    np.testing.assert_allclose(arr.X_left[:, 0], [0.0, 0.25, 0.5, 0.75, 0.0, 0.25, 0.5, 0.75], rtol=0, atol=0)
    # no person in the batch: no user_ids at all
    assert learner_arrays([p[0] for p in parse_batch("preferences", [json.dumps(_event(1)).encode()], None,
                                                     1 << 20)], ["a", "b"], None, "m").user_ids is None


def test_click_session_pairs_carry_the_sessions_user():
    from stream.contract import parse_click_session

    s = {"schema_version": 1, "session_id": "s1", "user_id": "ann", "timestamp": 1_700_000_000,
         "shown": [{"id": "i1", "features": {"a": 1.0}}, {"id": "i2", "features": {"a": 0.0}}], "clicked": ["i1"]}
    assert [p.user_id for p in parse_click_session(json.dumps(s).encode())] == ["ann"]


def test_replay_reads_a_user_id_column_and_keys_by_person(tmp_path):
    from stream.replay import _iter_chunks, iter_records

    p = tmp_path / "p.csv"
    p.write_text("event_id,user_id,outcome,left.a,right.a\ne1,ann,1,0.1,0.2\ne2,,-1,0.3,0.4\ne3, bob ,1,0.1,0.2\n"
                 "e4,ann,1,0.5,0.2\n")
    recs = [r for _, r in iter_records(p)]
    assert [r.get("user_id") for r in recs] == ["ann", None, "bob", "ann"]
    by_event = [k for c in _iter_chunks(p, "preference") for k in c.keys]
    by_user = [k for c in _iter_chunks(p, "preference", "user") for k in c.keys]
    assert by_event == [b"e1", b"e2", b"e3", b"e4"]
    assert by_user == [b"ann", b"e2", b"bob", b"ann"]
    # the fast encoder's bytes are the row path's record (the space-padded id went through the row path)
    values = [json.loads(v) for c in _iter_chunks(p, "preference", "user") for v in c.values]
    assert [{k: v for k, v in r.items() if k != "timestamp"} for r in values] == \
        [{k: v for k, v in r.items() if k != "timestamp"} for r in recs]
