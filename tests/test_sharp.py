"""ShaRP explainer (Pliatsika et al. 2024): oracle agreement with xai-sharp, the paper's definitions and numbers,
efficiency, approximation, speed-relevant structure, and input validation."""

from __future__ import annotations

import itertools
import warnings
from math import comb

import numpy as np
import pytest

from explainers.exceptions import BudgetError, InvalidInputError, InvalidParameterError
from explainers.sharp import (
    TIE_RTOL,
    SharpExplainer,
    _RankCounter,
    catalog_ranks,
    coalition_weights,
    explain,
    explain_pairwise,
    learner_score_fn,
    rank_strata,
    strata_summary,
)
from tests.conftest import require_module

FIG1_X = np.array([[4, 5, 5], [4, 5, 5], [5, 4, 4], [4, 5, 3], [5, 4, 3], [5, 4, 2], [4, 4, 3], [3, 3, 3]], float)
FIG1_NAMES = ["Bob", "Cal", "Dia", "Eli", "Fay", "Kat", "Leo", "Osi"]
FIG1_W = np.array([0.4, 0.4, 0.2])


def lin(w):
    w = np.asarray(w, float)

    def f(A):
        A = np.asarray(A, dtype=float)  # xai-sharp passes object arrays
        s = A[:, 0] * w[0]
        for j in range(1, w.size):
            s = s + A[:, j] * w[j]
        return s

    return f


def nonlinear(A):
    A = np.asarray(A, dtype=float)
    return np.tanh(A[:, 0]) + A[:, 1] * A[:, 2] - 0.3 * A[:, 3] ** 2


def small_catalog(n=30, d=4, seed=0, ties=True):
    rng = np.random.default_rng(seed)
    X = np.round(rng.random((n, d)), 1 if ties else 6)
    if ties:
        X[5] = X[2]          # duplicated item -> tied scores
    return X


# --------------------------------------------------------------------------- brute-force oracle
def brute_force(f, X, j, qoi, ties="min", k=None, exclude=True, c=None, ref=None):
    """Eq. 3/4/6 literally: every S, every reference row, D' = D \\ {v} ∪ {x}, ranks by counting.

    Scores closer than the documented tie tolerance (TIE_RTOL × score range + 16 ulps of max |s|) count
    as ties, as in the explainer (issue 12, finding 8)."""
    n, d = X.shape
    all_s = f(X)
    tol = TIE_RTOL * (all_s.max() - all_s.min()) + 16 * np.finfo(float).eps * np.abs(all_s).max()
    c = d - 1 if c is None else c
    v = X[j]
    others = [i for i in range(n) if (i != j or not exclude)]
    catalog = X[others]
    cs = f(catalog)
    alpha = -1.0 if qoi == "rank" else 1.0

    def q(x):
        s = f(x[None])[0]
        gt, ge = (cs > s + tol).sum(), (cs >= s - tol).sum()
        r = {"min": 1 + gt, "max": 1 + ge, "average": 1 + (gt + ge) / 2}[ties]
        return {"score": s, "rank": r, "topk": float(r <= (k or 0))}[qoi]

    refs = others if ref is None else [i for i in ref if (i != j or not exclude)]

    def Q(S):
        vals = []
        for u in X[refs]:
            x = v.copy()
            x[list(S)] = u[list(S)]
            vals.append(q(x))
        return np.mean(vals)

    phi = np.zeros(d)
    for i in range(d):
        rest = [a for a in range(d) if a != i]
        for size in range(0, c + 1):
            for S in itertools.combinations(rest, size):
                phi[i] += (Q(S) - Q(S + (i,))) / (d * comb(d - 1, size))
    return alpha * phi


@pytest.mark.parametrize("qoi,ties,k", [("rank", "min", None), ("rank", "max", None), ("rank", "average", None),
                                        ("topk", "min", 5), ("topk", "max", 5), ("score", "min", None)])
def test_matches_brute_force_definition(qoi, ties, k):
    X = small_catalog(n=14, d=3, seed=3)
    f = lin([0.5, 0.3, 0.2])
    ex = SharpExplainer(f, X, ties=ties)
    e = ex.explain([0, 2, 5, 9], qoi, k=k)
    for row, j in enumerate([0, 2, 5, 9]):
        np.testing.assert_allclose(e.values[row], brute_force(f, X, j, qoi, ties, k), atol=1e-12)


