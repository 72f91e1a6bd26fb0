"""The demo's error: a step of the end-to-end run failed."""

from __future__ import annotations

from learners.exceptions import PrefstreamError

__all__ = ["DemoError"]


class DemoError(PrefstreamError, RuntimeError):
    """A demo step failed (a worker died, the broker vanished, learning stalled)."""
