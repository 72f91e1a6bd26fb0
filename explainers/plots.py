"""Plots of :class:`explainers._result.Explanation` objects (bar and beeswarm, Hu et al. 2022 Figs 2–4).

Every function takes an ``Explanation`` (any method: Pref-SHAP, linear, capacity, ShaRP, …),
imports matplotlib lazily (:mod:`explainers._plotting`), draws on a given ``ax`` or a new figure, and
returns the ``matplotlib.axes.Axes`` (or the ``Figure`` for :func:`summary`). Computation lives in
the explainers; these functions only read ``values``, ``data`` and ``feature_names``.

* :func:`bar` — mean |φ| per feature, largest on top (the bar plots of Figs 2–4).
* :func:`beeswarm` — one row per feature, one dot per explained instance at its φ, dots spread
  vertically where they are dense, coloured by ``data`` (for Pref-SHAP with an ``outcome``:
  x_winner − x_loser, red = winner had the larger value, as in the paper's beehive plots).
* :func:`summary` — bar and beeswarm side by side, optionally saved to a PNG.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from explainers._result import Explanation
from learners.exceptions import InvalidInputError
from explainers._plotting import pyplot as _plt

__all__ = ["bar", "beeswarm", "errorbars", "standard_errors", "summary"]


def _check(expl) -> np.ndarray:
    if not isinstance(expl, Explanation):
        raise InvalidInputError(f"plots expect an explainers Explanation; got {type(expl).__name__}.")
    v = np.asarray(expl.values, dtype=np.float64)
    return v.reshape(1, -1) if v.ndim == 1 else v


def _order(values: np.ndarray, max_display: int) -> np.ndarray:
    """Feature indices by decreasing mean |φ|, at most ``max_display``."""
    return np.argsort(-np.abs(values).mean(axis=0), kind="stable")[:max_display]


def bar(expl: Explanation, ax=None, max_display: int = 10, title: str | None = None, color: str = "#1f77b4"):
    """Horizontal bars of mean |φ| per feature, largest on top.

    Parameters
    ----------
    expl : Explanation
        Values of shape (n_features,) or (n_instances, n_features).
    ax : matplotlib Axes, optional
    max_display : int, default 10
    title : str, optional
        Default: ``"<method>: mean |φ|"``.

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    InvalidInputError
        If ``expl`` is not an :class:`Explanation`.
    """
    v = _check(expl)
    plt = _plt()
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 0.4 * min(max_display, v.shape[1]) + 1.2))
    idx = _order(v, max_display)[::-1]
    ax.barh(np.arange(len(idx)), np.abs(v).mean(axis=0)[idx], color=color)
    ax.set_yticks(np.arange(len(idx)))
    ax.set_yticklabels([expl.feature_names[i] for i in idx])
    ax.set_xlabel("mean |φ|")
    ax.set_title(title if title is not None else f"{expl.method}: mean |φ| (n={v.shape[0]})")
    return ax


def _swarm_offsets(x: np.ndarray, width: float = 0.4, nbins: int = 60, rng=None) -> np.ndarray:
    """Vertical offsets that spread dots where their φ values are dense (a simple beeswarm)."""
    if x.size == 0:
        return x
    lo, hi = float(np.min(x)), float(np.max(x))
    if hi <= lo:
        hi = lo + 1.0
    b = np.minimum(((x - lo) / (hi - lo) * nbins).astype(int), nbins - 1)
    counts = np.bincount(b, minlength=nbins)
    peak = counts.max()
    off = np.zeros_like(x, dtype=float)
    rank = np.zeros(nbins, dtype=int)
    order = np.argsort((rng.random(x.size) if rng is not None else np.arange(x.size)))
    for i in order:                                  # alternate above/below the row centre
        k = rank[b[i]]
        rank[b[i]] += 1
        sign = 1 if k % 2 == 0 else -1
        off[i] = sign * ((k + 1) // 2) / max(peak / 2, 1) * width
    return off


def beeswarm(expl: Explanation, ax=None, max_display: int = 10, title: str | None = None,
             color_label: str | None = None, cmap: str = "coolwarm", s: float = 10.0, seed: int = 0):
    """One row per feature, one dot per instance at φ, coloured by ``expl.data``.

    Parameters
    ----------
    expl : Explanation
        ``values`` (n_instances, n_features); ``data`` of the same shape colours the dots
        (clipped to its 5th–95th percentiles per feature, like shap); grey when absent.
    ax : matplotlib Axes, optional
    max_display : int, default 10
    title : str, optional
    color_label : str, optional
        Colour-bar label; default ``"x_winner − x_loser"`` for oriented Pref-SHAP, else
        ``"feature value (data)"``.
    cmap : str, default "coolwarm" (blue low, red high)
    s : float, marker size;  seed : int, jitter order

    Returns
    -------
    matplotlib.axes.Axes
    """
    v = _check(expl)
    plt = _plt()
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 0.5 * min(max_display, v.shape[1]) + 1.2))
    data = None if expl.data is None else np.asarray(expl.data, dtype=np.float64).reshape(v.shape[0], -1)
    if data is not None and data.shape != v.shape:
        data = None
    idx = _order(v, max_display)[::-1]
    rng = np.random.default_rng(seed)
    sc = None
    for row, j in enumerate(idx):
        x = v[:, j]
        y = row + _swarm_offsets(x, rng=rng)
        if data is None:
            ax.scatter(x, y, s=s, c="#888888", linewidths=0)
            continue
        c = data[:, j]
        lo, hi = np.nanpercentile(c, [5, 95]) if c.size else (0.0, 1.0)
        if hi <= lo:
            lo, hi = float(np.min(c)) - 1e-12, float(np.max(c)) + 1e-12
        sc = ax.scatter(x, y, s=s, c=np.clip((c - lo) / (hi - lo), 0, 1), cmap=cmap, vmin=0, vmax=1, linewidths=0)
    ax.axvline(0.0, color="#999999", lw=0.8, zorder=0)
    ax.set_yticks(np.arange(len(idx)))
    ax.set_yticklabels([expl.feature_names[i] for i in idx])
    oriented = str(expl.extra.get("oriented", "")) == "winner-loser"
    ax.set_xlabel("φ (towards the winner)" if oriented else "φ (contribution to the model output)")
    ax.set_title(title if title is not None else f"{expl.method} (n={v.shape[0]})")
    if sc is not None:
        label = color_label or ("x_winner − x_loser" if oriented else "feature value (data)")
        cb = plt.colorbar(sc, ax=ax, ticks=[0, 1], fraction=0.05, pad=0.02)
        cb.ax.set_yticklabels(["low", "high"])
        cb.set_label(label)
    return ax


def summary(expl: Explanation, path: str | None = None, max_display: int = 10, title: str | None = None,
            dpi: int = 110):
    """Bar plot of mean |φ| and beeswarm side by side (the layout of Hu et al. 2022, Figs 2–4).

    Parameters
    ----------
    expl : Explanation
    path : str, optional
        If given, the figure is saved there (PNG) and closed.
    max_display : int, default 10
    title : str, optional
        Figure title.

    Returns
    -------
    matplotlib.figure.Figure
    """
    v = _check(expl)
    plt = _plt()
    h = 0.45 * min(max_display, v.shape[1]) + 1.6
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, h), gridspec_kw={"width_ratios": [1, 1.5]})
    bar(expl, ax=a1, max_display=max_display, title="mean |φ|")
    beeswarm(expl, ax=a2, max_display=max_display, title="")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=dpi)
        plt.close(fig)
    return fig


def standard_errors(expl: Explanation) -> np.ndarray | None:
    """Per-feature standard errors of a sampled explanation, shape like ``values``; None when exact.

    Read from ``extra["stderr"]`` (ShaRP sampling) or ``extra["mean_stderr"]`` (distributional Monte
    Carlo; for a categorical value the column of ``extra["target"]``).
    """
    se = expl.extra.get("stderr", expl.extra.get("mean_stderr"))
    if se is None:
        return None
    se = np.asarray(se, dtype=np.float64)
    v = np.asarray(expl.values)
    if se.ndim == v.ndim + 1 and "target" in expl.extra:          # categorical: (…, d, k) → target class
        se = np.take(se, int(np.ravel(expl.extra["target"])[0]), axis=-1)
    return se.reshape(v.shape) if se.size == v.size else None


def errorbars(expl: Explanation, i: int = 0, ax=None, max_display: int = 20, z: float = 1.96, title: str | None = None):
    """Values of instance ``i`` with ± ``z`` standard errors (sampled estimators), largest |φ| on top.

    Exact explanations are drawn without bars. Returns the Axes.
    """
    v = _check(expl)
    se = standard_errors(expl)
    row = v[i]
    err = None if se is None else np.atleast_2d(se)[i]
    order = np.argsort(-np.abs(row), kind="stable")[:max_display][::-1]
    plt = _plt()
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 0.35 * len(order) + 1.3))
    names = [expl.feature_names[j] for j in order]
    ax.barh(names, row[order], xerr=None if err is None else z * err[order], color="#4c72b0",
            ecolor="#333333", capsize=3)
    ax.axvline(0.0, color="grey", lw=0.6)
    est = expl.extra.get("estimator", "exact")
    ax.set_xlabel(f"φ ± {z:g} s.e." if err is not None else "φ (exact)")
    ax.set_title(title or f"{expl.method} ({est})")
    return ax

