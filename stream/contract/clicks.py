"""Click sessions, expanded into preference pairs clicked ≻ shown-but-not-clicked."""

from __future__ import annotations

from stream.contract.catalog import ItemCatalog, _resolve
from stream.contract.decoding import _DEFAULT_MAX_BYTES, _check_object_and_version, _decode, _features, _timestamp, _weight
from stream.contract.preference import PreferenceExample, _check_same_features
from stream.contract.reasons import DeadLetter
from stream.contract.schemas import _schema_check

__all__ = ["parse_click_session"]


def _click_structure(d: dict):
    """Schema + cross-field checks of a click session; returns its parts."""
    _schema_check("click_session", d)
    sid = d["session_id"]
    ts = _timestamp(d["timestamp"])
    shown = d["shown"]
    ids = [s["id"] for s in shown]
    id_set = set(ids)
    if len(id_set) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})[:5]
        raise DeadLetter("schema_violation", f"Session {sid!r} shows the items {dup} more than once; list each shown item once.")
    missing = [c for c in d["clicked"] if c not in id_set]
    if missing:
        raise DeadLetter("schema_violation", f"Session {sid!r}: clicked items {missing[:5]} are not among the shown items.")
    for j, s in enumerate(shown):
        if "features" in s:
            _features(s["features"], f"shown[{j}].features")
    ctx = d.get("context")
    if ctx is not None:
        ctx = _features(ctx, "context")
    w = d.get("weight")
    w = 1.0 if w is None else _weight(w)
    return sid, ts, shown, ids, set(d["clicked"]), ctx, w


def parse_click_session(raw: bytes, catalog: ItemCatalog | None = None,
                        max_bytes: int = _DEFAULT_MAX_BYTES) -> list[PreferenceExample]:
    """Parse a click session and expand it into preference pairs clicked ≻ shown-but-not-clicked.

    A session that shows ``n`` distinct items of which ``k`` were clicked becomes ``k·(n−k)``
    examples with outcome +1 (the clicked item on the left); clicked items do not play each other,
    as in the Website experiment of Hu et al., *Explaining Preferences with Shapley Values*
    (NeurIPS 2022), App. B. A session without clicks, or where every shown item was clicked,
    yields no pairs (not an error). Pairs are ordered by the clicked item's, then the other item's
    position in ``shown``.

    Parameters
    ----------
    raw : bytes
        The message value (``click_session.v1.json``).
    catalog : ItemCatalog, optional
        Resolves shown items without inline features.
    max_bytes : int, default 1 MiB

    Returns
    -------
    list of PreferenceExample
        ``event_id = f"{session_id}:{clicked_id}>{other_id}"``; the session timestamp, weight and a
        copy of the user context on every pair; ``left_id``/``right_id`` set.

    Raises
    ------
    DeadLetter
        As :func:`parse_preference`; ``schema_violation`` also for duplicate shown ids or a clicked
        id that was not shown; ``unknown_item`` if a shown item is neither inline nor in the
        catalog (checked only for items that take part in a pair).
    """
    d = _check_object_and_version(_decode(raw, max_bytes), "click session")
    sid, ts, shown, ids, clicked, ctx, w = _click_structure(d)
    if not clicked or len(clicked) == len(ids):
        return []
    feats = [_resolve(s, catalog, f"shown[{j}]")[0] for j, s in enumerate(shown)]
    out = []
    for a, ia in enumerate(ids):
        if ia not in clicked:
            continue
        for b, ib in enumerate(ids):
            if ib in clicked:
                continue
            _check_same_features(feats[a], feats[b], f"Session {sid!r}, items {ia!r} and {ib!r}: ")
            out.append(PreferenceExample(
                event_id=f"{sid}:{ia}>{ib}", timestamp=ts, left=feats[a], right=feats[b], outcome=1,
                context=None if ctx is None else dict(ctx), weight=w, left_id=ia, right_id=ib,
            ))
    return out

