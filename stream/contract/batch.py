"""Micro-batch ingest: decode a batch of messages fast, validate each, build learner arrays.

The learner worker takes its input in micro-batches (``batch_max_events`` / ``batch_max_ms``,
``docs/workers.md``). This module turns one batch of raw message values into

* per message either its validated examples (a preference event gives one, a click session
  gives its clicked ≻ shown pairs) or the :class:`~stream.contract.DeadLetter` that message
  raised — every bad message keeps its own dead letter and reason (:func:`parse_batch`);
* per model, the float arrays of the batch contract (:func:`learner_arrays`):
  ``X_left``/``X_right`` in ``feature_names`` order, the context in ``context_names`` order,
  outcomes and weights, with the rows a model cannot take reported per row.

**Decoder.** Measured here on 20,000 Pokémon-sized events (26 features a side, 2-core machine,
load 0.6): ``json.loads`` 56,000 msg/s, the contract's reference decoder 54,000, msgspec
237,000, **orjson 280,000** — so :func:`decode` uses orjson. Its fast path only ever
*accepts*: any payload orjson refuses (NaN/Infinity tokens, numbers overflowing to ±inf, lone
surrogates, invalid UTF-8, …) goes through the contract's reference decoder
(:func:`stream.contract.decode_json`), which then either accepts it too or raises the exact
dead-letter reason it always did. The only documented difference between the two on accepted
input: integers beyond 64 bits come back as floats (the contract converts every feature to a
float anyway, and outcome / schema_version checks fail on such values either way).
After decoding, the per-message validators of :mod:`stream.contract`
(:func:`~stream.contract.preference_from_doc`, :func:`~stream.contract.click_session_from_doc`)
run unchanged, each message on its own — except for the common shape of a preference event
(inline features on both sides, numbers only, optional numeric context and weight), which
:func:`_fast_preferences` checks a batch at a time: the structure per message with dict and
type lookups, every feature, context and weight value of the batch in one numpy array
(finite, within :data:`~stream.contract.MAX_ABS_VALUE` / :data:`~stream.contract.WEIGHT_RANGE`).
It only ever *accepts*, and gives a :class:`RowExample` equal to the
:class:`~stream.contract.PreferenceExample` the validator builds; any message it is not sure of
goes through :func:`preference_from_doc`, which gives the reason (``tests/test_ingest_fast.py``
compares both on valid and broken events). A row example keeps its item features as a row of
the batch's ``(n, k)`` arrays (one :class:`_Block` per feature-name tuple, held by the
:class:`Parsed` list :func:`parse_batch` returns): :func:`learner_arrays` indexes those arrays
instead of reading dicts, and the feature dicts are built only when asked for (``learn_one``
fallbacks, explainers). Measured in ``bench/catchup.py --profile-events``: validation was a
quarter of the learner core's time on Pokémon duels (26 features a side) before the batch
check, and building the example dicts and reading them back into arrays half of what remained.
"""

from __future__ import annotations

import logging
import weakref
from operator import itemgetter
from typing import Any, Sequence

import numpy as np
import orjson

from stream.contract import (
    MAX_ABS_VALUE,
    WEIGHT_RANGE,
    DeadLetter,
    ItemCatalog,
    PreferenceExample,
    click_session_from_doc,
    decode_json,
    preference_from_doc,
)
from stream.contract.decoding import Decoded, FeatureRow, plain_doc
from stream.contract.preference import _PREF_KEYS, _REF_KEYS

__all__ = ["BatchArrays", "Parsed", "RowExample", "decode", "learner_arrays", "parse_batch"]

_ORJSON_ERROR = orjson.JSONDecodeError

log = logging.getLogger(__name__)

#: ``(model, feature)`` pairs already warned about: an event feature a model does not use is logged
#: once per name and process (then ignored, as ``learn_one`` ignores it)
_WARNED_UNKNOWN: set[tuple[str, str]] = set()


def _warn_unknown_features(model: str, feature_names: Sequence[str], features: dict) -> None:
    known = set(feature_names)
    for name in features:
        if name not in known and (model, name) not in _WARNED_UNKNOWN:
            _WARNED_UNKNOWN.add((model, name))
            log.warning("model %r ignores event feature %r: it is not one of its feature_names %s (logged once "
                        "per feature)", model, name, list(feature_names)[:20])


