"""GPM / C-GPM / UPM invariants (Hu, Chau et al. 2022, Section 2.1)."""

import numpy as np
import pytest

from learners.exceptions import InvalidInputError, InvalidParameterError, NotFittedError, SnapshotError
from learners.gpm import CGPM, GPM, UPM
from learners.metrics import log_loss, roc_auc
from learners.kernels import pref_kernel, rbf_np
from learners.state import dump_state, load_state

FIX = dict(penalty=1e-4, lengthscale_multiplier=1.0)


@pytest.fixture(scope="module")
def duels():
    """Intransitive duels: the winner is decided by feature 0 when both have feature 2 > 0, else by feature 1."""
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(300, 3)) * [1, 2, 1] + [0, 5, 0], rng.normal(size=(300, 3)) * [1, 2, 1] + [0, 5, 0]
    dec = np.where((A[:, 2] > 0) & (B[:, 2] > 0), 0, 1)
    y = np.where(A[np.arange(300), dec] > B[np.arange(300), dec], 1, -1)
    return A, B, y


def test_skew_symmetry_and_probabilities(duels):
    A, B, y = duels
    for cls in (GPM, UPM):
        m = cls(["a", "b", "c"], **FIX).fit(A, B, y)
        g = m.decision_function(A, B)
        np.testing.assert_allclose(m.decision_function(B, A), -g, atol=1e-12)
        np.testing.assert_allclose(m.predict_proba(A, B) + m.predict_proba(B, A), 1.0, atol=1e-12)
        np.testing.assert_allclose(m.predict_proba(A, B), 1 / (1 + np.exp(-g)), atol=1e-12)
        np.testing.assert_allclose(m.decision_function(A, A), 0.0, atol=1e-12)


def test_gpm_decision_is_the_kernel_expansion(duels):
    A, B, y = duels
    m = GPM(["a", "b", "c"], **FIX).fit(A, B, y)
    assert m.feature_names == ["a", "b", "c"] and m.lengthscales_.shape == (3,)
    assert m.centres_left_.shape == m.centres_right_.shape == (m.alpha_.shape[0], 3)
    g = pref_kernel(m.transform(A[:20]), m.transform(B[:20]), m.centres_left_, m.centres_right_, m.lengthscales_) @ m.alpha_
    np.testing.assert_allclose(m.decision_function(A[:20], B[:20]), g, rtol=1e-10, atol=1e-12)


def test_scaler_uses_training_items_only(duels):
    A, B, y = duels
    m = GPM(**FIX).fit(A[:200], B[:200], y[:200])
    items = np.r_[A[:200], B[:200]]
    np.testing.assert_allclose(m.scaler_mean_, items.mean(0))
    np.testing.assert_allclose(m.transform(A), (A - items.mean(0)) / items.std(0))


def test_both_orders_training_gives_the_same_model(duels):
    A, B, y = duels
    m1 = GPM(both_orders=True, n_centres=60, **FIX).fit(A, B, y)
    m2 = GPM(both_orders=False, n_centres=60, **FIX).fit(A, B, y)
    np.testing.assert_allclose(m1.centres_left_, m2.centres_left_)
    np.testing.assert_allclose(m1.decision_function(A, B), m2.decision_function(A, B), rtol=1e-5, atol=1e-6)


def test_gpm_beats_upm_on_intransitive_duels(duels):
    A, B, y = duels
    g = GPM(seed=1).fit(A[:240], B[:240], y[:240])
    u = UPM(seed=1).fit(A[:240], B[:240], y[:240])
    auc_g = roc_auc(y[240:], g.decision_function(A[240:], B[240:]))
    auc_u = roc_auc(y[240:], u.decision_function(A[240:], B[240:]))
    assert auc_g > 0.8 and auc_g > auc_u
    assert g.penalty_ in g.penalty_grid and g.multiplier_ in g.multiplier_grid and g.item_constant_ in g.constant_grid
    assert len(g.cv_results_) == len(g.penalty_grid) * len(g.multiplier_grid) * len(g.constant_grid)
    best = max(g.cv_results_, key=lambda r: (r["val_auc"], -r["val_log_loss"]))
    assert (best["penalty"], best["multiplier"], best["constant"]) == (g.penalty_, g.multiplier_, g.item_constant_)


def test_upm_decision_is_utility_difference(duels):
    A, B, y = duels
    m = UPM(["a", "b", "c"], **FIX).fit(A, B, y)
    np.testing.assert_allclose(m.decision_function(A, B), m.utility(A) - m.utility(B), rtol=1e-9, atol=1e-10)
    f = (rbf_np(m.transform(A), m.centres_left_, m.lengthscales_) - rbf_np(m.transform(A), m.centres_right_, m.lengthscales_)) @ m.alpha_
    np.testing.assert_allclose(m.utility(A), f, rtol=1e-10, atol=1e-12)


