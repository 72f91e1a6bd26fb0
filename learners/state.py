"""Safe (pickle-free) encoding of learner state dicts as ``.npz`` bytes.

A state dict is ``{"meta": <JSON-able dict>, "arrays": {name: ndarray}}``. The meta dict is
stored as a UTF-8 JSON byte array under the key ``__meta__``; loading uses
``allow_pickle=False`` so a snapshot can never execute code.
"""

from __future__ import annotations

import io
import json
import zipfile
import zlib

import numpy as np

from learners.exceptions import SnapshotError

__all__ = ["dump_state", "load_state"]


def dump_state(state: dict) -> bytes:
    """Encode a state dict to compressed ``.npz`` bytes.

    Raises
    ------
    SnapshotError
        If the meta part is not JSON-serialisable or an array has dtype object.

    Examples
    --------
    >>> data = dump_state({"meta": {"n": 3}, "arrays": {"w": np.arange(3.0)}})
    >>> back = load_state(data)
    >>> back["meta"], back["arrays"]["w"].tolist()
    ({'n': 3}, [0.0, 1.0, 2.0])
    >>> dump_state({"meta": {"x": float("nan")}, "arrays": {}})
    Traceback (most recent call last):
    ...
    learners.exceptions.SnapshotError: State meta must be JSON-serialisable with finite numbers: Out of range float values are not JSON compliant
    """
    try:
        meta = json.dumps(state.get("meta", {}), allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        raise SnapshotError(f"State meta must be JSON-serialisable with finite numbers: {exc}") from None
    arrays = {}
    for k, v in state.get("arrays", {}).items():
        a = np.asarray(v)
        if a.dtype == object:
            raise SnapshotError(f"State array {k!r} has dtype object; use numeric arrays only.")
        arrays[k] = a
    buf = io.BytesIO()
    # the .npz layout of np.savez_compressed (np.load reads it), deflated at level 1: a learner
    # publishes a snapshot every snapshot_every_events, and numpy's default level 6 took 4x the
    # time for a few percent of size on a GPM window (bench/catchup.py --profile-events). An array
    # whose first bytes do not deflate below 90 % is stored as it is: the capacity's windows of
    # scaled floats took 3.6 ms per snapshot at level 1 to save 4 % of their size
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for k, a in (("__meta__", np.frombuffer(meta, dtype=np.uint8)), *arrays.items()):
            zf.compression = zipfile.ZIP_DEFLATED if _deflates(a) else zipfile.ZIP_STORED  # this entry's
            with zf.open(k + ".npy", "w", force_zip64=True) as fh:
                np.lib.format.write_array(fh, a, allow_pickle=False)
    return buf.getvalue()


_PROBE = 8192


def _deflates(a: np.ndarray) -> bool:
    """Whether deflating ``a`` is worth it: small arrays always (cheap), else its first
    :data:`_PROBE` bytes deflate to under 90 %."""
    if a.nbytes <= 2 * _PROBE or not a.flags.c_contiguous:
        return True
    head = a.reshape(-1).view(np.uint8)[:_PROBE].tobytes()
    return len(zlib.compress(head, 1)) < 0.9 * _PROBE


def load_state(data: bytes) -> dict:
    """Decode bytes written by :func:`dump_state`.

    Raises
    ------
    SnapshotError
        If the bytes are not a pickle-free npz with a ``__meta__`` entry.

    Examples
    --------
    >>> load_state(b"not a snapshot")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    learners.exceptions.SnapshotError: Not a prefstream state snapshot: ...
    """
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            meta = json.loads(bytes(z["__meta__"]).decode())
            arrays = {k: z[k] for k in z.files if k != "__meta__"}
    except Exception as exc:  # zipfile/ValueError/KeyError/JSON errors
        raise SnapshotError(f"Not a prefstream state snapshot: {exc}") from None
    return {"meta": meta, "arrays": arrays}
