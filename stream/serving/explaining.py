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

import asyncio
import logging
import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from learners.exceptions import NotFittedError, PrefstreamError
from stream.contract import explanation_record_ok
from stream.serving.errors import APIError

if TYPE_CHECKING:
    from stream.workers.live_models import ModelVersion

__all__ = ["MAX_IN_FLIGHT", "ExplainRunner", "ExplanationCache", "missing", "pair_key"]

log = logging.getLogger(__name__)

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


class _Busy(Exception):
    """A pair not explained because the explanation pool is full or the explainer stopped early."""


class ExplainRunner:
    """The explanation part of :class:`~stream.serving.service.ServeState` (a mixin: it uses the state's
    ``settings``, ``metrics``, ``executor``, ``methods``, ``default_method`` and ``explain_context``).

    A job is ``(version, method, examples, pair arrays, params, seed, person)``
    (:meth:`~stream.serving.service.ServeState.explain_job`, the rank job of
    :meth:`~stream.serving.service.ServeState.rank`).
    """

    def _explainer(self, mv: ModelVersion, method: str | None, field: str) -> tuple[str, Any]:
        """``(method, fn)``: the named pair explainer of the version's model, or its default (404 if none)."""
        fns = self.methods(mv.name)
        method = method or self.default_method(mv.name)
        fn = fns.get(method)
        if fn is None:
            raise APIError(404, "unknown_method", f"No pair explanation method {method!r} for model {mv.name!r}; "
                                                  f"available: {sorted(fns)}.", field=field)
        return method, fn

    def _cache(self, mv: ModelVersion) -> ExplanationCache:
        c = mv.cache.get("explanations")
        if c is None:
            c = mv.cache.setdefault("explanations", ExplanationCache(self.settings.serve_explain_cache_items))
        return c

    def _compute(self, mv: ModelVersion, method: str, fn, examples: list, keys: list, params: dict,
                 seed: int | None, started: dict, person: dict) -> dict:
        """In an explanation thread: explain ``examples`` as one batch, validate, cache; ``{key: record}``.

        A capped explainer that stopped early (``extra.unfinished``) explained the first examples only;
        the others are absent from the result (and answered as missing)."""
        started["t"] = time.perf_counter()
        ctx = self.explain_context(mv, params, seed)
        e = fn(mv.learner, examples, ctx)
        self.metrics.explanation_latency.labels(method=e.method).observe(time.perf_counter() - started["t"])
        e.model_name = mv.name
        e.model_version = int(mv.version)
        n = min(e.n_instances, len(examples))
        records = e.to_records(instance_ids=[x.event_id for x in examples[:n]])
        cache = self._cache(mv)
        out = {}
        for key, rec in zip(keys, records):
            explanation_record_ok(rec)
            if isinstance(rec.get("extra"), dict):
                rec["extra"].setdefault("origin", "serve")
                if person["user_id"] is not None:   # records name the person, and the state that explained
                    rec["extra"].update(person)
            cache.put(key, rec)
            out[key] = rec
        self.metrics.explanations.labels(method=e.method).inc(len(records))
        return out

    async def _explain_pairs(self, job: tuple, deadline: float, field: str) -> tuple[str, list]:
        """Explain every pair of ``job`` from the cache or one batch, waiting at most ``deadline`` seconds.

        Returns ``(method, answers)``, one answer per pair in order: a record, or an exception
        (:class:`asyncio.TimeoutError` with the spent times, ``_Busy``, or what the explainer raised).
        """
        mv, method, examples, keys, params, seed, person = job
        method, fn = self._explainer(mv, method, field)
        self._explained.setdefault(mv.name, {})[method] = time.time()
        seed = self.settings.seed if seed is None else int(seed)
        who = (person["user_id"], person["person_version"])   # a person's record names them: never shared
        keys = [pair_key(method, params, seed, *k) + (who,) for k in keys]
        cache = self._cache(mv)
        hits = [cache.get(k, x.event_id) for k, x in zip(keys, examples)]
        flying = mv.cache.setdefault("explaining", {})    # key -> the asyncio future of the batch computing it
        todo = [(k, x) for k, x, h in zip(keys, examples, hits) if h is None and k not in flying]
        todo = list({k: (k, x) for k, x in todo}.values())   # one pair asked twice in a request is computed once
        started: dict = {}
        t0 = time.perf_counter()
        busy = bool(todo) and self._in_flight >= MAX_IN_FLIGHT
        if todo and not busy:
            loop = asyncio.get_running_loop()
            fut = loop.run_in_executor(self.executor, self._compute, mv, method, fn, [x for _, x in todo],
                                       [k for k, _ in todo], params, seed, started, person)
            self._in_flight += 1
            fut.prefstream_due = t0 + deadline   # when the request that started it stopped waiting
            for k, _ in todo:
                flying[k] = fut

            def done(f, ks=[k for k, _ in todo]) -> None:
                self._in_flight -= 1
                for k in ks:
                    if flying.get(k) is f:
                        del flying[k]
                if not f.cancelled():
                    f.exception()   # retrieved: a failure is answered per pair, never logged as unretrieved

            fut.add_done_callback(done)
        futs = {k: flying[k] for k, h in zip(keys, hits) if h is None and k in flying}   # (they leave flying when done)
        wait = 0.0
        if futs:
            # a batch started by an earlier request is waited for until that request's own deadline at most:
            # once one request has paid the deadline for a slow pair, the next ones answer at once (missing)
            # while it finishes in the background, instead of each paying it again
            due = max(getattr(f, "prefstream_due", t0 + deadline) for f in futs.values())
            wait = min(deadline, max(0.0, due - time.perf_counter()))
            if wait > 0:
                await asyncio.wait(set(futs.values()), timeout=wait)
        now = time.perf_counter()
        answers: list = []
        for k, x, h in zip(keys, examples, hits):
            if h is not None:
                answers.append(h)
                continue
            f = futs.get(k)
            rec = None
            if f is not None and f.done() and not f.cancelled() and f.exception() is None:
                got = f.result().get(k)   # computed while this request waited
                rec = None if got is None else {**got, "request_id": x.event_id}
            if rec is None:
                rec = cache.get(k, x.event_id)   # finished in the background since (or by a batch just gone)
            if rec is not None:
                answers.append(rec)
            elif busy and f is None:
                answers.append(_Busy(f"{MAX_IN_FLIGHT} explanation batches are already running or queued"))
            elif f is not None and f.done() and not f.cancelled() and f.exception() is not None:
                answers.append(f.exception())
            elif f is None or not f.done():
                t = started.get("t")
                answers.append(asyncio.TimeoutError(
                    dict(deadline_s=deadline, elapsed_s=round(now - t0, 6), waited_s=round(wait, 6),
                         queued_s=round((t if t is not None else now) - t0, 6),
                         computing_s=round(now - t, 6) if t is not None else 0.0)))
            else:
                answers.append(_Busy("the explainer stopped early within its own budget (extra.unfinished)"))
        if any(isinstance(a, asyncio.TimeoutError) for a in answers):
            self.metrics.explanations_skipped.labels(reason="deadline").inc()
        return method, answers

    async def run_explain(self, job: tuple, field: str = "method") -> list[dict]:
        """Explanation records of a job under ``serve_explain_deadline_s``: 504 with what was spent when it
        passes (the computation goes on and lands in the version's cache), 503 / 422 when the explainer
        refuses."""
        mv = job[0]
        deadline = float(self.settings.serve_explain_deadline_s)
        method, answers = await self._explain_pairs(job, deadline, field)
        for a in answers:
            if isinstance(a, asyncio.TimeoutError):
                raise APIError(504, "deadline_exceeded",
                               f"The {method} explanation of {mv.name} v{mv.version} did not finish within the "
                               f"{deadline:g} s deadline (serve_explain_deadline_s); lower the budgets "
                               "(explain_max_coalitions, explain_reference_size) or raise the deadline.",
                               **a.args[0], model=mv.name, version=mv.version, method=method,
                               budgets=dict(self.budgets)) from None
            if isinstance(a, _Busy):
                raise APIError(503, "busy", f"The {method} explanation was not started: {a}; retry shortly.",
                               field=field)
            if isinstance(a, NotFittedError):
                raise APIError(503, "not_fitted", str(a), field="model") from None
            if isinstance(a, PrefstreamError):
                raise APIError(422, "invalid_input", f"{method}: {a}", field=field) from None
            if isinstance(a, BaseException):
                raise a
        return answers

    async def run_rank_explain(self, job: tuple) -> list[dict]:
        """The ranking's explanations under ``serve_rank_explain_deadline_s``: a record per pair, or a
        :func:`~stream.serving.explaining.missing` marker with the reason (never an error status; an
        unknown method is still a 404)."""
        mv, _, examples = job[:3]
        deadline = float(self.settings.serve_rank_explain_deadline_s)
        method, answers = await self._explain_pairs(job, deadline, "explain")
        out = []
        for x, a in zip(examples, answers):
            if isinstance(a, dict):
                out.append(a)
            elif isinstance(a, asyncio.TimeoutError):
                out.append(missing(x, mv, method, "deadline_exceeded",
                                   f"not finished within the ranking's {deadline:g} s deadline "
                                   f"(serve_rank_explain_deadline_s); it goes on and a later ranking finds it "
                                   f"(spent: {a.args[0]})", waited_s=a.args[0]["waited_s"]))
            elif isinstance(a, _Busy):
                out.append(missing(x, mv, method, "busy", str(a)))
            elif isinstance(a, NotFittedError):
                out.append(missing(x, mv, method, "not_fitted", str(a)))
            elif isinstance(a, PrefstreamError):
                out.append(missing(x, mv, method, "failed", f"{method}: {a}"))
            else:   # a bug in an explainer: logged with its traceback, the ranking still answers
                log.error("%s of %s v%d failed", method, mv.name, mv.version, exc_info=a)
                out.append(missing(x, mv, method, "failed", f"{type(a).__name__}: {a}"))
        return out

