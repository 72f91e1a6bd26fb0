"""HTML report of a prefstream run: progressive metrics and explanation plots as PNG files.

:func:`write_report` takes the run summary (as :mod:`stream.demo` or :mod:`stream.batch` build it)
and the explanation records emitted during the run, and writes ``index.html`` plus one PNG per
plot into a folder; :func:`rebuild_report` (``prefstream report --run-dir DIR``) redraws it later
from the run's ``summary.json`` and ``records.jsonl``:

* progressive accuracy and ROC AUC over events, one line per model;
* Pref-SHAP mean |φ| bars and beeswarm coloured by x_winner − x_loser (Hu, Chau et al. 2022,
  *Explaining Preferences with Shapley Values*, Figs 2–4);
* ShaRP waterfall for one item and box plots per 10 % rank stratum (Pliatsika et al. 2024,
  *ShaRP: Explaining Rankings and Preferences with Shapley Values*, Section 7.2);
* a distributional transition heatmap and importance bars with variance (Franceschi et al. 2024,
  *Explaining Probabilistic Models with Distributional Values*);
* capacity Shapley importances and the interaction heatmap (Herin, Perny & Sokolovska 2024,
  *Online Learning of Capacity-Based Preference Models*; Grabisch 1997);
* a mean |φ| bar chart for any other method.

A plot that fails is replaced by a note in the page (and logged); it never aborts the report.
"""

from __future__ import annotations

import html
import json
import logging
import math
import os
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from explainers._result import Explanation
from learners.exceptions import InvalidInputError

__all__ = ["combine_records", "rebuild_report", "report_title", "write_report"]

log = logging.getLogger(__name__)


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _scalar(v: Any) -> Any:
    """A per-record extra that is a one-element list (one instance) becomes its element."""
    return v[0] if isinstance(v, list) and len(v) == 1 and not isinstance(v[0], (list, dict)) else v


#: extra keys that describe the whole batch, not one instance (kept scalar when equal across records)
_BATCH_KEYS = {"qoi", "n_catalog", "normalizer", "max_coalition_size", "exact", "halve", "ties", "sample_size",
               "structure", "classes", "efficient", "origin", "k"}


def _stack(recs: list[Mapping[str, Any]]) -> Explanation:
    """The records as one batch (:meth:`Explanation.concat`); batch-level extras collapse to one value."""
    parts = []
    for r in recs:
        e = Explanation.from_record(r)
        e.extra = {k: _scalar(v) for k, v in e.extra.items()}
        parts.append(e)
    out = Explanation.concat(parts)
    out.model_version = max(p.model_version for p in parts)
    for k, vs in list(out.extra.items()):
        if k in _BATCH_KEYS and len(set(map(str, vs))) == 1:
            out.extra[k] = vs[0]
    if isinstance(out.extra.get("n_catalog"), list):  # catalogs grow in a stream: strata by the largest
        out.extra["n_catalog"] = max(out.extra["n_catalog"])
    return out


def combine_records(records: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], tuple[Explanation, Explanation, Explanation]]:
    """Group explanation records by (method, model).

    Returns, per group: the batch Explanation of all its records, the latest record as a
    one-instance Explanation (``Explanation.from_record``), and the latest record as a batch of one
    (per-instance ``extra`` entries as one-element lists, the form batch plots index).
    Records of a group must share feature names (the most common set wins; others are dropped).

    Examples
    --------
    >>> recs = Explanation(values=[[1.0, 0.0], [0.0, 2.0]], base_values=0.0, feature_names=["a", "b"],
    ...                    method="pref-shap", model_name="gpm").to_records(["e1", "e2"])
    >>> batch, last, last_batch = combine_records(recs)[("pref-shap", "gpm")]
    >>> batch.values.shape, last.instance_ids
    ((2, 2), ['e2'])
    """
    groups: dict[tuple[str, str], list[Mapping]] = defaultdict(list)
    for r in records:
        groups[(r["method"], r.get("model_name", ""))].append(r)
    out = {}
    for key, recs in groups.items():
        names = max({tuple(r["feature_names"]) for r in recs}, key=lambda t: sum(tuple(r["feature_names"]) == t for r in recs))
        recs = [r for r in recs if tuple(r["feature_names"]) == names and r.get("values") is not None]
        if recs:
            out[key] = (_stack(recs), Explanation.from_record(recs[-1]), _stack(recs[-1:]))
    return out


