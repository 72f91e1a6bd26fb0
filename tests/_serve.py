"""The in-process server of the serve tests: a hand-fed :class:`~stream.serving.service.ServeState`, its ASGI app.

No broker: the test feeds ``state.live`` (snapshots) and ``state.on_person`` itself; the items are
in the catalog before the first request. The real-broker server is ``tests.test_serve.Server``.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import contextmanager
from typing import Iterator, Mapping, Sequence

import httpx
import numpy as np

from stream.serving.app import create_app
from stream.serving.service import ServeState
from stream.settings import Settings


@contextmanager
def serving(overrides: Mapping, items: Mapping[str, np.ndarray], feature_names: Sequence[str]) -> Iterator[tuple]:
    """``(state, app)``: a ServeState over ``Settings.load(None, overrides)`` with ``items`` (id → feature
    vector in ``feature_names`` order) in its catalog, and the app over it (``follow=False``); the
    state's executor is shut down on leaving."""
    from stream.models import register_all

    register_all()
    st = ServeState(Settings.load(None, dict(overrides), environ={}))
    for i, x in items.items():
        st.on_item(i.encode(), json.dumps({"schema_version": 1, "item_id": i,
                                           "features": dict(zip(feature_names, np.asarray(x).tolist()))}).encode())
    try:
        yield st, create_app(st.settings, st, follow=False)
    finally:
        st.executor.shutdown(wait=True)


def post(app, path: str, body: dict) -> httpx.Response:
    """POST ``body`` as JSON to ``path`` of the ASGI ``app``."""
    async def go():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            return await c.post(path, json=body)
    return asyncio.run(go())
