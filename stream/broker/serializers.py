"""Wire formats of prefstream's topics: plain JSON, and Avro or JSON Schema through a schema registry.

A Kafka shop's events are often not plain JSON but the Confluent wire format: a zero magic byte,
the 4-byte big-endian id of the writer's schema in a Confluent-compatible schema registry, then
the payload (Avro binary, or JSON text for JSON Schema). Which format a topic carries is a setting
per topic (``format_preferences``, ``format_clicks``, ``format_items``; ``format_explanations``
and ``format_dead_letters`` for what the workers write), ``json`` by default.

One small class per format (as Quix Streams' serializers), each bound to the topic's schema
registry subject (``<topic>-value``, Confluent's TopicNameStrategy):

* :class:`JSONFormat`: the value is the contract's JSON; reading it costs nothing here (the
  contract decodes the bytes itself, on its orjson fast path: ``stream/contract/batch.py``);
* :class:`AvroFormat`: the payload is Avro binary, read with fastavro (the library under
  ``confluent-kafka[avro]``) from the writer's schema (fetched by id, cached) into this build's
  reader schema (``stream/schemas/avro/<kind>.v1.avsc``): a writer schema that evolved
  compatibly — a v2 that adds an optional field — is read as v1 (Avro schema resolution), so
  old and new events are learned alike; optional fields that are null are left out, giving the
  document the JSON contract describes;
* :class:`JSONSchemaFormat`: the payload is the contract's JSON, described by our own JSON
  Schema (``stream/schemas/<kind>.v1.json``, registered as schema type ``JSON``); the contract
  validates it as it validates plain JSON.

Reading: :meth:`~WireFormat.prepare` fetches the schemas of a batch's ids not seen yet (the only
network call; it raises :class:`RegistryUnavailable` when the registry does not answer, and the
workers wait and retry without consuming: ``stream/workers/loop.py``), then
:meth:`~WireFormat.wrap` turns each value into a :class:`~stream.contract.decoding.Decoded` that
the contract's parsers take in place of the bytes. What cannot be read becomes that message's dead
letter, never a crash: ``not_wire_format`` (no magic byte / too short), ``unknown_schema`` (an id
the registry does not hold), ``schema_violation`` (a writer schema this build cannot resolve, or a
payload that is not what its schema says), ``oversize``.

Writing: :meth:`~WireFormat.dumps` (a document) and :meth:`~WireFormat.frame` (the JSON bytes the
workers already made) register this build's schema under the subject on first use (the registry
checks compatibility: BACKWARD in ``deploy/registry``) and prefix its id.
"""

from __future__ import annotations

import io
import json
import logging
import struct
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

import orjson

from learners.exceptions import InvalidParameterError, PrefstreamError
from stream.contract.decoding import Decoded
from stream.contract.reasons import DeadLetter

__all__ = ["FORMATS", "AvroFormat", "JSONFormat", "JSONSchemaFormat", "RegistryUnavailable", "SchemaRegistry",
           "avro_schema", "input_formats", "wire_format"]

log = logging.getLogger(__name__)

#: The wire formats a topic may carry.
FORMATS = ("json", "avro", "jsonschema")
_SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"
_HEADER = struct.Struct(">bI")
_MAGIC = 0


class RegistryUnavailable(PrefstreamError, RuntimeError):
    """The schema registry did not answer (down, unreachable, or an HTTP error other than "not found")."""


@lru_cache(maxsize=None)
def avro_schema(kind: str) -> str:
    """This build's Avro schema text of ``kind`` (``preference``, ``click_session``, ``item``, ``dead_letter``)."""
    path = _SCHEMAS / "avro" / f"{kind}.v1.avsc"
    if not path.is_file():
        raise InvalidParameterError(f"There is no Avro schema for {kind!r} records (stream/schemas/avro/); "
                                    "use format json or jsonschema for that topic.")
    return path.read_text(encoding="utf-8")


@lru_cache(maxsize=None)
def _json_schema(kind: str) -> str:
    return (_SCHEMAS / f"{kind}.v1.json").read_text(encoding="utf-8")


