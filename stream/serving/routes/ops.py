"""Operations endpoints: liveness, readiness, Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from fastapi.responses import PlainTextResponse

from stream.serving.datamodels import HealthResponse, ReadyResponse
from stream.serving.errors import JSONBody
from stream.serving.routes.deps import state

__all__ = ["router"]

router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=HealthResponse)
async def healthz():
    """The process is up (never needs the token)."""
    return JSONBody({"status": "ok"})


@router.get("/readyz", response_model=ReadyResponse, responses={503: {"model": ReadyResponse}})
async def readyz(st=Depends(state)):
    """200 once every configured model has a loaded snapshot and both topics are caught up; 503 before."""
    r = st.readiness()
    return JSONBody(r, status_code=200 if r["ready"] else 503)


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(st=Depends(state)):
    """Prometheus text format (metrics of stream.metrics)."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    st.live.update_age_gauges()
    return PlainTextResponse(generate_latest(st.metrics.registry), media_type=CONTENT_TYPE_LATEST)
