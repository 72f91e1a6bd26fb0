"""The refit-capable online GPM wrapper (issue 4 item 5)."""

import time

import numpy as np
import pytest

from learners.base import PreferenceLearner
from learners.exceptions import InvalidInputError, InvalidParameterError, SnapshotError
from learners.refit import RefittingCGPM, RefittingGPM
from learners.state import dump_state, load_state

FAST = {"penalty_grid": (1e-3, 1e-5), "multiplier_grid": (1.0,), "max_centres": 200}


def _stream(n, seed=0, flip_after=None):
    rng = np.random.default_rng(seed)
    for t in range(n):
        a, b = rng.normal(size=2), rng.normal(size=2)
        y = 1 if a[0] > b[0] else -1
        if flip_after is not None and t >= flip_after:
            y = -y
        yield {"f0": a[0], "f1": a[1]}, {"f0": b[0], "f1": b[1]}, y


def test_is_a_preference_learner_with_names():
    m = RefittingGPM(["f0", "f1"])
    assert isinstance(m, PreferenceLearner) and m.model_name == "gpm" and m.feature_names == ["f0", "f1"]
    c = RefittingCGPM(["f0"], ["surface"])
    assert c.model_name == "cgpm"
    assert RefittingGPM(["f0"], context_names=["s"]).model_name == "cgpm"


def test_sliding_window_is_bounded_and_keeps_latest():
    m = RefittingGPM(["f0", "f1"], window_size=30, min_train=10, model_params=FAST)
    for xl, xr, y in _stream(100):
        m.learn_one(xl, xr, y)
    assert m.n_window == 30 and m.n_seen == 100
    last = list(_stream(100))[-1]
    st = m.state_dict()
    np.testing.assert_allclose(st["arrays"]["window_left"][-1], [last[0]["f0"], last[0]["f1"]], rtol=1e-6)


def test_reservoir_window_is_bounded_and_uniform():
    m = RefittingGPM(["f0"], window_size=50, window="reservoir", min_train=10, seed=1)
    for t in range(2000):
        m.learn_one({"f0": float(t)}, {"f0": -1.0}, 1)
    kept = m.state_dict()["arrays"]["window_left"][:, 0]
    assert m.n_window == 50
    assert 600 < kept.mean() < 1400  # uniform over 0..1999 has mean ~1000, a sliding window ~1975


def test_indifferences_are_counted_not_stored():
    m = RefittingGPM(["f0"], min_train=2)
    m.learn_one({"f0": 1.0}, {"f0": 0.0}, 0)
    assert m.n_seen == 1 and m.n_window == 0


def test_margin_zero_before_fit_then_refit_learns_and_is_skew_symmetric():
    m = RefittingGPM(["f0", "f1"], refit_every=200, min_train=200, model_params=FAST, device="cpu")
    for xl, xr, y in _stream(199):
        m.learn_one(xl, xr, y)
        assert m.margin_one(xl, xr) == 0.0
    assert not m.wants_refit()
    m.learn_one({"f0": 0.5, "f1": 0.0}, {"f0": 0.0, "f1": 0.0}, 1)
    assert m.wants_refit()
    info = m.refit()
    assert set(info) >= {"duration_s", "n_train", "val_auc", "device"}
    assert info["device"] == "cpu" and info["val_auc"] > 0.9 and info["n_train"] == 180 and info["trigger"] == "first"
    assert m.model_version == 1 and m.model.model_version == 1
    a, b = {"f0": 1.0, "f1": 0.0}, {"f0": -1.0, "f1": 0.3}
    assert m.margin_one(a, b) > 0 and m.margin_one(a, b) == pytest.approx(-m.margin_one(b, a))
    assert m.predict_proba_one(a, b)[1] > 0.5
    assert not m.wants_refit()


def test_wants_refit_by_count_time_and_drift():
    m = RefittingGPM(["f0", "f1"], refit_every=300, min_train=100, model_params=FAST, device="cpu")
    events = list(_stream(3000, flip_after=1000))
    for xl, xr, y in events[:100]:
        m.learn_one(xl, xr, y)
    m.refit()
    for i, (xl, xr, y) in enumerate(events[100:399]):
        m.learn_one(xl, xr, y)
    assert not m.wants_refit()
    m.learn_one(*events[399])
    assert m.wants_refit() and m.refit()["trigger"] == "count"
    # time trigger
    t = RefittingGPM(["f0", "f1"], refit_every=None, refit_interval_s=0.5, min_train=100, model_params=FAST, device="cpu")
    for xl, xr, y in events[:100]:
        t.learn_one(xl, xr, y)
    t.refit()
    assert not t.wants_refit()
    time.sleep(0.6)
    assert t.wants_refit() and t.refit()["trigger"] == "time"
    # drift trigger: the concept flips at event 1000; ADWIN on the progressive log loss fires
    d = RefittingGPM(["f0", "f1"], refit_every=None, min_train=300, model_params=FAST, device="cpu", window_size=300)
    for xl, xr, y in events[:300]:
        d.learn_one(xl, xr, y)
    d.refit()
    fired = None
    for i, (xl, xr, y) in enumerate(events[300:], start=300):
        d.learn_one(xl, xr, y)
        if d.wants_refit():
            fired = i
            break
    assert fired is not None and 1000 < fired < 1400
    assert d.refit()["trigger"] == "drift"


