"""Sampled Shapley values that stop on a target standard error (explainers/_target_se.py, issue 23)."""

from __future__ import annotations

import numpy as np
import pytest

from explainers._coalitions import all_coalitions, exact_shapley
from explainers._target_se import first_round, solve_to_target, target_reached


def _game(d, seed):
    rng = np.random.default_rng(seed)
    A, w = rng.normal(size=(d, d)), rng.normal(size=d) * 2

    def evaluate(masks):
        M = masks.astype(float)
        return np.tanh(M @ w / 3 + np.einsum("ki,ij,kj->k", M, A, M) / 4)[:, None]

    return evaluate, exact_shapley(evaluate(all_coalitions(d)), d)[0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_stops_on_the_target_within_the_cap_and_the_error_follows_the_standard_error(seed):
    d = 10
    evaluate, exact = _game(d, seed)
    r = solve_to_target(d, 1000, np.random.default_rng(seed), evaluate, target_se=0.01)
    assert r.rounds >= 1 and r.plan.n_coalitions <= 1000
    sizes = [min(first_round(d, 1000) * 2 ** i, 1000) for i in range(r.rounds)]     # 128, 256, 512, 1000
    assert r.evaluated == sum(sizes) and r.plan.n_coalitions == sizes[-1]
    if r.target_met:
        assert target_reached(r.phi, r.stderr, 0.01).all()
    else:
        assert r.plan.n_coalitions == 1000                               # only the cap stops it short
    assert np.max(np.abs(r.phi[0] - exact) / np.maximum(r.stderr[0], 1e-12)) < 5.0    # honest errors
    assert abs(r.phi[0].sum() - (evaluate(np.ones((1, d), bool)) - evaluate(np.zeros((1, d), bool)))[0, 0]) < 1e-12


def test_a_tighter_target_costs_more_and_errs_less():
    d = 10
    evaluate, exact = _game(d, 5)
    loose = solve_to_target(d, 1022, np.random.default_rng(0), evaluate, target_se=0.05)
    tight = solve_to_target(d, 1022, np.random.default_rng(0), evaluate, target_se=0.002)
    assert loose.evaluated < tight.evaluated
    assert np.abs(tight.phi - exact).max() < np.abs(loose.phi - exact).max()


def test_without_a_target_one_plan_of_the_whole_budget():
    evaluate, _ = _game(9, 0)
    r = solve_to_target(9, 300, np.random.default_rng(0), evaluate)
    assert r.rounds == 1 and r.plan.n_coalitions == 300 and not r.target_met


def test_prefshap_and_distributional_values_record_the_target():
    from explainers.distributional import explain_preference

    evaluate, exact = _game(12, 3)
    nu = lambda C: evaluate(np.asarray(C, bool))[:, 0]                   # noqa: E731
    e = explain_preference(nu, [f"x{i}" for i in range(12)], method="stratified", max_coalitions=2048,
                           target_se=0.005, random_state=0)
    full = explain_preference(nu, [f"x{i}" for i in range(12)], method="stratified", max_coalitions=2048,
                              random_state=0)
    assert e.additivity_error().max() < 1e-9
    assert np.abs(np.asarray(e.values) - np.asarray(full.values)).max() < 5 * np.max(e.extra["mean_stderr"]) + 1e-12