# --------------------------------------------------------------------------- plots
def _progress_plot(progress: list[Mapping], path: Path) -> None:
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")
    by_model: dict[str, list] = defaultdict(list)
    for p in progress:
        by_model[p["model"]].append(p)
    for model, pts in sorted(by_model.items()):
        ev = [p["events"] for p in pts]
        for ax, key in zip(axes, ("roc_auc", "accuracy")):
            ys = [p.get(key) for p in pts]
            if any(y is not None for y in ys):
                ax.plot(ev, [np.nan if y is None else y for y in ys], marker=".", label=model)
    evs = [p["events"] for p in progress if p.get("events")]
    for ax, lab in zip(axes, ("progressive ROC AUC", "progressive accuracy")):
        ax.set_xlabel("events learned")
        if evs and max(evs) > 20 * min(evs):  # the learner's points are ~3 % apart: a log axis spaces them evenly
            ax.set_xscale("log")
        ax.set_ylabel(lab)
        ax.axhline(0.5, color="grey", lw=0.6, ls=":")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Progressive validation (predict, then learn)")
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _mean_abs_bars(expl: Explanation, path: Path) -> None:
    plt = _plt()
    ma = expl.mean_abs()
    names = list(ma)[:20][::-1]
    fig, ax = plt.subplots(figsize=(6.5, 0.35 * len(names) + 1.3), layout="constrained")
    ax.barh(names, [ma[n] for n in names], color="#4c72b0")
    ax.set_xlabel("mean |value|")
    ax.set_title(f"{expl.method} — {expl.n_instances} explanations ({expl.model_name} v{expl.model_version})")
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _call(module: str, func: str) -> Callable:
    import importlib

    return getattr(importlib.import_module(module), func)


def _fig_saver(fn: Callable, *args, **kwargs) -> Callable[[Path], Any]:
    """draw(path) for plot functions that return a Figure or an Axes instead of saving."""

    def draw(path: Path):
        res = fn(*args, **kwargs)
        fig = getattr(res, "figure", res)
        if hasattr(fig, "savefig"):
            fig.savefig(path, dpi=120, bbox_inches="tight")
        return res

    return draw


def _plots_for(expl: Explanation, last: Explanation, last_batch: Explanation) -> list[tuple[str, Callable[[Path], Any]]]:
    """(caption, draw(path)) pairs for one method: the whole batch, its latest record, and that record as a batch."""
    m = expl.method
    plots: list[tuple[str, Callable[[Path], Any]]] = []
    if m in ("pref-shap", "pref-shap-context", "upm-shap", "concat-shap"):
        plots.append(("mean |φ| per feature", _fig_saver(_call("explainers.plots", "bar"), expl)))
        if expl.data is not None:
            plots.append(("beeswarm of φ coloured by x_winner − x_loser", _fig_saver(_call("explainers.plots", "beeswarm"), expl, color_label="x_winner − x_loser")))
    elif m in ("sharp-score", "sharp-rank", "sharp-topk"):
        plots.append(("waterfall of the latest explained item", lambda p: _call("explainers.sharp_plots", "waterfall")(last_batch, 0, path=p)))
        if "rank" in expl.extra and "n_catalog" in expl.extra and expl.n_instances >= 3:
            plots.append(("contributions per 10 % rank stratum", lambda p: _call("explainers.sharp_plots", "strata_boxplot")(expl, path=p)))
    elif m == "sharp-pairwise":
        plots.append(("pairwise contributions (latest pair)", lambda p: _call("explainers.sharp_plots", "pairwise_bars")(last_batch, 0, path=p)))
    elif m.startswith("distributional-"):
        if "transition" in last.extra:
            plots.append(("transition heatmap (latest explanation)",
                          lambda p: _call("explainers.distributional_plots", "plot_transition_heatmap")(last, path=p)))
        if "variance" in last.extra and "importance" in last.extra:
            plots.append(("importance with variance (latest explanation)",
                          lambda p: _call("explainers.distributional_plots", "plot_importance_bars")(last, path=p)))
    elif m == "capacity-shapley":
        plots.append(("Shapley importance (latest snapshot)", lambda p: _call("explainers.capacity_plots", "shapley_bars")(last, path=p)))
    elif m == "capacity-interaction":
        plots.append(("interaction indices (latest snapshot)", lambda p: _call("explainers.capacity_plots", "interaction_heatmap")(last, path=p)))
    if any(k in last.extra for k in ("stderr", "mean_stderr")):
        plots.append(("latest explanation with ± 1.96 standard errors (sampled estimator)",
                      _fig_saver(_call("explainers.plots", "errorbars"), last_batch, 0)))
    plots.append(("mean |value| per feature (all explanations)", lambda p: _mean_abs_bars(expl, p)))
    return plots


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return "nan" if not math.isfinite(v) else f"{v:.4g}"
    return html.escape(str(v))


