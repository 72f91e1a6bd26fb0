"""When and where a learner's refits run: a thread and, by default, a low-priority spawned process.

``refit_executor = "PROCESS"`` (default): learners with the split refit protocol (the GPM:
``refit_begin`` / ``refit_function`` / ``refit_finish``) fit in a spawned process started with
:func:`learners.refit.refit_process_init`, so a refit never holds the GIL that learning needs;
``"THREAD"``: in a thread. :class:`stream.workers.learner_core.LearnerCore` takes both
(``executor``, ``refit_pool``) with the event loop whose callbacks install the fitted models;
:class:`RefitScheduling` is the part of it that starts a refit when a learner asks for one and
installs (or counts the failure of) its result.

A GPM / C-GPM (:class:`learners.refit.RefittingGPM`) is refitted **once for all the partitions this worker
holds** (:mod:`learners.refit_group`): its trigger counts over every source's learner of that model, the
job is fitted on the union of their windows, and every source's learner gets the same model (one
``fit_id``), so the served GPM is one fit of the whole stream on any partition count (issue 30 item 2).
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only
    from stream.workers.sources import ModelSlot, SourceState

__all__ = ["RefitScheduling", "refit_executors", "shutdown_executors"]

log = logging.getLogger("stream.workers.learner_core")  # the learner core's log, as before the split


def refit_executors(settings) -> tuple[Executor, Executor | None]:
    """``(thread executor, process pool or None)`` for ``settings.refit_executor``."""
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prefstream-refit")
    if settings.refit_executor != "PROCESS":
        return executor, None
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    from learners.refit import refit_process_init

    return executor, ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn"),
                                         initializer=refit_process_init)


def shutdown_executors(*executors: Executor | None, grace_s: float = 5.0) -> None:
    """Stop the executors without waiting for a refit in flight (its result is not wanted any more).

    A process pool's workers are terminated (SIGTERM, then SIGKILL after ``grace_s``): a fit
    runs for minutes, and the interpreter joins a pool's processes at exit, so a learner asked
    to stop would otherwise wait for the refit to end (its final snapshots are already
    delivered; what the refit would have produced is refitted by the partitions' next owner).
    A refit in a thread cannot be interrupted: the ``THREAD`` executor still ends with it.
    """
    for ex in executors:
        if ex is None:
            continue
        procs = list((getattr(ex, "_processes", None) or {}).values())  # ProcessPoolExecutor's workers
        ex.shutdown(wait=False, cancel_futures=True)
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
        for proc in procs:
            proc.join(grace_s)
            if proc.is_alive():
                proc.kill()
                proc.join(grace_s)


class RefitScheduling:
    """The learner core's refits: started when a learner's ``wants_refit()`` says so, fitted in
    the core's ``refit_pool`` (split protocol) or ``executor``, or inline without an event loop,
    and installed by callbacks in the event loop (a mixin of
    :class:`~stream.workers.learner_core.LearnerCore`: uses its ``loop``, ``executor``,
    ``refit_pool``, ``metrics`` and ``sources``)."""

    def _warm_refits(self, st: SourceState) -> None:
        """Start the refit process and its imports (torch, the GPM) as soon as a source holds a
        learner that refits in it — not when its first refit is due, which a catching-up worker
        reaches within a second (:func:`learners.refit_jobs.warm_up`)."""
        if self.refit_pool is None or getattr(self, "_refit_pool_warm", False):
            return
        if any(hasattr(slot.learner, "refit_begin") for slot in st.slots.values()):
            from learners.refit_jobs import warm_up

            self._refit_pool_warm = True
            try:
                self.refit_pool.submit(warm_up)
            except Exception:  # noqa: BLE001 - a broken pool shows (and is counted) at the first refit
                pass

    def _maybe_refit(self, st: SourceState, name: str, slot: ModelSlot) -> None:
        from learners.refit_group import supports_group

        if supports_group(slot.learner):
            self._maybe_group_refit(name, slot)
            return
        wants = getattr(slot.learner, "wants_refit", None)
        if wants is None or slot.refit_running or not wants():
            return
        slot.refit_running = True
        t0 = time.perf_counter()
        if self.loop is None:
            try:
                res = slot.learner.refit()
            except Exception as exc:  # noqa: BLE001 - a failed refit must not stop learning
                self._refit_failed(name, exc, slot)
            else:
                self._refit_done(st, name, slot, t0, res)
            return
        learner = slot.learner
        if self.refit_pool is not None and hasattr(learner, "refit_begin"):
            # fit in another process (the GIL stays with learning); begin/finish in this thread
            job = learner.refit_begin()
            try:
                fut = self.loop.run_in_executor(self.refit_pool, learner.refit_function, job)
            except Exception as exc:  # noqa: BLE001 - e.g. a broken pool: learning goes on
                learner.refit_abort()
                self._refit_failed(name, exc, slot)
                return

            def finished(f):
                if f.cancelled() or f.exception() is not None:
                    learner.refit_abort()
                    self._refit_failed(name, f.exception() if not f.cancelled() else "cancelled", slot)
                    return
                try:
                    res = learner.refit_finish(job, f.result())
                except Exception as exc:  # noqa: BLE001
                    self._refit_failed(name, exc, slot)
                else:
                    self._refit_done(st, name, slot, t0, res)

            fut.add_done_callback(finished)
            return
        fut = self.loop.run_in_executor(self.executor, slot.learner.refit)

        def done(f):
            if f.cancelled():
                slot.refit_running = False
            elif f.exception() is not None:
                self._refit_failed(name, f.exception(), slot)
            else:
                self._refit_done(st, name, slot, t0, f.result())

        fut.add_done_callback(done)

    def _group_of(self, name: str, slot: ModelSlot) -> list[tuple[SourceState, ModelSlot]]:
        """Every source of this worker holding a learner of ``name`` that can share ``slot``'s fit and has
        learned (or holds a model): a partition that never received an event (e.g. an idle click topic)
        stays out, and publishes nothing."""
        from learners.refit_group import compatible

        out = []
        for st in self.sources.values():
            other = st.slots.get(name)
            if other is not None and (other is slot or (compatible(other.learner, slot.learner) and
                                                        (other.learner.n_seen > 0 or other.learner.model is not None))):
                out.append((st, other))
        return out

    def _maybe_group_refit(self, name: str, slot: ModelSlot) -> None:
        """One refit of ``name`` over the windows of every partition this worker holds
        (:mod:`learners.refit_group`, issue 30 item 2): the served GPM is one fit of the whole stream."""
        from learners.refit_group import (group_adopt, group_refit_abort, group_refit_begin, group_refit_finish,
                                          group_wants_refit)
        from learners.refit_jobs import fit_job, fit_window

        group = self._group_of(name, slot)
        learners = [sl.learner for _, sl in group]
        for k in group_adopt(learners):   # a partition that joined after the fit serves it at once
            st, sl = group[k]
            if sl.guard is not None:
                sl.guard.mark(sl.learner)
            st.force = True
        if any(sl.refit_running for _, sl in group):
            return
        if not group_wants_refit(learners):
            return
        for _, sl in group:
            sl.refit_running = True
        t0 = time.perf_counter()
        job = group_refit_begin(learners)

        def failed(exc) -> None:
            group_refit_abort(learners)
            for _, sl in group:
                sl.refit_running = False
            self._refit_failed(name, exc, slot)

        def install(state) -> None:
            try:
                results = group_refit_finish(learners, job, state)
            except Exception as exc:  # noqa: BLE001 - a failed refit must not stop learning
                failed(exc)
                return
            for st, sl in group:
                self._refit_installed(st, sl)
            self._refit_measured(name, t0, results[0] if results else None)   # one fit, counted once

        if self.loop is None:
            try:
                model = fit_job(job)
            except Exception as exc:  # noqa: BLE001
                failed(exc)
            else:
                install(model)
            return
        try:  # in the refit process (the GIL stays with learning), else in the refit thread
            fut = (self.loop.run_in_executor(self.refit_pool, fit_window, job) if self.refit_pool is not None
                   else self.loop.run_in_executor(self.executor, fit_job, job))
        except Exception as exc:  # noqa: BLE001 - e.g. a broken pool: learning goes on
            failed(exc)
            return

        def finished(f) -> None:
            if f.cancelled() or f.exception() is not None:
                failed(f.exception() if not f.cancelled() else "cancelled")
            else:
                install(f.result())

        fut.add_done_callback(finished)

    def _refit_failed(self, name, exc, slot) -> None:
        slot.refit_running = False
        self.metrics.refit_failures.labels(model=name).inc()
        log.error("refit of %s failed: %r", name, exc)

    def _refit_done(self, st, name, slot, t0, res) -> None:
        """One learner's refit installed: :meth:`_refit_installed` and :meth:`_refit_measured`."""
        self._refit_installed(st, slot)
        self._refit_measured(name, t0, res)

    def _refit_installed(self, st, slot) -> None:
        """A fit installed in ``slot``'s learner: the state to fall back on, published with the next round."""
        slot.refit_running = False
        if slot.guard is not None:
            slot.guard.mark(slot.learner)  # the refitted model is the state to fall back on
        if self.sources.get(st.source) is st:
            st.force = True  # publish the refitted model with the next snapshot round

    def _refit_measured(self, name, t0, res) -> None:
        """One fit in the refit metrics (a group refit is one fit, however many partitions take it)."""
        res = res if isinstance(res, dict) else {}
        m = self.metrics
        m.refit_duration.labels(model=name).observe(float(res.get("duration_s", time.perf_counter() - t0)))
        if res.get("n_train") is not None:
            m.refit_training_size.labels(model=name).set(float(res["n_train"]))
        if res.get("val_auc") is not None:
            m.refit_validation_auc.labels(model=name).set(float(res["val_auc"]))
