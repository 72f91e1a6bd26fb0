"""The JSON Schemas of the contract: loading, compiled validators, and jsonschema errors → one reason.

A document is checked twice over only when it fails: first by the schema compiled to Python
(fastjsonschema, ~5 µs for an explanation record against ~170 µs), and, when that rejects it, by
jsonschema, whose full error list gives the dead letter's ranked reason — and which alone decides, so
a document the compiled check refuses by a reading of its own (fastjsonschema implements draft 7; the
schemas use only keywords draft 7 shares with 2020-12) still passes if jsonschema accepts it.
tests/test_schema_fast.py checks that the compiled check never accepts what jsonschema refuses.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fastjsonschema
from jsonschema import Draft202012Validator

from learners.exceptions import InvalidInputError
from stream.contract.reasons import SCHEMA_VERSION, DeadLetter

__all__ = ["SCHEMA_DIR", "compiled", "load_schema", "validator"]

#: Directory holding the JSON Schema files.
SCHEMA_DIR = Path(__file__).resolve().parents[1] / "schemas"

_SCHEMA_NAMES = ("preference", "item", "click_session", "model_snapshot", "explanation", "dead_letter",
                 "explain_request", "drift", "forget")
_VALIDATORS: dict[str, Draft202012Validator] = {}
_COMPILED: dict[str, Any] = {}


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


def compiled(name: str):
    """The schema ``name`` compiled to a Python function (fastjsonschema; cached): ``f(doc)`` returns or
    raises ``fastjsonschema.JsonSchemaException``. A fast first pass only: see the module notes."""
    f = _COMPILED.get(name)
    if f is None:
        f = _COMPILED[name] = fastjsonschema.compile(_draft7(load_schema(name)))
    return f


def _draft7(schema: Any) -> Any:
    """The schema with 2020-12's one reading draft 7 lacks spelled out: keywords beside ``$ref`` apply
    in 2020-12 and are ignored in draft 7, so ``{"$ref": r, k: v}`` becomes ``{"allOf": [{"$ref": r},
    {k: v}]}`` (the same set of documents under both drafts).

    Examples
    --------
    >>> _draft7({"properties": {"f": {"$ref": "#/$defs/x", "minProperties": 1}}})
    {'properties': {'f': {'allOf': [{'$ref': '#/$defs/x'}, {'minProperties': 1}]}}}
    """
    if isinstance(schema, list):
        return [_draft7(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _draft7(v) for k, v in schema.items()}
    if "$ref" in out and len(out) > 1:
        rest = {k: v for k, v in out.items() if k not in ("$ref", "description", "title")}
        if rest:
            return {"allOf": [{"$ref": out["$ref"]}, rest]}
    return out


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


#: The forms a ``timestamp`` takes (the schema's ``anyOf``), as the dead-letter details name them.
TIMESTAMP_FORMS = "unix seconds (a number) or an ISO-8601 date-time such as '2024-05-01T12:00:00Z'"

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
    if path and path[-1] == "timestamp" and isinstance(err.instance, str):  # not "is too short": say what it is
        return "schema_violation", f"'{_path(err)}' must be {TIMESTAMP_FORMS}; got {_short(err.instance)}."
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
    """Step 6: the compiled check, then (on a failure) jsonschema's errors as the ranked reason."""
    try:
        compiled(name)(doc)
        return
    except fastjsonschema.JsonSchemaException:
        pass
    errors = list(validator(name).iter_errors(doc))
    if errors:
        raise DeadLetter(*_classify(errors))

