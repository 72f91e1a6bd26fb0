"""The error hierarchy shared by every prefstream package.

::

    PrefstreamError                      base of every error raised on purpose
    ├── InvalidInputError (ValueError)   data of the wrong shape, type or range (NaN, inf, widths)
    ├── InvalidParameterError (ValueError) a constructor or call argument out of its domain
    ├── NotFittedError (RuntimeError)    a model used before it has learned or been fitted
    ├── SnapshotError (ValueError)       a model state that cannot be (de)serialised
    └── BudgetError (ValueError)         a computation that would exceed its memory/time budget

Messages say what was expected, what came, and how to fix it, e.g.
``"The 'gamma' parameter of CapacityRDA must be a float in the range (0, inf). Got -1.0 instead."``

``learners``, ``explainers`` and ``stream`` all raise these classes; ``explainers.exceptions`` and
``stream`` re-export them, so a caller can catch :class:`PrefstreamError` everywhere.
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
