"""The contract every prefstream preference learner follows (river-style single-sample API).

A *preference example* is a pair of items, each a ``dict`` ``{feature_name: float}``, an
optional context ``dict``, and an outcome ``y`` in {+1 (left preferred), −1 (right preferred),
0 (indifferent)}. Batch methods take ndarrays of shape (n_pairs, n_features) whose column order
is ``feature_names``.

State travels as a *state dict*: ``{"meta": <JSON-able dict>, "arrays": {name: ndarray}}``,
encoded to bytes by :func:`learners.state.dump_state` (``.npz`` without pickle) — never pickle.
"""

from __future__ import annotations

import abc
import math
from typing import Mapping, Sequence

import numpy as np

from learners.exceptions import InvalidInputError

__all__ = ["PreferenceLearner", "dict_to_array", "check_outcome"]


def dict_to_array(x: Mapping[str, float], feature_names: Sequence[str], owner: str = "learner") -> np.ndarray:
    """Features of one item as a float64 vector in ``feature_names`` order.

    Raises
    ------
    InvalidInputError
        If a feature is missing, not a number, NaN or infinite.
    """
    out = np.empty(len(feature_names), dtype=np.float64)
    for j, name in enumerate(feature_names):
        try:
            v = x[name]
        except KeyError:
            raise InvalidInputError(
                f"{owner} expects feature {name!r}; the item has {sorted(x)}. "
                "Declare the same feature names in the event and in the model configuration."
            ) from None
        try:
            v = float(v)
        except (TypeError, ValueError):
            raise InvalidInputError(f"{owner}: feature {name!r} must be a number; got {v!r}.") from None
        if not math.isfinite(v):
            raise InvalidInputError(f"{owner}: feature {name!r} must be finite; got {v!r}.")
        out[j] = v
    return out


def check_outcome(y, owner: str = "learner") -> int:
    """Validate an outcome: +1 (left preferred), −1 (right preferred) or 0 (indifferent)."""
    if y not in (1, -1, 0) or isinstance(y, bool):
        raise InvalidInputError(f"{owner}: outcome must be +1, -1 or 0; got {y!r}.")
    return int(y)


class PreferenceLearner(abc.ABC):
    """Abstract base of online preference learners.

    Subclasses store constructor arguments under their own names (so ``clone`` and ``repr``
    come for free) and keep learned state private behind read-only properties.
    """

    #: model family name used in snapshots, e.g. ``"capacity"``, ``"linear-bt"``, ``"gpm"``.
    model_name: str = "learner"

    @property
    @abc.abstractmethod
    def feature_names(self) -> list[str]:
        """Item feature names, in array column order."""

    @abc.abstractmethod
    def learn_one(self, x_left: Mapping[str, float], x_right: Mapping[str, float], y: int,
                  context: Mapping[str, float] | None = None, weight: float = 1.0) -> None:
        """Update the model with one preference example."""

    @abc.abstractmethod
    def margin_one(self, x_left: Mapping[str, float], x_right: Mapping[str, float],
                   context: Mapping[str, float] | None = None) -> float:
        """Preference margin g(x_left, x_right) ∈ ℝ; positive means left preferred."""

    def predict_proba_one(self, x_left, x_right, context=None) -> dict[int, float]:
        """``{+1: P(left preferred), -1: P(right preferred)}`` = σ(g), 1 − σ(g)."""
        g = self.margin_one(x_left, x_right, context)
        p = 0.5 * (1.0 + math.tanh(0.5 * g))  # σ(g), overflow-free
        return {1: p, -1: 1.0 - p}

    def predict_one(self, x_left, x_right, context=None) -> int:
        """+1 if left preferred, −1 if right preferred, 0 on an exact tie."""
        g = self.margin_one(x_left, x_right, context)
        return 1 if g > 0 else (-1 if g < 0 else 0)

    @abc.abstractmethod
    def state_dict(self) -> dict:
        """``{"meta": JSON-able dict, "arrays": {name: ndarray}}`` — everything needed to predict."""

    @classmethod
    @abc.abstractmethod
    def from_state(cls, state: dict) -> "PreferenceLearner":
        """Rebuild a learner from :meth:`state_dict` output."""

    def clone(self) -> "PreferenceLearner":
        """A fresh, unfitted learner with the same parameters."""
        import inspect

        params = {k: getattr(self, k) for k in inspect.signature(type(self).__init__).parameters if k != "self" and hasattr(self, k)}
        return type(self)(**params)

    def __repr__(self) -> str:
        import inspect

        ps = [k for k in inspect.signature(type(self).__init__).parameters if k != "self" and hasattr(self, k)]
        return f"{type(self).__name__}(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in ps) + ")"
