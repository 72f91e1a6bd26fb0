"""The capacity learner's stream default (learners.capacity_stream.CapacityLogistic): exactness of the
batch path, calibration against linear Bradley–Terry and the oracle, merging, state, the factory."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from learners.capacity import CapacityRDA
from learners.capacity_scalers import MinMaxScaler, StandardScaler
from learners.capacity_stream import CapacityLogistic
from learners.exceptions import InvalidParameterError
from learners.linear import LinearBT
from learners.metrics import cross_entropy, roc_auc

NAMES = ["a", "b", "c"]


def _dicts(X, names=NAMES):
    return [dict(zip(names, row.tolist())) for row in X]


def _bt_stream(T, seed, w=(1.5, -1.0, 0.5), scale=(1.0, 10.0, 0.1)):
    """Additive Bradley–Terry truth on raw criteria of different scales: P(left) = σ(Σ w_j (x_l − x_r)_j / scale_j)."""
    rng = np.random.default_rng(seed)
    XL = rng.normal(size=(T, 3)) * scale + 5.0
    XR = rng.normal(size=(T, 3)) * scale + 5.0
    g = ((XL - XR) / scale) @ np.array(w)
    p = 1.0 / (1.0 + np.exp(-g))
    y = np.where(rng.random(T) < p, 1, -1)
    return XL, XR, y, p


def test_learn_many_with_minibatch_one_equals_the_learn_one_loop_exactly():
    rng = np.random.default_rng(3)
    XL, XR = rng.normal(size=(120, 3)) * [1, 5, 0.2], rng.normal(size=(120, 3)) * [1, 5, 0.2]
    y = rng.choice([-1, 0, 1], size=120)
    w = rng.uniform(0.5, 2.0, size=120)
    a = CapacityLogistic(NAMES, decreasing=["b"], minibatch=1)
    b = CapacityLogistic(NAMES, decreasing=["b"], minibatch=1)
    for xl, xr, yi, wi in zip(_dicts(XL), _dicts(XR), y, w):
        a.learn_one(xl, xr, int(yi), weight=float(wi))
    b.learn_many(XL[:70], XR[:70], y[:70], weight=w[:70])
    b.learn_many(XL[70:], XR[70:], y[70:], weight=w[70:])
    assert np.array_equal(a.mobius, b.mobius)
    assert a.n_seen == b.n_seen and a.metrics()["avg_online_loss"] == pytest.approx(b.metrics()["avg_online_loss"])


def test_margin_many_and_predict_proba_many_equal_the_one_at_a_time_methods():
    XL, XR, y, _ = _bt_stream(300, 1)
    m = CapacityLogistic(NAMES)
    m.learn_many(XL[:200], XR[:200], y[:200])
    g = m.margin_many(XL[200:], XR[200:])
    p = m.predict_proba_many(XL[200:], XR[200:])
    for i, (xl, xr) in enumerate(zip(_dicts(XL[200:]), _dicts(XR[200:]))):
        assert g[i] == pytest.approx(m.margin_one(xl, xr), abs=1e-12)
        assert p[i] == pytest.approx(m.predict_proba_one(xl, xr)[1], abs=1e-12)
    assert np.allclose(m.margin_many(XR[200:], XL[200:]), -g)          # skew-symmetric margin


def test_calibrated_on_an_additive_bradley_terry_stream():
    """Truth additive: progressive log loss within 0.01 of linear-bt, held-out probabilities close to the truth."""
    XL, XR, y, p_true = _bt_stream(6000, 7)
    cap, lin = CapacityLogistic(NAMES), LinearBT(NAMES)
    pc, pl = np.empty(5000), np.empty(5000)
    for i, (xl, xr) in enumerate(zip(_dicts(XL[:5000]), _dicts(XR[:5000]))):
        pc[i], pl[i] = cap.predict_proba_one(xl, xr)[1], lin.predict_proba_one(xl, xr)[1]
        cap.learn_one(xl, xr, int(y[i]))
        lin.learn_one(xl, xr, int(y[i]))
    assert cross_entropy(y[:5000], pc) <= cross_entropy(y[:5000], pl) + 0.01
    p_hold = cap.predict_proba_many(XL[5000:], XR[5000:])
    assert np.mean(np.abs(p_hold - p_true[5000:])) < 0.05
    # the held-out log loss is within 0.02 of the oracle's (the true probabilities)
    assert cross_entropy(y[5000:], p_hold) <= cross_entropy(y[5000:], p_true[5000:]) + 0.02
    # reliability: in each probability decile the observed frequency matches the mean prediction
    bins = np.quantile(p_hold, np.linspace(0, 1, 6))
    k = np.clip(np.searchsorted(bins, p_hold, side="right") - 1, 0, 4)
    for j in range(5):
        sel = k == j
        assert abs(np.mean(y[5000:][sel] > 0) - np.mean(p_hold[sel])) < 0.08


def test_paper_mode_probabilities_are_not_calibrated_the_stream_default_is():
    """The reason for the stream default: the hinge-loss RDA's σ(margin) sits at ½ (log loss ≈ log 2)."""
    XL, XR, y, _ = _bt_stream(3000, 2)
    rda = CapacityRDA(NAMES, scaler="minmax")
    cap = CapacityLogistic(NAMES)
    rda.learn_many(XL[:2000], XR[:2000], y[:2000])
    cap.learn_many(XL[:2000], XR[:2000], y[:2000])
    ll_rda = cross_entropy(y[2000:], rda.predict_proba_many(XL[2000:], XR[2000:]))
    ll_cap = cross_entropy(y[2000:], cap.predict_proba_many(XL[2000:], XR[2000:]))
    assert ll_rda == pytest.approx(math.log(2), abs=0.01) and ll_cap < ll_rda - 0.1


