"""The prefstream event contract: parse, validate and dead-letter every message at ingest.

Every message on a prefstream topic is UTF-8 JSON carrying ``"schema_version": 1`` and is
described by a JSON Schema (draft 2020-12) under ``stream/schemas/``:

=====================  ==============================  ==========================================
record                 schema file                     topic (default name), key
=====================  ==============================  ==========================================
preference event       ``preference.v1.json``          ``prefstream.preferences``, event_id
item-catalog record    ``item.v1.json``                ``prefstream.items`` (compacted), item_id
click session          ``click_session.v1.json``       ``prefstream.clicks``, session_id
model snapshot (meta)  ``model_snapshot.v1.json``      ``prefstream.models`` (compacted), model
explain request        ``explain_request.v1.json``     ``prefstream.explain-requests``, request_id
explanation record     ``explanation.v1.json``         ``prefstream.explanations``, request_id
dead-letter record     ``dead_letter.v1.json``         ``prefstream.dead-letters``, source key
drift record           ``drift.v1.json``               ``prefstream.drift``, model
=====================  ==============================  ==========================================

A message that fails validation raises :class:`DeadLetter` with exactly one machine-readable
``reason`` from :data:`DEAD_LETTER_REASONS`; the worker turns it into a dead-letter record with
:func:`dead_letter_record`, counts the reason, and keeps running. Checks run in this order, and
the first failing one decides the reason:

1. ``oversize`` — raw payload longer than ``max_bytes`` (checked before any parsing);
2. ``malformed_json`` — not UTF-8, not JSON, trailing data, or a null (tombstone) value;
3. ``non_finite`` — the JSON tokens ``NaN``/``Infinity``/``-Infinity`` (Python's :mod:`json`
   accepts them; JSON does not);
4. ``not_an_object`` — the top-level value is not a JSON object;
5. ``missing_field`` / ``wrong_type`` / ``unknown_schema_version`` for ``schema_version``;
6. JSON Schema validation: ``missing_field`` (``required``, or an item reference with neither
   ``id`` nor ``features``), ``wrong_type`` (``type``), ``invalid_outcome`` (any failure of a
   present ``outcome``), otherwise ``schema_violation`` (unknown field, empty string, weight ≤ 0,
   …); when several errors are present the first in that order wins;
7. checks JSON Schema cannot express: ``non_finite`` (numbers that overflow to ±inf, such as
   ``1e400``), ``schema_violation`` (left and right with different feature names, an
   unparseable ISO timestamp, clicked items not among the shown ones, duplicate shown ids,
   a ``position`` given for only some shown items — :func:`stream.clicklog.slot_problem`);
8. ``unknown_item`` — an item referenced by id that the item catalog does not hold.

Speed: validating a dict with :mod:`jsonschema` costs ~200 µs, too slow for the per-event path.
:func:`parse_preference` (and :func:`parse_click_session`) therefore first runs a hand-written
check that accepts a strict subset of what the schema accepts (tested against :mod:`jsonschema` on valid and mutated events in
``tests/test_contract.py``); only messages it does not accept go through the compiled
:mod:`jsonschema` validator, which then decides the reason. The valid path costs a few µs plus
``json.loads``.
"""

from __future__ import annotations

import base64
import json
import math
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Mapping

from jsonschema import Draft202012Validator

from learners.exceptions import InvalidInputError, SnapshotError
from learners.state import dump_state, load_state
from stream import clicklog

__all__ = [
    "DEAD_LETTER_REASONS",
    "SCHEMA_DIR",
    "SCHEMA_VERSION",
    "DeadLetter",
    "ExplainRequest",
    "ItemCatalog",
    "PreferenceExample",
    "click_session_from_doc",
    "dead_letter_record",
    "decode_json",
    "decode_snapshot",
    "encode_snapshot",
    "explanation_record_ok",
    "load_schema",
    "parse_click_session",
    "parse_explain_request",
    "parse_item",
    "parse_preference",
    "preference_from_doc",
    "validate_record",
    "validator",
]

#: Contract version this build reads and writes.
SCHEMA_VERSION = 1

#: Every machine-readable dead-letter reason (the ``reason`` label of the dead-letter metric).
DEAD_LETTER_REASONS = (
    "malformed_json",
    "not_an_object",
    "unknown_schema_version",
    "missing_field",
    "wrong_type",
    "non_finite",
    "unknown_item",
    "oversize",
    "invalid_outcome",
    "schema_violation",
)

#: Directory holding the JSON Schema files.
SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"

_DEFAULT_MAX_BYTES = 1_048_576
_DETAIL_MAX = 500


class DeadLetter(InvalidInputError):
    """A message that violates the event contract; goes to the dead-letter topic.

    Parameters
    ----------
    reason : str
        One of :data:`DEAD_LETTER_REASONS`.
    detail : str
        What was expected, what came, how to fix it.

    Attributes
    ----------
    reason, detail : str
    """

    def __init__(self, reason: str, detail: str) -> None:
        if reason not in DEAD_LETTER_REASONS:
            raise ValueError(f"Unknown dead-letter reason {reason!r}; expected one of {DEAD_LETTER_REASONS}.")
        self.reason = reason
        self.detail = detail if len(detail) <= _DETAIL_MAX else detail[: _DETAIL_MAX - 3] + "..."
        super().__init__(f"{reason}: {self.detail}")

    def __reduce__(self):  # keep picklable across executor boundaries
        return (type(self), (self.reason, self.detail))