class SchemaRegistry:
    """A Confluent-API schema registry (``confluent_kafka.schema_registry.SchemaRegistryClient``).

    Parameters
    ----------
    url : str
        The Confluent-compatible API, e.g. ``http://127.0.0.1:8081/apis/ccompat/v7`` (Apicurio)
        or ``http://host:8081`` (Confluent Schema Registry).
    timeout : float
        Seconds per HTTP request; the client does not retry (the workers do, see the module docstring).
    """

    def __init__(self, url: str, timeout: float = 5.0) -> None:
        from confluent_kafka.schema_registry import SchemaRegistryClient

        self.url = url
        self.client = SchemaRegistryClient({"url": url, "timeout": max(1, int(round(timeout))), "max.retries": 0})

    def schema(self, schema_id: int):
        """The :class:`~confluent_kafka.schema_registry.Schema` of ``schema_id``, or None if the registry
        holds no such id; raises :class:`RegistryUnavailable` when it does not answer."""
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        try:
            return self.client.get_schema(schema_id)
        except SchemaRegistryError as exc:
            if exc.http_status_code == 404:
                return None
            raise RegistryUnavailable(f"The schema registry at {self.url} answered {exc.http_status_code} "
                                      f"for schema id {schema_id}: {exc.error_message}") from None
        except Exception as exc:  # noqa: BLE001 - httpx connection errors, timeouts: all mean "not answering"
            raise RegistryUnavailable(f"The schema registry at {self.url} does not answer: {exc!r}") from None

    def register(self, subject: str, schema_str: str, schema_type: str) -> int:
        """Register ``schema_str`` under ``subject`` (idempotent); its id."""
        from confluent_kafka.schema_registry import Schema
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        try:
            return int(self.client.register_schema(subject, Schema(schema_str, schema_type)))
        except SchemaRegistryError as exc:
            if exc.http_status_code == 409:
                raise InvalidParameterError(f"The schema registry refuses this build's {schema_type} schema under "
                                            f"subject {subject!r} as incompatible: {exc.error_message}") from None
            raise RegistryUnavailable(f"The schema registry at {self.url} answered {exc.http_status_code} "
                                      f"registering under {subject!r}: {exc.error_message}") from None
        except Exception as exc:  # noqa: BLE001
            raise RegistryUnavailable(f"The schema registry at {self.url} does not answer: {exc!r}") from None


class JSONFormat:
    """Plain JSON values (the contract's own format): nothing to do here."""

    name = "json"

    def __init__(self, topic: str = "", kind: str = "", registry: SchemaRegistry | None = None,
                 max_bytes: int = 1_048_576) -> None:
        self.topic, self.kind = topic, kind

    def prepare(self, values: Sequence[Any]) -> None:
        """Nothing to fetch."""

    def missing(self, values: Sequence[Any]) -> set:
        return set()

    def fetch(self, ids) -> None:
        """Nothing to fetch."""

    def wrap(self, raw: Any) -> Any:
        """The value itself (the contract decodes JSON bytes on its fast path)."""
        return raw

    def dumps(self, doc: Any) -> bytes:
        return orjson.dumps(doc)

    def frame(self, json_bytes: bytes) -> bytes:
        return json_bytes

    frame_or_json = frame

    def unframe(self, raw: bytes) -> bytes:
        return raw


