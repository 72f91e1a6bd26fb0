"""The error hierarchy shared by every prefstream package.

::

    PrefstreamError                        base of every error raised on purpose
    ├── InvalidInputError (ValueError)     data of the wrong shape, type or range (NaN, inf, widths)
    │   └── DeadLetter                     stream.contract: an event refused, with a machine-readable reason
    ├── InvalidParameterError (ValueError) a constructor or call argument out of its domain
    ├── NotFittedError (RuntimeError)      a model used before it has learned or been fitted
    ├── SnapshotError (ValueError)         a model state that cannot be (de)serialised
    ├── BudgetError (ValueError)           a computation that would exceed its memory/time budget
    ├── BrokerError (RuntimeError)         stream.broker: the local Kafka broker cannot start or answer
    ├── BrokerUnavailable (ConnectionError) stream.replay: no broker to send to
    └── DemoError (RuntimeError)           stream.demo: a step of the end-to-end demo failed

The first six are defined here, at the bottom of the layers, so that ``learners``,
``explainers`` and ``stream`` raise the same classes; the stream's own subclasses live beside
the code that raises them. One place imports them all: ``from stream import PrefstreamError,
DeadLetter, ...``; ``learners`` and ``explainers`` (and ``explainers.exceptions``) re-export the
first six, so a caller can catch :class:`PrefstreamError` everywhere.

Messages say what was expected, what came, and how to fix it, e.g.
``"The 'gamma' parameter of CapacityRDA must be a float in the range (0, inf). Got -1.0 instead."``

Examples
--------
>>> try:
...     check_param("CapacityRDA", "gamma", -1.0, False, "a float in the range (0, inf)")
... except PrefstreamError as exc:
...     print(type(exc).__name__, "-", exc)
InvalidParameterError - The 'gamma' parameter of CapacityRDA must be a float in the range (0, inf). Got -1.0 instead.
"""

from __future__ import annotations

__all__ = [
    "BudgetError",
    "InvalidInputError",
    "InvalidParameterError",
    "NotFittedError",
    "PrefstreamError",
    "SnapshotError",
    "check_param",
]


class PrefstreamError(Exception):
    """Base class of every error prefstream raises on purpose."""


class InvalidInputError(PrefstreamError, ValueError):
    """Input data of the wrong shape, dtype, range, or containing NaN/inf."""


class InvalidParameterError(PrefstreamError, ValueError):
    """An argument outside its documented domain."""


class NotFittedError(PrefstreamError, RuntimeError):
    """A model was asked to predict or explain before it learned anything."""


class SnapshotError(PrefstreamError, ValueError):
    """A model state that cannot be exported or imported."""


class BudgetError(PrefstreamError, ValueError):
    """A computation that would exceed the configured memory or coalition budget."""


def check_param(owner: str, name: str, value, ok: bool, expected: str) -> None:
    """Raise :class:`InvalidParameterError` with the house message unless ``ok``.

    Parameters
    ----------
    owner : str
        Class or function name, e.g. ``"CapacityRDA"``.
    name : str
        Parameter name.
    value : object
        The value received (shown with ``repr``).
    ok : bool
        Whether the value is valid.
    expected : str
        What was expected, e.g. ``"a float in the range (0, inf)"``.

    Raises
    ------
    InvalidParameterError
        If ``ok`` is false.
    """
    if not ok:
        raise InvalidParameterError(
            f"The {name!r} parameter of {owner} must be {expected}. Got {value!r} instead."
        )
