"""The app factory of ``prefstream serve``.

:func:`create_app` builds the FastAPI app (routers of :mod:`stream.serving.routes`, error
handlers, the :class:`~stream.serving.middleware.ServeMiddleware`) around one
:class:`~stream.serving.service.ServeState`; its lifespan starts and stops the topic followers.
:func:`app_from_env` is the factory uvicorn's worker processes call (``serve_workers > 1``).
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from starlette.exceptions import HTTPException as StarletteHTTPException

from stream.serving.errors import APIError, JSONBody, error_body, field_path
from stream.serving.middleware import ServeMiddleware
from stream.serving.service import ServeState

__all__ = ["app_from_env", "create_app"]

log = logging.getLogger(__name__)


def create_app(settings, state: ServeState | None = None, follow: bool = True) -> FastAPI:
    """The ASGI app of one server process.

    Parameters
    ----------
    settings : Settings
    state : ServeState, optional
        A prepared state (tests); default a fresh one.
    follow : bool, default True
        Follow the model and item topics during the app's lifespan (False: the caller feeds
        ``state.live`` / ``state.catalog`` itself).

    Returns
    -------
    ASGI app
        The FastAPI app wrapped in the token / body-limit / metrics middleware; the FastAPI app
        itself is its ``.app`` and the state ``.app.state.serve``.
    """
    from importlib.metadata import PackageNotFoundError, version

    from stream.serving.routes import ops, v1

    try:
        __version__ = version("prefstream")
    except PackageNotFoundError:
        __version__ = "0"

    st = state or ServeState(settings)

    @asynccontextmanager
    async def lifespan(app):
        await st.start(follow=follow)
        try:
            yield
        finally:
            await st.stop()

    api = FastAPI(title="prefstream serve", version=str(__version__), lifespan=lifespan,
                  description="Rank, compare and explain with the live prefstream models (docs/serve.md).")
    api.state.serve = st
    api.include_router(v1.router)
    api.include_router(ops.router)

    @api.exception_handler(APIError)
    async def _api_error(request, exc: APIError):
        return exc.response()

    @api.exception_handler(RequestValidationError)
    async def _validation(request, exc: RequestValidationError):
        err = exc.errors()[0] if exc.errors() else {}
        where = field_path(err.get("loc", ()))
        return JSONBody(error_body("malformed", f"{where}: {err.get('msg', 'invalid')}.", where), status_code=422)

    @api.exception_handler(StarletteHTTPException)
    async def _http(request, exc: StarletteHTTPException):
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        # the exception's headers travel (a 405 carries Starlette's ``Allow``, RFC 9110 §15.5.6)
        return JSONBody(error_body(code, f"{request.method} {request.url.path}: {exc.detail}."), status_code=exc.status_code,
                        headers=getattr(exc, "headers", None))

    @api.exception_handler(Exception)
    async def _unexpected(request, exc: Exception):   # a bug: logged with its traceback, answered in one line
        log.exception("%s %s failed", request.method, request.url.path)
        return JSONBody(error_body("internal", f"{type(exc).__name__}: {exc}"), status_code=500)

    _document_bodies(api)
    endpoints = set(api.openapi()["paths"]) | {"/openapi.json", "/docs", "/redoc"}
    return ServeMiddleware(api, st.metrics, settings.serve_token, settings.serve_max_body_bytes, endpoints)


def _document_bodies(api: FastAPI) -> None:
    """Add the request-body models (parsed from bytes by ``json_body``) to the generated OpenAPI document."""
    from stream.serving.datamodels import CompareRequest, ExplainRequest, RankRequest, RecommendRequest

    def openapi():
        if api.openapi_schema:
            return api.openapi_schema
        doc = get_openapi(title=api.title, version=api.version, description=api.description, routes=api.routes)
        schemas = doc.setdefault("components", {}).setdefault("schemas", {})
        for model in (RankRequest, CompareRequest, ExplainRequest, RecommendRequest):
            js = model.model_json_schema(ref_template="#/components/schemas/{model}")
            schemas.update(js.pop("$defs", {}))
            schemas[model.__name__] = js
        api.openapi_schema = doc
        return doc

    api.openapi = openapi


def app_from_env():
    """uvicorn factory of the worker processes: the settings exported by the parent (stream.serving.settings)."""
    from stream.models import register_all
    from stream.serving.settings import settings_from_env

    register_all()
    return create_app(settings_from_env())
