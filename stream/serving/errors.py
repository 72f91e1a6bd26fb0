"""Errors of ``prefstream serve``: every refusal is a 4xx JSON body naming the field, never a traceback.

Body: ``{"error": <code>, "detail": <one sentence>, "field": <path or null>, ...}``. Codes:

=====  ======================  ==========================================================
404    ``unknown_model``       no such registered model (``field: "model"``)
404    ``unknown_method``      the model has no such explanation method
404    ``unknown_item``        a candidate id the catalog does not hold
404    ``not_found``           no such endpoint
404    ``not_served``          a registered model this server is not configured for (names its models)
405    ``method_not_allowed``  the path has no such method (with ``Allow``, RFC 9110 §15.5.6)
401    ``unauthorized``        missing or wrong bearer token
413    ``too_large``           body over ``serve_max_body_bytes`` or more than ``serve_max_items``
422    ``malformed``           not JSON, wrong type, missing field (field = the JSON path)
422    ``out_of_range``        a non-finite value or one beyond ±MAX_ABS_VALUE (the contract's bound)
422    ``missing_feature``     an item lacks a feature the model needs
422    ``unknown_feature``     an item, a context or ``columns`` names a feature the model does not use
422    ``duplicate_item``      a candidate id (or a ``columns.feature_names`` name) given twice (``duplicates``)
503    ``not_loaded``          the model has no loaded snapshot yet (loading, topic still read, or none published)
503    ``not_fitted``          the model cannot score yet (a GPM before its first refit)
503    ``busy``                ``/v1/explain``: the explanation pool already holds its most batches
504    ``deadline_exceeded``   ``/v1/explain`` ran past ``serve_explain_deadline_s`` (with what was spent;
                               a ranking's explanations are marked missing instead, never a 504)
=====  ======================  ==========================================================
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from starlette.responses import Response

__all__ = ["APIError", "JSONBody", "error_body", "field_path"]

log = logging.getLogger(__name__)


class JSONBody(Response):
    """A JSON response written with orjson (numpy arrays and scalars allowed)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY)


class APIError(Exception):
    """A refusal with an HTTP status, a code, a message and (optionally) the offending field."""

    def __init__(self, status: int, code: str, detail: str, field: str | None = None, **extra: Any) -> None:
        super().__init__(detail)
        self.status, self.code, self.detail, self.field, self.extra = status, code, detail, field, extra

    def response(self) -> JSONBody:
        headers = {"WWW-Authenticate": "Bearer"} if self.status == 401 else None
        return JSONBody(error_body(self.code, self.detail, self.field, **self.extra), status_code=self.status,
                        headers=headers)


def error_body(code: str, detail: str, field: str | None = None, **extra: Any) -> dict:
    """The JSON error body."""
    return {"error": code, "detail": detail, "field": field, **extra}


def field_path(loc) -> str | None:
    """A pydantic error location as a JSON path: ``("items", 3, "features", "hp")`` → ``items[3].features.hp``.

    Examples
    --------
    >>> field_path(("items", 3, "features", "hp"))
    'items[3].features.hp'
    >>> field_path(()) is None
    True
    """
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or None
