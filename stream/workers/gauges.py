"""The learner worker's gauges: progressive metrics and the learners' own diagnostics."""

from __future__ import annotations

import math

from stream.workers.progressive import progressive_values

__all__ = ["push_learner_gauges"]

#: learner diagnostics exported as gauges: attribute (or key of ``learner.metrics()``) -> metric field
_DIAGNOSTICS = (("nonzero_masses", "capacity_nonzero_masses"),
                ("constraint_violation", "capacity_constraint_violation"),
                ("regret_proxy", "capacity_regret_proxy"))


def push_learner_gauges(progressive: dict, sources: dict, m) -> None:
    """Set the progressive accuracy / log loss / ROC AUC gauges per model and each learner's
    diagnostics (the capacity's non-zero masses, constraint violation, regret proxy); a
    non-finite diagnostic is never published.

    The progressive gauges read NaN while unmeasured (nothing scored yet; for the ROC AUC, one
    class seen so far): never 0.

    Parameters
    ----------
    progressive : dict of str to (Accuracy, LogLoss, RollingROCAUC)
    sources : dict of str to SourceState
    m : stream.metrics.Metrics
    """
    for name, (acc, ll, auc) in progressive.items():
        # unmeasured reads NaN, never 0 (river reads 0.0 before its first scored event, and an
        # undefined AUC as 0.0): a model that has scored nothing must not look like a bad one
        v = progressive_values(acc, ll, auc)
        m.progressive_accuracy.labels(model=name).set(_nan(v["accuracy"]))
        m.progressive_log_loss.labels(model=name).set(_nan(v["log_loss"]))
        m.progressive_roc_auc.labels(model=name).set(_nan(v["roc_auc"]))
    for st in sources.values():
        for name, slot in st.slots.items():
            try:  # the capacity learner reports its diagnostics as one dict (CapacityLearner.metrics)
                stats = dict(slot.learner.metrics()) if callable(getattr(slot.learner, "metrics", None)) else {}
            except Exception:  # noqa: BLE001 - a diagnostic must never stop learning
                stats = {}
            for attr, field in _DIAGNOSTICS:
                fn = stats.get(attr, getattr(slot.learner, attr, None))
                if fn is None:
                    continue
                try:
                    v = float(fn() if callable(fn) else fn)
                    if math.isfinite(v):  # never publish non-finite state (NaN before any example)
                        getattr(m, field).labels(model=name).set(v)
                except Exception:  # noqa: BLE001 - a diagnostic must never stop learning
                    pass


def _nan(v: float | None) -> float:
    return math.nan if v is None else float(v)
