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
    assert np.abs(g_u - g_pop).max() > 1e-3
    assert model.person_info("u0")["personalized"] and model.person_info("u0")["version"] == users.count("u0")
    assert model.forget_person("u0") and not model.forget_person("u0")
    np.testing.assert_allclose(model.margin_many(XL, XR, user_ids=["u0"] * len(y)), g_pop, rtol=0, atol=1e-12)
    assert model.person_info("u0") == {"personalized": False, "version": 0}
    assert "u0" not in model.drain_touched()


def test_a_person_loaded_with_zero_weight_predicts_exactly_the_population():
    m = CapacityPersonal(CRIT)
    XL, XR, y, users = _stream()
    m.learn_many(XL, XR, y, user_ids=users)
    m.load_person("zero", {"meta": {"t": 0.0, "version": 0}, "arrays": {"G": np.ones(m.index.d)}})
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
        m.load_person("bad", {"meta": {"t": 1.0, "version": 1}, "arrays": {"G": np.zeros(7)}})


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
