"""Progressive validation of the learner: its metrics, updated a chunk at a time, the chunks, the learning curve.

Every scored event is predicted before it is learned (progressive validation, Blum, Kalai &
Langford 1999) and folded into river's ``Accuracy``, ``LogLoss`` and ``RollingROCAUC``.
:func:`update_progressive` gives those three objects exactly the state that one ``update`` call
per event gives them (``tests/test_progressive.py`` compares both), at a fraction of the cost:
the accuracy's confusion matrix takes its four cells as counts, the log loss's running mean is
the same recursion ``n += 1; mean += (x − mean) / n`` in one local loop; only the rolling ROC AUC
(river's Rust implementation) takes one call per event. Measured in ``bench/catchup.py
--profile-events``: the per-event river calls were a third of the progressive-validation time of
three models.

How stale the scoring model may be (:func:`progressive_chunks`): a micro-batch is scored and learned
in chunks that start small and grow geometrically with the number of events the model has
learned, so an event is scored by the model as it was at most ``max(PROGRESSIVE_MIN_CHUNK,
PROGRESSIVE_GROWTH · n)`` − 1 events before it, ``n`` being the events the model had learned
(docs/workers.md, "Progressive validation"). A fresh model on a 400-event file is thus scored by
models that lag it by < 4 events for its first 32 events and by < 1/8 of what it has seen after;
a warm model (n ≥ 8 × batch size) scores a micro-batch in one call, as before.

:class:`ProgressiveScoring` is the part of the learner core (:class:`stream.workers.learner_core.LearnerCore`)
that scores each chunk before it is learned and takes the learning curve (``progress_log``, ``prefstream
run``'s summary): a point each time a model has seen :data:`CURVE_GROWTH` more events than at the last one.
"""

from __future__ import annotations

import math
import time
from collections import deque
from typing import Sequence

__all__ = ["AUC_WINDOW", "CURVE_GROWTH", "PROGRESSIVE_GROWTH", "PROGRESSIVE_MIN_CHUNK", "ProgressiveScoring",
           "new_progressive", "progressive_chunks", "progressive_values", "update_progressive"]

#: Events over which the progressive ROC AUC is computed exactly (river.metrics.RollingROCAUC).
AUC_WINDOW = 10_000

#: A chunk holds at most this fraction of the events the model has learned before it ...
PROGRESSIVE_GROWTH = 0.125
#: ... or this many events, whichever is more.
PROGRESSIVE_MIN_CHUNK = 4

#: The learner's learning curve takes a point when a model has seen this fraction more events than
#: at its previous point (and the progressive ROC AUC is defined): ≈ 32 · ln(n) points for n events.
CURVE_GROWTH = 1 / 32

_LO, _HI = 1e-15, 1 - 1e-15  # river.metrics.base.BinaryMetric._clamp_proba


def new_progressive() -> tuple:
    """``(Accuracy, LogLoss, RollingROCAUC)`` of one model.

    ROC AUC over the last :data:`AUC_WINDOW` scored events, exact (rank-based): river's ``ROCAUC``
    bins probabilities into 10 thresholds, which flattens margin models whose σ(g) stays near 0.5.
    """
    from river import metrics as rm

    return rm.Accuracy(), rm.LogLoss(), rm.RollingROCAUC(window_size=AUC_WINDOW)


