"""Per-method explanation queues: fair time sharing, shedding, batch caps, safe commit offsets (no broker)."""

from __future__ import annotations

import pytest

from stream.workers.explain_queues import (BUSY_HALF_LIFE_S, SLICE_S, BatchCap, FractionWindow, MethodQueues, OffsetTracker,
                                          WorkItem)


def item(i: int, arrived: float = 0.0, tp="p0") -> WorkItem:
    return WorkItem(examples=[], event_id=f"e{i}", arrived=arrived, tp=tp, offset=i)


def test_a_full_queue_sheds_its_oldest_item_and_only_its_own():
    q = MethodQueues(max_queue=3, max_lag_s=60, clock=lambda: 0.0)
    shed = [q.put(("m", "slow"), item(i)) for i in range(5)]
    assert [s.event_id if s else None for s in shed] == [None, None, None, "e0", "e1"]
    assert q.put(("m", "fast"), item(9)) is None  # another method's queue is untouched
    assert [it.event_id for it in q.take(("m", "slow"), 10)] == ["e2", "e3", "e4"]


def test_items_queued_past_the_lag_limit_are_expired_oldest_first():
    q = MethodQueues(max_queue=10, max_lag_s=5.0, clock=lambda: 0.0)
    for i, t in enumerate([0.0, 1.0, 4.0, 9.0]):
        q.put(("m", "a"), item(i, arrived=t))
    assert [it.event_id for _, it in q.expire(now=7.0)] == ["e0", "e1"]  # 7 s and 6 s old
    assert len(q) == 2


def test_the_method_with_the_least_recent_explainer_time_goes_next():
    now = [0.0]
    q = MethodQueues(max_queue=100, max_lag_s=60, clock=lambda: now[0])
    for i in range(10):
        q.put(("m", "slow"), item(i))
        q.put(("m", "fast"), item(100 + i))
    assert q.next() == ("m", "fast")  # ties by name
    q.charge(("m", "fast"), 0.01)
    assert q.next() == ("m", "slow")
    q.charge(("m", "slow"), 2.0)  # one slow call: the fast method gets turns until it has used as much
    order = []
    for _ in range(6):
        k = q.next()
        order.append(k[1])
        q.take(k, 1)
        q.charge(k, 0.5 if k[1] == "fast" else 2.0)
    assert order == ["fast", "fast", "fast", "fast", "slow", "fast"]
    # the decay halves the used time every BUSY_HALF_LIFE_S
    q2 = MethodQueues(max_queue=1, max_lag_s=1, clock=lambda: 0.0)
    q2.charge(("m", "a"), 8.0, now=0.0)
    assert q2.busy(("m", "a"), now=2 * BUSY_HALF_LIFE_S) == pytest.approx(2.0)


def test_fair_sharing_gives_each_method_the_same_time_whatever_its_cost():
    """Simulated: a 10x slower method gets 1/10 of the fast one's calls, equal time (max-min fairness)."""
    now = [0.0]
    q = MethodQueues(max_queue=10**6, max_lag_s=10**6, clock=lambda: now[0])
    cost = {"fast": 0.01, "slow": 0.1}
    for i in range(5000):
        q.put(("m", "fast"), item(i))
        q.put(("m", "slow"), item(i))
    used = {"fast": 0.0, "slow": 0.0}
    while now[0] < 100.0:
        k = q.next()
        q.take(k, 1)
        now[0] += cost[k[1]]
        used[k[1]] += cost[k[1]]
        q.charge(k, cost[k[1]])
    assert used["fast"] == pytest.approx(50.0, abs=0.2) and used["slow"] == pytest.approx(50.0, abs=0.2)


def test_batch_cap_sizes_calls_to_the_budget_within_one_and_max_batch():
    cap = BatchCap(max_batch=64, budget_s=1.0, slice_s=1.0)
    assert cap.size == 64
    cap.observe(64, 8.0)  # 0.125 s per item
    assert cap.size == 8
    cap.observe(8, 0.08)  # 0.01 s per item: 100 fit, capped at 64
    assert cap.size == 64
    cap.observe(1, 5.0)
    assert cap.size == 1


def test_a_ready_event_waits_behind_one_slice_of_a_backlogged_method_not_its_whole_budget():
    """Issue 29: calls were sized to the method's budget_s (2 s) and the drain runs one call at a time, so a
    ready event of a microsecond method waited behind a turn of every backlogged method's 2-s call (lag p99
    10–20 s at 10,000 events/s). A backlogged method's next call is sized to the slice; its budget stays the
    call's own bound."""
    q = MethodQueues(max_queue=1000, max_lag_s=60, clock=lambda: 0.0)
    slow, fast = ("m", "sharp-rank"), ("m", "capacity-shapley")
    for i in range(500):
        q.put(slow, WorkItem([None], f"s{i}", 0.0))
    cap = BatchCap(max_batch=500, budget_s=2.0)  # the default slice
    cap.observe(10, 0.1)                          # 10 ms per event
    assert cap.budget_s == pytest.approx(2.0)      # the call's own bound is unchanged
    taken = q.take(slow, cap.size)
    q.put(fast, WorkItem([None], "f0", 0.0))      # a ready event of another method arrives meanwhile
    behind = len(taken) * cap.cost                # explainer seconds the ready event waits for
    assert behind <= SLICE_S + 1e-9 and len(taken) == int(SLICE_S / 0.01)
    assert BatchCap(max_batch=64, budget_s=0.1).slice_s == pytest.approx(0.1)  # never longer than the budget


def test_commit_offset_never_passes_an_event_with_work_pending():
    t = OffsetTracker()
    t.fetched("p", 10, 0)
    t.fetched("p", 11, 2)  # sampled: two methods
    t.fetched("p", 12, 0)
    t.fetched("p", 13, 1)
    assert t.to_commit() == {"p": 11}
    t.committed("p", 11)
    assert t.to_commit() == {}
    t.finished("p", 13)
    t.finished("p", 11)
    assert t.to_commit() == {}  # offset 11 still has one method pending
    t.finished("p", 11)
    assert t.to_commit() == {"p": 14}


def test_fraction_window_is_explained_over_eligible_in_the_last_minute():
    w = FractionWindow(60)
    w.eligible(100, now=0.0)
    w.explained(1, now=0.5)
    w.eligible(100, now=30.0)
    w.explained(3, now=30.0)
    assert w.fraction(now=31.0) == pytest.approx(4 / 200)
    assert w.fraction(now=70.0) == pytest.approx(3 / 100)  # the first second left the window
    assert FractionWindow(60).fraction(now=1.0) is None