def test_matches_brute_force_reference_subset():
    """D' a subset of D (Algorithm 1's reference set): v is dropped from D' only if it is in it."""
    X = small_catalog(n=15, d=3, seed=6)
    ref = [0, 2, 3, 7, 11, 14]
    for ties in ("min", "max"):
        f = lin([0.2, 0.5, 0.3])
        e = SharpExplainer(f, X, ties=ties).explain([2, 5], "rank", reference=ref)
        for row, j in enumerate([2, 5]):
            np.testing.assert_allclose(e.values[row], brute_force(f, X, j, "rank", ties, ref=ref), atol=1e-12)
        assert e.additivity_error().max() < 1e-9


def test_matches_brute_force_nonlinear_and_truncated():
    X = small_catalog(n=12, d=4, seed=4)
    ex = SharpExplainer(nonlinear, X)
    for c in (0, 1, 2, 3):
        e = ex.explain([1, 7], "rank", max_coalition_size=c)
        for row, j in enumerate([1, 7]):
            np.testing.assert_allclose(e.values[row], brute_force(nonlinear, X, j, "rank", c=c), atol=1e-12)


# --------------------------------------------------------------------------- xai-sharp oracle
def xai(qoi, f, X, **kw):
    # only the oracle tests need xai-sharp (pinned): they alone skip locally without it, and fail under CI=true
    ShaRP = require_module("sharp", "xai-sharp, pinned in requirements.txt").ShaRP

    name = {"rank": "rank", "score": "rank_score", "topk": "top_k"}[qoi]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = ShaRP(qoi=name, target_function=f, measure="shapley", sample_size=X.shape[0], replace=False,
                  cache=False, random_state=0, n_jobs=1, **kw)
        s.fit(X)
    return s


@pytest.mark.parametrize("scorer", ["linear", "nonlinear"])
@pytest.mark.parametrize("qoi", ["rank", "score", "topk"])
def test_agrees_with_xai_sharp_exact(qoi, scorer):
    """Same data, same scoring callable; xai-sharp configured for exact computation.

    Convention mapping (docs/sharp.md): xai-sharp ranks a hybrid x against the whole catalog
    including the explained item and counts ties ahead, rank_xai(x) = #{w in D: f(w) >= f(x)},
    and keeps v in the reference rows: ours with exclude_item=False, ties="max" gives
    rank_xai + 1 (a constant, so identical Shapley values); xai top_k=k is our k + 1.
    Its rank QoI is already "better rank = positive" (our alpha = -1).
    """
    X = small_catalog(n=30, d=4, seed=1)
    f = lin([0.4, 0.3, 0.2, 0.1]) if scorer == "linear" else nonlinear
    k_xai = 6
    lib = xai(qoi, f, X, **({"top_k": k_xai} if qoi == "topk" else {}))
    # xai-sharp compares scores exactly: tie_rtol=0 reproduces that (rounding noise and all)
    ours = SharpExplainer(f, X, ties="max", tie_rtol=0).explain(
        np.arange(X.shape[0]), qoi, k=k_xai + 1 if qoi == "topk" else None, exclude_item=False)
    ref = np.array([lib.individual(i, X) for i in range(X.shape[0])], dtype=float)
    assert np.abs(ours.values - ref).max() <= 1e-9
    if qoi == "topk":
        assert np.abs(ref).max() > 0.05      # the cut-off is inside the catalog: a non-trivial game
    assert ours.additivity_error().max() <= 1e-9


@pytest.mark.parametrize("qoi", ["rank", "score", "topk"])
def test_agrees_with_xai_sharp_truncated_coalitions(qoi):
    X = small_catalog(n=25, d=4, seed=2)
    f = nonlinear
    lib = xai(qoi, f, X, coalition_size=1, **({"top_k": 5} if qoi == "topk" else {}))
    ours = SharpExplainer(f, X, ties="max", tie_rtol=0).explain(np.arange(10), qoi, k=6 if qoi == "topk" else None,
                                                   exclude_item=False, max_coalition_size=1)
    ref = np.array([lib.individual(i, X) for i in range(10)], dtype=float)
    assert np.abs(ours.values - ref).max() <= 1e-9


