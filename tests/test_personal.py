"""Personal models: closed forms and invariants of the population + δ_u model, and the per-person state API.

Tolerances: "exactly the population" is compared at atol 1e-12 (the same floats go through the same
code; 0 is added); finite-difference gradients at rtol 1e-6 (central differences, step 1e-6, of a
smooth logistic loss).
"""

from __future__ import annotations

import numpy as np
import pytest

from learners.capacity_personal import CapacityPersonal
from learners.linear_personal import LinearBTPersonal
from learners.personal import rda_deviation
from learners.state import dump_state, load_state

CRIT = ["a", "b", "c"]


def _stream(n=300, seed=0, people=6):
    rng = np.random.default_rng(seed)
    XL, XR = rng.random((n, 3)), rng.random((n, 3))
    users = [f"u{k}" for k in rng.integers(0, people, n)]
    taste = {f"u{k}": rng.normal(size=3) for k in range(people)}
    y = np.array([1 if (XL[i] - XR[i]) @ (np.array([1.0, 0.5, -0.5]) + taste[u]) > 0 else -1
                  for i, u in enumerate(users)])
    return XL, XR, y, users


def _models():
    return [CapacityPersonal(CRIT), CapacityPersonal(CRIT, population={"algorithm": "rda"}), LinearBTPersonal(CRIT)]


@pytest.mark.parametrize("model", _models(), ids=lambda m: f"{type(m).__name__}-{type(m.population_learner).__name__}")
def test_a_person_without_events_or_forgotten_is_the_population(model):
    XL, XR, y, users = _stream()
    model.learn_many(XL, XR, y, user_ids=users)
    pop = model.population_learner
    g_pop = pop.margin_many(XL, XR)
    np.testing.assert_allclose(model.margin_many(XL, XR, user_ids=["nobody"] * len(y)), g_pop, rtol=0, atol=1e-12)
    np.testing.assert_allclose(model.margin_many(XL, XR), g_pop, rtol=0, atol=1e-12)
    # a person with events differs; forgotten, they are the population again and not personalized
    g_u = model.margin_many(XL, XR, user_ids=["u0"] * len(y))
    assert np.abs(g_u - g_pop).max() > 1e-2 * np.abs(g_pop).max()
    assert model.person_info("u0")["personalized"] and model.person_info("u0")["version"] == users.count("u0")
    assert model.forget_person("u0") and not model.forget_person("u0")
    np.testing.assert_allclose(model.margin_many(XL, XR, user_ids=["u0"] * len(y)), g_pop, rtol=0, atol=1e-12)
    assert model.person_info("u0") == {"personalized": False, "version": 0}
    assert "u0" not in model.drain_touched()


def test_a_person_loaded_with_zero_weight_predicts_exactly_the_population():
    m = CapacityPersonal(CRIT)
    XL, XR, y, users = _stream()
    m.learn_many(XL, XR, y, user_ids=users)
    m.load_person("zero", {"meta": {"t": 0.0, "version": 0}, "arrays": {"G": np.ones(m.index.d), "Q": np.zeros(m.index.d)}})
    np.testing.assert_allclose(m.margin_many(XL, XR, user_ids=["zero"] * len(y)), m.population_learner.margin_many(XL, XR),
                               rtol=0, atol=1e-12)


def test_the_deviation_is_the_rda_closed_form():
    """δ = −soft(G, λT)/(γ√T + μT), worked by hand on one coordinate per case."""
    G = np.array([3.0, -3.0, 0.5, 0.0])
    d = rda_deviation(G, 4.0, l1=0.25, l2=0.5, gamma=1.0)    # threshold 1, denominator 2 + 2 = 4
    np.testing.assert_allclose(d, [-0.5, 0.5, 0.0, 0.0], rtol=0, atol=1e-15)
    np.testing.assert_allclose(rda_deviation(np.ones((2, 2)), np.array([0.0, 1.0]), 0.0, 0.0, 2.0),
                               [[0.0, 0.0], [-0.5, -0.5]], rtol=0, atol=1e-15)


