"""Dead-letter records (``dead_letter.v1.json``) for rejected messages."""

from __future__ import annotations

import base64
import time

from stream.contract.decoding import raw_value
from stream.contract.reasons import DEAD_LETTER_REASONS, REQUEST_REFUSALS, SCHEMA_VERSION

__all__ = ["dead_letter_record"]


def dead_letter_record(raw: bytes | None, reason: str, detail: str, source_topic: str, partition: int | None,
                       offset: int | None, max_payload_bytes: int = 262_144) -> dict:
    """A dead-letter record (``dead_letter.v1.json``) for a rejected message.

    Parameters
    ----------
    raw : bytes or None
        The rejected message value, kept as UTF-8 text, or base64 when it is not valid UTF-8.
    reason : str
        One of :data:`DEAD_LETTER_REASONS` (usually ``DeadLetter.reason``) or, for an explain
        request the explainer cannot answer, of :data:`REQUEST_REFUSALS`.
    detail : str
        Human-readable detail (usually ``DeadLetter.detail``).
    source_topic : str
    partition, offset : int or None
        Source coordinates of the message.
    max_payload_bytes : int, default 256 KiB
        Longer payloads are cut to this many bytes (``payload_truncated`` true) so the record fits
        the dead-letter topic even for ``oversize`` messages.

    Returns
    -------
    dict
        JSON-serialisable.

    Raises
    ------
    InvalidParameterError
        For an unknown reason.
    """
    from learners.exceptions import check_param

    check_param("dead_letter_record", "reason", reason, reason in DEAD_LETTER_REASONS + REQUEST_REFUSALS,
                f"one of {DEAD_LETTER_REASONS + REQUEST_REFUSALS}")
    raw = raw_value(raw)  # a value decoded from a wire format keeps its bytes as they came
    if raw is None:
        payload, enc, size, trunc = None, "none", 0, False
    else:
        if isinstance(raw, str):
            raw = raw.encode("utf-8", "surrogatepass")
        raw = bytes(raw)
        size = len(raw)
        trunc = size > max_payload_bytes
        cut = raw[:max_payload_bytes]
        try:
            payload, enc = cut.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            if trunc:  # a multi-byte character may straddle the cut
                try:
                    payload, enc = cut.decode("utf-8", "ignore"), "utf-8"
                    raw.decode("utf-8")
                except UnicodeDecodeError:
                    payload, enc = base64.b64encode(cut).decode("ascii"), "base64"
            else:
                payload, enc = base64.b64encode(cut).decode("ascii"), "base64"
    return {
        "schema_version": SCHEMA_VERSION,
        "reason": reason,
        "detail": str(detail),
        "source_topic": str(source_topic),
        "partition": None if partition is None else int(partition),
        "offset": None if offset is None else int(offset),
        "payload": payload,
        "payload_encoding": enc,
        "payload_size": size,
        "payload_truncated": trunc,
        "dead_lettered_at": time.time(),
    }

