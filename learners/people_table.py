"""The people's table: per-person dual-averaging state of a personal model, in flat arrays.

A personal learner (:mod:`learners.personal`) keeps, per person u, a row of gradient sums G_u
(k floats; 2k with the AdaGrad sums Q_u), an event weight T_u and an event count N_u. This module
holds those rows: one float64 matrix of G's, two vectors of T's and N's, and one dict from id to
row, so a person costs about 8 k + 16 bytes of arrays plus the dict entry — no Python object per
person. Rows of people removed (forgotten or evicted) are reused; the arrays double when full.

The table snapshots to five arrays (:meth:`PeopleTable.snapshot`, read back by
:meth:`PeopleTable.restore`): ``people_G`` (n, k), ``people_T`` (n,), ``people_N`` (n,), and the
ids as their UTF-8 bytes concatenated (``people_ids``, uint8) with each id's end offset
(``people_id_ends``, int64), in the table's insertion order. The personal learner's
``state_dict`` carries them beside the population's arrays.

Examples
--------
>>> t = PeopleTable(2)
>>> t.G[t.row("ann", create=True)] += [1.0, -2.0]
>>> back = PeopleTable(2)
>>> back.restore(t.snapshot())
>>> back.ids(), back.G[back.row("ann")].tolist()
(['ann'], [1.0, -2.0])
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from learners.exceptions import SnapshotError

__all__ = ["PeopleTable"]


class PeopleTable:
    """Per-person dual-averaging state in flat arrays: row r holds G (k floats), T (weight) and N (events).

    Ids map to rows through one dict; freed rows are reused. No Python object per person.

    Examples
    --------
    >>> t = PeopleTable(3)
    >>> r = t.row("ann", create=True)
    >>> t.G[r] += [1.0, 0.0, -2.0]; t.T[r] += 1; t.N[r] += 1
    >>> len(t), t.row("bob") is None, t.remove("ann"), len(t)
    (1, True, True, 0)
    """

    __slots__ = ("G", "N", "T", "_free", "_rows", "k")

    def __init__(self, k: int, capacity: int = 16) -> None:
        self.k = int(k)
        self._rows: dict[str, int] = {}
        self._free: list[int] = []
        self.G = np.zeros((capacity, self.k))
        self.T = np.zeros(capacity)
        self.N = np.zeros(capacity, dtype=np.int64)

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, user_id) -> bool:
        return user_id in self._rows

    def ids(self) -> list[str]:
        """Held ids, in insertion order."""
        return list(self._rows)

    def row(self, user_id: str, create: bool = False) -> int | None:
        """The row of ``user_id`` (a new zero row with ``create``), or None."""
        r = self._rows.get(user_id)
        if r is None and create:
            if self._free:
                r = self._free.pop()
            else:
                r = len(self._rows)
                if r >= self.T.shape[0]:
                    self._grow(max(16, 2 * self.T.shape[0]))
            self.G[r] = 0.0
            self.T[r] = 0.0
            self.N[r] = 0
            self._rows[user_id] = r
        return r

    def _grow(self, cap: int) -> None:
        G = np.zeros((cap, self.k))
        T = np.zeros(cap)
        N = np.zeros(cap, dtype=np.int64)
        n = self.T.shape[0]
        G[:n], T[:n], N[:n] = self.G, self.T, self.N
        self.G, self.T, self.N = G, T, N

    def remove(self, user_id: str) -> bool:
        """Drop ``user_id``'s row; False if not held."""
        r = self._rows.pop(user_id, None)
        if r is None:
            return False
        self.G[r] = 0.0
        self.T[r] = 0.0
        self.N[r] = 0
        self._free.append(r)
        return True

    def nbytes(self) -> int:
        """Bytes of the arrays (allocated rows), without the id dict."""
        return self.G.nbytes + self.T.nbytes + self.N.nbytes

    def add(self, other: "PeopleTable") -> list[str]:
        """Add ``other``'s rows into this table (a person held by both gets the sums of their G, T and N);
        the ids of ``other``, in its order."""
        for u, r in other._rows.items():
            mine = self.row(u, create=True)
            self.G[mine] += other.G[r]
            self.T[mine] += other.T[r]
            self.N[mine] += other.N[r]
        return other.ids()

    def snapshot(self) -> dict[str, np.ndarray]:
        """The people held, as the five arrays of the module docstring (copies), in insertion order."""
        ids = self.ids()
        rows = np.fromiter((self._rows[u] for u in ids), dtype=np.int64, count=len(ids))
        buf, ends = _encode_ids(ids)
        return {"people_G": self.G[rows].copy(), "people_T": self.T[rows].copy(),
                "people_N": self.N[rows].copy(), "people_ids": buf, "people_id_ends": ends}

    def restore(self, arrays: Mapping[str, np.ndarray]) -> None:
        """Hold the people of :meth:`snapshot` output (added to those held).

        Raises
        ------
        SnapshotError
            If ``people_G`` is not (number of ids, k).
        KeyError, TypeError, ValueError
            If an array is missing or unreadable (the caller names whose state it was).
        """
        ids = _decode_ids(arrays["people_ids"], arrays["people_id_ends"])
        G = np.asarray(arrays["people_G"], dtype=np.float64)
        if G.shape != (len(ids), self.k):
            raise SnapshotError(f"people_G has shape {G.shape}; expected ({len(ids)}, {self.k}).")
        T, N = np.asarray(arrays["people_T"], dtype=np.float64), np.asarray(arrays["people_N"], dtype=np.int64)
        need = len(self._rows) + len(ids)
        if need > self.T.shape[0]:
            self._grow(need)
        for j, u in enumerate(ids):
            r = self.row(u, create=True)
            self.G[r], self.T[r], self.N[r] = G[j], T[j], N[j]


def _encode_ids(ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    raw = [i.encode("utf-8", "surrogatepass") for i in ids]
    ends = np.cumsum([len(b) for b in raw], dtype=np.int64) if raw else np.zeros(0, dtype=np.int64)
    return np.frombuffer(b"".join(raw), dtype=np.uint8).copy(), ends


def _decode_ids(buf: np.ndarray, ends: np.ndarray) -> list[str]:
    data = np.asarray(buf, dtype=np.uint8).tobytes()
    starts = np.concatenate([[0], np.asarray(ends, dtype=np.int64)[:-1]]) if len(ends) else []
    return [data[s:e].decode("utf-8", "surrogatepass") for s, e in zip(np.asarray(starts).tolist(),
                                                                       np.asarray(ends).tolist())]
