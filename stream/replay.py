"""Replay a CSV or JSONL file into a Kafka topic as contract-valid records (``prefstream replay FILE``).

Every line becomes one record of the event contract (:mod:`stream.contract`), is validated at
the source with :func:`stream.contract.validate_record`, encoded with orjson (preference CSV
rows straight to the same bytes without a dict, :mod:`stream.adapters.record_bytes`) and sent
in chunks with a confluent-kafka (librdkafka) producer (``acks="all"``, idempotence on, key =
``event_id`` / ``session_id`` / ``item_id`` as UTF-8, ``linger_ms`` batching;
:mod:`stream.broker.producer` maps the kafka-python options of the rest of prefstream onto it).
A line that cannot be turned into a valid record is *skipped* (counted, reported with its line
number, not fatal); a record the producer fails to deliver is *failed*.

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
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from learners.exceptions import InvalidInputError, InvalidParameterError, PrefstreamError, check_param
from stream.adapters.record_bytes import Chunk, loads_line
from stream.contract import SCHEMA_VERSION, DeadLetter, validate_record

__all__ = ["BrokerUnavailable", "ReplayInterrupted", "ReplayResult", "TokenBucket", "iter_records", "replay", "sniff_kind"]

_KINDS = ("preference", "click", "item")
_KEY_FIELD = {"preference": "event_id", "click": "session_id", "item": "item_id"}
_JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
_MAX_REPORTED = 1000
#: records per chunk on the row path (JSONL, click and item files)
_CHUNK_RECORDS = 4096
_FAILURE_HINTS = {
    "MessageSizeTooLargeError": " (raise --max-request-bytes / PREFSTREAM_MAX_REQUEST_BYTES, and the topic's "
                                "max.message.bytes if the broker refuses it)",
    "KafkaTimeoutError": " (the broker did not acknowledge in time: is it reachable and the topic there?)",
}


class BrokerUnavailable(PrefstreamError, ConnectionError):
    """No Kafka broker answered at the bootstrap address."""


class ReplayInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`replay`; ``result`` counts what was sent (delivered) before it."""

    def __init__(self, result: "ReplayResult") -> None:
        super().__init__(f"interrupted after sending {result.sent} records")
        self.result = result


@dataclass
class ReplayResult:
    """Outcome of :func:`replay`.

    Attributes
    ----------
    sent : int
        Records acknowledged by the broker (``acks=all``).
    skipped : int
        Lines that could not be turned into a valid record.
    failed : int
        Records the producer could not deliver (errors from ``send`` or its future).
    seconds : float
        Wall-clock seconds from the first send to the final flush.
    skipped_lines : list of (int, str)
        ``(line number, reason)`` of the first 1000 skipped lines (line 1 is the CSV header).
    errors : list of str
        The first 1000 producer error messages.
    failure_reasons : dict of str to [int, str]
        Per failure reason (the producer error's class), ``[count, first message]``: every failed
        record is in exactly one reason, so the counts add up to ``failed``.
    """

    sent: int = 0
    skipped: int = 0
    failed: int = 0
    seconds: float = 0.0
    skipped_lines: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    failure_reasons: dict = field(default_factory=dict)

    def failure_summary(self) -> list[str]:
        """One line per failure reason: ``"failed=<n> reason=<Error>: <first message><hint>"``."""
        out = []
        for reason, (n, msg) in sorted(self.failure_reasons.items(), key=lambda kv: -kv[1][0]):
            out.append(f"failed={n} reason={reason}: {msg}{_FAILURE_HINTS.get(reason, '')}")
        return out

    @property
    def events_per_s(self) -> float:
        """Acknowledged records per second."""
        return self.sent / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> str:
        """``"sent=… skipped=… failed=… seconds=… events_per_s=…"``."""
        return (f"sent={self.sent} skipped={self.skipped} failed={self.failed} "
                f"seconds={self.seconds:.3f} events_per_s={self.events_per_s:.1f}")


class TokenBucket:
    """Token-bucket pacer: at most ``rate`` acquisitions per second on average, bursts ≤ ``burst``.

    Parameters
    ----------
    rate : float
        Tokens per second, > 0.
    burst : float, optional
        Bucket capacity; default ``max(1, rate / 100)`` (≈ 10 ms of traffic).
    clock, sleep : callables
        Injected for tests (default :func:`time.monotonic`, :func:`time.sleep`).
    """

    def __init__(self, rate: float, burst: float | None = None, clock=time.monotonic, sleep=time.sleep) -> None:
        check_param("TokenBucket", "rate", rate,
                    isinstance(rate, (int, float)) and not isinstance(rate, bool) and math.isfinite(rate) and rate > 0,
                    "a float in the range (0, inf)")
        self.rate = float(rate)
        self.burst = float(burst) if burst is not None else max(1.0, self.rate / 100.0)
        check_param("TokenBucket", "burst", burst, self.burst >= 1.0, "a float ≥ 1")
        self._clock, self._sleep = clock, sleep
        self._tokens = self.burst
        self._last = clock()

    def acquire(self) -> None:
        """Take one token, sleeping until one is available."""
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        self._last = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return
        # sleep until the next token exists, then spend it; account from the due time, not from
        # the (possibly later) wake-up, so oversleeping is caught up within the burst size
        wait = (1.0 - self._tokens) / self.rate
        self._sleep(wait)
        self._last = now + wait
        self._tokens = 0.0


# ---------------------------------------------------------------------------- reading
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


