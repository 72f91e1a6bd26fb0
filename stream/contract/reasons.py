"""Dead-letter reasons and the :class:`DeadLetter` exception every contract check raises."""

from __future__ import annotations

from learners.exceptions import InvalidInputError

__all__ = ["DEAD_LETTER_REASONS", "REQUEST_REFUSALS", "SCHEMA_VERSION", "DeadLetter"]

#: Contract version this build reads and writes.
SCHEMA_VERSION = 1

#: Every machine-readable dead-letter reason (the ``reason`` label of the dead-letter metric).
DEAD_LETTER_REASONS = (
    "malformed_json",
    "not_an_object",
    "unknown_schema_version",
    "missing_field",
    "wrong_type",
    "non_finite",
    "out_of_range",
    "unknown_item",
    "oversize",
    "invalid_outcome",
    "schema_violation",
    "unknown_schema",
    "not_wire_format",
)

#: Why the explainer answers a *valid* explain request with a dead letter instead of records (the
#: caller waits for one or the other): the model has no snapshot in this explainer, the model has
#: no such pair method, the model is not fitted yet (a GPM before its first refit), or the method
#: failed on it. Dead-letter records carry these beside :data:`DEAD_LETTER_REASONS`.
REQUEST_REFUSALS = ("unknown_model", "unknown_method", "not_fitted", "explain_failed")

#: Directory holding the JSON Schema files.
_DEFAULT_MAX_BYTES = 1_048_576
_DETAIL_MAX = 500


class DeadLetter(InvalidInputError):
    """A message that violates the event contract; goes to the dead-letter topic.

    Parameters
    ----------
    reason : str
        One of :data:`DEAD_LETTER_REASONS`.
    detail : str
        What was expected, what came, how to fix it.

    Attributes
    ----------
    reason, detail : str
    """

    def __init__(self, reason: str, detail: str) -> None:
        if reason not in DEAD_LETTER_REASONS:
            raise ValueError(f"Unknown dead-letter reason {reason!r}; expected one of {DEAD_LETTER_REASONS}.")
        self.reason = reason
        self.detail = detail if len(detail) <= _DETAIL_MAX else detail[: _DETAIL_MAX - 3] + "..."
        super().__init__(f"{reason}: {self.detail}")

    def __reduce__(self):  # keep picklable across executor boundaries
        return (type(self), (self.reason, self.detail))

