"""Person records of the compacted changelog topic ``prefstream.people`` (``docs/personal.md``).

One record per person and personal model (contract of issue 28, shared by the learner worker
that writes it and ``prefstream serve`` that follows it):

* **key** ``"<model>@<user_id>"`` in UTF-8 (:func:`person_key`; a user id is ≤ 512 characters
  and may itself hold ``@``: the model name never does, so the key splits at its first ``@``);
* **value** the person's state (``person_state(user_id)`` of the personal model) encoded with
  :func:`learners.state.dump_small_state` — :func:`learners.state.load_state` reads it — whose
  meta carries, under :data:`PERSON_META_KEY`, where the state stands in the stream:
  ``{"source": "<topic>:<partition>", "offset": next_offset}``: the input partition whose events
  the person's state folds in (a person's events are keyed by person, so they live on one
  partition) and the offset below which every event of that partition is in it;
* a **tombstone** (null value) when the person is forgotten (``prefstream forget``).

A person is forgotten by a **forget record** (``stream/schemas/forget.v1.json``,
:func:`forget_record`) on the preference topic, sent to every partition so that it reaches
the person's partition whatever partitioner placed their events, behind their events there:
``{"schema_version": 1, "type": "forget", "user_id": …}``. The learner recognises it by
:func:`forget_user` before an event is decoded (a preference event never has a ``type``).

The record is written to the changelog partition of the same number as its input partition
(modulo the changelog's partition count), so that the worker that is assigned input partition
``p`` restores its people by reading changelog partition ``p`` alone, keeping the records whose
``source`` is its own (:class:`stream.workers.people.PeopleChangelog`).
"""

from __future__ import annotations

import time

import orjson

from learners.exceptions import SnapshotError
from learners.state import SMALL_MAGIC, dump_small_state, load_state
from stream.contract.decoding import Decoded

__all__ = ["PERSON_META_KEY", "decode_person", "encode_person", "forget_record", "forget_user", "parse_person_key",
           "person_key", "person_source_offset"]

#: The stream bookkeeping inside a person record's meta (removed by :func:`decode_person`).
PERSON_META_KEY = "_prefstream_person"


def person_key(model: str, user_id: str) -> bytes:
    """The changelog key ``"<model>@<user_id>"`` in UTF-8.

    >>> person_key("capacity-personal", "alice@example.org")
    b'capacity-personal@alice@example.org'
    """
    return f"{model}@{user_id}".encode()


def parse_person_key(key: bytes | str) -> tuple[str, str]:
    """``(model, user_id)`` of a changelog key (split at the first ``@``).

    >>> parse_person_key(b"linear-bt-personal@u@1")
    ('linear-bt-personal', 'u@1')
    """
    if isinstance(key, (bytes, bytearray, memoryview)):
        key = bytes(key).decode("utf-8", "replace")
    model, _, user = key.partition("@")
    return model, user


def encode_person(state: dict, *, source: str, offset: int) -> bytes:
    """One person's changelog value: ``state`` plus where it stands in the stream.

    Parameters
    ----------
    state : dict
        ``person_state(user_id)`` of a personal model, ``{"meta": ..., "arrays": ...}``.
    source : str
        ``"<topic>:<partition>"`` of the person's input partition.
    offset : int
        Every event of ``source`` below it is in the state, none at or above it.

    Raises
    ------
    SnapshotError
        If the state cannot be encoded (non-finite meta, object arrays).

    Examples
    --------
    >>> import numpy as np
    >>> value = encode_person({"meta": {"version": 2}, "arrays": {"delta": np.zeros(3)}},
    ...                       source="prefstream.preferences:1", offset=40)
    >>> state, info = decode_person(value)
    >>> state["meta"], state["arrays"]["delta"].tolist(), info
    ({'version': 2}, [0.0, 0.0, 0.0], {'source': 'prefstream.preferences:1', 'offset': 40})
    """
    meta = dict(state.get("meta", {}))
    meta[PERSON_META_KEY] = {"source": str(source), "offset": int(offset)}
    return dump_small_state({"meta": meta, "arrays": state.get("arrays", {})})


