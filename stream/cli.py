"""The ``prefstream`` command line (typer).

Commands::

    prefstream broker start|stop|status      local single-node Kafka (deploy/kafka)
    prefstream topics create                 the standard topics (idempotent)
    prefstream worker learn|explain          run a learner / explainer worker
    prefstream serve                         HTTP rank / compare / explain API on the live models
    prefstream replay FILE                   send a CSV/JSONL file as contract records
    prefstream tail                          follow explanation records
    prefstream evaluate FILE                 hold out each person's last visit: NDCG@k, HR@k, AUC per model
    prefstream demo                          the end-to-end demo (stream.demo)
    prefstream report --run-dir DIR          rebuild a run's HTML report
    prefstream dead-letters [--redrive]      summarise / export / re-drive the dead-letter topic

Configuration precedence, highest first: command-line flags (including ``--set key=value`` and
``--param model.parameter=value``, merged into ``model_params``) >
environment variables ``PREFSTREAM_<SETTING>`` > the config file (``--config`` or
``$PREFSTREAM_CONFIG``, TOML or JSON) > defaults; see :class:`stream.settings.Settings`.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any, List, Optional

import typer

from learners.exceptions import PrefstreamError
from stream.cli_setup import (_metrics_port_errors, _one_line, _parse_params, _parse_sets, _require_broker,  # noqa: F401
                              _require_topics, _settings, _with_params, _worker_overrides)

__all__ = ["app", "main"]

app = typer.Typer(add_completion=False, no_args_is_help=True, help="prefstream: learn preferences from Kafka streams and explain them.")
broker_app = typer.Typer(no_args_is_help=True, help="Local single-node Kafka broker.")
topics_app = typer.Typer(no_args_is_help=True, help="Kafka topics.")
worker_app = typer.Typer(no_args_is_help=True, help="Run a worker.")
app.add_typer(broker_app, name="broker")
app.add_typer(topics_app, name="topics")
app.add_typer(worker_app, name="worker")

def _flags_without_type() -> None:
    """Help shows ``--quiet`` and ``--help``, not ``--quiet <bool>`` (typer ≥ 0.2x labels every option
    with its type, flags included; a flag takes no value)."""
    from typer.core import TyperOption

    shown = getattr(TyperOption, "display_type_rich", None)
    if shown is None or getattr(shown, "_prefstream", False):
        return

    def display_type_rich(self, ctx):
        return None if self.is_flag else shown(self, ctx)

    display_type_rich._prefstream = True
    TyperOption.display_type_rich = display_type_rich


_flags_without_type()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("prefstream")
    except PackageNotFoundError:  # a source tree that was never installed
        return "unknown (not installed)"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"prefstream {_version()}")
        raise typer.Exit()


@app.callback()
def _main(show_version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                            help="Print the version and exit.")):
    """prefstream: learn preferences from Kafka streams and explain them."""


ConfigOpt = typer.Option(None, "--config", "-c", help="TOML or JSON settings file (default $PREFSTREAM_CONFIG).")
BootstrapOpt = typer.Option(None, "--bootstrap", "-b", help="Kafka bootstrap servers host:port[,host:port].")
SetOpt = typer.Option(None, "--set", help="Any setting as key=value (JSON values accepted), repeatable.")
ParamOpt = typer.Option(None, "--param", help="A model parameter as model.name=value (JSON values accepted), repeatable.")


# ------------------------------------------------------------------------------ broker
@broker_app.command("start")
def broker_start(timeout: float = typer.Option(120.0, help="Seconds to wait for the broker.")):
    """Start the local broker (no-op if it runs); print its bootstrap address."""
    from stream.broker import start_broker

    try:
        typer.echo(start_broker(timeout=timeout))
    except PrefstreamError as exc:
        typer.echo(f"error: {_one_line(exc)}", err=True)
        raise typer.Exit(1) from None


@broker_app.command("stop")
def broker_stop(timeout: float = typer.Option(60.0, help="Seconds to wait for a clean stop.")):
    """Stop the local broker (no-op if it does not run)."""
    from stream.broker import stop_broker

    try:
        stop_broker(timeout=timeout)
    except PrefstreamError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo("stopped")


@broker_app.command("status")
def broker_status_cmd():
    """Print the local broker's status as JSON; exit 1 if it is not running."""
    from stream.broker import broker_status

    try:
        st = broker_status()
    except PrefstreamError as exc:
        typer.echo(f"error: {_one_line(exc)}", err=True)
        raise typer.Exit(1) from None
    typer.echo(json.dumps(st, indent=2, default=str))
    if not st.get("running", False):
        raise typer.Exit(1)


