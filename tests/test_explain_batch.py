"""A batch of events explained in one call equals one call per event (issue 23), on real models.

Pokémon (26 features, the 18 type indicators one player: 9 players) with the capacity model, the GPM
and linear-bt; tennis with the C-GPM (context Pref-SHAP). Exact methods agree to 1e-9 at the default
budgets; sampled Pref-SHAP (shared coalitions per group of duels) within its standard errors, sampled
distributional values (per event, seed 0) to 1e-9. Every registered explainer carries its caps.
"""

from __future__ import annotations

import numpy as np
import pytest

from stream import models as builtin
from stream import registry
from stream.adapters import load_dataset
from stream.contract import ItemCatalog, PreferenceExample
from stream.demo import default_model_params
from stream.settings import Settings
from tests.conftest import _missing_data_reason, data_root

N_TRAIN, N_EVENTS = 400, 10


def _data(name):
    reason = _missing_data_reason()  # the shared data folder is not in every checkout (named skip)
    if reason is not None:
        pytest.skip(reason)
    ds = load_dataset(name, data_dir=data_root())  # a data set that fails to load is a failure, not a skip
    names, cnames = list(ds.feature_names), list(ds.context_names or [])

    def ex(k):
        l, r = ds.left[k], ds.right[k]
        return PreferenceExample(event_id=f"e{k}", timestamp=0.0, left=dict(zip(names, map(float, ds.item_features[l]))),
                                 right=dict(zip(names, map(float, ds.item_features[r]))), outcome=int(ds.outcome[k]),
                                 context=None if ds.context is None else dict(zip(cnames, map(float, ds.context[k]))))

    order = np.random.default_rng(0).permutation(len(ds.outcome))
    evs = [ex(int(k)) for k in order[:N_TRAIN + N_EVENTS]]
    cat = ItemCatalog()
    for i, iid in enumerate(ds.item_ids):
        cat.upsert({"item_id": str(iid), "features": dict(zip(names, map(float, ds.item_features[i])))})
    return ds, names, cnames, evs[:N_TRAIN], evs[N_TRAIN:], cat


def _fit(ds, names, cnames, model, train):
    builtin.register_all()
    st = Settings.load(overrides={"feature_names": names, "context_names": cnames or None})
    params = default_model_params(ds, [model]).get(model, {}) if model != "linear-bt" else {}
    if model in ("gpm", "cgpm"):
        params = dict(params, refit_every=10 ** 9, min_train=10, window_size=len(train) + 1)
    lr = registry.get_model(model).factory(st, params)
    for e in train:
        lr.learn_one(e.left, e.right, e.outcome, e.context)
    if hasattr(lr, "refit"):
        lr.refit()
    return lr


@pytest.fixture(scope="module")
def pokemon():
    ds, names, cnames, train, events, cat = _data("pokemon")
    return {m: _fit(ds, names, cnames, m, train) for m in ("capacity", "gpm", "linear-bt")}, train, events, cat


def _ctx(model, train, cat, budgets=None):
    # a fresh generator per call: one call per event and the batch see the same reference draws
    return registry.ExplainContext(model_name=model, model_version=1, background=train[:256], catalog=cat,
                                   rng=np.random.default_rng(7), budgets=dict(budgets or {}))


def _both(fn, lr, events, ctx):
    """One call per event, and the batch — resumed where a call stopped on its time budget (a loaded
    machine), as a worker requeues the unfinished events."""
    from explainers import Explanation

    one = [fn(lr, [e], ctx()) for e in events]
    parts, done = [], 0
    while done < len(events):
        parts.append(fn(lr, events[done:], ctx()))
        assert parts[-1].extra.get("unfinished", 0) == len(events) - done - parts[-1].n_instances
        done += parts[-1].n_instances
    return one, Explanation.stack(parts)


def _assert_equal(one, batch, tol=1e-9):
    assert batch.n_instances == len(one)
    v1 = np.concatenate([np.atleast_2d(o.values) for o in one])
    np.testing.assert_allclose(np.atleast_2d(batch.values), v1, rtol=0, atol=tol)
    b1 = np.concatenate([np.asarray(o.base_values, float).reshape(-1) for o in one])
    np.testing.assert_allclose(np.broadcast_to(np.asarray(batch.base_values, float).reshape(-1), b1.shape), b1,
                               rtol=0, atol=tol)
    if batch.prediction is not None:
        p1 = np.concatenate([np.asarray(o.prediction, float).reshape(-1) for o in one])
        np.testing.assert_allclose(np.broadcast_to(np.asarray(batch.prediction, float).reshape(-1), p1.shape), p1,
                                   rtol=0, atol=tol)


