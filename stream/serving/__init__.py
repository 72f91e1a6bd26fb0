"""``prefstream serve``: an HTTP API that ranks, compares and explains with the live models.

The server follows the compacted model topic, the item catalog and the people's changelog
(``prefstream.people``) like the explainer does
(:class:`stream.workers.live_models.LiveModels`, :class:`stream.workers.follower.TopicFollower`), swaps each
merged model version in atomically, and answers on FastAPI / uvicorn (uvloop, httptools, orjson):

=====================  =====================================================================
``POST /v1/rank``      candidates best first (by id, columnar or inline), optional explanations
``POST /v1/compare``   P(left ≻ right)
``POST /v1/explain``   one explanation record (explanation.v1.json) under a deadline
``POST /v1/recommend`` a person's top_k of the whole catalog (personal models), optional exclusions
``GET /v1/models``     merged version, source versions, examples seen, snapshot age
``GET /healthz``       process up;  ``GET /readyz``: every configured model loaded;  ``GET /metrics``
(rank, compare, explain and recommend take ``user_id``: personalized answers from that person's state)
=====================  =====================================================================

Modules: :mod:`~stream.serving.app` (factory), :mod:`~stream.serving.datamodels` (typed bodies),
:mod:`~stream.serving.routes` (thin endpoints), :mod:`~stream.serving.service` (state and
operations), :mod:`~stream.serving.explaining` (explanation cache, deadline, missing markers),
:mod:`~stream.serving.people` (the server's store of people), :mod:`~stream.serving.scoring` (the model
interface and rank aggregates),
:mod:`~stream.serving.inputs` (bodies → arrays, numeric bounds), :mod:`~stream.serving.catalog`
(catalog matrix), :mod:`~stream.serving.middleware` (token, body limit, metrics),
:mod:`~stream.serving.errors`, :mod:`~stream.serving.settings`, :mod:`~stream.serving.run`.
See docs/serve.md.
"""

__all__ = ["create_app", "run_server"]


def __getattr__(name):
    if name == "create_app":
        from stream.serving.app import create_app

        return create_app
    if name == "run_server":
        from stream.serving.run import run_server

        return run_server
    raise AttributeError(name)