# --------------------------------------------------------------------------- schemas
_SCHEMA_NAMES = ("preference", "item", "click_session", "model_snapshot", "explanation", "dead_letter",
                 "explain_request", "drift")
_VALIDATORS: dict[str, Draft202012Validator] = {}


def load_schema(name: str) -> dict:
    """The JSON Schema ``stream/schemas/<name>.v1.json`` as a dict.

    Parameters
    ----------
    name : str
        One of ``"preference"``, ``"item"``, ``"click_session"``, ``"model_snapshot"``,
        ``"explanation"``, ``"dead_letter"``, ``"explain_request"``.

    Raises
    ------
    InvalidInputError
        For an unknown schema name.
    """
    if name not in _SCHEMA_NAMES:
        raise InvalidInputError(f"Unknown schema {name!r}; expected one of {_SCHEMA_NAMES}.")
    with open(SCHEMA_DIR / f"{name}.v{SCHEMA_VERSION}.json", encoding="utf-8") as fh:
        return json.load(fh)


def validator(name: str) -> Draft202012Validator:
    """The compiled (cached) :class:`jsonschema.Draft202012Validator` for schema ``name``."""
    v = _VALIDATORS.get(name)
    if v is None:
        schema = load_schema(name)
        Draft202012Validator.check_schema(schema)
        v = _VALIDATORS[name] = Draft202012Validator(schema)
    return v


# ------------------------------------------------------------------------ decoding
class _NonFiniteToken(ValueError):
    pass


def _reject_constant(token: str):
    raise _NonFiniteToken(token)


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def _decode(raw: Any, max_bytes: int) -> Any:
    """Bytes → JSON value, with the oversize / malformed / NaN-token checks (steps 1–3)."""
    if raw is None:
        raise DeadLetter("malformed_json", "The message value is null (a Kafka tombstone); expected a JSON object.")
    if isinstance(raw, str):
        size = len(raw.encode("utf-8", "surrogatepass")) if len(raw) * 4 > max_bytes else len(raw)
        if size > max_bytes:
            raise DeadLetter("oversize", f"The payload has {size} bytes; the limit is {max_bytes} (max_message_bytes).")
        text = raw
    else:
        if isinstance(raw, memoryview):
            raw = raw.tobytes()
        if not isinstance(raw, (bytes, bytearray)):
            raise DeadLetter("malformed_json", f"Expected the message value as bytes; got {type(raw).__name__}.")
        if len(raw) > max_bytes:
            raise DeadLetter("oversize", f"The payload has {len(raw)} bytes; the limit is {max_bytes} (max_message_bytes).")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DeadLetter("malformed_json", f"The payload is not UTF-8 text: {exc}.") from None
    try:
        return _DECODER.decode(text)
    except _NonFiniteToken as exc:
        raise DeadLetter("non_finite", f"The payload contains the non-standard JSON token {exc.args[0]}; "
                                       "send finite numbers only (NaN and Infinity are not JSON).") from None
    except (ValueError, RecursionError) as exc:
        raise DeadLetter("malformed_json", f"The payload is not valid JSON: {exc}.") from None


def decode_json(raw: Any, max_bytes: int = _DEFAULT_MAX_BYTES) -> Any:
    """Steps 1–3 (oversize, malformed JSON, NaN tokens) with the standard library: the reference
    decoder; raises :class:`DeadLetter`."""
    return _decode(raw, max_bytes)


def _check_object_and_version(doc: Any, what: str) -> dict:
    """Steps 4–5: a JSON object whose ``schema_version`` is 1."""
    if not isinstance(doc, dict):
        raise DeadLetter("not_an_object", f"A {what} must be a JSON object; got a JSON {_json_type(doc)}.")
    if "schema_version" not in doc:
        raise DeadLetter("missing_field", f"The {what} lacks 'schema_version'; add \"schema_version\": {SCHEMA_VERSION}.")
    sv = doc["schema_version"]
    if isinstance(sv, bool) or not isinstance(sv, (int, float)):
        raise DeadLetter("wrong_type", f"'schema_version' must be an integer; got a JSON {_json_type(sv)} ({sv!r}).")
    if sv != SCHEMA_VERSION:
        raise DeadLetter("unknown_schema_version",
                         f"schema_version {sv!r} is not supported; this build reads version {SCHEMA_VERSION}. "
                         "Upgrade prefstream or produce version 1 messages.")
    return doc


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


# ------------------------------------------------------------- jsonschema → reason
_REASON_RANK = {"missing_field": 0, "wrong_type": 1, "invalid_outcome": 2, "schema_violation": 3}


def _path(err) -> str:
    return ".".join(str(p) for p in err.absolute_path) or "<root>"


