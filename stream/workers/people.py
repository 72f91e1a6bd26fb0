"""Per-person state of the learner worker at stream scale: memory, local store, changelog records — no Kafka.

A personal model (``capacity-personal``, ``linear-bt-personal``: a population model plus one
small state per person, ``docs/personal.md``) keeps its people out of the per-partition model
snapshot (the 8 MiB record limit, restore time). Instead, for each source (input partition)
and personal model, a :class:`PersonSlot` here:

* **writes** the people touched since the last snapshot round as records of the compacted
  changelog ``prefstream.people`` (:mod:`stream.contract.people`: key ``"<model>@<user_id>"``,
  the state plus ``{source, offset}``), and a tombstone for each person forgotten, in the same
  round and *before* the round's snapshot and offset commit (:meth:`PeopleKeeper.build_records`;
  the Kafka side is :class:`stream.workers.learner.LearnerLoop`); each record also goes into the
  worker's local :class:`~stream.workers.person_store.PersonStore`;
* **bounds memory**: after a round is delivered, people idle for ``people_ttl_seconds`` or
  beyond the ``people_memory_bytes`` budget (least recently seen first) leave memory
  (``evict_person``); only people whose latest state is on the changelog leave, so an eviction
  never loses an update;
* **loads** an evicted person back from the store on their next event (the model's
  ``person_loader``);
* **replays exactly once per person** after a restore: a person record can stand further in
  the stream than the partition's snapshot (the round's people were delivered, its snapshot was
  not: a kill between the two). The events of that person below the record's ``offset`` are
  already in the person's state, so they are learned by the population alone
  (``user_id=None``), not by the person again (:meth:`PersonSlot.user_ids`). Later events are
  learned with the person. So a person's version (their learned-event count) is exact across
  kills and rebalances; only the population's update for those few events is the
  non-personalised one.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from typing import Any, Callable, Iterable

from stream.contract.people import decode_person, encode_person, forget_user, person_key

__all__ = ["PEOPLE_API", "PER_PERSON_OVERHEAD", "PeopleKeeper", "PersonSlot", "forget_user", "is_personal"]

log = logging.getLogger(__name__)

#: The per-person state API a personal model has (the contract of issue 28).
PEOPLE_API = ("person_state", "load_person", "forget_person", "evict_person", "drain_touched", "people_held")

#: Bytes of Python objects a person held in memory costs beyond their encoded record (dict
#: entries, array headers, the keeper's LRU entry); calibrated in bench/personal_scale.py.
PER_PERSON_OVERHEAD = 600


def is_personal(learner: Any) -> bool:
    """Whether ``learner`` keeps per-person state (has the whole :data:`PEOPLE_API`)."""
    return all(callable(getattr(learner, name, None)) for name in PEOPLE_API)


class PersonSlot:
    """The people of one personal model on one source (see the module docstring).

    Parameters
    ----------
    model : str
    source : str
        ``"<topic>:<partition>"``.
    keeper : PeopleKeeper
    """

    def __init__(self, model: str, source: str, keeper: "PeopleKeeper") -> None:
        self.model = model
        self.source = source
        self.keeper = keeper
        self.prefix = f"{model}@"
        #: people in memory, least recently seen first: user -> (round tick, clock) of their last event
        self.seen: OrderedDict[str, tuple[int, float]] = OrderedDict()
        #: people learned since the last round (their state is not on the changelog yet)
        self.dirty: set[str] = set()
        #: people forgotten since the last round (tombstones to write)
        self.forgotten: set[str] = set()
        #: people whose changelog record stands further than the restored snapshot: user -> offset
        self.ahead: dict[str, int] = {}
        self.ahead_until = 0
        self.tick = 0  # rounds built so far
        self.record_bytes = 0.0  # running mean of an encoded record's size
        self.loads = 0
        self.misrouted = 0

    # ------------------------------------------------------------------ loading
    def loader(self, user_id: str) -> dict | None:
        """The model's ``person_loader``: the person's state from the local store, or None."""
        raw = self.keeper.store.get(person_key(self.model, user_id))
        if raw is None:
            return None
        state, info = decode_person(raw)
        if info.get("source", self.source) != self.source:
            # the person's events arrive on another partition too: they are not keyed by person
            self.misrouted += 1
            return None
        self.loads += 1
        return state

    def attach(self, learner: Any) -> None:
        """Point ``learner.person_loader`` at this slot's store (again after a refit or a guard restore)."""
        if getattr(learner, "person_loader", None) != self.loader:
            learner.person_loader = self.loader

    # ------------------------------------------------------------------ learning
    def user_ids(self, offsets: list[int], users: list[str | None]) -> list[str | None]:
        """The user ids to learn ``users``' events (at ``offsets``) with: None for an event a
        restored person record already holds (below its ``offset``)."""
        if not self.ahead:
            return users
        ahead = self.ahead
        out = [None if (u is not None and off < ahead.get(u, -1)) else u for off, u in zip(offsets, users)]
        if offsets and max(offsets) + 1 >= self.ahead_until:
            self.ahead.clear()
        return out

    def learned(self, users: Iterable[str | None]) -> None:
        """Record the people whose events were just learned (dirty until the next round)."""
        now, tick, seen = self.keeper.clock(), self.tick, self.seen
        for u in users:
            if u is None:
                continue
            seen[u] = (tick, now)
            seen.move_to_end(u)
            self.dirty.add(u)

    def forget(self, learner: Any, user_id: str) -> bool:
        """Drop every trace of the person here: memory, store, and a tombstone in the next round.

        True when the person was known on this source (in memory or in the store as this
        source's); a tombstone is written then only, so that a forget broadcast to every
        partition does not write tombstones into partitions the person never lived on.
        """
        key = person_key(self.model, user_id)
        known = bool(learner.forget_person(user_id))
        raw = self.keeper.store.get(key)
        if raw is not None:
            _, info = decode_person(raw)
            if info.get("source", self.source) == self.source:
                known = True
                self.keeper.store.delete(key)
        self.seen.pop(user_id, None)
        self.dirty.discard(user_id)
        self.ahead.pop(user_id, None)
        if known:
            self.forgotten.add(user_id)
        return known

    # ------------------------------------------------------------------ rounds
    def build(self, learner: Any, offset: int) -> tuple[list[tuple[bytes, bytes | None]], dict]:
        """This round's changelog records (states of the people touched, tombstones) at ``offset``.

        Returns the records and what :meth:`done` needs. The records go into the store now.
        """
        touched = set(learner.drain_touched()) | self.dirty
        touched -= self.forgotten
        records: list[tuple[bytes, bytes | None]] = []
        size = 0
        for u in touched:
            state = learner.person_state(u)
            if state is None:  # e.g. evicted by the model itself after a write-through: nothing new
                continue
            value = encode_person(state, source=self.source, offset=offset)
            size += len(value)
            records.append((person_key(self.model, u), value))
        if records:
            n = len(records)
            self.record_bytes = size / n if not self.record_bytes else 0.9 * self.record_bytes + 0.1 * size / n
        gone = list(self.forgotten)
        records.extend((person_key(self.model, u), None) for u in gone)
        self.keeper.store.put_many(records)
        self.tick += 1
        sent = {"touched": touched, "forgotten": gone, "tick": self.tick}
        self.dirty = set()
        self.forgotten = set()
        return records, sent

    def done(self, learner: Any, sent: dict, ok: bool) -> int:
        """After the round: on failure keep its people dirty (the next round writes them again);
        on success evict the idle and over-budget people whose state is on the changelog. The
        number evicted."""
        if not ok:
            self.dirty |= {u for u in sent["touched"] if u in self.seen}
            self.forgotten |= set(sent["forgotten"])
            return 0
        return self.evict(learner, sent["tick"])

    def evict(self, learner: Any, tick: int, budget_people: int | None = None) -> int:
        """Evict, least recently seen first, people last seen before round ``tick`` was built
        who are idle past the TTL or beyond ``budget_people`` held."""
        keeper = self.keeper
        ttl, now = keeper.ttl_seconds, keeper.clock()
        if budget_people is None:
            budget_people = keeper.budget_people(self)
        seen, n = self.seen, 0
        while seen:
            u, (t_round, t_seen) = next(iter(seen.items()))
            if t_round >= tick or u in self.dirty:
                break  # learned since that round was built: not on the changelog yet
            if len(seen) <= budget_people and now - t_seen <= ttl:
                break
            learner.evict_person(u)
            del seen[u]
            n += 1
        if n:
            keeper.evicted(self.model, n)
        return n


