"""Scraping the demo's workers: their Prometheus endpoints polled from a daemon thread.

The demo follows its workers only through what they export (``/metrics``), as a dashboard would:
learned counts and progressive metrics per model, refits, model versions, explanations.
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field

__all__ = ["MetricsScraper", "by_label", "measured", "scrape"]

log = logging.getLogger(__name__)


def scrape(port: int, timeout: float = 2.0) -> dict[tuple[str, tuple], float] | None:
    """``{(sample name, sorted labels): value}`` of a worker's /metrics, or None if it does not answer."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout) as r:
            text = r.read().decode("utf-8")
    except OSError:
        return None
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = float(s.value)
    return out


def by_label(samples: dict, name: str, label: str) -> dict[str, float]:
    """Sum of the samples of metric ``name`` per value of ``label``.

    Examples
    --------
    >>> s = {("learned", (("model", "gpm"), ("topic", "a"))): 3.0, ("learned", (("model", "gpm"), ("topic", "b"))): 2.0,
    ...      ("learned", (("model", "capacity"),)): 7.0, ("other", ()): 1.0}
    >>> by_label(s, "learned", "model")
    {'gpm': 5.0, 'capacity': 7.0}
    """
    out: dict[str, float] = defaultdict(float)
    for (n, labels), v in samples.items():
        if n == name:
            out[dict(labels).get(label, "")] += v
    return dict(out)


def by_labels(samples: dict, name: str, labels: tuple[str, ...]) -> dict[tuple, float]:
    """Sum of the samples of metric ``name`` per tuple of the values of ``labels``.

    Examples
    --------
    >>> s = {("n", (("a", "x"), ("b", "1"))): 2.0, ("n", (("a", "x"), ("b", "2"))): 3.0, ("n", (("a", "y"), ("b", "1"))): 1.0}
    >>> by_labels(s, "n", ("a", "b"))[("x", "2")], by_labels(s, "n", ("a",))
    (3.0, {('x',): 5.0, ('y',): 1.0})
    """
    out: dict[tuple, float] = defaultdict(float)
    for (n, lab), v in samples.items():
        if n == name:
            d = dict(lab)
            out[tuple(d.get(k, "") for k in labels)] += v
    return dict(out)


def histogram_quantile(samples: dict, name: str, q: float, label: str) -> dict[str, float]:
    """Per value of ``label``, the upper bound of the bucket of histogram ``name`` that holds quantile ``q``
    (an upper bound of the quantile; ``inf`` past the last finite bucket, nothing without observations).

    Examples
    --------
    >>> s = {("h_bucket", (("le", "1.0"), ("m", "a"))): 90.0, ("h_bucket", (("le", "5.0"), ("m", "a"))): 99.0,
    ...      ("h_bucket", (("le", "+Inf"), ("m", "a"))): 100.0}
    >>> histogram_quantile(s, "h", 0.99, "m"), histogram_quantile(s, "h", 0.5, "m")
    ({'a': 5.0}, {'a': 1.0})
    """
    buckets = by_labels(samples, f"{name}_bucket", (label, "le"))
    out = {}
    for key in sorted({k[0] for k in buckets}):
        cum = sorted((float(le), c) for (k, le), c in buckets.items() if k == key)
        total = cum[-1][1] if cum else 0.0
        if total > 0:
            out[key] = next(le for le, c in cum if c >= q * total)
    return out


def measured(accuracy: float | None, roc_auc: float | None, log_loss: float | None) -> dict[str, float | None]:
    """The progressive metrics read from the gauges, with None for "not measured".

    The learner's gauges read NaN while unmeasured (stream.workers.gauges): NaN (or a missing
    gauge) is None here. Workers of earlier versions exported river's raw values, 0.0 before the
    first scored prediction and for an undefined AUC: accuracy and AUC both 0 still reads as
    nothing scored, and an AUC of exactly 0 as undefined.

    Examples
    --------
    >>> nan = float("nan")
    >>> measured(nan, nan, nan)
    {'accuracy': None, 'roc_auc': None, 'log_loss': None}
    >>> measured(0.95, nan, 0.2)
    {'accuracy': 0.95, 'roc_auc': None, 'log_loss': 0.2}
    >>> measured(0.0, 0.0, 0.0)
    {'accuracy': None, 'roc_auc': None, 'log_loss': None}
    >>> measured(0.6, 0.7, 0.65)
    {'accuracy': 0.6, 'roc_auc': 0.7, 'log_loss': 0.65}
    """
    accuracy, roc_auc, log_loss = (None if v is None or v != v else v for v in (accuracy, roc_auc, log_loss))
    if not accuracy and not roc_auc:
        return {"accuracy": None, "roc_auc": None, "log_loss": None}
    return {"accuracy": accuracy, "roc_auc": roc_auc or None, "log_loss": log_loss}


