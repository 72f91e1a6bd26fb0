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
   ``1e400``), ``out_of_range`` (finite numbers beyond :data:`MAX_ABS_VALUE` or a weight outside
   :data:`WEIGHT_RANGE`; the detail names the field path), ``schema_violation`` (left and right with different feature names, an
   unparseable ISO timestamp, clicked items not among the shown ones, duplicate shown ids,
   a ``position`` given for only some shown items — :func:`stream.clicks.log.slot_problem`);
8. ``unknown_item`` — an item referenced by id that the item catalog does not hold.

Speed: validating a dict with :mod:`jsonschema` costs ~200 µs, too slow for the per-event path.
:func:`parse_preference` (and :func:`parse_click_session`) therefore first runs a hand-written check that accepts a strict subset
of what the schema accepts (tested against :mod:`jsonschema` on valid and mutated events in
``tests/test_contract.py``); only messages it does not accept go through the compiled
:mod:`jsonschema` validator, which then decides the reason. The valid path costs a few µs plus
``json.loads``.

Modules (one concept each): :mod:`~stream.contract.reasons` (reasons, :class:`DeadLetter`),
:mod:`~stream.contract.schemas` (JSON Schemas, jsonschema error → reason), :mod:`~stream.contract.decoding`
(bytes → JSON, numbers → finite floats), :mod:`~stream.contract.catalog` (item catalog and item records),
:mod:`~stream.contract.preference`, :mod:`~stream.contract.clicks`, :mod:`~stream.contract.explain`
(explain requests and explanation records), :mod:`~stream.contract.validate` (producer-side checks),
:mod:`~stream.contract.dead_letters`, :mod:`~stream.contract.snapshots`. Import everything from
``stream.contract``.
"""

from __future__ import annotations

# private names re-exported for callers of the former single module (tests, other branches)
from stream.contract.catalog import ItemCatalog, parse_item
from stream.contract.clicks import _fast_click_ok, click_session_from_doc, parse_click_session  # noqa: F401
from stream.contract.dead_letters import dead_letter_record
from stream.contract.decoding import MAX_ABS_VALUE, WEIGHT_RANGE, _DEFAULT_MAX_BYTES, _decode, _features, decode_json  # noqa: F401
from stream.contract.explain import ExplainRequest, explanation_record_ok, parse_explain_request
from stream.contract.preference import PreferenceExample, _fast_preference_ok, parse_preference, preference_from_doc  # noqa: F401
from stream.contract.reasons import DEAD_LETTER_REASONS, REQUEST_REFUSALS, SCHEMA_VERSION, DeadLetter
from stream.contract.schemas import SCHEMA_DIR, _classify, load_schema, validator  # noqa: F401
from stream.contract.snapshots import decode_snapshot, encode_snapshot
from stream.contract.validate import validate_record

__all__ = [
    "DEAD_LETTER_REASONS",
    "REQUEST_REFUSALS",
    "SCHEMA_DIR",
    "SCHEMA_VERSION",
    "DeadLetter",
    "MAX_ABS_VALUE",
    "WEIGHT_RANGE",
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
