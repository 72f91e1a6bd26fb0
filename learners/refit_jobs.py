"""The fit of a refit job: a fresh GPM / C-GPM on a copied window, runnable in another process.

:meth:`learners.refit.RefittingGPM.refit_begin` copies the window into a picklable job (arrays,
names, model parameters); :func:`fit_window` fits it — in a thread, or in a worker process started
with :func:`refit_process_init` — and returns the model's state dict, which
:meth:`~learners.refit.RefittingGPM.refit_finish` installs.
"""

from __future__ import annotations

__all__ = ["DEFAULT_MODEL_PARAMS", "fit_job", "fit_window", "refit_process_init", "warm_up"]

#: Keyword arguments of :class:`learners.gpm.GPM` of a refit unless ``model_params`` says otherwise.
DEFAULT_MODEL_PARAMS = {"penalty_grid": (1e-3, 1e-4, 1e-5, 1e-6), "multiplier_grid": (0.5, 1.0, 2.0),
                        "validation_fraction": 0.1, "max_centres": 1000}


def fit_job(job: dict):
    """Fit the GPM / C-GPM of a :meth:`~learners.refit.RefittingGPM.refit_begin` job; the fitted model."""
    from learners.gpm import CGPM, GPM

    if job["context_names"]:
        return CGPM(job["feature_names"], job["context_names"], **job["params"]).fit(job["XL"], job["XR"], job["y"],
                                                                                      job["U"])
    return GPM(job["feature_names"], **job["params"]).fit(job["XL"], job["XR"], job["y"])


def refit_process_init(niceness: int = 10) -> None:
    """Initializer of a refit worker process: lower its CPU priority (POSIX ``nice``) so that, on a
    busy machine, the learner's own process wins the core when both want it, and (Linux) end with
    the learner: a SIGKILLed learner must not leave its refit running as an orphan."""
    import os

    try:
        os.nice(int(niceness))
    except (AttributeError, OSError):  # not POSIX, or not permitted: run at normal priority
        pass
    die_with_parent()


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux ``PR_SET_PDEATHSIG``).

    A process pool's workers outlive a parent killed with SIGKILL (nothing runs in the parent to
    stop them), and a refit can run for minutes holding a GiB. Elsewhere this does nothing.
    """
    import os
    import sys

    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the call: nobody is left to signal us
        os._exit(0)


def warm_up() -> bool:
    """Import what a fit needs (torch, the GPM), in a refit worker process before its first job:
    a spawned process otherwise spends its first seconds importing while a refit waits."""
    import torch

    import learners.gpm  # noqa: F401

    torch.set_num_threads(1)
    return True


def fit_window(job: dict) -> dict:
    """Fit a refit job and return the model's state dict (float64): for a worker process.

    Runs with torch limited to one thread (the learner keeps the other core).
    """
    import torch

    torch.set_num_threads(1)
    return fit_job(job).state_dict()