def decode_person(value: bytes) -> tuple[dict, dict]:
    """``(state, info)`` of a changelog value: the state ``load_person`` takes, and
    ``{"source", "offset"}`` (empty for a value written without them, e.g. plain
    :func:`learners.state.dump_state` bytes).

    Raises
    ------
    SnapshotError
        If the value is not a state record.
    """
    if value is None:
        raise SnapshotError("A tombstone (null value) has no person state: the person was forgotten.")
    state = load_state(value)
    meta = dict(state["meta"])
    info = meta.pop(PERSON_META_KEY, None)
    return {"meta": meta, "arrays": state["arrays"]}, (dict(info) if isinstance(info, dict) else {})


def person_source_offset(value: bytes) -> tuple[str | None, int]:
    """``(source, offset)`` of a changelog value read from its meta alone (arrays not decoded):
    what a restore needs for each of a million records. ``(None, 0)`` when absent."""
    if bytes(value[:len(SMALL_MAGIC)]) == SMALL_MAGIC:
        start = len(SMALL_MAGIC) + 4
        n = int.from_bytes(value[len(SMALL_MAGIC):start], "little")
        try:
            info = orjson.loads(value[start:start + n]).get(PERSON_META_KEY)
        except (orjson.JSONDecodeError, AttributeError) as exc:
            raise SnapshotError(f"Not a person record: {exc}") from None
    else:
        info = decode_person(value)[1]
    if not isinstance(info, dict) or "source" not in info:
        return None, 0
    return str(info["source"]), int(info.get("offset", 0))


_FORGET_MARK = b'"forget"'


def forget_record(user_id: str, request_id: str | None = None, now: float | None = None) -> bytes:
    """The JSON bytes of a forget record for ``user_id`` (validated against ``forget.v1.json``).

    Raises
    ------
    DeadLetter
        If ``user_id`` is not a string of 1 to 512 characters.

    Examples
    --------
    >>> forget_record("alice", "r1", now=1.0)
    b'{"schema_version":1,"type":"forget","user_id":"alice","requested_at":1.0,"request_id":"r1"}'
    """
    doc = {"schema_version": 1, "type": "forget", "user_id": user_id,
           "requested_at": float(time.time() if now is None else now)}
    if request_id is not None:
        doc["request_id"] = request_id
    _check_forget(doc)
    return orjson.dumps(doc)


def _check_forget(doc) -> None:
    from stream.contract.schemas import _classify, validator

    errors = list(validator("forget").iter_errors(doc))
    if errors:
        from stream.contract.reasons import DeadLetter

        reason, detail = _classify(errors)
        raise DeadLetter(reason, f"forget record: {detail}")


def forget_user(value):
    """The user id of a forget record, a :class:`~stream.contract.DeadLetter` for a malformed
    one, or None for anything else (the cheap test first: a preference event never holds
    ``"forget"`` as a value of ``type``).

    ``value`` is the message value: bytes, or the :class:`~stream.contract.decoding.Decoded` of a
    topic in a schema-registry wire format (``stream/broker/serializers.py``). A value that decoded
    is a preference record, not a forget record; one that did not (a forget record is plain JSON,
    as ``prefstream forget`` writes it, hence ``not_wire_format`` there) is looked at as its bytes.

    >>> forget_user(forget_record("bob")), forget_user(b'{"event_id": "forget"}')
    ('bob', None)
    """
    if type(value) is Decoded:
        if value.error is None:
            return None
        value = value.raw
    if not isinstance(value, (bytes, bytearray)) or _FORGET_MARK not in value:
        return None
    try:
        doc = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(doc, dict) or doc.get("type") != "forget":
        return None
    from stream.contract.reasons import DeadLetter

    try:
        _check_forget(doc)
    except DeadLetter as dl:
        return dl
    return doc["user_id"]
