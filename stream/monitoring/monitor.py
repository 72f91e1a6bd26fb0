"""Live global explanations and drift alarms (no Kafka: used by the workers and ``prefstream run``).

:class:`Monitor` turns the stream of explanation records into *global* explanations and watches
them and the progressive loss for drift:

* **Global importance.** Per (model, method) it keeps the last ``window`` attribution vectors
  in a ring buffer and exports the window's mean φ and mean |φ| per feature as the gauges
  ``prefstream_global_mean_phi`` / ``prefstream_global_mean_abs_phi{model, method, feature}``
  (every ``check_every`` explanations). Cardinality is bounded: the ``top_k`` features by mean |φ|
  get their own series and the rest are summed into ``feature="other"``; series of features that
  leave the top K are removed. The per-snapshot capacity indices (methods ``capacity-shapley``
  and ``capacity-interaction``, Grabisch's Shapley and interaction indices as used by Herin,
  Perny & Sokolovska 2024, Section 2) are not windowed: each record sets
  ``prefstream_capacity_shapley{model, feature}`` and ``prefstream_capacity_interaction{model, pair}``
  (top ``top_k`` by |value|, plus ``other``).
* **Explanation drift**, after ``warmup`` explanations (the model is still converging) the next
  ``window`` explanations are the *reference*. From then on, every ``check_every`` explanations
  once the current window no longer overlaps the reference:

  - *ranking* — nDCG@K (Järvelin & Kekäläinen 2002) of the current mean-|φ| ranking with the
    reference mean |φ| as relevance; an alarm when it falls below ``ndcg_threshold`` (0.9, the
    threshold the hosted batch monitors use);
  - *feature* — one ADWIN detector (Bifet & Gavaldà 2007, river's ``drift.ADWIN``) per feature on
    its share of the explanation's total |φ|, ``|φ_j| / Σ_k |φ_k|`` (bounded in [0, 1], as
    ADWIN's bound assumes). A detection *arms* the feature; an armed feature raises an alarm as
    soon as its share of the mean |φ| over the last ``window // 4`` explanations is at least
    ``min_effect`` away from its share in the reference window, and disarms when it comes back
    within ``min_effect / 2`` (the slow wander of an SGD model's weights is a real but
    irrelevant change).

  After an alarm the detectors restart: ``warmup`` explanations of cool-down, then a new
  reference.
* **Model drift**: ADWIN on the per-event progressive log loss (clipped to ``[0, 10]`` nats) of
  each model, started afresh after ``loss_warmup`` scored events (the learning phase's falling
  loss is not drift); an alarm only when the part ADWIN keeps has a higher mean loss than the
  part it drops (a model recovering after a change is also a change).

Every alarm increments ``prefstream_drift_total{model, kind}`` (kind ``model``, ``ranking`` or
``feature``), appends a drift record (``stream/schemas/drift.v1.json``) to :attr:`Monitor.alarms`
and to an outbox the workers publish to the ``topic_drift`` topic (:meth:`Monitor.drain`), and
:attr:`Monitor.history` keeps the window's mean |φ| at every check for the report's plot
(:func:`stream.monitoring.plots.plot_importance_drift`).

Examples
--------
>>> import numpy as np
>>> from explainers._result import Explanation
>>> from stream.metrics import build_metrics
>>> m = Monitor(build_metrics(), window=20, warmup=0, check_every=10, top_k=1)
>>> e = Explanation(values=np.tile([2.0, -1.0, 0.5], (20, 1)), base_values=np.zeros(20),
...                 feature_names=["a", "b", "c"], method="linear-shapley", model_name="m")
>>> m.observe(e)
[]
>>> {k: round(v, 3) for k, v in m.global_importance("m", "linear-shapley").items()}
{'a': 2.0, 'b': 1.0, 'c': 0.5}
>>> sorted(m.exported_features("m", "linear-shapley"))
['a', 'other']
>>> round(ndcg([3.0, 2.0, 1.0], [1.0, 2.0, 3.0], k=3), 4)   # reversed: (1 + 2/log2 3 + 3/2) / (3 + 2/log2 3 + 1/2)
0.79
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from typing import Any, Iterable, Mapping

import numpy as np

from learners.exceptions import InvalidParameterError

__all__ = ["DRIFT_KINDS", "Monitor", "drift_record_ok", "ndcg"]

#: ``kind`` label values of ``prefstream_drift_total`` and of drift records.
DRIFT_KINDS = ("model", "ranking", "feature")
#: methods whose records are per-snapshot global indices, not per-instance attributions
CAPACITY_METHODS = ("capacity-shapley", "capacity-interaction")
LOSS_CLIP = 10.0
#: history points and alarms kept in memory
MAX_KEPT = 20_000


def ndcg(reference: Iterable[float], current: Iterable[float], k: int = 20) -> float:
    """nDCG@k of the ranking by ``current`` with the ``reference`` importances as relevance.

    DCG = Σ_{i<k} rel_{π(i)} / log2(i + 2), π the order of ``current`` (descending), divided by the
    DCG of the reference's own order (Järvelin & Kekäläinen 2002). 1 when both rank the same
    top k; 1.0 also when every reference relevance is 0.

    Parameters
    ----------
    reference, current : array-like of shape (n_features,)
        Non-negative importances (mean |φ|) of the reference and the current window.
    k : int
    """
    rel = np.maximum(np.asarray(list(reference), dtype=float), 0.0)
    cur = np.asarray(list(current), dtype=float)
    k = max(1, min(int(k), rel.size))
    disc = 1.0 / np.log2(np.arange(2, k + 2))
    ideal = float(np.sort(rel)[::-1][:k] @ disc)
    if ideal <= 0.0:
        return 1.0
    order = np.argsort(-cur, kind="stable")[:k]
    return float(rel[order] @ disc / ideal)


def drift_record_ok(record: Mapping[str, Any]) -> None:
    """Validate a drift record against ``drift.v1.json`` (raises ``jsonschema.ValidationError``)."""
    import jsonschema

    from stream.contract import load_schema

    jsonschema.validate(dict(record), load_schema("drift"))


def _adwin(delta: float):
    from river.drift import ADWIN

    return ADWIN(delta=delta)


class _Window:
    """Ring buffer of the last ``size`` rows of φ and |φ| with running sums."""

    def __init__(self, names: tuple, size: int) -> None:
        self.names = names
        self.size = size
        d = len(names)
        self.phi = np.zeros((size, d))
        self.abs = np.zeros((size, d))
        self.n = 0  # rows ever added
        self.sum_phi = np.zeros(d)
        self.sum_abs = np.zeros(d)

    def add(self, row: np.ndarray) -> None:
        i = self.n % self.size
        a = np.abs(row)
        if self.n >= self.size:
            self.sum_phi -= self.phi[i]
            self.sum_abs -= self.abs[i]
        self.phi[i], self.abs[i] = row, a
        self.sum_phi += row
        self.sum_abs += a
        self.n += 1
        if i == self.size - 1:  # re-sum once per lap: no drift of the running sums
            self.sum_phi = self.phi.sum(0)
            self.sum_abs = self.abs.sum(0)

    def recent_abs_mean(self, m: int) -> np.ndarray:
        """Mean |φ| of the last ``m`` rows (at most the window)."""
        m = max(1, min(m, self.count))
        idx = (self.n - 1 - np.arange(m)) % self.size
        return self.abs[idx].mean(0)

    @property
    def count(self) -> int:
        return min(self.n, self.size)

    def means(self) -> tuple[np.ndarray, np.ndarray]:
        c = max(self.count, 1)
        return self.sum_phi / c, self.sum_abs / c


class _ExplanationWatch:
    """Window, reference and detectors of one (model, method)."""

    def __init__(self, names: tuple, mon: "Monitor") -> None:
        self.names = names
        self.window = _Window(names, mon.window)
        self.seen = 0
        self.restart(mon, 0)
        self.version = 0
        self.exported: set = set()

    def restart(self, mon: "Monitor", at: int) -> None:
        self.warm_until = at + mon.warmup          # cool-down ends
        self.ref_until = self.warm_until + mon.window  # reference = window at that point
        self.reference: np.ndarray | None = None
        self.adwins = [_adwin(mon.delta) for _ in self.names]
        self.armed: set = set()  # features whose ADWIN cut since the reference, waiting for min_effect


class Monitor:
    """Global importances, explanation drift and model drift of a stream of explanations.

    Parameters
    ----------
    metrics : stream.metrics.Metrics, optional
        Where the gauges and ``prefstream_drift_total`` live; without it nothing is exported.
    top_k : int, default 20
        Features (capacity pairs) exported by name; the rest are summed into ``other``.
    window : int, default 1000
        Explanations in the sliding window (and in the reference window).
    check_every : int, default 50
        Explanations between two checks (gauge update, nDCG, history point).
    warmup : int, default 2000
        Explanations ignored before the reference window (and after every alarm).
    ndcg_threshold : float, default 0.9
    delta : float, default 1e-4
        ADWIN confidence of the per-feature detectors.
    min_effect : float, default 0.1
        Smallest change of a feature's share of the mean |φ| (last ``window // 4`` explanations vs
        the reference window) that alarms. On the Pokémon benchmark the largest stationary change
        after warm-up was 0.057 (bench/results/explanation_drift.md).
    loss_delta : float, default 1e-3
        ADWIN confidence of the per-model loss detectors.
    loss_warmup : int, default 1000
        Scored events per model before loss alarms are allowed.
    clock : callable, default time.time

    Raises
    ------
    InvalidParameterError
        On a parameter out of range.
    """

    def __init__(self, metrics=None, *, top_k: int = 20, window: int = 1000, check_every: int = 50,
                 warmup: int = 2000, ndcg_threshold: float = 0.9, delta: float = 1e-4, min_effect: float = 0.1,
                 loss_delta: float = 1e-3, loss_warmup: int = 1000, clock=time.time) -> None:
        for name, v, ok in (("top_k", top_k, isinstance(top_k, int) and top_k >= 1),
                            ("window", window, isinstance(window, int) and window >= 2),
                            ("check_every", check_every, isinstance(check_every, int) and check_every >= 1),
                            ("warmup", warmup, isinstance(warmup, int) and warmup >= 0),
                            ("ndcg_threshold", ndcg_threshold, 0.0 < ndcg_threshold <= 1.0),
                            ("delta", delta, 0.0 < delta < 1.0),
                            ("min_effect", min_effect, 0.0 <= min_effect <= 1.0),
                            ("loss_delta", loss_delta, 0.0 < loss_delta < 1.0),
                            ("loss_warmup", loss_warmup, isinstance(loss_warmup, int) and loss_warmup >= 0)):
            if not ok:
                raise InvalidParameterError(f"The {name!r} parameter of Monitor is out of range. Got {v!r} instead.")
        self.metrics = metrics
        self.top_k, self.window, self.check_every, self.warmup = top_k, window, check_every, warmup
        self.ndcg_threshold, self.delta, self.min_effect = float(ndcg_threshold), float(delta), float(min_effect)
        self.loss_delta, self.loss_warmup = float(loss_delta), loss_warmup
        #: explanations behind the current level of a feature's share (feature alarms)
        self.recent = max(1, window // 4)
        self.clock = clock
        self._watch: dict[tuple[str, str], _ExplanationWatch] = {}
        self._loss: dict[str, list] = {}  # model -> [ADWIN, scored, version]
        self._cap_exported: dict[tuple[str, str], set] = {}
        self._outbox: deque = deque()
        self._lock = threading.Lock()
        #: the last ``MAX_KEPT`` drift records raised (also queued for :meth:`drain`)
        self.alarms: list[dict] = []
        #: ``{"model", "method", "position", "version", "mean_abs": {feature: value}, "ndcg"}`` per check,
        #: the last ``MAX_KEPT`` (a worker runs for months)
        self.history: deque = deque(maxlen=MAX_KEPT)

    @classmethod
    def from_settings(cls, settings, metrics=None) -> "Monitor":
        """A monitor with the ``monitor_*`` / ``drift_*`` settings (defaults where a setting is absent)."""
        kw = {}
        for name, key in (("top_k", "monitor_top_k"), ("window", "monitor_window"),
                          ("check_every", "monitor_check_every"), ("warmup", "monitor_warmup"),
                          ("ndcg_threshold", "drift_ndcg_threshold"), ("delta", "drift_delta"),
                          ("min_effect", "drift_min_effect")):
            if getattr(settings, key, None) is not None:
                kw[name] = getattr(settings, key)
        return cls(metrics, **kw)

    # ------------------------------------------------------------------ inputs
    def observe(self, explanation_or_records) -> list[dict]:
        """Fold explanations in; return the drift records this raised.

        Parameters
        ----------
        explanation_or_records : Explanation, dict or iterable of dict
            An :class:`explainers._result.Explanation` (one or a batch of instances) or
            explanation records (``explanation.v1.json``).
        """
        from explainers._result import Explanation

        if isinstance(explanation_or_records, Explanation):
            items = [explanation_or_records]
        elif isinstance(explanation_or_records, Mapping):
            items = [explanation_or_records]
        else:
            items = list(explanation_or_records)
        out: list[dict] = []
        with self._lock:
            for it in items:
                if isinstance(it, Mapping):
                    vals = it.get("values")
                    if vals is None:
                        continue
                    model, method, names = it.get("model_name") or "", it["method"], tuple(it["feature_names"])
                    version, extra = int(it.get("model_version") or 0), it.get("extra") or {}
                else:
                    vals, model, method, names = it.values, it.model_name or "", it.method, tuple(it.feature_names)
                    version, extra = int(it.model_version or 0), it.extra or {}
                rows = np.atleast_2d(np.asarray(vals, dtype=float))
                if rows.shape[-1] != len(names) or not np.all(np.isfinite(rows)):
                    continue  # never export non-finite state
                if method in CAPACITY_METHODS:
                    self._capacity(model, method, names, rows[-1], extra)
                    continue
                out.extend(self._explanations(model, method, names, version, rows))
        return out

    def observe_loss(self, model: str, y: bool, p: float, version: int = 0) -> list[dict]:
        """Fold one progressive prediction (``p`` = P(left preferred), ``y`` = left won) in."""
        return self.observe_losses(model, (y,), (p,), version)

    def observe_losses(self, model: str, y, p, version: int = 0) -> list[dict]:
        """Fold ``n`` progressive predictions in, in order (``y``, ``p``: sequences of length n), under
        one lock: ADWIN on the clipped, scaled loss of each; an alarm record when the recent part got
        worse."""
        out: list[dict] = []
        log = math.log
        warmup = self.loss_warmup
        with self._lock:
            st = self._loss.get(model)
            if st is None:
                st = self._loss[model] = [_adwin(self.loss_delta), 0, 0]
            st[2] = int(version)
            for yi, pi in zip(y, p):
                pi = min(max(float(pi), 1e-12), 1 - 1e-12)
                loss = min(-log(pi if yi else 1.0 - pi), LOSS_CLIP) / LOSS_CLIP
                st[1] += 1
                if st[1] == warmup + 1:  # forget the learning phase: its falling loss is no drift
                    st[0] = _adwin(self.loss_delta)
                det = st[0]
                h = det._helper  # river.drift.ADWIN's own width / total (its properties read these)
                w0 = h.get_width()
                m0 = h.get_total() / w0 if w0 else 0.0
                det.update(loss)
                if det.drift_detected and st[1] > warmup:
                    out += self._loss_alarm(model, st, loss, w0, m0, version)
        return out

    def _loss_alarm(self, model: str, st: list, loss: float, w0: float, m0: float, version: int) -> list[dict]:
        """ADWIN dropped the oldest part of the loss window: an alarm when the kept (recent) part has
        the higher mean (``w0``, ``m0``: width and mean before the last update)."""
        det = st[0]
        w1, m1 = det.width, det.estimation
        dropped = w0 + 1 - w1
        if dropped <= 0:
            return []
        m_old = (m0 * w0 + loss - m1 * w1) / dropped
        if m1 <= m_old:
            return []
        rec = self._record(model, version, "model", None, [], "log_loss_increase",
                           LOSS_CLIP * (m1 - m_old), 0.0, int(dropped), int(w1), st[1],
                           before=LOSS_CLIP * m_old, after=LOSS_CLIP * m1)
        return [rec]

    def drain(self) -> list[dict]:
        """Pop the drift records not yet published."""
        out = []
        while self._outbox:
            out.append(self._outbox.popleft())
        return out

    # ------------------------------------------------------------------ queries
    def global_importance(self, model: str, method: str) -> dict[str, float]:
        """Window mean |φ| per feature, descending."""
        w = self._watch.get((model, method))
        if w is None:
            return {}
        _, ma = w.window.means()
        order = np.argsort(-ma, kind="stable")
        return {w.names[i]: float(ma[i]) for i in order}

    def exported_features(self, model: str, method: str) -> set:
        """Feature label values currently exported for (model, method)."""
        w = self._watch.get((model, method))
        return set(w.exported) if w is not None else set()

    # ------------------------------------------------------------------ internals
    def _explanations(self, model, method, names, version, rows) -> list[dict]:
        key = (model, method)
        w = self._watch.get(key)
        if w is None or w.names != names:
            if w is not None:
                self._clear_gauges(model, method, w.exported)
            w = self._watch[key] = _ExplanationWatch(names, self)
            if self.metrics is not None:  # series from 0, so increase() in the alert rules sees the first alarm
                for kind in ("ranking", "feature"):
                    self.metrics.drift.labels(model=model, kind=kind)
        w.version = version
        out = []
        for row in rows:
            w.window.add(row)
            w.seen += 1
            if w.seen > w.warm_until and w.reference is not None:
                a = np.abs(row)
                tot = a.sum()
                share = a / tot if tot > 0 else np.full(a.size, 1.0 / a.size)
                for j, det in enumerate(w.adwins):
                    det.update(float(share[j]))
                    if det.drift_detected:
                        w.armed.add(j)
                if w.armed and w.seen >= w.ref_until + self.window:
                    rec = self._feature_alarm(w, model, method)
                    if rec is not None:
                        out.append(rec)
                        continue
            if w.seen == w.ref_until:
                w.reference = w.window.means()[1].copy()
            if w.seen % self.check_every == 0:
                rec = self._check(w, model, method)
                if rec is not None:
                    out.append(rec)
        return out

    def _shares(self, v: np.ndarray) -> np.ndarray:
        t = v.sum()
        return v / t if t > 0 else np.full(v.size, 1.0 / max(v.size, 1))

    def _feature_alarm(self, w, model, method) -> dict | None:
        ref = self._shares(w.reference)
        cur = self._shares(w.window.recent_abs_mean(self.recent))
        eff = np.abs(cur - ref)
        hit = [j for j in w.armed if eff[j] >= self.min_effect]
        w.armed -= {j for j in w.armed if eff[j] < self.min_effect / 2}  # back near the reference: disarm
        if not hit:
            return None
        j = max(hit, key=lambda i: eff[i])
        rec = self._record(model, w.version, "feature", method, [w.names[i] for i in sorted(hit, key=lambda i: -eff[i])],
                           "share_change", float(eff[j]), self.min_effect, self.window, int(w.adwins[j].width), w.seen,
                           before=float(ref[j]), after=float(cur[j]))
        w.restart(self, w.seen)
        return rec

    def _check(self, w, model, method) -> dict | None:
        mean_phi, mean_abs = w.window.means()
        score = None
        rec = None
        if w.reference is not None and w.seen >= w.ref_until + self.window:
            score = ndcg(w.reference, mean_abs, self.top_k)
            if score < self.ndcg_threshold:
                ref, cur = self._shares(w.reference), self._shares(mean_abs)
                moved = np.argsort(-np.abs(cur - ref), kind="stable")[: min(3, len(w.names))]
                rec = self._record(model, w.version, "ranking", method, [w.names[i] for i in moved], "ndcg", score,
                                   self.ndcg_threshold, self.window, w.window.count, w.seen)
                w.restart(self, w.seen)
        self.history.append({"model": model, "method": method, "position": w.seen, "version": w.version,
                             "mean_abs": dict(zip(w.names, map(float, mean_abs))), "ndcg": score})
        self._export(w, model, method, mean_phi, mean_abs, score)
        return rec

    def _record(self, model, version, kind, method, features, stat, value, threshold, n_ref, n_cur, position,
                before=None, after=None) -> dict:
        rec = {"schema_version": 1, "model": model, "version": max(int(version), 0), "kind": kind, "method": method,
               "features": list(features),
               "statistic": {"name": stat, "value": float(value), "threshold": float(threshold),
                             "before": before, "after": after},
               "windows": {"reference": int(max(n_ref, 0)), "current": int(n_cur)},
               "position": int(position), "detected_at": float(self.clock())}
        self.alarms.append(rec)
        del self.alarms[:-MAX_KEPT]
        self._outbox.append(rec)
        if self.metrics is not None:
            self.metrics.drift.labels(model=model, kind=kind).inc()
        return rec

    # ------------------------------------------------------------------ gauges
    def _topk(self, names, score) -> tuple[list[int], list[int]]:
        order = list(np.argsort(-np.abs(np.asarray(score)), kind="stable"))
        return order[: self.top_k], order[self.top_k:]

    def _export(self, w, model, method, mean_phi, mean_abs, score) -> None:
        m = self.metrics
        if m is None:
            return
        top, rest = self._topk(w.names, mean_abs)
        labels = {w.names[i]: (mean_phi[i], mean_abs[i]) for i in top}
        if rest:
            labels["other"] = (float(mean_phi[rest].sum()), float(mean_abs[rest].sum()))
        self._clear_gauges(model, method, w.exported - set(labels))
        for f, (p, a) in labels.items():
            m.global_mean_phi.labels(model=model, method=method, feature=f).set(float(p))
            m.global_mean_abs_phi.labels(model=model, method=method, feature=f).set(float(a))
        w.exported = set(labels)
        if score is not None:
            m.global_importance_ndcg.labels(model=model, method=method).set(score)

    def _clear_gauges(self, model, method, features) -> None:
        if self.metrics is None:
            return
        for f in features:
            for g in (self.metrics.global_mean_phi, self.metrics.global_mean_abs_phi):
                try:
                    g.remove(model, method, f)
                except KeyError:
                    pass

    def _capacity(self, model, method, names, phi, extra) -> None:
        m = self.metrics
        if m is None:
            return
        if method == "capacity-shapley":
            gauge, label = m.capacity_shapley, "feature"
            items = list(zip(names, phi))
        else:
            gauge, label = m.capacity_interaction, "pair"
            items = [(f"{a}×{b}", v) for a, b, v in (extra.get("pairs") or []) if v is not None]
        items = [(n, float(v)) for n, v in items if math.isfinite(float(v))]
        top, rest = self._topk([n for n, _ in items], [v for _, v in items])
        labels = {items[i][0]: items[i][1] for i in top}
        if rest:
            labels["other"] = float(sum(items[i][1] for i in rest))
        key = (model, method)
        for stale in self._cap_exported.get(key, set()) - set(labels):
            try:
                gauge.remove(model, stale)
            except KeyError:
                pass
        for n, v in labels.items():
            gauge.labels(**{"model": model, label: n}).set(v)
        self._cap_exported[key] = set(labels)
