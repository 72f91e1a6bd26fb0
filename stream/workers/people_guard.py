"""The finite-state guard for a personal model: the population and the batch's people, not everyone held.

:class:`~stream.workers.guard.FiniteGuard` checks a learner's whole ``state_dict()`` after each
batch. A personal model's state dict holds every person in memory (a million people: a copy of
hundreds of MB per batch), while a batch can only change the population and the people of its
events. :class:`PersonalGuard` checks exactly those: the population's state
(``state_dict(people=False)``) against its last sound profile, and the ``person_state`` of each
person of the batch. A refused batch is undone as the base guard does — the population rebuilt
from its last sound state — and the people are carried over from the poisoned learner, each
person of the batch back at the state they had before it.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from stream.workers.guard import BatchOutcome, FiniteGuard, NonFiniteUpdate, _profile, state_defect

__all__ = ["PersonalGuard"]


class PersonalGuard(FiniteGuard):
    """:class:`FiniteGuard` of a personal learner (see the module docstring).

    Parameters
    ----------
    learner : PersonalLearner
    loader : callable
        ``loader(state_dict) -> learner``.
    """

    def mark(self, learner: Any) -> None:
        self._state = learner.state_dict(people=False)
        self._profile = _profile(self._state)
        self._live = learner
        self._pre: dict[str, dict | None] = {}

    def restore(self) -> Any:
        """The population from its checkpoint, with the people of the learner last guarded (the
        batch's people at their pre-batch state; those not held before it left out)."""
        out = self.loader(self._state)
        live = self._live
        for u in live.people():
            state = self._pre[u] if u in self._pre else live.person_state(u)
            if state is not None:
                out.load_person(u, state)
        self._live = out
        return out

    def _sound(self, learner: Any, users) -> str | None:
        state = learner.state_dict(people=False)
        defect = state_defect(state, self._profile)
        if defect is None:
            for u in users:
                ps = learner.person_state(u) if u is not None else None
                if ps is not None:
                    for k, a in ps["arrays"].items():
                        if not np.isfinite(np.asarray(a, dtype=np.float64)).all():
                            return f"person array {k!r} is non-finite"
            if defect is None:
                self._state, self._profile = state, _profile(state)
        return defect

    def learn_batch(self, learner: Any, examples: Sequence[Any], learn_all: Callable[[Any, Sequence[Any]], None],
                    learn_one: Callable[[Any, Any], None], user_of: Callable[[Any], str | None] = lambda e: None
                    ) -> BatchOutcome:
        """:meth:`FiniteGuard.learn_batch`; ``user_of(example)`` names each example's person."""
        users = {user_of(e) for e in examples} - {None}
        self._live = learner
        self._pre = {u: learner.person_state(u) for u in users}
        try:
            with np.errstate(over="ignore", invalid="ignore"):
                learn_all(learner, examples)
            ok = self._sound(learner, users) is None
        except Exception:  # noqa: BLE001 - isolate the failing event below
            ok = False
        if ok:
            self._pre = {}
            return BatchOutcome(learner)
        out = BatchOutcome(self.restore())
        for i, ex in enumerate(examples):
            u = user_of(ex)
            self._live, self._pre = out.learner, ({u: out.learner.person_state(u)} if u is not None else {})
            try:
                with np.errstate(over="ignore", invalid="ignore"):
                    learn_one(out.learner, ex)
                defect = self._sound(out.learner, [u])
                reason = "non_finite"
            except Exception as exc:  # noqa: BLE001 - one event must not stop the batch
                defect = f"{type(exc).__name__}: {exc}"
                reason = getattr(exc, "reason", "schema_violation")
            if defect is None:
                out.relearned += 1
            else:
                out.rejected.append((i, defect))
                out.reasons[i] = reason
                out.learner = self.restore()
        self._pre = {}
        return out

    def learn_one(self, learner: Any, left, right, outcome, context=None, weight=1.0, user_id=None) -> Any:
        """:meth:`FiniteGuard.learn_one` with the event's person."""
        self._live, self._pre = learner, ({user_id: learner.person_state(user_id)} if user_id is not None else {})
        try:
            with np.errstate(over="ignore", invalid="ignore"):
                learner.learn_one(left, right, outcome, context, weight, user_id=user_id)
        except Exception as exc:
            exc.learner = self.restore()  # type: ignore[attr-defined]
            raise
        defect = self._sound(learner, [user_id])
        if defect is not None:
            raise NonFiniteUpdate(f"the update would make the model state non-finite ({defect}); "
                                  "the event was refused and the state kept", self.restore())
        self._pre = {}
        return learner
