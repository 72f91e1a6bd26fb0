"""Capacity-native explanations against brute-force game-theoretic definitions."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from explainers._result import Explanation
from explainers.capacity import (
    capacity_interaction,
    capacity_shapley,
    interaction_indices,
    shapley_importance,
    violation_report,
)
from learners._mobius import SubsetIndex, capacity_from_mobius
from learners.capacity import CapacityRDA
from learners.exceptions import InvalidInputError, NotFittedError


def brute_shapley(v, n):
    """Shapley value by the permutation definition: average marginal contribution over n! orders."""
    phi = np.zeros(n)
    for perm in itertools.permutations(range(n)):
        S = 0
        for i in perm:
            phi[i] += v[S | (1 << i)] - v[S]
            S |= 1 << i
    return phi / math.factorial(n)


def brute_interaction(v, n):
    """Shapley interaction index (Grabisch 1997): Σ_{S⊆N∖ij} (n−s−2)! s!/(n−1)! Δ_ij v(S)."""
    I = np.zeros((n, n))
    for i, j in itertools.combinations(range(n), 2):
        rest = [k for k in range(n) if k not in (i, j)]
        tot = 0.0
        for r in range(len(rest) + 1):
            for c in itertools.combinations(rest, r):
                S = sum(1 << k for k in c)
                w = math.factorial(n - r - 2) * math.factorial(r) / math.factorial(n - 1)
                tot += w * (v[S | 1 << i | 1 << j] - v[S | 1 << i] - v[S | 1 << j] + v[S])
        I[i, j] = I[j, i] = tot
    return I


@pytest.mark.parametrize("n,k", [(3, None), (4, None), (5, None), (5, 2)])
def test_shapley_and_interaction_match_brute_force(n, k):
    rng = np.random.default_rng(n)
    idx = SubsetIndex(n, k)
    m = rng.normal(size=idx.d)
    v = capacity_from_mobius(m, idx)
    np.testing.assert_allclose(shapley_importance(m, idx), brute_shapley(v, n), atol=1e-12)
    np.testing.assert_allclose(interaction_indices(m, idx), brute_interaction(v, n), atol=1e-12)


def test_shapley_explanation_efficiency_symmetry_null_player():
    idx = SubsetIndex(4)
    m = np.zeros(idx.d)
    pos = lambda *s: idx.position(np.array([sum(1 << i for i in s)]))[0]
    m[pos(0)], m[pos(1)], m[pos(0, 1)], m[pos(2)] = 0.2, 0.2, 0.3, 0.3   # criterion 3 is a null player
    e = capacity_shapley(m, idx, feature_names=list("abcd"))
    assert isinstance(e, Explanation) and e.method == "capacity-shapley"
    assert e.additivity_error().max() < 1e-12                               # Σφ = v(N) = Σ m
    assert float(e.prediction) == pytest.approx(1.0)
    assert e.values[0] == pytest.approx(e.values[1])                          # symmetry
    assert e.values[3] == pytest.approx(0.0, abs=1e-12)                                                # null player
    # prediction = F(1..1) − F(0..0) for Choquet and multilinear
    for agg in ("choquet", "multilinear"):
        assert float((idx.features(np.ones(4), agg) - idx.features(np.zeros(4), agg)) @ m) == pytest.approx(
            float(e.prediction))
    rec = e.to_records(["r1"])[0]
    assert rec["method"] == "capacity-shapley" and rec["values"][3] == pytest.approx(0.0, abs=1e-12)


def test_interaction_explanation_and_normalisation():
    rng = np.random.default_rng(0)
    names = ["a", "b", "c"]
    model = CapacityRDA(names, delta=1e-3)
    X, Y = rng.random((300, 3)), rng.random((300, 3))
    f = lambda Z: np.minimum(Z[:, 0], Z[:, 1])        # pure synergy between a and b
    model.learn_many(X, Y, np.where(f(X) > f(Y), 1, -1))
    e = capacity_interaction(model, normalize=True)
    assert e.method == "capacity-interaction" and e.model_name == "capacity" and e.model_version == model.version
    I = np.asarray(e.extra["interactions"])
    assert I.shape == (3, 3) and np.allclose(I, I.T)
    assert e.extra["pairs"][0][:2] == ["a", "b"] and e.extra["pairs"][0][2] > 0   # strongest: positive a–b synergy
    assert float(e.values.sum()) == pytest.approx(1.0)                            # normalised: Σφ = v(N) = 1
    assert e.additivity_error().max() < 1e-12
    assert e.top_features(2) == ["a", "b"] or set(e.top_features(2)) == {"a", "b"}


def test_violation_report_and_errors():
    idx = SubsetIndex(3)
    m = np.zeros(idx.d)
    m[idx.position(np.array([1, 2, 3]))] = [0.5, 0.5, -0.8]   # v(S) = 0.2 < 0.5 = v(S∖i) for S ⊇ {0,1}: 4 rows
    rep = violation_report(m, idx)
    assert rep["monotone"]["n_violated"] == 4 and rep["monotone"]["max"] == pytest.approx(0.3)
    assert rep["monotone"]["violation"] == pytest.approx(4 * 0.3 ** 2)
    assert rep["supermodular"]["max"] == pytest.approx(0.8)
    with pytest.raises(InvalidInputError, match="Möbius masses"):
        capacity_shapley(np.zeros(5), idx)
    with pytest.raises(NotFittedError):
        capacity_shapley(np.zeros(idx.d), idx, normalize=True)
