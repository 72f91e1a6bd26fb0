"""The learner's per-person state without Kafka: person records, the RocksDB store, rounds, eviction, forget.

A tiny personal learner (``_Fake``) that implements the per-person state API of issue 28 stands
in for the real models where only that API matters; tests/test_people_kafka.py runs the real
models on the broker.
"""

from __future__ import annotations

import numpy as np
import pytest

from learners.exceptions import SnapshotError
from learners.state import SMALL_MAGIC, dump_small_state, dump_state, load_state
from stream.contract import DeadLetter
from stream.contract.people import (decode_person, encode_person, forget_record, forget_user, parse_person_key,
                                    person_key, person_source_offset)
from stream.workers.people import PeopleKeeper, is_personal
from stream.workers.person_store import PersonStore


class _Fake:
    """Per person: the number of events learned (``version``) and the sum of their outcomes."""

    def __init__(self):
        self.people: dict[str, list[float]] = {}
        self.touched: set[str] = set()
        self.person_loader = None

    def learn(self, user, outcome):
        if user not in self.people and self.person_loader is not None:
            st = self.person_loader(user)
            if st is not None:
                self.load_person(user, st)
        row = self.people.setdefault(user, [0.0, 0.0])
        row[0] += 1
        row[1] += outcome
        self.touched.add(user)

    def person_state(self, u):
        r = self.people.get(u)
        return None if r is None else {"meta": {"version": int(r[0])}, "arrays": {"s": np.array([r[1]])}}

    def load_person(self, u, st):
        self.people[u] = [float(st["meta"]["version"]), float(st["arrays"]["s"][0])]

    def forget_person(self, u):
        self.touched.discard(u)
        return self.people.pop(u, None) is not None

    def evict_person(self, u):
        return self.people.pop(u, None) is not None

    def drain_touched(self):
        out, self.touched = self.touched, set()
        return {u for u in out if u in self.people}

    def people_held(self):
        return len(self.people)


@pytest.fixture()
def store(tmp_path):
    s = PersonStore(str(tmp_path / "people"))
    yield s
    s.destroy()


def test_small_state_round_trips_and_is_read_by_load_state():
    state = {"meta": {"user_id": "u@1", "t": 2.5, "version": 3},
             "arrays": {"G": np.linspace(-1, 1, 36), "idx": np.arange(4, dtype=np.int32).reshape(2, 2)}}
    data = dump_small_state(state)
    assert data.startswith(SMALL_MAGIC)
    back = load_state(data)
    assert back["meta"] == state["meta"]
    np.testing.assert_array_equal(back["arrays"]["G"], state["arrays"]["G"])
    assert back["arrays"]["idx"].dtype == np.int32 and back["arrays"]["idx"].shape == (2, 2)
    assert len(data) < len(dump_state(state)) / 2  # the npz container is most of a small state
    with pytest.raises(SnapshotError):
        load_state(data[:-5])  # truncated
    with pytest.raises(SnapshotError):
        dump_small_state({"meta": {"x": float("nan")}, "arrays": {}})


def test_person_record_carries_source_and_offset():
    value = encode_person({"meta": {"version": 4}, "arrays": {"G": np.ones(3)}}, source="prefs:2", offset=17)
    state, info = decode_person(value)
    assert info == {"source": "prefs:2", "offset": 17}
    assert "_prefstream_person" not in state["meta"] and state["meta"]["version"] == 4
    assert person_source_offset(value) == ("prefs:2", 17)
    legacy = dump_state({"meta": {"version": 1}, "arrays": {}})
    assert person_source_offset(legacy) == (None, 0)
    assert parse_person_key(person_key("capacity-personal", "a@b")) == ("capacity-personal", "a@b")
    with pytest.raises(SnapshotError):
        decode_person(None)


def test_forget_records_are_recognised_and_malformed_ones_dead_lettered():
    assert forget_user(forget_record("alice")) == "alice"
    assert forget_user(b'{"schema_version":1,"event_id":"forget","left":{},"right":{},"outcome":1}') is None
    assert forget_user(None) is None
    bad = forget_user(b'{"schema_version":1,"type":"forget","user_id":""}')
    assert isinstance(bad, DeadLetter) and bad.reason == "schema_violation"
    with pytest.raises(DeadLetter):
        forget_record("x" * 513)


def test_store_puts_deletes_and_clears(store):
    store.put_many([(b"m@a", b"1"), (b"m@b", b"2"), (b"n@a", b"3")])
    assert store.get(b"m@a") == b"1" and store.keys(b"m@") == [b"m@a", b"m@b"]
    store.put_many([(b"m@a", None)])
    assert store.get(b"m@a") is None and store.keys() == [b"m@b", b"n@a"]
    store.clear()
    assert store.keys() == []


