"""Explanation.to_records converts a batch field by field; its records must equal those of the
batch's instances one at a time (``Explanation.__getitem__``, the definition of instance ``i``),
whatever the shapes of values, base values, predictions, data and ``extra`` entries — and they must
validate against ``explanation.v1.json`` (jsonschema, the reference validator)."""

from __future__ import annotations

import json
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from explainers import Explanation
from stream.contract.schemas import validator


def _one_at_a_time(e: Explanation, ids: list[str]) -> list[dict]:
    return [e[i].to_records(instance_ids=[rid])[0] for i, rid in enumerate(ids)]


def _same(a, b) -> bool:
    """JSON equality (NaN-free by construction: non-finite floats are written as null)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


floats = st.one_of(st.floats(-1e6, 1e6, allow_nan=False), st.sampled_from([math.nan, math.inf, -math.inf]))


@st.composite
def explanations(draw):
    n = draw(st.integers(1, 5))
    d = draw(st.integers(1, 4))
    flat = draw(st.booleans()) and n == 1
    vals = np.array(draw(st.lists(floats, min_size=n * d, max_size=n * d))).reshape((d,) if flat else (n, d))
    base = draw(st.one_of(floats, st.lists(floats, min_size=n, max_size=n)))
    pred = draw(st.one_of(st.none(), floats, st.lists(floats, min_size=n, max_size=n)))
    data = draw(st.one_of(st.none(), st.just(np.arange(float(n * d)).reshape((d,) if flat else (n, d)))))
    extra = {}
    if draw(st.booleans()):
        extra["per_row_floats"] = draw(st.lists(floats, min_size=n, max_size=n))
    if draw(st.booleans()):
        extra["per_row_array"] = np.arange(float(n * 2)).reshape(n, 2)
    if draw(st.booleans()):
        extra["per_row_dicts"] = [{"i": i, "x": [float(i), math.nan]} for i in range(n)]
    if draw(st.booleans()):
        extra["per_row_lists"] = [[float(i), float(-i)] for i in range(n)]
    if draw(st.booleans()):
        extra["user_id"] = [f"u{i}" for i in range(n)] if draw(st.booleans()) else "u0"
    extra["shared"] = {"exact": True, "k": np.int64(3), "w": np.float32(0.5), "names": ["a", "b", "c", "d", "e", "f"]}
    return Explanation(values=vals, base_values=base, prediction=pred, data=data, feature_names=[f"f{j}" for j in range(d)],
                       method="capacity-shapley", model_name="m", model_version=7, compute_time=0.5, extra=extra)


@settings(max_examples=300, deadline=None)
@given(explanations())
def test_batch_records_equal_one_at_a_time(e):
    ids = [f"ev-{i}" for i in range(e.n_instances)]
    got, want = e.to_records(instance_ids=ids), _one_at_a_time(e, ids)
    assert len(got) == len(want) == e.n_instances
    for g, w in zip(got, want):
        assert _same(g, w), (g, w)
        assert not list(validator("explanation").iter_errors(g))
        assert g["compute_time_s"] == w["compute_time_s"]  # the same division, set by hand


def test_records_are_independent_dicts():
    """A record's ``extra`` may be amended per record (the worker adds ``origin``) without touching the others."""
    e = Explanation(values=[[1.0], [2.0]], base_values=0.0, feature_names=["x"], method="capacity-shapley",
                    extra={"k": {"a": 1}})
    r = e.to_records(instance_ids=["a", "b"])
    r[0]["extra"]["origin"] = "sample"
    assert "origin" not in r[1]["extra"] and r[1]["extra"]["k"] == {"a": 1}
