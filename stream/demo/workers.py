"""Launching the demo's workers: the product's own ``python -m stream worker learn|explain``.

Each worker is a subprocess of the ``prefstream`` CLI (:func:`stream.cli.main`), which registers
the built-in models and their merge rules exactly as for any deployment; the demo adds nothing
to them. The settings file written by :func:`stream.demo.config.write_settings_toml` is the
whole truth for the workers: other ``PREFSTREAM_*`` variables are not passed on.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from stream.demo.errors import DemoError

__all__ = ["REPO_ROOT", "Workers", "cpu_seconds", "free_port"]

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]

#: BLAS/torch threads of each worker process (``$PREFSTREAM_DEMO_WORKER_THREADS``, default 1).
_WORKER_THREADS = max(1, int(os.environ.get("PREFSTREAM_DEMO_WORKER_THREADS", "1") or 1))


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (for a worker's metrics endpoint).

    Examples
    --------
    >>> 0 < free_port() < 65536
    True
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int, descendants: bool = False) -> float:
    """CPU seconds (user + system) of process ``pid`` and, with ``descendants``, of its living
    descendants, from ``/proc`` (Linux); NaN where ``/proc`` cannot tell."""
    import os

    try:
        hz = os.sysconf("SC_CLK_TCK")
        names = [d for d in os.listdir("/proc") if d.isdigit()] if descendants else [str(pid)]
    except (OSError, ValueError, AttributeError):
        return float("nan")
    children: dict[int, list[int]] = {}
    stat: dict[int, list[str]] = {}
    for d in names:
        try:
            with open(f"/proc/{d}/stat") as fh:
                f = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        stat[int(d)] = f
        children.setdefault(int(f[1]), []).append(int(d))
    if pid not in stat:
        return float("nan")
    total, todo = 0.0, [pid]
    while todo:
        q = todo.pop()
        if q in stat:
            f = stat[q]
            total += (int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])) / hz
        if descendants:
            todo.extend(children.get(q, []))
    return total


class Workers:
    """The demo's worker subprocesses; :meth:`stop` is safe to call more than once."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.procs: dict[str, subprocess.Popen] = {}
        self._files = []

    def start(self, role: str, config: Path, port: int, extra: list[str] | None = None,
              name: str | None = None) -> subprocess.Popen:
        """Start ``python -m stream worker <role>`` with its metrics on ``port``; ``name`` (default
        ``role``) keys it and names its log."""
        return self._spawn(name or role, config, ["worker", role, "--config", str(config), "--metrics-port", str(port),
                                                  *(extra or [])])

    def start_server(self, config: Path, port: int) -> subprocess.Popen:
        """Start ``prefstream serve`` on ``127.0.0.1:port`` (named ``serve``)."""
        return self._spawn("serve", config, ["serve", "--config", str(config), "--port", str(port)])

    def _spawn(self, name: str, config: Path, args: list[str]) -> subprocess.Popen:
        env = dict(os.environ)
        env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        # one BLAS/torch thread per worker: the learner's refit thread, the learner's event loop
        # and the explainer already share the cores, and oversubscribed torch refits crawl
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(_WORKER_THREADS)
        env["PREFSTREAM_CONFIG"] = str(config)
        for k in list(env):  # the config file is the whole truth for the workers
            if k.startswith("PREFSTREAM_") and k not in ("PREFSTREAM_CONFIG", "PREFSTREAM_CACHE", "PREFSTREAM_DATA_DIR",
                                                         "PREFSTREAM_BROKER_SESSION_TIMEOUT_S"):
                env.pop(k)
        fh = open(self.log_dir / f"{name}.log", "w", encoding="utf-8")
        self._files.append(fh)
        cmd = [sys.executable, "-m", "stream", *args]
        p = subprocess.Popen(cmd, cwd=str(REPO_ROOT), env=env, stdout=fh, stderr=subprocess.STDOUT,
                             start_new_session=True)
        self.procs[name] = p
        return p

    def check_alive(self) -> None:
        for role, p in self.procs.items():
            if p.poll() is not None:
                tail = (self.log_dir / f"{role}.log").read_text(errors="replace")[-3000:]
                raise DemoError(f"The {role} worker exited with code {p.returncode}. Its log ends with:\n{tail}")

    def stop(self, timeout: float = 30.0) -> dict[str, int | None]:
        """SIGTERM every worker, SIGKILL those still running after ``timeout`` seconds."""
        for p in self.procs.values():
            if p.poll() is None:
                try:
                    p.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + timeout
        codes = {}
        for role, p in self.procs.items():
            try:
                codes[role] = p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("%s worker ignored SIGTERM for %.0f s; killing it", role, timeout)
                p.kill()
                codes[role] = p.wait(timeout=10)
        for fh in self._files:
            fh.close()
        self._files = []
        return codes

