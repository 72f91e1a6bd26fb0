"""Event files as contract records: CSV and JSONL preferences, click sessions and items, line by line.

What ``prefstream replay`` sends (:mod:`stream.replay`), ``prefstream run`` learns from
(:mod:`stream.batch`) and ``prefstream evaluate`` scores (:mod:`stream.evaluation`). Every line becomes
one record of the event contract (:mod:`stream.contract`), validated with
:func:`stream.contract.validate_record`; preference CSV rows go straight to their bytes without a
dict (:mod:`stream.adapters.record_bytes`). A line that cannot be turned into a valid record is
reported with its line number and a reason.

File layouts
------------
JSONL (``.jsonl``, ``.ndjson``, ``.json``): one record per line exactly as in the contract.
Missing ``schema_version`` is set to 1; a missing preference ``event_id`` becomes
``"<file stem>:<line>"``; a missing ``timestamp`` becomes the replay start time (unix s).

CSV (``.csv``, header row required), per ``kind``:

``preference``
    ``event_id`` (optional), ``timestamp`` (optional; unix seconds or ISO-8601), ``outcome``
    (required: ``1``, ``-1``, ``0``), ``weight`` (optional), ``left_id`` / ``right_id``
    (optional), ``user_id`` (optional: the person, for personal models), and feature columns ``left.<feature>``, ``right.<feature>``,
    ``context.<feature>``. A side whose feature cells are all empty is sent as an id reference
    (``{"id": left_id}``), otherwise all its cells must be numbers (inline features; the id rides
    along). Context cells: all empty (no context) or all numbers.
``click``
    ``session_id`` (required), ``timestamp`` (optional), ``user_id`` (optional), ``shown`` and
    ``clicked`` (item ids separated by ``|``; items resolved from the item catalog),
    ``weight`` (optional), ``context.<feature>``. An **Open Bandit** CSV (``all.csv``,
    ``men.csv``, … plain or ``.csv.gz``, with ``item_context.csv`` beside it) is recognised by
    its columns and read as sessions with ``position`` and ``propensity`` per shown item
    (:func:`stream.adapters.clicks.obd_session_records`).
``item``
    ``item_id`` (required) and one column per feature (names as in the header, any prefix
    ``features.`` stripped). A row whose feature cells are all empty is a delete
    (``"features": null``).

Example
-------
>>> import tempfile, os
>>> p = os.path.join(tempfile.mkdtemp(), "prefs.csv")
>>> _ = open(p, "w").write("event_id,outcome,left.price,right.price\\ne1,1,2.0,3.5\\ne2,maybe,1,1\\n")
>>> [(n, r["outcome"]) for n, r in iter_records(p, "preference", on_error="skip")]
[(2, 1)]
"""

from __future__ import annotations

import csv
import json
import math
import time
from pathlib import Path
from typing import Any, Iterator

from learners.exceptions import InvalidInputError, InvalidParameterError, check_param
from stream.adapters.record_bytes import Chunk, loads_line
from stream.contract import SCHEMA_VERSION, DeadLetter, validate_record

__all__ = ["iter_records", "sniff_kind"]

_KINDS = ("preference", "click", "item")
_KEY_FIELD = {"preference": "event_id", "click": "session_id", "item": "item_id"}
_JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
#: records per chunk on the row path (JSONL, click and item files)
_CHUNK_RECORDS = 4096


def _num(cell: str, col: str) -> float:
    try:
        v = float(cell)
    except ValueError:
        raise InvalidInputError(f"column {col!r} must be a number; got {cell!r}") from None
    if not math.isfinite(v):
        raise InvalidInputError(f"column {col!r} must be finite; got {cell!r}")
    return v


def _ts(cell: str | None, default: float) -> float | str:
    if cell is None or cell.strip() == "":
        return default
    try:
        return float(cell)
    except ValueError:
        return cell.strip()  # ISO-8601; the contract check parses it