def decode(raw: Any, max_bytes: int) -> Any:
    """Bytes → JSON value with orjson; anything orjson refuses goes through the reference decoder.

    Raises
    ------
    DeadLetter
        ``oversize``, ``malformed_json`` or ``non_finite``, exactly as
        :func:`stream.contract.decode_json`.
    """
    if type(raw) is bytes and len(raw) <= max_bytes:
        try:
            return orjson.loads(raw)
        except _ORJSON_ERROR:
            pass
    return decode_json(raw, max_bytes)  # a Decoded value (Avro, JSON Schema framing) gives its document here


def _decode_for_batch(raw: Any, max_bytes: int) -> Any:
    """:func:`decode`, but a :class:`Decoded` document as it is: its feature maps may be
    :class:`FeatureRow` (the fast path takes them; :func:`parse_batch` makes the others plain)."""
    if type(raw) is Decoded and raw.error is None:
        return raw.doc
    return decode(raw, max_bytes)


def parse_batch(kind: str, values: Sequence[Any], catalog: ItemCatalog | None, max_bytes: int,
                expander=None) -> list:
    """Decode and validate each message of a batch on its own.

    Parameters
    ----------
    kind : {"preferences", "clicks"}
    values : sequence of bytes
        Raw message values.
    catalog : ItemCatalog, optional
    max_bytes : int
    expander : stream.clicks.log.SessionExpander, optional
        How click sessions become pairs (the ``click_*`` settings); default: clicked ≻ all shown.

    Returns
    -------
    Parsed
        A list with one entry per message: a list of :class:`~stream.contract.PreferenceExample`
        or :class:`RowExample` (one for a
        preference event, the expanded pairs for a click session, possibly empty) or the
        :class:`~stream.contract.DeadLetter` the message raised.
    """
    single = kind != "clicks"
    out = Parsed()
    docs: list = []
    loads = orjson.loads
    for raw in values:
        if type(raw) is bytes and len(raw) <= max_bytes:  # decode()'s orjson path, inlined: the hot loop
            try:
                docs.append(loads(raw))
                continue
            except _ORJSON_ERROR:
                pass
        try:
            docs.append(_decode_for_batch(raw, max_bytes))
        except DeadLetter as dl:
            docs.append(dl)
    fast = _fast_preferences(docs) if single else [None] * len(docs)
    out.blocks = getattr(fast, "blocks", [])
    for doc, ex in zip(docs, fast):
        if ex is not None:
            out.append([ex])
            continue
        if isinstance(doc, DeadLetter):
            out.append(doc)
            continue
        doc = plain_doc(doc)  # the validators take the JSON contract's dicts
        try:
            res = preference_from_doc(doc, catalog) if single else click_session_from_doc(doc, catalog, expander)
        except DeadLetter as dl:
            out.append(dl)
            continue
        out.append([res] if single else res)
    return out


#: feature-name tuples already checked (non-empty names of at most 256 characters)
_GOOD_NAMES: set = set()
_NUMBER = (float, int)
#: what a feature map of the fast path may be: a JSON object, or a wire format's FeatureRow
_FEATURE_MAPS = (dict, FeatureRow)


def _names_ok(names: tuple) -> bool:
    if names in _GOOD_NAMES:
        return True
    if not names or not all(type(k) is str and 0 < len(k) <= 256 for k in names):
        return False
    if len(_GOOD_NAMES) > 4096:
        _GOOD_NAMES.clear()
    _GOOD_NAMES.add(names)
    return True


