"""Explanation budgets: how much work one explanation may take in the stream.

Data with more than :data:`EXACT_MAX_PLAYERS` features have their one-hot groups
(:mod:`stream.plugins.groups`) explained as one player each by Pref-SHAP and the distributional
values (Pref-SHAP then runs in float32). Up to :data:`EXACT_MAX_PLAYERS` players every coalition
is enumerated (2^10 = 1024); above, Pref-SHAP samples :data:`WIDE_PREFSHAP_COALITIONS` unique
coalitions (Algorithm 2 of Hu, Chau et al. 2022) and distributional values use Monte Carlo
within about :data:`COALITION_BUDGET` coalition evaluations (≈ budget / 2d permutations).
ShaRP refuses more than 20 features (the worker counts the call as skipped).

Examples
--------
>>> dist_options(4)
{'method': 'exact'}
>>> dist_options(26)
{'method': 'monte-carlo', 'n_samples': 39}
"""

from __future__ import annotations

__all__ = ["COALITION_BUDGET", "EXACT_MAX_PLAYERS", "WIDE_PREFSHAP_COALITIONS", "dist_options"]

#: Players up to which every coalition is enumerated.
EXACT_MAX_PLAYERS = 10
#: Unique coalitions Pref-SHAP samples for wider data.
WIDE_PREFSHAP_COALITIONS = 512
#: Coalition evaluations per Monte Carlo distributional-value call.
COALITION_BUDGET = 2048


def dist_options(d: int) -> dict:
    """``method`` / ``n_samples`` keywords for distributional values of a ``d``-player game within the budget.

    Examples
    --------
    >>> dist_options(EXACT_MAX_PLAYERS)["method"], dist_options(EXACT_MAX_PLAYERS + 1)["method"]
    ('exact', 'monte-carlo')
    >>> dist_options(200)["n_samples"]      # never fewer than 16 samples
    16
    """
    if d <= EXACT_MAX_PLAYERS:
        return {"method": "exact"}
    return {"method": "monte-carlo", "n_samples": max(16, COALITION_BUDGET // (2 * d))}