def _group(row: dict, prefix: str) -> dict[str, str]:
    return {k[len(prefix):]: (v or "").strip() for k, v in row.items() if k and k.startswith(prefix)}


def _side(row: dict, side: str) -> dict:
    cells = _group(row, side + ".")
    rid = (row.get(f"{side}_id") or "").strip()
    if cells and any(cells.values()):
        ref: dict[str, Any] = {"features": {k: _num(v, f"{side}.{k}") for k, v in cells.items()}}
        if rid:
            ref["id"] = rid
        return ref
    if not rid:
        raise InvalidInputError(f"{side} item has neither feature values ({side}.<feature>) nor {side}_id")
    return {"id": rid}


def _context(row: dict) -> dict | None:
    cells = _group(row, "context.")
    if not cells or not any(cells.values()):
        return None
    return {k: _num(v, f"context.{k}") for k, v in cells.items()}


def _csv_record(row: dict, kind: str, line: int, stem: str, now: float) -> dict:
    if None in row:
        raise InvalidInputError("row has more cells than the header")
    if kind == "preference":
        out_cell = (row.get("outcome") or "").strip()
        if not out_cell:
            raise InvalidInputError("column 'outcome' is empty or missing")
        try:
            o = float(out_cell)
        except ValueError:
            raise InvalidInputError(f"column 'outcome' must be 1, -1 or 0; got {out_cell!r}") from None
        rec: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "event_id": (row.get("event_id") or "").strip() or f"{stem}:{line}",
            "timestamp": _ts(row.get("timestamp"), now),
            "left": _side(row, "left"),
            "right": _side(row, "right"),
            "outcome": int(o) if o.is_integer() else o,
        }
        ctx = _context(row)
        if ctx is not None:
            rec["context"] = ctx
        if (row.get("weight") or "").strip():
            rec["weight"] = _num(row["weight"], "weight")
        if (row.get("user_id") or "").strip():
            rec["user_id"] = row["user_id"].strip()
        return rec
    if kind == "click":
        sid = (row.get("session_id") or "").strip()
        if not sid:
            raise InvalidInputError("column 'session_id' is empty or missing")
        split = lambda c: [s.strip() for s in (row.get(c) or "").split("|") if s.strip()]
        rec = {"schema_version": SCHEMA_VERSION, "session_id": sid, "timestamp": _ts(row.get("timestamp"), now),
               "shown": [{"id": i} for i in split("shown")], "clicked": split("clicked")}
        if (row.get("user_id") or "").strip():
            rec["user_id"] = row["user_id"].strip()
        ctx = _context(row)
        if ctx is not None:
            rec["context"] = ctx
        if (row.get("weight") or "").strip():
            rec["weight"] = _num(row["weight"], "weight")
        return rec
    # item
    iid = (row.get("item_id") or "").strip()
    if not iid:
        raise InvalidInputError("column 'item_id' is empty or missing")
    cells = {(k[len("features."):] if k.startswith("features.") else k): (v or "").strip()
             for k, v in row.items() if k and k not in ("item_id", "timestamp", "schema_version")}
    feats = None if not any(cells.values()) else {k: _num(v, k) for k, v in cells.items()}
    rec = {"schema_version": SCHEMA_VERSION, "item_id": iid, "features": feats}
    if (row.get("timestamp") or "").strip():
        rec["timestamp"] = _ts(row["timestamp"], now)
    return rec


def _why(exc: Exception) -> str:
    return f"{exc.reason}: {exc.detail}" if isinstance(exc, DeadLetter) else str(exc)


def _jsonl_record(text: str, kind: str, line: int, stem: str, now: float) -> Any:
    doc = loads_line(text)
    if isinstance(doc, dict):
        doc.setdefault("schema_version", SCHEMA_VERSION)
        if kind == "preference":
            doc.setdefault("event_id", f"{stem}:{line}")
        if kind in ("preference", "click"):
            doc.setdefault("timestamp", now)
    return doc


