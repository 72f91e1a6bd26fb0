"""ShaRP: Shapley values for rankings and preferences.

Pliatsika, Fonseca, Akhynko, Shevchenko & Stoyanovich (2024), *ShaRP: Explaining Rankings and
Preferences with Shapley Values*.

Explains a *score-based ranker* — any scoring callable ``score_fn(X) -> scores`` plus a catalog
of items ``X`` of shape ``(n, d)`` — with the quantities of interest (QoIs) of Section 4:

* **score** (Eq. 2): the item's score ``f(x)``;
* **rank** (Eq. 3): the item's 1-based position, with ``α = −1`` in the iota function (Eq. 5) so
  that a contribution that *improves* (lowers) the rank is positive;
* **top-k** (Eq. 4): the indicator ``rank(x) ≤ k``;

and with the **pairwise method** (Section 5, Eq. 7), which explains item ``v`` against the other
item ``u`` of a pair with ``u`` as the baseline, so that the contributions sum to the difference of
the two outcomes (for the rank QoI: ``rank(u) − rank(v)`` positions).

Feature removal is *marginal* (Section 3): for a coalition ``S`` of *removed* features the hybrid
``v_{A∖S} u_S`` takes the features in ``S`` from a reference row ``u`` and the rest from ``v``;
``Q(S) = E_u[q(v_{A∖S} u_S)]`` over the reference rows (Eqs 2–4). The Shapley value (Eq. 6 with
the weights of Algorithm 1, line 8) is::

    φ_i = α · Σ_{S ⊆ A∖{i}, |S| ≤ c}  (Q(S) − Q(S ∪ {i})) / (d · C(d−1, |S|))

so that with all coalitions (``c = d − 1``) efficiency holds exactly::

    Σ_i φ_i = α · (Q(∅) − Q(A)) = α · (q(v) − mean_u q(u)).

Fast by construction
--------------------
Algorithm 1 evaluates ``d · 2^(d−1)`` marginals, each scoring two fresh hybrid sets. Here the
QoI of every coalition is computed **once per explained item** (``2^d`` games; ``Q(∅) = q(v)`` and
``Q(A) = mean q(u)`` need no model call at all), the hybrids of all coalitions × reference rows
(× several items) are scored in **one vectorised call** of ``score_fn`` (chunked to ``max_rows``
rows for memory), ranks come from :func:`numpy.searchsorted` in the once-sorted catalog scores
(no re-sort), and the Shapley values are one matrix product ``Q @ Wᵀ`` with a precomputed
``(d, 2^d)`` weight matrix. Approximation (Algorithm 1's ``m`` and ``c``) draws *one* reference
sample per explained item and shares it between all coalitions — so the approximation is the
exact Shapley value of the sampled game (efficiency holds w.r.t. the sample mean); Algorithm 1
draws a fresh sample per (feature, coalition), which costs more and breaks efficiency.

Rank and tie rule
-----------------
A hybrid ``x`` of item ``v`` (index ``j`` in the catalog) is ranked in ``D' = D ∖ {v} ∪ {x}``
(Eq. 3; ``exclude_item=True``): it *replaces* ``v``. With ``ties="min"`` (default; standard
competition ranking, ties resolved in favour of the explained item)::

    rank(x) = 1 + #{w ∈ D ∖ {v} : f(w) > f(x)}

``ties="max"`` counts tied catalog items as ranked ahead (``1 + #{f(w) ≥ f(x)}``) and
``ties="average"`` is the mean of the two. ``rank(v)`` itself is v's competition rank in the
catalog; the mean rank over the reference ``D ∖ {v}`` is ``n/2`` without ties (the paper's
"position 94.5 out of 189", Section 6.1). The explained item is also left out of the reference
rows (Algorithm 1, line 4). With ``exclude_item=False`` the hybrid is ranked against the whole
catalog ``D`` (``v`` included) and ``v`` stays in the reference: this is what xai-sharp 0.1.1 does
(see ``docs/sharp.md`` for the exact mapping) and what the pairwise method uses by default, so that
its contributions sum to the true rank difference ``rank(u) − rank(v)``.

Result convention (``Explanation``)
-----------------------------------
``prediction = α·q(v)`` and ``base_values = α·mean_u q(u)`` so that
``base_values + Σφ = prediction`` (efficiency; :meth:`Explanation.additivity_error`). For
``"sharp-rank"`` this means ``prediction = −rank(v)`` and ``base_values = −mean rank``; the plain
positive ranks are in ``extra["rank"]`` and ``extra["mean_rank"]``. ``base_values`` is always the
*exact* reference mean (cheap: no hybrid needed), also under approximation, so the
``additivity_error`` of an approximate explanation is its fidelity gap (Eq. 8).

Notes
-----
The scoring callable must be *row-wise deterministic*: the score of a row must not depend on the
other rows of the batch (``(X * w).sum(1)`` is; some BLAS ``X @ w`` kernels may differ in the last
bit between batch sizes, which can flip exact ties). It must not keep a reference to its input,
whose buffer is reused between chunks. ``score_fn`` receives float64 arrays of shape
``(N, d)`` and must return ``N`` finite floats; higher score = better rank.
"""

from __future__ import annotations

from explainers.sharp.coalitions import coalition_weights
from explainers.sharp.explainer import _ALPHA, _METHOD, DEFAULT_MAX_ROWS, MAX_FEATURES, QOIS, SharpExplainer  # noqa: F401
from explainers.sharp.functions import explain, explain_pairwise, learner_score_fn, strata_summary
from explainers.sharp.games import MAX_GAME_VALUES  # noqa: F401
from explainers.sharp.ranks import TIE_RTOL, TIES, _RankCounter, catalog_ranks, rank_strata, snap_ties, tie_tolerance  # noqa: F401,E501

__all__ = [
    "QOIS",
    "TIES",
    "TIE_RTOL",
    "SharpExplainer",
    "catalog_ranks",
    "coalition_weights",
    "explain",
    "explain_pairwise",
    "learner_score_fn",
    "rank_strata",
    "snap_ties",
    "strata_summary",
    "tie_tolerance",
]
