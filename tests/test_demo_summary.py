"""The demo's scraper and summary on fake /metrics scrapes: fresh final metrics, None for "not measured",
the no-explanation warning; and the batch path's progressive values (river metrics) with None."""

from __future__ import annotations

import pytest
from river import metrics

from stream.batch import progressive_values
from stream.demo import scrape as scrape_mod
from stream.demo.scrape import MetricsScraper
from stream.demo.summary import format_summary, summarise


def _learner(learned: dict, acc: dict, auc: dict, ll: dict) -> dict:
    out = {}
    for name, d in (("prefstream_events_learned_total", learned), ("prefstream_progressive_accuracy", acc),
                    ("prefstream_progressive_roc_auc", auc), ("prefstream_progressive_log_loss", ll)):
        for m, v in d.items():
            out[(name, (("model", m),))] = float(v)
    return out


def _scraper(monkeypatch, learner_scrapes: list[dict], explainer: dict | None = None) -> MetricsScraper:
    """A scraper polled once per fake learner scrape (the explainer always answers ``explainer``)."""
    seq = iter(learner_scrapes)
    monkeypatch.setattr(scrape_mod, "scrape", lambda port, timeout=2.0: next(seq) if port == 1 else (explainer or {}))
    sc = MetricsScraper(1, 2)
    for _ in learner_scrapes:
        sc.poll()
    return sc


def _summary(sc: MetricsScraper, models: list[str], examples: int) -> dict:
    return summarise("train", models, [None] * examples, examples, 0, examples, 0, sc, [], [], 1.0, 1.0, 2.0, 1.0,
                     {}, {})


def test_last_progress_point_equals_final_when_gauges_lag_the_counter(monkeypatch):
    # the learner's counter moves first; its gauges follow up to a second later, at an unchanged count
    scrapes = [_learner({"capacity": 812}, {"capacity": 0.42}, {"capacity": 0.5}, {"capacity": 0.69}),
               _learner({"capacity": 1887}, {"capacity": 0.42}, {"capacity": 0.5}, {"capacity": 0.69}),
               _learner({"capacity": 1887}, {"capacity": 0.653}, {"capacity": 0.729}, {"capacity": 0.62})]
    sc = _scraper(monkeypatch, scrapes)
    s = _summary(sc, ["capacity"], 1887)
    last = s["progress"][-1]
    assert last["events"] == 1887
    assert (last["accuracy"], last["roc_auc"]) == (s["final"]["capacity"]["accuracy"], s["final"]["capacity"]["roc_auc"])
    assert (last["accuracy"], last["roc_auc"]) == (0.653, 0.729)
    assert [p["events"] for p in s["progress"]] == [812, 1887]  # the fresher gauges replace the count's point
    assert "@1887: acc 0.653 auc 0.729" in format_summary(s)


def test_a_moved_count_with_unchanged_gauges_is_not_a_point(monkeypatch):
    # the demo's warm-up: 400 events scored, then 2,529 at once; the once-a-second gauges lag the
    # per-batch counter for two scrapes — before, "@1400: acc 0.420 auc 0.500  @1900: acc 0.420 auc 0.500"
    cap = lambda n, a, u, l: _learner({"capacity": n}, {"capacity": a}, {"capacity": u}, {"capacity": l})  # noqa: E731
    scrapes = [cap(400, 0.42, 0.5, 0.69), cap(1400, 0.42, 0.5, 0.69), cap(1900, 0.42, 0.5, 0.69),
               cap(2929, 0.646, 0.722, 0.63)]
    sc = _scraper(monkeypatch, scrapes)
    assert [(p["events"], p["accuracy"]) for p in sc.progress] == [(400, 0.42), (2929, 0.646)]
    s = _summary(sc, ["capacity"], 2929)
    assert "@1400" not in format_summary(s) and "@2929: acc 0.646 auc 0.722" in format_summary(s)


def test_unchanged_scrapes_add_no_point(monkeypatch):
    one = _learner({"capacity": 10}, {"capacity": 0.6}, {"capacity": 0.7}, {"capacity": 0.6})
    sc = _scraper(monkeypatch, [one, dict(one), dict(one)])
    assert len(sc.progress) == 1