@dataclass
class MetricsScraper:
    """Polls the learner's and explainer's Prometheus endpoints from a daemon thread.

    Attributes
    ----------
    progress : list of dict
        ``{"t", "events", "model", "accuracy", "roc_auc", "log_loss"}`` whenever a model's
        metric gauges changed since the previous scrape (or its first measured count). The learner
        pushes its gauges about once a second and its counters every batch: a scrape that shows a
        new count with the previous gauges is skipped (those gauges describe an earlier count), and
        one that shows the same count with new gauges replaces that count's point, so the last point
        of a model carries the gauges of its latest scrape (the summary's ``final``).
    refits : list of dict
        ``{"model", "t", "events", "duration_s"}`` per refit seen (durations from the histogram's
        sum increments; when several refits end between two scrapes they share the mean).
    latest : dict
        The last successful scrape of each role (``"learner"``, ``"explainer"``).
    """

    learner_port: int
    explainer_port: int
    interval: float = 1.0
    progress: list = field(default_factory=list)
    refits: list = field(default_factory=list)
    latest: dict = field(default_factory=dict)
    t0: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_learned: dict[str, tuple] = {}
        self._last_refit: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def start(self) -> "MetricsScraper":
        self._thread = threading.Thread(target=self._run, name="prefstream-demo-scraper", daemon=True)
        self._thread.start()
        return self

    def stop_thread(self) -> None:
        """Ask the polling thread to end (no final scrape, no wait)."""
        self._stop.set()

    def stop(self) -> None:
        """End the polling thread and scrape a last time."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.poll()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.poll()
            except Exception:  # noqa: BLE001 - a scrape hiccup must not kill the demo
                log.debug("scrape failed", exc_info=True)

    def poll(self, roles: tuple[str, ...] = ("learner", "explainer")) -> None:
        """Scrape the workers once (both, or only ``roles``) and record what changed."""
        t = time.monotonic() - self.t0
        with self._lock:
            for role, port in (("learner", self.learner_port), ("explainer", self.explainer_port)):
                if role not in roles:
                    continue
                s = scrape(port)
                if s is not None:
                    self.latest[role] = s
            s = self.latest.get("learner")
            if s is None:
                return
            learned = by_label(s, "prefstream_events_learned_total", "model")
            acc = by_label(s, "prefstream_progressive_accuracy", "model")
            auc = by_label(s, "prefstream_progressive_roc_auc", "model")
            ll = by_label(s, "prefstream_progressive_log_loss", "model")
            for model, n in sorted(learned.items()):
                point = {"events": int(n), "model": model,
                         **measured(acc.get(model), auc.get(model), ll.get(model))}
                key = (n, point["accuracy"], point["roc_auc"], point["log_loss"])
                prev = self._last_learned.get(model)
                if key == prev:
                    continue
                if prev is not None and prev[0] != n and prev[1:] == key[1:] and key[1] is not None:
                    # the count moved but the gauges did not (yet): they still describe an earlier
                    # count (the learner pushes them once a second, its counter every batch) — a
                    # point now would label stale metrics with the new count
                    continue
                self._last_learned[model] = key
                point["t"] = round(t, 2)
                if prev is not None and prev[0] == n:  # same count, fresher gauges: they belong to this count
                    for i in range(len(self.progress) - 1, -1, -1):
                        if self.progress[i]["model"] == model:
                            self.progress[i] = point
                            break
                else:
                    self.progress.append(point)
            cnt = by_label(s, "prefstream_refit_duration_seconds_count", "model")
            tot = by_label(s, "prefstream_refit_duration_seconds_sum", "model")
            for model, c in cnt.items():
                pc, ps = self._last_refit.get(model, (0.0, 0.0))
                if c > pc:
                    k = int(c - pc)
                    for _ in range(k):
                        self.refits.append({"model": model, "t": round(t, 2), "events": int(learned.get(model, 0)),
                                            "duration_s": (tot.get(model, 0.0) - ps) / k})
                    self._last_refit[model] = (c, tot.get(model, 0.0))

    # ----------------------------------------------------------------- readers
    def learner(self, name: str, label: str = "model") -> dict[str, float]:
        return by_label(self.latest.get("learner", {}), name, label)

    def explainer(self, name: str, label: str = "method") -> dict[str, float]:
        return by_label(self.latest.get("explainer", {}), name, label)

