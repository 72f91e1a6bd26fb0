"""Run ``prefstream serve``: uvicorn (uvloop, httptools) with one or ``serve_workers`` processes."""

from __future__ import annotations

import logging

__all__ = ["run_server"]


def run_server(settings, log_level: str | None = None) -> int:
    """Serve until SIGTERM/SIGINT on ``settings.serve_host:serve_port``; returns the exit code.

    One process runs the app built here; with ``serve_workers > 1`` uvicorn forks that many
    processes, each building its own app (:func:`stream.serving.app.app_from_env`) and following
    the topics itself.
    """
    import signal
    import sys

    import uvicorn

    from stream.serving.app import create_app
    from stream.serving.settings import export_settings

    level = (log_level or settings.log_level).lower()
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    opts = dict(host=settings.serve_host, port=settings.serve_port, log_level="warning" if level == "info" else level,
                loop="uvloop", http="httptools", access_log=False, server_header=False, timeout_graceful_shutdown=5)
    # uvicorn shuts down gracefully on SIGTERM and then re-raises the signal to the handler it found:
    # make that a clean exit (status 0), as the workers end on SIGTERM
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    if settings.serve_workers > 1:
        export_settings(settings)
        uvicorn.run("stream.serving.app:app_from_env", factory=True, workers=settings.serve_workers, **opts)
    else:
        uvicorn.run(create_app(settings), **opts)
    return 0
