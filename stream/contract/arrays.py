"""Preference examples → float arrays: the one adapter from the stream's records to the learners' rows.

Every explainer adapter and :meth:`stream.registry.ExplainContext.background_arrays` turn
:class:`~stream.contract.PreferenceExample` objects into ``(n, d)`` arrays with these functions;
the row conversion itself is :func:`learners.base.dict_to_array` (the same one the learners use),
so a missing, non-numeric or non-finite feature gives the same one-line
:class:`~learners.exceptions.InvalidInputError` everywhere.

Examples
--------
>>> from types import SimpleNamespace as Ex
>>> exs = [Ex(left={"a": 1, "b": 2}, right={"a": 0, "b": 5}, context={"u": 3.0})]
>>> side_array(exs, ["b", "a"], "left")
array([[2., 1.]])
>>> context_array(exs, ["u"])
array([[3.]])
"""

from __future__ import annotations

import weakref
from typing import Sequence

import numpy as np

from learners.base import dict_to_array
from learners.exceptions import InvalidInputError

__all__ = ["background_arrays", "context_array", "reference_items", "side_array"]

_OWNER = "The explained model"


def side_array(examples: Sequence, names: Sequence[str], side: str) -> np.ndarray:
    """Items of one side (``"left"`` or ``"right"``) as an ndarray of shape (n_examples, len(names)).

    Raises
    ------
    InvalidInputError
        If an item lacks one of ``names`` or a value is not a finite number.

    Examples
    --------
    >>> from types import SimpleNamespace as Ex
    >>> side_array([Ex(left={"x": 0.5}, right={"x": 2})], ["x"], "right")
    array([[2.]])
    >>> side_array([Ex(left={"x": 0.5}, right={})], ["x"], "right")
    Traceback (most recent call last):
    ...
    learners.exceptions.InvalidInputError: The explained model expects feature 'x'; the item has []. Declare the same feature names in the event and in the model configuration.
    """
    d = len(names)
    return np.array([dict_to_array(getattr(ex, side), names, _OWNER) for ex in examples], dtype=np.float64).reshape(-1, d)


def context_array(examples: Sequence, names: Sequence[str]) -> np.ndarray:
    """Contexts as an ndarray of shape (n_examples, len(names)); a missing context counts as empty.

    Raises
    ------
    InvalidInputError
        If a context lacks one of ``names`` or a value is not a finite number.

    Examples
    --------
    >>> from types import SimpleNamespace as Ex
    >>> context_array([Ex(context={"u": 1, "v": 2}), Ex(context={"u": 0, "v": -1})], ["v"]).tolist()
    [[2.0], [-1.0]]
    """
    d = len(names)
    return np.array([dict_to_array(ex.context or {}, names, _OWNER + " (context)") for ex in examples],
                    dtype=np.float64).reshape(-1, d)


def background_arrays(examples: Sequence, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(X_left, X_right)`` of shape (n, len(names)) from the examples whose items have every feature.

    Examples lacking a feature (or holding a non-numeric one) are left out, not refused: the
    background is a sample of whatever the stream carried.

    Examples
    --------
    >>> from types import SimpleNamespace as Ex
    >>> XL, XR = background_arrays([Ex(left={"x": 1}, right={"x": 2}), Ex(left={}, right={"x": 3})], ["x"])
    >>> XL.tolist(), XR.tolist()
    ([[1.0]], [[2.0]])
    """
    rows_l, rows_r = [], []
    for ex in examples:
        try:
            row_l, row_r = dict_to_array(ex.left, names, _OWNER), dict_to_array(ex.right, names, _OWNER)
        except (InvalidInputError, AttributeError, TypeError):
            continue
        rows_l.append(row_l)
        rows_r.append(row_r)
    d = len(names)
    return (np.asarray(rows_l, dtype=np.float64).reshape(-1, d), np.asarray(rows_r, dtype=np.float64).reshape(-1, d))


_CATALOG_ARRAYS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _catalog_array(catalog, names: Sequence[str]) -> tuple[np.ndarray, int]:
    """The catalog's distinct items (those holding every feature of ``names``) as an ndarray and the number of
    items holding them, cached per catalog and feature names by the catalog's ``version`` (rebuilding it took
    ~8 ms per explainer call on Pokémon); the cached array is never handed out (callers get a copy or a draw)."""
    key = tuple(names)
    version = getattr(catalog, "version", None)
    try:
        per = _CATALOG_ARRAYS.setdefault(catalog, {})
    except TypeError:                         # not weak-referenceable: build it every time
        per, version = {}, None
    got = per.get(key)
    if got is not None and version is not None and got[0] == version:
        return got[1], got[2]
    rows = []
    for _, feats in catalog.items():
        try:
            rows.append(dict_to_array(feats, names, _OWNER))
        except InvalidInputError:
            continue
    X = np.unique(np.asarray(rows, dtype=np.float64).reshape(-1, len(names)), axis=0)
    if version is not None:
        per[key] = (version, X, len(rows))
    return X, len(rows)


def reference_items(ctx, names: Sequence[str], limit: int = 512) -> np.ndarray:
    """Distinct reference items, ndarray of shape (≤ limit, len(names)).

    The item catalog of ``ctx`` (items lacking a feature left out), or, when it holds fewer than
    two items (inline data), the items of the background reservoir; at most ``limit`` rows, drawn
    with ``ctx.rng`` when there are more.

    Examples
    --------
    >>> import numpy as np
    >>> from types import SimpleNamespace as Ex
    >>> bg = [Ex(left={"x": 2.0}, right={"x": 1.0}), Ex(left={"x": 2.0}, right={"x": 0.0})]
    >>> ctx = Ex(catalog=None, background=bg, rng=np.random.default_rng(0))  # a stream.registry.ExplainContext
    >>> reference_items(ctx, ["x"]).ravel().tolist()
    [0.0, 1.0, 2.0]
    """
    X, n = _catalog_array(ctx.catalog, names) if ctx.catalog is not None and len(ctx.catalog) else (None, 0)
    if n < 2:
        XL, XR = background_arrays(ctx.background, names)
        X = np.unique(np.concatenate([XL, XR]).reshape(-1, len(names)), axis=0)
    if len(X) > limit:
        return X[ctx.rng.choice(len(X), size=limit, replace=False)]
    return X.copy()