def _shape(d: Any):
    """``(event_id, timestamp, outcome, names, left, right, context, left_id, right_id, user_id)`` of an event of
    the common shape (``left`` / ``right`` / ``context``: the feature dicts; context None when absent),
    or None."""
    if type(d) is not dict or not (d.keys() <= _PREF_KEYS):
        return None
    sv, eid, ts, o = d.get("schema_version"), d.get("event_id"), d.get("timestamp"), d.get("outcome")
    if type(sv) is not int or sv != 1 or type(eid) is not str or not 0 < len(eid) <= 512:
        return None
    if type(o) is not int or o not in (1, -1, 0) or type(ts) not in _NUMBER or not 0 <= ts < 1e18:
        return None
    left, right = d.get("left"), d.get("right")
    if type(left) is not dict or type(right) is not dict or not (left.keys() <= _REF_KEYS) or not (right.keys() <= _REF_KEYS):
        return None
    fl, fr = left.get("features"), right.get("features")
    if type(fl) is dict and type(fr) is dict:  # JSON: the common case first
        names = tuple(fl)
        if tuple(fr) != names:
            return None
    elif type(fl) in _FEATURE_MAPS and type(fr) in _FEATURE_MAPS:
        names = fl.names if type(fl) is FeatureRow else tuple(fl)
        if (fr.names if type(fr) is FeatureRow else tuple(fr)) != names:
            return None
    else:
        return None
    if not _names_ok(names):
        return None
    lid, rid = left.get("id"), right.get("id")
    if lid is not None and (type(lid) is not str or not 0 < len(lid) <= 512) or (lid is None and "id" in left):
        return None
    if rid is not None and (type(rid) is not str or not 0 < len(rid) <= 512) or (rid is None and "id" in right):
        return None
    c = None
    if "context" in d:
        c = d["context"]
        if type(c) not in _FEATURE_MAPS or (c and not _names_ok(tuple(c))):
            return None
    u = None
    if "user_id" in d:
        u = d["user_id"]
        if type(u) is not str or not 0 < len(u) <= 512:
            return None
    return eid, ts, o, names, fl, fr, c, lid, rid, u


class _Block:
    """Feature values of the fast path's messages of one batch with one feature-name tuple.

    Attributes
    ----------
    names : tuple of str
    L, R : ndarray (n, len(names))
        Left and right item features of the block's messages, in ``names`` order.
    """

    __slots__ = ("L", "R", "__weakref__", "names")

    def __init__(self, names: tuple, L: np.ndarray, R: np.ndarray) -> None:
        self.names, self.L, self.R = names, L, R


class RowExample:
    """A validated preference event of the batch fast path: a :class:`PreferenceExample` whose item
    features stay a row of the batch's arrays until someone asks for the dicts.

    ``left`` / ``right`` build (and keep) the same dicts of floats the contract's validator builds
    (from the decoded message's feature dicts, whose values the batch check passed);
    :meth:`example` gives the :class:`PreferenceExample` itself, and a row example compares equal
    to it. :func:`learner_arrays` takes the rows of one batch straight from the block's arrays
    (a weak reference: an example kept longer, e.g. in the explainer's reservoir, does not keep
    the batch's arrays alive).
    """

    __slots__ = ("_left", "_right", "block", "context", "event_id", "left_id", "outcome", "raw_left", "raw_right",
                 "right_id", "row", "timestamp", "user_id", "weight")

    def __init__(self, event_id, timestamp, outcome, context, weight, left_id, right_id, raw_left, raw_right, block,
                 row, user_id=None):
        self.event_id, self.timestamp, self.outcome, self.context, self.weight = event_id, timestamp, outcome, context, weight
        self.left_id, self.right_id, self.raw_left, self.raw_right = left_id, right_id, raw_left, raw_right
        self.block, self.row, self.user_id = block, row, user_id
        self._left = self._right = None

    @property
    def left(self) -> dict:
        if self._left is None:
            self._left = {k: float(v) for k, v in self.raw_left.items()}
        return self._left

    @property
    def right(self) -> dict:
        if self._right is None:
            self._right = {k: float(v) for k, v in self.raw_right.items()}
        return self._right

    def example(self) -> PreferenceExample:
        """The same event as a :class:`PreferenceExample`."""
        return PreferenceExample(self.event_id, self.timestamp, self.left, self.right, self.outcome, self.context,
                                 self.weight, self.left_id, self.right_id, self.user_id)

    def __eq__(self, other) -> bool:
        if isinstance(other, RowExample):
            other = other.example()
        if not isinstance(other, PreferenceExample):
            return NotImplemented
        return self.example() == other

    __hash__ = None  # as PreferenceExample's (its dicts are unhashable)

    def __reduce__(self):  # pickles (e.g. to another process) as the PreferenceExample it stands for
        return self.example().__reduce__()

    def __repr__(self) -> str:
        return repr(self.example())