def test_interaction_penalty_shrinks_interactions_on_an_additive_truth_and_keeps_a_real_one():
    """λ_t(S) = c(|S| − 1)/√t shrinks the interaction masses of an additive truth (against c = 0), and a
    2-additive truth's pair still comes out as the largest interaction."""
    for T in (100, 300, 3000):
        XL, XR, y, _ = _bt_stream(T, 9)
        pen, free = CapacityLogistic(NAMES), CapacityLogistic(NAMES, interaction_l1=0.0)
        pen.learn_many(XL, XR, y)
        free.learn_many(XL, XR, y)
        inter = pen.index.sizes > 1
        assert np.abs(pen.mobius[inter]).sum() < 0.8 * np.abs(free.mobius[inter]).sum()
    rng = np.random.default_rng(0)
    XL, XR = rng.random((4000, 3)), rng.random((4000, 3))
    f = lambda X: X[:, 0] + 3.0 * np.minimum(X[:, 1], X[:, 2])          # noqa: E731 — a 2-additive truth
    y = np.where(f(XL) > f(XR), 1, -1)
    m = CapacityLogistic(NAMES, scaler="none")
    m.learn_many(XL, XR, y)
    inter = {k: v for k, v in m.mobius_dict().items() if len(k) == 2}
    assert max(inter, key=lambda k: abs(inter[k])) == ("b", "c") and inter[("b", "c")] > 0


def test_merge_pools_sums_exactly_and_averages_the_masses():
    XL, XR, y, _ = _bt_stream(900, 4)
    parts = [CapacityLogistic(NAMES) for _ in range(3)]
    for p, P in enumerate(parts):
        P.learn_many(XL[p::3], XR[p::3], y[p::3])
    ts = np.array([P.n_seen for P in parts])
    avg = sum(t * P.mobius for t, P in zip(ts, parts)) / ts.sum()
    merged = parts[0] + parts[1]
    merged += parts[2]
    assert np.allclose(merged.mobius, avg, atol=1e-12)
    assert merged.n_seen == ts.sum()
    # the scaler statistics are those of the pooled data (exact)
    pooled = StandardScaler(3)
    pooled.learn(np.concatenate([XL, XR]))
    assert merged._scaler.count == pooled.count
    assert np.allclose(merged._scaler.s1, pooled.s1) and np.allclose(merged._scaler.s2, pooled.s2)
    # AdaGrad and RMS sums are the sums of the parts
    assert np.allclose(merged._Q, sum(P._Q for P in parts)) and np.allclose(merged._S2, sum(P._S2 for P in parts))
    # merging an empty learner changes nothing; different parameters refuse
    before = merged.mobius
    merged += CapacityLogistic(NAMES)
    assert np.array_equal(merged.mobius, before)
    with pytest.raises(InvalidParameterError):
        merged += CapacityLogistic(NAMES, eta=0.2)


def test_merged_partitions_predict_as_well_as_one_learner_on_all_data():
    from stream.registry import merge_learners

    XL, XR, y, p_true = _bt_stream(14000, 5)
    one = CapacityLogistic(NAMES)
    one.learn_many(XL[:12000], XR[:12000], y[:12000])
    parts = []
    for p in range(6):
        m = CapacityLogistic(NAMES)
        m.learn_many(XL[p:12000:6], XR[p:12000:6], y[p:12000:6])
        parts.append((m, 2000))
    merged = merge_learners("capacity", parts)
    assert isinstance(merged, CapacityLogistic) and parts[0][0].n_seen == 2000   # parts are not mutated
    te = slice(12000, 14000)
    auc_one = roc_auc(y[te], one.margin_many(XL[te], XR[te]))
    auc_merged = roc_auc(y[te], merged.margin_many(XL[te], XR[te]))
    assert auc_merged >= auc_one - 0.005
    assert cross_entropy(y[te], merged.predict_proba_many(XL[te], XR[te])) <= cross_entropy(
        y[te], one.predict_proba_many(XL[te], XR[te])) + 0.01