def test_cgpm_with_constant_context_reduces_to_gpm(duels):
    A, B, y = duels
    U = np.full((A.shape[0], 2), 3.0)
    c = CGPM(["a", "b", "c"], ["s", "t"], **FIX).fit(A, B, y, U)
    g = GPM(["a", "b", "c"], **FIX).fit(A, B, y)
    np.testing.assert_allclose(c.decision_function(A, B, U), g.decision_function(A, B), rtol=1e-9, atol=1e-10)
    assert c.context_names == ["s", "t"] and c.context_lengthscales_.shape == (2,) and c.centres_context_.shape == (c.alpha_.shape[0], 2)
    np.testing.assert_allclose(c.decision_function(B, A, U), -c.decision_function(A, B, U), atol=1e-12)


def test_cgpm_uses_context(duels):
    A, B, _ = duels
    rng = np.random.default_rng(4)
    U = rng.integers(0, 2, size=(A.shape[0], 1)).astype(float)
    y = np.where(U[:, 0] == 1, np.sign(A[:, 0] - B[:, 0]), np.sign(B[:, 0] - A[:, 0])).astype(int)  # context flips the winner
    c = CGPM(["a", "b", "c"], ["flip"], **FIX).fit(A[:240], B[:240], y[:240], U[:240])
    g = GPM(["a", "b", "c"], **FIX).fit(A[:240], B[:240], y[:240])
    assert roc_auc(y[240:], c.decision_function(A[240:], B[240:], U[240:])) > 0.9
    assert roc_auc(y[240:], g.decision_function(A[240:], B[240:])) < 0.75


def test_indifferences_are_dropped(duels):
    A, B, y = duels
    y0 = y.copy()
    y0[:50] = 0
    m = GPM(validation_fraction=0.0, **FIX).fit(A, B, y0)
    assert m.n_train_ == 250


def test_state_round_trip(duels):
    A, B, y = duels
    U = np.random.default_rng(1).normal(size=(A.shape[0], 1))
    for m, args in [(GPM(["a", "b", "c"], **FIX).fit(A, B, y), ()), (UPM(**FIX).fit(A, B, y), ()),
                    (CGPM(context_names=["u"], **FIX).fit(A, B, y, U), (U,))]:
        st = load_state(dump_state(m.state_dict()))
        m2 = type(m).from_state(st)
        np.testing.assert_allclose(m2.decision_function(A, B, *args), m.decision_function(A, B, *args), rtol=1e-12)
        assert m2.feature_names == m.feature_names and m2.model_version == m.model_version
    with pytest.raises(SnapshotError):
        GPM.from_state({"meta": {}, "arrays": {}})
    with pytest.raises(SnapshotError):
        UPM.from_state(GPM(**FIX).fit(A, B, y).state_dict())


def test_metrics():
    assert roc_auc([1, -1, 1, -1], [3, 1, 2, 0]) == pytest.approx(1.0, abs=1e-12)
    assert roc_auc([1, -1], [1, 1]) == pytest.approx(0.5, abs=1e-12)
    assert log_loss([1], [0.0]) == pytest.approx(np.log(2))


def test_bad_input_raises(duels):
    A, B, y = duels
    m = GPM(**FIX)
    with pytest.raises(InvalidInputError):
        m.fit(A, B[:, :2], y)
    with pytest.raises(InvalidInputError):
        m.fit(A, B[:-1], y)
    An = A.copy()
    An[0, 0] = np.nan
    with pytest.raises(InvalidInputError):
        m.fit(An, B, y)
    with pytest.raises(InvalidInputError):
        m.fit(A[:0], B[:0], y[:0])
    with pytest.raises(InvalidInputError):
        m.fit(A, B, np.full_like(y, 2))
    with pytest.raises(InvalidInputError):
        m.fit(A, B, np.zeros_like(y))
    with pytest.raises(InvalidInputError):
        GPM(["a", "b"], **FIX).fit(A, B, y)
    with pytest.raises(InvalidInputError):
        CGPM(**FIX).fit(A, B, y)
    with pytest.raises(InvalidInputError):
        GPM(**FIX).fit(A, B, y, U=A)
    with pytest.raises(InvalidParameterError):
        GPM(penalty=-1.0).fit(A, B, y)
    with pytest.raises(NotFittedError):
        GPM().decision_function(A, B)
    m.fit(A, B, y)
    with pytest.raises(InvalidInputError):
        m.decision_function(A[:, :2], B[:, :2])


