"""Contract checks of a registered explainer ``(model, method)`` (see the package docstring)."""

from __future__ import annotations

import copy
import json

import numpy as np

from tests.checks.world import World

#: Pairs explained per call (a few, so that batching is exercised).
EXPLAINED = range(100, 104)


def _job(fn, world: World, trained, model: str, seed: int = 0):
    """(examples, context) as the explainer worker would pass them."""
    from stream import registry

    session = getattr(fn, "session_only", False)
    examples = world.examples([EXPLAINED[0]] if session else EXPLAINED)
    ctx = registry.ExplainContext(model_name=model, model_version=5, background=world.examples(range(60)),
                                  rng=np.random.default_rng(seed),
                                  params={"session": world.session()} if session else {})
    return examples, ctx


def _explain(fn, world, trained, model):
    examples, ctx = _job(fn, world, trained, model)
    e = fn(trained, examples, ctx)
    e.model_name, e.model_version = model, ctx.model_version
    return e, examples


def check_records_validate_against_the_schema(model, method, fn, world, trained) -> None:
    from stream.contract import explanation_record_ok, validator

    e, examples = _explain(fn, world, trained, model)
    assert e.method == method
    assert e.n_instances == len(examples)
    records = e.to_records(instance_ids=[ex.event_id for ex in examples])
    assert len(records) == len(examples)
    for r in records:
        r = json.loads(json.dumps(r))  # as published
        explanation_record_ok(r)
        validator("explanation").validate(r)  # the JSON Schema itself, explanation.v1.json
        assert r["model_name"] == model and r["model_version"] == 5 and r["method"] == method


def check_additivity_where_claimed(model, method, fn, world, trained) -> None:
    if not getattr(fn, "additive", False):
        return
    e, _ = _explain(fn, world, trained, model)
    assert e.prediction is not None, f"{method} claims additivity but gives no prediction"
    scale = max(1.0, float(np.abs(np.asarray(e.prediction)).max()))
    assert float(e.additivity_error().max()) <= 1e-9 * scale


def check_same_seed_same_result(model, method, fn, world, trained) -> None:
    a, _ = _explain(fn, world, trained, model)
    b, _ = _explain(fn, world, trained, model)
    np.testing.assert_array_equal(a.values, b.values)
    np.testing.assert_array_equal(np.asarray(a.base_values), np.asarray(b.base_values))


def check_inputs_and_learner_not_mutated(model, method, fn, world, trained) -> None:
    examples, ctx = _job(fn, world, trained, model)
    seen = copy.deepcopy([(ex.left, ex.right, ex.context) for ex in examples])
    background = copy.deepcopy([(ex.left, ex.right) for ex in ctx.background])
    params = copy.deepcopy(ctx.params)
    state = copy.deepcopy(trained.state_dict())
    fn(trained, examples, ctx)
    assert [(ex.left, ex.right, ex.context) for ex in examples] == seen
    assert [(ex.left, ex.right) for ex in ctx.background] == background
    assert ctx.params == params
    after = trained.state_dict()
    assert after["meta"] == state["meta"]
    for k, v in state["arrays"].items():
        np.testing.assert_array_equal(after["arrays"][k], v)


EXPLAINER_CHECKS = [
    check_records_validate_against_the_schema,
    check_additivity_where_claimed,
    check_same_seed_same_result,
    check_inputs_and_learner_not_mutated,
]