class _Framed(JSONFormat):
    """The Confluent wire format: magic byte 0, 4-byte big-endian schema id, payload."""

    schema_type = ""

    def __init__(self, topic: str, kind: str, registry: SchemaRegistry, max_bytes: int = 1_048_576) -> None:
        super().__init__(topic, kind)
        self.registry = registry
        self.max_bytes = int(max_bytes)
        self.subject = f"{topic}-value"
        self.known: dict[int, Any] = {}    # schema id -> what _reader made of it (None: the registry has no such id)
        self._writer_id: int | None = None

    # ---------------------------------------------------------------- reading
    def prepare(self, values: Sequence[Any]) -> None:
        """Fetch the schemas of the ids in ``values`` not seen yet.

        Raises
        ------
        RegistryUnavailable
            When the registry does not answer (nothing is cached then: the batch is tried again).
        """
        self.fetch(self.missing(values))

    def missing(self, values: Sequence[Any]) -> set:
        """The schema ids framed in ``values`` whose schemas are not fetched yet (no network call)."""
        known, out, last = self.known, set(), None
        for raw in values:
            if type(raw) is bytes and len(raw) > 5 and raw[0] == _MAGIC:
                head = raw[1:5]
                if head != last:  # a batch is mostly one id: compare 4 bytes, not a dict look-up
                    last = head
                    sid = int.from_bytes(head, "big")
                    if sid not in known:
                        out.add(sid)
        return out

    def fetch(self, ids) -> None:
        """Fetch the schemas of ``ids`` (None for an id the registry does not hold).

        Raises
        ------
        RegistryUnavailable
        """
        for sid in sorted(ids):
            schema = self.registry.schema(sid)
            self.known[sid] = None if schema is None else self._reader(sid, schema)

    def wrap(self, raw: Any) -> Any:
        """A :class:`Decoded` of ``raw`` (its document, or the dead letter it is); a tombstone stays None."""
        if raw is None:
            return None
        if type(raw) is not bytes:
            raw = bytes(raw)
        if len(raw) > self.max_bytes:
            return Decoded(raw, error=DeadLetter("oversize", f"The payload has {len(raw)} bytes; the limit is "
                                                             f"{self.max_bytes} (max_message_bytes)."))
        if len(raw) <= 5 or raw[0] != _MAGIC:
            what = "is empty" if not raw else (f"has only {len(raw)} bytes" if len(raw) <= 5 else
                                               f"starts with byte 0x{raw[0]:02x}")
            return Decoded(raw, error=DeadLetter("not_wire_format", f"Topic {self.topic} carries {self.name} in the "
                                                 f"Confluent wire format (magic byte 0, 4-byte schema id, payload); "
                                                 f"this value {what}. Produce it with a schema-registry serializer."))
        sid = int.from_bytes(raw[1:5], "big")
        reader = self.known.get(sid)
        if reader is None:
            return Decoded(raw, error=DeadLetter("unknown_schema", f"Schema id {sid} is not in the schema registry at "
                                                 f"{self.registry.url} (topic {self.topic}); register the writer's "
                                                 "schema there, or produce with a serializer bound to it."))
        if isinstance(reader, DeadLetter):
            return Decoded(raw, error=reader)
        try:
            return Decoded(raw, self._read(reader, raw))
        except DeadLetter as dl:
            return Decoded(raw, error=dl)

    def _reader(self, sid: int, schema) -> Any:
        raise NotImplementedError

    def _read(self, reader: Any, raw: bytes) -> Any:
        raise NotImplementedError

    # ---------------------------------------------------------------- writing
    def _schema_text(self) -> str:
        raise NotImplementedError

    def writer_id(self) -> int:
        """This build's schema's id under :attr:`subject`, registered on first use."""
        if self._writer_id is None:
            self._writer_id = self.registry.register(self.subject, self._schema_text(), self.schema_type)
        return self._writer_id

    def frame_or_json(self, json_bytes: bytes) -> bytes:
        """:meth:`frame`, or the JSON as it is while the registry does not answer (logged): what a
        worker writes (a dead letter, an explanation) is never dropped for want of a schema id,
        and readers of these topics take both (:meth:`unframe`)."""
        try:
            return self.frame(json_bytes)
        except RegistryUnavailable as exc:
            log.error("%s; writing this %s record to %s as plain JSON", exc, self.kind, self.topic)
            return json_bytes

    def unframe(self, raw: bytes) -> bytes:
        """The payload after the 5-byte header (``raw`` itself when it has none)."""
        if type(raw) is bytes and len(raw) > 5 and raw[0] == _MAGIC:
            return raw[5:]
        return raw


class AvroFormat(_Framed):
    """Avro binary in the Confluent wire format, read into this build's reader schema with fastavro."""

    name = "avro"
    schema_type = "AVRO"

    def __init__(self, topic: str, kind: str, registry: SchemaRegistry, max_bytes: int = 1_048_576) -> None:
        import fastavro

        super().__init__(topic, kind, registry, max_bytes)
        self._fastavro = fastavro
        self.reader_schema = fastavro.parse_schema(json.loads(avro_schema(kind)))
        self._strip = _STRIP.get(kind, _strip_nothing)
        if kind == "preference":  # the hot path: feature maps of a repeated layout (stream/broker/avro_fast.py)
            from stream.broker.avro_fast import PreferenceReader

            self._fast = PreferenceReader().read
        else:
            self._fast = None

    def _schema_text(self) -> str:
        return avro_schema(self.kind)

    def _reader(self, sid: int, schema) -> Any:
        fa = self._fastavro
        if (schema.schema_type or "AVRO") != "AVRO":
            return DeadLetter("schema_violation", f"Schema id {sid} is a {schema.schema_type} schema; topic "
                                                  f"{self.topic} carries Avro.")
        try:
            writer = fa.parse_schema(json.loads(schema.schema_str))
        except Exception as exc:  # noqa: BLE001 - a schema fastavro cannot parse is that message's dead letter
            return DeadLetter("schema_violation", f"Schema id {sid} is not an Avro schema fastavro reads: {exc}")
        same = fa.schema.to_parsing_canonical_form(writer) == fa.schema.to_parsing_canonical_form(self.reader_schema)
        return (writer, None if same else self.reader_schema, sid)

    def _read(self, reader, raw: bytes) -> Any:
        writer, target, sid = reader
        if target is None and self._fast is not None:  # written in this build's schema: the fast reader first
            doc = self._fast(raw)
            if doc is not None:
                return doc
        try:
            doc = self._fastavro.schemaless_reader(io.BytesIO(memoryview(raw)[5:]), writer, target)
        except Exception as exc:  # noqa: BLE001 - EOF, bad union index, resolution errors
            raise DeadLetter("schema_violation", f"The Avro payload does not decode with schema id {sid} into this "
                                                 f"build's {self.kind} schema: {type(exc).__name__}: {exc}") from None
        return self._strip(doc)

    def dumps(self, doc: Any) -> bytes:
        buf = io.BytesIO()
        buf.write(_HEADER.pack(_MAGIC, self.writer_id()))
        try:
            self._fastavro.schemaless_writer(buf, self.reader_schema, doc)  # absent optional fields: their null default
        except Exception as exc:  # noqa: BLE001 - say which record does not fit the schema
            raise InvalidParameterError(f"A {self.kind} record does not fit the Avro schema "
                                        f"stream/schemas/avro/{self.kind}.v1.avsc: {exc}") from None
        return buf.getvalue()

    def frame(self, json_bytes: bytes) -> bytes:
        return self.dumps(orjson.loads(json_bytes))