def _classify_one(err) -> tuple[str, str]:
    path = list(err.absolute_path)
    if err.validator == "required":
        return "missing_field", f"{_path(err)}: {err.message}"
    if path and path[0] == "outcome":
        return "invalid_outcome", f"'outcome' must be 1 (left preferred), -1 (right preferred) or 0 (indifferent); got {err.instance!r}."
    if err.validator in ("anyOf", "oneOf") and err.context:
        if all(sub.validator == "required" for sub in err.context):
            return "missing_field", f"{_path(err)}: needs one of " + " or ".join(
                repr(sub.validator_value[0]) for sub in err.context) + "."
        # branches whose type matched the instance explain the failure better than the others
        mismatched = {sub.relative_schema_path[0] for sub in err.context
                      if sub.validator == "type" and not sub.relative_path}
        relevant = [sub for sub in err.context if sub.relative_schema_path[0] not in mismatched]
        if not relevant:
            return "wrong_type", f"{_path(err)}: a JSON {_json_type(err.instance)} ({_short(err.instance)}) is none of the allowed types."
        # among those, the branch that got deepest into the instance is the one the sender meant
        depth = {}
        for sub in relevant:
            b = sub.relative_schema_path[0]
            depth[b] = max(depth.get(b, 0), len(sub.relative_path))
        deepest = max(depth.values())
        return _classify([sub for sub in relevant if depth[sub.relative_schema_path[0]] == deepest])
    if err.validator == "type":
        return "wrong_type", f"{_path(err)}: expected {err.validator_value}, got a JSON {_json_type(err.instance)} ({_short(err.instance)})."
    return "schema_violation", f"{_path(err)}: {_short_msg(err.message)}"


def _classify(errors) -> tuple[str, str]:
    best = None
    for err in errors:
        r = _classify_one(err)
        if best is None or _REASON_RANK[r[0]] < _REASON_RANK[best[0]]:
            best = r
    return best


def _short(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 80 else s[:77] + "..."


def _short_msg(s: str) -> str:
    return s if len(s) <= 300 else s[:297] + "..."


def _schema_check(name: str, doc: dict) -> None:
    """Step 6: run the compiled jsonschema validator and raise the ranked reason."""
    errors = list(validator(name).iter_errors(doc))
    if errors:
        raise DeadLetter(*_classify(errors))


# ------------------------------------------------------------------- conversions
def _features(d: Mapping[str, Any], where: str) -> dict[str, float]:
    """Numbers → finite floats (schema already checked the types)."""
    out = {}
    for k, v in d.items():
        try:
            f = float(v)
        except OverflowError:
            f = math.inf
        if f - f != 0.0:  # nan or ±inf
            raise DeadLetter("non_finite", f"{where}.{k} must be a finite number; got {v!r}.")
        out[k] = f
    return out


def _timestamp(v: Any, where: str = "timestamp") -> float:
    if isinstance(v, str):
        try:
            dt = datetime.fromisoformat(v)
        except ValueError:
            raise DeadLetter("schema_violation", f"'{where}' must be unix seconds or an ISO-8601 date-time "
                                                 f"such as '2024-05-01T12:00:00Z'; got {v!r}.") from None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=timezone.utc)
        return dt.timestamp()
    try:
        f = float(v)
    except OverflowError:
        f = math.inf
    if not math.isfinite(f):
        raise DeadLetter("non_finite", f"'{where}' must be a finite number of unix seconds; got {v!r}.")
    return f


def _weight(v: Any) -> float:
    try:
        f = float(v)
    except OverflowError:
        f = math.inf
    if not math.isfinite(f):
        raise DeadLetter("non_finite", f"'weight' must be a finite number > 0; got {v!r}.")
    return f


# ------------------------------------------------------------------- item catalog
class ItemCatalog:
    """In-memory view of the compacted item topic: ``item_id → {feature: float}``.

    The learner/explainer worker replays the item topic into one of these (latest record per key
    wins; a ``features: null`` record or a Kafka tombstone deletes the item) and passes it to
    :func:`parse_preference` / :func:`parse_click_session` to resolve ``{"id": ...}`` references.

    Examples
    --------
    >>> cat = ItemCatalog()
    >>> cat.upsert({"schema_version": 1, "item_id": "a", "features": {"price": 3.0}})
    >>> cat.get("a"), len(cat), "a" in cat
    ({'price': 3.0}, 1, True)
    >>> cat.upsert({"schema_version": 1, "item_id": "a", "features": None})
    >>> len(cat)
    0
    """

    def __init__(self) -> None:
        self._items: dict[str, dict[str, float]] = {}

    def upsert(self, record: Mapping[str, Any]) -> None:
        """Insert, replace or (``features`` None) delete one item.

        Parameters
        ----------
        record : dict
            An item-catalog record as returned by :func:`parse_item`.

        Raises
        ------
        DeadLetter
            ``missing_field`` if ``item_id`` is absent (records from :func:`parse_item` always
            have it).
        """
        try:
            item_id = record["item_id"]
        except (KeyError, TypeError):
            raise DeadLetter("missing_field", "An item-catalog record needs 'item_id'.") from None
        feats = record.get("features")
        if feats is None:
            self._items.pop(item_id, None)
        else:
            self._items[item_id] = dict(feats)

    def delete(self, item_id: str) -> None:
        """Remove an item (a Kafka tombstone on the item topic); no error if absent."""
        self._items.pop(item_id, None)

    def get(self, item_id: str) -> dict[str, float]:
        """Features of ``item_id`` (the stored dict; do not mutate it).

        Raises
        ------
        DeadLetter
            ``unknown_item`` if the catalog does not hold ``item_id``.
        """
        try:
            return self._items[item_id]
        except KeyError:
            raise DeadLetter("unknown_item", f"Item {item_id!r} is not in the item catalog ({len(self._items)} items); "
                                             "publish its item record first, or send inline features.") from None

    def __contains__(self, item_id: object) -> bool:
        return item_id in self._items

    def __len__(self) -> int:
        return len(self._items)

    def items(self) -> Iterator[tuple[str, dict[str, float]]]:
        """Iterate over ``(item_id, features)`` pairs."""
        return iter(self._items.items())

    def __repr__(self) -> str:
        return f"ItemCatalog(n_items={len(self._items)})"