@pytest.mark.parametrize("model", ["capacity", "gpm", "linear-bt"])
def test_exact_batch_equals_one_call_per_event(pokemon, model):
    learners, train, events, cat = pokemon
    lr = learners[model]
    fns = {m: f for m, f in registry.explainers_for(model).items() if not getattr(f, "session_only", False)}
    assert fns
    for method, fn in fns.items():
        one, batch = _both(fn, lr, events, lambda: _ctx(model, train, cat))
        assert all(bool(np.all(np.asarray(o.extra.get("exact", True)))) for o in one), method
        _assert_equal(one, batch)
        np.testing.assert_array_less(np.atleast_1d(batch.additivity_error()), 1e-9) if getattr(fn, "additive", False) else None


def test_observational_player_table_kept_per_duel(pokemon):
    """The observational CME path (the paper's tables): a duel's game is a sub-table of the batch's player table,
    kept per duel, so a later call computes nothing again."""
    from stream.plugins.gpm import _duel_arrays, _prefshap_for
    from stream.plugins.groups import players

    learners, train, events, cat = pokemon
    lr = learners["gpm"]
    model, ps, b = _prefshap_for(lr, _ctx("gpm", train, cat), "observational")
    assert ps.players()[0] == players(list(model.feature_names), b["exact_players"])[0]
    XL, XR, U = _duel_arrays(model, events)
    t = ps.player_table(XL, XR, U)
    assert t.shape == (2 ** len(ps.players()[0]), len(events))
    assert not np.isnan(t).any()
    ps._item_values = None                                          # kept per duel: nothing is computed again,
    for part in (slice(0, 4), slice(3, None), [7, 1, 2]):            # whatever duels a later call batches
        np.testing.assert_array_equal(ps.player_table(XL[part], XR[part], None), t[:, part])
    del ps._item_values
    np.testing.assert_allclose(t[-1], model.decision_function(XL, XR), rtol=1e-9, atol=1e-12)   # ν(Ω) = g


def test_stream_prefshap_is_exact_on_every_feature_and_distributional_reads_its_value_function(pokemon):
    """The stream's GPM Pref-SHAP: product-marginal, 26 players (no grouping), exact; the Bernoulli values of the
    same events evaluate the same value function from the duel's product-game terms (no shared table)."""
    from explainers._coalitions import all_coalitions
    from explainers.distributional import product_value_function
    from stream.plugins.gpm import _duel_arrays, _prefshap_for
    from stream.plugins.groups import players

    learners, train, events, cat = pokemon
    lr = learners["gpm"]
    model, ps, b = _prefshap_for(lr, _ctx("gpm", train, cat))
    assert ps.exact_product and ps.players()[0] == list(model.feature_names)
    e = registry.explainers_for("gpm")["pref-shap"](lr, events[:3], _ctx("gpm", train, cat))
    assert e.values.shape == (3, len(model.feature_names)) and e.extra["estimator"] == "product-exact"
    XL, XR, _ = _duel_arrays(model, events[:3])
    pl, member = players(list(model.feature_names), b["exact_players"])
    C = (all_coalitions(len(pl)).astype(np.int64) @ member.astype(np.int64)) > 0
    for k in range(3):
        nu = product_value_function(*ps.product_terms(XL[k], XR[k]))
        np.testing.assert_allclose(nu(C), ps.coalition_values(C, XL[k:k + 1], XR[k:k + 1])[:, 0], rtol=0, atol=1e-12)
        np.testing.assert_allclose(nu(C[-1:])[0], model.decision_function(XL[k:k + 1], XR[k:k + 1])[0], atol=1e-10)
    dist = registry.explainers_for("gpm")["distributional-bernoulli"](lr, events[:3], _ctx("gpm", train, cat))
    np.testing.assert_allclose(dist.prediction, 1 / (1 + np.exp(-model.decision_function(XL, XR))), atol=1e-9)