#: the column each CSV kind cannot do without, and what it holds
_REQUIRED_COLUMN = {
    "preference": ("outcome", "1 (left preferred), -1 (right preferred) or 0 (indifferent) beside "
                              "left.<feature> / right.<feature> or left_id / right_id"),
    "click": ("session_id", "the session id beside shown and clicked (item ids separated by |)"),
    "item": ("item_id", "the item id beside one column per feature"),
}
_KIND_WORDS = {"preference": "preference events", "click": "click sessions", "item": "item records"}


def sniff_kind(path: str | Path) -> str | None:
    """The record kind a CSV or JSONL file holds, from its header or first record (None: cannot tell).

    A CSV header with ``session_id`` and ``shown`` (or an Open Bandit file) holds click sessions, one
    with ``outcome`` preference events, one with ``item_id`` item records; a JSONL file is judged by
    the keys of its first object the same way.

    Examples
    --------
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "c.csv")
    >>> _ = open(p, "w").write("session_id,shown,clicked\\ns1,a|b,a\\n")
    >>> sniff_kind(p)
    'click'
    """
    p = Path(path)
    try:
        with open(p, encoding="utf-8", newline="", errors="surrogateescape") as fh:
            if p.suffix.lower() == ".csv":
                keys = {c.strip() for c in next(csv.reader(fh), [])}
            else:
                first = next((t for t in fh if t.strip()), "")
                try:
                    doc = json.loads(first)
                except ValueError:
                    return None
                keys = set(doc) if isinstance(doc, dict) else set()
    except (OSError, StopIteration):
        return None
    if {"session_id", "shown"} <= keys:
        return "click"
    if "outcome" in keys:
        return "preference"
    if "item_id" in keys:
        return "item"
    if p.suffix.lower() in (".csv", ".gz"):
        from stream.adapters.clicks import is_obd_csv

        return "click" if is_obd_csv(p) else None
    return None


def _check_header(p: Path, kind: str) -> None:
    """One clear error when a CSV lacks the column its kind cannot do without."""
    with open(p, encoding="utf-8", newline="", errors="surrogateescape") as fh:
        header = next(csv.reader(fh), None)
    if header is None:
        return
    fields = [c.strip() for c in header]
    col, what = _REQUIRED_COLUMN[kind]
    if col in fields:
        return
    other = sniff_kind(p)
    hint = f" It looks like {_KIND_WORDS[other]}: pass --kind {other}." if other not in (None, kind) else ""
    shown = ", ".join(fields[:8]) + (", …" if len(fields) > 8 else "")
    raise InvalidInputError(f"{p.name} has no {col!r} column: a {kind} CSV needs {col} ({what}); its header "
                            f"(line 1) has {shown}.{hint}")


def _iter_chunks(path: str | Path, kind: str, key: str = "event") -> Iterator[Chunk]:
    """The file as :class:`~stream.adapters.record_bytes.Chunk` s: records encoded, skipped lines with their reasons
    (``key="user"``: records with a ``user_id`` are keyed by it)."""
    check_param("iter_records", "kind", kind, kind in _KINDS, f"one of {_KINDS}")
    p = Path(path)
    if not p.is_file():
        raise InvalidParameterError(f"Replay file {str(p)!r} does not exist or is not a file.")
    if kind == "preference" and p.suffix.lower() == ".csv":
        _check_header(p, kind)
        from stream.adapters.record_bytes import preference_chunks

        now = time.time()
        fast = preference_chunks(p, p.stem, now, lambda row, line: _checked(_csv_record, row, kind, line, p.stem, now),
                                 user_key=key == "user")
        if fast is not None:
            yield from fast
            return
    chunk = Chunk(_KEY_FIELD[kind], key == "user")
    for line, rec, why in _iter_rows(p, kind):
        chunk.add(line, rec, why)
        if len(chunk) >= _CHUNK_RECORDS:
            yield chunk
            chunk = Chunk(_KEY_FIELD[kind], key == "user")
    if len(chunk):
        yield chunk


