"""The item catalog as matrices: candidates by id are a row gather, not a dict walk per request.

:class:`CatalogMatrix` is an :class:`~stream.contract.ItemCatalog` (it is what the explainers
get as ``ctx.catalog``) that also keeps, per feature order a model asked for, a float64 matrix
with one row per item and a mask of the rows holding every feature. Upserts and deletes from the
item topic write one row of every view (O(d)); a request gathers its rows with one fancy index.
Views are filled on first use, so a model with other feature names costs one pass over the
catalog, once.

Examples
--------
>>> cat = CatalogMatrix()
>>> cat.upsert({"item_id": "a", "features": {"x": 1.0, "y": 2.0}})
>>> cat.upsert({"item_id": "b", "features": {"x": 3.0}})
>>> X, rows, missing, unknown = cat.gather(["b", "a"], ("x",))
>>> X.tolist(), rows.tolist(), missing, unknown
([[3.0], [1.0]], [1, 0], [], [])
>>> cat.gather(["b", "zz"], ("x",))[3]
['zz']
>>> cat.gather(["a", "b"], ("x", "y"))[2]      # b lacks y
['b']
"""

from __future__ import annotations

import threading
from typing import Sequence

import numpy as np

from stream.contract import ItemCatalog

__all__ = ["CatalogMatrix"]


class _View:
    __slots__ = ("names", "X", "ok")

    def __init__(self, names: tuple[str, ...], capacity: int) -> None:
        self.names = names
        self.X = np.zeros((capacity, len(names)))
        self.ok = np.zeros(capacity, dtype=bool)


class CatalogMatrix(ItemCatalog):
    """Item catalog plus per-feature-order matrix views (see the module docstring).

    Attributes
    ----------
    version : int
        Grows with every change (upsert or delete).
    """

    def __init__(self) -> None:
        super().__init__()
        self._row: dict[str, int] = {}
        self._free: list[int] = []
        self._n_rows = 0
        self._views: dict[tuple[str, ...], _View] = {}
        self._lock = threading.Lock()
        self.version = 0
        self._frozen: tuple[int, ItemCatalog] | None = None
        self._complete: dict = {}

    # ------------------------------------------------------------------ writing
    def upsert(self, record) -> None:
        super().upsert(record)
        item_id = record["item_id"]
        feats = record.get("features")
        with self._lock:
            if feats is None:
                self._drop(item_id)
            else:
                r = self._row.get(item_id)
                if r is None:
                    r = self._free.pop() if self._free else self._grow()
                    self._row[item_id] = r
                for v in self._views.values():
                    self._write(v, r, feats)
            self.version += 1

    def delete(self, item_id: str) -> None:
        super().delete(item_id)
        with self._lock:
            self._drop(item_id)
            self.version += 1

    def _drop(self, item_id: str) -> None:
        r = self._row.pop(item_id, None)
        if r is not None:
            self._free.append(r)
            for v in self._views.values():
                v.ok[r] = False

    def _grow(self) -> int:
        r = self._n_rows
        self._n_rows += 1
        for v in self._views.values():
            if r >= v.X.shape[0]:
                self._resize(v, max(16, 2 * v.X.shape[0]))
        return r

    @staticmethod
    def _resize(v: _View, capacity: int) -> None:
        X = np.zeros((capacity, len(v.names)))
        ok = np.zeros(capacity, dtype=bool)
        X[: v.X.shape[0]] = v.X
        ok[: v.ok.shape[0]] = v.ok
        v.X, v.ok = X, ok   # readers holding the old arrays keep a consistent copy

    @staticmethod
    def _write(v: _View, r: int, feats) -> None:
        try:
            v.X[r] = [feats[k] for k in v.names]
            v.ok[r] = True
        except KeyError:
            v.ok[r] = False

    def _view(self, names: tuple[str, ...]) -> _View:
        v = self._views.get(names)
        if v is None:
            with self._lock:
                v = self._views.get(names)
                if v is None:
                    v = _View(names, max(16, self._n_rows))
                    for item_id, r in self._row.items():
                        self._write(v, r, self._items[item_id])
                    self._views[names] = v
        return v

    # ------------------------------------------------------------------ reading
    def rows(self, ids: Sequence[str]) -> tuple[np.ndarray, list[str]]:
        """Row numbers of ``ids`` in every view, and the ids the catalog does not hold."""
        row = self._row
        idx = [row.get(i, -1) for i in ids]
        if -1 in idx:
            return np.zeros(0, dtype=np.intp), [i for i, r in zip(ids, idx) if r < 0]
        return np.asarray(idx, dtype=np.intp), []

    def gather(self, ids: Sequence[str], names: Sequence[str]) -> tuple[np.ndarray, np.ndarray, list[str], list[str]]:
        """Rows of ``ids`` in ``names`` order.

        Returns
        -------
        X : ndarray of shape (len(ids), len(names))
            Meaningful only when both lists below are empty.
        rows : ndarray of int, shape (len(ids),)
            Their row numbers in :meth:`view` (for per-row caches of a model version).
        missing : list of str
            Ids whose item lacks one of ``names``.
        unknown : list of str
            Ids the catalog does not hold.
        """
        v = self._view(tuple(names))
        rows, unknown = self.rows(ids)
        if unknown:
            return np.zeros((0, len(names))), rows, [], unknown
        X, ok = v.X, v.ok
        good = ok[rows]
        if not good.all():
            return X[rows], rows, [i for i, g in zip(ids, good.tolist()) if not g], []
        return X[rows], rows, [], []

    def complete(self, names: Sequence[str]) -> tuple[list[str], np.ndarray]:
        """``(ids, rows)`` of every item holding all of ``names``, in row order (the candidates of a
        whole-catalog recommendation); made once per catalog version and feature order.

        >>> cat = CatalogMatrix()
        >>> for i, f in (("a", {"x": 1.0}), ("b", {"y": 2.0}), ("c", {"x": 3.0})):
        ...     cat.upsert({"item_id": i, "features": f})
        >>> ids, rows = cat.complete(("x",)); ids, rows.tolist()
        (['a', 'c'], [0, 2])
        """
        key = tuple(names)
        hit = self._complete.get(key)
        if hit is not None and hit[0] == self.version:
            return hit[1], hit[2]
        v = self._view(key)
        with self._lock:
            ver = self.version
            pairs = sorted((r, i) for i, r in self._row.items() if v.ok[r])
        ids = [i for _, i in pairs]
        rows = np.asarray([r for r, _ in pairs], dtype=np.intp)
        self._complete[key] = (ver, ids, rows)
        return ids, rows

    def view(self, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(X, ok)``: every row in ``names`` order, shape (capacity, len(names)), and the rows holding an item
        with all of ``names`` (the others are zeros). Valid until the next change (:attr:`version`)."""
        v = self._view(tuple(names))
        return v.X, v.ok

    def frozen(self) -> ItemCatalog:
        """A read-only copy for another thread (explainers iterate it), made once per catalog version."""
        hit = self._frozen
        if hit is not None and hit[0] == self.version:
            return hit[1]
        cat = ItemCatalog()
        cat._items = dict(self._items)   # noqa: SLF001 - a shallow copy of the same mapping
        self._frozen = (self.version, cat)
        return cat
