"""Typed request and response bodies of ``prefstream serve`` (the OpenAPI document is generated from them).

Requests are validated straight from the JSON bytes (``Model.model_validate_json``, pydantic's
Rust parser); responses are written with orjson and documented by the response models below
(the tests validate every answer against them).

Candidates of ``/v1/rank`` come in exactly one of three forms:

* ``ids`` — catalog ids (``prefstream.items``): a row gather from the catalog matrix, the fastest;
* ``columns`` — ``{"feature_names": [...], "rows": [[...], ...], "ids": [...]?}``: one row per
  candidate, parsed into one float64 array (the fastest form with inline features);
* ``items`` — ``[{"id": ...}, {"id": ..., "features": {...}}, {"features": {...}}]``: per-item
  references as in preference events (inline features win over the catalog).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from stream.contract import MAX_ABS_VALUE

__all__ = [
    "Columns", "CompareRequest", "CompareResponse", "ErrorResponse", "ExplainRequest", "ExplanationRecord",
    "HealthResponse", "ItemRef", "MissingExplanation", "ModelInfo", "ModelsResponse", "RankRequest", "RankResponse", "RankedItem", "RecommendRequest", "RecommendResponse",
    "ReadyResponse",
]


class _Strict(BaseModel):
    """Requests: unknown fields are refused, numbers must be JSON numbers (no "1.5" strings, no booleans)."""

    model_config = ConfigDict(extra="forbid", strict=True)


def _integral(v):
    """An integer-valued JSON number (``5.0``) is the integer 5, as JSON Schema's ``integer`` says; ``5.5``,
    ``"5"`` and ``true`` stay what they are and are refused by the strict integer check."""
    return int(v) if isinstance(v, float) and v.is_integer() else v


def json_int(lo: int, hi: int | None = None):
    """A JSON integer in [lo, hi]: ``5`` or ``5.0`` (JSON Schema counts integer-valued numbers as integers);
    the bounds are in the schema (``minimum`` / ``maximum``)."""
    return Annotated[int, Field(ge=lo, le=hi), BeforeValidator(_integral)]


#: A feature value. The bound ±MAX_ABS_VALUE is in the schema; a value beyond it (or non-finite, such as
#: ``1e400``) is refused by the server with 422 ``out_of_range`` naming its path (stream.serving.inputs).
Value = Annotated[float, WithJsonSchema({"type": "number", "minimum": -MAX_ABS_VALUE, "maximum": MAX_ABS_VALUE})]
#: Seeds: 0 … 2^63 − 1.
MAX_SEED = 2**63 - 1
Seed = json_int(0, MAX_SEED)


class ItemRef(_Strict):
    """One item: a catalog ``id``, inline ``features``, or both (inline features win)."""

    id: Optional[str] = Field(None, min_length=1, max_length=256, description="Catalog item id.")
    features: Optional[dict[str, Value]] = Field(None, description="Inline features {name: value}.")


class Columns(_Strict):
    """Inline candidates as one table: ``feature_names`` once, one row per candidate."""

    feature_names: list[str] = Field(..., min_length=1, description="Column names of ``rows`` (no name twice).",
                                     json_schema_extra={"uniqueItems": True})
    rows: list[list[Value]] = Field(..., min_length=1, description="One row per candidate, len(feature_names) values each.")
    ids: Optional[list[str]] = Field(None, description="Optional candidate ids (default: row numbers; no id twice).",
                                     json_schema_extra={"uniqueItems": True})


#: A person of a personal model (the event contract's ``user_id``: 1 to 512 characters).
UserId = Annotated[str, Field(min_length=1, max_length=512)]
_USER = ("The person asking (personal models such as capacity-personal score with their deviation; a person "
         "the server does not hold, or any other model, answers with the population: personalized false).")


class RankRequest(_Strict):
    """``POST /v1/rank``: order candidates best first."""

    model: str = Field(..., description="Model name, e.g. 'capacity' or 'gpm'.")
    user_id: Optional[UserId] = Field(None, description=_USER)
    ids: Optional[list[str]] = Field(None, min_length=1, json_schema_extra={"uniqueItems": True},
                                     description="Candidates by catalog id, each once (an id given twice is "
                                                 "refused: 422 duplicate_item).")
    columns: Optional[Columns] = None
    items: Optional[list[ItemRef]] = Field(None, min_length=1, description="Candidates as item references (an id "
                                                                           "given twice is refused).")
    context: Optional[dict[str, Value]] = Field(None, description="Context features (context models such as cgpm).")
    top_k: Optional[json_int(1)] = Field(None, description="Return the best top_k (default: all).")
    explain: Optional[str] = Field(None, description="An explanation method: explain each of the top_k items "
                                                     "against the next one in the ranking.")
    seed: Optional[Seed] = Field(None, description="Seed of sampling explainers (default: the seed setting).")


class RankedItem(BaseModel):
    id: str
    score: float = Field(..., description="Utility, or mean P(item ≻ other candidate) (see 'aggregate').")
    rank: int = Field(..., ge=1)


class _Versioned(BaseModel):
    model: str
    version: int = Field(..., description="Merged version: the sum of the source versions.")
    source_versions: dict[str, int] = Field(..., description="Version of each source snapshot ('<topic>:<partition>').")


class _Personalized(_Versioned):
    user_id: Optional[str] = Field(..., description="The request's person (null: none asked).")
    personalized: bool = Field(..., description="Scored with the person's own deviation (false: the population's "
                                                "model; no person, a model without people, or a person not held).")
    person_version: int = Field(..., ge=0, description="Version of the person's state that answered: the number of "
                                                       "their events it has learned (0 when not personalized).")


class ExplanationRecord(BaseModel):
    """An explanation record, schema ``stream/schemas/explanation.v1.json`` (as the explainer worker emits)."""

    model_config = ConfigDict(extra="allow")
    schema_version: int
    request_id: str
    model_name: Optional[str] = None
    model_version: int
    method: str
    feature_names: list[str]
    values: list[Any]
    base_value: Any
    prediction: Any = None
    data: Any = None
    extra: dict[str, Any] = {}
    compute_time_s: float


class MissingExplanation(BaseModel):
    """In a ranking's ``explanations``: a pair not explained within the ranking's deadline, and why."""

    missing: Literal[True]
    reason: Literal["deadline_exceeded", "busy", "not_fitted", "failed"] = Field(
        ..., description="deadline_exceeded (it goes on; a later ranking finds it in the cache), busy (the "
                         "explanation pool is full), not_fitted, failed (the explainer refused the pair).")
    detail: str
    request_id: str
    left_id: Optional[str] = None
    right_id: Optional[str] = None
    model_name: str
    model_version: int
    method: str
    waited_s: Optional[float] = Field(None, description="Seconds this ranking waited for it (deadline_exceeded): the "
                                                        "deadline for the ranking that started it, 0 for the later "
                                                        "ones while it is still being computed.")


class RankResponse(_Personalized):
    aggregate: str = Field(..., description="'utility' (sorted by f(x)) or 'mean_pairwise_probability' (Borda).")
    items: list[RankedItem]
    explanations: Optional[list[Union[ExplanationRecord, MissingExplanation]]] = Field(
        None, description="With 'explain': item k against item k + 1 of the ranking, for the top_k items; a pair "
                          "not explained within serve_rank_explain_deadline_s is a MissingExplanation in its place "
                          "(the ranking itself never waits longer, and never fails for it).")


class CompareRequest(_Strict):
    """``POST /v1/compare``: P(left ≻ right)."""

    model: str
    user_id: Optional[UserId] = Field(None, description=_USER)
    left: ItemRef
    right: ItemRef
    context: Optional[dict[str, Value]] = None


class CompareResponse(_Personalized):
    probability: float = Field(..., ge=0.0, le=1.0, description="P(left ≻ right).")


class ExplainRequest(_Strict):
    """``POST /v1/explain``: one explanation record of left vs right, under the deadline."""

    model: str
    user_id: Optional[UserId] = Field(None, description=_USER + " The record's extra names the person.")
    method: Optional[str] = Field(None, description="Default: the model's default method (see GET /v1/models).")
    left: ItemRef
    right: ItemRef
    context: Optional[dict[str, Value]] = None
    params: Optional[dict[str, Any]] = None
    request_id: Optional[str] = Field(None, min_length=1, max_length=256)
    seed: Optional[Seed] = None


class RecommendRequest(_Strict):
    """``POST /v1/recommend``: the best top_k items of the whole catalog for a person."""

    model: str = Field(..., description="Model name, e.g. 'capacity-personal'.")
    user_id: Optional[UserId] = Field(None, description=_USER)
    top_k: json_int(1) = Field(10, description="How many items (default 10).")
    exclude: Optional[list[str]] = Field(None, json_schema_extra={"uniqueItems": True},
                                         description="Catalog ids never recommended (e.g. already bought); ids the "
                                                     "catalog does not hold are ignored.")
    context: Optional[dict[str, Value]] = Field(None, description="Context features (context models).")


class RecommendResponse(_Personalized):
    aggregate: str = Field(..., description="'utility' or 'mean_pairwise_probability' (see RankResponse).")
    items: list[RankedItem]
    catalog_items: int = Field(..., description="Catalog items holding the model's features (the candidates).")
    excluded: int = Field(..., description="Of those, left out by 'exclude'.")


class ModelInfo(BaseModel):
    model: str
    version: int
    source_versions: dict[str, int]
    examples_seen: int
    snapshot_age_s: float
    aggregate: Optional[str] = None
    feature_names: list[str]
    context_names: list[str]
    methods: list[str]
    default_method: Optional[str] = None
    ready: bool = Field(..., description="False while the model cannot score yet (e.g. a GPM before its first refit).")
    load_failures: int


class ModelsResponse(BaseModel):
    models: list[ModelInfo]
    catalog_items: int


class HealthResponse(BaseModel):
    status: str


class ReadyResponse(BaseModel):
    ready: bool
    missing: list[str] = Field(..., description="Configured models without a loaded snapshot.")
    loading: list[str] = Field(..., description="Those of `missing` whose snapshot was read and is being loaded "
                                                "(the others have none published yet).")
    catalog_caught_up: bool
    models_caught_up: bool
    people_caught_up: bool = Field(..., description="The people's changelog (prefstream.people) read to the end it had "
                                                    "at start; required for readiness only while a personal model "
                                                    "is served.")


class ErrorResponse(BaseModel):
    error: str = Field(..., description="Machine-readable code, e.g. 'unknown_model', 'malformed', 'too_large'.")
    detail: str
    field: Optional[str] = Field(None, description="Path of the offending field, e.g. 'items[3].features.hp'.")
