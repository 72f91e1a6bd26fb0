"""The demo's summary: what was replayed, learned and explained, as a dict and as printed text."""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

from stream import clickeval
from stream.demo.scrape import by_labels, histogram_quantile, measured

__all__ = ["format_summary", "read_curve", "summarise", "top_features"]


def _median(xs) -> float | None:
    xs = [x for x in xs if x is not None]
    return float(statistics.median(xs)) if xs else None


def read_curve(path) -> list[dict] | None:
    """The learner worker's learning curve (``progress_log``, JSON lines), or None when it wrote none."""
    import json
    from pathlib import Path

    p = Path(path)
    if not p.exists():
        return None
    out = []
    for line in p.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:  # a line cut by a killed worker
            continue
    return out


def summarise(name, models, stream_records, n_pref, n_click, examples, n_items, scraper, records,
               dead, replay_s, learn_s, wall, sample_rate, codes, params, warm_wait_s: float = 0.0,
               curve: list[dict] | None = None) -> dict[str, Any]:
    """The demo's summary. ``progress`` is the learner's own learning curve (``curve``: its progressive
    metrics at event counts, ≈ 32 · ln(n) points per model) when given, else the points scraped from
    its gauges about once a second."""
    learned = scraper.learner("prefstream_events_learned_total")
    final = {}
    for m in models:
        final[m] = measured(scraper.learner("prefstream_progressive_accuracy").get(m),
                            scraper.learner("prefstream_progressive_roc_auc").get(m),
                            scraper.learner("prefstream_progressive_log_loss").get(m))
    by_method: dict[str, list] = defaultdict(list)
    for r in records:
        by_method[r["method"]].append(r)
    expl = {}
    for method, recs in sorted(by_method.items()):
        tops = {}
        for model in sorted({r.get("model_name", "") for r in recs}):
            tops[model] = top_features([r for r in recs if r.get("model_name", "") == model], 3)
        expl[method] = {
            "count": len(recs),
            "models": sorted({r.get("model_name", "") for r in recs}),
            "median_latency_ms": (_median([r.get("compute_time_s") for r in recs]) or 0.0) * 1e3,
            "model_versions": [min(int(r.get("model_version", 0)) for r in recs), max(int(r.get("model_version", 0)) for r in recs)],
            "top_features": tops,
        }
    skipped = not_explained(scraper)
    ex_samples = scraper.latest.get("explainer", {})
    eligible = by_labels(ex_samples, "prefstream_explain_eligible_total", ("model", "method"))
    explained = by_labels(ex_samples, "prefstream_explained_events_total", ("model", "method"))
    shed = by_labels(ex_samples, "prefstream_explanations_shed_total", ("method", "reason"))
    dl_reasons: dict[str, int] = defaultdict(int)
    for d in dead:
        dl_reasons[str(d.get("reason", "?"))] += 1
    refits = defaultdict(list)
    for r in scraper.refits:
        refits[r["model"]].append({"events": r["events"], "duration_s": round(r["duration_s"], 3)})
    versions = {m: int(v) for m, v in scraper.learner("prefstream_model_version").items()}
    return {
        "dataset": name,
        "events_sent": len(stream_records),
        "preferences_sent": n_pref,
        "click_sessions_sent": n_click,
        "examples_sent": examples,
        "items_sent": n_items,
        "learned": {m: int(learned.get(m, 0)) for m in models},
        "dead_letters": len(dead),
        "dead_letter_reasons": dict(dl_reasons),
        "replay_s": round(replay_s, 2),
        "warm_wait_s": round(warm_wait_s, 1),
        "learn_s": round(learn_s, 2),
        "events_per_s": round(examples / max(learn_s, 1e-9), 1),
        "wall_s": round(wall, 1),
        "explain_sample_rate": sample_rate,
        "final": final,
        "model_versions": versions,
        "model_params": params,
        "refits": dict(refits),
        "explanations_total": len(records),
        "explanation_methods": len(by_method),
        "explanations": expl,
        "explanations_skipped": {k: int(v) for k, v in skipped.items()},
        # per model/method: events it could explain (sampled or not) and sampled events explained (the
        # explainer's counters), the shed per method and reason, and the p99 lag (bucket upper bound)
        "explain_by_method": {f"{m}/{k}": {"eligible": int(n), "explained": int(explained.get((m, k), 0))}
                              for (m, k), n in sorted(eligible.items())},
        "explanations_shed": {f"{k}/{r}": int(v) for (k, r), v in sorted(shed.items()) if v},
        "explanation_lag_p99_s": histogram_quantile(ex_samples, "prefstream_explanation_lag_seconds", 0.99, "method"),
        "p50_explain_ms": (_median([r.get("compute_time_s") for r in records]) or 0.0) * 1e3,
        "worker_exit_codes": codes,
        "progress": [{k: p.get(k) for k in ("events", "model", "accuracy", "roc_auc", "log_loss", "t")}
                     for p in (scraper.progress if curve is None else curve)],
        "progress_source": "scraped gauges" if curve is None else "learner curve (progressive metrics at event counts)",
        "ok": all(int(learned.get(m, 0)) >= examples for m in models) and not dead,
    }


