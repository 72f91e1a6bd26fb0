"""Explain requests in, explanation records out."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Mapping

from stream.contract.catalog import ItemCatalog, _resolve
from stream.contract.decoding import _DEFAULT_MAX_BYTES, _check_object_and_version, _decode, _features, _timestamp
from stream.contract.preference import PreferenceExample, _check_same_features
from stream.contract.reasons import SCHEMA_VERSION, DeadLetter
from stream.contract.schemas import _schema_check

__all__ = ["ExplainRequest", "explanation_record_ok", "parse_explain_request"]


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
                           weight=1.0, left_id=left_id, right_id=right_id, user_id=d.get("user_id"))
    return ExplainRequest(request_id=d["request_id"], example=ex, model=d.get("model"), method=d.get("method"),
                          params=dict(d.get("params") or {}))


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
