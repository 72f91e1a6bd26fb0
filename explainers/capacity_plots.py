"""Plots of capacity explanations: Shapley importance bars and the interaction heatmap.

Fed by the :class:`~explainers._result.Explanation` objects of :mod:`explainers.capacity`
(methods ``"capacity-shapley"`` and ``"capacity-interaction"``). matplotlib is imported lazily
(:mod:`explainers._plotting`); each function returns the Figure and saves it when ``path`` is given.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from explainers._result import Explanation
from explainers.exceptions import InvalidInputError
from explainers._plotting import pyplot as _plt

__all__ = ["interaction_heatmap", "shapley_bars"]


def _save(fig, path):
    if path is not None:
        fig.savefig(path, dpi=130, bbox_inches="tight")
    return fig


def shapley_bars(expl: Explanation, path: Any = None, title: str | None = None):
    """Horizontal bars of the Shapley importance φ_i of each criterion (Σ φ_i = v(N)).

    Raises
    ------
    InvalidInputError
        If ``expl`` is not a capacity explanation.
    """
    if not isinstance(expl, Explanation) or not expl.method.startswith("capacity-"):
        raise InvalidInputError(f"shapley_bars needs a capacity-* Explanation; got {getattr(expl, 'method', type(expl))!r}.")
    plt = _plt()
    phi = np.asarray(expl.values).reshape(-1, len(expl.feature_names)).mean(axis=0)
    order = np.argsort(phi)
    fig, ax = plt.subplots(figsize=(6, 0.45 * len(phi) + 1.2))
    ax.barh(np.array(expl.feature_names)[order], phi[order], color=np.where(phi[order] >= 0, "#d62728", "#1f77b4"))
    ax.axvline(0, color="k", lw=0.8)
    ax.set_xlabel("Shapley importance φ_i = Σ_{S∋i} m(S)/|S|")
    ax.set_title(title or f"Capacity Shapley importance ({expl.model_name} v{expl.model_version})")
    fig.tight_layout()
    return _save(fig, path)


def interaction_heatmap(expl: Explanation, path: Any = None, title: str | None = None):
    """Heatmap of the Shapley interaction indices I_ij (red: synergy, blue: redundancy).

    Raises
    ------
    InvalidInputError
        If ``expl`` lacks ``extra["interactions"]`` (use :func:`explainers.capacity.capacity_interaction`).
    """
    if not isinstance(expl, Explanation) or "interactions" not in expl.extra:
        raise InvalidInputError("interaction_heatmap needs a 'capacity-interaction' Explanation with extra['interactions'].")
    plt = _plt()
    I = np.asarray(expl.extra["interactions"], dtype=np.float64)
    n = I.shape[0]
    M = I.copy()
    np.fill_diagonal(M, np.nan)
    lim = np.nanmax(np.abs(M)) if n > 1 and np.isfinite(M).any() else 1.0
    fig, ax = plt.subplots(figsize=(0.6 * n + 2.5, 0.6 * n + 2))
    im = ax.imshow(M, cmap="RdBu_r", vmin=-lim, vmax=lim)
    ax.set_xticks(range(n), expl.feature_names, rotation=45, ha="right")
    ax.set_yticks(range(n), expl.feature_names)
    for i in range(n):
        for j in range(n):
            if i != j:
                ax.text(j, i, f"{I[i, j]:.2g}", ha="center", va="center", fontsize=8)
    fig.colorbar(im, ax=ax, label="interaction index I_ij")
    ax.set_title(title or "Capacity interaction indices")
    fig.tight_layout()
    return _save(fig, path)
