"""The end-to-end demo: a real data set streamed through the broker, learned and explained live.

:func:`run_demo` (``prefstream demo``, ``make demo``) does what a user of prefstream does, in
one process that owns everything it starts; each step is a function below and a module of
this package:

1. :func:`_connect` finds a Kafka broker (``--bootstrap`` / ``$PREFSTREAM_BOOTSTRAP``, else the
   local one) and starts the local single-node broker if none answers
   (:func:`stream.broker.start_broker`; stopped again at the end unless ``keep_broker``);
2. :func:`_create_topics` creates run-unique topics (``prefstream.<kind>.<run id>``, partitions
   as in :data:`stream.broker.TOPICS`) so that earlier runs never interfere; they are deleted at
   the end (:mod:`stream.demo.topics`);
3. :func:`_write_config` writes a TOML settings file (:mod:`stream.demo.config`: models
   ``capacity`` — ADMM-RDA with monotonicity constraints, Herin, Perny & Sokolovska 2024,
   Algorithm 2 — and ``gpm``, plus ``cgpm`` when the data set has a context) and the product's
   own workers start as subprocesses, ``python -m stream worker learn|explain --config …``
   (:mod:`stream.demo.workers`), with the merge rules registered next to each learner;
4. :func:`_replay` sends the item catalog (if any), then the events (:mod:`stream.demo.events`)
   with a tqdm progress bar at ``rate`` events/s (default: as fast as possible). For ``train``
   every 10th choice goes to the click topic as a click session (shown = both trips, clicked =
   the chosen one) so that the categorical distributional values run on the same real choices;
5. a :class:`~stream.demo.scrape.MetricsScraper` polls both workers' Prometheus endpoints about
   once a second; :func:`_wait_learned` and :func:`_wait_explained` wait (bounded) until every
   sent example has been learned and explanations stop arriving;
6. ``prefstream serve``, started beside the workers, is asked for a live ranking of a handful of
   the data set's items and one explanation (:mod:`stream.demo.serve`);
7. the explanation and dead-letter topics are read, the workers stopped (SIGTERM, then
   SIGKILL), the summary printed (:mod:`stream.demo.summary`) and the HTML report written
   (:func:`stream.report.write_report`) with ``records.jsonl`` and ``summary.json``.

``prefstream report --run-dir DIR`` redraws a run's report (:func:`stream.report.rebuild_report`).
``bench/mainjob.py`` reuses :func:`run_demo`.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from learners.exceptions import InvalidParameterError
from stream import clickeval
from stream.demo.config import default_model_params, default_sample_rate, write_settings_toml
from stream.demo.errors import DemoError
from stream.demo.events import demo_stream, session_pairs
from stream.demo.scrape import MetricsScraper
from stream.demo.serve import demo_candidates, demo_person, query_server, serve_command
from stream.demo.summary import format_summary, read_curve, summarise
from stream.demo.topics import delete_topics, read_topic
from stream.demo.waits import wait_explained, wait_learned, wait_warm
from stream.demo.workers import Workers, cpu_seconds, free_port

__all__ = ["run_demo"]

log = logging.getLogger(__name__)

#: The kinds of the standard topics (``prefstream.<kind>``).
_KINDS = ("preferences", "clicks", "items", "models", "explain-requests", "explanations", "dead-letters", "drift",
          "people")
_SETTING_OF_KIND = {"preferences": "topic_preferences", "clicks": "topic_clicks", "items": "topic_items",
                    "models": "topic_models", "explain-requests": "topic_explain_requests",
                    "explanations": "topic_explanations", "dead-letters": "topic_dead_letters",
                    "drift": "topic_drift", "people": "topic_people"}


@dataclass
class _Plan:
    """What the run replays and learns, decided before anything starts."""

    ds: Any
    models: list
    params: dict
    records: list  # (kind, record) pairs
    n_pref: int
    n_click: int
    examples: int
    sample_rate: float
    has_context: bool


@dataclass
class _Run:
    """What the run started and must clean up."""

    run_id: str
    tmp: tempfile.TemporaryDirectory
    workers: Workers
    say: Any
    opts: dict = field(default_factory=dict)
    topics: dict = field(default_factory=dict)
    started_broker: bool = False
    scraper: MetricsScraper | None = None
    models: list = field(default_factory=list)


def _run_demo(dataset: str = "train", data_dir: str | os.PathLike | None = None, rate: float | None = None,
              max_events: int | None = None, explain_sample_rate: float | None = None,
              report_dir: str | os.PathLike | None = "reports/demo", keep_broker: bool = False,
              bootstrap: str | None = None, models: list[str] | None = None, gpm_params: dict | None = None,
              model_params: dict | None = None, click_every: int | None = 10, snapshot_every_events: int = 300,
              progress: bool = True, verbose: bool = True, learn_timeout_s: float = 180.0,
              quiet_period_s: float = 6.0, explain_timeout_s: float = 90.0, keep_topics: bool = False,
              input_partitions: int = 1, warmup: int | None = None, warmup_timeout_s: float = 90.0,
              dataset_obj=None) -> dict[str, Any]:
    """Replay a real data set through the broker and live learner/explainer workers.

    Parameters
    ----------
    dataset : str, default "train"
        A name of :func:`stream.adapters.dataset_names` (``train`` is bundled in the repo).
    data_dir : path, optional
        Directory holding the data set (default ``$PREFSTREAM_DATA_DIR`` or ``../shared/data``).
    rate : float, optional
        Events per second (default: as fast as possible).
    max_events : int, optional
        Replay only the first ``max_events`` events (sessions for click logs).
    explain_sample_rate : float in [0, 1], optional
        Fraction of preference events explained; default aims at ~60 explained events (each
        explained by every method of every model: a few hundred records).
    report_dir : path or None, default "reports/demo"
        Where ``index.html``, the PNGs, ``summary.json``, ``records.jsonl`` and the worker logs
        go; None writes no report.
    keep_broker : bool, default False
        Leave running a local broker that the demo had to start.
    bootstrap : str, optional
        An existing cluster (default ``$PREFSTREAM_BOOTSTRAP``, else the local broker).
    models : list of str, optional
        Default ``["capacity", "gpm"]`` plus ``"cgpm"`` when the data set has a context.
    gpm_params, model_params : dict, optional
        Overrides of :func:`default_model_params` (``model_params`` replaces whole entries).
    click_every : int or None, default 10
        For inline pairwise data (Train): every n-th choice is sent as a click session.
    snapshot_every_events : int, default 300
    progress, verbose : bool
        tqdm bar while replaying; print the summary at the end.
    learn_timeout_s, quiet_period_s, explain_timeout_s : float
        Bounds of the waits after the replay: until every example is learned, until no new
        explanation arrived for ``quiet_period_s``, at most ``explain_timeout_s`` for that.
    keep_topics : bool, default False
        Keep the run's topics on the broker (default: deleted at the end); the exact ``prefstream serve``
        command for them is printed at the end and saved as ``summary["serve_command"]``
        (:func:`stream.demo.serve.serve_command`; ``prefstream demo --keep``).
    input_partitions : int, default 1
        Partitions of the preference and click topics. The learner keeps one model per input
        partition (its processing guarantee is per partition, ``docs/workers.md``) and the
        explainer merges them; one partition lets a single GPM see every event of the demo.
    warmup : int, optional
        Events replayed first; the replay then pauses (at most ``warmup_timeout_s``) until every
        model has published a snapshot, the refitted models have finished their first refit and
        the explainer has loaded them, so that sampled events find a model to explain. Default:
        ``max(2 * min_train, 10 %)`` of the events (0 disables).
    dataset_obj : PairwiseDataset or ClickLog, optional
        An already loaded data set (then ``dataset`` is only its display name).

    Returns
    -------
    dict
        The summary (also printed and saved as ``summary.json``): ``dataset``, ``events_sent``,
        ``examples_sent``, ``learned`` per model, ``dead_letters``, ``progress`` (list of
        ``{"events", "model", "accuracy", "roc_auc"}``), ``final`` metrics per model,
        ``model_versions``, ``refits``, ``explanations`` per method (count, median latency in
        ms, top features), ``wall_s``, ``events_per_s``, ``ok``.

    Raises
    ------
    InvalidParameterError
        Unknown data set or bad argument.
    BrokerError
        No broker answers and the local one cannot be started.
    DemoError
        A worker died or learning stalled past ``learn_timeout_s``.
    """
    _check_arguments(rate, max_events, explain_sample_rate)
    t_start = time.monotonic()
    plan = _plan(dataset, data_dir, dataset_obj, models, gpm_params, model_params, max_events, click_every,
                 explain_sample_rate)
    out = Path(report_dir) if report_dir is not None else None
    tmp = tempfile.TemporaryDirectory(prefix="prefstream-demo-")
    log_dir = (out / "logs") if out is not None else Path(tmp.name)
    log_dir.mkdir(parents=True, exist_ok=True)
    run = _Run(run_id=f"{plan.ds.name}-{time.strftime('%Y%m%d%H%M%S')}-{os.getpid()}", tmp=tmp,
               workers=Workers(log_dir), say=(lambda msg: print(msg, flush=True)) if verbose else (lambda msg: None))
    run.models = list(plan.models)
    try:
        boot = _connect(run, bootstrap)
        _create_topics(run, boot, input_partitions)
        lport, eport = free_port(), free_port()
        cfg = _write_config(run, boot, plan, snapshot_every_events)
        run.say(f"prefstream demo: {plan.ds.name} — {len(plan.records)} events ({plan.n_pref} preferences, "
                f"{plan.n_click} click sessions, {plan.examples} examples), models {', '.join(plan.models)}, "
                f"explain sample rate {plan.sample_rate:.3g}, broker {boot}"
                f"{' (started by the demo)' if run.started_broker else ''}")
        run.workers.start("learn", cfg, lport)
        run.workers.start("explain", cfg, eport)
        sport = free_port()
        run.workers.start_server(cfg, sport)
        run.scraper = MetricsScraper(lport, eport).start()
        learner_pid = run.workers.procs["learn"].pid
        warm = {}  # the learner's CPU seconds and examples learned when the warm-up ends (its start-up done)
        n_items, t_replay, replay_s, warm_wait = _replay(
            run, plan, rate, progress, warmup, warmup_timeout_s,
            on_warm=lambda learned: warm.update(cpu=cpu_seconds(learner_pid), learned=learned))
        # learning ends when every example is seen learned (polled every 0.2 s), not after the
        # gauge period wait_learned waits then (that added ~2 s to the main job's learning time)
        t_learned = wait_learned(run.workers, run.scraper, plan.models, plan.examples, learn_timeout_s, log_dir,
                                 poll_s=0.2)
        # the learner process alone (not its refit process), from the end of the warm-up
        learner_cpu_s = cpu_seconds(learner_pid) - warm.get("cpu", float("nan"))
        wait_explained(run.workers, run.scraper, quiet_period_s, explain_timeout_s)
        run.scraper.poll()
        served = query_server(sport, plan.models, demo_candidates(plan.records, list(plan.ds.item_records())),
                              check_alive=run.workers.check_alive, person=demo_person(plan.records))
        codes = run.workers.stop()
        run.scraper.stop()
        records = [json.loads(v) for _, v in read_topic(run.topics["explanations"], run.opts) if v is not None]
        dead = [json.loads(v) for _, v in read_topic(run.topics["dead-letters"], run.opts) if v is not None]
        summary = summarise(plan.ds.name, plan.models, plan.records, plan.n_pref, plan.n_click, plan.examples, n_items,
                            run.scraper, records, dead, replay_s - warm_wait, t_learned - t_replay - warm_wait,
                            time.monotonic() - t_start, plan.sample_rate, codes, plan.params, warm_wait,
                            curve=read_curve(run.workers.log_dir / "learning_curve.jsonl"))
        click_log = clickeval.demo_click_summary(plan.ds, read_topic(run.topics["models"], run.opts), plan.models)
        if click_log is not None:
            summary["click_log"] = click_log
        summary["serve"] = served
        if keep_topics:
            summary["serve_command"] = serve_command(boot, run.topics, plan.models)
            summary["kept_topics"] = dict(run.topics)
        summary["learner_cpu_s"] = round(learner_cpu_s, 2)
        summary["learner_cpu_examples"] = plan.examples - warm.get("learned", 0)
        if out is not None:
            _write_outputs(out, summary, records)
        if verbose:
            print(format_summary(summary), flush=True)
        return summary
    finally:
        _clean_up(run, keep_topics, keep_broker)


def run_demo(*args, **kwargs) -> dict[str, Any]:
    """Run the demo (see :func:`_run_demo` for the parameters); SIGTERM stops it like Ctrl-C.

    SIGTERM (``timeout``, a CI cancel, systemd) is turned into ``KeyboardInterrupt`` while the demo
    runs, so the same cleanup stops the workers, deletes the run's topics and stops a broker the
    demo started.
    """
    import threading

    if threading.current_thread() is not threading.main_thread():
        return _run_demo(*args, **kwargs)

    def _interrupt(signum, frame):  # noqa: ARG001
        raise KeyboardInterrupt("SIGTERM")

    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _run_demo(*args, **kwargs)
    finally:
        signal.signal(signal.SIGTERM, previous)


run_demo.__doc__ = (run_demo.__doc__ or "") + "\n" + (_run_demo.__doc__ or "")


# ============================================================================ steps
def _check_arguments(rate, max_events, explain_sample_rate) -> None:
    if rate is not None and not (rate > 0):
        raise InvalidParameterError(f"The 'rate' parameter of run_demo must be > 0 events/s or None. Got {rate!r} instead.")
    if max_events is not None and max_events < 1:
        raise InvalidParameterError(f"The 'max_events' parameter of run_demo must be >= 1 or None. Got {max_events!r} instead.")
    if explain_sample_rate is not None and not (0.0 <= explain_sample_rate <= 1.0):
        raise InvalidParameterError(
            f"The 'explain_sample_rate' parameter of run_demo must be in [0, 1]. Got {explain_sample_rate!r} instead.")


def _plan(dataset, data_dir, dataset_obj, models, gpm_params, model_params, max_events, click_every,
          explain_sample_rate) -> _Plan:
    """Load the data set and decide the models, their parameters and the replayed records."""
    from stream.adapters import ClickLog, load_dataset

    ds = dataset_obj if dataset_obj is not None else load_dataset(dataset, data_dir)
    is_clicks = isinstance(ds, ClickLog)
    has_context = bool(getattr(ds, "context_names", None)) and (is_clicks or getattr(ds, "context", None) is not None)
    records = list(demo_stream(ds, max_events, click_every))
    if models is None:
        models = ["capacity", "gpm"] + (["cgpm"] if has_context else [])
        if any(r.get("user_id") for k, r in records if k == "preference"):
            models.append("capacity-personal")   # events name their people: a capacity per person too
    params = default_model_params(ds, models, gpm_params)
    params.update(model_params or {})
    n_pref = sum(1 for k, _ in records if k == "preference")
    n_click = len(records) - n_pref
    examples = n_pref + sum(session_pairs(r) for k, r in records if k == "click")
    if explain_sample_rate is None:
        late = [r["session_id"] for k, r in records[len(records) // 5:] if k == "click"]  # after the warm-up
        explain_sample_rate = default_sample_rate(n_pref if n_pref else n_click, late_sessions=late)
    return _Plan(ds, list(models), params, records, n_pref, n_click, examples, explain_sample_rate, has_context)


def _connect(run: _Run, bootstrap: str | None) -> str:
    """The bootstrap address of a broker that answers; starts the local one if needed."""
    from stream import broker as bk

    opts = bk.kafka_client_options()
    if bootstrap:
        opts["bootstrap_servers"] = bootstrap
    run.opts = dict(opts)
    servers = run.opts["bootstrap_servers"]
    boot = servers if isinstance(servers, str) else ",".join(servers)
    try:
        bk.wait_for_broker(boot, timeout=5, client_options=run.opts)
    except bk.BrokerError:
        if boot != bk.local_bootstrap():
            raise
        run.say(f"no broker at {boot}; starting the local one (first start resolves the jars: minutes)…")
        boot = bk.start_broker(timeout=120)
        run.opts["bootstrap_servers"] = boot
        run.started_broker = True
    return boot


def _create_topics(run: _Run, boot: str, input_partitions: int) -> None:
    from stream import broker as bk

    run.topics = {kind: f"prefstream.{kind}.{run.run_id}" for kind in _KINDS}
    specs = {run.topics[k]: bk.TOPICS[f"prefstream.{k}"] for k in _KINDS}
    for k in ("preferences", "clicks"):
        specs[run.topics[k]] = bk.TopicSpec(int(input_partitions), specs[run.topics[k]].config)
    bk.create_topics(boot, specs, client_options={k: v for k, v in run.opts.items() if k != "client_id"})


def _fresh(path: Path) -> Path:
    """``path`` with no file there (the learner appends to it: a report folder reused by a second
    demo must not carry the first run's learning curve)."""
    path.unlink(missing_ok=True)
    return path


def _write_config(run: _Run, boot: str, plan: _Plan, snapshot_every_events: int) -> Path:
    """The workers' settings file; a SASL password goes to the environment, never to disk."""
    opts, tmp = run.opts, Path(run.tmp.name)
    values: dict[str, Any] = {
        "bootstrap_servers": boot,
        **{_SETTING_OF_KIND[k]: run.topics[k] for k in _KINDS},
        "consumer_group": f"prefstream-demo-{run.run_id}",
        "models": list(plan.models),
        "feature_names": list(plan.ds.feature_names),
        "context_names": list(plan.ds.context_names) if plan.has_context else None,
        "model_params": plan.params,
        "snapshot_every_events": int(snapshot_every_events),
        "snapshot_every_seconds": 5.0,
        "explain_sample_rate": float(plan.sample_rate),
        "state_dir": str(tmp / "state"),
        # the learner's own learning curve (its progressive metrics at event counts; the summary's "progress")
        "progress_log": str(_fresh(run.workers.log_dir / "learning_curve.jsonl")),
        "log_level": "WARNING",
    }
    values.update(clickeval.demo_settings(plan.ds))  # click_* settings for click logs (stream/clickeval.py)
    for key in ("security_protocol", "sasl_mechanism", "ssl_cafile"):
        if opts.get(key):
            values[key] = opts[key]
    if opts.get("sasl_plain_username"):
        values["sasl_username"] = opts["sasl_plain_username"]
    cfg = write_settings_toml(tmp / "demo.toml", values)
    if opts.get("sasl_plain_password"):
        os.environ["PREFSTREAM_SASL_PASSWORD"] = opts["sasl_plain_password"]  # inherited by the workers
    return cfg


def _replay(run: _Run, plan: _Plan, rate, progress: bool, warmup: int | None,
            warmup_timeout_s: float, on_warm=None) -> tuple[int, float, float, float]:
    """Send the catalog and the records, pausing once after the warm-up.

    Returns (items sent, monotonic start of the replay, replay seconds, seconds waited in the warm-up).
    """
    import orjson

    from stream.broker.producer import Sender
    from stream.replay import TokenBucket

    scraper, workers, topics, records = run.scraper, run.workers, run.topics, plan.records
    failed: list[str] = []
    # the replay's producer (confluent-kafka, acks=all, idempotence; stream.broker.producer)
    producer = Sender({k: v for k, v in run.opts.items() if k != "api_version"},
                      lambda reason, msg: failed.append(f"{reason}: {msg}"))
    try:
        n_items = 0
        for rec in plan.ds.item_records():
            producer.send(topics["items"], str(rec["item_id"]).encode(), orjson.dumps(rec))
            n_items += 1
        producer.flush()
        bucket = TokenBucket(rate) if rate else None
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=len(records), unit="ev", desc="replay", file=sys.stderr, mininterval=0.5)
        refit_models = [m for m in plan.models if m in ("gpm", "cgpm")]
        min_train = lambda m: int(plan.params.get(m, {}).get("min_train", 50))  # noqa: E731
        if warmup is None:
            most = max([min_train(m) for m in refit_models] or [0])
            warmup = max(2 * most, len(records) // 10) if refit_models else len(records) // 20
        warmup = min(int(warmup), len(records))
        warm_wait = 0.0
        t_replay = time.monotonic()
        for k, (kind, rec) in enumerate(records):
            if k == warmup and k > 0:
                producer.flush()
                if bar is not None:
                    bar.set_description("replay (warm-up: waiting for the first models)")
                tw = time.monotonic()
                warm_examples = sum(1 if kd == "preference" else session_pairs(r) for kd, r in records[:warmup])
                ready = [m for m in refit_models if warm_examples >= min_train(m)]
                wait_warm(scraper, workers, plan.models, ready, warmup_timeout_s)
                warm_wait = time.monotonic() - tw
                if on_warm is not None:
                    on_warm(warm_examples)
                if bar is not None:
                    bar.set_description("replay")
            if bucket is not None:
                bucket.acquire()
            key = (rec.get("event_id") or rec.get("session_id")).encode()
            topic = topics["preferences"] if kind == "preference" else topics["clicks"]
            producer.send(topic, key, orjson.dumps(rec))
            if bar is not None:
                bar.update(1)
                if k % 500 == 0 and scraper.latest.get("learner"):
                    learned = scraper.learner("prefstream_events_learned_total")
                    bar.set_postfix({m: int(v) for m, v in learned.items()}, refresh=False)
            if k % 1000 == 999:
                workers.check_alive()
                producer.poll(0)
        producer.flush()
        replay_s = time.monotonic() - t_replay
        if bar is not None:
            bar.close()
    finally:
        producer.flush(10)
    if failed:
        raise DemoError(f"{len(failed)} records could not be sent; first error: {failed[0]}")
    return n_items, t_replay, replay_s, warm_wait


def _write_outputs(out: Path, summary: dict, records: list) -> None:
    """``records.jsonl``, the HTML report and ``summary.json`` (with the report's path) into ``out``."""
    from stream.report import write_report

    out.mkdir(parents=True, exist_ok=True)
    with (out / "records.jsonl").open("w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r) + "\n")
    summary["report"] = str(write_report(out, summary, records))
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str), encoding="utf-8")