# ------------------------------------------------------------------------------ topics
@topics_app.command("create")
def topics_create(config: Optional[str] = ConfigOpt, bootstrap: Optional[str] = BootstrapOpt,
                  partitions: Optional[int] = typer.Option(None, help="Override the partition count of every topic."),
                  set_: Optional[List[str]] = SetOpt):
    """Create the standard topics (names from the settings) if they do not exist."""
    from stream.broker import TOPICS, create_topics

    s = _settings(config, {"bootstrap_servers": bootstrap, **_parse_sets(set_)})
    names = {
        "prefstream.preferences": s.topic_preferences, "prefstream.clicks": s.topic_clicks,
        "prefstream.items": s.topic_items, "prefstream.models": s.topic_models,
        "prefstream.explain-requests": s.topic_explain_requests, "prefstream.explanations": s.topic_explanations,
        "prefstream.dead-letters": s.topic_dead_letters, "prefstream.drift": s.topic_drift,
        "prefstream.people": s.topic_people,
    }
    specs = {names.get(k, k): v for k, v in TOPICS.items()}
    _require_broker(s)
    try:
        opts = s.kafka_client_options()
        opts.pop("client_id", None)  # create_topics names its own admin client
        res = create_topics(s.bootstrap_servers, specs, partitions=partitions, client_options=opts)
    except PrefstreamError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    for name, what in res.items():
        typer.echo(f"{name}: {what}")


# ------------------------------------------------------------------------------ workers
@worker_app.command("learn")
def worker_learn(
    config: Optional[str] = ConfigOpt,
    bootstrap: Optional[str] = BootstrapOpt,
    models: Optional[str] = typer.Option(None, "--models", "-m", help="Comma-separated model names (see registry)."),
    metrics_port: Optional[int] = typer.Option(None, "--metrics-port", help="Prometheus port; 0 disables."),
    group: Optional[str] = typer.Option(None, "--group", help="Consumer group (workers of one group split partitions)."),
    snapshot_every_events: Optional[int] = typer.Option(None, "--snapshot-every-events"),
    snapshot_every_seconds: Optional[float] = typer.Option(None, "--snapshot-every-seconds"),
    dedupe_window: int = typer.Option(4096, "--dedupe-window", envvar="PREFSTREAM_DEDUPE_WINDOW",
                                      help="Event-id hashes remembered per model and partition; 0 disables."),
    log_level: Optional[str] = typer.Option(None, "--log-level"),
    set_: Optional[List[str]] = SetOpt,
    param: Optional[List[str]] = ParamOpt,
):
    """Run a learner worker: validate, learn, snapshot (until SIGTERM)."""
    from stream.workers.learner import run_learner

    o = _worker_overrides(bootstrap, models, metrics_port, group, snapshot_every_events, snapshot_every_seconds,
                          log_level, set_)
    s = _settings(config, _with_params(config, o, param))
    try:
        from stream import registry

        for m in s.models:
            registry.get_model(m)
    except PrefstreamError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    _require_broker(s)
    from stream.workers.learner import personal_models

    people = [s.topic_people] if personal_models(s) else []
    _require_topics(s, [s.topic_preferences, s.topic_clicks, s.topic_items, s.topic_models, *people])
    with _metrics_port_errors():
        code = run_learner(s, dedupe_window=dedupe_window)
    raise typer.Exit(code)


@worker_app.command("explain")
def worker_explain(
    config: Optional[str] = ConfigOpt,
    bootstrap: Optional[str] = BootstrapOpt,
    metrics_port: Optional[int] = typer.Option(None, "--metrics-port", help="Prometheus port; 0 disables."),
    group: Optional[str] = typer.Option(None, "--group", help="Learner consumer group (the explainer uses <group>-explainer)."),
    sample_rate: Optional[float] = typer.Option(None, "--sample-rate", help="Fraction of preference events explained."),
    log_level: Optional[str] = typer.Option(None, "--log-level"),
    set_: Optional[List[str]] = SetOpt,
    param: Optional[List[str]] = ParamOpt,
):
    """Run an explainer worker: explain sampled events and explain requests (until SIGTERM)."""
    from stream.workers.explainer_loop import run_explainer

    o = _worker_overrides(bootstrap, None, metrics_port, group, None, None, log_level, set_)
    o["explain_sample_rate"] = sample_rate if sample_rate is not None else o.get("explain_sample_rate")
    s = _settings(config, _with_params(config, o, param))
    _require_broker(s)
    _require_topics(s, [s.topic_preferences, s.topic_clicks, s.topic_explain_requests, s.topic_items, s.topic_models,
                        s.topic_explanations])
    with _metrics_port_errors():
        code = run_explainer(s)
    raise typer.Exit(code)


