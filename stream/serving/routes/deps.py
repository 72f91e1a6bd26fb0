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


async def rank_body(request: Request):
    """The :class:`~stream.serving.datamodels.RankRequest` of the body (for the rank endpoint, which reads it
    without the dependency solver).

    Columnar rows are parsed by pydantic's JSON parser and become one float64 array in
    :func:`stream.serving.inputs.candidates`. Measured on Pokémon (100 × 26 rows, a 50 KB body):
    that path and orjson + ``np.array`` + pydantic on the rest cost the same (151 vs 153 µs), so
    the single strict path is kept.
    """
    from stream.serving.datamodels import RankRequest

    return _validate(RankRequest, await request.body())


def body_schema(model) -> dict:
    """``openapi_extra`` declaring ``model`` as the JSON request body."""
    return {"requestBody": {"required": True, "content": {"application/json": {
        "schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}}}
