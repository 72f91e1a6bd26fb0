"""``/v1/*``: rank, compare, explain, models (KServe v1-style model endpoints, typed in datamodels)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from stream.serving.datamodels import (CompareRequest, CompareResponse, ErrorResponse, ExplainRequest,
                                       ExplanationRecord, ModelsResponse, RankRequest, RankResponse, RecommendRequest,
                                       RecommendResponse)
from stream.serving.errors import JSONBody
from stream.serving.routes.deps import body_schema, json_body, rank_body, state

__all__ = ["router"]

_ERRORS = {code: {"model": ErrorResponse} for code in (401, 404, 413, 422, 503)}
router = APIRouter(prefix="/v1", responses=_ERRORS, tags=["v1"])


@router.post("/rank", response_model=RankResponse, openapi_extra=body_schema(RankRequest))
async def rank(request: Request):
    """Order the candidates best first (utility, or mean pairwise probability for GPM / C-GPM)."""
    # the hot path: the body and the state are read here, not through FastAPI's dependency solver
    st = request.app.state.serve
    out, job = st.rank(await rank_body(request))
    if job is not None:
        out["explanations"] = await st.run_rank_explain(job)
    return JSONBody(out)


@router.post("/recommend", response_model=RecommendResponse, openapi_extra=body_schema(RecommendRequest))
async def recommend(req: RecommendRequest = Depends(json_body(RecommendRequest)), st=Depends(state)):
    """The top_k of the whole item catalog for a person (personal models), optionally excluding ids."""
    return JSONBody(st.recommend(req))


@router.post("/compare", response_model=CompareResponse, openapi_extra=body_schema(CompareRequest))
async def compare(req: CompareRequest = Depends(json_body(CompareRequest)), st=Depends(state)):
    """P(left ≻ right) from the live model."""
    return JSONBody(st.compare(req))


@router.post("/explain", response_model=ExplanationRecord, openapi_extra=body_schema(ExplainRequest),
             responses={504: {"model": ErrorResponse, "description": "The explanation passed the deadline."}})
async def explain(req: ExplainRequest = Depends(json_body(ExplainRequest)), st=Depends(state)):
    """One explanation record (explanation.v1.json) of left vs right, under the deadline."""
    records = await st.run_explain(st.explain_job(req))
    return JSONBody(records[0])


@router.get("/models", response_model=ModelsResponse)
async def models(st=Depends(state)):
    """Every loaded model: merged version, source versions, examples seen, snapshot age."""
    return JSONBody(st.models())