def report_title(summary: Mapping[str, Any]) -> str:
    """The report's title, named after what produced the run: ``prefstream demo report — pokemon``
    (a demo summary names its ``dataset``) or ``prefstream run report — events.csv`` (its ``input``).

    Examples
    --------
    >>> report_title({"dataset": "train"}), report_title({"input": "/data/events.csv"})
    ('prefstream demo report — train', 'prefstream run report — events.csv')
    """
    if summary.get("dataset"):
        return f"prefstream demo report — {summary['dataset']}"
    if summary.get("input"):
        return f"prefstream run report — {Path(str(summary['input'])).name}"
    return "prefstream report"


def version_ranges(records: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], tuple[int, int]]:
    """``{(method, model): (lowest, highest model_version)}`` of the records.

    Examples
    --------
    >>> version_ranges([{"method": "a", "model_name": "m", "model_version": 3},
    ...                 {"method": "a", "model_name": "m", "model_version": 7}, {"method": "b", "model_version": 2}])
    {('a', 'm'): (3, 7), ('b', ''): (2, 2)}
    """
    out: dict[tuple[str, str], tuple[int, int]] = {}
    for r in records:
        key, v = (r.get("method", ""), r.get("model_name", "")), int(r.get("model_version") or 0)
        lo, hi = out.get(key, (v, v))
        out[key] = (min(lo, v), max(hi, v))
    return out


#: What the summary rows that are not self-explanatory mean (shown under the table when present).
ROW_NOTES = {
    "learner_cpu_s": "CPU seconds of the learner worker process (its refit process not included) from the end of "
                     "the warm-up to the last learned example.",
    "learner_cpu_examples": "Examples the learner learned in that interval: learner_cpu_examples / learner_cpu_s is "
                            "its examples per CPU-second.",
    "learn_seconds": "Seconds until the last record was learned (before waiting for a refit in flight).",
    "dead_letters_file": "Where the refused records went, one dead-letter record each, with the reason and the "
                         "input line (file mode).",
}


