"""Preference events: :class:`PreferenceExample` and :func:`parse_preference` (with its fast path)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stream.contract.catalog import ItemCatalog, _resolve
from stream.contract.decoding import (_DEFAULT_MAX_BYTES, _check_object_and_version, _decode, _features, _timestamp,
                                      _weight)
from stream.contract.reasons import DeadLetter
from stream.contract.schemas import _schema_check

__all__ = ["PreferenceExample", "parse_preference"]


@dataclass(frozen=True, slots=True)
class PreferenceExample:
    """One validated pairwise comparison, ready for ``PreferenceLearner.learn_one``.

    Attributes
    ----------
    event_id : str
        Idempotency key.
    timestamp : float
        Event time, unix seconds (UTC).
    left, right : dict of str to float
        Item features (finite floats). Dicts may be shared with the item catalog: do not mutate.
    outcome : int
        +1 left preferred, −1 right preferred, 0 indifferent.
    context : dict of str to float or None
        Context features.
    weight : float
        Example weight > 0.
    left_id, right_id : str or None
        Item ids when given.
    user_id : str or None
        The person whose comparison it is (personal models), when given.
    """

    event_id: str
    timestamp: float
    left: dict
    right: dict
    outcome: int
    context: dict | None = None
    weight: float = 1.0
    left_id: str | None = None
    right_id: str | None = None
    user_id: str | None = None


_PREF_KEYS = frozenset(("schema_version", "event_id", "timestamp", "left", "right", "outcome", "context", "weight",
                        "user_id"))
_REF_KEYS = frozenset(("id", "features"))


def _fast_numdict(d: Any, need_one: bool) -> bool:
    if type(d) is not dict or (need_one and not d):
        return False
    for k, v in d.items():
        tv = type(v)
        if (tv is not float and tv is not int) or not k or len(k) > 256:
            return False
    return True


def _fast_ref(r: Any) -> bool:
    if type(r) is not dict or not r or not (r.keys() <= _REF_KEYS):
        return False
    if "id" in r:
        i = r["id"]
        if type(i) is not str or not i or len(i) > 512:
            return False
    return "features" not in r or _fast_numdict(r["features"], True)


def _fast_preference_ok(d: dict) -> bool:
    """A strict subset of preference.v1.json (tested against jsonschema)."""
    if not (d.keys() <= _PREF_KEYS) or type(d.get("schema_version")) is not int or d["schema_version"] != 1:
        return False
    e = d.get("event_id")
    if type(e) is not str or not e or len(e) > 512:
        return False
    ts = d.get("timestamp")
    tt = type(ts)
    if tt is str:
        if not 10 <= len(ts) <= 64:
            return False
    elif (tt is not float and tt is not int) or not ts >= 0:
        return False
    o = d.get("outcome")
    if type(o) is not int or o not in (1, -1, 0):
        return False
    if not (_fast_ref(d.get("left")) and _fast_ref(d.get("right"))):
        return False
    if "user_id" in d and not _user_ok(d["user_id"]):
        return False
    return _fast_context_weight_ok(d)


def _user_ok(u: Any) -> bool:
    """A ``user_id`` as the schema takes it: a string of 1 to 512 characters."""
    return type(u) is str and 0 < len(u) <= 512


def _fast_context_weight_ok(d: dict) -> bool:
    """The optional ``context`` (numeric dict) and ``weight`` (> 0) of an event or a session."""
    if "context" in d and not _fast_numdict(d["context"], False):
        return False
    if "weight" in d:
        w = d["weight"]
        if (type(w) is not float and type(w) is not int) or not w > 0:
            return False
    return True


def _check_same_features(left: dict, right: dict, where: str = "") -> None:
    if left.keys() != right.keys():
        only_l = sorted(left.keys() - right.keys())[:5]
        only_r = sorted(right.keys() - left.keys())[:5]
        raise DeadLetter("schema_violation", f"{where}left and right items must have the same feature names; "
                                             f"only left has {only_l}, only right has {only_r}.")


def parse_preference(raw: bytes, catalog: ItemCatalog | None = None, max_bytes: int = _DEFAULT_MAX_BYTES) -> PreferenceExample:
    """Parse and validate one preference event (``preference.v1.json``).

    Parameters
    ----------
    raw : bytes
        The Kafka message value (UTF-8 JSON). ``str`` is accepted too.
    catalog : ItemCatalog, optional
        Resolves ``{"id": ...}`` item references; without it only inline features work.
    max_bytes : int, default 1 MiB
        Payloads longer than this are rejected before parsing.

    Returns
    -------
    PreferenceExample

    Raises
    ------
    DeadLetter
        With one reason from :data:`DEAD_LETTER_REASONS` (see the module docstring for the order
        of checks).

    Examples
    --------
    >>> ex = parse_preference(b'{"schema_version": 1, "event_id": "e1", "timestamp": 1700000000, '
    ...                       b'"left": {"features": {"price": 1.0}}, "right": {"features": {"price": 2}}, "outcome": -1}')
    >>> ex.outcome, ex.right, ex.weight
    (-1, {'price': 2.0}, 1.0)
    """
    return preference_from_doc(_decode(raw, max_bytes), catalog)


def preference_from_doc(d: Any, catalog: ItemCatalog | None = None) -> PreferenceExample:
    """Steps 4–8 of :func:`parse_preference` on an already decoded JSON value (batch decoders)."""
    d = _check_object_and_version(d, "preference event")
    if not _fast_preference_ok(d):
        _schema_check("preference", d)
    left, left_id = _resolve(d["left"], catalog, "left")
    right, right_id = _resolve(d["right"], catalog, "right")
    _check_same_features(left, right)
    ctx = d.get("context")
    if ctx is not None:
        ctx = _features(ctx, "context")
    w = d.get("weight")
    return PreferenceExample(
        event_id=d["event_id"],
        timestamp=_timestamp(d["timestamp"]),
        left=left,
        right=right,
        outcome=int(d["outcome"]),
        context=ctx,
        weight=1.0 if w is None else _weight(w),
        left_id=left_id,
        right_id=right_id,
        user_id=d.get("user_id"),
    )