@pytest.mark.parametrize("qoi", ["rank", "score", "topk"])
def test_agrees_with_xai_sharp_pairwise(qoi):
    X = small_catalog(n=30, d=4, seed=5)
    f = lin([0.4, 0.3, 0.2, 0.1])
    lib = xai(qoi, f, X, **({"top_k": 8} if qoi == "topk" else {}))
    ranks = catalog_ranks(f(X))
    order = np.argsort(ranks, kind="stable")
    pairs = np.array([(order[3], order[12]), (order[12], order[3]), (order[0], order[29]), (2, 5), (order[7], order[9])])
    ours = SharpExplainer(f, X, ties="max", tie_rtol=0).explain_pairwise(pairs, qoi, k=9 if qoi == "topk" else None)
    ref = np.array([lib.pairwise(X[a], X[b]) for a, b in pairs], dtype=float)
    assert np.abs(ours.values - ref).max() <= 1e-9
    assert np.abs(ref).max() > 0


# --------------------------------------------------------------------------- efficiency & paper
@pytest.mark.parametrize("qoi,k", [("rank", None), ("score", None), ("topk", 10)])
@pytest.mark.parametrize("ties", ["min", "max", "average"])
def test_efficiency_exact(qoi, k, ties):
    X = small_catalog(n=40, d=5, seed=7)
    e = SharpExplainer(lambda A: np.sin(A[:, 0] * 3) + A[:, 1:].sum(1), X, ties=ties).explain(
        np.arange(40), qoi, k=k)
    np.testing.assert_allclose(e.values.sum(1), e.prediction - e.base_values, atol=1e-9)
    assert e.additivity_error().max() < 1e-9
    assert e.extra["exact"] is True
    if qoi == "rank":   # better rank = positive: contributions sum to mean rank - rank
        np.testing.assert_allclose(e.values.sum(1), e.extra["mean_rank"] - e.extra["qoi_value"], atol=1e-9)


def test_mean_rank_is_middle_of_list_without_ties():
    """Section 6.1: the displacement is 'relative to the middle of the ranked list (position 94.5
    out of 189)': with every other item as reference and Eq. 3, mean rank = n/2."""
    rng = np.random.default_rng(0)
    X = rng.random((189, 4))
    e = SharpExplainer(lin([0.4, 0.3, 0.2, 0.1]), X).explain(np.arange(0, 189, 17), "rank")
    np.testing.assert_allclose(e.extra["mean_rank"], 94.5)
    np.testing.assert_allclose(-e.base_values, 94.5)
    np.testing.assert_allclose(e.values.sum(1), 94.5 - e.extra["rank"], atol=1e-9)


def test_figure1_scores_ranking_and_example2():
    f = lin(FIG1_W)
    np.testing.assert_allclose(f(FIG1_X), [4.6, 4.6, 4.4, 4.2, 4.2, 4.0, 3.8, 3.0])
    r = catalog_ranks(f(FIG1_X))
    assert [FIG1_NAMES[i] for i in np.argsort(r, kind="stable")] == FIG1_NAMES       # Figure 1b order
    assert r.tolist() == [1, 1, 3, 4, 4, 6, 7, 8]
    # Example 2: Dia's essay 4 -> 5 raises her f score 4.4 -> 4.6 but her rank stays 3 when an item
    # that ties existing ones is ranked behind them (ties="max"); with ties="min" she would share rank 1.
    ex = SharpExplainer(f, FIG1_X, ties="max")
    dia2 = FIG1_X[2].copy()
    dia2[2] = 5
    assert f(dia2[None])[0] == pytest.approx(4.6)
    assert ex._qoi(f(dia2[None]), np.array([f(FIG1_X[2:3])[0]]), "rank", None)[0] == 3
    # the essay-only scorer g of Figure 1c ranks the same top-3
    g = lin([0.0, 0.0, 1.0])
    assert np.argsort(catalog_ranks(g(FIG1_X)), kind="stable")[:3].tolist() == [0, 1, 2]


