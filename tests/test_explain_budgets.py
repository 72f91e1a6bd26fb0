"""The stream's explainers on wide data: one-hot groups as players, budgets in every record (issue 15)."""

from __future__ import annotations

import numpy as np
import pytest

from stream import registry
from stream.contract import PreferenceExample
from stream.settings import Settings

NAMES = ["a", "b", "c", "t_0", "t_1", "t_2", "t_3"]


def _example(k, rng):
    def item():
        x = dict(zip(NAMES[:3], rng.random(3).tolist()))
        x.update({f"t_{j}": float(j == rng.integers(4)) for j in range(4)})
        return x

    return PreferenceExample(event_id=f"e{k}", timestamp=0.0, left=item(), right=item(), outcome=1)


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    exs = [_example(k, rng) for k in range(300)]
    st = Settings.load(overrides={"feature_names": NAMES})
    lr = registry.get_model("capacity").factory(st, {"scaler": "minmax", "k_additive": 2})
    for e in exs:
        lr.learn_one(e.left, e.right, 1 if sum(e.left[n] for n in NAMES[:3]) > sum(e.right[n] for n in NAMES[:3]) else -1)
    return lr, exs


@pytest.mark.parametrize("method", ["sharp-rank", "sharp-pairwise", "distributional-bernoulli"])
def test_wide_events_are_explained_per_player_within_the_budgets(fitted, method):
    lr, exs = fitted
    budgets = {"exact_players": 4, "max_coalitions": 64, "reference_size": 40}
    ctx = registry.ExplainContext(model_name="capacity", background=exs[:100], budgets=budgets)
    e = registry.explainers_for("capacity")[method](lr, exs[200:203], ctx)
    assert e.feature_names == ["a", "b", "c", "t"]            # the one-hot group is one player
    used = dict(budgets, target_se=0.005)                      # the default target standard error is recorded too
    assert e.extra["budgets"] == used
    assert e.additivity_error().max() < 1e-9
    recs = e.to_records(instance_ids=["x", "y", "z"])
    assert all(r["extra"]["budgets"] == used for r in recs)
    if method.startswith("sharp"):
        assert e.extra["feature_groups"] == {"t": NAMES[3:]}
        assert e.extra["estimator"] == "exact"                  # 2^4 coalitions fit the budget


def test_above_the_exact_player_limit_sharp_samples_orders_with_standard_errors(fitted):
    lr, exs = fitted
    budgets = {"exact_players": 2, "max_coalitions": 12, "reference_size": 40}
    ctx = registry.ExplainContext(model_name="capacity", background=exs[:100], budgets=budgets)
    e = registry.explainers_for("capacity")["sharp-rank"](lr, exs[200:202], ctx)
    assert e.extra["estimator"] == "kernel-shap-paired" and e.extra["n_coalitions"] == 12
    assert np.asarray(e.extra["stderr"]).shape == (2, 4)
    assert e.additivity_error().max() < 1e-9
