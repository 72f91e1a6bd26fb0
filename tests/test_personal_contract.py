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
    from stream.event_files import _iter_chunks, iter_records

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


def test_train_gives_its_respondents_as_people():
    from stream.adapters import load_dataset

    ds = load_dataset("train")
    assert len(ds) == 2929 and len(set(ds.users)) == 235
    ev = next(ds.to_events())
    assert ev["user_id"] == ds.users[0] == "1"
    validate_record("preference", ev)


def _needs(sub):
    from tests.conftest import needs_data

    return needs_data(sub)


@_needs("swissmetro")
def test_swissmetro_pairs_the_chosen_mode_over_each_other_available_one():
    from tests.conftest import data_root

    from stream.adapters import load_dataset

    ds = load_dataset("swissmetro", data_root())
    assert len(ds) == 19755 and len(set(ds.users)) == 1191        # SOURCE.txt: ~19,800 pairs, 1,192 respondents
    winner = np.where(ds.outcome > 0, ds.left, ds.right)
    chosen_mode = np.array([ds.item_ids[i].split("-")[1] for i in winner])
    assert set(chosen_mode) == {"TRAIN", "SM", "CAR"}
    # each pair compares two modes of the same choice row
    assert all(ds.item_ids[a].split("-")[0] == ds.item_ids[b].split("-")[0] for a, b in zip(ds.left[:500], ds.right[:500]))


@_needs("ta_feng")
def test_ta_feng_pairs_bought_over_not_bought_in_the_same_visit():
    from tests.conftest import data_root

    from stream.adapters.baskets import load_ta_feng

    ds = load_ta_feng(data_root(), max_customers=25, test_negatives=10)
    assert len(set(ds.users)) == 25 and ds.holdout.any() and (~ds.holdout).any()
    winner = np.where(ds.outcome > 0, ds.left, ds.right)
    loser = np.where(ds.outcome > 0, ds.right, ds.left)
    # the held-out visit of a customer: 10 negatives, each paired with one bought product; same day as its winner
    for u in sorted(set(ds.users))[:5]:
        rows = [i for i, (v, h) in enumerate(zip(ds.users, ds.holdout)) if v == u and h]
        assert len(rows) == 10
        assert len({ds.item_ids[loser[i]] for i in rows} & {ds.item_ids[winner[i]] for i in rows}) == 0
    assert list(ds.timestamps) == sorted(ds.timestamps)                     # customers interleaved by time


def test_prefstream_evaluate_prints_the_table_and_refuses_a_file_without_people(tmp_path):
    from typer.testing import CliRunner

    from stream.adapters import load_dataset
    from stream.cli import app

    ds = load_dataset("train").subset(np.arange(600))
    p = tmp_path / "t.jsonl"
    p.write_text("".join(json.dumps(ev) + "\n" for ev in ds.to_events()))
    res = CliRunner().invoke(app, ["evaluate", str(p), "-m", "capacity,capacity-personal", "--k", "5"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    people = len(set(ds.users))
    assert lines[0].startswith("pairs=600 held_out=") and f"people={people}" in lines[0]
    rows = {ln.split()[0]: ln.split()[1:] for ln in lines[2:]}
    assert set(rows) == {"capacity", "capacity-personal", "popularity"}
    assert all(int(r[-1]) == people for r in rows.values()) and all(0.0 <= float(r[0]) <= 1.0 for r in rows.values())
    q = tmp_path / "anon.jsonl"
    q.write_text("".join(json.dumps({k: v for k, v in ev.items() if k != "user_id"}) + "\n" for ev in ds.to_events()))
    res = CliRunner().invoke(app, ["evaluate", str(q)])
    assert res.exit_code == 1 and "no user_id" in res.output and "Traceback" not in res.output


def test_an_explain_request_may_name_the_person():
    from stream.contract import parse_explain_request

    r = parse_explain_request(b'{"request_id": "q1", "model": "capacity-personal", "user_id": "ann", '
                              b'"left": {"x": 1}, "right": {"x": 2}}')
    assert r.example.user_id == "ann"
    assert parse_explain_request(b'{"request_id": "q2", "left": {"x": 1}, "right": {"x": 2}}').example.user_id is None
    with pytest.raises(DeadLetter):
        parse_explain_request(b'{"request_id": "q3", "user_id": "", "left": {"x": 1}, "right": {"x": 2}}')