def test_figure1_rank_explanations_essay_dominates_top():
    """Example 1's point: essay carries the smallest weight, yet it is the feature that lifts the
    top-4 candidates (Bob, Cal) in rank; and Osi's rank is pulled down most by gpa and sat."""
    e = SharpExplainer(lin(FIG1_W), FIG1_X, feature_names=["gpa", "sat", "essay"]).explain(np.arange(8), "rank")
    assert np.argmax(e.values[0]) == 2 and np.argmax(e.values[1]) == 2
    assert e.values[7, 2] == pytest.approx(e.values[7].max())  # essay 3 is average: hurts Osi least
    assert e.values[7, :2].max() < 0
    np.testing.assert_allclose(e.additivity_error(), 0, atol=1e-12)


def test_pairwise_sums_to_rank_difference_and_half():
    X = small_catalog(n=50, d=4, seed=11, ties=False)
    f = nonlinear
    ex = SharpExplainer(f, X)
    ranks = ex.ranks
    pairs = np.array([(0, 1), (1, 0), (3, 40), (17, 22), (49, 2)])
    e = ex.explain_pairwise(pairs)
    np.testing.assert_allclose(e.values.sum(1), ranks[pairs[:, 1]] - ranks[pairs[:, 0]], atol=1e-9)
    np.testing.assert_allclose(e.values.sum(1), e.extra["outcome_difference"], atol=1e-9)
    assert e.additivity_error().max() < 1e-9
    h = ex.explain_pairwise(pairs, halve=True)
    np.testing.assert_allclose(h.values, e.values / 2, atol=1e-12)
    assert h.additivity_error().max() < 1e-9
    # skew-symmetry of the baseline game for the score QoI: phi(v > u) = -phi(u > v)
    s1 = ex.explain_pairwise(pairs, "score")
    s2 = ex.explain_pairwise(pairs[:, ::-1], "score")
    np.testing.assert_allclose(s1.values, -s2.values, atol=1e-12)
    # Eq. 3 literally (v removed from the catalog): one position better for u when v is ahead
    lit = ex.explain_pairwise(pairs, exclude_item=True)
    ahead = ranks[pairs[:, 0]] < ranks[pairs[:, 1]]
    np.testing.assert_allclose(lit.values.sum(1), ranks[pairs[:, 1]] - ranks[pairs[:, 0]] - ahead, atol=1e-9)


def test_linear_score_qoi_closed_form():
    """Score QoI with a linear scorer and marginal removal: phi_j = w_j (v_j - mean_ref x_j)."""
    X = small_catalog(n=20, d=4, seed=12, ties=False)
    w = np.array([0.4, -0.3, 0.2, 1.0])
    e = SharpExplainer(lin(w), X).explain(np.arange(20), "score")
    for j in range(20):
        ref = np.delete(X, j, axis=0).mean(0)
        np.testing.assert_allclose(e.values[j], w * (X[j] - ref), atol=1e-12)


def test_null_and_symmetric_players():
    rng = np.random.default_rng(3)
    X = rng.random((25, 3))
    X[:, 2] = X[:, 1]                      # features 1 and 2 always equal, feature 0 unused
    e = SharpExplainer(lambda A: A[:, 1] + A[:, 2], X).explain(np.arange(25), "rank")
    np.testing.assert_allclose(e.values[:, 0], 0, atol=1e-12)         # null player
    np.testing.assert_allclose(e.values[:, 1], e.values[:, 2], atol=1e-12)  # symmetry
    assert np.abs(e.values[:, 1]).max() > 1


