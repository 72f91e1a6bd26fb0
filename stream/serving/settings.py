"""Settings of ``prefstream serve``: the workers' :class:`~stream.settings.Settings`, carried to server processes.

The server reads the same settings as the workers (config file, ``PREFSTREAM_*`` environment,
flags), including the broker security options (SASL, TLS) and the ``serve_*`` fields. With
``serve_workers > 1`` uvicorn starts the processes itself and each builds its app from the
environment: :func:`export_settings` writes the resolved settings (secrets included) into one
environment variable, :func:`settings_from_env` reads them back in the child.
"""

from __future__ import annotations

import json
import os

from stream.settings import Settings

__all__ = ["SETTINGS_ENV", "export_settings", "settings_from_env"]

#: Environment variable carrying the resolved settings to uvicorn's worker processes.
SETTINGS_ENV = "PREFSTREAM_SERVE_RESOLVED_SETTINGS"


def export_settings(settings: Settings, environ=None) -> None:
    """Put the resolved ``settings`` (secrets included) into ``environ`` (default ``os.environ``)."""
    env = os.environ if environ is None else environ
    env[SETTINGS_ENV] = json.dumps(settings.as_dict(redact=False))


def settings_from_env(environ=None) -> Settings:
    """The settings exported by :func:`export_settings`, or ``Settings.load()`` when none were."""
    env = os.environ if environ is None else environ
    raw = env.get(SETTINGS_ENV)
    if not raw:
        return Settings.load()
    return Settings(**json.loads(raw))