def _resolve(ref: Mapping[str, Any], catalog: ItemCatalog | None, where: str) -> tuple[dict[str, float], str | None]:
    feats = ref.get("features")
    item_id = ref.get("id")
    if feats is not None:
        return _features(feats, f"{where}.features"), item_id
    if catalog is None:
        raise DeadLetter("unknown_item", f"{where} references item {item_id!r} but no item catalog is configured; "
                                         "send inline features or run the worker with the item topic.")
    return catalog.get(item_id), item_id


# ------------------------------------------------------------- preference events
@dataclass(frozen=True, slots=True)
class PreferenceExample:
    """One validated pairwise comparison, ready for ``PreferenceLearner.learn_one``.

    Attributes
    ----------
    event_id : str
        Idempotency key.
    timestamp : float
        Event time, unix seconds (UTC).
    left, right : dict of str to float
        Item features (finite floats). Dicts may be shared with the item catalog: do not mutate.
    outcome : int
        +1 left preferred, −1 right preferred, 0 indifferent.
    context : dict of str to float or None
        Context features.
    weight : float
        Example weight > 0.
    left_id, right_id : str or None
        Item ids when given.
    """

    event_id: str
    timestamp: float
    left: dict
    right: dict
    outcome: int
    context: dict | None = None
    weight: float = 1.0
    left_id: str | None = None
    right_id: str | None = None


_PREF_KEYS = frozenset(("schema_version", "event_id", "timestamp", "left", "right", "outcome", "context", "weight"))
_REF_KEYS = frozenset(("id", "features"))


def _fast_numdict(d: Any, need_one: bool) -> bool:
    if type(d) is not dict or (need_one and not d):
        return False
    for k, v in d.items():
        tv = type(v)
        if (tv is not float and tv is not int) or not k or len(k) > 256:
            return False
    return True


def _fast_ref(r: Any) -> bool:
    if type(r) is not dict or not r or not (r.keys() <= _REF_KEYS):
        return False
    if "id" in r:
        i = r["id"]
        if type(i) is not str or not i or len(i) > 512:
            return False
    return "features" not in r or _fast_numdict(r["features"], True)


def _fast_preference_ok(d: dict) -> bool:
    """A strict subset of preference.v1.json (tested against jsonschema)."""
    if not (d.keys() <= _PREF_KEYS) or type(d.get("schema_version")) is not int or d["schema_version"] != 1:
        return False
    e = d.get("event_id")
    if type(e) is not str or not e or len(e) > 512:
        return False
    ts = d.get("timestamp")
    tt = type(ts)
    if tt is str:
        if not 10 <= len(ts) <= 64:
            return False
    elif (tt is not float and tt is not int) or not ts >= 0:
        return False
    o = d.get("outcome")
    if type(o) is not int or o not in (1, -1, 0):
        return False
    if not (_fast_ref(d.get("left")) and _fast_ref(d.get("right"))):
        return False
    if "context" in d and not _fast_numdict(d["context"], False):
        return False
    if "weight" in d:
        w = d["weight"]
        if (type(w) is not float and type(w) is not int) or not w > 0:
            return False
    return True


def _check_same_features(left: dict, right: dict, where: str = "") -> None:
    if left.keys() != right.keys():
        only_l = sorted(left.keys() - right.keys())[:5]
        only_r = sorted(right.keys() - left.keys())[:5]
        raise DeadLetter("schema_violation", f"{where}left and right items must have the same feature names; "
                                             f"only left has {only_l}, only right has {only_r}.")


def parse_preference(raw: bytes, catalog: ItemCatalog | None = None, max_bytes: int = _DEFAULT_MAX_BYTES) -> PreferenceExample:
    """Parse and validate one preference event (``preference.v1.json``).

    Parameters
    ----------
    raw : bytes
        The Kafka message value (UTF-8 JSON). ``str`` is accepted too.
    catalog : ItemCatalog, optional
        Resolves ``{"id": ...}`` item references; without it only inline features work.
    max_bytes : int, default 1 MiB
        Payloads longer than this are rejected before parsing.

    Returns
    -------
    PreferenceExample

    Raises
    ------
    DeadLetter
        With one reason from :data:`DEAD_LETTER_REASONS` (see the module docstring for the order
        of checks).

    Examples
    --------
    >>> ex = parse_preference(b'{"schema_version": 1, "event_id": "e1", "timestamp": 1700000000, '
    ...                       b'"left": {"features": {"price": 1.0}}, "right": {"features": {"price": 2}}, "outcome": -1}')
    >>> ex.outcome, ex.right, ex.weight
    (-1, {'price': 2.0}, 1.0)
    """
    return preference_from_doc(_decode(raw, max_bytes), catalog)