# ---------------------------------------------------------------------------- sending
def replay(path: str | Path, bootstrap: str | list[str], topic: str, rate: float | None = None,
           kind: str = "preference", progress: bool = True, client_options: dict | None = None,
           max_report: int = 20, key: str = "event") -> ReplayResult:
    """Send every valid record of ``path`` to ``topic`` and wait until the broker acknowledged them.

    Parameters
    ----------
    path : path
        CSV or JSONL file (layouts in the module docstring).
    bootstrap : str or list of str
        ``"host:port[,host:port]"`` of the Kafka cluster.
    topic : str
        Destination topic.
    rate : float, optional
        Target records per second (token bucket); ``None`` = as fast as possible.
    kind : {"preference", "click", "item"}
    progress : bool, default True
        Show a tqdm progress bar on stderr and report the first ``max_report`` skipped lines.
    client_options : dict, optional
        Producer options in kafka-python's names (security options from
        :meth:`stream.settings.Settings.kafka_client_options`, ``max_request_size`` /
        ``compression_type`` from :meth:`~stream.settings.Settings.producer_options`, and
        ``bootstrap_timeout_ms``, how long to wait for the broker, default 10 s), mapped onto
        librdkafka by :func:`stream.broker.producer.confluent_config`; librdkafka properties
        (``"linger.ms"``) pass through. They override the defaults ``acks="all"``, idempotence on,
        ``linger_ms=20``, ``batch_size=1 MiB``, no compression.
    max_report : int, default 20
        Skipped lines printed to stderr when ``progress`` is true.
    key : {"event", "user"}, default "event"
        The Kafka key: the record's ``event_id`` / ``session_id`` / ``item_id``, or with ``"user"``
        its ``user_id`` where it has one (a person's events then land on one partition, in order;
        records without a ``user_id`` keep their id).

    Returns
    -------
    ReplayResult

    Raises
    ------
    BrokerUnavailable
        If no broker answers at ``bootstrap`` (the message carries librdkafka's last error, e.g.
        an authentication or TLS failure).
    InvalidParameterError
        Bad ``kind``, ``rate``, missing or unsupported file, or a client option librdkafka lacks.

    Notes
    -----
    The producer is confluent-kafka (librdkafka), chosen by measurement (``bench/replay_rate.py``,
    README "Replay"): records are encoded as they are read, a chunk of about 4 MiB at a time
    (preference CSV rows straight to bytes, :mod:`stream.adapters.record_bytes`), handed to
    librdkafka's queue in one loop (:meth:`~stream.broker.producer.Sender.send_many`), and
    batched, compressed and sent by its own threads while the next chunk is read; only failures
    call back into Python.
    """
    from stream.broker.producer import Sender

    check_param("replay", "kind", kind, kind in _KINDS, f"one of {_KINDS}")
    check_param("replay", "key", key, key in ("event", "user"), "'event' or 'user'")
    if rate is not None:
        check_param("replay", "rate", rate, isinstance(rate, (int, float)) and not isinstance(rate, bool)
                    and math.isfinite(rate) and rate > 0, "a float in the range (0, inf) or None")
    p = Path(path)
    if not p.is_file():
        raise InvalidParameterError(f"Replay file {str(p)!r} does not exist or is not a file.")
    servers = [s.strip() for s in bootstrap.split(",")] if isinstance(bootstrap, str) else list(bootstrap)
    opts: dict[str, Any] = {"client_id": "prefstream-replay", **(client_options or {}), "bootstrap_servers": servers}
    probe_s = float(opts.get("bootstrap_timeout_ms") or 10_000) / 1000.0

    res = ReplayResult()

    def failed(reason: str, msg: str) -> None:
        res.failed += 1
        if len(res.errors) < _MAX_REPORTED:
            res.errors.append(f"{reason}: {msg}")
        slot = res.failure_reasons.setdefault(reason, [0, " ".join(msg.split())[:300]])
        slot[0] += 1

    sender = Sender(opts, failed)
    if not sender.probe(probe_s):
        sender.flush(0)
        why = f" (last error: {sender.last_error})" if sender.last_error else ""
        raise BrokerUnavailable(f"No Kafka broker answers at {','.join(servers)}{why}; start the local one with "
                                "`prefstream broker start` or pass the address of your cluster.") from None

    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=_count_lines(p), unit="ev", desc=f"replay {p.name} → {topic}", file=sys.stderr,
                   dynamic_ncols=True, mininterval=0.5)
    bucket = TokenBucket(rate) if rate is not None else None
    t0 = time.perf_counter()
    try:
        for chunk in _iter_chunks(p, kind, key):
            for line, why in chunk.skipped:
                res.skipped += 1
                if len(res.skipped_lines) < _MAX_REPORTED:
                    res.skipped_lines.append((line, why))
                if bar is not None and res.skipped <= max_report:
                    bar.write(f"skipped line {line}: {why}", file=sys.stderr)
            if bucket is None:
                sender.send_many(topic, chunk.keys, chunk.values)
                if bar is not None:
                    bar.update(len(chunk))
            else:  # paced: the bar moves record by record
                if bar is not None:
                    bar.update(len(chunk.skipped))
                for key, value in zip(chunk.keys, chunk.values):
                    bucket.acquire()
                    sender.send(topic, key, value)
                    sender.poll(0)
                    if bar is not None:
                        bar.update(1)
            sender.poll(0)
        sender.flush()
    except KeyboardInterrupt:  # Ctrl-C: deliver what was queued (5 s at most) and say how much went out
        sender.flush(5)
        res.sent = sender.delivered
        raise ReplayInterrupted(res) from None
    finally:
        res.seconds = time.perf_counter() - t0
        if bar is not None:
            bar.close()
    res.sent = sender.delivered
    return res
