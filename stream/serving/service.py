"""What the endpoints call: the live models, the catalog, and rank / compare / explain on them.

:class:`ServeState` is the whole state of one server process: a
:class:`~stream.workers.live_models.LiveModels` fed by a :class:`~stream.workers.follower.TopicFollower` on
the model topic, a :class:`~stream.serving.catalog.CatalogMatrix` fed by another on the item
topic (both outside any consumer group: a server holds nothing else, so any number of them can
run behind a load balancer), the metrics and the explanation thread pool. Each operation takes
one :class:`~stream.workers.live_models.ModelVersion` at its start and uses only that, so a
request never mixes two versions even when a swap lands while it runs.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from learners.exceptions import InvalidInputError, NotFittedError
from stream import registry
from stream.contract import DeadLetter, PreferenceExample, parse_item
from stream.metrics import Metrics, build_metrics
from stream.serving.catalog import CatalogMatrix
from stream.serving.errors import APIError
from stream.serving.explaining import ExplainRunner
from stream.serving.inputs import candidates, context_vector, item_vector, refuse_duplicates
from stream.serving.people import ServedPeople
from stream.serving.scoring import Scorer, scorer_for
from stream.workers._snapshot import parse_snapshot_key
from stream.workers.live_models import LiveModels, ModelVersion

__all__ = ["DEFAULT_METHODS", "PERSON_CATALOG_BYTES", "WARM_WINDOW_S", "ServeState"]

log = logging.getLogger(__name__)

#: A new model version is warmed (scorer, default explainer) when the model was asked for an explanation
#: within this many seconds.
WARM_WINDOW_S = 600.0

#: Bytes of per-person catalog utilities kept per model version (``ServeState._person_catalog``): 64 MiB, e.g.
#: 10,000 people of an 800-item catalog.
PERSON_CATALOG_BYTES = 64 * 2**20

#: The method ``/v1/explain`` uses when the request names none (else the first registered one).
DEFAULT_METHODS = {"linear-bt": "linear-shapley", "capacity": "distributional-bernoulli", "gpm": "pref-shap",
                   "cgpm": "pref-shap", "linear-bt-personal": "linear-shapley"}


class ServeState(ExplainRunner):
    """State and operations of one ``prefstream serve`` process.

    Parameters
    ----------
    settings : Settings
        Topics, broker options, ``serve_*`` limits, explanation budgets and ``seed``.
    metrics : Metrics, optional
    """

    def __init__(self, settings, metrics: Metrics | None = None) -> None:
        self.settings = settings
        self.metrics = metrics or build_metrics()
        self.live = LiveModels(self.metrics, on_swap=self._warm)
        self.catalog = CatalogMatrix()
        self.people = ServedPeople()
        self.required = list(settings.serve_models if settings.serve_models is not None else settings.models)
        self.budgets = {"exact_players": int(settings.explain_exact_players),
                        "max_coalitions": int(settings.explain_max_coalitions),
                        "reference_size": int(settings.explain_reference_size)}
        self.followers: list = []
        self._pools()
        self._warm_latest: dict[str, ModelVersion] = {}
        #: model -> {method: last time it was asked to explain} (what a new version warms)
        self._explained: dict[str, dict[str, float]] = {}
        self._in_flight = 0
        self._tasks: list[asyncio.Task] = []
        self._loader: ThreadPoolExecutor | None = None
        self.item_errors = 0
        #: models with a snapshot read from the model topic (loaded, or still loading)
        self.published: set[str] = set()

    # ------------------------------------------------------------------ lifecycle
    def _pools(self) -> None:
        """The explanation and warm-up thread pools (made again by a start after a stop)."""
        self.executor = ThreadPoolExecutor(max_workers=self.settings.serve_explain_threads,
                                           thread_name_prefix="prefstream-serve-explain")
        self._warmer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prefstream-serve-warm")
        self._stopped = False

    async def start(self, follow: bool = True) -> None:
        """Start following the model and item topics (from the beginning, no consumer group); ``follow=False``
        only readies the thread pools (a state fed by hand, as the tests do)."""
        from stream.workers.follower import TopicFollower

        if self._stopped:
            self._pools()
        if not follow:
            return
        s = self.settings
        # snapshots are decoded, loaded (torch imported on the first GPM) and merged in one thread, in
        # topic order, so that the event loop keeps answering; the swap itself is one assignment
        loader = self._loader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prefstream-serve-models")
        def on_snapshot(key, value, partition=None, offset=None) -> None:  # noqa: ARG001
            if value is not None:  # read; loaded once the loader thread gets to it
                self.published.add(parse_snapshot_key(key)[0])
            loader.submit(self.live.on_snapshot, key, value)

        self.followers = [TopicFollower(s, s.topic_models, on_snapshot, "serve-models"),
                          TopicFollower(s, s.topic_items, self.on_item, "serve-items"),
                          TopicFollower(s, s.topic_people, self.on_person, "serve-people")]
        self._tasks = [asyncio.ensure_future(f.run()) for f in self.followers]

    async def stop(self) -> None:
        for f in self.followers:
            f.stop.set()
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            try:
                await t
            except BaseException:  # noqa: BLE001 - cancelled or failed, it is over either way
                pass
        self.executor.shutdown(wait=False, cancel_futures=True)
        self._warmer.shutdown(wait=False, cancel_futures=True)
        self._stopped = True
        if self._loader is not None:
            self._loader.shutdown(wait=False, cancel_futures=True)

    def on_item(self, key, value, partition=None, offset=None) -> None:  # noqa: ARG002
        """Apply one item-topic record (invalid ones are dead-lettered by the learner; here counted and skipped)."""
        try:
            self.catalog.upsert(parse_item(value, max_bytes=self.settings.max_message_bytes, key=key))
        except DeadLetter:
            self.item_errors += 1

    def on_person(self, key, value, partition=None, offset=None) -> None:  # noqa: ARG002
        """Apply one ``prefstream.people`` record to the server's store and to the current version holding
        that person (:mod:`stream.serving.people`); runs on the event loop, as every request does."""
        from stream.contract.people import parse_person_key

        mv = self.live.get(parse_person_key(key)[0])
        self.people.on_record(key, value, live_learner=None if mv is None else mv.learner)

    def person(self, mv: ModelVersion, user_id: str | None) -> dict:
        """``{"user_id", "personalized", "person_version"}`` of the request's person on this version; a personal
        model's answers are counted by whether they were personalized (``prefstream_predictions_total``, the
        dashboard's personalized share; the learner workers count theirs in the same family)."""
        out = self.people.info(mv.name, mv.learner, user_id)
        if self.people.personal(mv.learner):
            self.metrics.predictions.labels(model=mv.name, personalized="true" if out["personalized"] else "false").inc()
        return out

    # ------------------------------------------------------------------ models
    def loading(self) -> list[str]:
        """Models whose snapshot was read from the model topic but is not loaded yet."""
        return sorted(m for m in self.published if self.live.get(m) is None)

    def version(self, name: str) -> ModelVersion:
        """The current version of ``name``.

        404 ``unknown_model`` if no such model is registered, 404 ``not_served`` for a registered
        model this server is not configured for (none of its snapshots read), 503 ``not_loaded``
        before its first snapshot is loaded: the message says whether it is loading, whether the
        model topic is still being read, or whether no snapshot was published.
        """
        mv = self.live.get(name)
        if mv is not None:
            return mv
        if name not in registry.models():
            raise APIError(404, "unknown_model", f"Unknown model {name!r}; registered: {registry.models()}.",
                           field="model")
        topic = self.settings.topic_models
        caught = bool(self.followers) and self.followers[0].caught_up.is_set()
        if name in self.published:
            raise APIError(503, "not_loaded", f"Model {name!r} is loading (its snapshot was read from {topic}); "
                                              "retry in a few seconds.", field="model")
        if name not in self.required:
            raise APIError(404, "not_served", f"Model {name!r} is not served here; this server's models are "
                                              f"{self.required} (start it with --models to serve others).",
                           field="model")
        if self.followers and getattr(self.followers[0], "missing", False):  # issue 30 item 6 (kafkaops)
            raise APIError(503, "not_loaded", f"Model {name!r} cannot load: the model topic {topic} does not exist on "
                                              "the broker; create it with `prefstream topics create`, or serve a "
                                              "demo's models with the command `prefstream demo --keep` prints.",
                           field="model")
        if not caught:
            raise APIError(503, "not_loaded", f"Model {name!r} is not loaded yet: the server is still reading "
                                              f"{topic}.", field="model")
        raise APIError(503, "not_loaded", f"Model {name!r} has no published snapshot on {topic} yet (a learner "
                                          f"worker running it publishes one).", field="model")

    @staticmethod
    def scorer(mv: ModelVersion) -> Scorer:
        """The version's scorer, built once per version (503 while the model cannot score)."""
        sc = mv.cache.get("scorer")
        if sc is None:
            try:
                sc = mv.cache["scorer"] = scorer_for(mv.learner)
            except NotFittedError as exc:
                raise APIError(503, "not_fitted", str(exc), field="model") from None
        return sc

    @staticmethod
    def _versioned(mv: ModelVersion) -> dict:
        return {"model": mv.name, "version": mv.version, "source_versions": mv.source_versions}

    # ------------------------------------------------------------------ rank / compare
    def rank_scores(self, req) -> tuple[ModelVersion, Scorer, list[str], np.ndarray, np.ndarray, np.ndarray | None, dict]:
        """``(version, scorer, ids, X, scores, u, person)`` of a rank request."""
        mv = self.version(req.model)
        sc = self.scorer(mv)
        person = self.person(mv, req.user_id)
        ids, X, rows = candidates(req, sc.feature_names, self.catalog, self.settings.serve_max_items)
        u = context_vector(req.context, sc.context_names)
        if person["personalized"]:
            full = None if rows is None else self._person_catalog(mv, sc, person)
            if full is not None:
                return mv, sc, ids, X, full[rows], u, person
            return mv, sc, ids, X, self._call(sc.person_scores, X, req.user_id), u, person
        prep = None if rows is None else self._catalog_prep(mv, sc)
        if prep is not None:
            return mv, sc, ids, X, self._call(sc.rank_catalog, prep, rows, u), u, person
        return mv, sc, ids, X, self._call(sc.rank_scores, X, u), u, person

    def _catalog_prep(self, mv: ModelVersion, sc: Scorer, now: bool = False):
        """The version's per-row catalog work (:meth:`Scorer.prepare_catalog`) for the current catalog.

        Built on the second request that finds the same catalog version (a catalog that changes
        on every request is never prepared in vain), then reused until the model or the catalog
        changes.
        """
        ver = self.catalog.version
        hit = mv.cache.get("catalog")
        if hit is not None and hit[0] == ver:
            return hit[1]
        if mv.cache.get("catalog_seen") != ver and not now:
            mv.cache["catalog_seen"] = ver
            return None
        X, ok = self.catalog.view(sc.feature_names)
        prep = self._call(sc.prepare_catalog, X, ok)
        mv.cache["catalog"] = (ver, prep)
        return prep

    def _person_catalog(self, mv: ModelVersion, sc: Scorer, person: dict, now: bool = False) -> np.ndarray | None:
        """A person's utility of every catalog row (NaN for rows without an item), per model version, catalog
        version and person state version: a person's next rankings by id and recommendations are a gather.

        Made on the second rank request that finds the same (person, state, catalog), or at once for a
        recommendation (which scores the whole catalog anyway); the people kept per version are bounded
        by :data:`PERSON_CATALOG_BYTES` (least recently used leave first).
        """
        from collections import OrderedDict

        key = (person["user_id"], person["person_version"], self.catalog.version)
        lru = mv.cache.get("person_catalog")
        if lru is None:
            lru = mv.cache.setdefault("person_catalog", OrderedDict())
        hit = lru.get(key)
        if isinstance(hit, np.ndarray):
            lru.move_to_end(key)
            return hit
        if hit is None and not now:
            lru[key] = "seen"   # the first sight: only the request's candidates are scored
            return None
        X, ok = self.catalog.view(sc.feature_names)
        full = np.full(X.shape[0], np.nan)
        if ok.any():
            full[ok] = self._call(sc.person_scores, X[ok], person["user_id"])
        lru[key] = full
        lru.move_to_end(key)
        keep = max(1, PERSON_CATALOG_BYTES // max(1, full.nbytes))
        while len(lru) > keep:
            lru.popitem(last=False)
        return full

    def rank(self, req) -> tuple[dict, Any]:
        """The rank response, and the explanation job of its top_k (or None)."""
        mv, sc, ids, X, scores, u, person = self.rank_scores(req)
        n = len(ids)
        k = n if req.top_k is None else min(int(req.top_k), n)
        order = np.argsort(-scores, kind="stable")
        top = order[:k]
        s = scores[top].tolist()
        out = self._versioned(mv)
        out.update(person)
        out["aggregate"] = sc.aggregate
        out["items"] = [{"id": i, "score": v, "rank": r} for i, v, r in zip([ids[j] for j in top.tolist()], s, range(1, k + 1))]
        job = None
        if req.explain is not None:
            pairs = [(int(order[r]), int(order[r + 1])) for r in range(min(k, n - 1))]
            rid = uuid.uuid4().hex[:12]
            examples = [self._example(f"rank-{rid}:{ids[i]}>{ids[j]}", sc, X[i], X[j], req.context, ids[i], ids[j],
                                      req.user_id) for i, j in pairs]
            job = (mv, req.explain, examples, [(X[i], X[j], u) for i, j in pairs], {}, req.seed, person)
        return out, job

    def compare(self, req) -> dict:
        mv = self.version(req.model)
        sc = self.scorer(mv)
        xl = item_vector(req.left, sc.feature_names, self.catalog, "left")
        xr = item_vector(req.right, sc.feature_names, self.catalog, "right")
        u = context_vector(req.context, sc.context_names)
        person = self.person(mv, req.user_id)
        p = self._call(sc.proba, xl[None], xr[None], None if u is None else u[None],
                       [req.user_id] if person["personalized"] else None)
        out = self._versioned(mv)
        out.update(person)
        out["probability"] = float(p[0])
        return out

    def recommend(self, req) -> dict:
        """The top_k of the whole item catalog for the request's person (``POST /v1/recommend``).

        Every catalog item holding the model's features is a candidate, but those in ``exclude``
        (ids the catalog does not hold are ignored there). A personal model scores them for the
        person (``learner.score(X, user_id)``); a person it does not hold, or another model, with
        the population's catalog utilities (made once per model and catalog version). Pairwise
        models (GPM) rank by the mean pairwise probability over the whole catalog, n² margins: a
        catalog over ``serve_max_items`` is refused for them (413).
        """
        mv = self.version(req.model)
        sc = self.scorer(mv)
        person = self.person(mv, req.user_id)
        u = context_vector(req.context, sc.context_names)
        ids, rows = self.catalog.complete(sc.feature_names)
        excluded = 0
        if req.exclude:
            refuse_duplicates(req.exclude, "exclude")
        if sc.aggregate != "utility" and len(ids) > self.settings.serve_max_items:
            raise APIError(413, "too_large", f"{mv.name} ranks by pairwise probabilities: the catalog's {len(ids)} items "
                                             f"are over serve_max_items ({self.settings.serve_max_items}); rank a "
                                             "subset with /v1/rank.", field="model")
        out = self._versioned(mv)
        out.update(person)
        out["aggregate"] = sc.aggregate
        if not ids:
            out.update(items=[], catalog_items=0, excluded=0)
            return out
        if person["personalized"]:
            scores = self._person_catalog(mv, sc, person, now=True)[rows]
        else:
            prep = self._catalog_prep(mv, sc, now=True)
            scores = self._call(sc.rank_catalog, prep, rows, u) if prep is not None else None
            if scores is None:
                X, _ = self.catalog.view(sc.feature_names)
                scores = self._call(sc.rank_scores, X[rows], u)
        scores = np.array(scores, dtype=np.float64)
        if req.exclude:
            drop = set(req.exclude)
            mask = np.fromiter((i in drop for i in ids), dtype=bool, count=len(ids))
            excluded = int(mask.sum())
            scores[mask] = -np.inf
        k = min(int(req.top_k), len(ids) - excluded)
        if k <= 0:
            top = np.zeros(0, dtype=np.intp)
        else:
            part = np.argpartition(-scores, k - 1)[:k] if k < len(ids) else np.arange(len(ids))
            top = part[np.lexsort((part, -scores[part]))]   # best first; ties by catalog row (stable)
        out["items"] = [{"id": ids[j], "score": float(scores[j]), "rank": r + 1} for r, j in enumerate(top.tolist())]
        out["catalog_items"] = len(ids)
        out["excluded"] = excluded
        return out

    @staticmethod
    def _call(fn, *args):
        try:
            return fn(*args)
        except NotFittedError as exc:
            raise APIError(503, "not_fitted", str(exc), field="model") from None
        except InvalidInputError as exc:   # the learner refused the values (e.g. outside [0, 1] without a scaler)
            raise APIError(422, "invalid_input", str(exc)) from None

    # ------------------------------------------------------------------ explain
    @staticmethod
    def _example(event_id, sc: Scorer, xl, xr, context, left_id=None, right_id=None, user_id=None) -> PreferenceExample:
        names = sc.feature_names
        ctx = None if context is None else {k: float(v) for k, v in context.items()}
        return PreferenceExample(event_id=event_id, timestamp=time.time(), left=dict(zip(names, xl.tolist())),
                                 right=dict(zip(names, xr.tolist())), outcome=0, context=ctx, weight=1.0,
                                 left_id=left_id, right_id=right_id, user_id=user_id)

    def explain_job(self, req) -> tuple:
        """``(version, method, examples, pair arrays, params, seed, person)`` of an explain request (the pair
        arrays ``(x_left, x_right, u)`` and the person's id and state version key the cache)."""
        mv = self.version(req.model)
        sc = self.scorer(mv)
        xl = item_vector(req.left, sc.feature_names, self.catalog, "left")
        xr = item_vector(req.right, sc.feature_names, self.catalog, "right")
        u = context_vector(req.context, sc.context_names)
        person = self.person(mv, req.user_id)
        rid = req.request_id or f"serve-{uuid.uuid4().hex[:12]}"
        ex = self._example(rid, sc, xl, xr, req.context, req.left.id, req.right.id, req.user_id)
        return mv, req.method, [ex], [(xl, xr, u)], dict(req.params or {}), req.seed, person

    @staticmethod
    def methods(name: str) -> dict:
        """``{method: fn}`` of the pair explainers of ``name`` (click-session ones left out)."""
        return {k: f for k, f in registry.explainers_for(name).items() if not getattr(f, "session_only", False)}

    def default_method(self, name: str) -> str | None:
        fns = self.methods(name)
        m = DEFAULT_METHODS.get(name)
        return m if m in fns else (sorted(fns)[0] if fns else None)

    def explain_context(self, mv: ModelVersion, params: dict, seed: int | None) -> registry.ExplainContext:
        """The explainer's context: no background reservoir (a server follows no events), the catalog, the seed."""
        return registry.ExplainContext(model_name=mv.name, model_version=mv.version, background=[],
                                       catalog=self.catalog.frozen(),
                                       rng=np.random.default_rng(self.settings.seed if seed is None else seed),
                                       params=dict(params), budgets=dict(self.budgets))

    def _warm(self, mv: ModelVersion) -> None:
        """After a swap: build the new version's scorer and run each explainer asked for in the last
        :data:`WARM_WINDOW_S` seconds once on two catalog items, in a background thread, so that the
        first requests find the per-snapshot work done (Pref-SHAP's kernel blocks take seconds). Only
        the newest version of each model is warmed, and only models asked for an explanation lately."""
        now = time.time()
        if not any(now - t <= WARM_WINDOW_S for t in self._explained.get(mv.name, {}).values()):
            return   # nobody asked this model for explanations lately: no warm-up work
        self._warm_latest[mv.name] = mv
        self._warmer.submit(self._warm_now, mv.name)

    def _warm_now(self, name: str) -> None:
        mv = self._warm_latest.pop(name, None)
        if mv is None or self.live.get(name) is not mv:
            return   # a newer version came (and is queued) or this one is gone
        now = time.time()
        for method, t in sorted(self._explained.get(name, {}).items()):
            fn = self.methods(name).get(method)
            if fn is None or now - t > WARM_WINDOW_S:
                continue
            try:
                sc = self.scorer(mv)
                ids = [i for i, _ in zip(self.catalog._row, range(2))]   # noqa: SLF001 - two catalog ids
                if len(ids) < 2:
                    return
                X, _, missing_, unknown = self.catalog.gather(ids, sc.feature_names)
                if missing_ or unknown or sc.context_names:
                    return   # a context model has no context to warm with
                ex = self._example("warm-up", sc, X[0], X[1], None)
                fn(mv.learner, [ex], self.explain_context(mv, {}, None))
            except Exception as exc:  # noqa: BLE001 - warming is best effort
                log.debug("warming %s of %s v%d failed: %s", method, name, mv.version, exc)

    # ------------------------------------------------------------------ inventory
    def models(self) -> dict:
        now = time.time()
        out = []
        for name, mv in sorted(self.live.versions().items()):
            try:
                sc = self.scorer(mv)
                ready, agg, names, cnames = True, sc.aggregate, sc.feature_names, sc.context_names
            except APIError:
                ready, agg = False, None
                names = list(getattr(mv.learner, "feature_names", None) or [])
                cnames = list(getattr(mv.learner, "context_names", None) or [])
            out.append({**self._versioned(mv), "examples_seen": mv.training_count,
                        "snapshot_age_s": round(mv.age_seconds(now), 3), "aggregate": agg, "feature_names": names,
                        "context_names": cnames, "methods": sorted(self.methods(name)),
                        "default_method": self.default_method(name), "ready": ready,
                        "load_failures": self.live.load_failures.get(name, 0)})
        return {"models": out, "catalog_items": len(self.catalog)}

    def readiness(self) -> dict:
        missing = [m for m in self.required if self.live.get(m) is None]
        caught = [f.caught_up.is_set() for f in self.followers]
        models_caught = bool(caught) and caught[0]
        items_caught = len(caught) > 1 and caught[1]
        people_caught = len(caught) > 2 and caught[2]
        # the people's changelog gates readiness only while a personal model is served (a server of other
        # models never waits for a topic it does not need, which may not exist)
        personal = any(self.people.personal(mv.learner) for mv in self.live.versions().values())
        return {"ready": not missing and models_caught and items_caught and (people_caught or not personal),
                "missing": missing, "loading": [m for m in missing if m in self.published],
                "catalog_caught_up": items_caught, "models_caught_up": models_caught,
                "people_caught_up": people_caught}
