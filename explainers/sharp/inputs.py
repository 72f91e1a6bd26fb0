"""Input checks of ShaRP: the catalog matrix, catalog indices, and the scoring callable's output."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from explainers.exceptions import InvalidInputError

__all__: list[str] = []


def _as_matrix(X: Any, name: str = "X") -> np.ndarray:
    try:
        A = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"{name} must be a numeric array of shape (n_items, n_features); "
                                f"conversion to float64 failed: {exc}") from None
    if A.ndim != 2 or A.shape[0] < 1 or A.shape[1] < 1:
        raise InvalidInputError(f"{name} must have shape (n_items, n_features) with both >= 1; "
                                f"got shape {A.shape}. Reshape a single item with x.reshape(1, -1).")
    if not np.all(np.isfinite(A)):
        bad = np.argwhere(~np.isfinite(A))[0]
        raise InvalidInputError(f"{name} contains NaN or inf (first at row {bad[0]}, column {bad[1]}); "
                                "impute or drop those items first.")
    return A


def _call_scores(score_fn: Callable, H: np.ndarray) -> np.ndarray:
    s = score_fn(H)
    try:
        s = np.asarray(s, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise InvalidInputError("score_fn must return a 1-D array of float scores; got "
                                f"{type(s).__name__}.") from None
    if s.size != H.shape[0]:
        raise InvalidInputError(f"score_fn returned {s.size} scores for {H.shape[0]} rows; it must "
                                "return one score per row of its (N, d) input.")
    # one reduction instead of an isfinite pass: a NaN/inf makes the sum non-finite (a finite sum that
    # overflows is re-checked element-wise)
    if not np.isfinite(np.add.reduce(s)) and not np.all(np.isfinite(s)):
        raise InvalidInputError("score_fn returned NaN or inf scores; the scoring model must give a "
                                "finite score to every row (check hybrids of extreme feature values).")
    return s


def _as_index_array(items: Any, n: int, name: str) -> np.ndarray:
    a = np.asarray(items)
    if a.ndim == 0:
        a = a.reshape(1)
    if a.dtype.kind not in "iu":
        if a.dtype.kind == "f" and a.size and np.all(a == np.round(a)):
            a = a.astype(np.int64)
        elif a.size == 0:
            a = a.astype(np.int64)
        else:
            raise InvalidInputError(f"{name} must be integer indices into the catalog (0..{n - 1}); "
                                    f"got dtype {a.dtype}.")
    a = a.astype(np.int64)
    if a.size and (a.min() < 0 or a.max() >= n):
        raise InvalidInputError(f"{name} must be indices in [0, {n - 1}] of the catalog; got values in "
                                f"[{a.min()}, {a.max()}].")
    return a

