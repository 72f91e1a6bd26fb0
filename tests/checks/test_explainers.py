"""Every registered explainer passes every explainer check of :mod:`tests.checks.explainers`."""

from __future__ import annotations

import pytest

import stream
from stream import registry
from tests.checks.explainers import EXPLAINER_CHECKS
from tests.checks.world import World, fresh, train

stream.load_builtins()
PAIRS = [(m, method) for m in registry.models() for method in sorted(registry.explainers_for(m))]


@pytest.fixture(scope="module")
def world() -> World:
    return World()


@pytest.fixture(scope="module")
def trained_models():
    return {}


def test_every_builtin_explainer_is_checked():
    methods = {method for _, method in PAIRS}
    assert {"linear-shapley", "capacity-shapley", "capacity-interaction", "sharp-rank", "sharp-pairwise",
            "distributional-bernoulli", "distributional-categorical", "pref-shap", "pref-shap-context"} <= methods


@pytest.mark.parametrize("check", EXPLAINER_CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
@pytest.mark.parametrize("model,method", PAIRS)
def test_explainer_contract(model, method, check, world, trained_models):
    if model not in trained_models:
        trained_models[model] = train(fresh(model), world)
    check(model, method, registry.get_explainer(model, method), world, trained_models[model])


def test_the_checks_catch_a_broken_explainer(world):
    """The suite can fail: a non-additive 'additive' explainer and one drawing from global state are caught."""
    import numpy as np

    from tests.checks import explainers as checks

    lr = train(fresh("linear-bt"), world)
    honest = registry.get_explainer("linear-bt", "linear-shapley")

    def off_by_one(learner, examples, ctx):
        e = honest(learner, examples, ctx)
        e.values = e.values + 1.0
        return e

    off_by_one.additive = True
    counter = iter(range(1000))

    def drifting(learner, examples, ctx):
        e = honest(learner, examples, ctx)
        e.values = e.values + next(counter)
        return e

    with pytest.raises(AssertionError):
        checks.check_additivity_where_claimed("linear-bt", "linear-shapley", off_by_one, world, lr)
    with pytest.raises(AssertionError):
        checks.check_same_seed_same_result("linear-bt", "linear-shapley", drifting, world, lr)
    assert np.isfinite(honest(lr, world.examples([1]), registry.ExplainContext("linear-bt")).values).all()
