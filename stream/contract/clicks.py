"""Click sessions, expanded into preference pairs (by default clicked ≻ shown-but-not-clicked).

The pair strategy, inverse-propensity weights and orientation come from a
:class:`stream.clicks.log.SessionExpander` (the ``click_*`` settings); ``position`` /
``propensity`` of the shown items are checked here (:func:`stream.clicks.log.slot_problem`).
"""

from __future__ import annotations

from typing import Any

from stream.clicks import log as clicklog
from stream.contract.catalog import ItemCatalog, _resolve
from stream.contract.decoding import _DEFAULT_MAX_BYTES, _check_object_and_version, _decode, _features, _timestamp, _weight
from stream.contract.preference import PreferenceExample, _check_same_features, _fast_context_weight_ok, _fast_numdict
from stream.contract.reasons import DeadLetter
from stream.contract.schemas import _schema_check

__all__ = ["click_session_from_doc", "parse_click_session"]


_CLICK_KEYS = frozenset(("schema_version", "session_id", "user_id", "timestamp", "shown", "clicked", "context", "weight"))
_SLOT_KEYS = frozenset(("id", "features", "position", "propensity"))


def _fast_click_ok(d: dict) -> bool:
    """A strict subset of click_session.v1.json (tested against jsonschema)."""
    if not (d.keys() <= _CLICK_KEYS) or type(d.get("schema_version")) is not int or d["schema_version"] != 1:
        return False
    sid = d.get("session_id")
    if type(sid) is not str or not sid or len(sid) > 512:
        return False
    if "user_id" in d and (type(d["user_id"]) is not str or len(d["user_id"]) > 512):
        return False
    ts = d.get("timestamp")
    if type(ts) is str:
        if not 10 <= len(ts) <= 64:
            return False
    elif (type(ts) is not float and type(ts) is not int) or not ts >= 0:
        return False
    shown, clicked = d.get("shown"), d.get("clicked")
    if type(shown) is not list or not shown or type(clicked) is not list:
        return False
    for s in shown:
        if type(s) is not dict or not (s.keys() <= _SLOT_KEYS):
            return False
        i = s.get("id")
        if type(i) is not str or not i or len(i) > 512 or ("features" in s and not _fast_numdict(s["features"], True)):
            return False
        if "position" in s and (type(s["position"]) is not int or not 1 <= s["position"] <= 10000):
            return False
        if "propensity" in s:
            q = s["propensity"]
            if (type(q) is not float and type(q) is not int) or not 0 < q <= 1:
                return False
    for c in clicked:
        if type(c) is not str or not c or len(c) > 512:
            return False
    if len(set(clicked)) != len(clicked):
        return False
    return _fast_context_weight_ok(d)


def _click_structure(d: dict):
    """Schema + cross-field checks of a click session; returns its parts."""
    if not _fast_click_ok(d):
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
    problem = clicklog.slot_problem(shown)  # position / propensity cross-field checks
    if problem:
        raise DeadLetter("schema_violation", f"Session {sid!r}: {problem}")
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
                        max_bytes: int = _DEFAULT_MAX_BYTES,
                        expander: "clicklog.SessionExpander | None" = None) -> list[PreferenceExample]:
    """Parse a click session and expand it into preference pairs clicked ≻ shown-but-not-clicked.

    ``expander`` (a :class:`stream.clicks.log.SessionExpander`, built from the ``click_*``
    settings) chooses other pair strategies (clicked ≻ skipped-above, clicked ≻ next), inverse
    propensity weights and the pair orientation; the default below is its ``all`` strategy,
    unweighted, clicked item on the left.

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
    expander : stream.clicks.log.SessionExpander, optional

    Returns
    -------
    list of PreferenceExample
        ``event_id = f"{session_id}:{clicked_id}>{other_id}"``; the session timestamp, weight
        (times the expander's IPS weight), the session's ``user_id`` and a copy of the user context on every pair;
        ``left_id``/``right_id`` set.

    Raises
    ------
    DeadLetter
        As :func:`parse_preference`; ``schema_violation`` also for duplicate shown ids or a clicked
        id that was not shown; ``unknown_item`` if a shown item is neither inline nor in the
        catalog (checked only for items that take part in a pair).
    """
    return click_session_from_doc(_decode(raw, max_bytes), catalog, expander)


def click_session_from_doc(d: Any, catalog: ItemCatalog | None = None,
                           expander: "clicklog.SessionExpander | None" = None) -> list[PreferenceExample]:
    """Steps 4–8 of :func:`parse_click_session` on an already decoded JSON value (batch decoders)."""
    d = _check_object_and_version(d, "click session")
    sid, ts, shown, ids, clicked, ctx, w = _click_structure(d)
    plan = (expander or _DEFAULT_EXPANDER).plan(sid, shown, clicked)
    if not plan:
        return []
    feats = [_resolve(s, catalog, f"shown[{j}]")[0] for j, s in enumerate(shown)]
    out = []
    for a, b, f, swap in plan:
        ia, ib = ids[a], ids[b]
        _check_same_features(feats[a], feats[b], f"Session {sid!r}, items {ia!r} and {ib!r}: ")
        la, lb = (b, a) if swap else (a, b)
        out.append(PreferenceExample(
            event_id=f"{sid}:{ia}>{ib}", timestamp=ts, left=feats[la], right=feats[lb], outcome=-1 if swap else 1,
            context=None if ctx is None else dict(ctx), weight=w * f, left_id=ids[la], right_id=ids[lb],
            user_id=d.get("user_id") or None,
        ))
    return out


_DEFAULT_EXPANDER = clicklog.SessionExpander()
