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

    Examples
    --------
    >>> dict_to_array({"b": 2, "a": 1.5}, ["a", "b"])
    array([1.5, 2. ])
    >>> dict_to_array({"a": float("inf")}, ["a"], owner="LinearBT")
    Traceback (most recent call last):
    ...
    learners.exceptions.InvalidInputError: LinearBT: feature 'a' must be finite; got inf.
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
    """Validate an outcome: +1 (left preferred), −1 (right preferred) or 0 (indifferent).

    Examples
    --------
    >>> check_outcome(-1)
    -1
    >>> check_outcome(True)
    Traceback (most recent call last):
    ...
    learners.exceptions.InvalidInputError: learner: outcome must be +1, -1 or 0; got True.
    """
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

    # ---- batch contract (micro-batched stream path) -------------------------------------------
    #: context feature names in array column order (``None`` for context-free models).
    context_names: Sequence[str] | None = None

    def _rows_as_dicts(self, X_left, X_right, context=None):
        XL = np.asarray(X_left, dtype=np.float64)
        XR = np.asarray(X_right, dtype=np.float64)
        names = self.feature_names
        if XL.ndim != 2 or XL.shape != XR.shape or XL.shape[1] != len(names):
            raise InvalidInputError(
                f"{self.model_name}: X_left and X_right must both have shape (n, {len(names)}) with columns "
                f"{list(names)}; got {XL.shape} and {XR.shape}."
            )
        C = None if context is None else np.asarray(context, dtype=np.float64)
        cnames = list(self.context_names or [])
        if C is not None and (C.ndim != 2 or C.shape != (XL.shape[0], len(cnames))):
            raise InvalidInputError(
                f"{self.model_name}: context must have shape ({XL.shape[0]}, {len(cnames)}) with columns {cnames}; got {C.shape}."
            )
        for i in range(XL.shape[0]):
            yield (dict(zip(names, XL[i].tolist())), dict(zip(names, XR[i].tolist())),
                   None if C is None else dict(zip(cnames, C[i].tolist())))

    def margin_many(self, X_left, X_right, context=None) -> np.ndarray:
        """Margins g(x_left, x_right) for a batch.

        Parameters
        ----------
        X_left, X_right : ndarray of shape (n, n_features)
            Item features, columns in :attr:`feature_names` order.
        context : ndarray of shape (n, n_context), optional
            Context features in :attr:`context_names` order (context models only).

        Returns
        -------
        ndarray of shape (n,)
            Equal to ``[margin_one(row) for row in batch]``; subclasses override with array code.
        """
        return np.array([self.margin_one(a, b, c) for a, b, c in self._rows_as_dicts(X_left, X_right, context)],
                        dtype=np.float64)

    def predict_proba_many(self, X_left, X_right, context=None) -> np.ndarray:
        """P(left preferred) for a batch: ndarray of shape (n,), row i equal to
        ``predict_proba_one(row i)[+1]``. Shapes as in :meth:`margin_many`."""
        g = self.margin_many(X_left, X_right, context)
        return 0.5 * (1.0 + np.tanh(0.5 * g))

    def learn_many(self, X_left, X_right, y, context=None, weight=None) -> None:
        """Learn a batch in row order.

        Parameters
        ----------
        X_left, X_right : ndarray of shape (n, n_features)
        y : ndarray of shape (n,)
            Outcomes in {+1, −1, 0}.
        context : ndarray of shape (n, n_context), optional
        weight : ndarray of shape (n,), optional
            Example weights (default 1).

        The default loops over :meth:`learn_one`; learners override it with array code and say
        in their docstring whether the result equals that loop exactly or is a documented
        mini-batch variant.
        """
        Y = np.asarray(y)
        W = np.ones(len(Y)) if weight is None else np.asarray(weight, dtype=np.float64)
        for i, (a, b, c) in enumerate(self._rows_as_dicts(X_left, X_right, context)):
            self.learn_one(a, b, int(Y[i]), c, float(W[i]))

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