def progressive_chunks(learned: int, n: int, growth: float = PROGRESSIVE_GROWTH,
                       min_chunk: int = PROGRESSIVE_MIN_CHUNK) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` covering ``range(n)``: the chunks in which ``n`` new events are scored,
    then learned, by a model that has learned ``learned`` events (ignoring the events that are refused).

    Each chunk holds ``max(min_chunk, ⌊growth · k⌋)`` events, ``k`` the model's count at its start:
    the event at count ``k + j`` is scored by the model at count ``k``, ``j < max(min_chunk, growth · k)``.

    Examples
    --------
    >>> progressive_chunks(0, 20)
    [(0, 4), (4, 8), (8, 12), (12, 16), (16, 20)]
    >>> progressive_chunks(40, 20)
    [(0, 5), (5, 10), (10, 16), (16, 20)]
    >>> progressive_chunks(10_000, 500)
    [(0, 500)]
    """
    out, a, k = [], 0, int(learned)
    while a < n:
        c = max(int(min_chunk), int(growth * k))
        b = min(n, a + c)
        out.append((a, b))
        k += b - a
        a = b
    return out


def update_progressive(acc, ll, auc, ys: Sequence[bool], ps: Sequence[float]) -> None:
    """Fold ``n`` scored events in, in order: the state of ``n`` calls of each metric's ``update``.

    Parameters
    ----------
    acc, ll, auc : river.metrics.Accuracy, LogLoss, RollingROCAUC
    ys : sequence of bool, length n
        Whether the left item won.
    ps : sequence of float, length n
        P(left preferred) predicted before learning.
    """
    counts: dict = {}
    for y, p in zip(ys, ps):
        key = (y, p > 0.5)
        counts[key] = counts.get(key, 0) + 1
    cm = acc.cm
    for (y, hit), c in counts.items():  # ConfusionMatrix.update(y, ŷ, w=1) c times, in one step
        cm.update(y, hit, float(c))
        cm.n_samples += c - 1
    mean = ll._mean  # river.stats.Mean: n += w; mean += (w / n) * (x - mean), with w = 1
    n, m = mean.n, mean._mean
    log = math.log
    for y, p in zip(ys, ps):
        p = max(min(p, _HI), _LO)
        x = -log(p) if y else -log(1 - p)
        n += 1.0
        m += (1.0 / n) * (x - m)
    mean.n, mean._mean = n, m
    up = auc.update
    for y, p in zip(ys, ps):
        up(y, p)


def progressive_values(acc, ll, auc) -> dict[str, float | None]:
    """``{"accuracy", "log_loss", "roc_auc"}`` of river's progressive metrics, None where not measured.

    river reads 0.0 for all three before the first scored prediction; its ``RollingROCAUC``
    reads 0.0 as well when the true labels seen hold a single class (AUC undefined, e.g. a
    click stream where the clicked item always wins). Those are None here, never 0.0.

    Examples
    --------
    >>> from river import metrics
    >>> acc, ll, auc = metrics.Accuracy(), metrics.LogLoss(), metrics.RollingROCAUC()
    >>> progressive_values(acc, ll, auc)
    {'accuracy': None, 'log_loss': None, 'roc_auc': None}
    >>> for y, p in [(True, 0.9), (True, 0.8)]:
    ...     acc.update(y, p > 0.5); ll.update(y, p); auc.update(y, p)
    >>> progressive_values(acc, ll, auc)["roc_auc"] is None, progressive_values(acc, ll, auc)["accuracy"]
    (True, 1.0)
    >>> acc.update(False, False); ll.update(False, 0.3); auc.update(False, 0.3)
    >>> progressive_values(acc, ll, auc)["roc_auc"]
    1.0
    """
    cm = getattr(acc, "cm", None)
    if cm is not None and not cm.total_weight:
        return {"accuracy": None, "log_loss": None, "roc_auc": None}
    out = {"accuracy": _get(acc), "log_loss": _get(ll), "roc_auc": _get(auc)}
    one_class = cm is not None and sum(1 for v in dict(cm.sum_row).values() if v) < 2
    if one_class or out["roc_auc"] == 0.0:  # river's value for an undefined AUC
        out["roc_auc"] = None
    return out


def _get(metric) -> float | None:
    try:
        v = float(metric.get())
    except (TypeError, ValueError, ZeroDivisionError):
        return None
    return v if v == v else None


class ProgressiveScoring:
    """The learner core's progressive validation and learning curve (a mixin of
    :class:`stream.workers.learner_core.LearnerCore`, as :class:`stream.workers.refits.RefitScheduling`
    is its refit part): uses its ``models``, ``tally`` (learned counts), ``monitor`` (the drift
    detector on the progressive log loss) and ``count_personalized``
    (:class:`stream.workers.people_core.PeopleHandling`).

    The core scores each chunk of :func:`progressive_chunks` with :meth:`score_chunk` before it
    learns it; :attr:`progressive` holds each model's metrics (:func:`new_progressive`), and
    :attr:`curve` the learning-curve points taken from them.
    """

    def start_progressive(self, curve: bool = True) -> None:
        """Fresh metrics for every model of ``self.models``; ``curve``: take learning-curve points."""
        self.progressive = {m: new_progressive() for m in self.models}
        #: the learning curve: ``{"events", "model", "accuracy", "roc_auc", "log_loss", "t"}`` points taken
        #: from the progressive metrics at event counts (CURVE_GROWTH apart); the worker drains them
        #: to ``progress_log``, ``prefstream run`` into its summary (:meth:`drain_curve`)
        self.curve = deque(maxlen=100_000)
        self.keep_curve = bool(curve)
        self._curve_at: dict[str, int] = {}
        self._t0 = time.monotonic()

    def score_chunk(self, name: str, learner, arr, at: int | None = None, user_ids=None) -> None:
        """Progressive validation of a chunk: P(left) from the pre-chunk state; ties are not scored.

        ``at``: the model's event count once the chunk is learned. The chunk's events are the
        counts ``at − len + 1 … at``; the metrics are folded in up to each count where a
        learning-curve point is due (:data:`CURVE_GROWTH` past the previous one), and the point
        taken there, so the curve is the progressive metrics at event counts, whatever the chunks.
        For a personal model, ``user_ids`` (each row's person) go to ``predict_proba_many`` and
        each prediction is counted in ``prefstream_predictions_total{personalized}``
        (:meth:`~stream.workers.people_core.PeopleHandling.count_personalized`).
        """
        if user_ids is not None:
            self.count_personalized(name, learner, user_ids)
        strict = arr.y != 0
        if not strict.any():
            return
        try:
            if user_ids is not None:
                p = learner.predict_proba_many(arr.X_left, arr.X_right, arr.context, user_ids=user_ids)
            else:
                p = learner.predict_proba_many(arr.X_left, arr.X_right, arr.context)
        except Exception:  # noqa: BLE001 - not fitted yet, or rows it cannot score: learn_many decides
            return
        n = len(arr.y)
        cuts = [] if at is None or not self.keep_curve else self._curve_cuts(name, at - n, at)
        pos = 0
        for c in cuts + ([n] if not cuts or cuts[-1] != n else []):
            sm = strict[pos:c]
            ys, ps = (arr.y[pos:c][sm] == 1).tolist(), p[pos:c][sm].tolist()
            if ys:
                update_progressive(*self.progressive[name], ys, ps)
                self.monitor.observe_losses(name, ys, ps)
            if at is not None and c in cuts:
                self._curve_point(name, at - n + c)
            pos = c

    def score_one(self, name: str, learner, ex) -> None:
        """Predict one example before it is learned (progressive validation); ties (outcome 0) are not scored."""
        if ex.outcome == 0:
            return
        try:
            p = float(learner.predict_proba_one(ex.left, ex.right, ex.context)[1])
        except Exception:  # noqa: BLE001 - not fitted yet, or features it cannot score: learn_one decides
            return
        y = ex.outcome == 1
        update_progressive(*self.progressive[name], [y], [p])
        self.monitor.observe_loss(name, y, p)

    def _curve_cuts(self, name: str, start: int, stop: int) -> list[int]:
        """Positions ``c`` (1 … stop − start) in a chunk of counts ``start + 1 … stop`` where a curve point is due."""
        last = self._curve_at.get(name, 0)
        nxt = max(last + 1, math.ceil(last * (1 + CURVE_GROWTH)), start + 1)
        cuts = []
        while nxt <= stop:
            cuts.append(nxt - start)
            nxt = max(nxt + 1, math.ceil(nxt * (1 + CURVE_GROWTH)))
        if cuts:
            self._curve_at[name] = start + cuts[-1]
        return cuts

    def _curve_point(self, name: str, at: int) -> None:
        """A learning-curve point of ``name`` at ``at`` events (none while the ROC AUC is undefined)."""
        v = progressive_values(*self.progressive[name])
        if v["roc_auc"] is not None:
            self._append_point(name, at, v)

    def _append_point(self, name: str, at: int, values: dict) -> None:
        self.curve.append({"events": int(at), "model": name, **values, "t": round(time.monotonic() - self._t0, 3)})

    def end_curve(self) -> None:
        """Close the learning curve: a point at each model's final event count, where that is past
        its last point and something was scored (the end of a file, a worker stopping)."""
        if not self.keep_curve:
            return
        for name in self.models:
            n = int(self.tally[name]["learned"])
            v = progressive_values(*self.progressive[name])
            if v["accuracy"] is not None and n > self._curve_at.get(name, 0):
                self._curve_at[name] = n
                self._append_point(name, n, v)

    def drain_curve(self) -> list[dict]:
        """The learning-curve points taken since the last call, oldest first."""
        out = list(self.curve)
        self.curve.clear()
        return out
