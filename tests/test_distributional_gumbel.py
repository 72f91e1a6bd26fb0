"""Closed-form Gumbel-max coupling (Franceschi et al. 2024, Lemma 3.7 / Appendix B) against independent oracles."""

import numpy as np
import pytest

from explainers._gumbel import (
    bernoulli_comonotone_coupling,
    gumbel_max_coupling,
    log_gumbel_max_coupling,
    log_gumbel_max_stay_probability,
    monte_carlo_gumbel_max_coupling,
)
from explainers.exceptions import InvalidInputError, InvalidParameterError


def softmax(x):
    z = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def test_closed_form_matches_one_million_gumbel_draws_within_4_standard_errors():
    rng = np.random.default_rng(7)
    a = rng.normal(size=6) * 1.5
    b = rng.normal(size=6) * 1.5
    P = gumbel_max_coupling(a, b)
    n = 1_000_000
    est, se = monte_carlo_gumbel_max_coupling(a, b, n, random_state=11)
    pos = se > 0
    z = np.abs(est[pos] - P[pos]) / se[pos]
    assert z.max() < 4.0, z.max()
    # cells never hit by 10^6 draws must have (close to) zero probability; Lemma 3.7 says half the
    # off-diagonal cells are exactly zero
    assert np.all(P[~pos] < 5.0 / n)
    assert np.count_nonzero(P == 0.0) >= 6 * 5 // 2


@pytest.mark.parametrize("d,scale", [(3, 1.0), (7, 5.0), (20, 30.0), (50, 3.0)])
def test_marginals_are_the_two_softmaxes_to_1e12(d, scale):
    rng = np.random.default_rng(d)
    for _ in range(5):
        a = rng.normal(size=d) * scale
        b = rng.normal(size=d) * scale
        P = gumbel_max_coupling(a, b)
        assert np.all(P >= 0)
        assert np.max(np.abs(P.sum(axis=1) - softmax(a))) < 1e-12
        assert np.max(np.abs(P.sum(axis=0) - softmax(b))) < 1e-12


def test_impossible_transitions_are_exactly_zero():
    # X = r, Y = s requires nu_r >= nu_s (App. B.1: the root box is empty otherwise)
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=8), rng.normal(size=8)
    P = gumbel_max_coupling(a, b)
    nu = a - b
    assert np.all(P[nu[:, None] < nu[None, :]] == 0.0)


def test_identical_or_shifted_logits_never_change_class():
    a = np.array([0.3, -1.0, 2.0, 0.0])
    P = gumbel_max_coupling(a, a + 5.0)
    assert np.allclose(np.diag(P), softmax(a), atol=1e-15)
    assert np.allclose(P - np.diag(np.diag(P)), 0.0, atol=1e-15)


def test_large_logits_give_no_nan_and_valid_tables():
    a = np.array([1000.0, -1000.0, 0.0, 999.0, -3.0])
    b = np.array([-1000.0, 1000.0, 3.0, 0.0, 1000.0])
    for x, y in [(a, b), (b, a), (a, a), (a * 1e3, -b * 1e3)]:
        L = log_gumbel_max_coupling(x, y)
        P = np.exp(L)
        assert not np.isnan(L).any() and not np.isnan(P).any()
        assert abs(P.sum() - 1.0) < 1e-12
        assert np.max(np.abs(P.sum(axis=1) - softmax(x))) < 1e-12
        assert np.max(np.abs(P.sum(axis=0) - softmax(y))) < 1e-12
    # the mass goes from class 1 / 4 (beta) to class 0 / 3 (alpha)
    P = gumbel_max_coupling(a, b)
    assert P[0, 1] + P[0, 4] + P[3, 1] + P[3, 4] == pytest.approx(1.0, abs=1e-12)


def test_two_classes_reduce_to_the_comonotone_bernoulli_coupling():
    rng = np.random.default_rng(5)
    for _ in range(10):
        a, b = rng.normal(size=2) * 3, rng.normal(size=2) * 3
        P = gumbel_max_coupling(a, b)
        B = bernoulli_comonotone_coupling(softmax(a)[1], softmax(b)[1])  # index 1 = class 1
        assert np.allclose(P, B, atol=1e-15)


def test_batched_equals_loop_and_stay_probability_equals_trace():
    rng = np.random.default_rng(9)
    A, B = rng.normal(size=(4, 3, 6)) * 2, rng.normal(size=(4, 3, 6)) * 2
    P = gumbel_max_coupling(A, B)
    assert P.shape == (4, 3, 6, 6)
    for i in range(4):
        for j in range(3):
            assert np.allclose(P[i, j], gumbel_max_coupling(A[i, j], B[i, j]), atol=1e-15)
    stay = np.exp(log_gumbel_max_stay_probability(A, B))
    assert np.allclose(stay, np.trace(P, axis1=-2, axis2=-1), atol=1e-14)


def test_diagonal_matches_the_direct_formula_of_appendix_b3():
    # P_rr = (1 + sum_{j != r} exp(max(a_j - a_r, b_j - b_r)))^{-1}, written independently
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=7), rng.normal(size=7)
    P = gumbel_max_coupling(a, b)
    for r in range(7):
        m = np.maximum(a - a[r], b - b[r])
        m[r] = -np.inf
        assert P[r, r] == pytest.approx(1.0 / (1.0 + np.exp(m).sum()), abs=1e-15)


def test_bad_input_raises_clear_errors():
    with pytest.raises(InvalidInputError, match="same shape"):
        gumbel_max_coupling([0.0, 1.0], [0.0, 1.0, 2.0])
    with pytest.raises(InvalidInputError, match="finite"):
        gumbel_max_coupling([0.0, np.nan, 1.0], [0.0, 1.0, 2.0])
    with pytest.raises(InvalidInputError, match="finite"):
        gumbel_max_coupling([0.0, np.inf, 1.0], [0.0, 1.0, 2.0])
    with pytest.raises(InvalidInputError):
        bernoulli_comonotone_coupling(1.5, 0.2)
    with pytest.raises(InvalidParameterError, match="n_draws"):
        monte_carlo_gumbel_max_coupling([0.0, 1.0], [1.0, 0.0], 0)


def test_linear_domain_fast_path_equals_the_log_space_table_at_every_scale(monkeypatch):
    import explainers._gumbel as G

    rng = np.random.default_rng(21)
    for scale in (0.1, 1.0, 10.0, 100.0, 300.0, 1000.0, 1e5):
        A, B = rng.normal(size=(50, 9)) * scale, rng.normal(size=(50, 9)) * scale
        P = gumbel_max_coupling(A, B)
        L = np.exp(log_gumbel_max_coupling(A, B))
        assert np.max(np.abs(P - L)) < 1e-14
        assert np.max(np.abs(P.sum(axis=2) - softmax(A))) < 1e-12
        # force the guarded log-space branch for half of the pairs
        monkeypatch.setattr(G, "_FAST_MAX_LOG_C", -np.inf)
        assert np.max(np.abs(G.gumbel_max_coupling(A, B) - L)) < 1e-14
        monkeypatch.setattr(G, "_FAST_MAX_LOG_C", 600.0)
