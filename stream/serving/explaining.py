"""Explanations inside a ranking: a per-version cache, and a deadline that never fails the ranking.

``POST /v1/rank`` with ``explain`` explains item k against item k + 1 of the ranking, for the
top_k items. Two things keep that at the ranking's speed:

* **A cache per model version.** :class:`ExplanationCache` holds finished explanation records
  keyed by ``(method, params, seed, left features, right features, context)``; it lives in the
  :class:`~stream.workers.live_models.ModelVersion`'s ``cache``, so a record is only ever reused
  for the version that computed it and dies with it (a swap starts an empty one). A hit is a
  dict copy with the request's own ``request_id`` and ``extra.cached = true``; a miss computes,
  validates against ``explanation.v1.json`` once, and stores. The key holds the feature bytes,
  not the ids: inline candidates and a catalog item that changed features never share a record.
* **A deadline that marks, not fails.** The pairs the cache lacks are computed as one batch in the
  explanation pool; the ranking waits for them at most ``serve_rank_explain_deadline_s``. A pair
  not done by then is answered as a :func:`missing` marker (``missing: true`` and the reason)
  in its place in ``explanations``; its computation goes on in the background and lands in the
  cache, so the next ranking that needs it finds it. A pair already being computed for another
  request is waited for, not started twice, and only until that first request's deadline: once one
  ranking has paid the deadline for a slow pair, the next ones answer at once with it missing
  (instead of each waiting the deadline again) until it lands in the cache; with more than :data:`MAX_IN_FLIGHT` batches
  running or queued, new pairs are marked ``busy`` at once instead of queueing without bound.

Reasons of a missing explanation: ``deadline_exceeded``, ``busy``, ``not_fitted`` (the model
cannot be explained yet) and ``failed`` (the explainer refused the pair; the detail says why).

Examples
--------
>>> c = ExplanationCache(2)
>>> c.put("a", {"request_id": "r1", "extra": {}}); c.put("b", {"request_id": "r2", "extra": {}})
>>> c.get("a", "q")["request_id"], c.get("a", "q")["extra"]["cached"]
('q', True)
>>> c.put("c", {"request_id": "r3", "extra": {}})      # "b" was the least recently used
>>> c.get("b", "q") is None, len(c)
(True, 2)
"""

from __future__ import annotations

import threading
from collections import OrderedDict

__all__ = ["MAX_IN_FLIGHT", "ExplanationCache", "missing", "pair_key"]

#: Explanation batches of rankings running or queued at once per server process (beyond: ``busy``).
MAX_IN_FLIGHT = 8


class ExplanationCache:
    """A thread-safe LRU of explanation records (the explanation threads write, the event loop reads).

    Parameters
    ----------
    max_items : int
        Records kept; the least recently used leave first. 0 keeps nothing.
    """

    def __init__(self, max_items: int) -> None:
        self.max_items = int(max_items)
        self._d: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._d)

    def get(self, key, request_id: str) -> dict | None:
        """A copy of the record under ``key`` answering ``request_id`` (``extra.cached = true``), or None."""
        with self._lock:
            rec = self._d.get(key)
            if rec is None:
                return None
            self._d.move_to_end(key)
        out = dict(rec)
        out["request_id"] = request_id
        out["extra"] = {**(rec.get("extra") or {}), "cached": True}
        return out

    def put(self, key, record: dict) -> None:
        if self.max_items <= 0:
            return
        with self._lock:
            self._d[key] = record
            self._d.move_to_end(key)
            while len(self._d) > self.max_items:
                self._d.popitem(last=False)


def pair_key(method: str, params: dict, seed: int, xl, xr, u) -> tuple:
    """The cache key of one pair: the method, its parameters and seed, and the exact float64 bytes of
    the left and right features (and of the context)."""
    import orjson

    return (method, orjson.dumps(params, option=orjson.OPT_SORT_KEYS), int(seed), xl.tobytes(), xr.tobytes(),
            None if u is None else u.tobytes())


def missing(example, mv, method: str, reason: str, detail: str, waited_s: float | None = None) -> dict:
    """The marker standing in ``explanations`` for a pair not explained (see the module docstring);
    ``waited_s``: how long this request waited for it (``deadline_exceeded``)."""
    return {"missing": True, "reason": reason, "detail": detail, "request_id": example.event_id,
            "left_id": example.left_id, "right_id": example.right_id, "model_name": mv.name,
            "model_version": int(mv.version), "method": method, "waited_s": waited_s}