def top_features(recs: list[dict], k: int = 3) -> list[str]:
    """The ``k`` features of largest mean |value| over records (the most common feature set).

    Examples
    --------
    >>> recs = [{"feature_names": ["a", "b", "c"], "values": [0.1, -2.0, 0.5]},
    ...         {"feature_names": ["a", "b", "c"], "values": [0.3, 1.0, None]}]
    >>> top_features(recs, 2)
    ['b', 'c']
    """
    import numpy as np

    if not recs:
        return []
    names = max({tuple(r["feature_names"]) for r in recs}, key=lambda t: sum(tuple(r["feature_names"]) == t for r in recs))
    rows = [[np.nan if v is None else float(v) for v in r["values"]] for r in recs
            if tuple(r["feature_names"]) == names and r.get("values") is not None]
    if not rows:
        return []
    with np.errstate(all="ignore"):
        m = np.nanmean(np.abs(np.asarray(rows, dtype=float)), axis=0)
    m = np.where(np.isfinite(m), m, -1.0)
    return [names[i] for i in np.argsort(-m, kind="stable")[:k]]


def _f(v, fmt=".3f") -> str:
    return "n/a" if v is None else format(v, fmt)


def not_explained(scraper) -> dict[str, float]:
    """Events and requests not explained, by reason: the explainer's skips (a shed — a sampled event a
    method did not explain — is counted there too, stream.workers.explainer_loop), with the ``error``
    sheds split by exception class (``"error (ValueError)"``)."""
    out = defaultdict(float, scraper.explainer("prefstream_explanations_skipped_total", "reason"))
    for cls, n in scraper.explainer("prefstream_explanations_shed_total", "error").items():
        if cls:  # the exception class of an ``error`` shed ("" for every other reason)
            out[f"error ({cls})"] += n
            out["error"] -= n
    return {k: v for k, v in out.items() if v > 0}


def _skipped(skipped: dict) -> str:
    """``"59 (no model snapshot yet 59)"`` from ``{"no_model": 59}``; ``"0"`` when none.

    Examples
    --------
    >>> _skipped({"no_model": 59, "timeout": 2})
    '61 (no model snapshot yet 59, timeout 2)'
    >>> _skipped({})
    '0'
    """
    n = sum(int(v) for v in skipped.values())
    if not n:
        return "0"
    names = {"no_model": "no model snapshot yet"}
    return f"{n} (" + ", ".join(f"{names.get(k, k.replace('_', ' '))} {int(v)}" for k, v in skipped.items() if v) + ")"


def _no_explanation_hint(skipped: dict) -> str:
    """Why a demo explained nothing, and what to change."""
    n = int(skipped.get("no_model", 0))
    if n:
        return (f"the explainer had no model snapshot for the {n} sampled events — replay more events "
                "(--max-events ≥ 2 × snapshot_every_events, 300 by default) or lower snapshot_every_events "
                "(stream.demo.run_demo(..., snapshot_every_events=...)).")
    if skipped:
        return f"every sampled event was skipped ({_skipped(skipped)}); see the explainer log."
    return "no event was sampled for explanation — raise the explain sample rate or replay more events."


