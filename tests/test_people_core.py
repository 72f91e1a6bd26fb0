"""The learner core with the real personal models and a person store, without Kafka.

Per-person versions (``person_info(u)["version"]``: that person's learned-event count) are
integers compared exactly against the events sent per person; the population's floats are
compared with ``assert_allclose`` at rtol 1e-12 (the same arithmetic on the same inputs).
"""

from __future__ import annotations

import collections

import numpy as np
import orjson
import pytest

from learners.state import load_state
from stream.contract import decode_snapshot
from stream.contract.people import decode_person, forget_record
from stream.settings import Settings
from stream.workers._snapshot import split_stream_meta
from stream.workers.learner import attach_people, personal_models
from stream.workers.learner_core import LearnerCore

CRIT = ["a", "b", "c", "d"]
MODELS = ["capacity-personal", "linear-bt-personal"]
TOPIC = "prefs-test"


def _settings(**kw):
    return Settings.load(None, {"models": MODELS, "feature_names": CRIT, "topic_preferences": TOPIC,
                                "snapshot_every_events": 10**9, **kw}, environ={})


def _events(n, people=12, seed=0, start=0):
    rng = np.random.default_rng(seed)
    out = []
    for k in range(start, start + n):
        u = f"user-{int(rng.zipf(1.5)) % people}"
        xl, xr = rng.random(len(CRIT)), rng.random(len(CRIT))
        doc = {"schema_version": 1, "event_id": f"e{k}", "timestamp": 1.0 + k, "user_id": u,
               "left": {"features": dict(zip(CRIT, xl.tolist()))}, "right": {"features": dict(zip(CRIT, xr.tolist()))},
               "outcome": 1 if xl[0] + (0.5 if u.endswith("1") else -0.2) * xl[1] > xr[0] else -1}
        out.append((u, orjson.dumps(doc)))
    return out


def _core(tmp_path, name="a", **kw):
    core = LearnerCore(_settings(**kw))
    keeper = attach_people(core, path=str(tmp_path / f"people-{name}"))
    assert keeper is not None
    return core


def _feed(core, st, events, first_offset):
    recs = [(first_offset + j, v, None, None) for j, (_, v) in enumerate(events)]
    for i in range(0, len(recs), 50):
        assert core.process_batch(st, recs[i:i + 50]) == []


def test_personal_models_are_detected_before_the_feature_names_are_known():
    assert personal_models(Settings.load(None, {"models": MODELS + ["linear-bt"]}, environ={})) == MODELS


def test_round_puts_people_on_the_changelog_and_leaves_them_out_of_the_snapshot(tmp_path):
    core = _core(tmp_path)
    st = core.new_source(TOPIC, 0, {})
    events = _events(300)
    _feed(core, st, events, 0)
    sent = collections.Counter(u for u, _ in events)
    records, _acks, versions = core.build_snapshots(st)
    people = st.people_round
    for key, value in records:  # the snapshot: the population only
        state, _ = split_stream_meta(decode_snapshot(value)["state"])
        assert state["meta"]["people"] is False and "people_G" not in state["arrays"]
    by_model = collections.defaultdict(dict)
    for key, value in people:
        model, _, user = key.decode().partition("@")
        state, info = decode_person(value)
        assert info == {"source": f"{TOPIC}:0", "offset": 300}
        by_model[model][user] = state["meta"]["version"]
        assert core.people.store.get(key) == value  # in the local store too
        assert load_state(value)["meta"]["user_id"] == user  # what a follower reading load_state sees
    for model in MODELS:
        assert by_model[model] == dict(sent)
    core.snapshot_done(st, versions, True)
    assert core.people.pending() == {m: 0 for m in MODELS}


