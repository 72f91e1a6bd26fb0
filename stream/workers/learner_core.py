"""The learner worker's state machine (:class:`LearnerCore`): validate, learn, snapshot — no Kafka.

Processing guarantee — idempotent learning keyed by offsets (no event lost, none learned twice
after a SIGKILL; ``docs/workers.md`` has the argument in full):

1. **State per source.** Each partition of each input topic (a *source*, ``"<topic>:<p>"``) has
   its own learner per model. Its snapshot on the compacted model topic, key
   ``"<model>@<topic>:<p>"``, records ``next_offset``: every message of the source below it is
   in the state, none at or above it.
2. **Acknowledge after publishing.** A message is acknowledged (its offset committed) only after
   a snapshot whose ``next_offset`` exceeds it has been delivered (``acks=all``). So the
   committed offset never passes the latest snapshot.
3. **Restore and skip.** When partitions are assigned (start, restart, rebalance) every source
   state is dropped and rebuilt from its latest snapshot; the consumer then resumes from the
   committed offset (≤ ``next_offset``) and the core skips every message below ``next_offset``.

A crash anywhere therefore replays exactly the messages after the last snapshot into the state
of that snapshot. A bounded per-model window of the last ``dedupe_window`` event-id hashes
(saved in the snapshot too) additionally drops re-sent copies of one event (producer retries,
a replay run twice) that arrive at *different* offsets.

Messages arrive in micro-batches (:meth:`LearnerCore.process_batch`): one decode-and-validate
pass (:mod:`stream.contract.batch`), then per model one ``predict_proba_many`` (progressive validation on
the pre-batch state) and one ``learn_many``. The Kafka loop around the core is
:mod:`stream.workers.learner`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Sequence

from learners.exceptions import InvalidInputError, PrefstreamError, SnapshotError
from stream import registry
from stream.clicks.log import ClickPairing, SessionExpander
from stream.workers.guard import FiniteGuard
from stream.contract import (
    DeadLetter,
    ItemCatalog,
    dead_letter_record,
    decode_snapshot,
    encode_snapshot,
    parse_item,
)
from stream.contract.batch import learner_arrays
from stream.metrics import Metrics, build_metrics
from stream.monitoring.monitor import Monitor
from stream.workers._snapshot import (
    attach_stream_meta,
    digest_add,
    event_hash,
    snapshot_key,
    split_stream_meta,
)
from stream.workers.gauges import push_learner_gauges
from stream.workers.people import is_personal
from stream.workers.people_core import PeopleHandling
from stream.workers.people_guard import PersonalGuard
from stream.workers.progressive import ProgressiveScoring, progressive_chunks
from stream.workers.refits import RefitScheduling
from stream.workers.sources import ModelSlot, SourceState
from stream.workers.throttled_log import ThrottledCount

__all__ = ["DEFAULT_DEDUPE_WINDOW", "LearnerCore", "ModelSlot", "SourceState", "observe_n"]

log = logging.getLogger(__name__)

#: Event-id hashes remembered per model and source (64-bit each, ≈ 32 KiB in a snapshot).
DEFAULT_DEDUPE_WINDOW = 4096

#: At most one "duplicate events skipped" INFO line per this many seconds.
DUPLICATE_LOG_SECONDS = 10.0


def observe_n(hist, value: float, n: int) -> None:
    """``n`` observations of ``value`` in a prometheus-client histogram child, in O(1).

    Uses the child's bucket counters directly (prometheus-client keeps ``_upper_bounds``,
    ``_buckets`` and ``_sum``); falls back to ``n`` calls of ``observe`` if they are missing.
    """
    bounds = getattr(hist, "_upper_bounds", None)
    buckets = getattr(hist, "_buckets", None)
    total = getattr(hist, "_sum", None)
    if bounds is None or buckets is None or total is None:
        for _ in range(n):
            hist.observe(value)
        return
    total.inc(value * n)
    for i, bound in enumerate(bounds):
        if value <= bound:
            buckets[i].inc(n)
            break


class LearnerCore(RefitScheduling, PeopleHandling, ProgressiveScoring):
    """The learner worker's state machine, independent of Faust and of the broker.

    Parameters
    ----------
    settings : Settings
        Uses ``models``, ``model_params``, topic names, ``snapshot_every_events``,
        ``snapshot_every_seconds``, ``max_message_bytes``, ``max_snapshot_bytes``.
    metrics : Metrics, optional
        Fresh registry if omitted.
    dedupe_window : int, default 4096
        Event-id hashes remembered per model and source; 0 disables event-id dedupe.
    loop, executor : optional
        Where ``refit()`` runs; without a loop refits run inline (tests).
    refit_pool : concurrent.futures.Executor, optional
        A process pool: learners with the split refit protocol (``refit_begin`` /
        ``refit_function`` / ``refit_finish``, e.g. the GPM) fit there, so that a refit never
        holds the GIL that learning needs (measured in ``bench/results/learner_rates.md``).
    curve : bool, default True
        Take learning-curve points (:attr:`curve`). The worker takes them only when
        ``progress_log`` is set (nobody reads them otherwise; each costs a read of the rolling
        ROC AUC, ~3 % of linear-bt's per-event time in ``bench/catchup.py``).

    Raises
    ------
    InvalidParameterError
        If a configured model is not registered.
    """

    def __init__(self, settings, metrics: Metrics | None = None, dedupe_window: int = DEFAULT_DEDUPE_WINDOW,
                 loop: asyncio.AbstractEventLoop | None = None, executor=None, clock=time.monotonic,
                 refit_pool=None, curve: bool = True) -> None:
        self.settings = settings
        self.metrics = metrics or build_metrics()
        self.dedupe_window = int(dedupe_window)
        self.loop = loop
        self.executor = executor
        self.refit_pool = refit_pool
        self.clock = clock
        self.models = list(settings.models)
        self.specs = {m: registry.get_model(m) for m in self.models}
        self.catalog = ItemCatalog()
        self.click_expander = SessionExpander(ClickPairing.from_settings(settings))
        self.sources: dict[str, SourceState] = {}
        self.kinds = {settings.topic_preferences: "preferences", settings.topic_clicks: "clicks"}
        self.start_progressive(curve)
        # labelled children resolved once (``labels()`` costs ~10 µs per call)
        self._m_learned = {m: self.metrics.events_learned.labels(model=m) for m in self.models}
        self._m_relearned = {m: self.metrics.events_relearned.labels(model=m) for m in self.models}
        #: per "<model>@<source>", the offset below which this process has learned every message
        #: once already: learning below it again (after a restore) counts as re-learned
        self._learned_below: dict[str, int] = {}
        #: per model, examples learned / dead-lettered / dropped as duplicates (prefstream run's summary)
        self.tally = {m: {"learned": 0, "dead_letters": 0, "duplicates": 0} for m in self.models}
        #: one INFO line per batch with duplicates, at most one per DUPLICATE_LOG_SECONDS
        self._duplicates_said = ThrottledCount(log, logging.INFO, "%d duplicate events skipped (already learned)",
                                               DUPLICATE_LOG_SECONDS)
        self._m_latency = {m: self.metrics.learn_latency.labels(model=m) for m in self.models}
        for m in self.models:  # counters alerts read with increase(): a series from 0, not from the first event
            self.metrics.refit_failures.labels(model=m)
            self.metrics.drift.labels(model=m, kind="model")
        self._m_consumed: dict[str, Any] = {}
        #: model drift: ADWIN on the progressive log loss (stream.monitoring.monitor)
        self.monitor = Monitor.from_settings(settings, self.metrics)
        #: per item-topic partition, the end offset when the worker started: bad item records
        #: below it are counted but not dead-lettered again (an earlier run did that)
        self.items_live_from: dict[int, int] = {}
        #: the worker's people (stream.workers.people.PeopleKeeper): personal models keep their people
        #: in its store and the changelog, not in the snapshot. None (file mode, tests): in the snapshot
        self.people = None
        self._m_pred = {m: (self.metrics.predictions.labels(model=m, personalized="true"),
                            self.metrics.predictions.labels(model=m, personalized="false")) for m in self.models}
        self._m_forgotten = {m: self.metrics.people_forgotten.labels(model=m) for m in self.models}

    # ------------------------------------------------------------------ sources
    def new_source(self, topic: str, partition: int, snapshots: dict, generation: int = 0) -> SourceState:
        """Create (or replace) the state of a source from its latest snapshots.

        Parameters
        ----------
        topic, partition
        snapshots : dict of str to bytes
            Latest model-topic value per key (only keys ``"<model>@<topic>:<partition>"`` are used).
        generation : int
            Consumer-group generation the state belongs to.

        Raises
        ------
        SnapshotError
            If a snapshot exists but cannot be decoded or loaded: starting from scratch instead
            would silently break the processing guarantee.
        """
        kind = self.kinds.get(topic)
        if kind is None:
            raise InvalidInputError(f"Topic {topic!r} is not an input topic of the learner ({sorted(self.kinds)}).")
        st = SourceState(topic=topic, partition=int(partition), kind=kind, generation=generation,
                         last_snapshot=self.clock())
        src = st.source
        fresh = []
        for model in self.models:
            raw = snapshots.get(snapshot_key(model, src))
            if raw is None:
                fresh.append(model)
                continue
            try:
                snap = decode_snapshot(raw)
                clean, info = split_stream_meta(snap["state"])
                learner = self.specs[model].loader(clean)
            except PrefstreamError as exc:
                raise SnapshotError(f"Cannot restore {snapshot_key(model, src)} from the model topic: {exc}. "
                                    "Delete the key (tombstone) to start this model afresh.") from exc
            slot = ModelSlot(learner=learner, version=int(snap["version"]), count=int(snap["training_count"]),
                             next_offset=int(snap["offsets"].get(src, info.get("next_offset", 0))),
                             digest=int(info.get("digest", 0)), restored=True)
            for h in info.get("window", [])[-self.dedupe_window:] if self.dedupe_window > 0 else []:
                slot.remember(h, self.dedupe_window)
            st.slots[model] = slot
        start = max((s.next_offset for s in st.slots.values()), default=0)
        for model in fresh:
            st.slots[model] = ModelSlot(learner=self.specs[model].factory(self.settings, self.settings.params_for(model)),
                                        next_offset=start)
        st.next_offset = start
        st.published_next = min(s.next_offset for s in st.slots.values())
        if self.people is not None:
            self.people.drop_source(src)
            for model, slot in st.slots.items():
                if st.kind == "preferences" and is_personal(slot.learner):
                    self.people.slot(src, model).attach(slot.learner)
        self.sources[src] = st
        self._warm_refits(st)
        self._set_versions()
        log.info("source %s restored: %s", src, {m: (s.version, s.count, s.next_offset) for m, s in st.slots.items()})
        return st

    def drop_source(self, source: str) -> None:
        """Forget a source (revoked partition); unacknowledged messages stay unacknowledged."""
        self.sources.pop(source, None)
        if self.people is not None:
            self.people.drop_source(source)

    # ------------------------------------------------------------------ processing
    def floor(self, st: SourceState) -> int:
        """The lowest offset of ``st`` still to learn: below it every model learned (or a delivered
        snapshot covers) the message, which is then only acknowledged."""
        return max(st.published_next, min(s.next_offset for s in st.slots.values()))

    def process(self, st: SourceState, offset: int, value: bytes | None, ack_token: Any = None) -> list[dict]:
        """Validate and learn one input message of ``st`` (a batch of one, :meth:`process_batch`)."""
        return self.process_batch(st, [(offset, value, ack_token, None)])

    def _process(self, st: SourceState, records: Sequence[tuple], parsed: Sequence) -> list[dict]:
        """Validate and learn a micro-batch of input messages of ``st`` (no forget record among them).

        Parameters
        ----------
        st : SourceState
        records : sequence of ``(offset, value, ack_token, arrived)``
            ``ack_token`` (or None) is acknowledged once a delivered snapshot covers the offset;
            ``arrived`` is the ``time.perf_counter()`` at which the worker received the message
            (None: the start of this call), for the arrival → learned latency histogram.
        parsed : sequence
            :func:`stream.contract.batch.parse_batch` of ``records``, decoded once by the caller
            (:meth:`process_batch`: its entries below :meth:`floor` are None).

        Returns
        -------
        list of dict
            Dead-letter records to publish, one per bad message (none for skipped messages).

        Notes
        -----
        Per model, the examples of the batch that the model has not learned yet (offset at or
        above its ``next_offset``; event id not in its dedupe window nor earlier in the batch)
        are turned into arrays (:func:`stream.contract.batch.learner_arrays`), scored with
        ``predict_proba_many`` on the state *before* the batch (progressive validation: every
        event is still predicted before it is learned, by a model at most one batch older than
        in the one-by-one path), then learned with one ``learn_many`` call, and the refit
        trigger is checked once. Offsets, counts, digest and dedupe window advance exactly as
        in the one-by-one path, so a snapshot still covers exactly the messages below its
        ``next_offset`` (docs/workers.md).
        """
        t_start = time.perf_counter()
        consumed = self._m_consumed.get(st.topic)
        if consumed is None:
            consumed = self._m_consumed[st.topic] = self.metrics.events_consumed.labels(topic=st.topic)
        consumed.inc(len(records))
        for off, _v, tok, _a in records:
            if tok is not None:
                st.pending.append((int(off), tok))
        floor = self.floor(st)
        keep = [k for k, r in enumerate(records) if int(r[0]) >= floor]
        todo = [(int(records[k][0]), records[k][1], t_start if records[k][3] is None else records[k][3]) for k in keep]
        if not todo:
            return []
        fresh_from = st.next_offset
        first = todo[0][0]
        if first > fresh_from and st.since_snapshot == 0 and any(s.restored for s in st.slots.values()):
            log.warning("source %s: offset gap %d -> %d (retention or transactional markers?)", st.source,
                        fresh_from, first)
        parsed = [parsed[k] for k in keep]
        # flatten: examples with the index of their message
        examples, owner = [], []
        out: list[dict] = []
        for j, res in enumerate(parsed):
            if isinstance(res, DeadLetter):
                if todo[j][0] >= fresh_from:
                    out.append(self._dead_letter(todo[j][1], res.reason, res.detail, st, todo[j][0]))
                continue
            examples.extend(res)
            owner.extend([j] * len(res))
        hashes = [event_hash(ex.event_id) for ex in examples]
        for j, res in enumerate(parsed):  # per-model accounting of the messages refused at parse time
            if isinstance(res, DeadLetter):
                for name, slot in st.slots.items():
                    if todo[j][0] >= slot.next_offset:
                        self.tally[name]["dead_letters"] += 1
        errors: dict[int, tuple[str, str]] = {}   # message index -> (reason, detail)
        arrays: dict = {}  # models with the same features and rows share one conversion to arrays
        dup_before = {name: self.tally[name]["duplicates"] for name in st.slots}
        for name, slot in st.slots.items():
            self._learn_batch(st, name, slot, todo, examples, owner, hashes, errors, arrays)
        # an event every model skipped is one duplicate event, not one per model
        dup = max((self.tally[name]["duplicates"] - n for name, n in dup_before.items()), default=0)
        if dup:
            self.metrics.duplicate_events.labels(topic=st.topic).inc(dup)
            self._duplicates_said.add(dup)
        for j, (reason, detail) in sorted(errors.items()):
            if todo[j][0] >= fresh_from:
                out.append(self._dead_letter(todo[j][1], reason, detail, st, todo[j][0]))
        last = todo[-1][0]
        for name, slot in st.slots.items():
            slot.next_offset = max(slot.next_offset, last + 1)
            key = f"{name}@{st.source}"
            self._learned_below[key] = max(self._learned_below.get(key, 0), last + 1)
        n_fresh = sum(1 for off, _, _ in todo if off >= fresh_from)
        if n_fresh:
            st.next_offset = last + 1
            st.since_snapshot += n_fresh
        return out

    def _learn_batch(self, st, name, slot, todo, examples, owner, hashes, errors, arrays=None) -> None:
        """One model's share of :meth:`process_batch`."""
        learner = slot.learner
        live_from = slot.next_offset
        pick, seen, dup = [], set(), 0
        wset = slot.window_set
        for i, ex in enumerate(examples):
            if todo[owner[i]][0] < live_from:
                continue
            h = hashes[i]
            if h in wset or h in seen:
                dup += 1
                continue
            pick.append(i)
            seen.add(h)
        if dup:
            self.tally[name]["duplicates"] += dup
        if not pick:
            return
        ps = self.person_slot(st, name, learner)
        personal = is_personal(learner) and (ps is not None or self.people is None)
        if slot.guard is None or (personal and not isinstance(slot.guard, PersonalGuard)):
            slot.guard = (PersonalGuard if personal else FiniteGuard)(learner, self.specs[name].loader)
        # each example's person (None: the population alone; also for an event a restored person
        # record already holds: stream.workers.people.PersonSlot.user_ids)
        users: dict[int, str | None] = {}
        if personal:
            uid = [getattr(examples[i], "user_id", None) for i in pick]
            if ps is not None:
                uid = ps.user_ids([todo[owner[i]][0] for i in pick], uid)
            users = dict(zip(pick, uid))
        learned: list[int] = []
        if not learner.feature_names:  # a model that takes its feature names from the first example
            i = pick.pop(0)
            if self._learn_rows(name, slot, [i], examples, owner, errors, users):
                learned.append(i)
            learner = slot.learner
            if not pick:
                self._after_learning(st, name, slot, learned, todo, owner, hashes)
                return
        exs = [examples[i] for i in pick]
        ctx_names = getattr(learner, "context_names", None) or None
        key = (tuple(pick), tuple(learner.feature_names), tuple(ctx_names or ()))
        arr = arrays.get(key) if arrays is not None else None
        if arr is None or arr.rejected:  # read-only below (the contract suite checks that learners
            # do not write their inputs); rejections name their model, so those are not shared
            arr = learner_arrays(exs, learner.feature_names, ctx_names, name)
            if arrays is not None:
                arrays[key] = arr
        for k, why in arr.rejected.items():
            self.tally[name]["dead_letters"] += 1
            errors.setdefault(owner[pick[k]], ("schema_violation", f"model {name!r} rejected event {exs[k].event_id!r}: {why}"))
        rows = [pick[k] for k in arr.rows]
        # progressive validation in chunks that grow with what the model has learned
        # (stream.workers.progressive.progressive_chunks): each event is scored by a model at most
        # max(4, n/8) events older than the one it would meet one by one, not a whole batch older
        for a, b in progressive_chunks(slot.count + len(learned), len(rows)):
            part = arr if (a, b) == (0, len(rows)) else arr.part(a, b)
            sub = rows[a:b]
            at = self.tally[name]["learned"] + len(learned) + (b - a)
            # learn the chunk, check the state once (stream.workers.guard); only when learn_many refuses the
            # chunk or the state turns non-finite, restore the pre-chunk state and learn row by row,
            # so exactly the bad messages are dead-lettered and nothing non-finite is ever kept
            if personal:  # with each event's person (stream.workers.people_guard)
                sub_users = [users.get(i) for i in sub]
                self.score_chunk(name, learner, part, at, sub_users)
                res = slot.guard.learn_batch(
                    learner, sub,
                    lambda lr, _rows, part=part, su=sub_users: lr.learn_many(
                        part.X_left, part.X_right, part.y, part.context, part.weight, user_ids=su),
                    lambda lr, i: lr.learn_one(examples[i].left, examples[i].right, examples[i].outcome,
                                               examples[i].context, examples[i].weight, user_id=users.get(i)),
                    user_of=users.get)
            else:
                self.score_chunk(name, learner, part, at)
                res = slot.guard.learn_batch(
                    learner, sub,
                    lambda lr, _rows, part=part: lr.learn_many(part.X_left, part.X_right, part.y, part.context,
                                                               part.weight),
                    lambda lr, i: lr.learn_one(examples[i].left, examples[i].right, examples[i].outcome,
                                               examples[i].context, examples[i].weight))
            learner = slot.learner = res.learner
            bad = {k for k, _ in res.rejected}
            for k, defect in res.rejected:
                i = sub[k]
                self.tally[name]["dead_letters"] += 1
                reason = res.reasons.get(k, "schema_violation")
                if reason == "non_finite":
                    defect = (f"the update would make the model state non-finite ({defect}); "
                              "the event was refused and the state kept")
                errors.setdefault(owner[i], (reason, f"model {name!r} rejected event {examples[i].event_id!r}: {defect}"))
            if res.relearned:
                self.metrics.events_relearned.labels(model=name).inc(res.relearned)
            learned.extend(i for k, i in enumerate(sub) if k not in bad)
        if ps is not None:
            ps.learned(users.get(i) for i in learned)
            ps.attach(slot.learner)  # a restored learner (guard) needs the loader again
        self._after_learning(st, name, slot, learned, todo, owner, hashes)

    def _learn_rows(self, name, slot, idx, examples, owner, errors, users=None) -> bool:
        """Learn rows one by one through the slot's finite guard (the first example of a model
        that takes its feature names from the data)."""
        ok = True
        for i in idx:
            ex = examples[i]
            self.score_one(name, slot.learner, ex)
            try:
                if users:
                    slot.learner = slot.guard.learn_one(slot.learner, ex.left, ex.right, ex.outcome, ex.context,
                                                        ex.weight, user_id=users.get(i))
                else:
                    slot.learner = slot.guard.learn_one(slot.learner, ex.left, ex.right, ex.outcome, ex.context,
                                                        ex.weight)
            except Exception as exc:  # noqa: BLE001 - one event must not crash the worker
                slot.learner = getattr(exc, "learner", slot.learner)  # the guard's restored state
                if not isinstance(exc, (InvalidInputError, ValueError, KeyError, TypeError)):
                    log.exception("model %s failed on event %s", name, ex.event_id)
                self.tally[name]["dead_letters"] += 1
                errors.setdefault(owner[i], (getattr(exc, "reason", "schema_violation"),
                                             f"model {name!r} rejected event {ex.event_id!r}: {type(exc).__name__}: {exc}"))
                ok = False
        return ok

    def _after_learning(self, st, name, slot, learned, todo, owner, hashes) -> None:
        """Counts, digest, dedupe window, metrics and the refit trigger, once per batch."""
        if not learned:
            return
        now = time.perf_counter()
        hs = [hashes[i] for i in learned]
        slot.digest = digest_add(slot.digest, sum(hs))  # (a + b) mod 2⁶⁴ is associative: one sum
        slot.remember_many(hs, self.dedupe_window)
        slot.count += len(learned)
        self.tally[name]["learned"] += len(learned)
        # an event this process learned before (a restore rolled the state back) counts apart
        below = self._learned_below.get(f"{name}@{st.source}", 0)
        again = sum(1 for i in learned if todo[owner[i]][0] < below)
        self._m_learned[name].inc(len(learned) - again)
        if again:
            self._m_relearned[name].inc(again)
        # arrival → learned latency of each learned event (events of one fetch share an arrival)
        by_arrival: dict[float, int] = {}
        for i in learned:
            a = todo[owner[i]][2]
            by_arrival[a] = by_arrival.get(a, 0) + 1
        hist = self._m_latency[name]
        for a, n in by_arrival.items():
            observe_n(hist, now - a, n)
        self._maybe_refit(st, name, slot)

    def _dead_letter(self, value, reason: str, detail: str, st: SourceState, offset: int) -> dict:
        self.metrics.dead_letters.labels(reason=reason).inc()
        return dead_letter_record(value, reason, detail, st.topic, st.partition, offset)

    # ------------------------------------------------------------------ snapshots
    def snapshot_due(self, st: SourceState, now: float | None = None) -> bool:
        """True when ``st`` has unsnapshotted work and the event count (at most once per
        ``snapshot_min_seconds``), the timer or a refit says so."""
        if st.publishing:
            return False
        now = self.clock() if now is None else now
        if st.force:
            return True
        if st.since_snapshot <= 0:
            return False
        age = now - st.last_snapshot
        return ((st.since_snapshot >= self.settings.snapshot_every_events and age >= self.settings.snapshot_min_seconds)
                or age >= self.settings.snapshot_every_seconds)

    def build_snapshots(self, st: SourceState) -> tuple[list[tuple[bytes, bytes]], list, dict]:
        """Encode one snapshot per model of ``st`` and take the messages they cover.

        Returns
        -------
        records : list of (key, value) bytes
        acks : list
            Ack tokens of messages below every snapshot's ``next_offset``; acknowledge them only
            after all records are delivered.
        versions : dict
            ``{model: (version, next_offset)}`` to pass to :meth:`snapshot_done`.

        Raises
        ------
        SnapshotError
            If a model's state cannot be encoded (e.g. over ``max_snapshot_bytes``); nothing is
            taken then, so nothing is acknowledged.
        """
        records, versions = [], {}
        for name, slot in st.slots.items():
            # a personal model's people go to the changelog (and the store), not into the snapshot
            own = (slot.learner.state_dict(people=False) if self.person_slot(st, name, slot.learner) is not None
                   else slot.learner.state_dict())
            state = attach_stream_meta(own, source=st.source, digest=slot.digest, window=slot.window)
            value = encode_snapshot(name, slot.version + 1, slot.count, state, offsets={st.source: slot.next_offset},
                                    max_bytes=self.settings.max_snapshot_bytes)
            records.append((snapshot_key(name, st.source).encode(), value))
            versions[name] = (slot.version + 1, slot.next_offset)
        people = self.build_people(st)  # after the snapshots: a snapshot that cannot be encoded takes no person
        covered = min(n for _, n in versions.values()) if versions else st.next_offset
        acks = [tok for off, tok in st.pending if off < covered]
        st.pending = [(off, tok) for off, tok in st.pending if off >= covered]
        st.since_snapshot = 0
        st.force = False
        st.last_snapshot = self.clock()
        st.publishing = True
        st.people_round = people
        return records, acks, versions

    def snapshot_done(self, st: SourceState, versions: dict, ok: bool) -> None:
        """Record the outcome of publishing the records of :meth:`build_snapshots`."""
        st.publishing = False
        self.people_done(st, ok)
        if not ok:
            st.force = True
            return
        for name, (version, _) in versions.items():
            slot = st.slots.get(name)
            if slot is not None:
                slot.version = max(slot.version, version)
        self._set_versions()
        if versions:
            st.published_next = max(st.published_next, min(n for _, n in versions.values()))

    def _set_versions(self) -> None:
        """``prefstream_model_version{model}`` = Σ of the versions of this worker's sources
        (the explainer reports the same sum over all sources, i.e. the merged model's version)."""
        for name in self.models:
            total = sum(st.slots[name].version for st in self.sources.values() if name in st.slots)
            self.metrics.model_version.labels(model=name).set(total)

    # ------------------------------------------------------------------ items
    def on_item(self, key, value, partition: int, offset: int) -> dict | None:
        """Apply one item-catalog record; a dead-letter record for a bad *live* record, else None."""
        try:
            self.catalog.upsert(parse_item(value, max_bytes=self.settings.max_message_bytes, key=key))
        except DeadLetter as dl:
            self.metrics.dead_letters.labels(reason=dl.reason).inc()
            if offset >= self.items_live_from.get(partition, 0):
                return dead_letter_record(value, dl.reason, dl.detail, self.settings.topic_items, partition, offset)
        return None

    # ------------------------------------------------------------------ gauges
    def update_gauges(self) -> None:
        """Push the progressive metrics and the learners' diagnostics to their gauges
        (:func:`stream.workers.gauges.push_learner_gauges`; cheap, about once a second)."""
        push_learner_gauges(self.progressive, self.sources, self.metrics)
        self.update_people_gauges()
