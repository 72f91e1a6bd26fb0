"""Every registered model passes every model check of :mod:`tests.checks.models`."""

from __future__ import annotations

import pytest

import stream
from stream import registry
from tests.checks.models import MODEL_CHECKS
from tests.checks.world import World, fresh, train

stream.load_builtins()
MODELS = registry.models()


@pytest.fixture(scope="module")
def world() -> World:
    return World()


@pytest.fixture(scope="module")
def trained_models(world):
    return {}


@pytest.fixture
def trained(request, world, trained_models):
    name = request.node.callspec.params["name"]
    if name not in trained_models:
        trained_models[name] = train(fresh(name), world)
    return trained_models[name]


def test_the_builtins_are_checked():
    assert {"capacity", "cgpm", "gpm", "linear-bt"} <= set(MODELS)


@pytest.mark.parametrize("check", MODEL_CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
@pytest.mark.parametrize("name", MODELS)
def test_model_contract(name, check, world, trained):
    check(name, world, trained)


def test_the_checks_catch_a_broken_learner(world):
    """The suite can fail: a learner with a biased margin or one that edits its inputs is caught."""
    from learners.linear import LinearBT
    from tests.checks import models as checks

    class Biased(LinearBT):
        def margin_one(self, x_left, x_right, context=None):
            return super().margin_one(x_left, x_right, context) + 0.25

        def margin_many(self, X_left, X_right, context=None):
            return super().margin_many(X_left, X_right, context) + 0.25

    class Meddling(LinearBT):
        def learn_one(self, x_left, x_right, y, context=None, weight=1.0):
            x_left["a"] = 0.0
            super().learn_one(x_left, x_right, y, context, weight)

    for cls, check in ((Biased, checks.check_margin_is_skew_symmetric),
                       (Biased, checks.check_probabilities_are_complementary),
                       (Meddling, checks.check_learning_does_not_mutate_inputs)):
        name = f"broken-{cls.__name__.lower()}"
        registry.register_model(name, lambda s, p, cls=cls: cls(list(s.feature_names)), cls.from_state, replace=True)
        with pytest.raises(AssertionError):
            check(name, world, train(fresh(name), world))
