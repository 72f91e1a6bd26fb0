"""Column-wise reading of preference CSV files for ``prefstream replay`` (the fast path).

:func:`stream.replay.iter_records` turns a CSV row into a record cell by cell (``csv`` module,
``float`` per cell, the contract check per record): about 130 µs a Pokémon row (57 columns), so
a replay could not pass 8,000 events/s whatever the producer. This module reads the same file in
chunks of about 4 MiB with pandas' C parser (one ``float64`` array per numeric column), checks
the values of the whole chunk with numpy (finite, within :data:`stream.contract.MAX_ABS_VALUE`,
outcome in {1, −1, 0}, weight in :data:`stream.contract.WEIGHT_RANGE`, ids of at most 512
characters), checks the record *structure* once per file with :func:`stream.contract.validate_record`
on a record of zeros, and builds the records of the rows that pass.

Every row it is not sure of goes through the row path (``stream.replay._csv_record`` and the
contract check) instead, so the result — line numbers, records, skip reasons — is the row
path's, exactly (``tests/test_replay_fast.py`` compares both on clean and broken files):

* a row whose cell count differs from the header's, or with an empty / non-finite /
  out-of-range value, an id with spaces around it or longer than 512 characters;
* a whole chunk that pandas cannot parse as numbers (ISO-8601 timestamps, ``1_000``), or that
  holds a ``true`` / ``false`` cell (pandas reads them as 1.0 / 0.0, the row path refuses them);
* the rest of the file from the first chunk holding a double quote or a bare carriage return
  (quoted cells may span lines: only the ``csv`` module reads them right).

Files whose header lacks ``outcome``, repeats a column, or whose zero record the contract
refuses are read by the row path alone.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Iterator

import numpy as np

__all__ = ["CHUNK_BYTES", "fast_preference_rows"]

#: bytes of lines parsed at once
CHUNK_BYTES = 4 << 20
#: the cells pandas' float parser reads as 1.0 / 0.0 (a chunk holding one anywhere goes the row way)
_BOOLS = (b"True", b"TRUE", b"true", b"False", b"FALSE", b"false")
_BLANK = (b"\n", b"\r\n", b"")
_MAX_ID = 512


class _Plan:
    """Which columns hold what, decided from the header once."""

    def __init__(self, fields: list[str]) -> None:
        self.fields = fields
        self.sides = {s: [c for c in fields if c.startswith(s + ".")] for s in ("left", "right")}
        self.context = [c for c in fields if c.startswith("context.")]
        self.has_ts = "timestamp" in fields
        self.has_weight = "weight" in fields
        self.feature_cols = self.sides["left"] + self.sides["right"] + self.context
        self.numeric = ["outcome"] + (["timestamp"] if self.has_ts else []) + (["weight"] if self.has_weight else []) \
            + self.feature_cols
        self.strings = [c for c in ("event_id", "left_id", "right_id") if c in fields]
        self.names = {s: [c[len(s) + 1:] for c in cols] for s, cols in self.sides.items()}
        self.ctx_names = [c[len("context."):] for c in self.context]

    def zero_record(self) -> dict:
        """A record of this layout with every value 0 and every id ``"x"`` (checks the structure)."""
        rec: dict = {"schema_version": 1, "event_id": "x", "timestamp": 0.0}
        for s in ("left", "right"):
            feats = dict.fromkeys(self.names[s], 0.0)
            rec[s] = ({"features": feats} if feats else {}) | {"id": "x"}
        rec["outcome"] = 1
        if self.context:
            rec["context"] = dict.fromkeys(self.ctx_names, 0.0)
        if self.has_weight:
            rec["weight"] = 1.0
        return rec


def _plan_for(fields: list[str]) -> _Plan | None:
    from stream.contract import DeadLetter, validate_record

    if "outcome" not in fields or len(set(fields)) != len(fields) or "" in fields:
        return None
    plan = _Plan(fields)
    try:
        validate_record("preference", plan.zero_record())
    except DeadLetter:
        return None
    return plan


def fast_preference_rows(path: str | Path, stem: str, now: float, row_path) -> Iterator[tuple[int, dict | None, str | None]] | None:
    """``(line, record or None, skip reason or None)`` of a preference CSV, as the row path gives them.

    Parameters
    ----------
    path : path
        The CSV file (header on line 1).
    stem, now : str, float
        Default event id prefix and timestamp, as in :func:`stream.replay.iter_records`.
    row_path : callable
        ``row_path(row: dict, line: int) -> (record or None, reason or None)``: the row path.

    Returns
    -------
    iterator or None
        None when the file is for the row path alone (see the module docstring).
    """
    p = Path(path)
    with open(p, "rb") as fh:
        head = fh.readline()
    if b'"' in head:
        return None
    fields = next(csv.reader([head.decode("utf-8", "surrogateescape")]), None)
    if not fields:
        return None
    plan = _plan_for([c.strip() for c in fields])
    if plan is None:
        return None
    return _rows(p, plan, len(head), stem, now, row_path)


def _slow(text: str, fields: list[str], first_line: int, row_path) -> Iterator[tuple[int, dict | None, str | None]]:
    """The row path over ``text`` (lines from ``first_line`` on), with csv's own line numbers."""
    reader = csv.DictReader(io.StringIO(text, newline=""), fieldnames=fields)
    for row in reader:
        line = first_line - 1 + reader.line_num
        rec, why = row_path(row, line)
        yield line, rec, why


