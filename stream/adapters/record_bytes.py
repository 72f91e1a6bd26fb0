"""Records as the bytes ``prefstream replay`` sends: chunks of encoded records, and preference CSV rows encoded without a dict.

:func:`stream.event_files.iter_records` turns a CSV row into a record cell by cell (``csv`` module,
``float`` per cell, a dict, the contract check, then orjson): about 100 µs a Pokémon row (57
columns). The replay does not need the dict, only the bytes. :func:`preference_chunks` builds
them by concatenation, so that a replay costs a few microseconds a row in Python:

* a row is split at the commas only around its scalar cells (``event_id``, ``timestamp``,
  ``outcome``, ``weight``, ``left_id``, ``right_id``); the feature cells of a side
  (``left.<f>``, ``right.<f>``, ``context.<f>``) stay one run of bytes;
* each side's JSON (``{"features":{…},"id":…}``) is computed once per distinct run of cells and
  reused: a data set of comparisons between a few thousand items (the Pokémon duels reference
  800 Pokémon) encodes each item once. A cached run is found by the side's id (or the run's
  first bytes) and then compared in full (``bytes.startswith``), so a reused fragment is always
  the one those cells give. At most :data:`MAX_CACHED` fragments per side are kept; past that,
  a side is computed for its row (correct, slower);
* the event id, timestamp, outcome and weight are checked and encoded per row.

The bytes are exactly ``orjson.dumps`` of the record the row path builds
(``stream.event_files._csv_record`` then :func:`stream.contract.validate_record`), whose checks each
cell meets here: numbers parsed by ``float`` as there, finite and within
:data:`stream.contract.MAX_ABS_VALUE`, outcome in {1, −1, 0}, timestamp ≥ 0 or empty (the
replay start time), weight in :data:`stream.contract.WEIGHT_RANGE` or empty (no weight), ids of
at most 512 characters. Every row it is not sure of goes through the row path instead, so the
result — line numbers, records, skip reasons — is the row path's (``tests/test_replay_fast.py``
compares both on clean and broken files):

* a row whose cell count differs from the header's, or with an empty / non-numeric / non-finite /
  out-of-range value, an ISO-8601 timestamp, an id with spaces around it, not UTF-8, or longer
  than 512 characters;
* the rest of the file from the first chunk holding a double quote or a bare carriage return
  (quoted cells may span lines: only the ``csv`` module reads them right).

Files whose header lacks ``outcome``, repeats a column, or whose zero record the contract
refuses are read by the row path alone.

JSONL lines are decoded by :func:`loads_line`: orjson where it reads a line as ``json.loads``
would, the standard library (and its words for the reason) elsewhere.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

__all__ = ["CHUNK_BYTES", "MAX_CACHED", "Chunk", "decode_record", "encode_record", "loads_line", "preference_chunks"]

#: bytes of lines encoded at once (one :class:`Chunk`)
CHUNK_BYTES = 4 << 20
#: side fragments cached per side (left, right, context): about 1 KB each with 26 features, so
#: at most ~64 MiB a side for a file whose rows never repeat an item
MAX_CACHED = 1 << 16
#: cached fragments per lookup key (an item id, or the first bytes of a run of cells)
_PER_KEY = 8
_PREFIX = 32
_BLANK = (b"\n", b"\r\n")
_MAX_ID = 512
_SCALARS = ("event_id", "timestamp", "outcome", "weight", "left_id", "right_id", "user_id")


def encode_record(rec: Any) -> bytes:
    """A record's JSON bytes: orjson, or the standard library for what orjson refuses.

    orjson refuses integers beyond 64 bits and strings holding lone surrogates (a CSV file
    that is not UTF-8, read with ``surrogateescape``); ``json.dumps`` writes them.
    """
    import orjson

    try:
        return orjson.dumps(rec)
    except (TypeError, orjson.JSONEncodeError):
        return json.dumps(rec, separators=(",", ":"), allow_nan=False).encode("utf-8", "surrogateescape")


def decode_record(value: bytes) -> Any:
    """The record :func:`encode_record` wrote (orjson, or the standard library for what orjson refuses)."""
    import orjson

    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return json.loads(value)


#: every digit → "9": a run of 19 of them marks an integer literal orjson may read as a float
_DIGITS_AS_9 = bytes.maketrans(b"0123456789", b"9" * 10)
_LONG_RUN = b"9" * 19


def _reject_constant(token: str):
    from learners.exceptions import InvalidInputError

    raise InvalidInputError(f"non_finite: the JSON token {token} is not a finite number")


def loads_line(text: str) -> Any:
    """One JSONL line decoded as ``json.loads`` decodes it (NaN / Infinity refused), at orjson's speed.

    orjson reads most lines several times faster; where it refuses a line (NaN, a lone
    surrogate, 1e400, not JSON) or would read it otherwise (an integer of 19 or more digits, which
    it makes a float), the standard library reads it and words the reason.

    Raises
    ------
    InvalidInputError
        ``"not valid JSON: …"`` or ``"non_finite: …"``.
    """
    import orjson

    from learners.exceptions import InvalidInputError

    raw = text.encode("utf-8", "surrogateescape")
    if _LONG_RUN not in raw.translate(_DIGITS_AS_9):
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
        else:
            if doc is not None:
                return doc
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except InvalidInputError:
        raise
    except ValueError as exc:
        raise InvalidInputError(f"not valid JSON: {exc}") from None


@dataclass
class Chunk:
    """Encoded records of consecutive lines, and the lines skipped among them.

    Attributes
    ----------
    key_field : str
        The record field that is the Kafka key (``event_id``, ``session_id``, ``item_id``).
    user_key : bool
        Key a record that has a ``user_id`` by it instead (``prefstream replay --key user``: one
        person's events go to one partition, in order); records without one keep ``key_field``.
    lines : list of int
        Line number of each record (1-based; a CSV header is line 1), increasing.
    keys, values : list of bytes
        Kafka key (the record's ``event_id`` / ``session_id`` / ``item_id``, UTF-8) and value
        (the record's JSON) of each record.
    objs : dict of int to dict
        The decoded record by position in ``values``, where one was built (the row path);
        the others are :func:`decode_record` of their value.
    skipped : list of (int, str)
        ``(line, reason)`` of each line that is no valid record, increasing.
    """

    key_field: str
    user_key: bool = False
    lines: list = field(default_factory=list)
    keys: list = field(default_factory=list)
    values: list = field(default_factory=list)
    objs: dict = field(default_factory=dict)
    skipped: list = field(default_factory=list)

    def add(self, line: int, rec: Any, why: str | None) -> None:
        """Append the row path's result for one line (a record, or None and the reason)."""
        if rec is None:
            self.skipped.append((line, why))
            return
        self.objs[len(self.values)] = rec
        self.lines.append(line)
        key = str(rec.get("user_id") or rec[self.key_field]) if self.user_key else str(rec[self.key_field])
        try:  # a key read from a file that is not UTF-8 gets its bytes back
            self.keys.append(key.encode("utf-8", "surrogateescape"))
        except UnicodeEncodeError:  # a lone surrogate from a JSON escape (\ud800)
            self.keys.append(key.encode("utf-8", "surrogatepass"))
        self.values.append(encode_record(rec))

    def __len__(self) -> int:
        return len(self.values) + len(self.skipped)

    def rows(self) -> Iterator[tuple[int, Any, str | None]]:
        """``(line, record or None, skip reason or None)`` in line order (the dict view)."""
        skipped, k = self.skipped, 0
        for i, line in enumerate(self.lines):
            while k < len(skipped) and skipped[k][0] < line:
                yield skipped[k][0], None, skipped[k][1]
                k += 1
            rec = self.objs.get(i)
            yield line, (rec if rec is not None else decode_record(self.values[i])), None
        for line, why in skipped[k:]:
            yield line, None, why


class _Plan:
    """Where each cell of a row goes, decided from the header once."""

    def __init__(self, fields: list[str]) -> None:
        self.fields = fields
        self.ncomma = len(fields) - 1
        cols = {g: [i for i, c in enumerate(fields) if c.startswith(g + ".")] for g in ("left", "right", "context")}
        self.names = {g: [fields[i][len(g) + 1:] for i in ix] for g, ix in cols.items()}
        self.has_weight = "weight" in fields
        self.has_user = "user_id" in fields
        # the feature runs in header order; one run per group when its columns are consecutive
        self.runs = [(g, len(cols[g])) for _, g in sorted((ix[0], g) for g, ix in cols.items() if ix)]
        region = [i for g, _ in self.runs for i in cols[g]]
        self.region = region
        self.blocked = bool(region) and region == list(range(region[0], region[0] + len(region)))
        if self.blocked:  # split before the runs and after them: prefix cells, [runs], suffix cells
            a, b = region[0], region[0] + len(region)
            self.prefix, self.suffix = a, len(fields) - b
            width = a + 1 + self.suffix
            pos = {c: (i if i < a else a + 1 + (i - b)) for i, c in enumerate(fields) if not a <= i < b}
        else:  # split every cell and join the runs' cells
            self.prefix = self.suffix = 0
            width = len(fields)
            pos = {c: i for i, c in enumerate(fields)}
        # a column the header lacks reads the empty cell appended at ``width``
        self.width = width
        self.pos = {c: pos.get(c, width) for c in _SCALARS}
        self.id_of = {"left": "left_id" in fields, "right": "right_id" in fields, "context": False}

    def zero_record(self) -> dict:
        """A record of this layout with every value 0 and every id ``"x"`` (checks the structure)."""
        rec: dict = {"schema_version": 1, "event_id": "x", "timestamp": 0.0}
        for s in ("left", "right"):
            feats = dict.fromkeys(self.names[s], 0.0)
            rec[s] = ({"features": feats} if feats else {}) | {"id": "x"}
        rec["outcome"] = 1
        if self.names["context"]:
            rec["context"] = dict.fromkeys(self.names["context"], 0.0)
        if self.has_weight:
            rec["weight"] = 1.0
        if self.has_user:
            rec["user_id"] = "x"
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


def preference_chunks(path: str | Path, stem: str, now: float, row_path: Callable,
                      user_key: bool = False) -> Iterator[Chunk] | None:
    """The :class:`Chunk` s of a preference CSV, with the row path's lines, records and reasons.

    Parameters
    ----------
    path : path
        The CSV file (header on line 1).
    stem, now : str, float
        Default event id prefix (``"<stem>:<line>"``) and timestamp, as in
        :func:`stream.event_files.iter_records`.
    row_path : callable
        ``row_path(row: dict, line: int) -> (record or None, reason or None)``: the row path
        (``csv.DictReader`` row in, record checked by the contract out).
    user_key : bool, default False
        Kafka key = the row's ``user_id`` where it has one (:class:`Chunk`).

    Returns
    -------
    iterator of Chunk, or None
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
    return _chunks(p, plan, len(head), _Encoder(plan, stem, now, user_key), row_path)


def _slow(text: str, fields: list[str], first_line: int, row_path, chunk: Chunk) -> None:
    """The row path over ``text`` (lines from ``first_line`` on), with csv's own line numbers."""
    reader = csv.DictReader(io.StringIO(text, newline=""), fieldnames=fields)
    for row in reader:
        line = first_line - 1 + reader.line_num
        chunk.add(line, *row_path(row, line))


def _chunks(p: Path, plan: _Plan, offset: int, enc: "_Encoder", row_path) -> Iterator[Chunk]:
    line0 = 2
    with open(p, "rb") as fh:
        fh.seek(offset)
        while True:
            pos = fh.tell()
            lines = fh.readlines(CHUNK_BYTES)
            if not lines:
                return
            chunk = Chunk("event_id", enc.user_key)
            data = b"".join(lines)
            if b'"' in data or data.count(b"\r") != data.count(b"\r\n"):
                fh.seek(pos)  # the csv module reads the rest (quoted cells may span lines)
                text = io.TextIOWrapper(fh, encoding="utf-8", errors="surrogateescape", newline="")
                reader = csv.DictReader(text, fieldnames=plan.fields)
                for row in reader:
                    line = line0 - 1 + reader.line_num
                    chunk.add(line, *row_path(row, line))
                    if len(chunk) >= 4096:
                        yield chunk
                        chunk = Chunk("event_id", enc.user_key)
                yield chunk
                return
            slow = enc.encode(lines, line0, chunk)
            for i in slow:  # lines the encoder left to the row path (no quotes: one line, one row)
                _slow(lines[i].decode("utf-8", "surrogateescape"), plan.fields, line0 + i, row_path, chunk)
            if slow:  # their records were appended after the encoder's
                _sort(chunk)
            line0 += len(lines)
            yield chunk


def _sort(chunk: Chunk) -> None:
    """Put a chunk's records back in line order (row-path lines were appended at its end)."""
    order = sorted(range(len(chunk.lines)), key=chunk.lines.__getitem__)
    if order == list(range(len(order))):
        return
    objs = chunk.objs
    chunk.objs = {j: objs[i] for j, i in enumerate(order) if i in objs}
    chunk.lines = [chunk.lines[i] for i in order]
    chunk.keys = [chunk.keys[i] for i in order]
    chunk.values = [chunk.values[i] for i in order]


class _Encoder:
    """Rows → record bytes, with the side fragments cached across chunks (see the module docstring)."""

    def __init__(self, plan: _Plan, stem: str, now: float, user_key: bool = False) -> None:
        import orjson

        self.plan, self.stem, self.user_key = plan, stem, user_key
        self.now_json = orjson.dumps(now)
        self.outcomes = {b"1": b"1", b"-1": b"-1", b"0": b"0"}
        self.runs = {g: {} for g, _ in plan.runs}  # group -> {lookup key: [(run bytes + ",", fragment)]}
        self.cached = dict.fromkeys(self.runs, 0)
        self.id_refs: dict[bytes, bytes | None] = {}  # side id -> '{"id":…}' (sides without feature columns)

    # -- one cell or run, computed (cache misses) --------------------------------------------
    @staticmethod
    def _id(cell: bytes) -> str | None:
        """The id a cell holds, or None when the row path must judge it (spaces, not UTF-8, too long)."""
        try:
            s = cell.decode()
        except UnicodeDecodeError:
            return None
        return s if s == s.strip() and len(s) <= _MAX_ID else None

    def _fragment(self, group: str, cells: list[bytes], rid: bytes) -> bytes | None:
        """The JSON of a side (``{"features":…,"id":…}``) or of a context (``,"context":{…}``), None: row path."""
        import orjson

        from stream.contract import MAX_ABS_VALUE

        if not any(cells):
            if group == "context":
                return b""
            i = self._id(rid) if rid else None
            return orjson.dumps({"id": i}) if i else None
        vals = []
        for c in cells:
            try:
                v = float(c)
            except ValueError:
                return None
            if not -MAX_ABS_VALUE <= v <= MAX_ABS_VALUE:
                return None
            vals.append(v)
        feats = dict(zip(self.plan.names[group], vals))
        if group == "context":
            return b',"context":' + orjson.dumps(feats)
        if not rid:
            return orjson.dumps({"features": feats})
        i = self._id(rid)
        return orjson.dumps({"features": feats, "id": i}) if i else None

    def _run(self, group: str, n: int, region: bytes, off: int, rid: bytes) -> tuple[bytes | None, int]:
        """(fragment, bytes of the run + its comma) of the ``n`` cells of ``region`` from ``off`` (a cache miss)."""
        cells = region[off:].split(b",", n)[:n]
        size = sum(map(len, cells)) + n
        frag = self._fragment(group, cells, rid)
        if frag is not None and self.cached[group] < MAX_CACHED:
            key = rid if self.plan.id_of[group] else region[off:off + _PREFIX]
            cands = self.runs[group].setdefault(key, [])
            if len(cands) < _PER_KEY:
                cands.append((region[off:off + size], frag))
                self.cached[group] += 1
        return frag, size

    def _id_ref(self, rid: bytes) -> bytes | None:
        frag = self.id_refs.get(rid, b"")
        if frag == b"":
            frag = self._fragment("left", [], rid)
            if len(self.id_refs) < MAX_CACHED:
                self.id_refs[rid] = frag
        return frag

    def _outcome(self, cell: bytes) -> bytes | None:
        try:
            o = float(cell)
        except ValueError:
            return None
        if o not in (1.0, -1.0, 0.0):
            return None
        js = str(int(o)).encode()
        if len(self.outcomes) < 64:
            self.outcomes[cell] = js
        return js

    # -- the loop ----------------------------------------------------------------------------
    def encode(self, lines: list[bytes], line0: int, chunk: Chunk) -> list[int]:
        """Append the records of ``lines`` (line numbers from ``line0``) to ``chunk``.

        Returns the indices of the lines left to the row path (blank lines are dropped, as the
        ``csv`` module drops them).
        """
        import orjson

        from stream.contract import WEIGHT_RANGE

        plan = self.plan
        dumps, join, inf = orjson.dumps, b"".join, float("inf")
        ncomma, blocked, prefix, suffix = plan.ncomma, plan.blocked, plan.prefix, plan.suffix
        region_cols = plan.region if not blocked else None
        p_eid, p_ts, p_out, p_w, p_lid, p_rid, p_uid = (plan.pos[c] for c in _SCALARS)
        user_key = self.user_key
        slot = {"left": 0, "right": 1, "context": 2}
        id_at = {"left": p_lid, "right": p_rid, "context": plan.width}  # the context has no id: the empty cell
        runs = [(slot[g], g, n, self.runs[g], plan.id_of[g], id_at[g]) for g, n in plan.runs]
        left_run, right_run = "left" in self.runs, "right" in self.runs
        has_w = plan.has_weight
        outcomes, now_json, stem = self.outcomes, self.now_json, self.stem
        w_lo, w_hi = WEIGHT_RANGE
        lines_out, keys, values = chunk.lines, chunk.keys, chunk.values
        slow: list[int] = []
        for i, ln in enumerate(lines):
            if ln.count(b",") != ncomma:
                if ln not in _BLANK:
                    slow.append(i)
                continue
            s = ln.rstrip(b"\r\n")
            if blocked:
                parts = s.split(b",", prefix)
                if suffix:
                    parts[prefix:] = parts[prefix].rsplit(b",", suffix)
                region = parts[prefix] + b","
            else:
                parts = s.split(b",")
                region = b",".join(map(parts.__getitem__, region_cols)) + b"," if region_cols else b""
            parts.append(b"")
            # event id (the Kafka key)
            key = parts[p_eid]
            if key:
                try:
                    e = key.decode()
                except UnicodeDecodeError:
                    slow.append(i)
                    continue
                if len(e) > _MAX_ID or e != e.strip():
                    slow.append(i)
                    continue
            else:
                e = f"{stem}:{line0 + i}"
                key = e.encode("utf-8", "surrogateescape")
            # timestamp
            tc = parts[p_ts]
            if tc:
                try:
                    t = float(tc)
                except ValueError:  # ISO-8601 (or not a time): the row path
                    slow.append(i)
                    continue
                if not 0.0 <= t < inf:
                    slow.append(i)
                    continue
                tj = dumps(t)
            else:
                tj = now_json
            oj = outcomes.get(parts[p_out]) or self._outcome(parts[p_out])
            if oj is None:
                slow.append(i)
                continue
            wj = b""
            if has_w and parts[p_w]:
                try:
                    w = float(parts[p_w])
                except ValueError:
                    slow.append(i)
                    continue
                if not w_lo <= w <= w_hi:
                    slow.append(i)
                    continue
                wj = b',"weight":' + dumps(w)
            uj = b""
            uc = parts[p_uid]
            if uc:
                u = self._id(uc)
                if u is None:
                    slow.append(i)
                    continue
                try:
                    uj = b',"user_id":' + dumps(u)
                except orjson.JSONEncodeError:
                    slow.append(i)
                    continue
            # the feature runs, in header order
            off, fr = 0, [None, None, b""]
            for k, g, n, cache, by_id, rid_at in runs:
                rid = parts[rid_at]
                for run, frag in cache.get(rid if by_id else region[off:off + _PREFIX], ()):
                    if region.startswith(run, off):
                        off += len(run)
                        break
                else:
                    frag, size = self._run(g, n, region, off, rid)
                    off += size
                fr[k] = frag
            left = fr[0] if left_run else self._id_ref(parts[p_lid])
            right = fr[1] if right_run else self._id_ref(parts[p_rid])
            context = fr[2]
            if left is None or right is None or context is None:
                slow.append(i)
                continue
            try:
                ej = dumps(e)
            except orjson.JSONEncodeError:  # a lone surrogate in the file's name
                slow.append(i)
                continue
            lines_out.append(line0 + i)
            keys.append(uc if user_key and uc else key)
            values.append(join((b'{"schema_version":1,"event_id":', ej, b',"timestamp":', tj, b',"left":', left,
                                b',"right":', right, b',"outcome":', oj, context, wj, uj,
                                b"}")))
        return slow
