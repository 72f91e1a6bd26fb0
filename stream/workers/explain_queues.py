"""Per-method explanation queues with fair load shedding, batch caps and offset tracking — no Kafka.

The explainer worker (:mod:`stream.workers.explainer`) samples a fraction ``explain_sample_rate``
of the events; each sampled event becomes one :class:`WorkItem` in the queue of every
``(model, method)`` that can explain it. This module decides what is explained next:

* **Fair across methods.** :meth:`MethodQueues.next` picks, among the non-empty queues, the one
  that has used the least explainer time recently (an exponentially decayed sum of call
  durations, half-life :data:`BUSY_HALF_LIFE_S`): every method gets an equal share of the
  explainer's time, so a slow method cannot starve a fast one (max-min fairness). A method that
  needs more than its share falls behind on its *own* queue only.
* **Shedding.** Each queue holds at most ``explain_max_queue`` items; a new item that finds it
  full pushes out the *oldest* (reason ``backlog``: the freshest events are worth explaining),
  and items older than ``explain_max_lag_s`` are shed as ``stale`` before each call.
* **Batch caps.** A method is called with up to ``fn.max_batch`` items (default
  ``explain_max_batch``) and its batch size adapts so that one call takes about
  ``min(fn.budget_s, SLICE_S)`` seconds (``fn.budget_s`` defaults to ``explain_budget_s``; :data:`SLICE_S`
  = 0.25 s bounds how long a ready event of another method waits behind one call): after each call the
  per-item cost is measured and the next batch is ``clamp(slice / cost, 1, max_batch)``
  (:class:`BatchCap`). Session-only
  methods take one session per call (each session has its own parameters).
* **Offsets.** :class:`OffsetTracker` counts, per partition, the work still pending for each
  fetched offset; the offset to commit is the smallest one with work pending (or one past the
  last fetched), so a committed offset never passes an event whose explanations are not yet
  delivered or shed.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BUSY_HALF_LIFE_S", "SLICE_S", "BatchCap", "FractionWindow", "MethodQueues", "OffsetTracker", "WorkItem"]

#: Half-life (seconds) of the decayed explainer time used to share time fairly between methods.
BUSY_HALF_LIFE_S = 10.0


@dataclass
class WorkItem:
    """One sampled event (or click session) waiting for one ``(model, method)``.

    Attributes
    ----------
    examples : list
        ``[PreferenceExample]`` for an event; the session's pairs for a click session.
    event_id : str
        Key of the explanation record (event or session id).
    arrived : float
        ``time.perf_counter()`` when the consumer handed the event over.
    tp : TopicPartition or None
    offset : int
    generation : int
        Consumer generation the event was fetched under (items of an older one are dropped).
    params : dict or None
        ``{"session": ...}`` for a click session.
    """

    examples: list
    event_id: str
    arrived: float
    tp: Any = None
    offset: int = -1
    generation: int = 0
    params: dict | None = None


#: Seconds of explainer time one call is sized to (at most its method's ``budget_s``). The drain runs one
#: call at a time and every backlogged method takes its turn, so a turn of all methods lasts up to the sum of
#: their calls: sized to ``budget_s`` (2 s), 7 methods on Pokémon made a turn of ~8–14 s and a ready event of
#: a microsecond method waited behind it (issue 29: lag p99 10–20 s at 10,000 events/s); at 0.25 s a turn of
#: 7 is under 2 s, and a batch still holds the tens of events that batching pays on (bench/explainer_rate.py).
SLICE_S = 0.25


class BatchCap:
    """Adaptive batch size of one method: about ``min(budget_s, slice_s)`` seconds per call, at most ``max_batch``.

    ``budget_s`` stays the call's own bound (``ctx.budgets["budget_s"]``: a call past it stops early); the
    batch is sized to the shorter ``slice_s`` so that no method holds the one explainer thread for long
    while the others' events wait (:data:`SLICE_S`).

    Parameters
    ----------
    max_batch : int
    budget_s : float
    slice_s : float, default SLICE_S
    """

    def __init__(self, max_batch: int, budget_s: float, slice_s: float = SLICE_S) -> None:
        self.max_batch = max(1, int(max_batch))
        self.budget_s = float(budget_s)
        self.slice_s = min(float(slice_s), self.budget_s)
        self.size = self.max_batch
        self.cost: float | None = None  # seconds per item of the last call

    def observe(self, n: int, seconds: float) -> None:
        """Record a call of ``n`` items that took ``seconds``; sets the next :attr:`size`."""
        if n <= 0:
            return
        self.cost = max(float(seconds), 1e-9) / n
        self.size = int(min(self.max_batch, max(1, math.floor(self.slice_s / self.cost))))


class MethodQueues:
    """Bounded FIFO queues keyed by ``(model, method)`` with fair scheduling (module docstring).

    Parameters
    ----------
    max_queue : int
        Items per queue before the oldest is shed.
    max_lag_s : float
        Items older than this are shed as stale.
    clock : callable, default time.perf_counter
        Same clock as :attr:`WorkItem.arrived`.
    """

    def __init__(self, max_queue: int, max_lag_s: float, clock=time.perf_counter) -> None:
        self.max_queue = max(1, int(max_queue))
        self.max_lag_s = float(max_lag_s)
        self.clock = clock
        self.queues: dict[tuple[str, str], deque] = {}
        self._busy: dict[tuple[str, str], tuple[float, float]] = {}  # key -> (decayed seconds, at)

    def __len__(self) -> int:
        return sum(len(q) for q in self.queues.values())

    def put(self, key: tuple[str, str], item: WorkItem) -> WorkItem | None:
        """Queue ``item``; returns the item shed to make room (the oldest), or None."""
        q = self.queues.setdefault(key, deque())
        shed = q.popleft() if len(q) >= self.max_queue else None
        q.append(item)
        return shed

    def expire(self, now: float | None = None) -> list[tuple[tuple[str, str], WorkItem]]:
        """Remove and return the items queued longer than ``max_lag_s``."""
        now = self.clock() if now is None else now
        out = []
        for key, q in self.queues.items():
            while q and now - q[0].arrived > self.max_lag_s:
                out.append((key, q.popleft()))
        return out

    def drop(self, keep) -> list[tuple[tuple[str, str], WorkItem]]:
        """Remove the items for which ``keep(item)`` is false (e.g. of revoked partitions)."""
        out = []
        for key, q in self.queues.items():
            kept = deque()
            for it in q:
                (kept.append(it) if keep(it) else out.append((key, it)))
            self.queues[key] = kept
        return out

    def busy(self, key, now: float | None = None) -> float:
        """Decayed explainer seconds used by ``key``."""
        now = self.clock() if now is None else now
        value, at = self._busy.get(key, (0.0, now))
        return value * 0.5 ** ((now - at) / BUSY_HALF_LIFE_S)

    def charge(self, key, seconds: float, now: float | None = None) -> None:
        """Add ``seconds`` of explainer time to ``key``."""
        now = self.clock() if now is None else now
        self._busy[key] = (self.busy(key, now) + float(seconds), now)

    def next(self, now: float | None = None) -> tuple[str, str] | None:
        """The non-empty queue with the least decayed explainer time (ties: by name), or None."""
        now = self.clock() if now is None else now
        keys = [k for k, q in self.queues.items() if q]
        if not keys:
            return None
        return min(keys, key=lambda k: (self.busy(k, now), k))

    def take(self, key, n: int) -> list[WorkItem]:
        """Up to ``n`` items of ``key``, oldest first."""
        q = self.queues.get(key)
        out = []
        while q and len(out) < n:
            out.append(q.popleft())
        return out


class FractionWindow:
    """Eligible and explained counts of one method over the last ``seconds`` (1-second buckets)."""

    def __init__(self, seconds: int = 60) -> None:
        self.seconds = int(seconds)
        self.buckets: deque = deque()  # [second, eligible, explained]

    def _bucket(self, now: float) -> list:
        sec = int(now)
        if not self.buckets or self.buckets[-1][0] != sec:
            self.buckets.append([sec, 0, 0])
        while self.buckets and self.buckets[0][0] <= sec - self.seconds:
            self.buckets.popleft()
        return self.buckets[-1]

    def eligible(self, n: int, now: float) -> None:
        self._bucket(now)[1] += n

    def explained(self, n: int, now: float) -> None:
        self._bucket(now)[2] += n

    def fraction(self, now: float) -> float | None:
        """explained / eligible over the window, None without eligible events."""
        self._bucket(now)
        e = sum(b[1] for b in self.buckets)
        return None if e == 0 else sum(b[2] for b in self.buckets) / e


@dataclass
class _Partition:
    pending: dict = field(default_factory=dict)  # offset -> outstanding work
    next_fetch: int | None = None  # one past the last fetched offset
    committed: int | None = None


class OffsetTracker:
    """Per partition, the work outstanding per fetched offset, and the offset safe to commit."""

    def __init__(self) -> None:
        self.parts: dict = {}

    def fetched(self, tp, offset: int, work: int) -> None:
        """Offset ``offset`` of ``tp`` was read and left ``work`` items to finish (0: done)."""
        p = self.parts.setdefault(tp, _Partition())
        if work > 0:
            p.pending[offset] = p.pending.get(offset, 0) + work
        p.next_fetch = max(p.next_fetch or 0, offset + 1)

    def finished(self, tp, offset: int, n: int = 1) -> None:
        """``n`` work items of ``offset`` are delivered or shed."""
        p = self.parts.get(tp)
        if p is None or offset not in p.pending:
            return
        p.pending[offset] -= n
        if p.pending[offset] <= 0:
            del p.pending[offset]

    def safe_offsets(self) -> dict:
        """``{tp: offset}``: per partition, the smallest offset with work pending (or one past the last fetched)."""
        return {tp: (min(p.pending) if p.pending else p.next_fetch) for tp, p in self.parts.items()
                if p.next_fetch is not None}

    def to_commit(self) -> dict:
        """``{tp: offset}`` for partitions whose safe offset moved since the last :meth:`committed`."""
        return {tp: safe for tp, safe in self.safe_offsets().items()
                if self.parts[tp].committed is None or safe > self.parts[tp].committed}

    def committed(self, tp, offset: int) -> None:
        p = self.parts.get(tp)
        if p is not None:
            p.committed = max(offset, p.committed or 0)

    def forget(self, keep) -> None:
        """Drop the partitions for which ``keep(tp)`` is false."""
        for tp in [tp for tp in self.parts if not keep(tp)]:
            del self.parts[tp]