def _checked(to_record, raw, kind: str, line: int, stem: str, now: float) -> tuple[Any, str | None]:
    """``(record, None)`` of one row or line checked by the contract, or ``(None, reason)``."""
    try:
        rec = to_record(raw, kind, line, stem, now)
        validate_record(kind, rec)
    except (InvalidInputError, DeadLetter) as exc:
        return None, _why(exc)
    return rec, None


def _iter_rows(p: Path, kind: str) -> Iterator[tuple[int, dict | None, str | None]]:
    """The row path: ``(line number, record or None, skip reason or None)`` for every data line."""
    if kind == "click":
        from stream.adapters.clicks import is_obd_csv, obd_session_records

        if is_obd_csv(p):  # Open Bandit impressions (.csv or .csv.gz) → sessions with positions and propensities
            for k, rec in enumerate(obd_session_records(p), start=1):
                validate_record(kind, rec)
                yield k, rec, None
            return
    suffix = p.suffix.lower()
    if suffix not in _JSONL_SUFFIXES + (".csv",):
        raise InvalidParameterError(f"Replay file must end in .csv, .jsonl, .ndjson or .json. Got {p.name!r} instead.")
    if suffix == ".csv":
        _check_header(p, kind)
    stem, now = p.stem, time.time()
    with open(p, encoding="utf-8", newline="", errors="surrogateescape") as fh:
        if suffix == ".csv":
            reader = csv.DictReader(fh)
            if reader.fieldnames is None:
                return
            reader.fieldnames = [c.strip() for c in reader.fieldnames]
            rows = ((reader.line_num, row) for row in reader)
            to_record = _csv_record
        else:
            rows = ((line, text) for line, text in enumerate(fh, start=1) if text.strip())
            to_record = _jsonl_record
        for line, raw in rows:
            rec, why = _checked(to_record, raw, kind, line, stem, now)
            yield line, rec, why


def _iter_raw(path: str | Path, kind: str) -> Iterator[tuple[int, dict | None, str | None]]:
    """``(line number, record or None, skip reason or None)`` for every data line."""
    for chunk in _iter_chunks(path, kind):
        yield from chunk.rows()


def iter_records(path: str | Path, kind: str = "preference", on_error: str = "raise") -> Iterator[tuple[int, dict]]:
    """Read contract records from a CSV or JSONL file (the batch mode; no Kafka).

    Parameters
    ----------
    path : path
        ``.csv`` (layout in the module docstring) or ``.jsonl``/``.ndjson``/``.json`` (one record
        per line).
    kind : {"preference", "click", "item"}
    on_error : {"raise", "skip"}
        What to do with a line that is not a valid record.

    Yields
    ------
    (int, dict)
        Line number (1-based; the CSV header is line 1) and a record valid against the contract
        (item ids not resolved). Feed ``json.dumps(record).encode()`` to the ``parse_*``
        functions, or use the dict directly.

    Raises
    ------
    InvalidInputError
        ``on_error="raise"`` and an invalid line (the message gives the line number and reason).
    InvalidParameterError
        Missing file, unknown suffix, ``kind`` or ``on_error``.
    """
    check_param("iter_records", "on_error", on_error, on_error in ("raise", "skip"), "'raise' or 'skip'")
    for line, rec, why in _iter_raw(path, kind):
        if rec is None:
            if on_error == "raise":
                raise InvalidInputError(f"{Path(path).name}, line {line}: {why}. Fix or remove the line, "
                                        "or pass on_error='skip'.")
            continue
        yield line, rec


def _count_lines(path: Path) -> int | None:
    try:
        with open(path, "rb") as fh:
            n = sum(buf.count(b"\n") for buf in iter(lambda: fh.read(1 << 20), b""))
        return max(n - (1 if path.suffix.lower() == ".csv" else 0), 0)
    except OSError:
        return None
