"""Plot of global importances over time with the drift alarms marked (matplotlib, imported lazily).

:func:`plot_importance_drift` draws, per (model, method) history of :class:`stream.monitoring.monitor.Monitor`,
the window mean |φ| of the top features over the stream, the nDCG against the reference window
below it, and a vertical line per drift alarm (colour by kind). :func:`importance_drift_section`
replays explanation records through a fresh monitor for the HTML report.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Iterable, Mapping

__all__ = ["importance_drift_section", "plot_importance_drift"]

KIND_COLOURS = {"ranking": "#c44e52", "feature": "#dd8452", "model": "#8172b3"}


def plot_importance_drift(history: list[Mapping], alarms: list[Mapping], path, *, t0: float | None = None,
                          x: str = "position", top: int = 6, title: str = ""):
    """Write the importance-over-time plot of the first (model, method) of ``history`` to ``path``.

    Parameters
    ----------
    history : list of dict
        :attr:`Monitor.history` entries (``mean_abs``, ``ndcg``, and the x key).
    alarms : list of dict
        Drift records (:attr:`Monitor.alarms`), with the same x key.
    path : path
    t0 : float, optional
        A known change point to mark (benchmarks).
    x : str, default "position"
        Key of the x axis in history and alarms (``"event"`` in the benchmark).
    top : int
        Features drawn: the largest mean |φ| anywhere in the history.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not history:
        raise ValueError("plot_importance_drift needs a non-empty monitor history.")
    key = (history[0]["model"], history[0]["method"])
    hist = [h for h in history if (h["model"], h["method"]) == key]
    peak: dict[str, float] = defaultdict(float)
    for h in hist:
        for f, v in h["mean_abs"].items():
            peak[f] = max(peak[f], v)
    feats = sorted(peak, key=lambda f: -peak[f])[:top]
    xs = [h[x] for h in hist]
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(10, 5.6), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    for f in feats:
        ax.plot(xs, [h["mean_abs"].get(f, float("nan")) for h in hist], lw=1.4, label=f)
    ax2.plot(xs, [float("nan") if h["ndcg"] is None else h["ndcg"] for h in hist], color="#333", lw=1.2,
             label="nDCG vs reference")
    thr = next((a["statistic"]["threshold"] for a in alarms if a["kind"] == "ranking"), 0.9)
    ax2.axhline(thr, color=KIND_COLOURS["ranking"], ls=":", lw=1, label=f"threshold {thr:g}")
    seen = set()
    for a in alarms:
        if a.get("model") != key[0] or (a.get("method") not in (None, key[1])):
            continue
        lab = None if a["kind"] in seen else f"{a['kind']} drift alarm"
        seen.add(a["kind"])
        for axis in (ax, ax2):
            axis.axvline(a[x], color=KIND_COLOURS.get(a["kind"], "k"), lw=1.6, ls="--", label=lab if axis is ax else None)
    if t0 is not None:
        for axis in (ax, ax2):
            axis.axvline(t0, color="k", lw=1.0, alpha=0.6, label="true change (t0)" if axis is ax else None)
    ax.set_ylabel("window mean |φ|")
    ax.set_title(title or f"global importance over time — {key[0]} / {key[1]}")
    ax.legend(fontsize=8, ncol=3, loc="upper left")
    ax.grid(alpha=0.3)
    ax2.set_ylabel("nDCG")
    ax2.set_xlabel("events" if x == "event" else "explanations")
    ax2.set_ylim(0, 1.05)
    ax2.legend(fontsize=8, loc="lower left")
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(Path(path), dpi=120)
    plt.close(fig)
    return fig


def importance_drift_section(records: Iterable[Mapping], out_dir, settings=None) -> list[tuple[str, str]]:
    """Replay explanation records through a :class:`~stream.monitoring.monitor.Monitor`; one PNG per (model, method).

    Returns ``[(file name, caption)]`` of the plots written into ``out_dir`` (empty when no
    method reached a first check).
    """
    from stream.monitoring.monitor import Monitor

    mon = Monitor.from_settings(settings) if settings is not None else Monitor()
    mon.observe(list(records))
    keys = sorted({(h["model"], h["method"]) for h in mon.history})
    out = []
    for model, method in keys:
        hist = [h for h in mon.history if (h["model"], h["method"]) == (model, method)]
        if len(hist) < 2:
            continue
        al = [a for a in mon.alarms if a["model"] == model and a["method"] == method]
        fname = f"drift-{method}-{model}.png".replace("/", "_")
        plot_importance_drift(hist, al, Path(out_dir) / fname)
        out.append((fname, f"{method} ({model}): window mean |φ| over explanations, {len(al)} drift alarm(s) marked"))
    return out
