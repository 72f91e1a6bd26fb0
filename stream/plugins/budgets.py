"""Explanation budgets: how much work one explanation may take in the stream.

The settings ``explain_exact_players``, ``explain_max_coalitions`` and ``explain_reference_size``
reach the explainers as ``ctx.budgets`` (:func:`budgets` fills in the defaults below), and every
record's ``extra["budgets"]`` says what was used (:func:`with_budgets`). Data with more than
``exact_players`` features have their one-hot groups (:mod:`stream.plugins.groups`) explained as
one player each by Pref-SHAP, ShaRP and the distributional values. Up to ``exact_players``
players (or while 2^players ≤ ``max_coalitions``) every coalition is enumerated (exact); above,
Pref-SHAP and ShaRP evaluate ``max_coalitions`` coalitions (the smallest and largest sizes
enumerated, complementary pairs drawn among the middle ones; Kernel SHAP with exact efficiency,
``extra.estimator`` = ``"kernel-shap"`` / ``"kernel-shap-paired"`` with standard errors), the
Bernoulli distributional values the stratified estimator within about ``max_coalitions`` coalition
evaluations (categorical ones Monte Carlo). The reference sample (Pref-SHAP's CME
catalog, ShaRP's removal distribution) has ``reference_size`` items.

Examples
--------
>>> dist_options(4)
{'method': 'exact'}
>>> dist_options(26)
{'method': 'stratified', 'max_coalitions': 2048}
>>> budgets(None)["max_coalitions"]
2048
"""

from __future__ import annotations

__all__ = ["COALITION_BUDGET", "EXACT_MAX_PLAYERS", "REFERENCE_SIZE", "budgets", "dist_options", "with_budgets"]

#: Players up to which every coalition is enumerated (default of ``explain_exact_players``).
EXACT_MAX_PLAYERS = 10
#: Coalition evaluations per sampled call (default of ``explain_max_coalitions``).
COALITION_BUDGET = 2048
#: Reference items (default of ``explain_reference_size``).
REFERENCE_SIZE = 128


def budgets(ctx) -> dict:
    """The explanation budgets of this call: the settings (``ctx.budgets``) over the module defaults.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> budgets(SimpleNamespace(budgets={"exact_players": 12}))["exact_players"]
    12
    """
    b = {"exact_players": EXACT_MAX_PLAYERS, "max_coalitions": COALITION_BUDGET, "reference_size": REFERENCE_SIZE}
    b.update({k: int(v) for k, v in (getattr(ctx, "budgets", None) or {}).items() if k in b})
    return b


def dist_options(d: int, budget: dict | None = None, family: str = "bernoulli") -> dict:
    """``method`` / budget keywords for distributional values of a ``d``-player game within the budget.

    Bernoulli games above the exact budget use the ``"stratified"`` estimator (Kernel SHAP means,
    exactly efficient; :mod:`explainers.distributional.stratified`), other families Monte Carlo.

    Examples
    --------
    >>> dist_options(11)["method"], dist_options(12)["method"]    # 2^11 coalitions fit the default budget
    ('exact', 'stratified')
    >>> dist_options(200, family="categorical")["n_samples"]      # never fewer than 16 samples
    16
    """
    b = budget or budgets(None)
    if d <= b["exact_players"] or 2 ** d <= b["max_coalitions"]:
        return {"method": "exact"}
    if family == "bernoulli":
        return {"method": "stratified", "max_coalitions": b["max_coalitions"]}
    return {"method": "monte-carlo", "n_samples": max(16, b["max_coalitions"] // (d + 1))}


def with_budgets(e, budget: dict):
    """Record the budgets an explanation ran under in its ``extra`` (returns ``e``)."""
    e.extra["budgets"] = dict(budget)
    return e