# --------------------------------------------------------------------------- approximation
def test_approximation_reproducible_and_efficient_on_its_sample():
    X = small_catalog(n=200, d=5, seed=8, ties=False)
    f = lin([0.3, 0.3, 0.3, 0.025, 0.075])
    ex = SharpExplainer(f, X)
    a1 = ex.explain(np.arange(30), "rank", sample_size=20, seed=1, anchor=False)
    a2 = ex.explain(np.arange(30), "rank", sample_size=20, seed=1, anchor=False)
    a3 = ex.explain(np.arange(30), "rank", sample_size=20, seed=2, anchor=False)
    np.testing.assert_array_equal(a1.values, a2.values)
    assert np.abs(a1.values - a3.values).max() > 0
    # one shared sample per item: the exact Shapley value of the sampled game (efficiency w.r.t. it)
    np.testing.assert_allclose(a1.values.sum(1) + a1.extra["sample_base_value"], a1.prediction, atol=1e-9)
    assert a1.extra["exact"] is False and a1.extra["sample_size"] == 20
    exact = ex.explain(np.arange(30), "rank")
    full = ex.explain(np.arange(30), "rank", sample_size=199, seed=5)   # m = |D'| - 1 is exact
    np.testing.assert_allclose(full.values, exact.values, atol=1e-9)
    from explainers.sharp_metrics import method_agreement, method_fidelity
    assert method_fidelity(exact) == pytest.approx(1.0, abs=1e-12)
    # unanchored, m = 20 of 199: the sample mean rank is off by ~ n/sqrt(12 m) -> fidelity ~ 0.95
    assert 0.9 < method_fidelity(a1) < 1.0
    # anchored (default): Q(A) is the exact mean, so the sum is exact and each feature shifts equally
    b1 = ex.explain(np.arange(30), "rank", sample_size=20, seed=1)
    assert method_fidelity(b1) == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(b1.values - a1.values,
                               ((b1.values.sum(1) - a1.values.sum(1)) / 5)[:, None] * np.ones(5), atol=1e-9)
    assert method_agreement(b1, exact, "kendall") > 0.8
    c1 = ex.explain(np.arange(30), "rank", max_coalition_size=1)
    assert c1.extra["exact"] is False and c1.additivity_error().max() > 1e-6


def test_reference_subset_and_replace():
    X = small_catalog(n=60, d=3, seed=9, ties=False)
    ex = SharpExplainer(lin([1, 2, 3]), X)
    ref = np.arange(0, 60, 3)
    e = ex.explain([0, 1], "score", reference=ref)
    np.testing.assert_allclose(e.base_values, [np.delete(lin([1, 2, 3])(X[ref]), 0).mean(), lin([1, 2, 3])(X[ref]).mean()])
    assert e.additivity_error().max() < 1e-9
    r = ex.explain([0], "rank", sample_size=100, replace=True, seed=0)
    assert r.extra["sample_size"] == 100


# --------------------------------------------------------------------------- structure
def test_one_vectorised_call_per_chunk_and_chunking_invariance():
    X = small_catalog(n=50, d=4, seed=10)
    calls = []

    def f(A):
        calls.append(A.shape[0])
        return nonlinear(A)

    ex = SharpExplainer(f, X)
    calls.clear()
    e = ex.explain([3], "rank")
    assert calls == [14 * 50]                    # (2^d - 2) coalitions x every reference row, one call
    small = SharpExplainer(f, X, max_rows=64)
    calls.clear()
    e2 = small.explain([3], "rank")
    assert max(calls) <= 64 and len(calls) > 1
    np.testing.assert_allclose(e.values, e2.values, atol=1e-12)
    calls.clear()
    ex.explain_pairwise([(1, 2), (2, 3), (4, 5)])
    assert calls == [3 * 14]


def test_score_rows_from_the_scorer_or_one_call_per_block():
    """A plain callable is called once per block of max_rows hybrids; a learner scorer in blocks of its
    ``score_rows`` (512); an explicit ``score_rows`` wins. The values do not depend on the blocks."""
    X = small_catalog(n=60, d=4, seed=11)
    calls = []

    class Model:
        def score(self, A):
            calls.append(A.shape[0])
            return nonlinear(A)

    def f(A):
        calls.append(A.shape[0])
        return nonlinear(A)

    plain = SharpExplainer(f, X)
    assert plain.score_rows == plain.max_rows
    calls.clear()
    e = plain.explain([3, 7], "rank")
    assert calls == [2 * 14 * 60]
    scorer = learner_score_fn(Model())
    assert scorer.score_rows == 512
    by_scorer = SharpExplainer(scorer, X)
    calls.clear()
    e2 = by_scorer.explain([3, 7], "rank")
    assert calls == [512, 512, 512, 2 * 14 * 60 - 3 * 512]
    explicit = SharpExplainer(f, X, score_rows=100)
    calls.clear()
    e3 = explicit.explain([3, 7], "rank")
    assert max(calls) == 100 and sum(calls) == 2 * 14 * 60
    np.testing.assert_array_equal(e.values, e2.values)
    np.testing.assert_array_equal(e.values, e3.values)


