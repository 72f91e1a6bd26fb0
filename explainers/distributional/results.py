"""Distributional values as :class:`~explainers._result.Explanation` records, and the worker entry points.

Franceschi, Donini, Archambeau & Seeger (2024), *Explaining probabilistic models with distributional
values*: ``values`` is the mean of the distributional value (Prop. 3.9(i)), ``extra`` the per-player
distributions.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

import numpy as np

from explainers._result import Explanation
from explainers.distributional.estimators import bernoulli_values_of_tables, distributional_value
from explainers.distributional.games import StochasticGame
from explainers.distributional.model_games import (PREFERENCE_CLASSES, bernoulli_preference_game,
                                                   categorical_choice_game, gaussian_utility_game,
                                                   preference_probabilities)
from explainers.distributional.values import DiscreteDistributionalValue, GaussianDistributionalValue
from learners.exceptions import InvalidInputError, check_param

__all__ = ["explain_choice", "explain_game", "explain_gaussian_utility", "explain_preference", "explain_preference_tables",
           "to_explanation"]


# ============================================================================ results
_METHOD = {"bernoulli": "distributional-bernoulli", "categorical": "distributional-categorical",
           "gaussian": "distributional-gaussian"}


def to_explanation(value, *, target=None, model_name: str = "", model_version: int = 0, data=None,
                   instance_id: str | None = None, compute_time: float = 0.0, include_transitions: bool = True,
                   include_components: bool = False) -> Explanation:
    """Wrap a distributional value in the common :class:`~explainers._result.Explanation`.

    ``values`` is the mean of the distributional value — the standard value of the expectation
    game (Prop. 3.9(i)) — so ``base + Σ values = prediction`` holds whenever the coalition
    structure is efficient (Shapley, random-order values; Prop. 3.9(iv) and Definition 3.8), not
    for Banzhaf or other non-efficient semivalues. Per-player distributions go to ``extra``
    (plain lists, JSON-serialisable).

    * Bernoulli: ``values[i] = q_i⁺ − q_i⁻``; base/prediction = success probability of ``∅`` / ``[n]``.
    * Categorical: ``values[i]`` is the mean for the ``target`` class (default: the class most
      probable for the grand coalition, e.g. pass the clicked item); ``extra["mean"]`` has all
      classes, ``extra["transition"][i][s][r]`` the from-``s``-to-``r`` table.
    * Gaussian: ``values[i]`` = mean of the mixture; base/prediction = ``μ_∅`` / ``μ_[n]``.

    Parameters
    ----------
    value : DiscreteDistributionalValue or GaussianDistributionalValue
    target : int or str, optional
        Class whose mean is put in ``values`` (categorical only).
    model_name, model_version, data, instance_id, compute_time :
        Passed to :class:`Explanation`.
    include_transitions : bool
        Put the full (n, k, k) tables in ``extra`` (categorical).
    include_components : bool
        Put the Gaussian mixture components in ``extra``.

    Returns
    -------
    Explanation
    """
    ids = None if instance_id is None else [str(instance_id)]
    if isinstance(value, GaussianDistributionalValue):
        extra = value.to_dict(include_components=include_components)
        return Explanation(values=value.mean(), base_values=float(value.base[0]), prediction=float(value.prediction[0]),
                           feature_names=value.feature_names, method=_METHOD["gaussian"], model_name=model_name,
                           model_version=model_version, data=data, instance_ids=ids, compute_time=compute_time,
                           extra=extra)
    if not isinstance(value, DiscreteDistributionalValue):
        raise InvalidInputError(f"to_explanation expects a distributional value; got {type(value).__name__}.")
    extra = value.to_dict()
    if value.family == "bernoulli":
        pmf = value.pmf()
        extra.update({"support": [-1, 0, 1], "pmf": pmf.tolist(), "q_minus": pmf[:, 0].tolist(),
                      "q_plus": pmf[:, 2].tolist()})
        if not include_transitions:
            extra.pop("transition")
        return Explanation(values=value.mean(), base_values=float(value.base[1]), prediction=float(value.prediction[1]),
                           feature_names=value.feature_names, method=_METHOD["bernoulli"], model_name=model_name,
                           model_version=model_version, data=data, instance_ids=ids, compute_time=compute_time,
                           extra=extra)
    c = int(np.argmax(value.prediction)) if target is None else value._class(target)
    extra.update({"target": c, "target_class": value.classes[c],
                  "leave_probability": value.leave_probability().tolist()})
    if not include_transitions:
        extra.pop("transition")
        extra.pop("transition_stderr", None)
    return Explanation(values=value.mean_vector()[:, c], base_values=float(value.base[c]),
                       prediction=float(value.prediction[c]), feature_names=value.feature_names,
                       method=_METHOD["categorical"], model_name=model_name, model_version=model_version, data=data,
                       instance_ids=ids, compute_time=compute_time, extra=extra)


def explain_game(game: StochasticGame, structure="shapley", *, method: str = "auto", n_samples: int = 2000,
                 random_state=None, max_coalitions: int = 2048, target_se: float | None = None, target=None,
                 model_name: str = "", model_version: int = 0, data=None,
                 instance_id: str | None = None, include_transitions: bool = True) -> Explanation:
    """:func:`distributional_value` + :func:`to_explanation`, timed (``compute_time``)."""
    t0 = time.perf_counter()
    val = distributional_value(game, structure, method=method, n_samples=n_samples, random_state=random_state,
                               max_coalitions=max_coalitions, target_se=target_se)
    return to_explanation(val, target=target, model_name=model_name, model_version=model_version, data=data,
                          instance_id=instance_id, compute_time=time.perf_counter() - t0,
                          include_transitions=include_transitions)


def explain_preference(nu: Callable[[np.ndarray], np.ndarray], feature_names: Sequence[str], *,
                       output: str = "margin", structure="shapley", method: str = "auto", n_samples: int = 2000,
                       random_state=None, max_coalitions: int = 2048, target_se: float | None = None,
                       model_name: str = "", model_version: int = 0,
                       data=None, instance_id: str | None = None) -> Explanation:
    """Bernoulli distributional explanation of one preference event (worker entry point).

    Parameters
    ----------
    nu : callable
        Coalition value function ``nu(coalitions (K, d) bool) -> (K,)`` — a Pref-SHAP value
        function, or :func:`pairwise_margin_value_function` / :func:`learner_margin_value_function`.
    feature_names : sequence of str, length d
    output : {"margin", "probability"}
        What ``nu`` returns (margins are squashed with σ).
    structure, method, n_samples, random_state, max_coalitions, target_se :
        See :func:`distributional_value`.
    model_name, model_version, data, instance_id :
        Stored in the :class:`Explanation`.

    Returns
    -------
    Explanation
        ``method="distributional-bernoulli"``; ``values`` = Shapley values of ``P(left preferred)``,
        ``extra["q_plus"]``/``["q_minus"]`` = probability that the feature flips the outcome towards
        left/right preferred, ``extra["importance"]`` = ι (Eq. 6).

    Examples
    --------
    >>> from explainers.distributional import pairwise_margin_value_function
    >>> w = np.array([2.0, 0.0])
    >>> nu = pairwise_margin_value_function(lambda L, R: (L - R) @ w, [1.0, 3.0], [0.0, 3.0])
    >>> e = explain_preference(nu, ["price", "stars"])
    >>> [round(float(v), 4) for v in e.values], round(float(e.additivity_error()[0]), 12)
    ([0.3808, 0.0], 0.0)
    """
    game = bernoulli_preference_game(nu, len(feature_names), output=output, feature_names=feature_names)
    return explain_game(game, structure, method=method, n_samples=n_samples, random_state=random_state,
                        max_coalitions=max_coalitions, target_se=target_se, model_name=model_name,
                        model_version=model_version, data=data, instance_id=instance_id)


def explain_preference_tables(tables, feature_names: Sequence[str], *, output: str = "margin", structure="shapley",
                              data=None, instance_ids: Sequence[str] | None = None, model_name: str = "",
                              model_version: int = 0) -> Explanation:
    """Exact Bernoulli distributional explanations of many preference events from their coalition tables.

    The batch form of :func:`explain_preference` under exact enumeration when every event's value
    function is already a table (a capacity's hybrids, a GPM's product games): one
    :func:`~explainers.distributional.estimators.bernoulli_values_of_tables` for all events instead of
    one enumeration each. Equal to ``Explanation.concat`` of one :func:`explain_preference` per event with
    ``table_value_function(tables[:, g])`` up to the order of floating-point sums.

    Parameters
    ----------
    tables : array_like of shape (2**n, G)
        ``ν_S`` of event ``g`` in column ``g``, coalition codes as in
        :func:`~explainers.distributional.all_coalitions`.
    feature_names : sequence of str, length n
    output : {"margin", "probability"}
        As in :func:`explain_preference`.
    structure : str or CoalitionStructure
    data : array_like of shape (G, n), optional
    instance_ids : sequence of str, optional

    Returns
    -------
    Explanation
        ``G`` instances, ``method="distributional-bernoulli"``, ``compute_time`` the batch's.

    Examples
    --------
    >>> from explainers.distributional import pairwise_margin_value_function, table_value_function
    >>> T = np.array([[0.0, 1.0], [2.0, 1.0], [0.5, -1.0], [2.5, -1.0]])       # two events, two players
    >>> e = explain_preference_tables(T, ["price", "stars"])
    >>> one = explain_preference(table_value_function(T[:, 1]), ["price", "stars"])
    >>> bool(np.allclose(e.values[1], one.values, atol=1e-15)), e.n_instances
    (True, 2)
    """
    t0 = time.perf_counter()
    check_param("explain_preference_tables", "output", output, output in ("margin", "probability"),
                "'margin' or 'probability'")
    v = preference_probabilities(np.asarray(tables, dtype=np.float64), output)
    vals = bernoulli_values_of_tables(v, structure, feature_names=feature_names, classes=PREFERENCE_CLASSES)
    dt = (time.perf_counter() - t0) / max(len(vals), 1)
    rows = None if data is None else np.asarray(data, dtype=np.float64)
    ids = [None] * len(vals) if instance_ids is None else list(instance_ids)
    return Explanation.concat([to_explanation(val, model_name=model_name, model_version=model_version,
                                              data=None if rows is None else rows[g], instance_id=ids[g],
                                              compute_time=dt) for g, val in enumerate(vals)])


def explain_choice(utilities: Callable[[np.ndarray], np.ndarray], items, reference=None, *,
                   feature_names: Sequence[str] | None = None, item_names: Sequence[str] | None = None,
                   target=None, temperature: float = 1.0, batched: bool = False, structure="shapley",
                   method: str = "auto", n_samples: int = 2000, random_state=None, model_name: str = "",
                   model_version: int = 0, instance_id: str | None = None,
                   include_transitions: bool = True) -> Explanation:
    """Categorical distributional explanation of a choice among ``k`` shown items (worker entry point).

    See :func:`categorical_choice_game` for ``utilities``, ``items``, ``reference``; ``target`` is the
    item whose mean goes into ``values`` (default the most probable item, pass the clicked one).

    Returns
    -------
    Explanation
        ``method="distributional-categorical"``; ``extra["transition"][i][s][r]`` = probability
        that feature ``i`` moves the choice from item ``s`` to item ``r``.
    """
    game = categorical_choice_game(utilities, items, reference, feature_names=feature_names, item_names=item_names,
                                   temperature=temperature, batched=batched)
    return explain_game(game, structure, method=method, n_samples=n_samples, random_state=random_state,
                        target=target, model_name=model_name, model_version=model_version, instance_id=instance_id,
                        include_transitions=include_transitions)


def explain_gaussian_utility(predict: Callable[[np.ndarray], tuple], x, reference, *,
                             feature_names: Sequence[str] | None = None, structure="shapley", method: str = "auto",
                             n_samples: int = 2000, random_state=None, model_name: str = "", model_version: int = 0,
                             instance_id: str | None = None) -> Explanation:
    """Gaussian distributional explanation of a utility with predictive variance.

    See :func:`gaussian_utility_game`. ``extra["sigma_tracker"]`` gives per feature the probability
    of decreasing / keeping / increasing the predictive standard deviation.
    """
    game = gaussian_utility_game(predict, x, reference, feature_names=feature_names)
    return explain_game(game, structure, method=method, n_samples=n_samples, random_state=random_state,
                        model_name=model_name, model_version=model_version, data=np.asarray(x, dtype=np.float64),
                        instance_id=instance_id)