class JSONSchemaFormat(_Framed):
    """The contract's JSON in the Confluent wire format, described by our JSON Schema (schema type JSON)."""

    name = "jsonschema"
    schema_type = "JSON"

    def _schema_text(self) -> str:
        return _json_schema(self.kind)

    def _reader(self, sid: int, schema) -> Any:
        if (schema.schema_type or "AVRO") != "JSON":
            return DeadLetter("schema_violation", f"Schema id {sid} is a {schema.schema_type or 'AVRO'} schema; topic "
                                                  f"{self.topic} carries JSON Schema.")
        return sid

    def _read(self, reader, raw: bytes) -> Any:
        from stream.contract.batch import decode

        return decode(raw[5:], self.max_bytes)  # malformed JSON, NaN tokens: the contract's own reasons

    def dumps(self, doc: Any) -> bytes:
        return self.frame(orjson.dumps(doc))

    def frame(self, json_bytes: bytes) -> bytes:
        return _HEADER.pack(_MAGIC, self.writer_id()) + json_bytes


_CLASSES = {"json": JSONFormat, "avro": AvroFormat, "jsonschema": JSONSchemaFormat}


def _strip_nothing(doc):
    return doc


def _drop_none(d: dict, keys: tuple) -> dict:
    for k in keys:
        if k in d and d[k] is None:
            del d[k]
    return d


def _strip_preference(doc: dict) -> dict:
    _drop_none(doc, ("context", "weight", "user_id"))
    for side in ("left", "right"):
        ref = doc.get(side)
        if type(ref) is dict:
            _drop_none(ref, ("id", "features"))
    return doc


def _strip_click_session(doc: dict) -> dict:
    _drop_none(doc, ("user_id", "context", "weight"))
    for it in doc.get("shown") or ():
        _drop_none(it, ("features", "position", "propensity"))
    return doc


def _strip_item(doc: dict) -> dict:
    return _drop_none(doc, ("timestamp",))


_STRIP = {"preference": _strip_preference, "click_session": _strip_click_session, "item": _strip_item}


def wire_format(fmt: str, topic: str, kind: str, registry: SchemaRegistry | None, max_bytes: int = 1_048_576):
    """The format object of ``topic`` (``fmt`` one of :data:`FORMATS`; ``kind`` names its schema)."""
    if fmt not in _CLASSES:
        raise InvalidParameterError(f"Unknown wire format {fmt!r}; expected one of {FORMATS}.")
    if fmt != "json" and registry is None:
        raise InvalidParameterError(f"Topic {topic} is set to format {fmt}, which needs a schema registry: set "
                                    "schema_registry_url (PREFSTREAM_SCHEMA_REGISTRY_URL).")
    return _CLASSES[fmt](topic, kind, registry, max_bytes)


def registry_of(settings) -> SchemaRegistry | None:
    """The settings' :class:`SchemaRegistry`, or None when ``schema_registry_url`` is unset."""
    url = getattr(settings, "schema_registry_url", None)
    return SchemaRegistry(url) if url else None


def input_formats(settings, registry: SchemaRegistry | None = None) -> dict:
    """``{topic: format}`` of the input topics whose format is not plain JSON (preferences, clicks, items)."""
    out = {}
    reg = None
    for topic, fmt, kind in ((settings.topic_preferences, settings.format_preferences, "preference"),
                             (settings.topic_clicks, settings.format_clicks, "click_session"),
                             (settings.topic_items, settings.format_items, "item")):
        if fmt != "json":
            reg = reg or registry or registry_of(settings)
            out[topic] = wire_format(fmt, topic, kind, reg, settings.max_message_bytes)
    return out


def output_format(settings, which: str, registry: SchemaRegistry | None = None):
    """The format of the ``explanations`` or ``dead_letters`` topic (:class:`JSONFormat` by default)."""
    topic = getattr(settings, f"topic_{which}")
    fmt = getattr(settings, f"format_{which}")
    kind = {"explanations": "explanation", "dead_letters": "dead_letter"}[which]
    if fmt == "json":
        return JSONFormat(topic, kind)
    return wire_format(fmt, topic, kind, registry or registry_of(settings), settings.max_message_bytes)
