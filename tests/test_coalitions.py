"""Coalition enumeration/sampling (Hu, Chau et al. 2022, Algorithm 2) and Shapley solvers (Eq. 3, Kernel SHAP)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from explainers._coalitions import (
    all_coalitions,
    coalitions_from_integers,
    constrained_wls,
    exact_shapley,
    plan_coalitions,
    sample_unique_coalitions,
    shapley_kernel_weights,
)
from explainers.exceptions import BudgetError, InvalidInputError, InvalidParameterError


def _random_game(d, rng, n_games=3):
    """Values of games with pairwise interactions: ν(S) = Σ_{j∈S} a_j + Σ_{j<k∈S} b_jk (+ noise term)."""
    Z = all_coalitions(d).astype(float)
    a = rng.normal(size=(d, n_games))
    B = np.triu(rng.normal(size=(d, d, n_games)).transpose(2, 0, 1), 1).transpose(1, 2, 0)
    inter = np.einsum("sj,sk,jkg->sg", Z, Z, B)
    third = rng.normal(size=n_games) * Z[:, 0:1] * Z[:, 1:2] * Z[:, 2:3]
    return Z @ a + inter + third, a, B


def _permutation_shapley(v, d):
    code = lambda S: sum(1 << j for j in S)
    phi = np.zeros((v.shape[1], d))
    perms = list(itertools.permutations(range(d)))
    for perm in perms:
        S = []
        for j in perm:
            phi[:, j] += v[code(S + [j])] - v[code(S)]
            S.append(j)
    return phi / len(perms)


def test_base2_and_enumeration():
    Z = all_coalitions(3)
    assert Z.shape == (8, 3)
    assert Z[6].tolist() == [False, True, True]                      # 6 = 0b110
    np.testing.assert_array_equal(coalitions_from_integers([6, 1], 3), Z[[6, 1]])
    with pytest.raises(BudgetError):
        all_coalitions(30)


def test_exact_shapley_matches_permutation_definition():
    rng = np.random.default_rng(0)
    v, a, B = _random_game(5, rng)
    phi = exact_shapley(v, 5)
    np.testing.assert_allclose(phi, _permutation_shapley(v, 5), atol=1e-12)
    # closed form for the pairwise part: φ_j = a_j + ½ Σ_k b_jk, and the triple splits in thirds
    np.testing.assert_allclose(phi.sum(axis=1), v[-1] - v[0], atol=1e-12)
    with pytest.raises(InvalidInputError):
        exact_shapley(v[:-1], 5)


def test_kernel_weights_closed_form():
    d = 5
    w = shapley_kernel_weights([0, 1, 2, 3, 4, 5], d)
    assert np.isinf(w[0]) and np.isinf(w[-1])
    for s in range(1, d):
        assert w[s] == pytest.approx((d - 1) / (math.comb(d, s) * s * (d - s)))
    assert w[1] == pytest.approx(w[4])                               # symmetric in s ↔ d − s


def test_wls_on_all_coalitions_is_exact():
    rng = np.random.default_rng(1)
    d = 6
    v, _, _ = _random_game(d, rng)
    Z = all_coalitions(d)[1:-1]
    phi = constrained_wls(Z, v[1:-1] - v[0], shapley_kernel_weights(Z.sum(1), d), v[-1] - v[0])
    np.testing.assert_allclose(phi, exact_shapley(v, d), atol=1e-9)


def test_wls_enforces_efficiency_on_few_samples():
    rng = np.random.default_rng(2)
    d = 8
    v, _, _ = _random_game(d, rng)
    plan = plan_coalitions(d, 40, np.random.default_rng(3))
    assert not plan.exact and plan.n_coalitions == 40
    codes = plan.masks.astype(np.int64) @ (1 << np.arange(d))
    phi = plan.solve(v[codes])
    np.testing.assert_allclose(phi.sum(axis=1), v[-1] - v[0], atol=1e-10)


def test_sampling_error_decreases_with_budget():
    rng = np.random.default_rng(4)
    d = 9
    v, _, _ = _random_game(d, rng, n_games=1)
    exact = exact_shapley(v, d)
    errs = []
    for budget in (30, 120, 480):
        e = []
        for seed in range(5):
            plan = plan_coalitions(d, budget, np.random.default_rng(seed))
            codes = plan.masks.astype(np.int64) @ (1 << np.arange(d))
            e.append(np.abs(plan.solve(v[codes]) - exact).max())
        errs.append(np.mean(e))
    assert errs[0] > errs[1] > errs[2]


def test_unique_sampling_properties():
    rng = np.random.default_rng(5)
    S = sample_unique_coalitions(10, 500, rng)
    assert S.shape == (500, 10)
    assert len(np.unique(S, axis=0)) == 500                         # unique
    assert S.any(axis=1).all() and (~S.all(axis=1)).all()            # ∅ and Ω excluded
    full = sample_unique_coalitions(4, 14, rng)                       # every proper coalition
    assert len(np.unique(full, axis=0)) == 14
    big = sample_unique_coalitions(70, 50, rng)                       # beyond int64: de-duplicated rows
    assert big.shape == (50, 70) and len(np.unique(big, axis=0)) == 50
    with pytest.raises(InvalidParameterError):
        sample_unique_coalitions(4, 15, rng)
    with pytest.raises(InvalidParameterError):
        sample_unique_coalitions(1, 1, rng)


def test_sampling_is_uniform_over_proper_coalitions():
    rng = np.random.default_rng(6)
    counts = np.zeros(2 ** 5)
    for _ in range(400):
        S = sample_unique_coalitions(5, 6, rng)
        np.add.at(counts, S.astype(np.int64) @ (1 << np.arange(5)), 1)
    inner = counts[1:-1]
    assert counts[0] == counts[-1] == 0
    expected = 400 * 6 / 30
    assert np.abs(inner - expected).max() < 5 * math.sqrt(expected)


def test_plan_coalitions_exact_and_params():
    p = plan_coalitions(4, 16)
    assert p.exact and p.n_coalitions == 16 and p.full_index == 15 and p.empty_index == 0
    q = plan_coalitions(5, 16, np.random.default_rng(0))
    assert not q.exact and q.masks[0].sum() == 0 and q.masks[1].all()
    with pytest.raises(InvalidParameterError, match="max_coalitions"):
        plan_coalitions(4, 2)


def test_kernel_shap_standard_errors_cover_the_exact_values():
    rng = np.random.default_rng(7)
    d = 10
    Z = all_coalitions(d).astype(float)
    w = rng.normal(size=d)
    inter = rng.normal(scale=0.3, size=(d, d))
    v = Z @ w + 0.5 * np.einsum("ki,ij,kj->k", Z, np.triu(inter, 1), Z) + 0.2 * np.sin(Z @ rng.normal(size=d))
    exact = exact_shapley(v, d)
    zs = []
    for seed in range(6):
        plan = plan_coalitions(d, 400, np.random.default_rng(seed))
        codes = (plan.masks.astype(np.int64) << np.arange(d)).sum(axis=1)
        phi = plan.solve(v[codes][:, None])[0]
        se = plan.stderr(v[codes][:, None])[0]
        assert se.shape == (d,) and np.all(se > 0)
        zs.append(np.abs(phi - exact) / se)
    assert np.mean(np.concatenate(zs) <= 3) >= 0.9
    exact_plan = plan_coalitions(4, 64)
    assert np.all(exact_plan.stderr(np.ones((16, 2))) == 0)