def test_rank_counter_equals_searchsorted():
    rng = np.random.default_rng(0)
    for trial in range(60):
        kind = trial % 4
        m = int(rng.integers(1, 200))
        x = [rng.normal(size=m), np.round(rng.random(m) * 10), np.exp(rng.normal(0, 6, m)),
             np.r_[rng.normal(size=m), np.full(5, 0.3), 1e-300, -1e300]][kind]
        srt = np.sort(x)
        c = _RankCounter(srt)
        s = np.r_[rng.choice(srt, 300), rng.normal(size=300) * 3, np.nextafter(rng.choice(srt, 100), np.inf),
                  np.nextafter(rng.choice(srt, 100), -np.inf), np.inf, -np.inf]
        np.testing.assert_array_equal(c.count_le(s), np.searchsorted(srt, s, side="right"))
        np.testing.assert_array_equal(c.count_lt(s), np.searchsorted(srt, s, side="left"))


def test_coalition_weights_sum_and_strata():
    W = coalition_weights(4)
    # phi for Q = indicator of the full mask: efficiency -> sum_i phi_i = Q(0) - Q(full) = -1
    Q = np.zeros(16)
    Q[15] = 1.0
    assert (W @ Q).sum() == pytest.approx(-1.0)
    assert rank_strata([1, 18, 19, 189], 189).tolist() == [0, 0, 1, 9]
    X = small_catalog(n=100, d=3, seed=1, ties=False)
    e = SharpExplainer(lin([1, 1, 1]), X).explain(np.arange(100), "rank")
    summ = strata_summary(e)
    assert [s["count"] for s in summ] == [10] * 10
    assert summ[0]["label"] == "0-10%"
    top = summ[0]["median"]
    bottom = summ[-1]["median"]
    assert min(top.values()) > 0 > max(bottom.values())       # top stratum gains, bottom loses rank
    rows = e.values[rank_strata(e.extra["rank"], 100) == 3]
    assert summ[3]["mean"]["x0"] == pytest.approx(rows[:, 0].mean())


def test_one_shot_functions_and_records():
    e = explain(lin(FIG1_W), FIG1_X, [0, 7], "topk", k=4, feature_names=["gpa", "sat", "essay"], item_ids=FIG1_NAMES)
    assert e.method == "sharp-topk" and e.instance_ids == ["Bob", "Osi"]
    np.testing.assert_allclose(e.prediction, [1.0, 0.0], rtol=0, atol=1e-12)
    rec = e.to_records()[0]
    assert rec["method"] == "sharp-topk" and len(rec["values"]) == 3
    p = explain_pairwise(lin(FIG1_W), FIG1_X, (2, 6), item_ids=FIG1_NAMES)
    assert p.instance_ids == ["Dia>Leo"] and p.values.sum() == pytest.approx(7 - 3)