def test_state_round_trip_predicts_and_continues_identically():
    XL, XR, y, _ = _bt_stream(400, 6)
    a = CapacityLogistic(NAMES, decreasing=["c"], k_additive=None)
    a.learn_many(XL[:300], XR[:300], y[:300])
    b = CapacityLogistic.from_state(a.state_dict())
    assert np.array_equal(a.margin_many(XL[300:], XR[300:]), b.margin_many(XL[300:], XR[300:]))
    a.learn_many(XL[300:], XR[300:], y[300:])
    b.learn_many(XL[300:], XR[300:], y[300:])
    assert np.array_equal(a.mobius, b.mobius)
    assert repr(a.clone()) == repr(CapacityLogistic(NAMES, decreasing=["c"], k_additive=None))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.floats(-1e3, 1e3), st.floats(-1e3, 1e3), st.floats(-5, 5), st.floats(-5, 5)),
                min_size=1, max_size=12), st.sampled_from([StandardScaler, MinMaxScaler]))
def test_scalers_learn_transform_pairs_equals_the_row_by_row_loop(rows, cls):
    A = np.array(rows)
    L, R = A[:, :2], A[:, 2:]
    batch, loop = cls(2), cls(2)
    UL, UR = batch.learn_transform_pairs(L, R)
    for i in range(len(L)):
        loop.learn(np.stack([L[i], R[i]]))
        U = loop.transform(np.stack([L[i], R[i]]))
        assert np.allclose(UL[i], U[0], atol=1e-9) and np.allclose(UR[i], U[1], atol=1e-9)


def test_registry_factory_builds_the_stream_default_and_keeps_the_paper_learners():
    from types import SimpleNamespace

    from stream.plugins.capacity import capacity_factory as _capacity_factory

    s = SimpleNamespace(feature_names=NAMES)
    assert type(_capacity_factory(s, {})) is CapacityLogistic
    assert type(_capacity_factory(s, {"constraints": ["monotone"]})) is CapacityRDA        # a paper-only parameter
    rda = _capacity_factory(s, {"algorithm": "rda"})
    assert type(rda) is CapacityRDA and rda.scaler == "minmax"
    with pytest.raises(InvalidParameterError, match="algorithm"):
        _capacity_factory(s, {"algorithm": "sgd"})
    with pytest.raises(InvalidParameterError, match="unknown parameter"):
        _capacity_factory(s, {"gamma_typo": 1.0})


def test_bad_parameters_are_refused_with_the_expected_domain():
    for kw, frag in (({"eta": 0.0}, "eta"), ({"interaction_l1": -1.0}, "interaction_l1"), ({"minibatch": 0}, "minibatch"),
                     ({"scaler": "robust"}, "scaler"), ({"k_additive": 0}, "k_additive")):
        with pytest.raises(InvalidParameterError, match=frag):
            CapacityLogistic(NAMES, **kw)


def test_dual_averaging_variant_merges_by_pooled_sums_and_the_closed_form():
    """optimizer="adagrad-rda": G, Σg², counts pool exactly and w = −η soft(G, 2c(|S|−1)√t)/√(Σg²)."""
    XL, XR, y, _ = _bt_stream(600, 8)
    a, b = CapacityLogistic(NAMES, optimizer="adagrad-rda"), CapacityLogistic(NAMES, optimizer="adagrad-rda")
    a.learn_many(XL[:300], XR[:300], y[:300])
    b.learn_many(XL[300:], XR[300:], y[300:])
    m = a + b
    G, Q, t = a._G + b._G, a._Q + b._Q, a.n_seen + b.n_seen
    thr = 2.0 * math.sqrt(t) * m._pen
    w = -(G - np.clip(G, -thr, thr)) * 0.1 / (np.sqrt(Q) + 1e-8)
    s = np.sqrt((a._S2 + b._S2) / t)
    assert np.allclose(m.mobius, w / np.where(s > 1e-12, s, 1.0), rtol=1e-12, atol=1e-15)


def test_reproduction_mode_is_the_papers_algorithm_with_its_published_defaults():
    """``algorithm="rda"`` builds CapacityRDA with λ = 0.01, γ = 10³, δ = 0.01, ρ = 1 (Herin et al. 2024) and the
    factory's learner replays a directly built one bit for bit."""
    from types import SimpleNamespace

    from stream.plugins.capacity import capacity_factory as _capacity_factory

    f = _capacity_factory(SimpleNamespace(feature_names=NAMES), {"algorithm": "rda", "scaler": "none"})
    assert (f.l1, f.gamma, f.delta, f.rho, f.constraints) == (0.01, 1e3, 0.01, 1.0, [])
    rng = np.random.default_rng(1)
    XL, XR = rng.random((200, 3)), rng.random((200, 3))
    y = np.where(np.minimum(XL[:, 0], XL[:, 1]) + XL[:, 2] > np.minimum(XR[:, 0], XR[:, 1]) + XR[:, 2], 1, -1)
    d = CapacityRDA(NAMES)
    f.learn_many(XL, XR, y)
    d.learn_many(XL, XR, y)
    assert np.array_equal(f.mobius, d.mobius) and np.array_equal(f.gradient_sum, d.gradient_sum)
