"""One pure-ASGI middleware: bearer token, body size limit, request metrics.

Pure ASGI (no ``BaseHTTPMiddleware``): it costs a few microseconds per request.

* **Token.** With ``serve_token`` set, every path but ``/healthz`` needs
  ``Authorization: Bearer <token>``, compared in constant time (:func:`hmac.compare_digest`);
  otherwise 401 with ``WWW-Authenticate: Bearer``.
* **Body limit.** A ``Content-Length`` over ``serve_max_body_bytes`` is refused with 413 before
  the body is read; a chunked body is counted while it is read and refused the same way.
* **Metrics.** ``prefstream_serve_requests_total{endpoint,status}`` and
  ``prefstream_serve_request_latency_seconds{endpoint}``; ``endpoint`` is the route's path, or
  ``other`` for paths that are no route (bounded label values).
"""

from __future__ import annotations

import hmac
import time

from stream.serving.errors import APIError

__all__ = ["BodyTooLarge", "ServeMiddleware"]


class BodyTooLarge(APIError):
    def __init__(self, limit: int, size: int | None = None) -> None:
        what = f"{size} bytes" if size is not None else "more bytes"
        super().__init__(413, "too_large", f"The request body has {what}; the limit is {limit} (serve_max_body_bytes).",
                         field="body")


class ServeMiddleware:
    """Token check, body limit and metrics around the FastAPI app.

    Parameters
    ----------
    app : ASGI app
    metrics : Metrics
    token : str or None
    max_body : int
        Bytes.
    endpoints : set of str
        Paths that are routes (the ``endpoint`` label values).
    """

    OPEN = frozenset({"/healthz"})

    def __init__(self, app, metrics, token: str | None, max_body: int, endpoints: set[str]) -> None:
        self.app = app
        self.token = None if not token else f"Bearer {token}".encode()
        self.max_body = int(max_body)
        self.endpoints = set(endpoints)
        self._count = metrics.serve_requests
        self._latency = metrics.serve_latency
        self._children: dict = {}

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t0 = time.perf_counter()
        path = scope["path"]
        endpoint = path if path in self.endpoints else "other"
        status = [500]

        async def send_wrapper(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            err = self._refuse(scope, path)
            if err is not None:
                await err.response()(scope, receive, send_wrapper)
                return
            await self.app(scope, self._limited(receive), send_wrapper)
        finally:
            key = (endpoint, status[0])
            pair = self._children.get(key)
            if pair is None:
                pair = self._children[key] = (self._count.labels(endpoint=endpoint, status=str(status[0])),
                                              self._latency.labels(endpoint=endpoint))
            pair[0].inc()
            pair[1].observe(time.perf_counter() - t0)

    def _refuse(self, scope, path: str) -> APIError | None:
        if self.token is not None and path not in self.OPEN:
            given = b""
            for k, v in scope["headers"]:
                if k == b"authorization":
                    given = v
                    break
            if not hmac.compare_digest(given, self.token):
                return APIError(401, "unauthorized", "Missing or wrong bearer token: send 'Authorization: Bearer <token>' "
                                                     "(serve_token).", field="Authorization")
        for k, v in scope["headers"]:
            if k == b"content-length":
                try:
                    size = int(v)
                except ValueError:
                    return APIError(400, "malformed", "Content-Length is not an integer.", field="Content-Length")
                if size > self.max_body:
                    return BodyTooLarge(self.max_body, size)
                break
        return None

    def _limited(self, receive):
        limit = self.max_body
        seen = [0]

        async def wrapped():
            message = await receive()
            if message["type"] == "http.request":
                seen[0] += len(message.get("body", b""))
                if seen[0] > limit:
                    raise BodyTooLarge(limit)
            return message

        return wrapped
