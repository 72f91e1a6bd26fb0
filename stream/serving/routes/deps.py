"""Shared dependencies: the server state, and typed JSON bodies parsed from bytes by pydantic.

FastAPI's own body parsing runs ``json.loads`` and then validates the Python objects; for a
40 KB rank body that is most of the request. :func:`json_body` validates the bytes directly
(``Model.model_validate_json``, pydantic-core's JSON parser) and turns the first validation
error into a 422 naming its path. :func:`body_schema` puts the model into the OpenAPI document,
so the document is still generated from the types.
"""

from __future__ import annotations

from fastapi import Request
from pydantic import ValidationError

from stream.serving.errors import APIError, field_path

__all__ = ["body_schema", "json_body", "rank_body", "state"]


async def state(request: Request):
    """The :class:`~stream.serving.service.ServeState` of this app (async: FastAPI runs sync
    dependencies in a thread pool, a context switch per request)."""
    return request.app.state.serve


def json_body(model):
    """A dependency returning the request body validated as ``model`` (422 naming the field)."""

    async def parse(request: Request):
        return _validate(model, await request.body())

    parse.body_model = model
    return parse


def _validate(model, raw: bytes):
    """``model`` validated from the JSON bytes; the first error as a 422 naming its path."""
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = field_path(err.get("loc", ()))
        msg = err.get("msg", "invalid value")
        if err.get("type") == "json_invalid":
            msg = f"The body is not valid JSON: {err.get('ctx', {}).get('error', msg)}."
        elif where:
            msg = f"{where}: {msg}."
        raise APIError(422, "malformed", msg, field=where or "body") from None


def _fast_columns(raw: bytes):
    """A RankRequest whose ``columns.rows`` go from orjson straight into one float64 array, or None.

    pydantic builds 2,600 Python floats for 100 × 26 rows and numpy then copies them again; here
    orjson parses the body, numpy converts the rows once, and pydantic validates everything else
    (``rows`` replaced by a one-cell placeholder). Taken only when nothing can differ from the
    strict path: no JSON ``true``/``false`` anywhere in the body (numpy would read a boolean as 1.0),
    rows that numpy reads as a 2-D numeric array (strings, nulls or ragged rows fall back, so
    their error names the field as always).
    """
    import numpy as np
    import orjson

    from stream.serving.datamodels import RankRequest

    if b'"columns"' not in raw or b"true" in raw or b"false" in raw:
        return None
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    cols = doc.get("columns") if isinstance(doc, dict) else None
    rows = cols.get("rows") if isinstance(cols, dict) else None
    if not isinstance(rows, list) or not rows:
        return None
    try:
        T = np.array(rows)
    except (ValueError, TypeError):
        return None
    if T.ndim != 2 or T.dtype.kind not in "fi":
        return None
    try:
        req = RankRequest.model_validate({**doc, "columns": {**cols, "rows": [[0.0]]}}, strict=True)
    except ValidationError:
        return None
    req.columns._array = T.astype(np.float64, copy=False)
    return req


async def rank_body(request: Request):
    """The :class:`~stream.serving.datamodels.RankRequest` of the body (columnar rows on the fast path)."""
    from stream.serving.datamodels import RankRequest

    raw = await request.body()
    req = _fast_columns(raw)
    return req if req is not None else _validate(RankRequest, raw)


def body_schema(model) -> dict:
    """``openapi_extra`` declaring ``model`` as the JSON request body."""
    return {"requestBody": {"required": True, "content": {"application/json": {
        "schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}}}