def preference_from_doc(d: Any, catalog: ItemCatalog | None = None) -> PreferenceExample:
    """Steps 4–8 of :func:`parse_preference` on an already decoded JSON value (batch decoders)."""
    d = _check_object_and_version(d, "preference event")
    if not _fast_preference_ok(d):
        _schema_check("preference", d)
    left, left_id = _resolve(d["left"], catalog, "left")
    right, right_id = _resolve(d["right"], catalog, "right")
    _check_same_features(left, right)
    ctx = d.get("context")
    if ctx is not None:
        ctx = _features(ctx, "context")
    w = d.get("weight")
    return PreferenceExample(
        event_id=d["event_id"],
        timestamp=_timestamp(d["timestamp"]),
        left=left,
        right=right,
        outcome=int(d["outcome"]),
        context=ctx,
        weight=1.0 if w is None else _weight(w),
        left_id=left_id,
        right_id=right_id,
    )


def validate_record(kind: str, doc: Any) -> None:
    """Check a decoded record against the contract without resolving item ids.

    Used by producers (``prefstream replay``) to reject bad records at the source. Runs every
    check of the matching ``parse_*`` function except the item-catalog lookup (``unknown_item``).

    Parameters
    ----------
    kind : {"preference", "click", "item"}
    doc : object
        The decoded JSON value.

    Raises
    ------
    DeadLetter
        With the reason the consumer would give.
    InvalidParameterError
        For an unknown ``kind``.
    """
    from learners.exceptions import check_param

    check_param("validate_record", "kind", kind, kind in ("preference", "click", "item"), "'preference', 'click' or 'item'")
    if kind == "item":
        d = _check_object_and_version(doc, "item record")
        _schema_check("item", d)
        if d["features"] is not None:
            _features(d["features"], "features")
        if "timestamp" in d:
            _timestamp(d["timestamp"])
        return
    if kind == "click":
        _click_structure(_check_object_and_version(doc, "click session"))
        return
    d = _check_object_and_version(doc, "preference event")
    if not _fast_preference_ok(d):
        _schema_check("preference", d)
    inline = {}
    for side in ("left", "right"):
        if "features" in d[side]:
            inline[side] = _features(d[side]["features"], f"{side}.features")
    if len(inline) == 2:
        _check_same_features(inline["left"], inline["right"])
    if d.get("context") is not None:
        _features(d["context"], "context")
    _timestamp(d["timestamp"])
    if d.get("weight") is not None:
        _weight(d["weight"])


# ---------------------------------------------------------------- click sessions
_CLICK_KEYS = frozenset(("schema_version", "session_id", "user_id", "timestamp", "shown", "clicked", "context", "weight"))
_SLOT_KEYS = frozenset(("id", "features", "position", "propensity"))


def _fast_click_ok(d: dict) -> bool:
    """A strict subset of click_session.v1.json (tested against jsonschema)."""
    if not (d.keys() <= _CLICK_KEYS) or type(d.get("schema_version")) is not int or d["schema_version"] != 1:
        return False
    sid = d.get("session_id")
    if type(sid) is not str or not sid or len(sid) > 512:
        return False
    if "user_id" in d and (type(d["user_id"]) is not str or len(d["user_id"]) > 512):
        return False
    ts = d.get("timestamp")
    if type(ts) is str:
        if not 10 <= len(ts) <= 64:
            return False
    elif (type(ts) is not float and type(ts) is not int) or not ts >= 0:
        return False
    shown, clicked = d.get("shown"), d.get("clicked")
    if type(shown) is not list or not shown or type(clicked) is not list:
        return False
    for s in shown:
        if type(s) is not dict or not (s.keys() <= _SLOT_KEYS):
            return False
        i = s.get("id")
        if type(i) is not str or not i or len(i) > 512 or ("features" in s and not _fast_numdict(s["features"], True)):
            return False
        if "position" in s and (type(s["position"]) is not int or not 1 <= s["position"] <= 10000):
            return False
        if "propensity" in s:
            q = s["propensity"]
            if (type(q) is not float and type(q) is not int) or not 0 < q <= 1:
                return False
    for c in clicked:
        if type(c) is not str or not c or len(c) > 512:
            return False
    if len(set(clicked)) != len(clicked):
        return False
    if "context" in d and not _fast_numdict(d["context"], False):
        return False
    if "weight" in d:
        w = d["weight"]
        if (type(w) is not float and type(w) is not int) or not w > 0:
            return False
    return True


