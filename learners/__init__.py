"""Online preference learners: capacity models, GPMs, a linear Bradley–Terry model.

Every learner follows the contract of :class:`PreferenceLearner` (river-style ``learn_one`` /
``predict_proba_one`` plus the batch methods ``margin_many`` / ``predict_proba_many`` /
``learn_many``) and snapshots to a pickle-free state (:func:`dump_state` / :func:`load_state`).
This package imports no Kafka client. Names are imported on first use, so ``import learners``
loads neither torch nor the capacity solvers.

Examples
--------
>>> import learners
>>> model = learners.LinearBT(["price", "quality"], learning_rate=0.5)
>>> for _ in range(20):
...     model.learn_one({"price": 0.2, "quality": 0.9}, {"price": 0.8, "quality": 0.1}, 1)
>>> model.predict_proba_one({"price": 0.2, "quality": 0.9}, {"price": 0.8, "quality": 0.1})[1] > 0.9
True
>>> issubclass(learners.InvalidInputError, learners.PrefstreamError)
True
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
    "CGPM",
    "CapacityFOBOS",
    "CapacityLogistic",
    "CapacityRDA",
    "Falkon",
    "GPM",
    "InvalidInputError",
    "InvalidParameterError",
    "LinearBT",
    "NotFittedError",
    "PreferenceLearner",
    "PrefstreamError",
    "RefittingCGPM",
    "RefittingGPM",
    "SnapshotError",
    "UPM",
    "dict_to_array",
    "dump_state",
    "load_state",
]

_WHERE = {
    "PreferenceLearner": "learners.base", "dict_to_array": "learners.base",
    "LinearBT": "learners.linear",
    "CapacityRDA": "learners.capacity", "CapacityFOBOS": "learners.capacity",
    "CapacityLogistic": "learners.capacity_stream",
    "GPM": "learners.gpm", "CGPM": "learners.gpm", "UPM": "learners.gpm",
    "RefittingGPM": "learners.refit", "RefittingCGPM": "learners.refit",
    "Falkon": "learners.falkon",
    "dump_state": "learners.state", "load_state": "learners.state",
}

__getattr__, __dir__ = _lazy_exports(__name__, _WHERE, __all__)