def _fast_preferences(docs: Sequence[Any]) -> list:
    """Per decoded message: the :class:`RowExample` of an event of the common shape whose
    values all pass, else None (that message goes through :func:`preference_from_doc`)."""
    out = Parsed([None] * len(docs))
    picked, starts, flat, weights = [], [], [], []
    ext = flat.extend
    for j, d in enumerate(docs):
        sh = _shape(d)
        if sh is None:
            continue
        starts.append(len(flat))
        ext(sh[4].values())
        ext(sh[5].values())
        if sh[6]:
            ext(sh[6].values())
        if "weight" in d:
            weights.append(len(flat))
            flat.append(d["weight"])
        picked.append((j, sh))
    if not picked:
        return out
    if not set(map(type, flat)) <= {float, int}:  # a bool, string, null …: leave those messages out
        keep = [k for k, (j, sh) in enumerate(picked) if set(map(type, _values(docs[j], sh))) <= {float, int}]
        return _fast_preferences_of([picked[k] for k in keep], docs, out)
    try:
        arr = np.array(flat, dtype=np.float64)
    except OverflowError:  # an integer beyond float range: the validator words that message's reason
        return _fast_preferences_of(picked, docs, out, finite_ints=True)
    ok = np.abs(arr) <= MAX_ABS_VALUE  # NaN and ±inf fail too
    if weights:
        w = arr[weights]
        ok[weights] = (w >= WEIGHT_RANGE[0]) & (w <= WEIGHT_RANGE[1])
    good = np.logical_and.reduceat(ok, starts).tolist()
    # the accepted messages' item features as (n, k) arrays, one block per feature-name tuple
    groups: dict = {}
    for (j, sh), a, g in zip(picked, starts, good):
        if g:
            groups.setdefault(sh[3], []).append(a)
    blocks = {}
    for names, at in groups.items():
        both = arr[np.asarray(at)[:, None] + np.arange(2 * len(names))]
        block = _Block(names, both[:, :len(names)], both[:, len(names):])
        blocks[names] = [weakref.ref(block), block, 0]
    for (j, (eid, ts, o, names, fl, fr, c, lid, rid, uid)), g in zip(picked, good):
        if not g:
            continue
        b = blocks[names]
        d = docs[j]
        out[j] = RowExample(eid, float(ts), o, None if c is None else {k: float(v) for k, v in c.items()},
                            float(d["weight"]) if "weight" in d else 1.0, lid, rid, fl, fr, b[0], b[2], uid)
        b[2] += 1
    out.blocks = [b[1] for b in blocks.values()]
    return out


class Parsed(list):
    """The list :func:`parse_batch` returns, holding the batch's :class:`_Block` arrays (its row
    examples refer to them weakly: they live as long as this list)."""

    blocks: list = []


def _values(d: dict, sh: tuple) -> list:
    vals = [*sh[4].values(), *sh[5].values(), *(sh[6].values() if sh[6] else ())]
    if "weight" in d:
        vals.append(d["weight"])
    return vals


def _fast_preferences_of(picked: list, docs: Sequence[Any], out: list, finite_ints: bool = False) -> list:
    """:func:`_fast_preferences` again on the messages ``picked`` (rare: after a wrong type or a huge integer)."""
    sub = [docs[j] for j, sh in picked if not finite_ints or all(-1e300 < v < 1e300 for v in _values(docs[j], sh))]
    idx = [j for j, sh in picked if not finite_ints or all(-1e300 < v < 1e300 for v in _values(docs[j], sh))]
    again = _fast_preferences(sub) if sub else Parsed()
    for j, ex in zip(idx, again):
        out[j] = ex
    out.blocks = again.blocks
    return out


class BatchArrays:
    """A model's view of a batch: the rows it can learn, as arrays of the batch contract.

    Attributes
    ----------
    rows : list of int
        Indices (into the examples passed to :func:`learner_arrays`) of the accepted rows.
    X_left, X_right : ndarray (len(rows), n_features)
    context : ndarray (len(rows), n_context) or None
    y : ndarray of int64; weight : ndarray of float64
    rejected : dict of int to str
        Example index → why the model cannot take it (a missing feature or context).
    user_ids : list of (str or None), or None
        The person of each accepted row (``user_id`` of the event; personal models take it as
        ``learn_many(..., user_ids=...)``), or None when no row names a person.
    """

    __slots__ = ("X_left", "X_right", "context", "rejected", "rows", "user_ids", "weight", "y")

    def __init__(self, rows, X_left, X_right, context, y, weight, rejected, user_ids=None) -> None:
        self.rows, self.X_left, self.X_right, self.context = rows, X_left, X_right, context
        self.y, self.weight, self.rejected, self.user_ids = y, weight, rejected, user_ids

    def part(self, start: int, stop: int) -> "BatchArrays":
        """Rows ``start:stop`` of the accepted rows (views of the arrays; ``rejected`` is left empty)."""
        out = BatchArrays.__new__(BatchArrays)
        for k in self.__slots__:
            v = getattr(self, k, None)
            setattr(out, k, {} if k == "rejected" else (None if v is None else v[start:stop]))
        return out