def _click_structure(d: dict):
    """Schema + cross-field checks of a click session; returns its parts."""
    if not _fast_click_ok(d):
        _schema_check("click_session", d)
    sid = d["session_id"]
    ts = _timestamp(d["timestamp"])
    shown = d["shown"]
    ids = [s["id"] for s in shown]
    id_set = set(ids)
    if len(id_set) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})[:5]
        raise DeadLetter("schema_violation", f"Session {sid!r} shows the items {dup} more than once; list each shown item once.")
    missing = [c for c in d["clicked"] if c not in id_set]
    if missing:
        raise DeadLetter("schema_violation", f"Session {sid!r}: clicked items {missing[:5]} are not among the shown items.")
    problem = clicklog.slot_problem(shown)  # position / propensity cross-field checks
    if problem:
        raise DeadLetter("schema_violation", f"Session {sid!r}: {problem}")
    for j, s in enumerate(shown):
        if "features" in s:
            _features(s["features"], f"shown[{j}].features")
    ctx = d.get("context")
    if ctx is not None:
        ctx = _features(ctx, "context")
    w = d.get("weight")
    w = 1.0 if w is None else _weight(w)
    return sid, ts, shown, ids, set(d["clicked"]), ctx, w


def parse_click_session(raw: bytes, catalog: ItemCatalog | None = None,
                        max_bytes: int = _DEFAULT_MAX_BYTES,
                        expander: "clicklog.SessionExpander | None" = None) -> list[PreferenceExample]:
    """Parse a click session and expand it into preference pairs clicked ≻ shown-but-not-clicked.

    ``expander`` (a :class:`stream.clicklog.SessionExpander`, built from the ``click_*``
    settings) chooses other pair strategies (clicked ≻ skipped-above, clicked ≻ next), inverse
    propensity weights and the pair orientation; the default below is its ``all`` strategy,
    unweighted, clicked item on the left.

    A session that shows ``n`` distinct items of which ``k`` were clicked becomes ``k·(n−k)``
    examples with outcome +1 (the clicked item on the left); clicked items do not play each other,
    as in the Website experiment of Hu et al., *Explaining Preferences with Shapley Values*
    (NeurIPS 2022), App. B. A session without clicks, or where every shown item was clicked,
    yields no pairs (not an error). Pairs are ordered by the clicked item's, then the other item's
    position in ``shown``.

    Parameters
    ----------
    raw : bytes
        The message value (``click_session.v1.json``).
    catalog : ItemCatalog, optional
        Resolves shown items without inline features.
    max_bytes : int, default 1 MiB
    expander : stream.clicklog.SessionExpander, optional

    Returns
    -------
    list of PreferenceExample
        ``event_id = f"{session_id}:{clicked_id}>{other_id}"``; the session timestamp, weight
        (times the expander's IPS weight) and a copy of the user context on every pair;
        ``left_id``/``right_id`` set.

    Raises
    ------
    DeadLetter
        As :func:`parse_preference`; ``schema_violation`` also for duplicate shown ids or a clicked
        id that was not shown; ``unknown_item`` if a shown item is neither inline nor in the
        catalog (checked only for items that take part in a pair).
    """
    return click_session_from_doc(_decode(raw, max_bytes), catalog, expander)


def click_session_from_doc(d: Any, catalog: ItemCatalog | None = None,
                           expander: "clicklog.SessionExpander | None" = None) -> list[PreferenceExample]:
    """Steps 4–8 of :func:`parse_click_session` on an already decoded JSON value (batch decoders)."""
    d = _check_object_and_version(d, "click session")
    sid, ts, shown, ids, clicked, ctx, w = _click_structure(d)
    plan = (expander or _DEFAULT_EXPANDER).plan(sid, shown, clicked)
    if not plan:
        return []
    feats = [_resolve(s, catalog, f"shown[{j}]")[0] for j, s in enumerate(shown)]
    out = []
    for a, b, f, swap in plan:
        ia, ib = ids[a], ids[b]
        _check_same_features(feats[a], feats[b], f"Session {sid!r}, items {ia!r} and {ib!r}: ")
        la, lb = (b, a) if swap else (a, b)
        out.append(PreferenceExample(
            event_id=f"{sid}:{ia}>{ib}", timestamp=ts, left=feats[la], right=feats[lb], outcome=-1 if swap else 1,
            context=None if ctx is None else dict(ctx), weight=w * f, left_id=ids[la], right_id=ids[lb],
        ))
    return out


_DEFAULT_EXPANDER = clicklog.SessionExpander()


# --------------------------------------------------------------- explain requests
@dataclass(frozen=True, slots=True)
class ExplainRequest:
    """A validated explain request.

    Attributes
    ----------
    request_id : str
    example : PreferenceExample
        The pair to explain (``event_id`` = ``request_id``, outcome 0, weight 1).
    model, method : str or None
        Which model / method; ``None`` = all.
    params : dict
        Method options.
    """

    request_id: str
    example: PreferenceExample
    model: str | None = None
    method: str | None = None
    params: dict | None = None


def _as_ref(v: dict) -> dict:
    if isinstance(v.get("features"), dict) or isinstance(v.get("id"), str):
        return v
    return {"features": v}