# ------------------------------------------------------------------------------ serve
@app.command("serve")
def serve_cmd(
    config: Optional[str] = ConfigOpt,
    bootstrap: Optional[str] = BootstrapOpt,
    host: Optional[str] = typer.Option(None, "--host", help="Bind address (setting serve_host, default 127.0.0.1)."),
    port: Optional[int] = typer.Option(None, "--port", help="TCP port (setting serve_port, default 8000)."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Server processes (setting serve_workers, default 1)."),
    models: Optional[str] = typer.Option(None, "--models", "-m",
                                         help="Models that must be loaded before /readyz is 200 (default: the models setting)."),
    log_level: Optional[str] = typer.Option(None, "--log-level"),
    set_: Optional[List[str]] = SetOpt,
):
    """Serve rank / compare / explain over HTTP with the live models (until SIGTERM; docs/serve.md)."""
    from stream.serving.run import require_free_port, run_server

    o: dict[str, Any] = {"bootstrap_servers": bootstrap, "serve_host": host, "serve_port": port,
                         "serve_workers": workers, "log_level": log_level,
                         "serve_models": [m.strip() for m in models.split(",") if m.strip()] if models else None}
    o.update(_parse_sets(set_))
    s = _settings(config, o)
    try:
        from stream import registry

        for m in (s.serve_models if s.serve_models is not None else s.models):
            registry.get_model(m)
        require_free_port(s.serve_host, s.serve_port)
    except PrefstreamError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    _require_broker(s)
    _require_topics(s, [s.topic_models, s.topic_items])
    raise typer.Exit(run_server(s))


# ------------------------------------------------------------------------------ replay
@app.command("replay")
def replay_cmd(
    file: str = typer.Argument(..., help="CSV or JSONL file."),
    kind: str = typer.Option("preference", "--kind", help="preference, click or item."),
    topic: Optional[str] = typer.Option(None, "--topic", help="Destination (default: the settings' topic for the kind)."),
    rate: Optional[float] = typer.Option(None, "--rate", help="Events per second (default: as fast as possible)."),
    key: str = typer.Option("event", "--key", help="Record key: event (the record's id) or user (its user_id, "
                                                   "so one person's events stay on one partition, in order)."),
    config: Optional[str] = ConfigOpt,
    bootstrap: Optional[str] = BootstrapOpt,
    progress: bool = typer.Option(True, "--progress/--no-progress"),
    max_request_bytes: Optional[int] = typer.Option(None, "--max-request-bytes",
                                                    help="Largest producer request (setting max_request_bytes)."),
    fmt: Optional[str] = typer.Option(None, "--format",
                                      help="json, avro or jsonschema (the Confluent wire format, schema registered "
                                           "in schema_registry_url); default: the kind's format_* setting."),
    set_: Optional[List[str]] = SetOpt,
):
    """Send FILE as contract records; print sent, skipped and failed counts, and one line per failure reason."""
    from stream.replay import ReplayInterrupted, replay

    s = _settings(config, {"bootstrap_servers": bootstrap, "max_request_bytes": max_request_bytes, **_parse_sets(set_)})
    dest = topic or {"preference": s.topic_preferences, "click": s.topic_clicks, "item": s.topic_items}.get(kind)
    if dest is None:
        typer.echo(f"error: --kind must be preference, click or item; got {kind!r}.", err=True)
        raise typer.Exit(2)
    if key not in ("event", "user"):
        typer.echo(f"error: --key must be event or user; got {key!r}.", err=True)
        raise typer.Exit(2)
    fmt = fmt or {"preference": s.format_preferences, "click": s.format_clicks, "item": s.format_items}[kind]
    if fmt not in ("json", "avro", "jsonschema"):
        typer.echo(f"error: --format must be json, avro or jsonschema; got {fmt!r}.", err=True)
        raise typer.Exit(2)
    wire = None
    if fmt != "json":
        from stream.broker.serializers import registry_of, wire_format

        if not s.schema_registry_url:
            typer.echo(f"error: --format {fmt} needs a schema registry: set schema_registry_url "
                       "(PREFSTREAM_SCHEMA_REGISTRY_URL), e.g. the URL `make registry-start` prints.", err=True)
            raise typer.Exit(2)
        wire = wire_format(fmt, dest, {"preference": "preference", "click": "click_session", "item": "item"}[kind],
                           registry_of(s), s.max_message_bytes)
    if rate is not None and not (math.isfinite(rate) and rate > 0):
        typer.echo(f"error: --rate must be a positive number of events per second (omit it for as fast as "
                   f"possible); got {rate:g}.", err=True)
        raise typer.Exit(2)
    _require_broker(s)
    _require_topics(s, [dest])
    opts = {**s.kafka_client_options(), **s.producer_options()}
    opts.pop("bootstrap_servers", None)
    try:
        if wire is not None:
            wire.writer_id()  # registered before the first record (an incompatible schema: one line, nothing sent)
        res = replay(file, s.bootstrap_servers, dest, rate=rate, kind=kind, progress=progress, client_options=opts,
                     wire=wire, key=key)
    except PrefstreamError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    except ReplayInterrupted as stop:
        r = stop.result
        typer.echo(f"interrupted: sent={r.sent} skipped={r.skipped} failed={r.failed}", err=True)
        raise typer.Exit(130) from None
    typer.echo(f"sent={res.sent} skipped={res.skipped} failed={res.failed}")
    if not progress:  # with the bar, replay printed them as it went
        for line, why in res.skipped_lines[:20]:
            typer.echo(f"skipped line {line}: {why}", err=True)
        if res.skipped > 20:
            typer.echo(f"… and {res.skipped - 20} more skipped lines", err=True)
    for line in res.failure_summary():
        typer.echo(line, err=True)
    if res.failed:
        raise typer.Exit(1)
    if res.sent == 0:  # nothing to replay is a mistake to report, not a success
        typer.echo(f"error: no records in {file}." if res.skipped == 0 else
                   f"error: nothing sent: all {res.skipped} records of {file} were skipped (reasons above).", err=True)
        raise typer.Exit(1)


# ------------------------------------------------------------------------------ forget
@app.command("forget")
def forget_cmd(
    user_id: str = typer.Argument(..., help="The person to forget (the user_id of their events)."),
    config: Optional[str] = ConfigOpt,
    bootstrap: Optional[str] = BootstrapOpt,
    set_: Optional[List[str]] = SetOpt,
):
    """Forget a person: the learners drop their state and tombstone them on the people changelog (docs/personal.md)."""
    from stream.forget import send_forget

    s = _settings(config, {"bootstrap_servers": bootstrap, **_parse_sets(set_)})
    _require_broker(s)
    try:
        request_id, parts = send_forget(s, user_id)
    except PrefstreamError as exc:
        typer.echo(f"error: {_one_line(exc)}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"forget requested: user_id={user_id} request_id={request_id} partitions={parts} "
               f"topic={s.topic_preferences}")


# ------------------------------------------------------------------------------ tail
@app.command("tail")
def tail_cmd(
    config: Optional[str] = ConfigOpt,
    bootstrap: Optional[str] = BootstrapOpt,
    as_json: bool = typer.Option(False, "--json", help="One JSON record per line."),
    max_records: Optional[int] = typer.Option(None, "--max", help="Stop after N records."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Stop after N idle seconds."),
    from_beginning: bool = typer.Option(False, "--from-beginning", help="Start at the earliest record."),
    top: int = typer.Option(5, "--top", help="Features shown per record (pretty mode)."),
    set_: Optional[List[str]] = SetOpt,
):
    """Follow explanation records."""
    from stream.outputs.tail import follow, format_record

    s = _settings(config, {"bootstrap_servers": bootstrap, **_parse_sets(set_)})
    _require_broker(s)
    _require_topics(s, [s.topic_explanations])
    try:
        for rec in follow(s, max_records=max_records, timeout=timeout, from_beginning=from_beginning):
            typer.echo(json.dumps(rec) if as_json else format_record(rec, top=top))
    except KeyboardInterrupt:
        pass
    except TimeoutError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


# ------------------------------------------------------------------------------ batch
@app.command("run")
def run_cmd(
    input: str = typer.Option(..., "--input", "-i", help="Records to learn from: .jsonl or .csv (replay layout)."),
    output: str = typer.Option(..., "--output", "-o", help="Explanation records out (JSON Lines)."),
    kind: str = typer.Option("preference", "--kind", help="preference or click."),
    items: Optional[str] = typer.Option(None, "--items", help="Item-catalog records loaded first."),
    report_dir: Optional[str] = typer.Option(None, "--report-dir", help="Also write the HTML report there."),
    config: Optional[str] = ConfigOpt,
    models: Optional[str] = typer.Option(None, "--models", "-m", help="Comma-separated model names."),
    sample_rate: Optional[float] = typer.Option(None, "--sample-rate", help="Fraction of events explained."),
    set_: Optional[List[str]] = SetOpt,
    param: Optional[List[str]] = ParamOpt,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    inline_refits: bool = typer.Option(False, "--inline-refits",
                                       help="Run each refit where it is triggered (reproducible, slower)."),
):
    """Learn and explain a file without Kafka (same learners, explainers, micro-batches and records as the workers).

    Exit status: 0 when every model learned, 3 when a model learned no record (every record refused,
    or an empty file; the summary is still printed), 2 for a usage error, 1 for any other error.
    """
    from pathlib import Path

    from stream.batch import EXIT_NOTHING_LEARNED, nothing_learned, output_clash, refusal_summary, run_batch
    from stream.event_files import sniff_kind

    if kind not in ("preference", "click"):
        typer.echo(f"error: --kind must be preference or click; got {kind!r}.", err=True)
        raise typer.Exit(2)
    clash = output_clash(input, output, report_dir, items)
    if clash is not None:  # before anything opens a file for writing (the input would be truncated)
        typer.echo(clash, err=True)
        raise typer.Exit(2)

    if kind == "preference" and sniff_kind(input) == "click":
        typer.echo(f"error: {Path(input).name} holds click sessions (session_id, shown, clicked), not preference "
                   "events; pass --kind click.", err=True)
        raise typer.Exit(2)

    o = _parse_sets(set_)
    if models:
        o["models"] = [m.strip() for m in models.split(",") if m.strip()]
    if sample_rate is not None:
        o["explain_sample_rate"] = sample_rate
    s = _settings(config, _with_params(config, o, param))
    try:
        res = run_batch(input, output, settings=s, kind=kind, items_path=items, progress=not quiet, report_dir=report_dir,
                        inline_refits=inline_refits)
    except PrefstreamError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    summ = {k: v for k, v in res.summary().items() if k not in ("progress",)}
    typer.echo(json.dumps(summ, indent=1, default=str))
    idle = nothing_learned(res)
    if idle:  # a run that learned nothing is no success (issue 31): the summary above, then the status
        why = refusal_summary(res) if not res.dead_letters else f"dead letters in {res.dead_letters_file}"
        typer.echo(f"error: {', '.join(map(repr, idle))} learned no record (exit status {EXIT_NOTHING_LEARNED}): {why}.",
                   err=True)
        raise typer.Exit(EXIT_NOTHING_LEARNED)


# ------------------------------------------------------------------------------ evaluate
@app.command("evaluate")
def evaluate_cmd(
    file: str = typer.Argument(..., help="Preference events with user_id: .csv (replay layout) or .jsonl."),
    models: str = typer.Option("capacity,capacity-personal", "--models", "-m", help="Comma-separated model names."),
    k: int = typer.Option(10, "--k", help="Cut-off of NDCG@k and HR@k."),
    config: Optional[str] = ConfigOpt,
    set_: Optional[List[str]] = SetOpt,
    param: Optional[List[str]] = ParamOpt,
):
    """Hold out each person's last visit or choice, learn the rest, print NDCG@k, HR@k and AUC per model and popularity."""
    from stream.evaluation import evaluate_file, format_table

    if k < 1:
        typer.echo(f"error: --k must be a positive integer; got {k}.", err=True)
        raise typer.Exit(2)
    s = _settings(config, _with_params(config, _parse_sets(set_), param))
    names = [m.strip() for m in models.split(",") if m.strip()]
    try:
        res, info = evaluate_file(file, s, names, k=k)
    except PrefstreamError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"pairs={info['pairs']} held_out={info['held_out']} people={info['people']} (each person's last "
               "visit or choice held out)")
    typer.echo(format_table(res, k))


# ------------------------------------------------------------------------------ demo
@app.command("demo")
def demo_cmd(
    dataset: Optional[str] = typer.Option(None, "--dataset", help="Data set name (default: the bundled one)."),
    rate: Optional[float] = typer.Option(None, "--rate", help="Events per second (default: as fast as possible)."),
    max_events: Optional[int] = typer.Option(None, "--max-events", help="Replay only the first N events."),
    sample_rate: Optional[float] = typer.Option(None, "--sample-rate", help="Fraction of events explained."),
    report_dir: Optional[str] = typer.Option(None, "--report-dir", help="Where the report goes."),
    models: Optional[str] = typer.Option(None, "--models", "-m", help="Comma-separated model names."),
    bootstrap: Optional[str] = BootstrapOpt,
    keep_broker: bool = typer.Option(False, "--keep-broker", help="Leave a broker the demo started running."),
    keep: bool = typer.Option(False, "--keep", help="Keep the run's topics (and a broker the demo started) and print "
                                                    "the `prefstream serve` command that serves its models."),
    data_dir: Optional[str] = typer.Option(None, "--data-dir", help="Directory holding the data set (default $PREFSTREAM_DATA_DIR or ../shared/data)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Progress bar while replaying."),
):
    """Run the end-to-end demo (broker, replay of a real data set, learner + explainer workers, summary, HTML report)."""
    import importlib

    from stream import registry

    try:  # unknown model names end here, before any broker, replay or worker starts
        for m in ([m.strip() for m in models.split(",") if m.strip()] if models else []):
            registry.get_model(m)
    except PrefstreamError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    try:
        demo = importlib.import_module("stream.demo")
    except ImportError:
        typer.echo("prefstream demo is not available yet in this build (stream.demo is missing).", err=True)
        raise typer.Exit(2) from None
    kwargs = {"dataset": dataset, "rate": rate, "max_events": max_events, "explain_sample_rate": sample_rate,
              "report_dir": report_dir, "bootstrap": bootstrap,
              "models": [m.strip() for m in models.split(",") if m.strip()] if models else None}
    kwargs["data_dir"] = data_dir
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    if keep_broker or keep:
        kwargs["keep_broker"] = True
    if keep:
        kwargs["keep_topics"] = True
    if not progress:
        kwargs["progress"] = False
    try:
        summary = demo.run_demo(**kwargs)
    except PrefstreamError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        typer.echo("interrupted; the demo stopped everything it had started.", err=True)
        raise typer.Exit(130) from None
    if isinstance(summary, dict) and not summary.get("ok", True):
        raise typer.Exit(1)


# ------------------------------------------------------------------------------ report
@app.command("report")
def report_cmd(
    run_dir: str = typer.Option(..., "--run-dir", help="A run folder holding summary.json and records.jsonl."),
    out_dir: Optional[str] = typer.Option(None, "--out-dir", help="Where index.html goes (default: the run folder)."),
):
    """Rebuild the HTML report of a run (demo or `prefstream run`) from its summary.json and records.jsonl."""
    from stream.report import rebuild_report

    try:
        path = rebuild_report(run_dir, out_dir)
    except PrefstreamError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(str(path))


# ------------------------------------------------------------------------------ dead letters
from stream.cli_dead_letters import dead_letters_cmd  # noqa: E402

app.command("dead-letters")(dead_letters_cmd)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``prefstream`` console script (and of ``python -m stream``).

    Registers the built-in models and explainers (:func:`stream.models.register_all`) before
    running the command, so every worker, the demo's included, sees the same registry. Expected
    user errors (every :class:`~learners.exceptions.PrefstreamError` a command did not handle
    itself, a missing file, an interrupted run) end as one ``error: …`` line on stderr and a
    non-zero exit status, never as a traceback.

    Examples
    --------
    >>> main(["report", "--run-dir", "/no/such/run"])  # the error goes to stderr as one line
    1
    """
    from stream.models import register_all

    try:
        register_all()
    except PrefstreamError as exc:
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return 2
    try:
        app(args=argv, prog_name="prefstream", standalone_mode=True)
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except (PrefstreamError, FileNotFoundError, PermissionError, ConnectionError) as exc:
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
