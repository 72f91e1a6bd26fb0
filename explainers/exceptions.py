"""Re-export of the shared error hierarchy (see :mod:`learners.exceptions`)."""

from learners.exceptions import (  # noqa: F401
    BudgetError,
    InvalidInputError,
    InvalidParameterError,
    NotFittedError,
    PrefstreamError,
    SnapshotError,
    check_param,
)

__all__ = [
    "BudgetError",
    "InvalidInputError",
    "InvalidParameterError",
    "NotFittedError",
    "PrefstreamError",
    "SnapshotError",
    "check_param",
]
