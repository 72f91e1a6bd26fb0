"""Explanations of preference models: Pref-SHAP, ShaRP, distributional values, capacity indices.

Every explainer returns one result object, :class:`Explanation` (values, base values,
prediction, feature names, method, model version), which serialises to the explanation record
of the stream (``Explanation.to_records``). This package imports no Kafka client, and names are
imported on first use, so ``import explainers`` loads neither torch nor matplotlib (plots live in
``explainers.plots``, ``explainers.sharp_plots``, ``explainers.distributional_plots`` and
``explainers.capacity_plots``).

Examples
--------
>>> import numpy as np
>>> from explainers import Explanation, explain_linear
>>> e = explain_linear(np.array([2.0, -1.0]), np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]]), feature_names=["a", "b"])
>>> isinstance(e, Explanation), e.values.tolist()
(True, [[2.0, 1.0]])
>>> float(e.additivity_error()[0])
0.0
"""

from learners._exports import lazy_exports as _lazy_exports
from learners.exceptions import (
    BudgetError,
    InvalidInputError,
    InvalidParameterError,
    NotFittedError,
    PrefstreamError,
    SnapshotError,
)

__all__ = [
    "BudgetError",
    "Explanation",
    "InvalidInputError",
    "InvalidParameterError",
    "NotFittedError",
    "PrefSHAP",
    "PrefstreamError",
    "SharpExplainer",
    "SnapshotError",
    "capacity_interaction",
    "capacity_shapley",
    "explain_choice",
    "explain_linear",
    "explain_preference",
]

_WHERE = {
    "Explanation": "explainers._result",
    "PrefSHAP": "explainers.prefshap",
    "SharpExplainer": "explainers.sharp",
    "capacity_interaction": "explainers.capacity", "capacity_shapley": "explainers.capacity",
    "explain_choice": "explainers.distributional", "explain_preference": "explainers.distributional",
    "explain_linear": "explainers.linear",
}

__getattr__, __dir__ = _lazy_exports(__name__, _WHERE, __all__)
