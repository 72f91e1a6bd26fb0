"""Explanation metrics of Pliatsika et al. 2024, Section 6, against hand-computed values and the paper's numbers."""

from __future__ import annotations

import numpy as np
import pytest

from explainers._result import Explanation
from explainers.exceptions import InvalidInputError, InvalidParameterError
from explainers.sharp import SharpExplainer
from explainers.sharp_metrics import (
    euclidean_agreement,
    explanation_agreement,
    explanation_fidelity,
    feature_neighbours,
    fidelity,
    jaccard_topk_agreement,
    kendall_tau_agreement,
    method_agreement,
    method_fidelity,
    pairwise_fidelity,
    rank_neighbours,
    sensitivity,
)


def test_texas_am_fidelity_arithmetic():
    """Section 6.1: -20.78-19.52-18.71-1.95 = -60.96; 94.5 - 60.96 = 33.54 vs rank 34; Z = 189.
    |34 - 33.54| = 0.46 -> 1 - 0.46/189 = 0.99757, the paper's 0.998 (its text prints 0.16 as the
    gap, but 1 - 0.16/189 would be 0.9992)."""
    phi = np.array([-20.78, -19.52, -18.71, -1.95])
    assert phi.sum() == pytest.approx(-60.96)
    F = fidelity(phi, 94.5, 34, 189)
    assert F[0] == pytest.approx(1 - 0.46 / 189)
    assert float(F[0]) == pytest.approx(0.998, abs=5e-4)
    # same numbers in ShaRP's stored convention (alpha = -1: values = +phi, prediction = -rank)
    assert fidelity(-phi, -94.5, -34, 189)[0] == pytest.approx(F[0])


def test_fidelity_hand_values_and_batch():
    V = np.array([[1.0, 2.0], [0.5, 0.5]])
    F = fidelity(V, [0.0, 1.0], [3.0, 1.0], 10.0)
    np.testing.assert_allclose(F, [1.0, 0.9])
    e = Explanation(values=V, base_values=[0.0, 1.0], prediction=[3.0, 1.0], feature_names=["a", "b"],
                    method="sharp-score", extra={"normalizer": 10.0})
    np.testing.assert_allclose(explanation_fidelity(e), [1.0, 0.9])
    assert method_fidelity(e) == pytest.approx(0.95)
    assert method_fidelity(e, normalizer=5.0) == pytest.approx(0.9)
    with pytest.raises(InvalidParameterError):
        fidelity(V, 0, 0, 0.0)


def test_pairwise_fidelity():
    np.testing.assert_allclose(pairwise_fidelity([[2.0, -1.0], [0.5, -1.0], [0.0, 0.0], [1.0, -1.0]], [1.0, 1.0, 0.0, 3.0]),
                               [1.0, 0.0, 1.0, 0.0], rtol=0, atol=1e-12)
    X = np.random.default_rng(0).random((20, 3))
    ex = SharpExplainer(lambda A: A @ np.array([1.0, 2.0, 3.0]), X)
    pairs = np.array([(i, j) for i in range(20) for j in range(20) if i != j])
    e = ex.explain_pairwise(pairs)
    assert method_fidelity(e) == pytest.approx(1.0, abs=1e-12)          # exact pairwise explanations are efficient
    with pytest.raises(InvalidInputError):
        pairwise_fidelity([[1.0, 2.0]], [1.0, 2.0])


def test_kendall_paper_example_and_hand_values():
    # rank QoI: <Systems, AI, Inter, Theory>; score QoI: <Inter, AI, Systems, Theory> (AI, Sys, Th, Int)
    rank_qoi = [19.52, 20.78, 1.95, 18.71]
    score_qoi = [0.45, 0.30, -0.05, 0.60]
    assert kendall_tau_agreement(rank_qoi, score_qoi, by="value") == pytest.approx(0.5, abs=1e-12)
    assert kendall_tau_agreement([1, 2, 3], [1, 2, 3]) == pytest.approx(1.0, abs=1e-12)
    assert kendall_tau_agreement([1, 2, 3], [3, 2, 1]) == pytest.approx(0.0, abs=1e-12)
    assert kendall_tau_agreement([1, 2, 3], [1, 1, 3]) == pytest.approx(1 - 0.5 / 3)
    assert kendall_tau_agreement([-3, 1], [3, 1]) == pytest.approx(1.0, abs=1e-12)                # by |phi|
    assert kendall_tau_agreement([-3, 1], [3, 1], by="value") == pytest.approx(0.0, abs=1e-12)
    assert kendall_tau_agreement([5.0], [1.0]) == pytest.approx(1.0, abs=1e-12)