# --------------------------------------------------------------------------- bad input
def test_bad_input_raises_clear_errors():
    f = lin([1, 1, 1])
    with pytest.raises(InvalidInputError, match="NaN or inf"):
        SharpExplainer(f, np.array([[1.0, np.nan, 0.0], [0, 0, 0]]))
    with pytest.raises(InvalidInputError, match="shape"):
        SharpExplainer(f, np.ones(3))
    with pytest.raises(InvalidInputError, match="one score per row"):
        SharpExplainer(lambda A: np.ones(2), FIG1_X)
    with pytest.raises(InvalidInputError, match="finite"):
        SharpExplainer(lambda A: np.full(A.shape[0], np.nan), FIG1_X)
    with pytest.raises(InvalidInputError, match="feature names"):
        SharpExplainer(f, FIG1_X, feature_names=["a"])
    with pytest.raises(BudgetError):                 # above 62 players: group features first
        SharpExplainer(lambda A: A.sum(1), np.ones((3, 63)))
    ex = SharpExplainer(f, FIG1_X)
    with pytest.raises(InvalidParameterError, match="qoi"):
        ex.explain([0], "ndcg")
    with pytest.raises(InvalidParameterError, match="'k'"):
        ex.explain([0], "topk")
    with pytest.raises(InvalidParameterError, match="'k'"):
        ex.explain([0], "topk", k=9)
    with pytest.raises(InvalidInputError, match="indices"):
        ex.explain([8], "rank")
    with pytest.raises(InvalidInputError, match="integer"):
        ex.explain([0.5], "rank")
    with pytest.raises(InvalidParameterError, match="max_coalition_size"):
        ex.explain([0], "rank", max_coalition_size=3)
    with pytest.raises(InvalidParameterError, match="sample_size"):
        ex.explain([0], "rank", sample_size=0)
    with pytest.raises(InvalidInputError, match="itself"):
        ex.explain_pairwise([(1, 1)])
    with pytest.raises(InvalidInputError, match="shape"):
        ex.explain_pairwise([(1, 2, 3)])
    with pytest.raises(InvalidInputError, match="only the explained item"):
        ex.explain([0], "rank", reference=[0])
    with pytest.raises(InvalidParameterError, match="ties"):
        SharpExplainer(f, FIG1_X, ties="dense")
    wide = SharpExplainer(lambda A: A.sum(1), np.random.default_rng(0).random((80, 20)))
    with pytest.raises(BudgetError, match="items per call"):
        wide.explain(np.arange(80), "score")


# --------------------------------------------------------------------------- learners
class _ScoreModel:
    feature_names = ["a", "b", "c"]

    def score(self, X):
        return np.asarray(X) @ np.array([1.0, 2.0, -1.0])


class _MarginModel:
    feature_names = ["a", "b", "c"]

    def margins(self, XL, XR):
        return (np.asarray(XL) - np.asarray(XR)) @ np.array([1.0, 2.0, -1.0])


class _MarginOneModel:
    feature_names = ["a", "b", "c"]

    def margin_one(self, xl, xr, context=None):
        w = {"a": 1.0, "b": 2.0, "c": -1.0}
        return sum(w[k] * (xl[k] - xr[k]) for k in w)


def test_learner_score_fn_ranks_like_the_utility():
    X = small_catalog(n=25, d=3, seed=13, ties=False)
    direct = SharpExplainer(lin([1.0, 2.0, -1.0]), X).explain(np.arange(25), "rank")
    for model, base in ((_ScoreModel(), None), (_MarginModel(), [0.3, 0.1, 0.2]), (_MarginOneModel(), None)):
        e = SharpExplainer(learner_score_fn(model, base), X).explain(np.arange(25), "rank")
        np.testing.assert_allclose(e.values, direct.values, atol=1e-9)
    with pytest.raises(InvalidInputError, match="scoring callable"):
        learner_score_fn(object())


@pytest.mark.parametrize("ties", ["min", "max", "average"])
@pytest.mark.parametrize("exclude", [True, False])
def test_reference_means_match_explicit_tables(ties, exclude):
    """base_values / mean_rank come from sums and binary searches; check them against the explicit
    mean over D' minus v of each reference row's outcome in D minus v (Eqs 2-4 at S = A)."""
    X = small_catalog(n=16, d=3, seed=21)
    f = lin([0.5, 0.3, 0.2])
    s = f(X)
    ex = SharpExplainer(f, X, ties=ties)
    tol = ex.tol                       # documented tie tolerance (issue 12, finding 8)
    for ref in (None, [0, 2, 5, 6, 9, 13, 15]):
        R = list(range(16)) if ref is None else ref
        for qoi, k in (("rank", None), ("score", None), ("topk", 4), ("topk", 7)):
            e = ex.explain(np.arange(16), qoi, k=k, reference=ref, exclude_item=exclude)
            for j in range(16):
                cat = [w for w in range(16) if w != j or not exclude]
                rows = [u for u in R if u != j or not exclude]

                def rank(u):
                    gt = sum(s[w] > s[u] + tol for w in cat)
                    ge = sum(s[w] >= s[u] - tol for w in cat)
                    return {"min": 1 + gt, "max": 1 + ge, "average": 1 + (gt + ge) / 2}[ties]

                ranks = np.array([rank(u) for u in rows], float)
                q = {"rank": ranks, "score": s[rows], "topk": (ranks <= (k or 0)).astype(float)}[qoi]
                assert e.extra["mean_qoi"][j] == pytest.approx(q.mean(), abs=1e-12 + tol)
                assert e.extra["mean_rank"][j] == pytest.approx(ranks.mean(), abs=1e-12)
            assert e.additivity_error().max() < 1e-9


