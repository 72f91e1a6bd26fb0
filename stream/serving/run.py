"""Run ``prefstream serve``: uvicorn (uvloop, httptools) with one or ``serve_workers`` processes."""

from __future__ import annotations

import logging

__all__ = ["run_server"]


def require_free_port(host: str, port: int) -> None:
    """Raise :class:`~learners.exceptions.InvalidParameterError` (one line) when ``host:port`` cannot be
    bound — checked before the broker and the app, instead of uvicorn's own error line at startup.

    Examples
    --------
    >>> import socket
    >>> with socket.socket() as s:
    ...     s.bind(("127.0.0.1", 0)); s.listen(); taken = s.getsockname()[1]
    ...     try:
    ...         require_free_port("127.0.0.1", taken)
    ...     except Exception as exc:
    ...         print(str(exc).split(";")[0].replace(str(taken), "P"))
    Cannot listen on 127.0.0.1:P: the address is in use (another prefstream serve or program)
    """
    import errno
    import socket

    from learners.exceptions import InvalidParameterError

    if not port:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            sock.bind((host, port))
        except OSError as exc:
            why = ("the address is in use (another prefstream serve or program)" if exc.errno == errno.EADDRINUSE
                   else exc.strerror or str(exc))
            raise InvalidParameterError(f"Cannot listen on {host}:{port}: {why}; pick another port with --port "
                                        "or PREFSTREAM_SERVE_PORT.") from None


def run_server(settings, log_level: str | None = None) -> int:
    """Serve until SIGTERM/SIGINT on ``settings.serve_host:serve_port``; returns the exit code.

    One process runs the app built here; with ``serve_workers > 1`` uvicorn forks that many
    processes, each building its own app (:func:`stream.serving.app.app_from_env`) and following
    the topics itself. Once the socket listens it prints one line,
    ``serving on http://HOST:PORT (models: …)``.
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
    models = ", ".join(settings.serve_models if settings.serve_models is not None else settings.models) or "none"

    def announce(port: int) -> None:
        host = settings.serve_host if ":" not in settings.serve_host else f"[{settings.serve_host}]"
        print(f"serving on http://{host}:{port} (models: {models})", flush=True)

    if settings.serve_workers > 1:
        from uvicorn.supervisors import Multiprocess

        export_settings(settings)
        config = uvicorn.Config("stream.serving.app:app_from_env", factory=True, workers=settings.serve_workers, **opts)
        sock = config.bind_socket()  # listening from here on: the workers accept on it
        announce(sock.getsockname()[1])
        Multiprocess(config, sockets=[sock]).run()
    else:
        class _Server(uvicorn.Server):
            def _log_started_message(self, listeners) -> None:  # bound and accepting
                super()._log_started_message(listeners)
                announce(listeners[0].getsockname()[1])

        server = _Server(uvicorn.Config(create_app(settings), **opts))
        server.run()
        if not server.started:
            return 3  # uvicorn's startup failure (its one error line is logged)
    return 0