@pytest.mark.parametrize("cls", [CapacityPersonal, LinearBTPersonal])
def test_the_persons_gradient_is_the_populations_gradient(cls):
    """A new person's first event: ΔG_u = ℓ'(g) z analytically, and ΔG_u in the population's units equals the
    population's loss ℓ(g(m)) differentiated in its own parameters m by central differences (F is linear in m)."""
    m = cls(CRIT)
    XL, XR, y, users = _stream()
    m.learn_many(XL[:200], XR[:200], y[:200], user_ids=users[:200])
    xl, xr = XL[250:251], XR[250:251]
    pop = m.population_learner
    g0 = float(m.margin_many(xl, xr)[0])
    z = m._z(xl, xr)[0]                                                # the features at the pre-event population
    s_vec = m._z_scale()
    own = pop._m if cls is CapacityPersonal else pop._w                # masses, or LinearBT's scaled weights
    unit = np.ones_like(s_vec) if cls is CapacityPersonal else s_vec  # one raw unit of the parameter
    h = 1e-6
    num = np.empty(len(own))
    for k in range(len(own)):
        vals = []
        for sgn in (1, -1):
            keep = own[k]
            own[k] = keep + sgn * h * unit[k]
            vals.append(np.logaddexp(0.0, -float(pop.margin_many(xl, xr)[0])))   # logistic loss at y = +1
            own[k] = keep
        num[k] = (vals[0] - vals[1]) / (2 * h)
    assert m.person_state("fresh") is None
    m.learn_one(dict(zip(CRIT, xl[0])), dict(zip(CRIT, xr[0])), 1, user_id="fresh")
    G = m.person_state("fresh")["arrays"]["G"]
    np.testing.assert_allclose(G, (0.5 * (1 + np.tanh(0.5 * g0)) - 1.0) * z, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(G * s_vec, num, rtol=1e-6, atol=1e-9)


def test_learning_a_person_never_touches_the_population():
    """The population learns every event on its own: with or without people, the same population."""
    XL, XR, y, users = _stream()
    a, b = CapacityPersonal(CRIT), CapacityPersonal(CRIT)
    a.learn_many(XL, XR, y, user_ids=users)
    b.learn_many(XL, XR, y)
    np.testing.assert_allclose(a.population_learner.mobius, b.population_learner.mobius, rtol=0, atol=0)
    assert b.people_held() == 0 and a.people_held() == 6


def test_person_state_api():
    XL, XR, y, users = _stream()
    m = LinearBTPersonal(CRIT)
    m.learn_many(XL[:100], XR[:100], y[:100], user_ids=users[:100])
    touched = m.drain_touched()
    assert touched == set(users[:100]) and m.drain_touched() == set()
    m.learn_one(dict(zip(CRIT, XL[100])), dict(zip(CRIT, XR[100])), int(y[100]), user_id=users[100])
    assert m.drain_touched() == {users[100]}
    # the state codec round trip; evict then load back through person_loader on the next event
    store = {u: dump_state(m.person_state(u)) for u in m.people()}
    g = m.margin_many(XL, XR, user_ids=users)
    for u in list(m.people()):
        assert m.evict_person(u)
    assert m.people_held() == 0
    m.person_loader = lambda u: load_state(store[u]) if u in store else None
    np.testing.assert_allclose(m.margin_many(XL, XR, user_ids=users), g, rtol=0, atol=1e-12)
    assert m.people_held() == 6 and m.drain_touched() == set()    # loading is not a change
    assert m.person_info(users[0])["version"] == users[:101].count(users[0])
    with pytest.raises(Exception, match="shape"):
        m.load_person("bad", {"meta": {"t": 1.0, "version": 1}, "arrays": {"G": np.zeros(7), "Q": np.zeros(7)}})


def test_merge_is_the_populations_merge_plus_the_union_of_people():
    from stream.plugins.personal import merge_personal

    XL, XR, y, users = _stream()
    even = [i for i, u in enumerate(users) if int(u[1:]) % 2 == 0]
    odd = [i for i, u in enumerate(users) if int(u[1:]) % 2 == 1]
    parts = []
    for idx in (even, odd):
        m = CapacityPersonal(CRIT, population={"algorithm": "rda"})
        m.learn_many(XL[idx], XR[idx], y[idx], user_ids=[users[i] for i in idx])
        parts.append(m)
    merged = merge_personal([(p, 1) for p in parts])
    assert sorted(merged.people()) == sorted(set(users))
    np.testing.assert_allclose(merged.population_learner.gradient_sum,
                               parts[0].population_learner.gradient_sum + parts[1].population_learner.gradient_sum,
                               rtol=1e-12, atol=1e-12)
    for u in ("u0", "u1"):
        src = parts[int(u[1:]) % 2]
        np.testing.assert_allclose(merged.person_state(u)["arrays"]["G"], src.person_state(u)["arrays"]["G"],
                                   rtol=0, atol=0)
    assert parts[0].people_held() == 3                             # the parts are not modified


def test_per_person_explanations_are_efficient_and_differ_by_the_deviation():
    """Σ_i φ_i(m + δ_u) = Σ_S (m + δ_u)(S) (efficiency, atol 1e-12); φ(m + δ_u) − φ(m) = φ(δ_u) (linearity);
    an event without a held person is explained by the population, personalized false; records name the person."""
    import json

    from explainers.capacity import capacity_shapley
    from stream.contract import parse_preference
    from stream.plugins import personal as plug
    from stream.registry import ExplainContext

    XL, XR, y, users = _stream()
    m = CapacityPersonal(CRIT, person_interaction=0.5)
    m.learn_many(XL, XR, y, user_ids=users)
    evs = [parse_preference(json.dumps({"schema_version": 1, "event_id": f"e{u}", "timestamp": 1, "outcome": 1,
                                        "left": {"features": dict(zip(CRIT, XL[0]))},
                                        "right": {"features": dict(zip(CRIT, XR[0]))},
                                        **({"user_id": u} if u else {})}).encode()) for u in ("u0", "u1", None)]
    ctx = ExplainContext("capacity-personal", model_version=3)
    full = plug.person_capacity_shapley(m, evs, ctx)
    dev = plug.person_deviation_shapley(m, evs, ctx)
    pop = capacity_shapley(m.mobius, m.index, CRIT).values
    for i, u in enumerate(("u0", "u1")):
        masses = m.person_mobius(u)
        np.testing.assert_allclose(full.values[i].sum(), masses.sum(), rtol=0, atol=1e-12)
        np.testing.assert_allclose(full.values[i] - pop, dev.values[i], rtol=0, atol=1e-12)
        assert np.abs(dev.values[i]).max() > 1e-3
    np.testing.assert_allclose(full.values[2], pop, rtol=0, atol=1e-12)
    np.testing.assert_allclose(dev.values[2], 0.0, rtol=0, atol=0)
    recs = full.to_records([ev.event_id for ev in evs])
    assert [r["user_id"] for r in recs] == ["u0", "u1", None]
    assert [r["extra"]["personalized"] for r in recs] == [True, True, False]
    assert recs[0]["extra"]["person_version"] == users.count("u0")
    inter = plug.person_deviation_interaction(m, evs[:1], ctx)
    assert inter.method == "capacity-interaction-deviation" and np.asarray(inter.extra["interactions"]).shape == (3, 3)


def test_linear_per_person_explanations_are_the_persons_weights_and_differ_by_the_deviation():
    """linear-bt-personal: φ = (w + δ_u) ⊙ (D − μ) and base (w + δ_u)·μ, so base + Σφ = the person's margin
    (atol 1e-12); the deviation's values are δ_u ⊙ (D − μ) (closed form, atol 1e-12) and the population's
    linear-shapley values plus the deviation's are the person's (atol 1e-12); an event without a person, or with
    one not held, is explained by the population, personalized false, deviation exactly 0. μ ≠ 0 here: the
    background holds pairs whose sides are not i.i.d."""
    import json

    from stream.contract import parse_preference
    from stream.contract.explain import explanation_record_ok
    from stream.plugins import personal as plug
    from stream.plugins.linear import explain_linear_shapley
    from stream.registry import ExplainContext

    def event(i, xl, xr, u=None):
        return parse_preference(json.dumps({"schema_version": 1, "event_id": f"e{i}", "timestamp": 1, "outcome": 1,
                                            "left": {"features": dict(zip(CRIT, xl))},
                                            "right": {"features": dict(zip(CRIT, xr))},
                                            **({"user_id": u} if u else {})}).encode())

    XL, XR, y, users = _stream()
    m = LinearBTPersonal(CRIT)
    m.learn_many(XL, XR, y, user_ids=users)
    who = ["u0", "u1", None, "stranger", "u0"]
    evs = [event(i, XL[i], XR[i], u) for i, u in enumerate(who)]
    bg = [event(f"b{i}", XL[i] + 0.3, XR[i]) for i in range(20)]
    mu = np.mean(XL[:20] + 0.3 - XR[:20], axis=0)
    ctx = ExplainContext("linear-bt-personal", model_version=3, background=bg)
    full = plug.person_linear_shapley(m, evs, ctx)
    dev = plug.person_linear_deviation(m, evs, ctx)
    pop = explain_linear_shapley(m.population_learner, evs, ctx)
    assert (full.method, dev.method) == ("linear-shapley", "linear-shapley-deviation")
    D = XL[:5] - XR[:5]
    g = m.margin_many(XL[:5], XR[:5], user_ids=who)
    np.testing.assert_allclose(full.base_values + full.values.sum(axis=1), g, rtol=0, atol=1e-12)
    np.testing.assert_allclose(full.prediction, g, rtol=0, atol=1e-12)
    for i, u in enumerate(who):
        delta = m.deviation(u) if u else np.zeros(3)
        np.testing.assert_allclose(dev.values[i], delta * (D[i] - mu), rtol=0, atol=1e-12)
        np.testing.assert_allclose(dev.base_values[i], delta @ mu, rtol=0, atol=1e-12)
        np.testing.assert_allclose(full.values[i], (m.weights + delta) * (D[i] - mu), rtol=0, atol=1e-12)
    np.testing.assert_allclose(pop.values + dev.values, full.values, rtol=0, atol=1e-12)
    assert np.abs(dev.values[:2]).max() > 1e-3                       # the people do differ
    np.testing.assert_allclose(full.values[2:4], pop.values[2:4], rtol=0, atol=0)
    np.testing.assert_allclose(dev.values[2:4], 0.0, rtol=0, atol=0)
    recs = full.to_records([ev.event_id for ev in evs])
    for r in recs + dev.to_records([ev.event_id for ev in evs]):
        explanation_record_ok(r)                                     # explanation.v1.json, method enum included
        np.testing.assert_allclose(r["extra"]["background_mean_diff"], mu, rtol=0, atol=1e-12)
    assert [r["user_id"] for r in recs] == who
    assert [r["extra"]["personalized"] for r in recs] == [True, True, False, False, True]
    assert recs[0]["extra"]["person_version"] == users.count("u0") and recs[3]["extra"]["person_version"] == 0
    assert {r["model_name"] for r in recs} == {"linear-bt-personal"} and recs[0]["model_version"] == 3


def test_ranking_metrics_closed_forms():
    from stream.evaluation import holdout_last, hr_at_k, ndcg_at_k

    s = np.array([0.9, 0.8, 0.7, 0.1])
    # relevant at ranks 1 and 3: DCG = 1 + 1/log2(4) = 1.5; IDCG = 1 + 1/log2(3)
    assert ndcg_at_k(s, np.array([1, 0, 1, 0], bool), 10) == pytest.approx(1.5 / (1 + 1 / np.log2(3)), rel=1e-12)
    assert ndcg_at_k(s, np.array([0, 0, 0, 1], bool), 3) == pytest.approx(0.0, abs=1e-12)
    assert hr_at_k(s, np.array([0, 0, 0, 1], bool), 3) == pytest.approx(0.0, abs=1e-12)
    assert hr_at_k(s, np.array([0, 0, 0, 1], bool), 4) == pytest.approx(1.0, abs=1e-12)
    assert holdout_last(["a", "b", "a", "a", None], [1, 5, 2, 2, 9]).tolist() == [False, True, True, True, False]


def test_evaluate_ranks_each_persons_held_out_choice():
    """A world where each person's taste is in δ_u: the personal model ranks the held-out choices better."""
    from stream.adapters import PairwiseDataset
    from stream.evaluation import evaluate_split, holdout_last

    rng = np.random.default_rng(3)
    n_people, per = 30, 40
    taste = rng.normal(size=(n_people, 3)) * 2
    X, L, R, Y, U, T = [], [], [], [], [], []
    for t in range(per):
        for p in range(n_people):
            a, b = rng.random(3), rng.random(3)
            X += [a, b]
            L.append(len(X) - 2)
            R.append(len(X) - 1)
            Y.append(1 if (a - b) @ taste[p] > 0 else -1)
            U.append(f"p{p}")
            T.append(t)
    ds = PairwiseDataset("toy", [str(i) for i in range(len(X))], np.array(X), CRIT, L, R, Y, timestamps=np.array(T),
                         inline=True, users=U)
    from learners.linear import LinearBT

    res = evaluate_split(ds, {"global": LinearBT(CRIT), "personal": LinearBTPersonal(CRIT)}, holdout_last(U, T))
    assert set(res) == {"global", "personal", "popularity"}
    assert res["personal"]["people"] == n_people == res["global"]["people"]
    assert res["personal"]["auc"] > res["global"]["auc"] + 0.05
    assert res["personal"]["ndcg"] > res["global"]["ndcg"]


def test_a_monotone_population_keeps_every_person_a_capacity():
    """ADMM-RDA population with the monotonicity constraints: m + α*δ_u violates no row the population does
    not (violation ≤ the population's + 1e-12), while the unscaled m + δ_u of some people would."""
    rng = np.random.default_rng(4)
    n = 1500
    XL, XR = rng.random((n, 3)), rng.random((n, 3))
    users = [f"u{k}" for k in rng.integers(0, 20, n)]
    taste = {f"u{k}": rng.normal(size=3) * 3 for k in range(20)}               # some people like *less* of a
    y = np.array([1 if (XL[i] - XR[i]) @ (np.array([1.0, 0.5, 0.2]) + taste[u]) > 0 else -1
                  for i, u in enumerate(users)])
    m = CapacityPersonal(CRIT, population={"algorithm": "rda", "constraints": ["monotone"], "scaler": "none"})
    m.learn_many(XL, XR, y, user_ids=users)
    rep = m.violation_report()
    assert rep["people"] == 20 and rep["raw_share"] > 0.2 and rep["raw_max"] > 1e-9
    assert rep["scored_max"] <= rep["population"] + 1e-12
    for u in m.people():                                                      # and the masses scored are those
        np.testing.assert_allclose(m.person_mobius(u), m.mobius + m._effective(m._delta(m._people.G[m._people.row(u)],
                                                                                        m._people.T[m._people.row(u)])),
                                   rtol=0, atol=1e-15)


@pytest.mark.parametrize("adaptive", [True, False])
def test_the_vectorised_rounds_equal_the_row_by_row_steps(adaptive, monkeypatch):
    """A block's people stepped together per occurrence equal the same rows stepped one by one (rtol 1e-12)."""
    import learners.personal as lp

    XL, XR, y, users = _stream(n=400, people=12)
    states = []
    for min_round in (1, 10 ** 9):
        monkeypatch.setattr(lp, "_MIN_ROUND", min_round)
        m = CapacityPersonal(CRIT, person_adaptive=adaptive, person_interaction=0.5)
        m.learn_many(XL, XR, y, user_ids=users)
        states.append(m.state_dict())
    for k in ("people_G", "people_T", "people_N"):
        np.testing.assert_allclose(states[0]["arrays"][k], states[1]["arrays"][k], rtol=1e-12, atol=1e-15)