def reading_notes(summary: Mapping[str, Any], versions: Mapping[tuple[str, str], tuple[int, int]]) -> str:
    """The report's "How to read this report" section: the learning curve, the summary rows that need
    a word, the masked heatmap diagonals, and the model versions of the methods when they differ.

    Examples
    --------
    >>> html_ = reading_notes({"learner_cpu_s": 1.5}, {("pref-shap", "gpm"): (1, 7), ("capacity-shapley", "capacity"): (3, 3)})
    >>> "learner_cpu_s" in html_ and "capacity-shapley (capacity) v3" in html_ and "pref-shap (gpm) v1–v7" in html_
    True
    """
    items = ["<li><b>Learning curve.</b> Each point is the learner's own progressive validation at an event "
             "count: every event is predicted by the model before it learns it (in chunks that grow with what "
             "the model has learned, so the scoring model is at most max(4, n/8) events older than in a "
             "one-by-one pass; docs/workers.md), accumulated up to that count. Points are taken about 3 % "
             "apart in event count, so the early part of the curve is dense.</li>"]
    rows = [f"<li><b>{html.escape(k)}</b>: {html.escape(t)}</li>" for k, t in ROW_NOTES.items() if k in summary]
    if rows:
        items.append("<li><b>Summary rows.</b><ul>" + "".join(rows) + "</ul></li>")
    items.append("<li><b>Heatmaps.</b> The diagonal of a distributional transition heatmap is left blank: it is "
                 "the probability that adding the feature leaves the predicted class unchanged, which would "
                 "dwarf the transitions (its total is in the plot's title). The diagonal of a capacity "
                 "interaction heatmap is blank because a criterion has no interaction index with itself (its "
                 "importance is in the capacity-shapley section).</li>")
    spans = sorted(versions.items())
    if len({v for _, v in spans}) > 1:
        lst = ", ".join(f"{html.escape(m)} ({html.escape(mo)}) " + (f"v{lo}" if lo == hi else f"v{lo}–v{hi}")
                        for (m, mo), (lo, hi) in spans)
        items.append("<li><b>Model versions differ between methods</b>: " + lst + ". Each record explains the "
                     "model snapshot the explainer held when it explained that event (not when the event "
                     "arrived): a method whose queue is explained in one call carries the one version it held "
                     "then, one that works through its queue while snapshots arrive spans several, and one "
                     "that explains only some events (click sessions, a model not yet fitted) starts later. "
                     "Compare methods at equal versions.</li>")
    return "<h2>How to read this report</h2><ul>" + "".join(items) + "</ul>"


