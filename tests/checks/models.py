"""Contract checks of a registered model (one function per property; see the package docstring)."""

from __future__ import annotations

import copy
import inspect

import numpy as np

from tests.checks.world import FEATURES, World, fresh, people_kw, person_kw, train, uses_context


def _batch(learner, world: World, idx):
    XL, XR = world.XL[idx], world.XR[idx]
    U = world.U[idx] if uses_context(learner) else None
    return XL, XR, U


def _close(x, y, rtol: float) -> bool:
    """Equal JSON-like values, floats within ``rtol``."""
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_close(x[k], y[k], rtol) for k in x)
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return len(x) == len(y) and all(_close(u, v, rtol) for u, v in zip(x, y))
    if isinstance(x, float) or isinstance(y, float):
        return x == y or abs(x - y) <= rtol * max(abs(x), abs(y))
    return x == y


def _state_equal(a: dict, b: dict, rtol: float = 0.0) -> None:
    assert _close(a["meta"], b["meta"], rtol), (a["meta"], b["meta"])
    assert set(a["arrays"]) == set(b["arrays"])
    for k in a["arrays"]:
        x, y = np.asarray(a["arrays"][k]), np.asarray(b["arrays"][k])
        assert x.shape == y.shape, k
        if np.issubdtype(x.dtype, np.number):
            np.testing.assert_allclose(x, y, rtol=rtol, atol=0.0, equal_nan=True, err_msg=k)
        else:
            assert np.array_equal(x, y), k


def check_learning_does_not_mutate_inputs(name: str, world: World, trained) -> None:
    lr = fresh(name)
    rows = [world.row(i) for i in range(40)]
    before = copy.deepcopy(rows)
    for i, (left, right, ctx) in enumerate(rows):
        lr.learn_one(left, right, int(world.y[i]), ctx, **person_kw(lr, world, i))
        lr.predict_proba_one(left, right, ctx, **person_kw(lr, world, i)) if not hasattr(lr, "refit") else None
    assert rows == before
    idx = np.arange(40, 80)
    XL, XR, U = _batch(lr, world, idx)
    arrays = [a.copy() for a in (XL, XR, world.y[40:80]) + ((U,) if U is not None else ())]
    lr.learn_many(XL, XR, world.y[40:80], U, **people_kw(lr, world, idx))
    trained.margin_many(XL, XR, U, **people_kw(trained, world, idx))
    trained.predict_proba_many(XL, XR, U, **people_kw(trained, world, idx))
    for a, b in zip(arrays, (XL, XR, world.y[40:80]) + ((U,) if U is not None else ())):
        np.testing.assert_array_equal(a, b)


def check_state_round_trips_through_the_snapshot_codec(name: str, world: World, trained) -> None:
    from stream import registry
    from stream.contract import decode_snapshot, encode_snapshot

    data = encode_snapshot(name, 3, world.n, trained.state_dict(), offsets={"t:0": world.n})
    snap = decode_snapshot(data)
    assert (snap["model_name"], snap["version"], snap["training_count"]) == (name, 3, world.n)
    back = registry.get_model(name).loader(snap["state"])
    assert type(back) is type(trained)
    _state_equal(back.state_dict(), trained.state_dict())
    XL, XR, U = _batch(trained, world, np.arange(world.n))
    kw = people_kw(trained, world, np.arange(world.n))
    g_back = back.margin_many(XL, XR, U, **kw)
    # a restored learner predicts what the live one did, to the precision its state is stored in
    # (the GPMs snapshot float32 arrays by design: learners/refit.py, RefittingGPM.state_dict)
    eps = max([np.finfo(np.asarray(a).dtype).eps for a in trained.state_dict()["arrays"].values()
               if np.issubdtype(np.asarray(a).dtype, np.floating)] or [np.finfo(np.float64).eps])
    g = trained.margin_many(XL, XR, U, **kw)
    np.testing.assert_allclose(g_back, g, rtol=0, atol=1e3 * eps * max(1.0, float(np.abs(g).max())))
    # and a second round trip changes nothing at all
    again = registry.get_model(name).loader(decode_snapshot(encode_snapshot(name, 4, world.n, back.state_dict()))["state"])
    np.testing.assert_array_equal(again.margin_many(XL, XR, U, **kw), g_back)
    if getattr(trained, "personal", False):  # and each person's own state round-trips through the state codec
        from learners.state import dump_state, load_state

        lone = registry.get_model(name).loader(trained.state_dict(people=False))
        assert lone.people_held() == 0 and trained.people_held() == 5
        for u in trained.people():
            lone.load_person(u, load_state(dump_state(trained.person_state(u))))
        np.testing.assert_array_equal(lone.margin_many(XL, XR, U, **kw), g)


def _params(learner) -> dict:
    sig = inspect.signature(type(learner).__init__).parameters
    return {k: getattr(learner, k) for k in sig if k != "self" and hasattr(learner, k)}