def test_cv_selection_is_deterministic_and_picks_best_mean_fold_auc(duels):
    A, B, y = duels
    kw = dict(penalty_grid=(1e-2, 1e-4, 1e-6), multiplier_grid=(0.5, 2.0), selection="cv", cv_folds=4, item_constant=0.0)
    m1 = GPM(seed=3, **kw).fit(A[:160], B[:160], y[:160])
    m2 = GPM(seed=3, **kw).fit(A[:160], B[:160], y[:160])
    assert m1.selection_ == "cv" and m1.n_train_ == 160  # no pair is held out of the final fit
    assert len(m1.cv_results_) == 6 and all(len(r["fold_auc"]) == 4 for r in m1.cv_results_)
    for r1, r2 in zip(m1.cv_results_, m2.cv_results_):
        assert r1["fold_auc"] == r2["fold_auc"] and r1["fold_log_loss"] == r2["fold_log_loss"]
    np.testing.assert_array_equal(m1.alpha_, m2.alpha_)
    # the chosen grid point has the best mean fold AUC (ties: smaller mean fold log loss)
    for r in m1.cv_results_:
        assert r["val_auc"] == pytest.approx(np.mean(r["fold_auc"]), abs=1e-12)
        assert r["val_log_loss"] == pytest.approx(np.mean(r["fold_log_loss"]), abs=1e-12)
    best = max(m1.cv_results_, key=lambda r: (r["val_auc"], -r["val_log_loss"]))
    assert (best["penalty"], best["multiplier"]) == (m1.penalty_, m1.multiplier_)
    assert m1.val_auc_ == pytest.approx(best["val_auc"])
    # the folds depend on the seed: another seed gives other fold scores
    m3 = GPM(seed=4, **kw).fit(A[:160], B[:160], y[:160])
    assert [r["fold_auc"] for r in m3.cv_results_] != [r["fold_auc"] for r in m1.cv_results_]
    # the selected model is a real fit: it predicts held-out intransitive duels well
    assert roc_auc(y[200:], m1.decision_function(A[200:], B[200:])) > 0.8


def test_cv_fold_score_matches_an_explicit_refit(duels):
    """Oracle for one fold: refit the same (λ, m) on the other folds by hand and score the held-out fold."""
    A, B, y = duels
    n, k, seed = 120, 3, 5
    kw = dict(penalty_grid=(1e-3, 1e-5), multiplier_grid=(1.0,), selection="cv", cv_folds=k, loss="squared", tol=1e-12,
              max_iter=200, seed=seed, item_constant=0.0)
    m = GPM(**kw).fit(A[:n], B[:n], y[:n])
    folds = np.array_split(np.random.default_rng(seed).permutation(n), k)
    vi = np.sort(folds[0])
    ti = np.sort(np.concatenate(folds[1:]))
    XLs, XRs = m.transform(A[:n]), m.transform(B[:n])
    for lam in (1e-3, 1e-5):
        # exact Nyström KRR (squared loss) with all training pairs of the fold as centres and both orders
        ZL, ZR = np.concatenate([XLs[ti], XRs[ti]]), np.concatenate([XRs[ti], XLs[ti]])
        yy = np.concatenate([y[ti], -y[ti]]).astype(float)
        K = pref_kernel(ZL, ZR, XLs[ti], XRs[ti], m.lengthscales_)
        Kmm = pref_kernel(XLs[ti], XRs[ti], XLs[ti], XRs[ti], m.lengthscales_)
        N = yy.shape[0]
        alpha = np.linalg.lstsq(K.T @ K + lam * N * Kmm, K.T @ yy, rcond=None)[0]
        g = pref_kernel(XLs[vi], XRs[vi], XLs[ti], XRs[ti], m.lengthscales_) @ alpha
        r = next(r for r in m.cv_results_ if r["penalty"] == lam)
        assert r["fold_auc"][0] == pytest.approx(roc_auc(y[vi], g), abs=1e-9)


def test_selection_auto_switches_on_size(duels):
    A, B, y = duels
    kw = dict(penalty_grid=(1e-3, 1e-5), multiplier_grid=(1.0,), selection="auto")
    assert GPM().selection == "holdout"  # the library default is unchanged (the stream refit relies on it)
    small = GPM(cv_max_train=1000, **kw).fit(A[:200], B[:200], y[:200])
    large = GPM(cv_max_train=100, **kw).fit(A[:200], B[:200], y[:200])
    assert small.selection_ == "cv" and small.n_train_ == 200
    assert large.selection_ == "holdout" and large.n_train_ == 180 and "fold_auc" not in large.cv_results_[0]
    assert GPM(penalty=1e-4, lengthscale_multiplier=1.0, item_constant=0.0).fit(A[:50], B[:50], y[:50]).selection_ == "none"
    assert GPM(penalty=1e-4, lengthscale_multiplier=1.0).fit(A[:50], B[:50], y[:50]).selection_ == "holdout"  # c searched
    with pytest.raises(InvalidParameterError):
        GPM(selection="kfold").fit(A, B, y)
    with pytest.raises(InvalidParameterError):
        GPM(cv_folds=1).fit(A, B, y)
