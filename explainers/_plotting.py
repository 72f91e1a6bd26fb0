"""The one way explainer plots get matplotlib: imported lazily, on first use.

Computation never imports matplotlib; plotting functions call :func:`pyplot` when they draw. The
backend is left to matplotlib and the user (``MPLBACKEND``, ``matplotlib.use`` before plotting):
without a display matplotlib itself falls back to a non-interactive backend, and a notebook keeps its
inline backend.
"""

from __future__ import annotations

__all__ = ["pyplot"]


def pyplot():
    """``matplotlib.pyplot``, imported on first call (the backend is not changed)."""
    import matplotlib.pyplot as plt

    return plt
