"""Scores of pairwise predictions: ROC AUC, logistic loss on margins, cross-entropy of probabilities.

One small module used by the learners (GPM model selection), the benchmarks and the tests.
Labels follow the learner contract: ``y`` in {+1 (left preferred), −1 (right preferred), 0 (tie)}.

Examples
--------
>>> roc_auc([1, -1, 1, -1], [3, 1, 2, 0])
1.0
>>> round(log_loss([1], [0.0]), 6) == round(float(np.log(2)), 6)
True
>>> round(cross_entropy([1, 0], [0.5, 0.5]), 6) == round(float(np.log(2)), 6)
True
"""

from __future__ import annotations

import numpy as np

__all__ = ["cross_entropy", "log_loss", "roc_auc"]


def roc_auc(y, score) -> float:
    """ROC AUC of ``score`` for labels ``y`` in {+1, −1} (Mann–Whitney, ties count ½); nan if one class is absent.

    Parameters
    ----------
    y : array_like of shape (n,)
        Labels; rows with y = 0 are ignored.
    score : array_like of shape (n,)
        Higher means "more likely +1" (a margin or a probability).
    """
    y = np.asarray(y).reshape(-1)
    s = np.asarray(score, dtype=np.float64).reshape(-1)
    pos, neg = y > 0, y < 0
    n_pos, n_neg = int(pos.sum()), int(neg.sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    from scipy.stats import rankdata

    r = rankdata(s[pos | neg])
    yy = y[pos | neg] > 0
    return float((r[yy].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def log_loss(y, g) -> float:
    """Mean logistic loss ``log(1 + exp(−y g))`` for ±1 labels and margins ``g``, shape (n,)."""
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    g = np.asarray(g, dtype=np.float64).reshape(-1)
    return float(np.mean(np.logaddexp(0.0, -y * g)))


def cross_entropy(y, p, eps: float = 1e-12) -> float:
    """Mean cross-entropy of probabilities ``p`` = P(left preferred) against the target (1 + y)/2.

    For y = ±1 this is the log loss of ``p``; a tie (y = 0) has target ½. ``p`` is clipped to
    [eps, 1 − eps].

    Parameters
    ----------
    y : array_like of shape (n,), values in {+1, −1, 0}
    p : array_like of shape (n,), values in [0, 1]
    """
    t = 0.5 * (1.0 + np.asarray(y, dtype=np.float64).reshape(-1))
    p = np.clip(np.asarray(p, dtype=np.float64).reshape(-1), eps, 1.0 - eps)
    return float(np.mean(-t * np.log(p) - (1.0 - t) * np.log1p(-p)))