def _rows(p: Path, plan: _Plan, offset: int, stem: str, now: float, row_path):
    import pandas as pd

    ncomma = len(plan.fields) - 1
    dtypes = {c: np.float64 for c in plan.numeric} | {c: str for c in plan.strings}
    used = plan.numeric + plan.strings
    line0 = 2
    with open(p, "rb") as fh:
        fh.seek(offset)
        while True:
            pos = fh.tell()
            lines = fh.readlines(CHUNK_BYTES)
            if not lines:
                return
            chunk = b"".join(lines)
            if b'"' in chunk or chunk.count(b"\r") != chunk.count(b"\r\n"):
                fh.seek(pos)  # the csv module reads the rest (quoted cells may span lines)
                text = io.TextIOWrapper(fh, encoding="utf-8", errors="surrogateescape", newline="")
                reader = csv.DictReader(text, fieldnames=plan.fields)
                for row in reader:
                    line = line0 - 1 + reader.line_num
                    rec, why = row_path(row, line)
                    yield line, rec, why
                return
            text = None
            good = [i for i, ln in enumerate(lines) if ln.count(b",") == ncomma and ln not in _BLANK]
            df = None
            if good and not any(b in chunk for b in _BOOLS):
                try:
                    df = pd.read_csv(io.BytesIO(b"".join(lines[i] for i in good) if len(good) < len(lines) else chunk),
                                     header=None, names=plan.fields, usecols=used, dtype=dtypes, keep_default_na=False,
                                     na_values={c: [""] for c in plan.numeric}, skip_blank_lines=False, encoding="utf-8",
                                     engine="c")
                except (ValueError, UnicodeDecodeError, pd.errors.ParserError):
                    df = None
                if df is not None and len(df) != len(good):
                    df = None
            if df is None:
                text = chunk.decode("utf-8", "surrogateescape")
                yield from _slow(text, plan.fields, line0, row_path)
                line0 += len(lines)
                continue
            out: list = [None] * len(lines)
            ok = _values_ok(df, plan)
            built = _build(df, plan, ok, [line0 + i for i in good], stem, now)
            for j, i in enumerate(good):
                out[i] = built[j]
            for i, ln in enumerate(lines):
                if ln in _BLANK:
                    continue
                if out[i] is None:  # the row path, on this line alone (no quotes: one line, one row)
                    yield from _slow(ln.decode("utf-8", "surrogateescape"), plan.fields, line0 + i, row_path)
                else:
                    yield line0 + i, out[i], None
            line0 += len(lines)


def _values_ok(df, plan: _Plan) -> np.ndarray:
    from stream.contract import MAX_ABS_VALUE, WEIGHT_RANGE

    ok = np.ones(len(df), dtype=bool)
    if plan.feature_cols:
        F = df[plan.feature_cols].to_numpy(dtype=np.float64)
        ok &= (np.abs(F) <= MAX_ABS_VALUE).all(axis=1)  # NaN (an empty cell) fails too
    o = df["outcome"].to_numpy()
    ok &= (o == 1.0) | (o == -1.0) | (o == 0.0)
    if plan.has_ts:
        t = df["timestamp"].to_numpy()
        ok &= np.isfinite(t) & (t >= 0)
    if plan.has_weight:
        w = df["weight"].to_numpy()
        ok &= (w >= WEIGHT_RANGE[0]) & (w <= WEIGHT_RANGE[1])
    return ok


def _ids(df, col: str | None, n: int) -> list:
    return df[col].tolist() if col is not None else [""] * n


def _build(df, plan: _Plan, ok: np.ndarray, lines: list[int], stem: str, now: float) -> list:
    """The records of the rows in ``ok`` (None for the others), in ``_csv_record``'s key order."""
    n = len(df)
    fields = set(plan.fields)
    eids = _ids(df, "event_id" if "event_id" in fields else None, n)
    side_ids = {s: _ids(df, f"{s}_id" if f"{s}_id" in fields else None, n) for s in ("left", "right")}
    feats = {s: df[cols].to_numpy(dtype=np.float64).tolist() if cols else None for s, cols in plan.sides.items()}
    ctx = df[plan.context].to_numpy(dtype=np.float64).tolist() if plan.context else None
    ts = df["timestamp"].tolist() if plan.has_ts else None
    w = df["weight"].tolist() if plan.has_weight else None
    outc = df["outcome"].to_numpy().astype(np.int64).tolist()
    okl = ok.tolist()
    names = plan.names
    out: list = [None] * n
    for i in range(n):
        if not okl[i]:
            continue
        eid = eids[i]
        if eid != eid.strip() or len(eid) > _MAX_ID:
            continue
        rec = {"schema_version": 1, "event_id": eid or f"{stem}:{lines[i]}",
               "timestamp": ts[i] if ts is not None else now}
        bad = False
        for s in ("left", "right"):
            rid = side_ids[s][i]
            if rid != rid.strip() or len(rid) > _MAX_ID:
                bad = True
                break
            f = feats[s]
            if f is None:
                if not rid:
                    bad = True
                    break
                rec[s] = {"id": rid}
            else:
                rec[s] = {"features": dict(zip(names[s], f[i])), "id": rid} if rid else {"features": dict(zip(names[s], f[i]))}
        if bad:
            continue
        rec["outcome"] = outc[i]
        if ctx is not None:
            rec["context"] = dict(zip(plan.ctx_names, ctx[i]))
        if w is not None:
            rec["weight"] = w[i]
        out[i] = rec
    return out
