"""Where a learner's refits run: a thread and, by default, a low-priority spawned process.

``refit_executor = "PROCESS"`` (default): learners with the split refit protocol (the GPM:
``refit_begin`` / ``refit_function`` / ``refit_finish``) fit in a spawned process started with
:func:`learners.refit.refit_process_init`, so a refit never holds the GIL that learning needs;
``"THREAD"``: in a thread. :class:`stream.workers.learner_core.LearnerCore` takes both
(``executor``, ``refit_pool``) with the event loop whose callbacks install the fitted models.
"""

from __future__ import annotations

from concurrent.futures import Executor, ThreadPoolExecutor

__all__ = ["refit_executors", "shutdown_executors"]


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


def shutdown_executors(*executors: Executor | None) -> None:
    """Stop the executors without waiting for a refit in flight (its result is not wanted any more)."""
    for ex in executors:
        if ex is not None:
            ex.shutdown(wait=False, cancel_futures=True)
