"""What every ``prefstream`` command does before it starts anything (:mod:`stream.cli`'s helpers).

* **Settings from the command line**: ``--set key=value`` and ``--param model.name=value`` parsed
  (JSON values accepted), merged over the environment, the config file and the defaults
  (:meth:`stream.settings.Settings.load`); a bad value ends the command with one ``error:`` line.
* **Preflight checks** with one-line errors and no traceback: a broker that answers, the topics a
  worker reads, the metrics port a worker binds.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any, List

import typer

from learners.exceptions import PrefstreamError

__all__: list[str] = []  # private to stream.cli


def _parse_sets(sets: List[str] | None) -> dict[str, Any]:
    """``--set key=value`` items as a dict, values parsed as JSON when they are JSON.

    Examples
    --------
    >>> _parse_sets(["explain_sample_rate=0.1", 'models=["gpm"]', "log_level=INFO"])
    {'explain_sample_rate': 0.1, 'models': ['gpm'], 'log_level': 'INFO'}
    """
    out: dict[str, Any] = {}
    for item in sets or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"--set expects key=value; got {item!r}.")
        try:
            val = json.loads(raw)
        except ValueError:
            val = raw
        out[key.strip()] = val
    return out


def _parse_params(params: List[str] | None) -> dict[str, dict[str, Any]]:
    """``["linear-bt.learning_rate=0.05"]`` → ``{"linear-bt": {"learning_rate": 0.05}}``.

    Examples
    --------
    >>> _parse_params(["linear-bt.learning_rate=0.05", 'capacity.constraints=["monotone"]'])
    {'linear-bt': {'learning_rate': 0.05}, 'capacity': {'constraints': ['monotone']}}
    """
    out: dict[str, dict[str, Any]] = {}
    for item in params or []:
        key, sep, raw = item.partition("=")
        model, dot, name = key.strip().rpartition(".")
        if not sep or not dot or not model or not name:
            raise typer.BadParameter(f"--param expects model.parameter=value (e.g. linear-bt.learning_rate=0.05); got {item!r}.")
        try:
            val = json.loads(raw)
        except ValueError:
            val = raw
        out.setdefault(model, {})[name] = val
    return out


def _with_params(config, overrides: dict[str, Any], params: List[str] | None) -> dict[str, Any]:
    """Merge ``--param`` values into the model_params from the lower-precedence sources."""
    extra = _parse_params(params)
    if not extra:
        return overrides
    base = overrides.get("model_params")
    if base is None:
        base = _settings(config, {k: v for k, v in overrides.items() if k != "model_params"}).model_params
    merged = {m: dict(p) for m, p in base.items()}
    for m, p in extra.items():
        merged.setdefault(m, {}).update(p)
    return {**overrides, "model_params": merged}


def _settings(config, overrides: dict[str, Any]):
    from stream.settings import Settings

    try:
        return Settings.load(config, overrides)
    except PrefstreamError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


def _require_broker(s) -> None:
    """End the command with one ``error:`` line and exit 1 unless a broker answers within
    ``s.broker_wait_seconds`` (before any producer, consumer or worker is started)."""
    from stream.broker import BrokerError, wait_for_broker

    opts = s.kafka_client_options()
    opts.pop("client_id", None)  # the probe names its own client
    try:
        wait_for_broker(s.bootstrap_servers, timeout=s.broker_wait_seconds, client_options=opts)
    except BrokerError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


def _require_topics(s, names: list[str]) -> None:
    """End the command with one ``error:`` line and exit 2 unless every topic of ``names`` exists
    (one metadata request, before a worker joins its group: its consumer would otherwise have the
    broker auto-create a missing input topic with one partition, or wait on it). ``names`` are the
    topics a worker reads (and the compacted model topic); output-only topics (dead letters,
    drift) are not required."""
    from stream.broker import BrokerError, missing_topics

    opts = s.kafka_client_options()
    opts.pop("client_id", None)
    try:
        missing = missing_topics(s.bootstrap_servers, names, client_options=opts)
    except BrokerError as exc:
        typer.echo(f"error: {_one_line(exc)}", err=True)
        raise typer.Exit(1) from None
    if missing:
        which = (f"Topic {missing[0]!r} does not exist; create it" if len(missing) == 1 else
                 f"Topics {', '.join(map(repr, missing))} do not exist; create them")
        typer.echo(f"error: {which} with `prefstream topics create`.", err=True)
        raise typer.Exit(2)


@contextlib.contextmanager
def _metrics_port_errors():
    """A worker's metrics port in use ends the command as one ``error:`` line and exit 2 (the
    worker binds it before it joins its group)."""
    from stream.metrics import MetricsPortError

    try:
        yield
    except MetricsPortError as exc:
        typer.echo(f"error: {_one_line(exc)}", err=True)
        raise typer.Exit(2) from None


def _worker_overrides(bootstrap, models, metrics_port, group, snapshot_events, snapshot_seconds, log_level, sets):
    o: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "models": [m.strip() for m in models.split(",") if m.strip()] if models else None,
        "metrics_port": metrics_port,
        "consumer_group": group,
        "snapshot_every_events": snapshot_events,
        "snapshot_every_seconds": snapshot_seconds,
        "log_level": log_level,
    }
    o.update(_parse_sets(sets))
    return o


def _one_line(exc: BaseException) -> str:
    """The first line of an error message (scripts' output and log tails stay out of the terminal)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