def test_jaccard_and_euclidean_hand_values():
    assert jaccard_topk_agreement([5, 4, 0.1], [5, 0.2, 3]) == pytest.approx(1 / 3)
    assert jaccard_topk_agreement([5, 4, 0.1], [-4, 5, 0]) == pytest.approx(1.0, abs=1e-12)
    assert jaccard_topk_agreement([1, 2, 3, 4], [4, 3, 2, 1], k=1) == pytest.approx(0.0, abs=1e-12)
    assert euclidean_agreement([3, 4], [6, 8]) == pytest.approx(1.0)
    assert euclidean_agreement([1, 0], [0, 1]) == pytest.approx(1 - np.sqrt(2) / 2)
    assert euclidean_agreement([1, 0], [-1, 0]) == pytest.approx(0.0)
    assert euclidean_agreement([0, 0], [0, 0]) == pytest.approx(1.0, abs=1e-12)
    assert euclidean_agreement([0, 0], [1, 0]) == pytest.approx(0.5, abs=1e-12)
    assert explanation_agreement([1, 0], [0, 1], "euclidean") == pytest.approx(1 - np.sqrt(2) / 2)
    with pytest.raises(InvalidInputError):
        euclidean_agreement([1, 2], [1, 2, 3])
    with pytest.raises(InvalidParameterError):
        explanation_agreement([1, 2], [1, 2], "cosine")


def test_method_agreement_and_sensitivity():
    G = np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0], [1.0, 3.0, 2.0]])
    Q = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [1.0, 3.0, 2.0]])
    assert method_agreement(G, Q, "kendall") == pytest.approx((1 + 0 + 1) / 3)
    assert method_agreement(G, G, "euclidean") == pytest.approx(1.0)
    # neighbours: 0<->1, 2->0
    nb = [[1], [0], [0]]
    expected = np.mean([kendall_tau_agreement(G[0], G[1]), kendall_tau_agreement(G[1], G[0]),
                        kendall_tau_agreement(G[2], G[0])])
    assert sensitivity(G, nb, "kendall") == pytest.approx(expected)
    assert rank_neighbours([1, 2, 3, 10], k=1).ravel().tolist() == [1, 0, 1, 2]
    assert feature_neighbours(np.array([[0.0, 0], [0, 1], [5, 5]]), k=1).ravel().tolist() == [1, 0, 1]
    with pytest.raises(InvalidInputError):
        sensitivity(G, [[1], [0]], "kendall")
    with pytest.raises(InvalidInputError):
        sensitivity(G, [[7], [0], [0]], "kendall")
    with pytest.raises(InvalidInputError):
        method_agreement(G, Q[:2])


def test_sensitivity_of_identical_items_is_one():
    """Bob and Cal of Figure 1 have identical features, so ShaRP gives them identical explanations
    (for every QoI): their sensitivity is 1 under all three similarities; Bob vs Osi is lower."""
    X = np.array([[4, 5, 5], [4, 5, 5], [5, 4, 4], [4, 5, 3], [5, 4, 3], [5, 4, 2], [4, 4, 3], [3, 3, 3]], float)
    ex = SharpExplainer(lambda A: A @ np.array([0.4, 0.4, 0.2]), X)
    for qoi in ("rank", "score"):
        e = ex.explain(np.arange(8), qoi)
        for sim in ("kendall", "jaccard", "euclidean"):
            assert sensitivity(e, [[1], [0], [], [], [], [], [], []], sim) == pytest.approx(1.0)
        assert sensitivity(e, [[7], [], [], [], [], [], [], []], "euclidean") < 0.9