def test_snapshots_of_one_fit_share_their_explainer(pokemon):
    """A new snapshot of an unchanged fit (a new object, same arrays) reuses the kernel blocks of the last one and
    explains alike; a different fit (or other budgets) gets its own explainer."""
    from stream.plugins.gpm import _LATEST_FIT, _prefshap_for

    learners, train, events, cat = pokemon
    spec = registry.get_model("gpm")
    lr = spec.loader(learners["gpm"].state_dict())             # as the explainer loads every snapshot
    _, ps, _ = _prefshap_for(lr, _ctx("gpm", train, cat))
    _, obs, _ = _prefshap_for(lr, _ctx("gpm", train, cat), "observational")
    assert obs is not ps and _prefshap_for(lr, _ctx("gpm", train, cat))[1] is ps   # one per value function
    again = spec.loader(learners["gpm"].state_dict())
    assert again.model is not lr.model
    _, ps2, _ = _prefshap_for(again, _ctx("gpm", train, cat))
    assert ps2 is ps
    fn = registry.explainers_for("gpm")["pref-shap"]
    shared = fn(again, events[:3], _ctx("gpm", train, cat))
    _LATEST_FIT.clear()                                          # a third snapshot, explained from scratch
    third = spec.loader(learners["gpm"].state_dict())
    assert _prefshap_for(third, _ctx("gpm", train, cat))[1] is not ps
    fresh = fn(third, events[:3], _ctx("gpm", train, cat))
    np.testing.assert_allclose(fresh.values, shared.values, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fresh.prediction, shared.prediction, rtol=0, atol=1e-12)
    _, ps3, _ = _prefshap_for(again, _ctx("gpm", train, cat, {"reference_size": 64}))
    assert ps3 is not ps
    other = _fit(*_data("pokemon")[:3], "gpm", train[:200])
    _, ps4, _ = _prefshap_for(other, _ctx("gpm", train, cat))
    assert ps4 is not ps and ps4.model is other.model


def test_sampled_prefshap_batch_within_standard_errors(pokemon):
    learners, train, events, cat = pokemon
    lr = learners["gpm"]
    small = {"exact_players": 4, "max_coalitions": 128, "target_se": 0}      # 9 players, 512 coalitions: sampled
    from stream.plugins.gpm import _duel_arrays, _outcome, _prefshap_for

    def fn(lr, evs, ctx):             # the observational CME path (the stream's own is exact at any width)
        model, ps, _ = _prefshap_for(lr, ctx, "observational")
        XL, XR, U = _duel_arrays(model, evs)
        return ps.explain_duels(XL, XR, U, _outcome(evs))

    one, batch = _both(fn, lr, events, lambda: _ctx("gpm", train, cat, small))
    v1 = np.concatenate([np.atleast_2d(o.values) for o in one])
    se1 = np.concatenate([np.atleast_2d(o.extra.get("stderr", np.zeros_like(o.values))) for o in one])
    seb = np.asarray(batch.extra["stderr"])                             # zeros for the duels enumerated exactly
    assert not np.asarray(batch.extra["exact"]).all()
    # duels enumerated exactly (stderr 0) agree to rounding: a floor of 1e-9 (the exact methods' tolerance) on σ
    z = np.abs(batch.values - v1) / np.sqrt(se1 ** 2 + seb ** 2 + 1e-18)
    assert np.max(z) < 5.0                                              # 10 duels × 9 players: no 5σ deviation
    assert np.abs(batch.values - v1).max() > 0                          # the draws really were restructured
    assert np.max(batch.additivity_error()) < 1e-9                      # efficiency is exact either way


def test_sampled_distributional_batch_equals_one_call_per_event(pokemon):
    learners, train, events, cat = pokemon
    small = {"exact_players": 4, "max_coalitions": 256}
    for model in ("capacity", "gpm"):
        fn = registry.explainers_for(model)["distributional-bernoulli"]
        one, batch = _both(fn, learners[model], events[:4], lambda: _ctx(model, train, cat, small))
        assert batch.extra["estimator"][0] == "stratified"
        _assert_equal(one, batch)


def test_context_prefshap_batch_equals_one_call_per_event():
    ds, names, cnames, train, events, cat = _data("tennis")
    lr = _fit(ds, names, cnames, "cgpm", train)
    for method in ("pref-shap", "pref-shap-context", "distributional-bernoulli"):
        fn = registry.explainers_for("cgpm")[method]
        one, batch = _both(fn, lr, events, lambda: _ctx("cgpm", train, cat))
        _assert_equal(one, batch)