def format_summary(s: dict) -> str:
    """The printed form of a demo summary.

    Examples
    --------
    >>> s = {"dataset": "train", "events_sent": 2, "preferences_sent": 2, "click_sessions_sent": 0, "examples_sent": 2,
    ...      "replay_s": 0.1, "learned": {"capacity": 2}, "events_per_s": 20.0, "dead_letters": 0, "progress": [],
    ...      "model_versions": {"capacity": 1}, "refits": {}, "explanations_total": 0, "explanation_methods": 0,
    ...      "explain_sample_rate": 1.0, "explanations_skipped": {}, "explanations": {}, "wall_s": 1.0}
    >>> print(format_summary(s))  # doctest: +NORMALIZE_WHITESPACE
    <BLANKLINE>
    === prefstream demo summary: train ===
    events replayed      2 (2 preferences, 0 click sessions → 2 examples) in 0.1 s
    events learned       capacity=2  (20.0 examples/s end to end)
    dead letters         0
    progressive validation (predict, then learn):
    model versions       capacity v1
    refits               none
    explanations         0 records, 0 methods (sample rate 1; skipped 0)
      WARNING: no explanation. no event was sampled for explanation — raise the explain sample rate or replay more events.
    wall time            1.0 s
    """
    lines = ["", f"=== prefstream demo summary: {s['dataset']} ===",
             f"events replayed      {s['events_sent']} ({s['preferences_sent']} preferences, {s['click_sessions_sent']} click "
             f"sessions → {s['examples_sent']} examples) in {s['replay_s']} s"
             + (f" of sending (+ {s['warm_wait_s']} s paused after the warm-up for the first models)"
                if s.get("warm_wait_s") else ""),
             "events learned       " + ", ".join(f"{m}={n}" for m, n in s["learned"].items())
             + f"  ({s['events_per_s']} examples/s end to end)",
             f"dead letters         {s['dead_letters']}" + (f" {s['dead_letter_reasons']}" if s["dead_letters"] else ""),
             "progressive validation (predict, then learn):"]
    by_model = defaultdict(list)
    for p in s["progress"]:
        by_model[p["model"]].append(p)
    for m, pts in by_model.items():
        pts = [p for p in pts if p["accuracy"] is not None or p["roc_auc"] is not None] or pts
        step = max(1, len(pts) // 6)
        shown = pts[::step][:6] + ([pts[-1]] if pts[::step][:6][-1] is not pts[-1] else [])
        lines.append(f"  {m:9s} " + "  ".join(f"@{p['events']}: acc {_f(p['accuracy'], '.3f')} auc {_f(p['roc_auc'], '.3f')}"
                                               for p in shown))
    lines.append("model versions       " + ", ".join(f"{m} v{v}" for m, v in s["model_versions"].items()))
    for m, rs in s["refits"].items():
        durs = [r["duration_s"] for r in rs]
        lines.append(f"refits {m:13s} {len(rs)} (durations {', '.join(f'{d:.2f}' for d in durs[:8])}"
                     f"{' …' if len(durs) > 8 else ''} s; median {statistics.median(durs):.2f} s)")
    if not s["refits"]:
        lines.append("refits               none")
    skipped = s["explanations_skipped"]
    lines.append(f"explanations         {s['explanations_total']} records, {s['explanation_methods']} methods "
                 f"(sample rate {s['explain_sample_rate']:.3g}; skipped {_skipped(skipped)})")
    if not s["explanations_total"]:
        lines.append("  WARNING: no explanation. " + _no_explanation_hint(skipped))
    for method, e in s["explanations"].items():
        tops = "; ".join(f"{m}: {', '.join(t)}" for m, t in e["top_features"].items())
        lines.append(f"  {method:27s} {e['count']:5d}  p50 {e['median_latency_ms']:8.1f} ms  "
                     f"v{e['model_versions'][0]}–{e['model_versions'][1]}  top: {tops}")
    if s.get("click_log"):
        lines += clickeval.format_click_summary(s["click_log"])
    if s.get("serve"):
        from stream.demo.serve import format_serve

        lines.append(format_serve(s["serve"]))
    lines.append(f"wall time            {s['wall_s']} s")
    if s.get("report"):
        lines.append(f"report               {s['report']}")
    return "\n".join(lines)