def test_evicted_people_come_back_from_the_store_with_their_state(tmp_path):
    core = _core(tmp_path, people_ttl_seconds=1e-9)
    st = core.new_source(TOPIC, 0, {})
    events = _events(200)
    _feed(core, st, events, 0)
    _, _, versions = core.build_snapshots(st)
    core.snapshot_done(st, versions, True)  # every person idle past the TTL: all leave memory
    for model in MODELS:
        assert st.slots[model].learner.people_held() == 0
    more = _events(100, seed=1, start=200)
    _feed(core, st, more, 200)
    sent = collections.Counter(u for u, _ in events + more)
    for model in MODELS:
        lr = st.slots[model].learner
        for u, n in sent.items():
            assert lr.person_info(u)["version"] == n, (model, u)


def test_same_state_with_or_without_eviction(tmp_path):
    """Evicting and reloading a person is invisible: margins equal those of a worker that held everyone."""
    a, b = _core(tmp_path, "a"), _core(tmp_path, "b", people_ttl_seconds=1e-9)
    sa, sb = a.new_source(TOPIC, 0, {}), b.new_source(TOPIC, 0, {})
    events = _events(400, seed=3)
    for k in range(0, 400, 100):
        for core, st in ((a, sa), (b, sb)):
            _feed(core, st, events[k:k + 100], k)
            _, _, versions = core.build_snapshots(st)
            core.snapshot_done(st, versions, True)
    rng = np.random.default_rng(9)
    XL, XR = rng.random((20, len(CRIT))), rng.random((20, len(CRIT)))
    users = sorted({u for u, _ in events})
    for model in MODELS:
        for u in users:
            np.testing.assert_allclose(sb.slots[model].learner.margin_many(XL, XR, user_ids=[u] * 20),
                                       sa.slots[model].learner.margin_many(XL, XR, user_ids=[u] * 20),
                                       rtol=1e-12, atol=1e-12)


def test_restore_after_people_landed_but_not_the_snapshot_applies_no_event_twice(tmp_path):
    """A kill between a round's people and its snapshot: the next owner restores the older snapshot
    and the newer people, re-reads from the snapshot, and each person's version ends exact."""
    old = _core(tmp_path, "old")
    st = old.new_source(TOPIC, 0, {})
    events = _events(400, seed=5)
    _feed(old, st, events[:200], 0)
    snap1, _, v1 = old.build_snapshots(st)  # round 1 fully delivered
    changelog = list(st.people_round)
    old.snapshot_done(st, v1, True)
    _feed(old, st, events[200:300], 200)
    _snap2, _, v2 = old.build_snapshots(st)  # round 2: people delivered, snapshot lost (kill)
    changelog += st.people_round
    new = _core(tmp_path, "new")
    st2 = new.new_source(TOPIC, 0, {k.decode(): v for k, v in snap1})
    floors = {m: st2.slots[m].next_offset for m in MODELS}
    assert floors == {m: 200 for m in MODELS}
    kept = new.people.restore(st2.source, floors, changelog)
    assert sum(kept.values()) == len(changelog)
    ahead = new.people.slots[(st2.source, MODELS[0])].ahead
    assert ahead and set(ahead.values()) == {300}
    _feed(new, st2, events[200:], 200)  # the new owner re-reads from the snapshot's offset
    sent = collections.Counter(u for u, _ in events)
    for model in MODELS:
        lr = st2.slots[model].learner
        for u, n in sent.items():
            assert lr.person_info(u)["version"] == n, (model, u)
    # the population learned every event once: the same as a worker that never crashed
    ref = _core(tmp_path, "ref")
    st3 = ref.new_source(TOPIC, 0, {})
    _feed(ref, st3, events, 0)
    rng = np.random.default_rng(2)
    XL, XR = rng.random((30, len(CRIT))), rng.random((30, len(CRIT)))
    for model in MODELS:
        np.testing.assert_allclose(st2.slots[model].learner.population_learner.margin_many(XL, XR),
                                   st3.slots[model].learner.population_learner.margin_many(XL, XR),
                                   rtol=1e-9, atol=1e-12)


