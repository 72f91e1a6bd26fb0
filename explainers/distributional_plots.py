"""Plots of distributional values, fed by an :class:`~explainers._result.Explanation`.

* :func:`plot_transition_heatmap` — the from-class × to-class table ``q_i(e_r − e_s)`` of one
  feature (Franceschi et al. 2024, Eq. 7 and Figure 2 style), diagonal ("no change") shown separately.
* :func:`plot_importance_bars` — mean (the standard value, Prop. 3.9(i)) with ± one standard
  deviation of the distributional value, and the overall importance ι (Eq. 6), like the paper's
  Figure 6 (Adult case study).

matplotlib is imported lazily (:mod:`explainers._plotting`).
"""

from __future__ import annotations

import numpy as np

from explainers._result import Explanation
from learners.exceptions import InvalidInputError
from explainers._plotting import pyplot as _plt

__all__ = ["plot_transition_heatmap", "plot_importance_bars"]

_METHODS = ("distributional-bernoulli", "distributional-categorical", "distributional-gaussian")


def _check(expl, need_transition: bool = False) -> None:
    if not isinstance(expl, Explanation) or expl.method not in _METHODS:
        raise InvalidInputError(
            f"Expected an Explanation from explainers.distributional (method in {_METHODS}); "
            f"got {getattr(expl, 'method', type(expl).__name__)!r}.")
    if expl.values.ndim != 1:
        raise InvalidInputError("Plot one explained instance at a time: pass explanation[i].")
    if need_transition and "transition" not in expl.extra:
        raise InvalidInputError(
            "This explanation has no transition table (Gaussian family, or include_transitions=False).")


def _feature_index(expl: Explanation, feature) -> int:
    if feature is None:
        return int(np.argmax(np.asarray(expl.extra["importance"], dtype=float)))
    if isinstance(feature, str):
        if feature not in expl.feature_names:
            raise InvalidInputError(f"Unknown feature {feature!r}; features are {expl.feature_names}.")
        return expl.feature_names.index(feature)
    i = int(feature)
    if not 0 <= i < len(expl.feature_names):
        raise InvalidInputError(f"Feature index {i} out of range 0..{len(expl.feature_names) - 1}.")
    return i


def plot_transition_heatmap(expl: Explanation, feature=None, *, ax=None, show_diagonal: bool = False,
                            cmap: str = "YlOrRd", path=None):
    """Heatmap of the transition probabilities of one feature: rows = from class, columns = to class.

    Parameters
    ----------
    expl : Explanation
        ``distributional-categorical`` or ``distributional-bernoulli`` with ``extra["transition"]``.
    feature : int or str, optional
        Feature to show; default the one of largest overall importance ι.
    ax : matplotlib Axes, optional
    show_diagonal : bool
        Colour the "no change" diagonal too (default: masked, its total is in the title).
    cmap : str
    path : str or Path, optional
        Save the figure there (PNG, 150 dpi).

    Returns
    -------
    matplotlib Axes

    Raises
    ------
    InvalidInputError
        If the explanation is not a distributional one with a transition table.
    """
    _check(expl, need_transition=True)
    i = _feature_index(expl, feature)
    T = np.asarray(expl.extra["transition"], dtype=float)[i]
    classes = list(expl.extra.get("classes") or [str(c) for c in range(T.shape[0])])
    plt = _plt()
    if ax is None:
        k = T.shape[0]
        _, ax = plt.subplots(figsize=(max(4.8, 1.2 + 0.55 * k), max(3.6, 0.9 + 0.5 * k)),  # room for labels at k = 2
                             layout="constrained")
    shown = T.copy()
    if not show_diagonal:
        shown[np.arange(len(T)), np.arange(len(T))] = np.nan
    im = ax.imshow(shown, cmap=cmap, vmin=0.0)
    ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="transition probability")
    ax.set_xticks(range(len(classes)), classes, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(len(classes)), classes, fontsize=8)
    ax.set_xlabel("to class (with the feature)")
    ax.set_ylabel("from class (without the feature)")
    stay = float(np.trace(T))
    ax.set_title(f"{expl.feature_names[i]}: ι = {1 - stay:.3f}, P(no change) = {stay:.3f}", fontsize=9)
    if path is not None:
        ax.figure.savefig(path, dpi=150, bbox_inches="tight")
    return ax


def plot_importance_bars(expl: Explanation, *, ax=None, max_features: int = 20, path=None):
    """Bars of the mean value with ± one standard deviation, and the overall importance ι.

    For a categorical explanation the mean and variance are those of the ``target`` class
    component (``values`` and ``extra["variance"][:, target]``).

    Parameters
    ----------
    expl : Explanation
        Any ``distributional-*`` explanation of one instance.
    ax : matplotlib Axes, optional
    max_features : int
        Show the features of largest importance ι first, at most this many.
    path : str or Path, optional
        Save the figure there (PNG, 150 dpi).

    Returns
    -------
    matplotlib Axes

    Raises
    ------
    InvalidInputError
        If the explanation is not a distributional one.
    """
    _check(expl)
    mean = np.asarray(expl.values, dtype=float)
    var = np.asarray(expl.extra["variance"], dtype=float)
    if var.ndim == 2:
        var = var[:, int(expl.extra.get("target", 0))]
    imp = np.asarray(expl.extra["importance"], dtype=float)
    order = np.argsort(-imp, kind="stable")[:max_features][::-1]
    plt = _plt()
    if ax is None:
        # constrained layout: the twin axis on top, its label and the title get their room (tight_layout
        # could not fit them and warned "Tight layout not applied")
        _, ax = plt.subplots(figsize=(6.5, 1.9 + 0.35 * len(order)), layout="constrained")
    y = np.arange(len(order))
    colors = np.where(mean[order] >= 0, "#d62728", "#1f77b4")
    ax.barh(y, mean[order], color=colors, alpha=0.8, label="mean (standard value)")
    ax.errorbar(mean[order], y, xerr=np.sqrt(var[order]), fmt="none", ecolor="black", capsize=3,
                label="± sd of the distributional value")
    ax.axvline(0.0, color="grey", lw=0.8)
    ax.set_yticks(y, [expl.feature_names[j] for j in order], fontsize=8)
    ax.set_xlabel("contribution")
    ax2 = ax.twiny()
    ax2.plot(imp[order], y, "o", color="darkorange", label="overall importance ι")
    ax2.set_xlim(0.0, 1.0)
    ax2.set_xlabel("ι = P(feature changes the outcome)", color="darkorange")
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=7, loc="lower right")
    ax.set_title(expl.method, fontsize=9, pad=28)
    if path is not None:
        ax.figure.savefig(path, dpi=150, bbox_inches="tight")
    return ax