def test_round_writes_touched_people_then_evicts_idle_and_loads_them_back(store):
    now = [0.0]
    keeper = PeopleKeeper(store, ttl_seconds=10.0, memory_bytes=10**9, clock=lambda: now[0])
    m = _Fake()
    assert is_personal(m)
    ps = keeper.slot("prefs:0", "fake")
    ps.attach(m)
    for u, y in [("a", 1), ("b", -1), ("a", 1)]:
        m.learn(u, y)
    ps.learned(["a", "b", "a"])
    assert keeper.pending() == {"fake": 2}
    records, sent = ps.build(m, offset=3)
    assert sorted(k for k, _ in records) == [b"fake@a", b"fake@b"]
    assert decode_person(store.get(b"fake@a"))[0]["meta"]["version"] == 2  # in the store at once
    assert person_source_offset(store.get(b"fake@a")) == ("prefs:0", 3)
    now[0] = 5.0
    m.learn("b", 1)  # b learned after the round was built: dirty, must stay in memory
    ps.learned(["b"])
    now[0] = 20.0  # both idle past the TTL by the clock, but only a is on the changelog
    assert ps.done(m, sent, ok=True) == 1
    assert set(m.people) == {"b"}
    m.learn("a", -1)  # comes back from the store on the next event
    assert m.people["a"] == [3.0, 1.0] and ps.loads == 1


def test_failed_round_keeps_people_dirty(store):
    keeper = PeopleKeeper(store, ttl_seconds=0.001, memory_bytes=10**9, clock=lambda: 100.0)
    m = _Fake()
    ps = keeper.slot("prefs:0", "fake")
    m.learn("a", 1)
    ps.learned(["a"])
    _, sent = ps.build(m, offset=1)
    assert ps.done(m, sent, ok=False) == 0 and "a" in m.people
    records, sent = ps.build(m, offset=1)  # the next round writes a again
    assert [k for k, _ in records] == [b"fake@a"]


def test_budget_evicts_least_recently_seen_first(store):
    keeper = PeopleKeeper(store, ttl_seconds=1e9, memory_bytes=10**9, clock=lambda: 0.0)
    m = _Fake()
    ps = keeper.slot("prefs:0", "fake")
    for u in ["a", "b", "c", "d"]:
        m.learn(u, 1)
        ps.learned([u])
    _, sent = ps.build(m, offset=4)
    ps.done(m, sent, ok=True)
    assert ps.evict(m, sent["tick"], budget_people=2) == 2
    assert set(m.people) == {"c", "d"}


def test_forget_removes_memory_store_and_writes_one_tombstone(store):
    keeper = PeopleKeeper(store, ttl_seconds=1e9, memory_bytes=10**9)
    m = _Fake()
    ps = keeper.slot("prefs:0", "fake")
    m.learn("a", 1)
    ps.learned(["a"])
    _, sent = ps.build(m, offset=1)
    ps.done(m, sent, ok=True)
    m.learn("a", 1)
    ps.learned(["a"])  # dirty again, then forgotten: no state record for a in the next round
    assert ps.forget(m, "a") is True
    assert "a" not in m.people and store.get(b"fake@a") is None
    records, _ = ps.build(m, offset=3)
    assert records == [(b"fake@a", None)]
    other = keeper.slot("prefs:1", "fake")  # a forget broadcast to a partition the person never lived on
    assert other.forget(_Fake(), "a") is False
    assert other.build(_Fake(), offset=0)[0] == []


def test_restored_person_ahead_of_the_snapshot_learns_earlier_events_without_the_person(store):
    keeper = PeopleKeeper(store, ttl_seconds=1e9, memory_bytes=10**9)
    ps = keeper.slot("prefs:0", "fake")
    ps.ahead, ps.ahead_until = {"a": 10}, 10
    assert ps.user_ids([8, 9, 9], ["a", "b", None]) == [None, "b", None]
    assert ps.user_ids([10, 11], ["a", "a"]) == ["a", "a"]
    assert ps.ahead == {}  # passed: nothing to check any more


def test_loader_refuses_a_person_recorded_for_another_partition(store):
    keeper = PeopleKeeper(store, ttl_seconds=1e9, memory_bytes=10**9)
    store.put_many([(b"fake@a", encode_person({"meta": {"version": 1}, "arrays": {"s": np.ones(1)}},
                                               source="prefs:1", offset=5))])
    ps = keeper.slot("prefs:0", "fake")
    assert ps.loader("a") is None and ps.misrouted == 1
    assert keeper.slot("prefs:1", "fake").loader("a")["meta"]["version"] == 1
