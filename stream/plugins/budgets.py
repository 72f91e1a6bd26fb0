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

Sampled Pref-SHAP and Bernoulli distributional values stop on a target standard error
(``explain_target_se`` → ``target_se``, relative to the largest |φ| of the explained event;
:mod:`explainers._target_se`): ``max_coalitions`` is then the cap of one call, not its cost. Every
record's ``extra["budgets"]`` carries the target, and sampled records their ``stderr`` and
``target_met``. ``target_se = 0`` turns the stop off (fixed ``max_coalitions``).

Caps per call (:func:`capped`): every registered explainer carries ``fn.max_batch`` (events per
call) and ``fn.budget_s`` (seconds per call), read by the explainer worker with ``getattr`` like
``fn.session_only``. The worker splits a batch into calls of at most ``max_batch`` events. A call
explains its events in steps of ``fn.step`` events and returns after the first step that ends past
``budget_s`` with the events finished so far — a prefix of ``examples``: ``n_instances`` ≤
``len(examples)``, ``instance_ids`` set, ``extra["unfinished"]`` the number left for the worker to
shed or requeue — so one slow method never holds the others for more than one step past its budget.
Every step starts from the same state of ``ctx.rng``, so all steps share the call's reference draws.

Examples
--------
>>> dist_options(4)
{'method': 'exact'}
>>> dist_options(26)
{'method': 'stratified', 'max_coalitions': 2048, 'target_se': 0.005}
>>> budgets(None)["max_coalitions"], budgets(None)["target_se"]
(2048, 0.005)
"""

from __future__ import annotations

import functools
import time

__all__ = ["COALITION_BUDGET", "EXACT_MAX_PLAYERS", "REFERENCE_SIZE", "TARGET_SE", "budgets", "budgets_from_settings",
           "capped", "dist_options", "target_of", "with_budgets"]

#: Players up to which every coalition is enumerated (default of ``explain_exact_players``).
EXACT_MAX_PLAYERS = 10
#: Coalition evaluations per sampled call (default of ``explain_max_coalitions``).
COALITION_BUDGET = 2048
#: Reference items (default of ``explain_reference_size``).
REFERENCE_SIZE = 128
#: Relative target standard error of sampled estimators (default of ``explain_target_se``; 0 = off).
#: At 0.005 the largest error against exact enumeration stays ≤ 0.02 (bench/explain_wide.py).
TARGET_SE = 0.005


def budgets(ctx) -> dict:
    """The explanation budgets of this call: the settings (``ctx.budgets``) over the module defaults.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> budgets(SimpleNamespace(budgets={"exact_players": 12}))["exact_players"]
    12
    """
    b = {"exact_players": EXACT_MAX_PLAYERS, "max_coalitions": COALITION_BUDGET, "reference_size": REFERENCE_SIZE,
         "target_se": TARGET_SE}
    b.update({k: (float(v) if k == "target_se" else int(v)) for k, v in (getattr(ctx, "budgets", None) or {}).items()
              if k in b})
    return b


def budgets_from_settings(settings) -> dict:
    """``ctx.budgets`` from the settings ``explain_exact_players``, ``explain_max_coalitions``,
    ``explain_reference_size`` and ``explain_target_se`` (the defaults above where a setting is absent).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> budgets_from_settings(SimpleNamespace(explain_target_se=0.01))["target_se"]
    0.01
    """
    keys = {"exact_players": "explain_exact_players", "max_coalitions": "explain_max_coalitions",
            "reference_size": "explain_reference_size", "target_se": "explain_target_se"}
    return budgets(type("B", (), {"budgets": {k: getattr(settings, s) for k, s in keys.items()
                                              if getattr(settings, s, None) is not None}})())


def target_of(b: dict):
    """The relative target standard error of budgets ``b`` (None when off)."""
    return float(b["target_se"]) if b.get("target_se") else None


def capped(max_batch: int, budget_s: float, step: int | None = None):
    """Give an explainer ``fn.max_batch``, ``fn.budget_s`` and ``fn.step`` and bound its calls (module notes).

    Examples
    --------
    >>> import numpy as np
    >>> from explainers import Explanation
    >>> @capped(max_batch=4, budget_s=0.0, step=2)
    ... def ones(learner, examples, ctx):
    ...     return Explanation(values=np.ones((len(examples), 1)), base_values=0.0, feature_names=["a"], method="m")
    >>> e = ones(None, ["e1", "e2", "e3"], None)     # budget 0 s: stops after the first step
    >>> e.n_instances, e.extra["unfinished"], (ones.max_batch, ones.budget_s, ones.step)
    (2, 1, (4, 0.0, 2))
    """
    step = int(step or min(max_batch, 16))

    def wrap(fn):
        @functools.wraps(fn)
        def call(learner, examples, ctx):
            step, budget_s = call.step, call.budget_s        # read per call: a worker or a test may retune them
            if len(examples) <= step:
                return fn(learner, examples, ctx)
            from explainers._result import Explanation

            t0, parts, done = time.perf_counter(), [], 0
            rng = getattr(ctx, "rng", None)
            state = None if rng is None else rng.bit_generator.state
            while done < len(examples):
                if state is not None:        # every step draws what the first drew (one reference sample per call)
                    rng.bit_generator.state = state
                part = fn(learner, examples[done:done + step], ctx)
                part.instance_ids = [str(getattr(x, "event_id", i)) for i, x in      # the events, whatever
                                     enumerate(examples[done:done + step], start=done)]    # ids fn gave
                parts.append(part)
                done += step
                if time.perf_counter() - t0 >= budget_s:
                    break
            out = Explanation.stack(parts)
            if done < len(examples):
                out.extra["unfinished"] = len(examples) - done
            return out

        call.max_batch, call.budget_s, call.step = int(max_batch), float(budget_s), step
        return call

    return wrap


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
        return {"method": "stratified", "max_coalitions": b["max_coalitions"], "target_se": target_of(b)}
    return {"method": "monte-carlo", "n_samples": max(16, b["max_coalitions"] // (d + 1))}


def with_budgets(e, budget: dict):
    """Record the budgets an explanation ran under in its ``extra`` (returns ``e``)."""
    e.extra["budgets"] = dict(budget)
    return e
