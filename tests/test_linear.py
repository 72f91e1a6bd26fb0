"""LinearBT (online linear Bradley–Terry) and its exact Shapley explainer."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from explainers.linear import explain_linear
from learners.exceptions import InvalidInputError, InvalidParameterError, NotFittedError, SnapshotError
from learners.linear import LinearBT

NAMES = ["a", "b", "c", "d", "e"]


def bt_data(rng, n, w, scales):
    """Pairs from a known Bradley–Terry model with P(left ≻ right) = σ(w·(x_l − x_r))."""
    d = len(w)
    XL = rng.normal(size=(n, d)) * scales
    XR = rng.normal(size=(n, d)) * scales
    p = 1.0 / (1.0 + np.exp(-(XL - XR) @ w))
    y = np.where(rng.random(n) < p, 1, -1)
    return XL, XR, y


def cosine(a, b):
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


# ---------------------------------------------------------------------- explainer
def test_closed_form_values():
    e = explain_linear([2.0, 0.0, -1.0], [1.0, 5.0, 2.0], [0.0, 1.0, 1.0], background_mean_diff=[0.5, 1.0, 2.0],
                       feature_names=["x", "y", "z"])
    # φ_j = w_j (D_j − μ_j) with D = (1, 4, 1), μ = (0.5, 1, 2)
    np.testing.assert_allclose(e.values, [1.0, 0.0, 1.0])
    assert float(e.base_values) == pytest.approx(2 * 0.5 - 2.0)
    assert float(e.prediction) == pytest.approx(2.0 - 1.0)
    np.testing.assert_allclose(e.data, [1.0, 4.0, 1.0])
    assert e.method == "linear-shapley"


def test_efficiency_batch_and_model_fields():
    rng = np.random.default_rng(0)
    m = LinearBT(feature_names=NAMES)
    XL, XR, y = bt_data(rng, 300, np.array([1.0, -2.0, 0.5, 0.0, 3.0]), np.ones(5))
    m.learn_many(XL, XR, y)
    bg = rng.normal(size=(50, 5))
    e = explain_linear(m, XL[:20], XR[:20], background_mean_diff=bg, model_version=3,
                       instance_ids=[f"ev{i}" for i in range(20)])
    assert e.values.shape == (20, 5) and e.model_name == "linear-bt" and e.model_version == 3
    assert e.feature_names == NAMES
    np.testing.assert_allclose(e.prediction, m.margin(XL[:20], XR[:20]), atol=1e-12)
    assert e.additivity_error().max() < 1e-10
    np.testing.assert_allclose(e.base_values, m.weights @ bg.mean(axis=0))
    recs = e.to_records()
    assert [r["request_id"] for r in recs[:2]] == ["ev0", "ev1"]
    # single-instance input gives 1-D values and agrees with the batch row
    e1 = explain_linear(m, XL[3], XR[3], background_mean_diff=bg)
    np.testing.assert_allclose(e1.values, e.values[3])


def test_skew_symmetry():
    rng = np.random.default_rng(1)
    w = rng.normal(size=4)
    XL, XR = rng.normal(size=(10, 4)), rng.normal(size=(10, 4))
    mu = rng.normal(size=4)
    names = list("abcd")
    e = explain_linear(w, XL, XR, background_mean_diff=mu, feature_names=names)
    swapped = explain_linear(w, XR, XL, background_mean_diff=-mu, feature_names=names)
    np.testing.assert_allclose(swapped.values, -e.values, atol=1e-12)
    np.testing.assert_allclose(swapped.base_values, -e.base_values, atol=1e-12)
    # default (μ = 0, items i.i.d.): swapping the pair alone negates the explanation
    np.testing.assert_allclose(explain_linear(w, XR, XL, feature_names=names).values,
                               -explain_linear(w, XL, XR, feature_names=names).values, atol=1e-12)


def test_null_player():
    rng = np.random.default_rng(2)
    w = np.array([1.5, 0.0, -0.7, 0.0])
    e = explain_linear(w, rng.normal(size=(8, 4)) * 10, rng.normal(size=(8, 4)), background_mean_diff=rng.normal(size=4),
                       feature_names=list("abcd"))
    np.testing.assert_allclose(e.values[:, [1, 3]], 0.0, rtol=0, atol=1e-12)
    assert np.all(e.values[:, [0, 2]] != 0.0)


def _brute_force_shapley(margin, xl, xr, BL, BR):
    """Shapley values (Eq. (3) of Hu et al. 2022) of v(S) = mean_b g((xl_S, bl_S̄), (xr_S, br_S̄))."""
    d = len(xl)

    def v(S):
        ZL, ZR = BL.copy(), BR.copy()
        idx = list(S)
        ZL[:, idx] = xl[idx]
        ZR[:, idx] = xr[idx]
        return float(np.mean(margin(ZL, ZR)))

    phi = np.zeros(d)
    for j in range(d):
        others = [k for k in range(d) if k != j]
        for r in range(d):
            for S in itertools.combinations(others, r):
                wgt = math.factorial(len(S)) * math.factorial(d - len(S) - 1) / math.factorial(d)
                phi[j] += wgt * (v(S + (j,)) - v(S))
    return phi, v(()), v(tuple(range(d)))


@pytest.mark.parametrize("d", [1, 2, 3, 5])
def test_agrees_with_brute_force_enumeration(d):
    rng = np.random.default_rng(10 + d)
    names = NAMES[:d]
    m = LinearBT(feature_names=names)
    XL, XR, y = bt_data(rng, 200, rng.normal(size=d), rng.uniform(0.5, 3, size=d))
    m.learn_many(XL, XR, y)
    # a background whose left and right items differ in distribution, so μ ≠ 0
    BL = rng.normal(loc=1.0, size=(40, d))
    BR = rng.normal(loc=-0.5, size=(40, d))
    for i in range(3):
        xl, xr = rng.normal(size=d), rng.normal(size=d)
        phi, v0, vall = _brute_force_shapley(m.margin, xl, xr, BL, BR)
        e = explain_linear(m, xl, xr, background_mean_diff=BL - BR)
        np.testing.assert_allclose(e.values, phi, atol=1e-10)
        assert float(e.base_values) == pytest.approx(v0, abs=1e-10)
        assert float(e.prediction) == pytest.approx(vall, abs=1e-10)


def test_one_weight_vector_per_pair_is_one_call_per_pair_and_every_record_carries_mu():
    """Row i of a (n, d) weight matrix explains pair i as a call with that vector would (atol 1e-12); a batch of
    n = d pairs still writes the whole μ into every record (not μ_i: a list of n entries reads as one per record)."""
    rng = np.random.default_rng(5)
    W, XL, XR, mu = rng.normal(size=(3, 3)), rng.normal(size=(3, 3)), rng.normal(size=(3, 3)), rng.normal(size=3)
    e = explain_linear(W, XL, XR, background_mean_diff=mu, feature_names=list("abc"))
    for i in range(3):
        one = explain_linear(W[i], XL[i], XR[i], background_mean_diff=mu, feature_names=list("abc"))
        np.testing.assert_allclose(e.values[i], one.values, rtol=0, atol=1e-12)
        assert e.base_values[i] == pytest.approx(float(one.base_values), abs=1e-12)
        assert e.prediction[i] == pytest.approx(float(one.prediction), abs=1e-12)
    assert e.additivity_error().max() < 1e-12
    for rec in e.to_records():
        np.testing.assert_allclose(rec["extra"]["background_mean_diff"], mu, rtol=0, atol=0)


@pytest.mark.parametrize("kwargs", [
    dict(model=[1.0, 2.0], XL=[1.0, 2.0], XR=[1.0, 2.0]),  # bare weights without names
    dict(model=[1.0, 2.0], XL=[1.0, 2.0, 3.0], XR=[1.0, 2.0, 3.0], feature_names=["a", "b"]),
    dict(model=[1.0, 2.0], XL=[[1.0, 2.0]], XR=[1.0, 2.0], feature_names=["a", "b"]),
    dict(model=[1.0, 2.0], XL=[np.nan, 2.0], XR=[1.0, 2.0], feature_names=["a", "b"]),
    dict(model=[1.0, 2.0], XL=[np.inf, 2.0], XR=[1.0, 2.0], feature_names=["a", "b"]),
    dict(model=[1.0, np.nan], XL=[1.0, 2.0], XR=[1.0, 2.0], feature_names=["a", "b"]),
    dict(model=[1.0, 2.0], XL=[1.0, 2.0], XR=[1.0, 2.0], feature_names=["a"]),
    dict(model=[1.0, 2.0], XL=[1.0, 2.0], XR=[1.0, 2.0], feature_names=["a", "b"], background_mean_diff=[1.0]),
    dict(model=[1.0, 2.0], XL=[1.0, 2.0], XR=[1.0, 2.0], feature_names=["a", "b"], background_mean_diff=[np.nan, 1.0]),
    dict(model=[[1.0, 2.0]], XL=[1.0, 2.0], XR=[1.0, 2.0], feature_names=["a", "b"]),
    dict(model=[[1.0, 2.0]] * 3, XL=[[1.0, 2.0]] * 2, XR=[[1.0, 2.0]] * 2, feature_names=["a", "b"]),  # rows ≠ pairs
])
def test_explainer_bad_input(kwargs):
    kwargs = dict(kwargs)
    with pytest.raises(InvalidInputError):
        explain_linear(kwargs.pop("model"), kwargs.pop("XL"), kwargs.pop("XR"), **kwargs)


# ----------------------------------------------------------------------- learner
def test_recovers_known_bt_direction():
    rng = np.random.default_rng(3)
    w_true = np.array([1.0, -2.0, 0.5, 0.0, 1.5])
    scales = np.array([1.0, 10.0, 0.1, 1.0, 100.0])  # heterogeneous units: the scaler matters
    XL, XR, y = bt_data(rng, 6000, w_true / scales, scales)
    m = LinearBT(feature_names=NAMES)
    m.learn_many(XL, XR, y)
    assert cosine(m.weights * scales, w_true) > 0.95
    assert m.n_learned == 6000
    # held-out accuracy close to the Bayes rate of the true model
    XLt, XRt, yt = bt_data(rng, 4000, w_true / scales, scales)
    acc = np.mean(np.sign(m.margin(XLt, XRt)) == yt)
    bayes = np.mean(np.sign((XLt - XRt) @ (w_true / scales)) == yt)
    assert acc > bayes - 0.02


def test_margin_is_skew_symmetric_and_proba_consistent():
    rng = np.random.default_rng(4)
    m = LinearBT()
    XL, XR, y = bt_data(rng, 200, np.array([1.0, -1.0, 2.0]), np.ones(3))
    for i in range(200):
        m.learn_one(dict(zip("xyz", XL[i])), dict(zip("xyz", XR[i])), int(y[i]))
    assert m.feature_names == ["x", "y", "z"]  # learned (sorted) from the first example
    a, b = {"x": 0.3, "y": -1.0, "z": 2.0}, {"x": 1.0, "y": 0.5, "z": -0.5}
    assert m.margin_one(a, b) == pytest.approx(-m.margin_one(b, a), abs=1e-12)
    assert m.margin_one(a, a) == pytest.approx(0.0, abs=1e-12)
    p = m.predict_proba_one(a, b)
    assert p[1] + p[-1] == pytest.approx(1.0) and p[1] == pytest.approx(m.predict_proba_one(b, a)[-1])
    assert m.margin_one(a, b) == pytest.approx(float(m.margin(np.array([[0.3, -1.0, 2.0]]), np.array([[1.0, 0.5, -0.5]]))[0]))


def test_indifference_split_and_skip():
    a, b = {"x": 2.0}, {"x": 0.0}
    split = LinearBT(feature_names=["x"])
    for _ in range(50):
        split.learn_one(a, b, 1)
    before = split.margin_one(a, b)
    for _ in range(50):
        split.learn_one(a, b, 0)
    assert 0 < split.margin_one(a, b) < before  # ties pull the margin towards 0
    assert split.n_learned == 100
    skip = LinearBT(feature_names=["x"], indifference="skip")
    for _ in range(50):
        skip.learn_one(a, b, 0)
    assert skip.n_learned == 0 and skip.margin_one(a, b) == 0.0


def test_weights_and_context_ignored():
    m = LinearBT(feature_names=["x", "y"])
    m.learn_one({"x": 1.0, "y": 0.0}, {"x": 0.0, "y": 0.0}, 1, context={"age": 3.0}, weight=2.0)
    m2 = LinearBT(feature_names=["x", "y"])
    m2.learn_one({"x": 1.0, "y": 0.0, "extra": 5.0}, {"x": 0.0, "y": 0.0}, 1, weight=2.0)
    np.testing.assert_array_equal(m.weights, m2.weights)
    assert m.weights[0] > 0 and m.weights[1] == pytest.approx(0.0, abs=1e-12)


def test_state_round_trip_and_continued_learning():
    from stream.contract import decode_snapshot, encode_snapshot

    rng = np.random.default_rng(5)
    XL, XR, y = bt_data(rng, 400, np.array([1.0, -1.0, 0.5]), np.array([1.0, 5.0, 0.2]))
    m = LinearBT(feature_names=["a", "b", "c"], learning_rate=0.05, l2=1e-4)
    m.learn_many(XL[:200], XR[:200], y[:200])
    m2 = LinearBT.from_state(decode_snapshot(encode_snapshot("linear-bt", 1, m.n_learned, m.state_dict()))["state"])
    assert repr(m2) == repr(m) and m2.n_learned == 200
    np.testing.assert_array_equal(m2.weights, m.weights)
    m.learn_many(XL[200:], XR[200:], y[200:])
    m2.learn_many(XL[200:], XR[200:], y[200:])
    np.testing.assert_allclose(m2.weights, m.weights, rtol=0, atol=1e-15)
    # an unfitted model without names round-trips too
    fresh = LinearBT.from_state(LinearBT().state_dict())
    assert fresh.feature_names == [] and fresh.margin_one({"a": 1.0}, {"a": 0.0}) == 0.0


def test_from_state_rejects_foreign_states():
    good = LinearBT(feature_names=["a"]).state_dict()
    with pytest.raises(SnapshotError):
        LinearBT.from_state({"meta": {**good["meta"], "model_name": "gpm"}, "arrays": good["arrays"]})
    with pytest.raises(SnapshotError):
        LinearBT.from_state({"meta": good["meta"], "arrays": {"w": np.zeros(3), "G": np.zeros(1), "sq": np.zeros(1)}})
    with pytest.raises(SnapshotError):
        LinearBT.from_state({"meta": {}, "arrays": {}})


def test_merge_by_training_counts():
    rng = np.random.default_rng(6)
    w_true = np.array([2.0, -1.0, 0.5])
    XL, XR, y = bt_data(rng, 4000, w_true, np.ones(3))
    a, b = LinearBT(feature_names=list("abc")), LinearBT(feature_names=list("abc"))
    a.learn_many(XL[:3000], XR[:3000], y[:3000])
    b.learn_many(XL[3000:], XR[3000:], y[3000:])
    wa, wb = a.weights.copy(), b.weights.copy()
    a += b
    assert a.n_learned == 4000
    np.testing.assert_allclose(a.weights, (3000 * wa + 1000 * wb) / 4000, rtol=1e-12)
    assert cosine(a.weights, w_true) > 0.95
    # merging into an empty model copies; merging an empty one is a no-op
    c = LinearBT()
    c += b
    np.testing.assert_array_equal(c.weights, wb)
    before = a.weights.copy()
    a += LinearBT(feature_names=list("abc"))
    np.testing.assert_array_equal(a.weights, before)
    other = LinearBT(feature_names=list("xyz"))
    other.learn_one({"x": 1.0, "y": 0.0, "z": 0.0}, {"x": 0.0, "y": 0.0, "z": 0.0}, 1)
    with pytest.raises(InvalidInputError, match="different feature names"):
        a += other
    with pytest.raises(InvalidInputError):
        a += 3


@pytest.mark.parametrize("kwargs", [
    dict(learning_rate=0), dict(learning_rate=-1.0), dict(learning_rate=float("nan")), dict(l2=-0.1),
    dict(scale="yes"), dict(indifference="half"), dict(feature_names="abc"), dict(feature_names=["a", "a"]),
    dict(feature_names=[1, 2]),
])
def test_bad_parameters(kwargs):
    with pytest.raises(InvalidParameterError):
        LinearBT(**kwargs)


def test_bad_inputs():
    m = LinearBT(feature_names=["x", "y"])
    with pytest.raises(NotFittedError):
        _ = LinearBT().weights
    with pytest.raises(NotFittedError):
        LinearBT().margin(np.zeros((1, 2)), np.zeros((1, 2)))
    for y in (2, "1", True, 0.5):
        with pytest.raises(InvalidInputError):
            m.learn_one({"x": 1.0, "y": 1.0}, {"x": 0.0, "y": 0.0}, y)
    for w in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(InvalidInputError):
            m.learn_one({"x": 1.0, "y": 1.0}, {"x": 0.0, "y": 0.0}, 1, weight=w)
    with pytest.raises(InvalidInputError):
        m.learn_one({"x": float("nan"), "y": 1.0}, {"x": 0.0, "y": 0.0}, 1)
    with pytest.raises(InvalidInputError):
        m.learn_one({"x": 1.0}, {"x": 0.0, "y": 0.0}, 1)
    with pytest.raises(InvalidInputError):
        m.margin(np.zeros((2, 3)), np.zeros((2, 3)))
    with pytest.raises(InvalidInputError):
        m.margin(np.zeros((2, 2)), np.full((2, 2), np.inf))
    with pytest.raises(InvalidInputError):
        LinearBT().learn_one({}, {}, 1)
    fresh = LinearBT()
    with pytest.raises(InvalidInputError):
        fresh.learn_one({"x": 1.0, "y": 2.0}, {"x": 0.0}, 1)
    assert fresh.feature_names == []  # a failed first example does not fix the feature names
    assert m.n_learned == 0 and np.all(m.weights == 0)  # failed calls leave no trace


def test_clone_and_inputs_not_mutated():
    m = LinearBT(feature_names=["x"], learning_rate=0.3, l2=0.01, scale=False, indifference="skip")
    left, right = {"x": 1.0}, {"x": 0.0}
    m.learn_one(left, right, 1)
    assert left == {"x": 1.0} and right == {"x": 0.0}
    c = m.clone()
    assert repr(c) == repr(m) and c.n_learned == 0
    assert LinearBT(feature_names=[]).feature_names == []  # what an unfitted model reports, accepted back


def test_scaler_helps_with_heterogeneous_units():
    """The RMS scaler (default) recovers the direction better when features differ by 10⁴ in scale."""
    w_true = np.array([1.0, -2.0, 0.5, 0.0, 1.5])
    scales = np.array([1.0, 10.0, 0.1, 1.0, 100.0])
    cos = {True: [], False: []}
    for seed in range(3):
        rng = np.random.default_rng(100 + seed)
        XL, XR, y = bt_data(rng, 3000, w_true / scales, scales)
        for scale in (True, False):
            m = LinearBT(feature_names=NAMES, scale=scale)
            m.learn_many(XL, XR, y)
            cos[scale].append(cosine(m.weights * scales, w_true))
    assert min(cos[True]) > 0.99
    assert np.mean(cos[True]) > np.mean(cos[False])
