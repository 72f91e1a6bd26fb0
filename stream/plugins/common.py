"""What the explainer adapters of every built-in share: building a learner, tiling a model-level
explanation, reading the click session of a job, refusing an untrained model.

Examples
--------
>>> import numpy as np
>>> from explainers import Explanation
>>> e = Explanation(values=np.array([0.5, -0.25]), base_values=0.0, feature_names=["a", "b"], method="m")
>>> tile(e, 3).values.shape
(3, 2)
"""

from __future__ import annotations

import inspect

import numpy as np

from explainers._result import Explanation
from learners.exceptions import InvalidInputError, InvalidParameterError, NotFittedError

__all__ = ["construct", "require_trained", "session_of", "tile"]


def construct(model: str, cls, *args, **kwargs):
    """``cls(*args, **kwargs)`` with an unknown keyword turned into a clear InvalidParameterError.

    Examples
    --------
    >>> from learners.linear import LinearBT
    >>> construct("linear-bt", LinearBT, speed=3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    learners.exceptions.InvalidParameterError: Model 'linear-bt' got an unknown parameter (LinearBT.__init__() got an unexpected keyword argument 'speed'). Its parameters are [...]; set them with ...linear-bt... in the config file.
    """
    try:
        return cls(*args, **kwargs)
    except TypeError as exc:
        known = [k for k in inspect.signature(cls.__init__).parameters if k not in ("self", "args", "kwargs")]
        raise InvalidParameterError(
            f"Model {model!r} got an unknown parameter ({exc}). Its parameters are {known}; set them with "
            f"--param {model}.<name>=<value> or model_params.{model} in the config file.") from None


def require_trained(learner, model: str) -> None:
    """Raise :class:`NotFittedError` if ``learner`` has learned no example (``n_seen == 0``).

    Examples
    --------
    >>> from learners.capacity import CapacityRDA
    >>> require_trained(CapacityRDA(["a", "b"]), "capacity")
    Traceback (most recent call last):
    ...
    learners.exceptions.NotFittedError: The capacity model has not learned any example yet; nothing to explain.
    """
    if not getattr(learner, "n_seen", 1):
        raise NotFittedError(f"The {model} model has not learned any example yet; nothing to explain.")


def tile(e: Explanation, n: int) -> Explanation:
    """A model-level explanation repeated for ``n`` explained events (one record each)."""
    if n == 1:
        return e
    return Explanation(values=np.tile(np.asarray(e.values).reshape(1, -1), (n, 1)), base_values=np.repeat(e.base_values, n),
                       feature_names=e.feature_names, method=e.method,
                       prediction=None if e.prediction is None else np.repeat(e.prediction, n), model_name=e.model_name,
                       model_version=e.model_version, compute_time=e.compute_time, extra=e.extra)


def session_of(ctx) -> dict:
    """The click session an explainer of click sessions explains (``ctx.params["session"]``).

    Raises
    ------
    InvalidInputError
        If the job carries no session.

    Examples
    --------
    >>> from stream.registry import ExplainContext
    >>> session_of(ExplainContext("m", params={"session": {"session_id": "s1"}}))
    {'session_id': 's1'}
    """
    s = ctx.params.get("session") if ctx.params else None
    if not s:
        raise InvalidInputError("This explainer explains click sessions; the job carries none.")
    return s
