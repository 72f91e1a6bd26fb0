"""What the learner core does for personal models: forget records, the round's people, people gauges.

:class:`PeopleHandling` is the part of :class:`stream.workers.learner_core.LearnerCore` that
knows about people (as :class:`stream.workers.refits.RefitScheduling` is its refit part): with a
:class:`~stream.workers.people.PeopleKeeper` in ``self.people`` (the learner worker), a personal
model's people live in the keeper's store and on the changelog; without one (``prefstream
run``, tests) they stay in the model and its snapshot.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Sequence

from stream.contract import DeadLetter
from stream.contract.batch import parse_batch
from stream.workers.people import forget_user, is_personal

if TYPE_CHECKING:  # annotations only
    from stream.workers.people import PersonSlot
    from stream.workers.sources import SourceState

__all__ = ["PeopleHandling"]

log = logging.getLogger("stream.workers.learner_core")  # the learner core's log


class PeopleHandling:
    """Mixin of :class:`~stream.workers.learner_core.LearnerCore` (see the module docstring)."""

    def person_slot(self, st: SourceState, name: str, learner) -> PersonSlot | None:
        """The :class:`~stream.workers.people.PersonSlot` of a personal model on ``st`` (loader
        attached), or None (no keeper, not a personal model, or not a preference source: a
        person's changelog key names the model and the person, so people live on one input
        topic; click-session pairs are learned by the population of their source)."""
        if self.people is None or st.kind != "preferences" or not is_personal(learner):
            return None
        ps = self.people.slot(st.source, name)
        ps.attach(learner)
        return ps

    # ------------------------------------------------------------------ forget records
    def process_batch(self, st: SourceState, records: Sequence[tuple], parsed: Sequence | None = None) -> list[dict]:
        """Validate and learn a micro-batch of input messages of ``st``, in offset order.

        A forget record (``forget.v1.json``, :func:`stream.contract.people.forget_user`) splits
        the batch: the events before it are learned, then the person is forgotten, then the rest.
        See :meth:`LearnerCore._process` for the parameters and what is returned (with
        ``parsed`` given, ``prefstream run``, forget records are not looked for).

        The batch is parsed once, here: a forget record is never a valid event (it has no
        ``left`` / ``right``; ``tests/test_people_core.py`` checks it), so only the messages the
        contract refused, and those below the source's floor (which are not parsed), are looked
        at as forget records — not every message's bytes (that scan cost ~0.8 µs an event).
        """
        if parsed is not None:
            return self._process(st, records, parsed)
        floor = self.floor(st)
        live = [k for k, r in enumerate(records) if int(r[0]) >= floor]
        got = parse_batch(st.kind, [records[k][1] for k in live], self.catalog, self.settings.max_message_bytes,
                          self.click_expander)   # holds the batch's row blocks while the parts are learned
        parsed = [None] * len(records)
        for k, res in zip(live, got):
            parsed[k] = res
        forgets = []
        for k, res in enumerate(parsed):
            if res is None or isinstance(res, DeadLetter):
                user = forget_user(records[k][1])
                if user is not None:
                    forgets.append((k, user))
        if not forgets:
            return self._process(st, records, parsed)
        out: list[dict] = []
        start = 0
        for k, user in forgets:
            if k > start:
                out.extend(self._process(st, records[start:k], parsed[start:k]))
            out.extend(self._forget(st, records[k], user))
            start = k + 1
        if start < len(records):
            out.extend(self._process(st, records[start:], parsed[start:]))
        return out

    def _forget(self, st: SourceState, record: tuple, user) -> list[dict]:
        """Apply one forget record of ``st`` (or dead-letter a malformed one), then count its offset as read."""
        off = int(record[0])
        if record[2] is not None:
            st.pending.append((off, record[2]))
        if off < self.floor(st):
            return []
        out = []
        if isinstance(user, DeadLetter):
            if off >= st.next_offset:
                out.append(self._dead_letter(record[1], user.reason, user.detail, st, off))
        else:
            for name, slot in st.slots.items():
                if off < slot.next_offset or not is_personal(slot.learner):
                    continue
                ps = self.person_slot(st, name, slot.learner)
                known = ps.forget(slot.learner, user) if ps is not None else slot.learner.forget_person(user)
                if known:
                    self._m_forgotten[name].inc()
            log.info("source %s: person forgotten at offset %d", st.source, off)
        for slot in st.slots.values():
            slot.next_offset = max(slot.next_offset, off + 1)
        if off >= st.next_offset:
            st.next_offset = off + 1
            st.since_snapshot += 1
            st.force = True  # the tombstone goes out in the next round, not after snapshot_every_events
        return out

    # ------------------------------------------------------------------ the round's people
    def build_people(self, st: SourceState) -> list[tuple[bytes, bytes | None]]:
        """The changelog records of ``st``'s round (every personal model's touched people and
        tombstones, at its ``next_offset``); what :meth:`people_done` needs is kept per slot.

        Raises
        ------
        SnapshotError
            If a person's state cannot be encoded; the slots built before it take their people
            back (dirty again), so nothing is lost for the next round.
        """
        people: list = []
        built: list = []
        try:
            for name, slot in st.slots.items():
                ps = self.person_slot(st, name, slot.learner)
                if ps is None:
                    continue
                recs, sent = ps.build(slot.learner, slot.next_offset)
                built.append((ps, slot, sent))
                people.extend(recs)
        except Exception:
            for ps, slot, sent in built:
                ps.done(slot.learner, sent, False)
            raise
        st.people_sent = built
        return people

    def people_done(self, st: SourceState, ok: bool) -> None:
        """After the round: on failure its people stay dirty; on success memory is bounded."""
        built, st.people_sent, st.people_round = st.people_sent, [], []
        for ps, slot, sent in built:
            ps.done(slot.learner, sent, ok)

    # ------------------------------------------------------------------ metrics
    def count_personalized(self, name: str, learner, user_ids) -> None:
        """Count a batch's predictions in ``prefstream_predictions_total{personalized}``:
        personalised when the person is held with at least one learned event (``person_info``),
        as the server reports it."""
        seen: dict = {}
        n_pers = 0
        for u in user_ids:
            if u is None:
                continue
            hit = seen.get(u)
            if hit is None:
                hit = seen[u] = bool(learner.person_info(u)["personalized"])
            n_pers += hit
        yes, no = self._m_pred[name]
        if n_pers:
            yes.inc(n_pers)
        if len(user_ids) - n_pers:
            no.inc(len(user_ids) - n_pers)

    def update_people_gauges(self) -> None:
        """``prefstream_people_held`` (from the models) and ``prefstream_people_changelog_lag``."""
        held: dict[str, int] = {}
        for st in self.sources.values():
            for name, slot in st.slots.items():
                if is_personal(slot.learner):
                    held[name] = held.get(name, 0) + int(slot.learner.people_held())
        for model, n in held.items():
            self.metrics.people_held.labels(model=model).set(n)
            series = self.__dict__.setdefault("_people_series", set())
            if model not in series:   # every people series exists from the start (0, not "no data")
                series.add(model)
                self.metrics.people_changelog_lag.labels(model=model)
                self.metrics.people_restored.labels(model=model)
                self.metrics.people_evicted.labels(model=model)
                for kind in ("state", "tombstone"):
                    self.metrics.people_changelog_records.labels(model=model, kind=kind)
        if self.people is not None:
            for model, n in self.people.pending().items():
                self.metrics.people_changelog_lag.labels(model=model).set(n)