def test_forget_record_drops_the_person_everywhere_and_writes_tombstones(tmp_path):
    core = _core(tmp_path)
    st = core.new_source(TOPIC, 0, {})
    events = _events(150, people=4)
    victim = events[0][0]
    _feed(core, st, events, 0)
    _, _, versions = core.build_snapshots(st)
    core.snapshot_done(st, versions, True)
    for model in MODELS:
        assert core.people.store.get(f"{model}@{victim}".encode()) is not None
    after = [(u, v) for u, v in _events(30, people=4, seed=7, start=151) if u != victim]
    recs = [(150, forget_record(victim), None, None)] + [(151 + j, v, None, None) for j, (_, v) in enumerate(after)]
    assert core.process_batch(st, recs) == []
    assert st.force  # the tombstones go out in the next round
    for model in MODELS:
        lr = st.slots[model].learner
        assert lr.person_info(victim) == {"personalized": False, "version": 0}
        assert victim not in lr.people()
        assert core.people.store.get(f"{model}@{victim}".encode()) is None
    snaps, _, versions = core.build_snapshots(st)
    people = dict(st.people_round)
    for model in MODELS:
        assert people[f"{model}@{victim}".encode()] is None
    for _key, value in snaps:  # and the snapshots hold no person at all
        state, _ = split_stream_meta(decode_snapshot(value)["state"])
        assert not any(k.startswith("people") for k in state["arrays"])
    core.snapshot_done(st, versions, True)
    assert core.metrics.people_forgotten.labels(model=MODELS[0])._value.get() == pytest.approx(1.0)


def test_a_forget_record_is_never_a_valid_event():
    """What the learner core's one parse of a batch relies on (PeopleHandling.process_batch): the
    contract refuses a forget record on either input topic, so only refused messages are looked at."""
    from stream.contract import DeadLetter
    from stream.contract.batch import parse_batch

    for kind in ("preferences", "clicks"):
        got = parse_batch(kind, [forget_record("bob"), forget_record("x" * 512, "r1")], None, 1 << 20)
        assert all(isinstance(r, DeadLetter) for r in got), (kind, got)


def test_a_forget_record_inside_a_batch_forgets_what_came_before_it_only(tmp_path):
    core = _core(tmp_path)
    st = core.new_source(TOPIC, 0, {})
    events = _events(120, people=3)
    victim = events[0][0]
    before = sum(1 for u, _ in events[:60] if u == victim)
    after = sum(1 for u, _ in events[60:] if u == victim)
    assert before and after
    recs = ([(j, v, None, None) for j, (_, v) in enumerate(events[:60])] + [(60, forget_record(victim), None, None)]
            + [(61 + j, v, None, None) for j, (_, v) in enumerate(events[60:])])
    assert core.process_batch(st, recs) == []
    assert st.next_offset == 121 and all(s.next_offset == 121 for s in st.slots.values())
    for model in MODELS:
        lr = st.slots[model].learner
        assert lr.person_info(victim)["version"] == after          # the events before the record are forgotten
        assert st.slots[model].count == 120                         # and every event learned by the population
    assert core.metrics.events_consumed.labels(topic=TOPIC)._value.get() == pytest.approx(120.0)  # not the record


def test_a_bad_forget_record_is_dead_lettered(tmp_path):
    core = _core(tmp_path)
    st = core.new_source(TOPIC, 0, {})
    dls = core.process_batch(st, [(0, b'{"schema_version":1,"type":"forget"}', None, None)])
    assert [d["reason"] for d in dls] == ["missing_field"]
    assert st.next_offset == 1


def test_personalized_share_of_predictions_is_counted(tmp_path):
    core = _core(tmp_path)
    st = core.new_source(TOPIC, 0, {})
    _feed(core, st, _events(200, people=3), 0)
    m = core.metrics.predictions
    yes = m.labels(model="linear-bt-personal", personalized="true")._value.get()
    no = m.labels(model="linear-bt-personal", personalized="false")._value.get()
    assert yes + no == pytest.approx(200.0)
    assert no >= 3 and yes >= 150  # each person's first batch is the population's, then personalised