def parse_explain_request(raw: bytes, catalog: ItemCatalog | None = None,
                          max_bytes: int = _DEFAULT_MAX_BYTES) -> ExplainRequest:
    """Parse and validate an explain request (``explain_request.v1.json``).

    ``left``/``right`` are item references as in preference events or bare feature dicts;
    ``schema_version`` may be omitted (read as 1).

    Raises
    ------
    DeadLetter
        With the reasons and order of :func:`parse_preference`.

    Examples
    --------
    >>> r = parse_explain_request(b'{"request_id": "q1", "model": "linear-bt", "left": {"x": 1}, "right": {"x": 2}}')
    >>> r.request_id, r.model, r.method, r.example.left, r.example.outcome
    ('q1', 'linear-bt', None, {'x': 1.0}, 0)
    """
    d = _decode(raw, max_bytes)
    if isinstance(d, dict) and "schema_version" not in d:
        d["schema_version"] = SCHEMA_VERSION
    d = _check_object_and_version(d, "explain request")
    _schema_check("explain_request", d)
    left, left_id = _resolve(_as_ref(d["left"]), catalog, "left")
    right, right_id = _resolve(_as_ref(d["right"]), catalog, "right")
    _check_same_features(left, right)
    ctx = d.get("context")
    if ctx is not None:
        ctx = _features(ctx, "context")
    ts = _timestamp(d["timestamp"]) if "timestamp" in d else time.time()
    ex = PreferenceExample(event_id=d["request_id"], timestamp=ts, left=left, right=right, outcome=0, context=ctx,
                           weight=1.0, left_id=left_id, right_id=right_id)
    return ExplainRequest(request_id=d["request_id"], example=ex, model=d.get("model"), method=d.get("method"),
                          params=dict(d.get("params") or {}))


# ------------------------------------------------------------------ item records
def parse_item(raw: bytes | None, max_bytes: int = _DEFAULT_MAX_BYTES, key: bytes | str | None = None) -> dict:
    """Parse and validate one item-catalog record (``item.v1.json``).

    Parameters
    ----------
    raw : bytes or None
        The message value. ``None`` is a Kafka tombstone: pass the message ``key`` and a delete
        record (``features`` None) for that item comes back.
    max_bytes : int, default 1 MiB
    key : bytes or str, optional
        The message key (item id); only used for tombstones.

    Returns
    -------
    dict
        ``{"schema_version": 1, "item_id": str, "features": {str: float} | None, ...}``; feed it to
        :meth:`ItemCatalog.upsert`.

    Raises
    ------
    DeadLetter
        As :func:`parse_preference`; a tombstone without a key is ``missing_field``.
    """
    if raw is None:
        if key is None or key in (b"", ""):
            raise DeadLetter("missing_field", "An item tombstone (null value) needs the item id as message key.")
        item_id = key.decode("utf-8", "replace") if isinstance(key, (bytes, bytearray)) else str(key)
        return {"schema_version": SCHEMA_VERSION, "item_id": item_id, "features": None}
    d = _check_object_and_version(_decode(raw, max_bytes), "item record")
    _schema_check("item", d)
    out = dict(d)
    if d["features"] is not None:
        out["features"] = _features(d["features"], "features")
    if "timestamp" in d:
        out["timestamp"] = _timestamp(d["timestamp"])
    return out


# ------------------------------------------------------------------ dead letters
def dead_letter_record(raw: bytes | None, reason: str, detail: str, source_topic: str, partition: int | None,
                       offset: int | None, max_payload_bytes: int = 262_144) -> dict:
    """A dead-letter record (``dead_letter.v1.json``) for a rejected message.

    Parameters
    ----------
    raw : bytes or None
        The rejected message value, kept as UTF-8 text, or base64 when it is not valid UTF-8.
    reason : str
        One of :data:`DEAD_LETTER_REASONS` (usually ``DeadLetter.reason``).
    detail : str
        Human-readable detail (usually ``DeadLetter.detail``).
    source_topic : str
    partition, offset : int or None
        Source coordinates of the message.
    max_payload_bytes : int, default 256 KiB
        Longer payloads are cut to this many bytes (``payload_truncated`` true) so the record fits
        the dead-letter topic even for ``oversize`` messages.

    Returns
    -------
    dict
        JSON-serialisable.

    Raises
    ------
    InvalidParameterError
        For an unknown reason.
    """
    from learners.exceptions import check_param

    check_param("dead_letter_record", "reason", reason, reason in DEAD_LETTER_REASONS, f"one of {DEAD_LETTER_REASONS}")
    if raw is None:
        payload, enc, size, trunc = None, "none", 0, False
    else:
        if isinstance(raw, str):
            raw = raw.encode("utf-8", "surrogatepass")
        raw = bytes(raw)
        size = len(raw)
        trunc = size > max_payload_bytes
        cut = raw[:max_payload_bytes]
        try:
            payload, enc = cut.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            if trunc:  # a multi-byte character may straddle the cut
                try:
                    payload, enc = cut.decode("utf-8", "ignore"), "utf-8"
                    raw.decode("utf-8")
                except UnicodeDecodeError:
                    payload, enc = base64.b64encode(cut).decode("ascii"), "base64"
            else:
                payload, enc = base64.b64encode(cut).decode("ascii"), "base64"
    return {
        "schema_version": SCHEMA_VERSION,
        "reason": reason,
        "detail": str(detail),
        "source_topic": str(source_topic),
        "partition": None if partition is None else int(partition),
        "offset": None if offset is None else int(offset),
        "payload": payload,
        "payload_encoding": enc,
        "payload_size": size,
        "payload_truncated": trunc,
        "dead_lettered_at": time.time(),
    }


