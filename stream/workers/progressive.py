"""Progressive validation metrics of the learner, updated a batch at a time.

Every scored event is predicted before it is learned (progressive validation, Blum, Kalai &
Langford 1999) and folded into river's ``Accuracy``, ``LogLoss`` and ``RollingROCAUC``.
:func:`update_progressive` gives those three objects exactly the state that one ``update`` call
per event gives them (``tests/test_progressive.py`` compares both), at a fraction of the cost:
the accuracy's confusion matrix takes its four cells as counts, the log loss's running mean is
the same recursion ``n += 1; mean += (x − mean) / n`` in one local loop; only the rolling ROC AUC
(river's Rust implementation) takes one call per event. Measured in ``bench/catchup.py
--profile-events``: the per-event river calls were a third of the progressive-validation time of
three models.
"""

from __future__ import annotations

import math
from typing import Sequence

__all__ = ["AUC_WINDOW", "new_progressive", "update_progressive"]

#: Events over which the progressive ROC AUC is computed exactly (river.metrics.RollingROCAUC).
AUC_WINDOW = 10_000

_LO, _HI = 1e-15, 1 - 1e-15  # river.metrics.base.BinaryMetric._clamp_proba


def new_progressive() -> tuple:
    """``(Accuracy, LogLoss, RollingROCAUC)`` of one model.

    ROC AUC over the last :data:`AUC_WINDOW` scored events, exact (rank-based): river's ``ROCAUC``
    bins probabilities into 10 thresholds, which flattens margin models whose σ(g) stays near 0.5.
    """
    from river import metrics as rm

    return rm.Accuracy(), rm.LogLoss(), rm.RollingROCAUC(window_size=AUC_WINDOW)


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