def check_clone_keeps_parameters(name: str, world: World, trained) -> None:
    c = trained.clone()
    assert type(c) is type(trained) and c is not trained
    new = fresh(name)
    assert repr(_params(c)) == repr(_params(new)) == repr(_params(trained))
    assert getattr(c, "n_seen", 0) == 0
    assert list(c.feature_names) == list(trained.feature_names)


def check_probabilities_are_complementary(name: str, world: World, trained) -> None:
    XL, XR, U = _batch(trained, world, np.arange(world.n))
    kw = people_kw(trained, world, np.arange(world.n))
    p = trained.predict_proba_many(XL, XR, U, **kw)
    q = trained.predict_proba_many(XR, XL, U, **kw)
    assert np.all((p >= 0) & (p <= 1)) and np.all(np.isfinite(p))
    np.testing.assert_allclose(p + q, 1.0, rtol=0, atol=1e-12)
    for i in range(0, world.n, 17):
        left, right, ctx = world.row(i)
        one = person_kw(trained, world, i)
        d = trained.predict_proba_one(left, right, ctx, **one)
        r = trained.predict_proba_one(right, left, ctx, **one)
        assert set(d) == {1, -1} and abs(d[1] + d[-1] - 1.0) < 1e-12
        assert abs(d[1] + r[1] - 1.0) < 1e-12
        assert abs(d[1] - p[i]) < 1e-9
        assert trained.predict_one(left, right, ctx, **one) == (1 if d[1] > 0.5 else -1 if d[1] < 0.5 else 0)


def check_margin_is_skew_symmetric(name: str, world: World, trained) -> None:
    XL, XR, U = _batch(trained, world, np.arange(world.n))
    kw = people_kw(trained, world, np.arange(world.n))
    g, h = trained.margin_many(XL, XR, U, **kw), trained.margin_many(XR, XL, U, **kw)
    np.testing.assert_allclose(g, -h, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(trained.margin_many(XL, XL, U, **kw), 0.0, atol=1e-12)
    for i in range(0, world.n, 13):
        left, right, ctx = world.row(i)
        assert abs(trained.margin_one(left, right, ctx, **person_kw(trained, world, i)) - g[i]) < 1e-9


def check_learn_many_equals_a_learn_one_loop(name: str, world: World, trained) -> None:
    a, b = fresh(name), fresh(name)
    if getattr(type(a), "learn_many_matches_loop", True) is False:
        # A documented mini-batch variant must name the parameters under which it is the loop
        # exactly (e.g. ``{"minibatch": 1}``); the check runs there.
        exact = getattr(type(a), "exact_learn_many_params", None)
        assert exact, f"{type(a).__name__} sets learn_many_matches_loop = False but no exact_learn_many_params"
        a, b = (fresh(name, exact) for _ in range(2))
    idx = np.arange(60)
    w = np.linspace(0.5, 2.0, len(idx))
    for i in idx:
        left, right, ctx = world.row(i)
        a.learn_one(left, right, int(world.y[i]), ctx, float(w[i]), **person_kw(a, world, i))
    XL, XR, U = _batch(b, world, idx)
    b.learn_many(XL, XR, world.y[idx], U, w, **people_kw(b, world, idx))
    _state_equal(a.state_dict(), b.state_dict(), rtol=1e-12)


def check_merge(name: str, world: World, trained) -> None:
    from stream import registry

    assert registry.merge_learners(name, [(trained, world.n)]) is trained
    before = copy.deepcopy(trained.state_dict())
    empty = fresh(name)
    merged = registry.merge_learners(name, [(trained, world.n), (empty, 0)])
    XL, XR, U = _batch(trained, world, np.arange(world.n))
    kw = people_kw(trained, world, np.arange(world.n))
    # a part that learned nothing changes nothing
    np.testing.assert_allclose(merged.margin_many(XL, XR, U, **kw), trained.margin_many(XL, XR, U, **kw),
                               rtol=1e-9, atol=1e-12)
    half_a = train(fresh(name), world, range(0, world.n, 2))
    half_b = train(fresh(name), world, range(1, world.n, 2))
    states = [copy.deepcopy(h.state_dict()) for h in (half_a, half_b)]
    both = registry.merge_learners(name, [(half_a, world.n // 2), (half_b, world.n // 2)])
    p = both.predict_proba_many(XL, XR, U, **kw)
    assert np.all(np.isfinite(p)) and np.all((p >= 0) & (p <= 1))
    assert np.mean((p > 0.5) == (world.y > 0)) > 0.6  # the merged model still ranks the world's pairs
    # the parts are never modified
    _state_equal(trained.state_dict(), before)
    for h, st in zip((half_a, half_b), states):
        _state_equal(h.state_dict(), st)


MODEL_CHECKS = [
    check_learning_does_not_mutate_inputs,
    check_state_round_trips_through_the_snapshot_codec,
    check_clone_keeps_parameters,
    check_probabilities_are_complementary,
    check_margin_is_skew_symmetric,
    check_learn_many_equals_a_learn_one_loop,
    check_merge,
]

__all__ = ["FEATURES", "MODEL_CHECKS"]
