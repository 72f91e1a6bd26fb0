"""A refit worker process ends with its learner: SIGKILL of the parent leaves no orphan refit.

The learner fits GPM refits in a spawned process pool (``learners.refit.refit_process_init``); a
pool's workers outlive a parent killed with SIGKILL unless the kernel is asked to signal them
(Linux ``PR_SET_PDEATHSIG``). The chaos runs of issue 22 left 1 GiB refit processes behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

PARENT = textwrap.dedent("""
    import multiprocessing as mp, os, sys, time
    from concurrent.futures import ProcessPoolExecutor
    from learners.refit import refit_process_init

    def work(path):
        with open(path, "w") as fh:
            fh.write(str(os.getpid()))
        time.sleep(120)

    if __name__ == "__main__":
        pool = ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn"), initializer=refit_process_init)
        pool.submit(work, sys.argv[1])
        time.sleep(300)
""")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:  # a zombie (reaped later by init) counts as gone
        return fh.read().split(")")[-1].split()[0] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux only")
def test_a_refit_process_dies_with_its_sigkilled_learner(tmp_path):
    script, marker = tmp_path / "parent.py", tmp_path / "child.pid"
    script.write_text(PARENT)
    parent = subprocess.Popen([sys.executable, str(script), str(marker)], cwd=str(tmp_path),
                              env=dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [
                                  str(__import__("pathlib").Path(__file__).resolve().parents[1]),
                                  os.environ.get("PYTHONPATH")]))))
    try:
        deadline = time.monotonic() + 120
        while not (marker.exists() and marker.read_text()):
            assert parent.poll() is None, "the parent exited before its refit process started"
            assert time.monotonic() < deadline, "the refit process did not start within 120 s"
            time.sleep(0.1)
        child = int(marker.read_text())
        assert _alive(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 15
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(child), f"refit process {child} outlived its SIGKILLed parent"
    finally:
        if parent.poll() is None:
            parent.kill()


STOPPING = textwrap.dedent("""
    import os, sys, time
    from stream.settings import Settings
    from stream.workers.refits import refit_executors, shutdown_executors

    def work(path):
        with open(path, "w") as fh:
            fh.write(str(os.getpid()))
        time.sleep(600)

    if __name__ == "__main__":
        executor, pool = refit_executors(Settings.load(None, {"refit_executor": "PROCESS"}, environ={}))
        fut = pool.submit(work, sys.argv[1])
        while not (os.path.exists(sys.argv[1]) and open(sys.argv[1]).read()):
            time.sleep(0.05)
        shutdown_executors(executor, pool)  # what run_learner does once the worker stopped
        print("cancelled" if fut.done() else "still running", flush=True)
""")


def test_a_stopping_learner_does_not_wait_for_its_refit_in_flight(tmp_path):
    """SIGTERM with a refit in the pool: shutdown_executors ends the refit process, so the learner
    exits (the interpreter would otherwise join the pool, i.e. wait the refit out: 600 s here)."""
    script, marker = tmp_path / "stopping.py", tmp_path / "child.pid"
    script.write_text(STOPPING)
    repo = str(__import__("pathlib").Path(__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")])))
    try:
        out = subprocess.run([sys.executable, str(script), str(marker)], cwd=str(tmp_path), env=env,
                             capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired:
        pytest.fail("the learner process waited for its refit in flight")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Traceback" not in out.stderr, out.stderr[-2000:]
    child = int(marker.read_text())
    assert not _alive(child), f"refit process {child} outlived the stopped learner"
