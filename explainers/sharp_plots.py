"""Plots of ShaRP explanations (Pliatsika et al. 2024, Section 7.2), fed by :class:`~explainers._result.Explanation`.

* :func:`waterfall` — one item: from the mean outcome, each feature's contribution, to the item's
  outcome (Figure 2). For ``"sharp-rank"`` the axis is the rank itself (lower = better): the walk
  starts at the mean rank and each feature moves it by ``−φ_i`` positions; bars are red when the
  feature improves the outcome (``φ_i > 0``) and blue otherwise.
* :func:`strata_boxplot` — contributions of many items aggregated over 10 % rank strata, one box
  per feature and stratum (Figures 3, 4a, 5, 10).
* :func:`pairwise_bars` — contributions of a pairwise explanation from the first item's point of
  view (Figures 4c, 4d).

matplotlib is imported lazily (:mod:`explainers._plotting`); every function returns the
``matplotlib.figure.Figure`` and saves it when ``path`` is given.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from explainers._result import Explanation
from explainers.exceptions import InvalidInputError
from explainers.sharp import rank_strata
from explainers._plotting import pyplot as _plt

__all__ = ["pairwise_bars", "strata_boxplot", "waterfall"]

POS, NEG = "#d62728", "#1f77b4"


def _save(fig: Any, path: Any) -> Any:
    if path is not None:
        fig.savefig(path, dpi=120, bbox_inches="tight")
    return fig


def _check(expl: Any, methods: tuple[str, ...]) -> None:
    if not isinstance(expl, Explanation):
        raise InvalidInputError(f"Expected an Explanation; got {type(expl).__name__}.")
    if not expl.method.startswith("sharp-") or (methods and expl.method not in methods):
        raise InvalidInputError(f"This plot needs a {' / '.join(methods) or 'sharp-*'} explanation; got {expl.method!r}.")


def waterfall(expl: Explanation, i: int = 0, path: Any = None, title: str | None = None) -> Any:
    """Waterfall plot of one explained item (Figure 2 of Pliatsika et al. 2024).

    Parameters
    ----------
    expl : Explanation
        ``sharp-score``, ``sharp-rank``, ``sharp-topk`` or ``sharp-pairwise``.
    i : int
        Instance index in a batch explanation.
    path : str or Path, optional
        Save the figure there (PNG by suffix).
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
        Bars are ordered by ``|φ|`` (largest at the top); ``fig.axes[0].patches`` are the bars in
        plotting order and each bar's ``gid`` is its feature name.

    Raises
    ------
    InvalidInputError
        Not a ShaRP explanation, or ``i`` out of range.
    """
    _check(expl, ())
    if not 0 <= i < expl.n_instances:
        raise InvalidInputError(f"Instance {i} out of range for an explanation of {expl.n_instances} instances.")
    e = expl[i]
    phi = e.values
    rank_space = expl.method in ("sharp-rank",) or (expl.method == "sharp-pairwise" and expl.extra.get("qoi") == "rank")
    sign = -1.0 if rank_space else 1.0          # walk in rank positions for the rank QoI
    start = sign * float(np.asarray(e.base_values).reshape(-1)[0])
    end = sign * float(np.asarray(e.prediction).reshape(-1)[0]) if e.prediction is not None else start + sign * phi.sum()
    order = np.argsort(-np.abs(phi), kind="stable")
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(phi) + 1.8))
    walk = [start]
    for j in order:
        walk.append(walk[-1] + sign * phi[j])
    for k, j in enumerate(order):
        y = len(order) - 1 - k
        left, step = walk[k], sign * phi[j]
        bar = ax.barh(y, step, left=left, color=POS if phi[j] > 0 else NEG, height=0.6)[0]
        bar.set_gid(expl.feature_names[j])
    ax.set_yticks(range(len(order)))
    ax.set_yticklabels([f"{expl.feature_names[j]}  ({phi[j]:+.3g})" for j in order[::-1]])
    lo, hi = min(walk + [end]), max(walk + [end])
    pad = 0.06 * (hi - lo if hi > lo else 1.0)
    ax.set_xlim(lo - pad, hi + pad)
    ax.axvline(start, color="grey", ls="--", lw=0.8)
    ax.axvline(end, color="black", ls="-", lw=0.8)
    qoi = expl.extra.get("qoi", "")
    what = "rank (lower is better)" if rank_space else (qoi or "outcome")
    base_lbl = "mean rank" if rank_space else "E[QoI]"
    ax.set_xlabel(f"{what}: {base_lbl} = {start:.4g}  →  item = {end:.4g}")
    if rank_space:
        ax.invert_xaxis()
    ident = (expl.instance_ids or [str(i)] * expl.n_instances)[i]
    ax.set_title(title or f"{expl.method} — {ident}")
    return _save(fig, path)


def strata_boxplot(expl: Explanation, n_strata: int = 10, path: Any = None, title: str | None = None) -> Any:
    """Box plots of contributions per rank stratum and feature (Section 7.2; Figures 3, 4a).

    Items are put into strata by their catalog rank (``extra["rank"]``, ``extra["n_catalog"]``; see
    :func:`explainers.sharp.rank_strata`); stratum 0 (left) is the top ``100/n_strata`` %.

    Returns
    -------
    matplotlib.figure.Figure
        The median line of the box of stratum ``s`` and feature ``f`` has ``gid`` ``"median-s-f"``.

    Raises
    ------
    InvalidInputError
        Not a batch ShaRP item explanation with ranks.
    """
    _check(expl, ("sharp-score", "sharp-rank", "sharp-topk"))
    ranks = np.asarray(expl.extra.get("rank", []), dtype=float).reshape(-1)
    n = expl.extra.get("n_catalog")
    V = expl.values.reshape(expl.n_instances, -1)
    if n is None or ranks.size != V.shape[0]:
        raise InvalidInputError("strata_boxplot needs extra['rank'] per instance and extra['n_catalog'].")
    st = rank_strata(ranks, int(n), n_strata)
    d = V.shape[1]
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(8, 1.1 * n_strata * max(1, d) / 2.5), 4.5))
    colors = plt.get_cmap("tab10").colors
    width = 0.8 / d
    for f in range(d):
        data, positions, labels = [], [], []
        for s in range(n_strata):
            sel = V[st == s, f]
            if sel.size == 0:
                continue
            data.append(sel)
            positions.append(s + (f - (d - 1) / 2) * width)
            labels.append(s)
        if not data:
            continue
        bp = ax.boxplot(data, positions=positions, widths=width * 0.9, patch_artist=True, manage_ticks=False,
                        showfliers=True, flierprops={"markersize": 2})
        for patch in bp["boxes"]:
            patch.set_facecolor(colors[f % 10])
            patch.set_alpha(0.75)
        for line, s in zip(bp["medians"], labels):
            line.set_color("black")
            line.set_gid(f"median-{s}-{expl.feature_names[f]}")
        ax.plot([], [], color=colors[f % 10], lw=6, label=expl.feature_names[f])
    step = 100 / n_strata
    ax.set_xticks(range(n_strata))
    ax.set_xticklabels([f"{s * step:g}-{(s + 1) * step:g}%" for s in range(n_strata)], rotation=30, fontsize=8)
    ax.axhline(0, color="grey", lw=0.8)
    qoi = expl.extra.get("qoi", "")
    ax.set_ylabel(f"contribution to {qoi}" + (" (positions gained)" if qoi == "rank" else ""))
    ax.set_xlabel("rank stratum")
    ax.legend(fontsize=8, ncol=min(d, 5))
    ax.set_title(title or f"{expl.method}: contributions per {step:g}% stratum ({V.shape[0]} items)")
    return _save(fig, path)


def pairwise_bars(expl: Explanation, i: int = 0, path: Any = None, title: str | None = None) -> Any:
    """Bar chart of a pairwise explanation from the first item's point of view (Figures 4c/4d).

    Returns
    -------
    matplotlib.figure.Figure
        One bar per feature in feature order (``fig.axes[0].patches``), height ``φ_i``.

    Raises
    ------
    InvalidInputError
        Not a ``sharp-pairwise`` explanation, or ``i`` out of range.
    """
    _check(expl, ("sharp-pairwise",))
    if not 0 <= i < expl.n_instances:
        raise InvalidInputError(f"Pair {i} out of range for an explanation of {expl.n_instances} pairs.")
    phi = expl.values.reshape(expl.n_instances, -1)[i]
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(5, 0.9 * len(phi) + 2), 3.8))
    ax.bar(range(len(phi)), phi, color=[POS if p > 0 else NEG for p in phi])
    ax.set_xticks(range(len(phi)))
    ax.set_xticklabels(expl.feature_names, rotation=20)
    ax.axhline(0, color="grey", lw=0.8)
    x = expl.extra
    ids = expl.instance_ids[i] if expl.instance_ids else f"pair {i}"
    if x.get("qoi") == "rank":
        sub = f"rank {x['rank'][i]:g} vs {x['rank_other'][i]:g}: Σφ = {phi.sum():+.3g} positions"
    else:
        sub = f"Σφ = {phi.sum():+.3g}"
    ax.set_ylabel(f"contribution ({x.get('qoi', '')})")
    ax.set_title(title or f"{ids}\n{sub}", fontsize=10)
    return _save(fig, path)
