"""Request bodies → float64 arrays in a model's column order, with the contract's numeric bound.

Every value must be finite and within ±:data:`stream.contract.MAX_ABS_VALUE` (the bound the
event contract dead-letters as ``out_of_range``); a refusal names the JSON path of the first
offending value (``columns.rows[3][7]``, ``items[2].features.hp``, ``context.age``). A feature the
model does not use is refused too (422 ``unknown_feature``), never silently dropped.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from stream.contract import MAX_ABS_VALUE
from stream.serving.errors import APIError

__all__ = ["candidates", "check_bounds", "context_vector", "item_vector", "refuse_duplicates"]


def check_bounds(X: np.ndarray, where) -> None:
    """Refuse non-finite values and values beyond ±MAX_ABS_VALUE (422 naming the first one).

    ``where(index_tuple) -> str`` names the path of an element.
    """
    bad = ~(np.abs(X) <= MAX_ABS_VALUE)   # NaN compares False: caught too
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        v = float(X[idx])
        what = "finite" if not np.isfinite(v) else f"within ±{MAX_ABS_VALUE:g} (stream.contract.MAX_ABS_VALUE)"
        raise APIError(422, "out_of_range", f"{where(idx)} = {v!r} must be {what}.", field=where(idx))


def _vector(feats: dict, names: Sequence[str], where: str, what: str = "features") -> np.ndarray:
    try:
        x = np.array([feats[k] for k in names], dtype=np.float64)
    except KeyError:
        miss = [k for k in names if k not in feats]
        raise APIError(422, "missing_feature", f"{where} lacks {what} {miss[:5]} of the model "
                                               f"(it needs {list(names)}).", field=f"{where}.{miss[0]}") from None
    if len(feats) > len(names):  # nothing a request names is silently dropped
        _refuse_unknown([k for k in feats if k not in set(names)], names, where, what)
    check_bounds(x, lambda i: f"{where}.{names[i[0]]}")
    return x


def _refuse_unknown(extra: list, names: Sequence[str], where: str, what: str = "features") -> None:
    """422 ``unknown_feature`` naming the first of ``extra`` and the model's ``names``."""
    if extra:
        raise APIError(422, "unknown_feature", f"{where} has {what} {extra[:5]} that the model does not use "
                                               f"(its {what}: {list(names)}); remove them.", field=f"{where}.{extra[0]}")


def context_vector(context: dict | None, names: Sequence[str]) -> np.ndarray | None:
    """The request's context in ``names`` order, or None for a context-free model."""
    if context:
        keys = list(context)
        check_bounds(np.fromiter(context.values(), dtype=np.float64, count=len(keys)), lambda i: f"context.{keys[i[0]]}")
    if not names:
        return None
    if context is None:
        raise APIError(422, "missing_feature", f"This model needs a context with {list(names)}.", field="context")
    return _vector(context, names, "context", "context features")


def item_vector(ref, names: Sequence[str], catalog, where: str) -> np.ndarray:
    """One :class:`~stream.serving.datamodels.ItemRef` as a vector (inline features win over the catalog)."""
    if ref.features is not None:
        return _vector(ref.features, names, f"{where}.features")
    if ref.id is None:
        raise APIError(422, "malformed", f"{where} needs an 'id' or 'features'.", field=where)
    X, _, missing, unknown = catalog.gather([ref.id], names)
    if unknown:
        raise APIError(404, "unknown_item", f"Item {ref.id!r} is not in the item catalog ({len(catalog)} items).",
                       field=f"{where}.id")
    if missing:
        return _vector(catalog.get(ref.id), names, f"{where} (catalog item {ref.id!r})")
    return X[0]


