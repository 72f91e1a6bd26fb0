"""Bytes → JSON value and JSON numbers → finite floats (steps 1–5 and the number checks of step 7)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping as _MappingABC
from datetime import datetime, timezone
from typing import Any, Iterator, Mapping

from stream.contract.reasons import SCHEMA_VERSION, DeadLetter
from stream.contract.schemas import TIMESTAMP_FORMS, _json_type

_DEFAULT_MAX_BYTES = 1_048_576

#: Largest magnitude of a feature or context value. Below 2**53, so integer-valued features stay
#: exact in float64; and the squared difference of two such values, (2e15)**2 = 4e30, summed over
#: up to 10**6 features (4e36) still fits float32 (3.4e38), in which the explainers evaluate wide
#: models. Larger values are dead-lettered as ``out_of_range`` (they are finite, but a learner's
#: squares and sums of them overflow: 1e308 turned LinearBT's weights into NaN).
MAX_ABS_VALUE = 1e15
#: Range of an event weight: a weight is a count of how many events this one stands for; beyond
#: 1e6 one event would swamp a model's running sums, below 1e-6 it is numerically zero.
WEIGHT_RANGE = (1e-6, 1e6)


class FeatureRow(_MappingABC):
    """A feature map a wire format decoded in a layout many records share, kept as its encoded
    bytes: the layout (one object per layout, shared by every row of it) gives the names and
    reads the values out of the bytes when they are asked for.

    The Avro reader of the preference record (:mod:`stream.broker.avro_fast`) gives one per
    feature map: one small object and a bytes slice (which the garbage collector does not track)
    instead of a dict of floats per map. The contract's batch fast path
    (:mod:`stream.contract.batch`) takes the names and the values into the batch's arrays;
    everything else sees plain dicts (:func:`plain_doc`, :meth:`Decoded.get`). Names are
    distinct (the reader declines a map that repeats a key). A read-only mapping, equal to the
    dict of the same items.

    Attributes
    ----------
    layout : object
        ``layout.names`` (tuple of str) and ``layout.unpack(raw)`` (tuple of floats, in names order).
    raw : bytes
    """

    __slots__ = ("layout", "raw")

    def __init__(self, layout, raw: bytes) -> None:
        self.layout, self.raw = layout, raw

    @property
    def names(self) -> tuple:
        return self.layout.names

    def __len__(self) -> int:
        return len(self.layout.names)

    def __iter__(self) -> Iterator[str]:
        return iter(self.layout.names)

    def __getitem__(self, key: str) -> float:
        try:
            return self.values()[self.layout.names.index(key)]
        except ValueError:
            raise KeyError(key) from None

    def values(self) -> tuple:  # the batch path extends its flat list with these
        return self.layout.unpack(self.raw)

    def items(self):
        return zip(self.layout.names, self.values())

    def __repr__(self) -> str:
        return f"FeatureRow({dict(self.items())!r})"


def plain_doc(doc: Any) -> Any:
    """``doc`` with its :class:`FeatureRow` feature maps (items' ``features``, ``context``) made
    plain dicts, in place: the document the JSON contract describes (what the validators take)."""
    if type(doc) is dict:
        for side in ("left", "right"):
            ref = doc.get(side)
            if type(ref) is dict and type(ref.get("features")) is FeatureRow:
                ref["features"] = dict(ref["features"].items())
        if type(doc.get("context")) is FeatureRow:
            doc["context"] = dict(doc["context"].items())
    return doc


class Decoded:
    """A message value a wire format other than plain JSON has already decoded
    (:mod:`stream.broker.serializers`): the contract's parsers take it in place of the bytes.

    Attributes
    ----------
    raw : bytes or None
        The message value as it came (what a dead letter keeps, to be re-driven as it was).
    doc : Any
        The decoded document (a dict of the same shape as the JSON of the contract), or None;
        its feature maps may be :class:`FeatureRow` (the batch fast path takes them as they are;
        :meth:`get` gives plain dicts).
    error : DeadLetter or None
        Why the value could not be decoded (``not_wire_format``, ``unknown_schema``, ...);
        raised where the contract would decode it.
    """

    __slots__ = ("doc", "error", "raw")

    def __init__(self, raw, doc=None, error: DeadLetter | None = None) -> None:
        self.raw, self.doc, self.error = raw, doc, error

    def get(self) -> Any:
        """The document (feature maps as plain dicts), or raise :attr:`error`."""
        if self.error is not None:
            raise self.error
        return plain_doc(self.doc)


def raw_value(value: Any) -> Any:
    """The message value as it came: ``value.raw`` of a :class:`Decoded`, else ``value``."""
    return value.raw if type(value) is Decoded else value


class _NonFiniteToken(ValueError):
    pass


def _reject_constant(token: str):
    raise _NonFiniteToken(token)


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def _decode(raw: Any, max_bytes: int) -> Any:
    """Bytes → JSON value, with the oversize / malformed / NaN-token checks (steps 1–3); a
    :class:`Decoded` value gives its document (or raises its dead letter)."""
    if type(raw) is Decoded:
        return raw.get()
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
        if not -MAX_ABS_VALUE <= f <= MAX_ABS_VALUE:
            raise DeadLetter("out_of_range", f"{where}.{k} = {_short_num(v)} is out of range: feature and context "
                                             f"values must lie in [-{MAX_ABS_VALUE:g}, {MAX_ABS_VALUE:g}] "
                                             "(stream.contract.MAX_ABS_VALUE); rescale the feature.")
        out[k] = f
    return out


def _timestamp(v: Any, where: str = "timestamp") -> float:
    if isinstance(v, str):
        try:
            dt = datetime.fromisoformat(v)
        except ValueError:
            raise DeadLetter("schema_violation", f"'{where}' must be {TIMESTAMP_FORMS}; got {v!r}.") from None
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
    lo, hi = WEIGHT_RANGE
    if not lo <= f <= hi:
        raise DeadLetter("out_of_range", f"weight = {_short_num(v)} is out of range: weights must lie in "
                                         f"[{lo:g}, {hi:g}] (stream.contract.WEIGHT_RANGE); rescale the weights.")
    return f


def _short_num(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 40 else s[:20] + "…" + f"({len(s)} digits)"

