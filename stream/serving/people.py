"""The people ``prefstream serve`` knows: the changelog ``prefstream.people`` followed into its own store.

The learner workers keep each person's state of a personal model (``capacity-personal``,
``linear-bt-personal``; :mod:`learners.personal`) in their own stores and on the compacted
changelog topic ``prefstream.people`` (key ``<model>@<user_id>``, value the person's state,
a tombstone when the person is forgotten; :mod:`stream.contract.people`). The model snapshots
carry the population only. The server follows the whole changelog from the beginning, outside
any consumer group, into :class:`ServedPeople`: a dict from ``(model, user_id)`` to the record's
bytes (decoded only when the person is asked for).

* **Lazy loading.** Each served version of a personal model gets :meth:`ServedPeople.loader`
  as its ``person_loader``: a person is loaded into that version's learner the first time a
  request names them, on the event loop's thread (before any explanation thread sees them).
* **Updates.** A new record for a person the current version holds replaces their state there
  at once; the others are read from the store when next asked for.
* **Forget.** A tombstone removes the person from the store and from the current version's
  learner, and is remembered (:attr:`ServedPeople.forgotten`) so that a version swapped in later,
  whose snapshot might still hold them, forgets them too: after it, the server answers for that
  person exactly as for someone never seen (``personalized: false``, ``person_version: 0``).

Memory: one bytes object per person record (the person's dual-averaging sums: ~8 bytes per
population coefficient) plus the dict entry; a server process holds every person of the
changelog. Beyond a few million people, put the records in an embedded store instead of the dict.

Examples
--------
>>> from learners.linear_personal import LinearBTPersonal
>>> from stream.contract.people import encode_person, person_key
>>> m = LinearBTPersonal(["x"])
>>> for _ in range(5):
...     m.learn_one({"x": 1.0}, {"x": 0.0}, -1, user_id="ann")
>>> people = ServedPeople()
>>> people.on_record(person_key("linear-bt-personal", "ann"),
...                  encode_person(m.person_state("ann"), source="t:0", offset=5))
>>> served = LinearBTPersonal(["x"])          # the population alone, as a snapshot carries it
>>> people.prepare("linear-bt-personal", served)
>>> people.info("linear-bt-personal", served, "ann")
{'user_id': 'ann', 'personalized': True, 'person_version': 5}
>>> people.on_record(person_key("linear-bt-personal", "ann"), None, live_learner=served)   # forgotten
>>> people.info("linear-bt-personal", served, "ann"), len(people)
({'user_id': 'ann', 'personalized': False, 'person_version': 0}, 0)
"""

from __future__ import annotations

import logging

from learners.exceptions import PrefstreamError

__all__ = ["ServedPeople", "is_personal"]

log = logging.getLogger(__name__)


def is_personal(learner) -> bool:
    """Whether ``learner`` holds people (the personal-state API of :mod:`learners.personal`)."""
    return callable(getattr(learner, "person_info", None)) and callable(getattr(learner, "load_person", None))


class ServedPeople:
    """Person records by ``(model, user_id)`` (see the module docstring).

    Attributes
    ----------
    forgotten : set of (str, str)
        People whose tombstone was read (until a new record of theirs arrives).
    records, tombstones, errors : int
        Records applied, tombstones applied, records that could not be decoded (skipped, counted).
    """

    def __init__(self) -> None:
        self._d: dict[tuple[str, str], bytes] = {}
        self.forgotten: set[tuple[str, str]] = set()
        self.records = self.tombstones = self.errors = 0

    def __len__(self) -> int:
        return len(self._d)

    def __contains__(self, key) -> bool:
        return key in self._d

    def state(self, model: str, user_id: str) -> dict | None:
        """The decoded state of a person (``load_person``'s input), or None."""
        from stream.contract.people import decode_person

        raw = self._d.get((model, user_id))
        if raw is None:
            return None
        try:
            return decode_person(raw)[0]
        except PrefstreamError as exc:
            self.errors += 1
            log.warning("person record of %s could not be decoded (%s); scored as the population", model, exc)
            return None

    def loader(self, model: str):
        """``user_id -> state | None`` for a personal learner's ``person_loader``."""
        def load(user_id: str):
            return self.state(model, user_id)

        load.served_people = self
        return load

    def on_record(self, key, value, partition=None, offset=None, live_learner=None) -> None:  # noqa: ARG002
        """Apply one changelog record (``live_learner``: the current version's learner of that model)."""
        from stream.contract.people import parse_person_key

        model, user = parse_person_key(key)
        if not model or not user:
            self.errors += 1
            return
        k = (model, user)
        if value is None:
            self._d.pop(k, None)
            self.forgotten.add(k)
            self.tombstones += 1
            if live_learner is not None and is_personal(live_learner):
                live_learner.forget_person(user)
            return
        self._d[k] = bytes(value)
        self.forgotten.discard(k)
        self.records += 1
        if live_learner is not None and is_personal(live_learner) and live_learner.person_state(user) is not None:
            state = self.state(model, user)
            if state is not None:
                try:
                    live_learner.load_person(user, state)
                except PrefstreamError as exc:
                    self.errors += 1
                    log.warning("person record of %s does not fit the served model (%s); kept its old state",
                                model, exc)

    def prepare(self, model: str, learner) -> None:
        """Make a served version's personal learner read people from this store (once per learner): its
        ``person_loader``, the store's state for the people its snapshot holds when it is not older
        (versions count a person's events), and no forgotten person."""
        if not is_personal(learner) or getattr(getattr(learner, "person_loader", None), "served_people", None) is self:
            return
        for user in list(learner.people()):
            if (model, user) in self.forgotten:
                learner.forget_person(user)
            elif (model, user) in self._d:
                state = self.state(model, user)   # the newer state of the two wins (a version counts events)
                if state is not None and int(state["meta"].get("version", 0)) >= learner.person_info(user)["version"]:
                    learner.load_person(user, state)
        learner.person_loader = self.loader(model)

    personal = staticmethod(is_personal)

    def info(self, model: str, learner, user_id: str | None) -> dict:
        """``{"user_id", "personalized", "person_version"}`` of a request's person on ``learner``: not
        personalized (version 0) without a person, for a model that holds no people, or a person
        neither the store nor the snapshot holds."""
        if user_id is None or not is_personal(learner):
            return {"user_id": user_id, "personalized": False, "person_version": 0}
        self.prepare(model, learner)
        got = learner.person_info(user_id)
        return {"user_id": user_id, "personalized": bool(got["personalized"]), "person_version": int(got["version"])}
