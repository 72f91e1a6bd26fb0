"""Model snapshots: pickle-free ``.npz`` bytes for the compacted model topic."""

from __future__ import annotations

import time
from typing import Mapping

import numpy as np

from learners.exceptions import SnapshotError
from learners.state import dump_state, load_state
from stream.contract.reasons import SCHEMA_VERSION
from stream.contract.schemas import _classify, validator

__all__ = ["decode_snapshot", "encode_snapshot"]


def encode_snapshot(model_name: str, version: int, training_count: int, state: dict,
                    offsets: dict[str, int] | None = None, max_bytes: int = 8_388_608) -> bytes:
    """Encode a model snapshot as pickle-free ``.npz`` bytes for the compacted model topic.

    The npz's JSON meta entry is ``{"__snapshot__": <model_snapshot.v1.json metadata>,
    "model": state["meta"]}``; its arrays are ``state["arrays"]``.

    Parameters
    ----------
    model_name : str
        E.g. ``"linear-bt"`` (also the message key).
    version : int
        Snapshot counter, ≥ 0.
    training_count : int
        Examples learned so far, ≥ 0.
    state : dict
        ``PreferenceLearner.state_dict()`` output.
    offsets : dict of str to int, optional
        Next offset to consume per ``"<topic>:<partition>"``.
    max_bytes : int, default 8 MiB
        Must not exceed the model topic's ``max.message.bytes``.

    Returns
    -------
    bytes

    Raises
    ------
    SnapshotError
        If the state cannot be encoded, the metadata violates the schema, or the encoded snapshot
        is larger than ``max_bytes`` (say which limit to raise, or shrink the model), or a state
        array holds NaN.
    """
    meta = {
        "schema_version": SCHEMA_VERSION,
        "model_name": model_name,
        "version": version,
        "training_count": training_count,
        "offsets": dict(offsets or {}),
        "created_at": time.time(),
    }
    errors = list(validator("model_snapshot").iter_errors(meta))
    if errors:
        raise SnapshotError(f"Invalid snapshot metadata: {_classify(errors)[1]}")
    if not isinstance(state, Mapping) or "meta" not in state or "arrays" not in state:
        raise SnapshotError("The state must be a state dict {'meta': {...}, 'arrays': {...}} from PreferenceLearner.state_dict().")
    nan = _nan_array(state["arrays"])
    if nan is not None:
        raise SnapshotError(f"The {model_name!r} state array {nan!r} holds NaN; a non-finite model is never published "
                            "(stream.workers.guard refuses the update that causes it).")
    data = dump_state({"meta": {"__snapshot__": meta, "model": state["meta"]}, "arrays": state["arrays"]})
    if len(data) > max_bytes:
        raise SnapshotError(
            f"The {model_name!r} snapshot is {len(data)} bytes, over the {max_bytes}-byte limit; raise the model "
            "topic's max.message.bytes and PREFSTREAM_MAX_SNAPSHOT_BYTES together, or shrink the model "
            "(fewer Nyström centres / smaller reservoir).")
    return data


def decode_snapshot(data: bytes) -> dict:
    """Decode :func:`encode_snapshot` bytes.

    Returns
    -------
    dict
        ``{"schema_version", "model_name", "version", "training_count", "offsets", "created_at",
        "state": {"meta": ..., "arrays": ...}}``; feed ``state`` to ``Learner.from_state``.

    Raises
    ------
    SnapshotError
        If the bytes are not a prefstream snapshot, carry another schema version, or the metadata
        violates ``model_snapshot.v1.json``, or a state array holds NaN (the message names the
        array: the real cause, not a shape).
    """
    if data is None:
        raise SnapshotError("A model snapshot cannot be null (a tombstone on the model topic deletes the model).")
    st = load_state(bytes(data))
    snap = st["meta"].get("__snapshot__") if isinstance(st["meta"], dict) else None
    if not isinstance(snap, dict):
        raise SnapshotError("Not a prefstream model snapshot: the meta entry lacks '__snapshot__'.")
    if snap.get("schema_version") != SCHEMA_VERSION:
        raise SnapshotError(f"Snapshot schema_version {snap.get('schema_version')!r} is not supported; this build reads {SCHEMA_VERSION}.")
    errors = list(validator("model_snapshot").iter_errors(snap))
    if errors:
        raise SnapshotError(f"Invalid snapshot metadata: {_classify(errors)[1]}")
    nan = _nan_array(st["arrays"])
    if nan is not None:
        raise SnapshotError(f"The {snap.get('model_name')!r} snapshot (version {snap.get('version')}) holds NaN in "
                            f"state array {nan!r}: the model was poisoned by a non-finite update before it was "
                            "published. Delete the key (a tombstone) so the model starts afresh, and replay its events.")
    out = dict(snap)
    out["state"] = {"meta": st["meta"].get("model", {}), "arrays": st["arrays"]}
    return out



def _nan_array(arrays: Mapping) -> str | None:
    """Name of the first float array holding NaN (±inf may be legitimate, e.g. an empty min-max scaler)."""
    for k, a in arrays.items():
        a = np.asarray(a)
        if a.dtype.kind in "fc" and np.isnan(a).any():
            return k
    return None