def _two_additive(aggregation, scaler, seed):
    """A 2-additive capacity model on 6 criteria (one decreasing) learned on random duels."""
    from learners.capacity_stream import CapacityLogistic

    rng = np.random.default_rng(seed)
    names = [f"c{i}" for i in range(6)]
    model = CapacityLogistic(names, aggregation=aggregation, k_additive=2, scaler=scaler, decreasing=["c4"])
    lo = 3.0 if scaler == "minmax" else 1.0
    XL, XR = np.round(rng.random((300, 6)) * lo, 1), np.round(rng.random((300, 6)) * lo, 1)
    model.learn_many(XL, XR, np.where(XL @ rng.normal(size=6) + np.minimum(XL[:, 0], XL[:, 1]) >
                                      XR @ rng.normal(size=6) + np.minimum(XR[:, 0], XR[:, 1]), 1, -1))
    return model, np.round(rng.random((40, 6)) * lo, 1)


@pytest.mark.parametrize("aggregation,scaler", [("choquet", "minmax"), ("multilinear", "none")])
def test_two_additive_hybrids_equal_the_scored_rows(aggregation, scaler):
    """A 2-additive capacity scores ShaRP's hybrids as a form of pairs (explainers.sharp.hybrids): every
    hybrid's score equals the model's score of the built row, and the explanations (every QoI, exact and
    sampled, grouped players, ties in the catalog, pairwise) equal those of scoring the rows."""
    from explainers.sharp.hybrids import PairwiseHybrids

    model, X = _two_additive(aggregation, scaler, seed=3)
    X[7] = X[2]                                                     # a tie in the catalog
    scorer = learner_score_fn(model)
    assert isinstance(scorer.hybrid, PairwiseHybrids)
    rng = np.random.default_rng(0)
    removed = rng.random((30, 6)) < 0.5
    removed[:, 3] = removed[:, 2]                                   # a block of two features
    s = scorer.hybrid(X[:4], X[None, 10:15], removed)               # (4, 30, 5)
    rows = np.where(removed[None, :, None, :], X[None, None, 10:15, :], X[:4, None, None, :])
    np.testing.assert_allclose(s, model.score(rows.reshape(-1, 6)).reshape(4, 30, 5), rtol=0, atol=1e-12)
    rows_only = lambda A: model.score(A)                            # noqa: E731 — no .hybrid: rows are built
    groups = {"g": ["c2", "c3"]}
    names = list(model.feature_names)
    for kw in ({"feature_names": names}, {"feature_names": names, "feature_groups": groups}):
        fast, slow = SharpExplainer(scorer, X, **kw), SharpExplainer(rows_only, X, **kw)
        for qoi, extra in (("rank", {}), ("score", {}), ("topk", {"k": 5}), ("rank", {"sample_size": 6, "seed": 1})):
            a = fast.explain(np.arange(0, 40, 3), qoi, **extra)
            b = slow.explain(np.arange(0, 40, 3), qoi, **extra)
            np.testing.assert_allclose(a.values, b.values, rtol=0, atol=1e-9)
            np.testing.assert_allclose(a.base_values, b.base_values, rtol=0, atol=1e-9)
        pairs = np.array([[0, 1], [2, 7], [5, 9]])
        np.testing.assert_allclose(fast.explain_pairwise(pairs, "rank").values,
                                   slow.explain_pairwise(pairs, "rank").values, rtol=0, atol=1e-9)
    wide = SharpExplainer(scorer, X, max_exact_players=4, max_coalitions=32)      # sampled coalitions
    assert wide.sampled
    np.testing.assert_allclose(wide.explain([0, 1], "rank", seed=5).values,
                               SharpExplainer(rows_only, X, max_exact_players=4, max_coalitions=32)
                               .explain([0, 1], "rank", seed=5).values, rtol=0, atol=1e-9)
