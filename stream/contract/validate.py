"""Producer-side validation of a decoded record (:func:`validate_record`, used by ``prefstream replay``)."""

from __future__ import annotations

from typing import Any

from stream.contract.clicks import _click_structure
from stream.contract.decoding import _check_object_and_version, _features, _timestamp, _weight
from stream.contract.preference import _check_same_features, _fast_preference_ok
from stream.contract.schemas import _schema_check

__all__ = ["validate_record"]


def validate_record(kind: str, doc: Any) -> None:
    """Check a decoded record against the contract without resolving item ids.

    Used by producers (``prefstream replay``) to reject bad records at the source. Runs every
    check of the matching ``parse_*`` function except the item-catalog lookup (``unknown_item``).

    Parameters
    ----------
    kind : {"preference", "click", "item"}
    doc : object
        The decoded JSON value.

    Raises
    ------
    DeadLetter
        With the reason the consumer would give.
    InvalidParameterError
        For an unknown ``kind``.
    """
    from learners.exceptions import check_param

    check_param("validate_record", "kind", kind, kind in ("preference", "click", "item"), "'preference', 'click' or 'item'")
    if kind == "item":
        d = _check_object_and_version(doc, "item record")
        _schema_check("item", d)
        if d["features"] is not None:
            _features(d["features"], "features")
        if "timestamp" in d:
            _timestamp(d["timestamp"])
        return
    if kind == "click":
        _click_structure(_check_object_and_version(doc, "click session"))
        return
    d = _check_object_and_version(doc, "preference event")
    if not _fast_preference_ok(d):
        _schema_check("preference", d)
    inline = {}
    for side in ("left", "right"):
        if "features" in d[side]:
            inline[side] = _features(d[side]["features"], f"{side}.features")
    if len(inline) == 2:
        _check_same_features(inline["left"], inline["right"])
    if d.get("context") is not None:
        _features(d["context"], "context")
    _timestamp(d["timestamp"])
    if d.get("weight") is not None:
        _weight(d["weight"])