def _clean_up(run: _Run, keep_topics: bool, keep_broker: bool) -> None:
    """Stop the workers, delete the run's topics, stop a broker the demo started (each best effort)."""
    try:
        run.workers.stop(timeout=20)
    except Exception:  # noqa: BLE001
        log.exception("stopping the workers failed")
    if run.scraper is not None:
        run.scraper.stop_thread()
    if run.topics and keep_topics:
        boot = run.opts.get("bootstrap_servers", "")
        run.say("kept the run's topics" + (" and the broker the demo started" if run.started_broker and keep_broker else "") + "; serve its models with:\n  "
                + serve_command(boot if isinstance(boot, str) else ",".join(boot), run.topics, run.models))
    if run.topics and not keep_topics and run.opts:
        o = {k: v for k, v in run.opts.items() if k != "client_id"}
        delete_topics(list(run.topics.values()), o)
        group = f"prefstream-demo-{run.run_id}"  # Faust's assignor topics of both workers' groups (best effort)
        for name in (f"{group}-__assignor-__leader", f"{group}-explainer-__assignor-__leader"):
            delete_topics([name], o, quiet=True)
    if run.started_broker and not keep_broker:
        from stream import broker as bk

        try:
            run.say("stopping the local broker the demo started (use --keep-broker to keep it)…")
            bk.stop_broker()
        except Exception:  # noqa: BLE001
            log.exception("stopping the broker failed")
    run.tmp.cleanup()