def refuse_duplicates(ids: Sequence, where: str) -> None:
    """422 ``duplicate_item`` naming the ids given more than once (a candidate is ranked once; the request says
    which one it means, the server does not guess).

    Examples
    --------
    >>> refuse_duplicates(["4", "7"], "ids")
    >>> try:
    ...     refuse_duplicates(["4", "7", "4", None, None], "ids")
    ... except APIError as e:
    ...     print(e.status, e.code, e.field, e.detail)
    422 duplicate_item ids[2] ids has '4' more than once (positions 0 and 2); give each candidate once.
    """
    if len(set(ids)) == len(ids):
        return
    first: dict = {}
    dups = []
    for i, k in enumerate(ids):
        if k is None:
            continue
        if k in first:
            dups.append((k, first[k], i))
        else:
            first[k] = i
    if not dups:
        return
    k, a, b = dups[0]
    more = f"; {len(dups)} repeats in all, of {sorted({d[0] for d in dups})[:5]}" if len(dups) > 1 else ""
    raise APIError(422, "duplicate_item", f"{where} has {k!r} more than once (positions {a} and {b}){more}; give "
                                          "each candidate once.", field=f"{where}[{b}]", duplicates=sorted({d[0] for d in dups}))


def candidates(req, names: Sequence[str], catalog, max_items: int) -> tuple[list[str], np.ndarray, np.ndarray | None]:
    """``(ids, X, rows)`` of a :class:`~stream.serving.datamodels.RankRequest`: X of shape (n, len(names)),
    ``rows`` the catalog rows of candidates given by id (None for inline candidates).

    Raises
    ------
    APIError
        413 over ``max_items``; 422 for none or several candidate forms, a ragged table, a missing
        feature or a value out of range; 404 for an unknown id.
    """
    forms = [k for k in ("ids", "columns", "items") if getattr(req, k) is not None]
    if len(forms) != 1:
        raise APIError(422, "malformed", "Give the candidates in exactly one of 'ids', 'columns' or 'items'; "
                                         f"got {forms or 'none'}.", field=forms[1] if len(forms) > 1 else "ids")
    form = forms[0]
    n = len(req.columns.rows) if form == "columns" else len(getattr(req, form))
    if n > max_items:
        raise APIError(413, "too_large", f"{n} candidates; at most {max_items} per request (serve_max_items).",
                       field=form)
    if form == "ids":
        ids = req.ids
        refuse_duplicates(ids, "ids")
        X, rows, missing, unknown = catalog.gather(ids, names)
        if unknown:
            i = ids.index(unknown[0])
            raise APIError(404, "unknown_item", f"{len(unknown)} id(s) not in the item catalog ({len(catalog)} items), "
                                                f"first {unknown[0]!r}.", field=f"ids[{i}]")
        if missing:
            i = ids.index(missing[0])
            _vector(catalog.get(missing[0]), names, f"ids[{i}] (catalog item {missing[0]!r})")
        return ids, X, rows
    if form == "columns":
        cols = req.columns
        refuse_duplicates(cols.feature_names, "columns.feature_names")
        if cols.ids is not None:
            refuse_duplicates(cols.ids, "columns.ids")
        pos = {k: j for j, k in enumerate(cols.feature_names)}
        miss = [k for k in names if k not in pos]
        _refuse_unknown([k for k in cols.feature_names if k not in set(names)], names, "columns.feature_names")
        if miss:
            raise APIError(422, "missing_feature", f"columns.feature_names lacks {miss[:5]} of the model "
                                                   f"(it needs {list(names)}).", field="columns.feature_names")
        width = len(cols.feature_names)
        try:
            T = np.array(cols.rows, dtype=np.float64)
        except ValueError:
            T = None
        if T is None or T.ndim != 2 or T.shape[1] != width:
            bad = next(i for i, r in enumerate(cols.rows) if len(r) != width)
            raise APIError(422, "malformed", f"columns.rows[{bad}] has {len(cols.rows[bad])} values; "
                                             f"feature_names has {width}.", field=f"columns.rows[{bad}]")
        check_bounds(T, lambda i: f"columns.rows[{i[0]}][{i[1]}]")
        if cols.ids is not None and len(cols.ids) != n:
            raise APIError(422, "malformed", f"columns.ids has {len(cols.ids)} ids for {n} rows.", field="columns.ids")
        ids = cols.ids if cols.ids is not None else [str(i) for i in range(n)]
        order = [pos[k] for k in names]
        X = T if order == list(range(width)) else T[:, order]
        return ids, X, None
    refuse_duplicates([ref.id for ref in req.items], "items")
    X = np.empty((n, len(names)))
    ids = []
    for i, ref in enumerate(req.items):
        X[i] = item_vector(ref, names, catalog, f"items[{i}]")
        ids.append(ref.id if ref.id is not None else str(i))
    return ids, X, None