def test_every_explainer_carries_caps_and_stops_on_its_budget(pokemon):
    builtin.register_all()
    for model in builtin.BUILTIN_EXPLAINERS:  # the built-ins (other tests register throw-away models)
        for method, fn in registry.explainers_for(model).items():
            assert isinstance(fn.max_batch, int) and fn.max_batch >= 1, (model, method)
            assert isinstance(fn.budget_s, float) and fn.budget_s > 0, (model, method)
    learners, train, events, cat = pokemon
    fn = registry.explainers_for("capacity")["sharp-rank"]
    old = fn.budget_s, fn.step
    try:
        fn.budget_s, fn.step = 1e-9, 3                                # stops after the first step of 3 events
        e = fn(learners["capacity"], events, _ctx("capacity", train, cat))
    finally:
        fn.budget_s, fn.step = old
    assert e.n_instances == 3 and e.extra["unfinished"] == len(events) - 3
    assert e.instance_ids == [x.event_id for x in events[:3]]
    full = fn(learners["capacity"], events[:3], _ctx("capacity", train, cat))
    np.testing.assert_allclose(e.values, full.values, rtol=0, atol=1e-9)   # the finished prefix is exact


def test_capacity_bernoulli_table_from_the_pair_form_equals_the_scored_rows(pokemon, monkeypatch):
    """The 2-additive capacity's margin table from its pair form (no hybrid rows built) equals the margins of the
    built rows."""
    from learners.capacity_base import _CapacityLearner

    learners, train, events, cat = pokemon
    fn = registry.explainers_for("capacity")["distributional-bernoulli"]
    fast = fn(learners["capacity"], events, _ctx("capacity", train, cat))
    monkeypatch.setattr(_CapacityLearner, "pairwise_form", lambda self: None)
    rows = fn(learners["capacity"], events, _ctx("capacity", train, cat))
    np.testing.assert_allclose(fast.values, rows.values, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fast.prediction, rows.prediction, rtol=0, atol=1e-12)


def test_stored_blocks_serve_a_chunk_of_only_the_empty_and_full_coalitions(pokemon):
    """A chunk holding only ∅ and Ω (no CME solve) reads the stored mean of k_{S^c}(X, c): the same values as
    those rows in a chunk that solves (the whole player table)."""
    from stream.plugins.gpm import _duel_arrays, _prefshap_for

    learners, train, events, cat = pokemon
    model, ps, b = _prefshap_for(learners["gpm"], _ctx("gpm", train, cat), "observational")  # blocks of every coalition
    XL, XR, _ = _duel_arrays(model, events[:3])
    d = len(model.feature_names)
    ends = ps.coalition_values(np.array([np.zeros(d, bool), np.ones(d, bool)]), XL, XR)
    table = ps.player_table(XL, XR)
    np.testing.assert_allclose(ends, table[[0, -1]], rtol=0, atol=1e-12)


@pytest.mark.parametrize("cache_mb", [0.0, 40.0])
def test_kernel_blocks_partly_or_not_stored_give_the_same_values(pokemon, cache_mb):
    """Coalitions whose blocks do not fit ``cache_mb`` are solved for the explained items alone; the values equal
    those of an explainer that stores every coalition's blocks."""
    import torch

    from explainers.prefshap import PrefSHAP
    from stream.plugins.gpm import _duel_arrays, _prefshap_for
    from stream.plugins.groups import groups_of

    learners, train, events, cat = pokemon
    model, ps, b = _prefshap_for(learners["gpm"], _ctx("gpm", train, cat), "observational")
    some = PrefSHAP(model, reference_items=None, max_reference=b["reference_size"], random_state=0,
                    feature_groups=groups_of(list(model.feature_names), b["exact_players"]) or None,
                    dtype=torch.float64, cache_mb=cache_mb)
    some._ref = ps._ref
    XL, XR, _ = _duel_arrays(model, events[:4])
    for _ in range(2):                                               # filling, then reading what was stored
        np.testing.assert_allclose(some.player_table(XL, XR), ps.player_table(XL, XR), rtol=0, atol=1e-9)
        some.__dict__.pop("_columns", None)
    bank = some._cache.get("items")
    assert (bank is None) if cache_mb == 0 else (0 < len(bank.slot) < 512)
