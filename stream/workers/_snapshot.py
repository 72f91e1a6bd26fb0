"""Stream bookkeeping carried inside model snapshots (offsets, event-id window, digest).

A learner worker keeps one state per *source* — one partition of one input topic, written
``"<topic>:<partition>"`` — and publishes it under the key ``"<model>@<topic>:<partition>"`` on
the compacted model topic. Besides the learner's own state dict, each snapshot carries:

* in the envelope of :func:`~stream.contract.encode_snapshot`: ``offsets = {source: next_offset}``
  (every message of ``source`` below ``next_offset`` is folded into the state, none above) and
  the training count — stored there only;
* in ``state["meta"][STREAM_META_KEY]``: the source, the digest of the learned event
  ids (sum of 64-bit BLAKE2b hashes mod 2⁶⁴, order-free, so lost-plus-duplicated events do not
  cancel out as they would in a count), and in ``state["arrays"][WINDOW_KEY]`` the hashes of the
  most recent event ids (the dedupe window), as ``uint64``.

:func:`split_stream_meta` removes both before the state reaches ``loader(state)``, so learners
never see them.
"""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = [
    "STREAM_META_KEY",
    "WINDOW_KEY",
    "attach_stream_meta",
    "digest_add",
    "event_hash",
    "parse_snapshot_key",
    "snapshot_key",
    "source_name",
    "split_stream_meta",
]

STREAM_META_KEY = "_prefstream_stream"
WINDOW_KEY = "_prefstream_event_window"
_MASK = (1 << 64) - 1


def source_name(topic: str, partition: int) -> str:
    """``"<topic>:<partition>"`` (the key of :func:`encode_snapshot`'s ``offsets``)."""
    return f"{topic}:{int(partition)}"


def snapshot_key(model: str, source: str) -> str:
    """Model-topic key of one per-source snapshot: ``"<model>@<topic>:<partition>"``."""
    return f"{model}@{source}"


def parse_snapshot_key(key: str | bytes | None) -> tuple[str, str | None]:
    """``(model, source)`` from a model-topic key; ``source`` is None for a plain model key."""
    if key is None:
        return "", None
    if isinstance(key, (bytes, bytearray)):
        key = bytes(key).decode("utf-8", "replace")
    model, sep, source = key.partition("@")
    return model, (source if sep else None)


def event_hash(event_id: str) -> int:
    """64-bit BLAKE2b hash of an event id, as a Python int in [0, 2⁶⁴)."""
    return int.from_bytes(hashlib.blake2b(event_id.encode("utf-8"), digest_size=8).digest(), "little")


def digest_add(digest: int, h: int) -> int:
    """Order-free digest update: ``(digest + h) mod 2⁶⁴``."""
    return (digest + h) & _MASK


def attach_stream_meta(state: dict, *, source: str, digest: int, window: list[int] | np.ndarray) -> dict:
    """A copy of ``state`` with the stream bookkeeping added (the learner's dicts are not mutated).

    ``next_offset`` and the training count are *not* repeated here: the snapshot envelope of
    :func:`~stream.contract.encode_snapshot` holds them (``offsets[source]``, ``training_count``),
    each stored once.
    """
    meta = dict(state.get("meta", {}))
    meta[STREAM_META_KEY] = {
        "source": source,
        "digest": format(int(digest) & _MASK, "016x"),
        "window_size": int(len(window)),
    }
    arrays = dict(state.get("arrays", {}))
    arrays[WINDOW_KEY] = np.asarray(list(window), dtype=np.uint64)
    return {"meta": meta, "arrays": arrays}


def split_stream_meta(state: dict) -> tuple[dict, dict]:
    """``(learner_state, info)``: the state without bookkeeping, and the bookkeeping.

    ``info`` has ``source``, ``digest`` (int) and ``window`` (list of int) — and ``next_offset`` /
    ``training_count`` in snapshots written before they moved to the envelope only; it is empty
    for a snapshot written by something other than a learner worker.
    """
    meta = dict(state.get("meta", {}))
    arrays = dict(state.get("arrays", {}))
    raw = meta.pop(STREAM_META_KEY, None)
    window = arrays.pop(WINDOW_KEY, None)
    info: dict = {}
    if isinstance(raw, dict):
        info = dict(raw)
        info["digest"] = int(str(raw.get("digest", "0")), 16)
        info["window"] = [] if window is None else [int(v) for v in np.asarray(window, dtype=np.uint64)]
    return {"meta": meta, "arrays": arrays}, info