class PeopleKeeper:
    """Every :class:`PersonSlot` of one learner worker, their store and their memory budget.

    Parameters
    ----------
    store : PersonStore
        The worker's local store (``stream.workers.person_store``).
    ttl_seconds : float
        People idle longer leave memory after the next round.
    memory_bytes : int
        Budget of the people held in memory, over all personal models and sources.
    metrics : Metrics, optional
    clock : callable, default time.monotonic
    """

    def __init__(self, store, ttl_seconds: float, memory_bytes: int, metrics=None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.ttl_seconds = float(ttl_seconds)
        self.memory_bytes = int(memory_bytes)
        self.metrics = metrics
        self.clock = clock
        self.slots: dict[tuple[str, str], PersonSlot] = {}  # (source, model) -> slot

    def slot(self, source: str, model: str) -> PersonSlot:
        ps = self.slots.get((source, model))
        if ps is None:
            ps = self.slots[(source, model)] = PersonSlot(model, source, self)
        return ps

    def has_source(self, source: str) -> bool:
        return any(k[0] == source for k in self.slots)

    def drop_source(self, source: str) -> None:
        for key in [k for k in self.slots if k[0] == source]:
            del self.slots[key]

    def clear(self) -> None:
        """Every slot and the whole store (the assignment changed: restored from the changelog)."""
        self.slots.clear()
        self.store.clear()

    def budget_people(self, slot: PersonSlot) -> int:
        """How many people ``slot`` may hold: its even share of :attr:`memory_bytes` over the
        estimated bytes of one person held (their record's size + :data:`PER_PERSON_OVERHEAD`)."""
        per = (slot.record_bytes or 512.0) + PER_PERSON_OVERHEAD
        return max(1, int(self.memory_bytes / max(1, len(self.slots)) / per))

    def evicted(self, model: str, n: int) -> None:
        if self.metrics is not None:
            self.metrics.people_evicted.labels(model=model).inc(n)

    def pending(self) -> dict[str, int]:
        """People per model whose latest state is not on the changelog yet (changelog lag)."""
        out: dict[str, int] = {}
        for (_, model), ps in self.slots.items():
            out[model] = out.get(model, 0) + len(ps.dirty) + len(ps.forgotten)
        return out