def _getter(names: Sequence[str]):
    if len(names) == 1:
        g = itemgetter(names[0])
        return lambda d: (g(d),)
    return itemgetter(*names)


def learner_arrays(examples: Sequence, feature_names: Sequence[str], context_names: Sequence[str] | None,
                   model: str = "model") -> BatchArrays:
    """Arrays of ``examples`` for a model with these feature (and context) names.

    A row whose items lack one of ``feature_names`` (or whose context lacks one of
    ``context_names``) is rejected with a one-line reason; extra features are ignored, as in
    ``learn_one``, and logged (a warning once per model and feature name). Feature values are
    already finite floats (the contract checked them).
    """
    fast = _block_arrays(examples, feature_names, context_names, model)
    if fast is not None:
        return fast
    gl = _getter(feature_names)
    gc = _getter(context_names) if context_names else None
    d = len(feature_names)
    rows, L, R, C, rejected = [], [], [], [], {}
    for i, ex in enumerate(examples):
        where = "feature"
        try:
            left, right = gl(ex.left), gl(ex.right)
            ctx = None
            if gc is not None:
                where = "context feature"
                ctx = gc(ex.context if ex.context is not None else {})
        except KeyError as exc:
            have = sorted(ex.left) if where == "feature" else sorted(ex.context or {})
            rejected[i] = f"model {model!r} expects {where} {exc.args[0]!r}; the event has {have[:10]}"
            continue
        if len(ex.left) > d or len(ex.right) > d:  # features the model does not use: say so, once per name
            _warn_unknown_features(model, feature_names, {**ex.left, **ex.right})
        rows.append(i)
        L.append(left)
        R.append(right)
        if gc is not None:
            C.append(ctx)
    XL = np.array(L, dtype=np.float64).reshape(len(rows), d)
    XR = np.array(R, dtype=np.float64).reshape(len(rows), d)
    XC = np.array(C, dtype=np.float64).reshape(len(rows), len(context_names)) if gc is not None else None
    y = np.fromiter((examples[i].outcome for i in rows), dtype=np.int64, count=len(rows))
    w = np.fromiter((examples[i].weight for i in rows), dtype=np.float64, count=len(rows))
    return BatchArrays(rows, XL, XR, XC, y, w, rejected, _user_ids([examples[i] for i in rows]))


def _user_ids(examples: Sequence) -> list | None:
    """The ``user_id`` of each example, or None when none has one."""
    users = [getattr(ex, "user_id", None) for ex in examples]
    return users if any(u is not None for u in users) else None


def _block_arrays(examples: Sequence, feature_names: Sequence[str], context_names, model: str = "") -> BatchArrays | None:
    """:func:`learner_arrays` of row examples of one live block, by indexing its arrays (no dicts), or
    None when the examples are not all such rows, a feature is missing or the model takes a context."""
    if context_names or not examples:
        return None
    first = examples[0]
    if type(first) is not RowExample:
        return None
    ref = first.block
    if any(type(ex) is not RowExample or ex.block is not ref for ex in examples):
        return None
    block = ref()
    if block is None:
        return None
    pos = {n: i for i, n in enumerate(block.names)}
    try:
        cols = [pos[f] for f in feature_names]
    except KeyError:
        return None
    if len(cols) < len(block.names):  # features the model does not use: say so, once per name
        _warn_unknown_features(model, feature_names, dict.fromkeys(block.names))
    rows = np.fromiter((ex.row for ex in examples), dtype=np.intp, count=len(examples))
    if cols == list(range(len(block.names))):
        XL, XR = block.L[rows], block.R[rows]
    else:
        XL, XR = block.L[np.ix_(rows, cols)], block.R[np.ix_(rows, cols)]
    y = np.fromiter((ex.outcome for ex in examples), dtype=np.int64, count=len(examples))
    w = np.fromiter((ex.weight for ex in examples), dtype=np.float64, count=len(examples))
    return BatchArrays(list(range(len(examples))), XL, XR, None, y, w, {}, _user_ids(examples))
