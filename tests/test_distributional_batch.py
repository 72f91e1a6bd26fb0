"""The batch form of exact Bernoulli distributional values equals one exact enumeration per game
(Franceschi et al. 2024, Eq. 5 and Eq. 7 with the comonotone coupling): transitions, base and
prediction, and every field of the explanation the worker publishes."""

from __future__ import annotations

import numpy as np
import pytest

from explainers.distributional import (bernoulli_values_of_tables, distributional_value, explain_preference,
                                       explain_preference_tables, table_game, table_value_function)
from explainers import Explanation
from learners.exceptions import InvalidInputError

TOL = 1e-12   # only the order of the floating-point sums differs


def _game_of(column: np.ndarray, n: int):
    return table_game({tuple(i for i in range(n) if code >> i & 1): float(p) for code, p in enumerate(column)},
                      "bernoulli", n_players=n)


@pytest.mark.parametrize("structure", ["shapley", "banzhaf"])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 7])
def test_tables_equal_one_enumeration_per_game(n, structure):
    rng = np.random.default_rng(n)
    P = rng.random((2 ** n, 4))
    P[:, 3] = P[0, 3]                                   # a game in which no player matters
    got = bernoulli_values_of_tables(P, structure)
    for g, val in enumerate(got):
        one = distributional_value(_game_of(P[:, g], n), structure, method="exact")
        np.testing.assert_allclose(val.transition, one.transition, rtol=0, atol=TOL)
        np.testing.assert_allclose(val.base, one.base, rtol=0, atol=TOL)
        np.testing.assert_allclose(val.prediction, one.prediction, rtol=0, atol=TOL)
        assert (val.estimator, val.structure, val.efficient) == (one.estimator, one.structure, one.efficient)
    # a null game: every player stays put with probability 1; Shapley is efficient: base + Σ mean = prediction
    np.testing.assert_allclose(got[3].importance(), 0.0, atol=TOL)
    if structure == "shapley":
        for g, val in enumerate(got):
            assert val.base[1] + val.mean().sum() == pytest.approx(P[-1, g], abs=TOL)


def _flat(e: Explanation) -> dict:
    recs = e.to_records(instance_ids=[str(i) for i in range(e.n_instances)])
    return [{k: r[k] for k in ("values", "base_value", "prediction", "data", "extra")} for r in recs]


def _close(a, b):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _close(a[k], b[k])
    elif isinstance(a, list):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y)
    elif isinstance(a, float) and isinstance(b, float):
        assert a == pytest.approx(b, abs=1e-12)
    else:
        assert a == b


@pytest.mark.parametrize("output", ["margin", "probability"])
def test_explanations_equal_one_call_per_event(output):
    rng = np.random.default_rng(7)
    n, G = 4, 6
    T = rng.normal(size=(2 ** n, G)) if output == "margin" else rng.random((2 ** n, G))
    data = rng.normal(size=(G, n))
    names = ["a", "b", "c", "d"]
    got = explain_preference_tables(T, names, output=output, data=data, instance_ids=[f"e{g}" for g in range(G)])
    want = Explanation.concat([explain_preference(table_value_function(T[:, g]), names, output=output, data=data[g],
                                                  instance_id=f"e{g}") for g in range(G)])
    assert got.n_instances == G and got.instance_ids == [f"e{g}" for g in range(G)]
    _close(_flat(got), _flat(want))
    assert got.method == "distributional-bernoulli"


def test_bad_tables_are_refused():
    with pytest.raises(InvalidInputError, match="2\\*\\*n"):
        bernoulli_values_of_tables(np.zeros((3, 2)))
    with pytest.raises(InvalidInputError, match="\\[0, 1\\]"):
        bernoulli_values_of_tables(np.full((4, 1), 1.5))
    with pytest.raises(InvalidInputError, match="NaN margins"):
        explain_preference_tables(np.full((4, 1), np.nan), ["a", "b"])
