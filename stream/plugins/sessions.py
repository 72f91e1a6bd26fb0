"""Categorical distributional values of a click among the shown items of a click session.

Franceschi et al. (2024), Lemma 3.7: the choice among the k shown items is a categorical
distribution over softmax utilities; a feature's value is the change of that distribution when
the feature joins a coalition. The utilities come from the learner: the capacity value F(x), or
for a GPM the mean margin of an item against the other shown items.

The explainer carries ``session_only = True``: the explainer worker runs it on click-session
jobs only (``ctx.params["session"]``).
"""

from __future__ import annotations

import numpy as np

from explainers._result import Explanation
from learners.base import dict_to_array
from learners.exceptions import NotFittedError
from stream.plugins.budgets import budgets, capped, dist_options, with_budgets
from stream.plugins.common import session_of, tile

__all__ = ["choice_utilities", "session_categorical"]


def choice_utilities(learner, names):
    """A utility function ``X (k, d) -> (k,)`` of shown items: F(x) when the learner scores items,
    else (a GPM) the mean margin of each item against the others.

    Raises
    ------
    NotFittedError
        For a GPM that has not been fitted yet.

    Examples
    --------
    >>> class Sum:
    ...     def score(self, X):
    ...         return X.sum(axis=1)
    >>> choice_utilities(Sum(), ["a", "b"])(np.array([[1.0, 2.0], [0.0, 1.0]]))
    array([3., 1.])
    """
    score = getattr(learner, "score", None)
    if callable(score):
        return lambda X: np.asarray(score(np.asarray(X, dtype=np.float64)), dtype=np.float64)
    gpm = getattr(learner, "model", learner)
    if getattr(gpm, "decision_function", None) is None:
        raise NotFittedError("The GPM has not been fitted yet; no utilities for the click session.")

    def u(X):
        X = np.asarray(X, dtype=np.float64)
        k = len(X)
        i, j = np.meshgrid(np.arange(k), np.arange(k), indexing="ij")
        g = np.asarray(gpm.decision_function(X[i.ravel()], X[j.ravel()]), dtype=np.float64).reshape(k, k)
        return g.mean(axis=1)

    return u


@capped(max_batch=4096, budget_s=2.0, step=4096)
def session_categorical(learner, examples, ctx) -> Explanation:
    """Categorical distributional values of a click among the shown items (Franceschi et al. 2024, Lemma 3.7).

    One job is one click session (``ctx.params["session"]``): it is explained once and the explanation
    tiled over the job's events, so a batch costs one explanation.
    """
    from explainers.distributional import explain_choice

    s = session_of(ctx)
    names = list(learner.feature_names)
    items = np.array([dict_to_array(it["features"], names, "The explained model") for it in s["shown"]],
                     dtype=np.float64).reshape(-1, len(names))
    ids = [str(it.get("id", k)) for k, it in enumerate(s["shown"])]
    target = ids.index(s["clicked"][0]) if s.get("clicked") and s["clicked"][0] in ids else None
    e = explain_choice(choice_utilities(learner, names), items, items.mean(axis=0), feature_names=names, item_names=ids,
                       target=target, random_state=0, instance_id=str(s.get("session_id", "")),
                       **dist_options(len(names), budgets(ctx), family="categorical"))
    return with_budgets(tile(e, len(examples)), budgets(ctx))


session_categorical.session_only = True
session_categorical.additive = True  # base + Σφ = prediction (efficiency); tests/checks verifies it