def test_state_round_trip_and_size():
    m = RefittingGPM(["f0", "f1"], refit_every=150, min_train=150, model_params=FAST, device="cpu")
    ev = list(_stream(300))
    for xl, xr, y in ev[:150]:
        m.learn_one(xl, xr, y)
    m.refit()
    blob = dump_state(m.state_dict())
    assert len(blob) < 8 * 2**20
    m2 = RefittingGPM.from_state(load_state(blob))
    assert m2.feature_names == m.feature_names and m2.model_version == 1 and m2.n_window == 150 and m2.n_seen == 150
    for xl, xr, _ in ev[150:170]:
        assert m2.margin_one(xl, xr) == pytest.approx(m.margin_one(xl, xr), rel=1e-4, abs=1e-5)
    for xl, xr, y in ev[150:]:
        m2.learn_one(xl, xr, y)
    assert m2.wants_refit() and m2.refit()["n_train"] > 0
    with pytest.raises(SnapshotError):
        RefittingGPM.from_state({"meta": {"model_name": "capacity"}, "arrays": {}})
    u = RefittingGPM(["f0"])
    assert RefittingGPM.from_state(load_state(dump_state(u.state_dict()))).margin_one({"f0": 1.0}, {"f0": 0.0}) == 0.0


def test_cgpm_variant_uses_context():
    m = RefittingCGPM(["f0", "f1"], ["flip"], refit_every=400, min_train=400, model_params=FAST, device="cpu")
    rng = np.random.default_rng(3)
    for xl, xr, y in _stream(400):
        f = float(rng.integers(0, 2))
        m.learn_one(xl, xr, y if f else -y, context={"flip": f})
    info = m.refit()
    assert info["val_auc"] > 0.85
    a, b = {"f0": 1.5, "f1": 0.0}, {"f0": -1.5, "f1": 0.0}
    assert m.margin_one(a, b, {"flip": 1.0}) > 0 > m.margin_one(a, b, {"flip": 0.0})
    rt = RefittingGPM.from_state(load_state(dump_state(m.state_dict())))
    assert isinstance(rt, RefittingCGPM) and rt.margin_one(a, b, {"flip": 1.0}) == pytest.approx(m.margin_one(a, b, {"flip": 1.0}), rel=1e-4)
    with pytest.raises(InvalidInputError):
        m.learn_one(a, b, 1)


def test_bad_input_and_parameters():
    m = RefittingGPM(["f0"])
    with pytest.raises(InvalidInputError):
        m.learn_one({"g": 1.0}, {"f0": 0.0}, 1)
    with pytest.raises(InvalidInputError):
        m.learn_one({"f0": float("nan")}, {"f0": 0.0}, 1)
    with pytest.raises(InvalidInputError):
        m.learn_one({"f0": 1.0}, {"f0": 0.0}, 2)
    with pytest.raises(InvalidParameterError):
        RefittingGPM(["f0"], window_size=1)
    with pytest.raises(InvalidParameterError):
        RefittingGPM(["f0"], window="fifo")
    with pytest.raises(InvalidParameterError):
        RefittingCGPM(["f0"], [])


def test_no_probability_before_the_first_refit():
    """Progressive validation must not score a constant 0.5 before any model exists."""
    from learners.exceptions import NotFittedError
    from learners.refit import RefittingGPM

    m = RefittingGPM(["a"], refit_every=None, min_train=10, drift=False)
    with pytest.raises(NotFittedError, match="not been refitted"):
        m.predict_proba_one({"a": 1.0}, {"a": 0.0})
    assert m.margin_one({"a": 1.0}, {"a": 0.0}) == 0.0


def test_refits_between_searches_fit_at_the_selected_point_and_every_kth_or_drift_refit_searches():
    from learners.gpm import GPM
    from learners.refit import fit_window

    m = RefittingGPM(["f0", "f1"], refit_every=100, min_train=100, model_params=FAST, device="cpu", reselect_every=3)
    ev = list(_stream(700))
    searched, k = [], 100
    for xl, xr, y in ev[:k]:
        m.learn_one(xl, xr, y)
    for _ in range(5):
        assert m.wants_refit()
        job = m.refit_begin()
        fitted = fit_window(job)
        if not job["searched"]:  # the selected point of the last search, on the whole window
            sel = m.model
            assert (job["params"]["penalty"], job["params"]["lengthscale_multiplier"], job["params"]["item_constant"]) == \
                (sel.penalty_, sel.multiplier_, sel.item_constant_)
            ref = GPM(["f0", "f1"], **job["params"]).fit(job["XL"], job["XR"], job["y"])
            assert ref.selection_ == "none" and ref.n_train_ == len(job["y"])
            np.testing.assert_array_equal(fitted["arrays"]["alpha"], ref.state_dict()["arrays"]["alpha"])
        info = m.refit_finish(job, fitted)
        searched.append(info["searched"])
        assert (info["val_auc"] is None) == (not info["searched"])
        for xl, xr, y in ev[k:k + 100]:
            m.learn_one(xl, xr, y)
        k += 100
    assert searched == [True, False, False, True, False]
    # the count survives a snapshot; a drift-triggered refit searches whatever the count
    m2 = RefittingGPM.from_state(load_state(dump_state(m.state_dict())))
    assert m2.reselect_every == 3 and m2._fixed_refits == 1
    assert m2.refit()["searched"] is False and m2._fixed_refits == 2
    m2._drift_flag = True
    assert m2.refit_begin()["searched"] is True
    m2.refit_abort()
    with pytest.raises(InvalidParameterError):
        RefittingGPM(["f0"], reselect_every=0)