def test_never_scored_model_is_none_not_zero(monkeypatch):
    scrapes = [_learner({"capacity": 100, "gpm": 100}, {"capacity": 0.49, "gpm": 0.0}, {"capacity": 0.599, "gpm": 0.0},
                        {"capacity": 0.7, "gpm": 0.0})]
    s = _summary(_scraper(monkeypatch, scrapes), ["capacity", "gpm"], 100)
    assert s["final"]["gpm"] == {"accuracy": None, "roc_auc": None, "log_loss": None}
    assert s["final"]["capacity"] == {"accuracy": 0.49, "roc_auc": 0.599, "log_loss": 0.7}
    assert "gpm       @100: acc n/a auc n/a" in format_summary(s)


def test_single_class_auc_is_none(monkeypatch):
    scrapes = [_learner({"capacity": 50}, {"capacity": 0.95}, {"capacity": 0.0}, {"capacity": 0.2})]
    s = _summary(_scraper(monkeypatch, scrapes), ["capacity"], 50)
    assert s["final"]["capacity"] == {"accuracy": 0.95, "roc_auc": None, "log_loss": 0.2}


def test_no_explanation_warns_with_readable_skips(monkeypatch):
    explainer = {("prefstream_explanations_skipped_total", (("reason", "no_model"),)): 59.0}
    scrapes = [_learner({"capacity": 100}, {"capacity": 0.5}, {"capacity": 0.6}, {"capacity": 0.7})]
    text = format_summary(_summary(_scraper(monkeypatch, scrapes, explainer), ["capacity"], 100))
    assert "skipped 59 (no model snapshot yet 59)" in text
    assert "{'no_model'" not in text
    assert "WARNING: no explanation. the explainer had no model snapshot for the 59 sampled events" in text
    assert "snapshot_every_events" in text


def test_error_sheds_are_reported_with_their_exception_class(monkeypatch):
    """Issue 22 item 6: a method's failures show which exception (the shed counter's ``error`` label)."""
    shed = "prefstream_explanations_shed_total"
    skip = "prefstream_explanations_skipped_total"   # every shed is a skip too (ExplainerLoop.shed)
    explainer = {(skip, (("reason", "no_model"),)): 2.0, (skip, (("reason", "duplicate"),)): 3.0,
                 (skip, (("reason", "error"),)): 7.0,       # 6 sheds + 1 failed request (no class)
                 (shed, (("method", "pref-shap"), ("reason", "error"), ("error", "LinAlgError"))): 4.0,
                 (shed, (("method", "sharp-rank"), ("reason", "error"), ("error", "ValueError"))): 2.0,
                 (shed, (("method", "sharp-rank"), ("reason", "duplicate"), ("error", ""))): 3.0}
    scrapes = [_learner({"capacity": 100}, {"capacity": 0.5}, {"capacity": 0.6}, {"capacity": 0.7})]
    s = _summary(_scraper(monkeypatch, scrapes, explainer), ["capacity"], 100)
    assert s["explanations_skipped"] == {"no_model": 2, "duplicate": 3, "error": 1, "error (LinAlgError)": 4,
                                         "error (ValueError)": 2}


def _metrics(pairs):
    acc, ll, auc = metrics.Accuracy(), metrics.LogLoss(), metrics.RollingROCAUC()
    for y, p in pairs:
        acc.update(y, p > 0.5)
        ll.update(y, p)
        auc.update(y, p)
    return acc, ll, auc


def test_progressive_values_none_when_not_measured():
    assert progressive_values(*_metrics([])) == {"accuracy": None, "log_loss": None, "roc_auc": None}
    v = progressive_values(*_metrics([(True, 0.9), (True, 0.4), (True, 0.7)]))  # one class: AUC undefined
    assert v["roc_auc"] is None and v["accuracy"] == pytest.approx(2 / 3)
    v = progressive_values(*_metrics([(True, 0.9), (False, 0.4), (True, 0.3), (False, 0.2)]))
    # positives' scores {0.9, 0.3} vs negatives' {0.4, 0.2}: 3 of 4 pairs ordered, AUC 0.75
    assert v["roc_auc"] == pytest.approx(0.75, abs=0.05) and v["accuracy"] == pytest.approx(0.75)
