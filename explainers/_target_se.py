"""Sampled Shapley estimates that stop on a target standard error, within a coalition budget.

A fixed coalition count gives an error that depends on the game (the model fitted, the explained
event): the same budget of 128 coalitions gave a relative error of 0.018 on one fitted GPM and
0.035 on another (bench/explain_wide.py, issue 23). Here the paired, size-stratified Kernel SHAP
plan of :func:`explainers._coalitions.plan_coalitions` is grown geometrically — ``start``
coalitions, then twice as many, … up to ``max_coalitions`` — until every explained game has

    max_j se_j ≤ target_se · max_j |φ_j|                                      (relative target)

with ``se`` the design-based standard errors of :meth:`CoalitionPlan.stderr` (Covert & Lee 2021;
Cochran 1977, Eq. 5.6). ``max_coalitions`` stays a hard cap on the cost of one call; a call that
reaches it without meeting the target says so (``target_met = False``) next to its standard errors.
Every round draws a fresh plan from the same generator, so the result is a deterministic function
of the seed, the target and the cap.

Examples
--------
>>> import numpy as np
>>> w = np.arange(1.0, 13.0)
>>> def evaluate(masks):                      # an additive game of 12 players, two copies
...     v = masks.astype(float) @ w
...     return np.stack([v, 2 * v], axis=1)
>>> r = solve_to_target(12, 2048, np.random.default_rng(0), evaluate, target_se=0.01)
>>> bool(np.allclose(r.phi, np.stack([w, 2 * w]))), r.target_met, r.plan.n_coalitions < 2048
(True, True, True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from explainers._coalitions import CoalitionPlan, plan_coalitions
from learners.exceptions import check_param

__all__ = ["TargetResult", "first_round", "solve_to_target", "target_reached"]


@dataclass
class TargetResult:
    """What :func:`solve_to_target` returns.

    Attributes
    ----------
    plan : CoalitionPlan
        The last (accepted) plan.
    values : ndarray of shape (n_coalitions, n_games)
    phi, stderr : ndarray of shape (n_games, d)
        Shapley estimates and their standard errors (zeros when the plan is exact).
    rounds : int
        Plans evaluated (1 without a target).
    evaluated : int
        Coalition evaluations over all rounds (the cost; ``plan.n_coalitions`` is the last round's).
    target_met : bool
    """

    plan: CoalitionPlan
    values: np.ndarray
    phi: np.ndarray
    stderr: np.ndarray
    rounds: int
    evaluated: int
    target_met: bool


def first_round(d: int, max_coalitions: int) -> int:
    """Coalitions of the first round: 8 per player and at least 128, within the cap.

    Examples
    --------
    >>> first_round(12, 2048), first_round(40, 2048), first_round(12, 64)
    (128, 328, 64)
    """
    return int(min(max_coalitions, max(128, 8 * (d + 1))))


def target_reached(phi: np.ndarray, stderr: np.ndarray, target_se: float) -> np.ndarray:
    """Per game: ``max_j se_j ≤ target_se · max_j |φ_j|`` (an all-zero game is reached when its se is 0).

    Examples
    --------
    >>> target_reached(np.array([[1.0, -2.0], [0.0, 0.0]]), np.array([[0.01, 0.01], [0.0, 0.0]]), 0.01).tolist()
    [True, True]
    """
    phi, se = np.atleast_2d(phi), np.atleast_2d(stderr)
    return se.max(axis=1) <= target_se * np.abs(phi).max(axis=1)


def solve_to_target(d: int, max_coalitions: int, rng: np.random.Generator,
                    evaluate: Callable[[np.ndarray], np.ndarray], target_se: float | None = None,
                    start: int | None = None) -> TargetResult:
    """Kernel SHAP of a batch of games on a plan grown until the target standard error (module notes).

    Parameters
    ----------
    d : int
        Players.
    max_coalitions : int
        Cap on one plan's coalitions (∅ and Ω included); exact enumeration when 2^d fits.
    rng : numpy.random.Generator
    evaluate : callable
        ``evaluate(masks (K, d) bool) -> values (K, n_games)``.
    target_se : float, optional
        Relative target (see :func:`target_reached`); ``None``: one plan of ``max_coalitions``.
    start : int, optional
        First round's coalitions (default :func:`first_round`).

    Returns
    -------
    TargetResult
    """
    check_param("solve_to_target", "target_se", target_se,
                target_se is None or (isinstance(target_se, (int, float)) and 0 < target_se < 1), "None or a float in (0, 1)")
    n = int(max_coalitions) if target_se is None else int(start or first_round(d, max_coalitions))
    n = max(4, min(n, int(max_coalitions)))
    rounds = evaluated = 0
    while True:
        plan = plan_coalitions(d, n, rng)
        values = np.asarray(evaluate(plan.masks), dtype=np.float64).reshape(plan.n_coalitions, -1)
        rounds += 1
        evaluated += plan.n_coalitions
        phi = plan.solve(values)
        se = plan.stderr(values)
        met = bool(plan.exact or (target_se is not None and target_reached(phi, se, target_se).all()))
        if met or n >= max_coalitions or target_se is None:
            return TargetResult(plan, values, phi, se, rounds, evaluated, met)
        n = min(2 * n, int(max_coalitions))
