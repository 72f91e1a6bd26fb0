"""Finite-state guard: a learner never keeps, and so never publishes, a non-finite state.

The contract bounds every number a learner sees (:data:`stream.contract.MAX_ABS_VALUE`,
:data:`stream.contract.WEIGHT_RANGE`), which keeps the built-in models' arithmetic finite. The
guard is the second line, model-agnostic, for any registered learner: after an update it looks
at the learner's :meth:`state_dict` and refuses the update when the state got *worse* — a NaN
anywhere, more infinite entries in an array than before (the capacity's min-max scaler starts at
±inf legitimately), or a non-finite number in the JSON meta. A refused update is undone by
rebuilding the learner from the last sound state with the model's registry ``loader``, and
reported as :class:`NonFiniteUpdate` (dead-letter reason ``non_finite``).

Two entry points, both on :class:`FiniteGuard` (one per model and source):

* :meth:`FiniteGuard.learn_one` — one event: learn, check, keep or restore. Cost: one
  ``state_dict()`` and ``isfinite`` per event (≈ 4 µs LinearBT, 30 µs capacity, 20 µs GPM window
  on the development machine).
* :meth:`FiniteGuard.learn_batch` — a mini-batch (the batch path of the learner worker): learn
  all, check once; only when the check fails, restore the pre-batch state and re-learn the
  batch event by event to isolate the bad events (those re-learned events are reported as
  ``relearned`` so that the caller counts them in ``prefstream_events_relearned_total``).

Examples
--------
>>> from learners.linear import LinearBT
>>> g = FiniteGuard(LinearBT(), LinearBT.from_state)
>>> m = g.learn_one(LinearBT(), {"a": 1.0}, {"a": 0.0}, 1, None, 1.0)
>>> try:
...     m = g.learn_one(m, {"a": 1e308}, {"a": -1e308}, 1, None, 1.0)
... except NonFiniteUpdate as exc:
...     print(exc.reason, "|", exc.learner.state_dict()["meta"]["n_learned"])
non_finite | 1
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from learners.exceptions import InvalidInputError

__all__ = ["BatchOutcome", "FiniteGuard", "NonFiniteUpdate", "state_defect"]


class NonFiniteUpdate(InvalidInputError):
    """An update would have made a learner's state non-finite; the state was restored.

    Attributes
    ----------
    reason : str
        ``"non_finite"`` (the dead-letter reason).
    detail : str
        Which part of the state went non-finite.
    learner : PreferenceLearner
        The restored learner (the caller's reference may point at the poisoned object).
    """

    reason = "non_finite"

    def __init__(self, detail: str, learner: Any) -> None:
        self.detail = detail
        self.learner = learner
        super().__init__(detail)


def _profile(state: dict) -> dict[str, int]:
    """Infinite entries per float array (NaN raises the count to -1: always a defect)."""
    out = {}
    for k, a in state.get("arrays", {}).items():
        a = np.asarray(a)
        if a.dtype.kind not in "fc" or a.size == 0:
            continue
        if np.isfinite(a).all():
            out[k] = 0
        else:
            out[k] = -1 if np.isnan(a).any() else int(np.isinf(a).sum())
    return out


def _meta_defect(v: Any, path: str, depth: int = 0) -> str | None:
    if isinstance(v, float):
        return None if math.isfinite(v) else f"meta {path} = {v!r}"
    if depth > 4:
        return None
    if isinstance(v, dict):
        for k, x in v.items():
            d = _meta_defect(x, f"{path}.{k}" if path else str(k), depth + 1)
            if d:
                return d
    elif isinstance(v, (list, tuple)):
        for i, x in enumerate(v[:256]):
            d = _meta_defect(x, f"{path}[{i}]", depth + 1)
            if d:
                return d
    return None


def _defect(profile: dict[str, int], meta: Any, reference: dict[str, int] | None) -> str | None:
    for k, n in profile.items():
        if n < 0:
            return f"array {k!r} holds NaN"
        allowed = 0 if reference is None else max(reference.get(k, 0), 0)
        if n > allowed:
            return f"array {k!r} has {n} infinite entries (had {allowed})"
    return _meta_defect(meta, "")


def state_defect(state: dict, reference: dict[str, int] | None = None) -> str | None:
    """What makes ``state`` unsound, or ``None``.

    Parameters
    ----------
    state : dict
        A learner's ``state_dict()``.
    reference : dict, optional
        :func:`_profile` of the state before the update: arrays may keep (or lose) the infinite
        entries they had, never gain any. Without it, any infinite entry is a defect.

    Returns
    -------
    str or None
        E.g. ``"array 'w' holds NaN"``.
    """
    return _defect(_profile(state), state.get("meta", {}), reference)


@dataclass
class BatchOutcome:
    """Result of :meth:`FiniteGuard.learn_batch`.

    Attributes
    ----------
    learner : PreferenceLearner
        The learner to keep using (a restored copy when the batch had to be re-learned).
    rejected : list of (int, str)
        Index in the batch and detail of every refused event.
    relearned : int
        Events learned a second time after the restore (0 when the batch was sound).
    reasons : dict of int to str
        Dead-letter reason of each refused event: ``"non_finite"`` when the update would have made
        the state non-finite, else the exception's ``reason`` (default ``"schema_violation"``).
    """

    learner: Any
    rejected: list = field(default_factory=list)
    relearned: int = 0
    reasons: dict = field(default_factory=dict)


class FiniteGuard:
    """The last sound state of one model, and the updates checked against it.

    Parameters
    ----------
    learner : PreferenceLearner
        The model now (its state is the first checkpoint).
    loader : callable
        ``loader(state_dict) -> learner`` (the registry's ``ModelSpec.loader``).
    """

    def __init__(self, learner: Any, loader: Callable[[dict], Any]) -> None:
        self.loader = loader
        self.mark(learner)

    def mark(self, learner: Any) -> None:
        """Take ``learner``'s current state as the checkpoint (after a refit, a merge, a restore)."""
        self._state = learner.state_dict()
        self._profile = _profile(self._state)

    def restore(self) -> Any:
        """A new learner rebuilt from the checkpoint."""
        return self.loader(self._state)

    def learn_one(self, learner: Any, left, right, outcome, context=None, weight=1.0) -> Any:
        """``learner.learn_one(...)``, kept only if the state stays sound.

        Returns
        -------
        PreferenceLearner
            ``learner`` itself (sound update).

        Raises
        ------
        NonFiniteUpdate
            The update made the state non-finite; ``exc.learner`` holds the restored model.
        Exception
            Whatever ``learn_one`` raised, with the restored model as ``exc.learner``.
        """
        try:
            with np.errstate(over="ignore", invalid="ignore"):  # reported below as a refused update
                learner.learn_one(left, right, outcome, context, weight)
        except Exception as exc:
            # a failed update may have mutated part of the state: continue from the checkpoint
            exc.learner = self.restore()  # type: ignore[attr-defined]
            raise
        state = learner.state_dict()
        profile = _profile(state)
        defect = _defect(profile, state.get("meta", {}), self._profile)
        if defect is not None:
            raise NonFiniteUpdate(f"the update would make the model state non-finite ({defect}); "
                                  "the event was refused and the state kept", self.restore())
        self._state, self._profile = state, profile
        return learner

    def learn_batch(self, learner: Any, examples: Sequence[Any], learn_all: Callable[[Any, Sequence[Any]], None],
                    learn_one: Callable[[Any, Any], None]) -> BatchOutcome:
        """Learn a batch, checking once; isolate bad events only when the batch fails the check.

        Parameters
        ----------
        learner : PreferenceLearner
        examples : sequence
            The batch (any objects ``learn_all`` / ``learn_one`` understand).
        learn_all : callable
            ``learn_all(learner, examples)``, e.g. a ``learn_many`` call on stacked arrays.
        learn_one : callable
            ``learn_one(learner, example)`` for the event-by-event re-learn.

        Returns
        -------
        BatchOutcome
        """
        try:
            with np.errstate(over="ignore", invalid="ignore"):
                learn_all(learner, examples)
            state = learner.state_dict()
            ok = state_defect(state, self._profile) is None
        except Exception:  # noqa: BLE001 - isolate the failing event below
            ok = False
        if ok:
            self._state, self._profile = state, _profile(state)
            return BatchOutcome(learner)
        out = BatchOutcome(self.restore())
        for i, ex in enumerate(examples):
            try:
                with np.errstate(over="ignore", invalid="ignore"):
                    learn_one(out.learner, ex)
                state = out.learner.state_dict()
                defect = state_defect(state, self._profile)
                reason = "non_finite"
            except Exception as exc:  # noqa: BLE001 - one event must not stop the batch
                defect = f"{type(exc).__name__}: {exc}"
                reason = getattr(exc, "reason", "schema_violation")
                state = None
            if defect is None:
                self._state, self._profile = state, _profile(state)
                out.relearned += 1
            else:
                out.rejected.append((i, defect))
                out.reasons[i] = reason
                out.learner = self.restore()
        return out
