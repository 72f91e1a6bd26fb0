"""Routers of ``prefstream serve``, one module per resource (FastAPI's "bigger applications" layout).

* :mod:`~stream.serving.routes.v1` — ``/v1/rank``, ``/v1/compare``, ``/v1/explain``, ``/v1/recommend``, ``/v1/models``;
* :mod:`~stream.serving.routes.ops` — ``/healthz``, ``/readyz``, ``/metrics``.

Endpoints are thin: parse the typed body (:func:`~stream.serving.routes.deps.json_body`), call
:class:`~stream.serving.service.ServeState`, write JSON.
"""