# --------------------------------------------------------------------- snapshots
def encode_snapshot(model_name: str, version: int, training_count: int, state: dict,
                    offsets: dict[str, int] | None = None, max_bytes: int = 8_388_608) -> bytes:
    """Encode a model snapshot as pickle-free ``.npz`` bytes for the compacted model topic.

    The npz's JSON meta entry is ``{"__snapshot__": <model_snapshot.v1.json metadata>,
    "model": state["meta"]}``; its arrays are ``state["arrays"]``.

    Parameters
    ----------
    model_name : str
        E.g. ``"linear-bt"`` (also the message key).
    version : int
        Snapshot counter, ≥ 0.
    training_count : int
        Examples learned so far, ≥ 0.
    state : dict
        ``PreferenceLearner.state_dict()`` output.
    offsets : dict of str to int, optional
        Next offset to consume per ``"<topic>:<partition>"``.
    max_bytes : int, default 8 MiB
        Must not exceed the model topic's ``max.message.bytes``.

    Returns
    -------
    bytes

    Raises
    ------
    SnapshotError
        If the state cannot be encoded, the metadata violates the schema, or the encoded snapshot
        is larger than ``max_bytes`` (say which limit to raise, or shrink the model).
    """
    meta = {
        "schema_version": SCHEMA_VERSION,
        "model_name": model_name,
        "version": version,
        "training_count": training_count,
        "offsets": dict(offsets or {}),
        "created_at": time.time(),
    }
    errors = list(validator("model_snapshot").iter_errors(meta))
    if errors:
        raise SnapshotError(f"Invalid snapshot metadata: {_classify(errors)[1]}")
    if not isinstance(state, Mapping) or "meta" not in state or "arrays" not in state:
        raise SnapshotError("The state must be a state dict {'meta': {...}, 'arrays': {...}} from PreferenceLearner.state_dict().")
    data = dump_state({"meta": {"__snapshot__": meta, "model": state["meta"]}, "arrays": state["arrays"]})
    if len(data) > max_bytes:
        raise SnapshotError(
            f"The {model_name!r} snapshot is {len(data)} bytes, over the {max_bytes}-byte limit; raise the model "
            "topic's max.message.bytes and PREFSTREAM_MAX_SNAPSHOT_BYTES together, or shrink the model "
            "(fewer Nyström centres / smaller reservoir).")
    return data


def decode_snapshot(data: bytes) -> dict:
    """Decode :func:`encode_snapshot` bytes.

    Returns
    -------
    dict
        ``{"schema_version", "model_name", "version", "training_count", "offsets", "created_at",
        "state": {"meta": ..., "arrays": ...}}``; feed ``state`` to ``Learner.from_state``.

    Raises
    ------
    SnapshotError
        If the bytes are not a prefstream snapshot, carry another schema version, or the metadata
        violates ``model_snapshot.v1.json``.
    """
    if data is None:
        raise SnapshotError("A model snapshot cannot be null (a tombstone on the model topic deletes the model).")
    st = load_state(bytes(data))
    snap = st["meta"].get("__snapshot__") if isinstance(st["meta"], dict) else None
    if not isinstance(snap, dict):
        raise SnapshotError("Not a prefstream model snapshot: the meta entry lacks '__snapshot__'.")
    if snap.get("schema_version") != SCHEMA_VERSION:
        raise SnapshotError(f"Snapshot schema_version {snap.get('schema_version')!r} is not supported; this build reads {SCHEMA_VERSION}.")
    errors = list(validator("model_snapshot").iter_errors(snap))
    if errors:
        raise SnapshotError(f"Invalid snapshot metadata: {_classify(errors)[1]}")
    out = dict(snap)
    out["state"] = {"meta": st["meta"].get("model", {}), "arrays": st["arrays"]}
    return out


# ---------------------------------------------------------------- explanations
def explanation_record_ok(record: Mapping[str, Any]) -> None:
    """Validate an explanation record (``explanation.v1.json``) before it is published.

    Besides the schema, ``values`` must have one entry per feature name.

    Raises
    ------
    DeadLetter
        (an :class:`~learners.exceptions.InvalidInputError`) with the reason of the first failure.
    """
    if not isinstance(record, Mapping):
        raise DeadLetter("not_an_object", f"An explanation record must be a dict; got {type(record).__name__}.")
    rec = dict(record)
    _check_object_and_version(rec, "explanation record")
    _schema_check("explanation", rec)
    if len(rec["values"]) != len(rec["feature_names"]):
        raise DeadLetter("schema_violation", f"The record has {len(rec['values'])} values for "
                                             f"{len(rec['feature_names'])} feature names; give one value per feature.")
