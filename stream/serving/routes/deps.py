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

__all__ = ["body_schema", "json_body", "state"]


async def state(request: Request):
    """The :class:`~stream.serving.service.ServeState` of this app (async: FastAPI runs sync
    dependencies in a thread pool, a context switch per request)."""
    return request.app.state.serve


def json_body(model):
    """A dependency returning the request body validated as ``model`` (422 naming the field)."""

    async def parse(request: Request):
        raw = await request.body()
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

    parse.body_model = model
    return parse


def body_schema(model) -> dict:
    """``openapi_extra`` declaring ``model`` as the JSON request body."""
    return {"requestBody": {"required": True, "content": {"application/json": {
        "schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}}}