def write_report(out_dir: str | Path, summary: Mapping[str, Any], records: Iterable[Mapping[str, Any]]) -> Path:
    """Write ``index.html`` and the PNG plots of a run into ``out_dir``.

    Parameters
    ----------
    out_dir : path
        Created if missing; existing PNGs of the same names are overwritten.
    summary : mapping
        The run summary: ``dataset``, counts, ``progress`` (list of ``{"events", "model",
        "accuracy", "roc_auc"}``), ``models``, ``refits``, ``explanations`` per method.
    records : iterable of dict
        Explanation records (``explanation.v1``).

    Returns
    -------
    Path
        The ``index.html`` written.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plt = _plt()
    sections: list[str] = []
    n_img = 0

    def img(fname: str, caption: str) -> str:
        f = html.escape(fname)
        return (f'<figure><a href="{f}"><img src="{f}" alt="{html.escape(caption)}"></a>'
                f'<figcaption>{html.escape(caption)}</figcaption></figure>')

    progress = list(summary.get("progress") or [])
    if progress:
        _progress_plot(progress, out / "progress.png")
        sections.append("<h2>Learning</h2>" + img("progress.png", "progressive ROC AUC and accuracy over events"))
        n_img += 1
    if summary.get("click_log"):
        from stream.clickeval import click_log_html

        sections.append(click_log_html(summary["click_log"]))
    records = list(records)
    try:  # global importance over time with drift alarms (stream.monitoring.monitor replays the records)
        from stream.monitoring.plots import importance_drift_section

        drift_figs = [img(f, c) for f, c in importance_drift_section(records, out)]
    except Exception as exc:  # noqa: BLE001 - a broken plot must not lose the report
        log.warning("importance drift plot failed: %s", exc)
        drift_figs = []
    if drift_figs:
        sections.append("<h2>Global importance and drift</h2>" + "".join(drift_figs))
        n_img += len(drift_figs)
    rows = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{_fmt(v)}</td></tr>" for k, v in summary.items()
                   if not isinstance(v, (list, dict)))
    versions = version_ranges(records)
    sections.insert(0, reading_notes(summary, versions))
    groups = combine_records(records)
    for (method, model), (expl, last, last_batch) in sorted(groups.items()):
        figs = []
        for k, (caption, draw) in enumerate(_plots_for(expl, last, last_batch)):
            fname = f"{method}-{model}-{k}.png".replace("/", "_")
            try:
                res = draw(out / fname)
                if not (out / fname).exists() and res is not None and hasattr(res, "savefig"):
                    res.savefig(out / fname, dpi=120, bbox_inches="tight")
                if (out / fname).exists():
                    figs.append(img(fname, caption))
                    n_img += 1
            except Exception as exc:  # a broken plot must not lose the report
                log.warning("plot %s for %s failed: %s", caption, method, exc)
                figs.append(f"<p class=note>plot “{html.escape(caption)}” unavailable: {html.escape(str(exc))}</p>")
            finally:
                plt.close("all")
        top = ", ".join(expl.top_features(5))
        lat = expl.compute_time / max(expl.n_instances, 1) * 1e3
        lo, hi = versions.get((method, model), (expl.model_version, expl.model_version))
        vtxt = f"model v{lo}" if lo == hi else f"model v{lo}–v{hi}"
        sections.append(f"<h2>{html.escape(method)} <small>({html.escape(model)}, {expl.n_instances} explanations, "
                        f"{vtxt}, {lat:.1f} ms each on average)</small></h2><p>Top features: {html.escape(top)}</p>"
                        + "".join(figs))
    title = html.escape(report_title(summary))
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}}
figure{{display:inline-block;margin:.5em;vertical-align:top;max-width:100%}} img{{max-width:100%;border:1px solid #ddd}}
table{{border-collapse:collapse}} th,td{{border:1px solid #ddd;padding:.2em .6em;text-align:left}} .note{{color:#a00}}</style>
</head><body><h1>{title}</h1>
<table>{rows}</table>
{''.join(sections)}
<script>
window.addEventListener('load', function () {{
  var imgs = Array.prototype.slice.call(document.images);
  var ok = imgs.filter(function (i) {{ return i.complete && i.naturalWidth > 0; }}).length;
  document.body.setAttribute('data-images-total', imgs.length);
  document.body.setAttribute('data-images-loaded', ok);
}});
</script>
</body></html>"""
    path = out / "index.html"
    path.write_text(page, encoding="utf-8")
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str), encoding="utf-8")
    log.info("report: %s (%d images)", path, n_img)
    return path


def rebuild_report(run_dir: str | os.PathLike, out_dir: str | os.PathLike | None = None) -> Path:
    """Redraw the HTML report of a run from ``summary.json`` and ``records.jsonl`` in ``run_dir``.

    Returns
    -------
    Path
        The ``index.html`` written (into ``out_dir``, default ``run_dir``).

    Raises
    ------
    InvalidInputError
        If ``run_dir`` lacks ``summary.json`` or a file is not valid JSON.

    Examples
    --------
    >>> import tempfile
    >>> rebuild_report(tempfile.mkdtemp())  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    learners.exceptions.InvalidInputError: .../summary.json not found: --run-dir must be a folder written by `prefstream demo` or `prefstream run` (it holds summary.json and records.jsonl).
    """
    d = Path(run_dir)
    sp = d / "summary.json"
    if not sp.is_file():
        raise InvalidInputError(f"{sp} not found: --run-dir must be a folder written by `prefstream demo` or "
                                "`prefstream run` (it holds summary.json and records.jsonl).")
    try:
        summary = json.loads(sp.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise InvalidInputError(f"{sp} is not valid JSON: {exc}.") from None
    records = []
    rp = d / "records.jsonl"
    if rp.is_file():
        for k, line in enumerate(rp.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except ValueError as exc:
                    raise InvalidInputError(f"{rp}, line {k}: not valid JSON ({exc}).") from None
    return write_report(out_dir if out_dir is not None else d, summary, records)
