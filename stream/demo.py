"""The end-to-end demo: a real data set streamed through the broker, learned and explained live.

:func:`run_demo` (``prefstream demo``, ``make demo``) does what a user of prefstream does, in
one process that owns everything it starts:

1. finds a Kafka broker (``--bootstrap`` / ``$PREFSTREAM_BOOTSTRAP``, else the local one) and
   starts the local single-node broker if none answers (:func:`stream.broker.start_broker`;
   stopped again at the end unless ``keep_broker``);
2. creates run-unique topics (``prefstream.<kind>.<run id>``, partitions as in
   :data:`stream.broker.TOPICS`) so that earlier runs never interfere, and deletes them at the end;
3. writes a TOML settings file (models ``capacity`` — ADMM-RDA with monotonicity constraints,
   paper 002 Algorithm 2 — and ``gpm``, plus ``cgpm`` when the data set has a context; feature
   and context names from the data set) and starts a learner worker and an explainer worker as
   subprocesses (``python -m stream.demo worker learn|explain --config …``);
4. sends the item catalog (if any), then replays the events with a tqdm progress bar at
   ``rate`` events/s (default: as fast as possible). For ``train`` every 10th choice goes to the
   click topic as a click session (shown = both trips, clicked = the chosen one) so that the
   categorical distributional values are exercised on the same real choices;
5. scrapes both workers' Prometheus endpoints about once a second (progress of learning,
   progressive accuracy and ROC AUC per model, refits, model versions, dead letters,
   explanations per method), waits (bounded) until every sent example has been learned and
   explanations stop arriving, reads the explanation and dead-letter topics, stops the
   workers (SIGTERM, then SIGKILL), prints a summary and writes the HTML report
   (:func:`stream.report.write_report`) plus ``records.jsonl`` and ``summary.json``.

:func:`rebuild_report` (``prefstream report --run-dir DIR``) redraws a run's report from its
``summary.json`` and ``records.jsonl``. ``bench/mainjob.py`` reuses :func:`run_demo`.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from learners.exceptions import InvalidInputError, InvalidParameterError, PrefstreamError

__all__ = ["DemoError", "MetricsScraper", "default_model_params", "rebuild_report", "run_demo"]

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[1]

#: BLAS/torch threads of each worker process (``$PREFSTREAM_DEMO_WORKER_THREADS``, default 1).
_WORKER_THREADS = max(1, int(os.environ.get("PREFSTREAM_DEMO_WORKER_THREADS", "1") or 1))

#: Explanations the default sample rate aims at.
TARGET_EXPLAINED_EVENTS = 60

#: The kinds of the standard topics (``prefstream.<kind>``).
_KINDS = ("preferences", "clicks", "items", "models", "explain-requests", "explanations", "dead-letters")
_SETTING_OF_KIND = {"preferences": "topic_preferences", "clicks": "topic_clicks", "items": "topic_items",
                    "models": "topic_models", "explain-requests": "topic_explain_requests",
                    "explanations": "topic_explanations", "dead-letters": "topic_dead_letters"}


class DemoError(PrefstreamError, RuntimeError):
    """A demo step failed (a worker died, the broker vanished, learning stalled)."""


# ============================================================================ configuration
def default_model_params(ds, models: list[str], gpm_params: dict | None = None) -> dict[str, dict]:
    """Constructor parameters of the demo's models for data set ``ds``.

    Parameters
    ----------
    ds : PairwiseDataset or ClickLog
    models : list of str
        Among ``"capacity"``, ``"gpm"``, ``"cgpm"``.
    gpm_params : dict, optional
        Overrides of the GPM/C-GPM parameters.

    Returns
    -------
    dict
        ``{model: {param: value}}`` for :attr:`stream.settings.Settings.model_params`.

    Notes
    -----
    The capacity model (paper 002) needs criteria in [0, 1] that grow with preference: the
    min-max scaler maps each criterion onto [0, 1] from the ranges seen so far and the criteria
    whose ``criteria_directions`` is −1 are flipped (``decreasing``). Up to 6 criteria the full
    capacity (2^n − 1 Möbius masses) is learned, beyond that a 2-additive one (n(n+1)/2
    masses). Up to 10 criteria the monotonicity constraints of ADMM-RDA (Algorithm 2) are
    enforced; their number grows as n·3^(n−1) (Section 4), so wider data sets (Pokémon: 26
    features) use unconstrained RDA (Algorithm 1).
    """
    names = list(ds.feature_names)
    dirs = getattr(ds, "criteria_directions", None) or {}
    out: dict[str, dict] = {}
    if "capacity" in models:
        out["capacity"] = {
            "scaler": "minmax",
            "decreasing": [c for c in names if dirs.get(c, 1) < 0],
            "constraints": ["monotone"] if len(names) <= 10 else [],
            "k_additive": None if len(names) <= 6 else 2,
        }
    base = {"refit_every": 500, "min_train": 200, "window_size": 3000, "window": "sliding", "drift": False}
    base.update(gpm_params or {})
    for m in ("gpm", "cgpm"):
        if m in models:
            out[m] = dict(base)
    # TOML has no null: drop None values (= the constructor default)
    return {m: {k: v for k, v in p.items() if v is not None} for m, p in out.items()}


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise InvalidParameterError(f"Cannot write {v!r} ({type(v).__name__}) to a TOML settings file.")


def write_settings_toml(path: Path, values: dict[str, Any]) -> Path:
    """Write a flat settings mapping (``model_params`` as tables) to a TOML file."""
    lines = []
    tables = {}
    for k, v in values.items():
        if v is None:
            continue
        if k == "model_params":
            tables = v
            continue
        lines.append(f"{k} = {_toml_value(v)}")
    for model, params in tables.items():
        lines.append("")
        lines.append(f"[model_params.{json.dumps(model)}]")
        for k, v in params.items():
            if v is not None:
                lines.append(f"{k} = {_toml_value(v)}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ============================================================================ metrics
def _scrape(port: int, timeout: float = 2.0) -> dict[tuple[str, tuple], float] | None:
    """``{(sample name, sorted labels): value}`` of a worker's /metrics, or None if it does not answer."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout) as r:
            text = r.read().decode("utf-8")
    except OSError:
        return None
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = float(s.value)
    return out


def _by_label(samples: dict, name: str, label: str) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for (n, labels), v in samples.items():
        if n == name:
            out[dict(labels).get(label, "")] += v
    return dict(out)


@dataclass
class MetricsScraper:
    """Polls the learner's and explainer's Prometheus endpoints from a daemon thread.

    Attributes
    ----------
    progress : list of dict
        ``{"t", "events", "model", "accuracy", "roc_auc", "log_loss"}`` whenever a model's
        learned count changed since the previous scrape.
    refits : list of dict
        ``{"model", "t", "events", "duration_s"}`` per refit seen (durations from the histogram's
        sum increments; when several refits end between two scrapes they share the mean).
    latest : dict
        The last successful scrape of each role (``"learner"``, ``"explainer"``).
    """

    learner_port: int
    explainer_port: int
    interval: float = 1.0
    progress: list = field(default_factory=list)
    refits: list = field(default_factory=list)
    latest: dict = field(default_factory=dict)
    t0: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_learned: dict[str, float] = {}
        self._last_refit: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def start(self) -> "MetricsScraper":
        self._thread = threading.Thread(target=self._run, name="prefstream-demo-scraper", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.poll()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.poll()
            except Exception:  # noqa: BLE001 - a scrape hiccup must not kill the demo
                log.debug("scrape failed", exc_info=True)

    def poll(self) -> None:
        """Scrape both workers once and record what changed."""
        t = time.monotonic() - self.t0
        with self._lock:
            for role, port in (("learner", self.learner_port), ("explainer", self.explainer_port)):
                s = _scrape(port)
                if s is not None:
                    self.latest[role] = s
            s = self.latest.get("learner")
            if s is None:
                return
            learned = _by_label(s, "prefstream_events_learned_total", "model")
            acc = _by_label(s, "prefstream_progressive_accuracy", "model")
            auc = _by_label(s, "prefstream_progressive_roc_auc", "model")
            ll = _by_label(s, "prefstream_progressive_log_loss", "model")
            for model, n in sorted(learned.items()):
                if n != self._last_learned.get(model):
                    self._last_learned[model] = n
                    a, u, l_ = acc.get(model), auc.get(model), ll.get(model)
                    if not a and not u:  # river's metrics read 0 before the first validated prediction
                        a = u = l_ = None
                    self.progress.append({"t": round(t, 2), "events": int(n), "model": model,
                                          "accuracy": a, "roc_auc": u, "log_loss": l_})
            cnt = _by_label(s, "prefstream_refit_duration_seconds_count", "model")
            tot = _by_label(s, "prefstream_refit_duration_seconds_sum", "model")
            for model, c in cnt.items():
                pc, ps = self._last_refit.get(model, (0.0, 0.0))
                if c > pc:
                    k = int(c - pc)
                    for _ in range(k):
                        self.refits.append({"model": model, "t": round(t, 2), "events": int(learned.get(model, 0)),
                                            "duration_s": (tot.get(model, 0.0) - ps) / k})
                    self._last_refit[model] = (c, tot.get(model, 0.0))

    # ----------------------------------------------------------------- readers
    def learner(self, name: str, label: str = "model") -> dict[str, float]:
        return _by_label(self.latest.get("learner", {}), name, label)

    def explainer(self, name: str, label: str = "method") -> dict[str, float]:
        return _by_label(self.latest.get("explainer", {}), name, label)


# ============================================================================ workers
class _Workers:
    """The demo's worker subprocesses; :meth:`stop` is safe to call more than once."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.procs: dict[str, subprocess.Popen] = {}
        self._files = []

    def start(self, role: str, config: Path, port: int, extra: list[str] | None = None) -> subprocess.Popen:
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
        fh = open(self.log_dir / f"{role}.log", "w", encoding="utf-8")
        self._files.append(fh)
        cmd = [sys.executable, "-m", "stream.demo", "worker", role, "--config", str(config),
               "--metrics-port", str(port), *(extra or [])]
        p = subprocess.Popen(cmd, cwd=str(REPO_ROOT), env=env, stdout=fh, stderr=subprocess.STDOUT,
                             start_new_session=True)
        self.procs[role] = p
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


# ============================================================================ events
def _train_session(ev: dict) -> dict:
    """A Train choice as a click session: both trips shown, the chosen one clicked."""
    chosen = ev["left"] if ev["outcome"] == 1 else ev["right"]
    return {"schema_version": 1, "session_id": ev["event_id"], "timestamp": ev["timestamp"],
            "shown": [ev["left"], ev["right"]], "clicked": [chosen["id"]]}


def _session_pairs(s: dict) -> int:
    ids = [x["id"] for x in s["shown"]]
    k = len(set(s.get("clicked") or []) & set(ids))
    return k * (len(ids) - k) if 0 < k < len(ids) else 0


def demo_stream(ds, max_events: int | None = None, click_every: int | None = 10) -> Iterator[tuple[str, dict]]:
    """``(kind, record)`` pairs to replay: kind ``"preference"`` or ``"click"``.

    A :class:`PairwiseDataset` gives its preference events, with every ``click_every``-th one
    (when given and the data set has inline items, as Train) sent as a two-item click session
    instead; a :class:`ClickLog` gives its click sessions.
    """
    from stream.adapters import ClickLog

    if isinstance(ds, ClickLog):
        for k, s in enumerate(ds.click_sessions(inline=True)):
            if max_events is not None and k >= max_events:
                return
            yield "click", s
        return
    for k, ev in enumerate(ds.to_events(0, max_events)):
        if click_every and getattr(ds, "inline", False) and k % click_every == click_every - 1 and ev["outcome"] != 0:
            yield "click", _train_session(ev)
        else:
            yield "preference", ev


# ============================================================================ topics
def _read_topic(topic: str, opts: dict, timeout: float = 30.0) -> list[tuple[bytes | None, bytes | None]]:
    """Every record of ``topic`` from the beginning up to its current end offsets."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(enable_auto_commit=False, group_id=None, consumer_timeout_ms=1000, **opts)
    try:
        parts = c.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        if not tps:
            return []
        c.assign(tps)
        c.seek_to_beginning(*tps)
        ends = c.end_offsets(tps)
        out = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(c.position(tp) >= ends[tp] for tp in tps):
                break
            for batch in c.poll(timeout_ms=500).values():
                for m in batch:
                    if m.offset < ends[TopicPartition(m.topic, m.partition)]:
                        out.append((m.key, m.value))
        return out
    finally:
        c.close()


def _delete_topics(names: list[str], opts: dict, quiet: bool = False) -> None:
    from kafka.admin import KafkaAdminClient

    try:
        admin = KafkaAdminClient(client_id="prefstream-demo-cleanup", **opts)
        try:
            admin.delete_topics(names)
        finally:
            admin.close()
    except Exception as exc:  # noqa: BLE001 - best effort; the names are unique anyway
        (log.debug if quiet else log.warning)("could not delete the demo topics %s: %s", names, exc)


# ============================================================================ the demo
def _default_sample_rate(n_pref: int, target: int = TARGET_EXPLAINED_EVENTS) -> float:
    return float(min(1.0, max(0.002, target / max(n_pref, 1))))


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
        Keep the run's topics on the broker (default: deleted at the end).
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
    from stream import broker as bk
    from stream.adapters import ClickLog, load_dataset

    if rate is not None and not (rate > 0):
        raise InvalidParameterError(f"The 'rate' parameter of run_demo must be > 0 events/s or None. Got {rate!r} instead.")
    if max_events is not None and max_events < 1:
        raise InvalidParameterError(f"The 'max_events' parameter of run_demo must be >= 1 or None. Got {max_events!r} instead.")
    if explain_sample_rate is not None and not (0.0 <= explain_sample_rate <= 1.0):
        raise InvalidParameterError(
            f"The 'explain_sample_rate' parameter of run_demo must be in [0, 1]. Got {explain_sample_rate!r} instead.")
    t_start = time.monotonic()
    ds = dataset_obj if dataset_obj is not None else load_dataset(dataset, data_dir)
    is_clicks = isinstance(ds, ClickLog)
    has_context = bool(getattr(ds, "context_names", None)) and (is_clicks or getattr(ds, "context", None) is not None)
    if models is None:
        models = ["capacity", "gpm"] + (["cgpm"] if has_context else [])
    params = default_model_params(ds, models, gpm_params)
    params.update(model_params or {})
    stream_records = list(demo_stream(ds, max_events, click_every))
    n_pref = sum(1 for k, _ in stream_records if k == "preference")
    n_click = len(stream_records) - n_pref
    examples = n_pref + sum(_session_pairs(r) for k, r in stream_records if k == "click")
    if explain_sample_rate is None:
        explain_sample_rate = _default_sample_rate(n_pref if n_pref else n_click)

    run_id = f"{ds.name}-{time.strftime('%Y%m%d%H%M%S')}-{os.getpid()}"
    out = Path(report_dir) if report_dir is not None else None
    tmp = tempfile.TemporaryDirectory(prefix="prefstream-demo-")
    log_dir = (out / "logs") if out is not None else Path(tmp.name)
    log_dir.mkdir(parents=True, exist_ok=True)
    started_broker = False
    workers = _Workers(log_dir)
    scraper: MetricsScraper | None = None
    topics: dict[str, str] = {}
    opts: dict = {}
    summary: dict[str, Any] = {}

    def say(msg: str) -> None:
        if verbose:
            print(msg, flush=True)

    try:
        # ---------------------------------------------------------------- broker
        env_opts = bk.kafka_client_options()
        if bootstrap:
            env_opts["bootstrap_servers"] = bootstrap
        opts = dict(env_opts)
        boot = opts["bootstrap_servers"] if isinstance(opts["bootstrap_servers"], str) else ",".join(opts["bootstrap_servers"])
        try:
            bk.wait_for_broker(boot, timeout=5, client_options=opts)
        except bk.BrokerError:
            if boot != bk.local_bootstrap():
                raise
            say(f"no broker at {boot}; starting the local one (first start resolves the jars: minutes)…")
            boot = bk.start_broker(timeout=120)
            opts["bootstrap_servers"] = boot
            started_broker = True
        # ---------------------------------------------------------------- topics
        topics = {kind: f"prefstream.{kind}.{run_id}" for kind in _KINDS}
        specs = {topics[k]: bk.TOPICS[f"prefstream.{k}"] for k in _KINDS}
        for k in ("preferences", "clicks"):
            specs[topics[k]] = bk.TopicSpec(int(input_partitions), specs[topics[k]].config)
        bk.create_topics(boot, specs, client_options={k: v for k, v in opts.items() if k != "client_id"})
        # ---------------------------------------------------------------- settings
        lport, eport = _free_port(), _free_port()
        values: dict[str, Any] = {
            "bootstrap_servers": boot,
            **{_SETTING_OF_KIND[k]: topics[k] for k in _KINDS},
            "consumer_group": f"prefstream-demo-{run_id}",
            "models": list(models),
            "feature_names": list(ds.feature_names),
            "context_names": list(ds.context_names) if has_context else None,
            "model_params": params,
            "snapshot_every_events": int(snapshot_every_events),
            "snapshot_every_seconds": 5.0,
            "explain_sample_rate": float(explain_sample_rate),
            "state_dir": str(Path(tmp.name) / "state"),
            "log_level": "WARNING",
        }
        for key in ("security_protocol", "sasl_mechanism", "ssl_cafile"):
            if opts.get(key):
                values[key] = opts[key]
        if opts.get("sasl_plain_username"):
            values["sasl_username"] = opts["sasl_plain_username"]
        cfg = write_settings_toml(Path(tmp.name) / "demo.toml", values)
        secret_env = {}
        if opts.get("sasl_plain_password"):
            secret_env["PREFSTREAM_SASL_PASSWORD"] = opts["sasl_plain_password"]
        os.environ.update(secret_env)  # inherited by the workers, never written to disk
        say(f"prefstream demo: {ds.name} — {len(stream_records)} events ({n_pref} preferences, {n_click} click sessions, "
            f"{examples} examples), models {', '.join(models)}, explain sample rate {explain_sample_rate:.3g}, "
            f"broker {boot}{' (started by the demo)' if started_broker else ''}")
        # ---------------------------------------------------------------- workers
        workers.start("learn", cfg, lport)
        workers.start("explain", cfg, eport)
        scraper = MetricsScraper(lport, eport).start()
        # ---------------------------------------------------------------- replay
        from kafka import KafkaProducer

        from stream.replay import TokenBucket

        producer = KafkaProducer(acks="all", linger_ms=20, compression_type=None, **opts)
        failed: list[BaseException] = []
        try:
            n_items = 0
            for rec in ds.item_records():
                producer.send(topics["items"], key=str(rec["item_id"]).encode(), value=json.dumps(rec).encode())
                n_items += 1
            producer.flush()
            bucket = TokenBucket(rate) if rate else None
            bar = None
            if progress:
                from tqdm import tqdm

                bar = tqdm(total=len(stream_records), unit="ev", desc="replay", file=sys.stderr, mininterval=0.5)
            refit_models = [m for m in models if m in ("gpm", "cgpm")]
            if warmup is None:
                min_train = max([int(params.get(m, {}).get("min_train", 50)) for m in refit_models] or [0])
                warmup = max(2 * min_train, len(stream_records) // 10) if refit_models else len(stream_records) // 20
            warmup = min(int(warmup), len(stream_records))
            warm_wait = 0.0
            t_replay = time.monotonic()
            for k, (kind, rec) in enumerate(stream_records):
                if k == warmup and k > 0:
                    producer.flush()
                    if bar is not None:
                        bar.set_description("replay (warm-up: waiting for the first models)")
                    tw = time.monotonic()
                    warm_examples = sum(1 if kd == "preference" else _session_pairs(r)
                                        for kd, r in stream_records[:warmup])
                    ready = [m for m in refit_models if warm_examples >= int(params.get(m, {}).get("min_train", 50))]
                    _wait_warm(scraper, workers, models, ready, warmup_timeout_s)
                    warm_wait = time.monotonic() - tw
                    if bar is not None:
                        bar.set_description("replay")
                if bucket is not None:
                    bucket.acquire()
                key = (rec.get("event_id") or rec.get("session_id")).encode()
                topic = topics["preferences"] if kind == "preference" else topics["clicks"]
                producer.send(topic, key=key, value=json.dumps(rec).encode()).add_errback(failed.append)
                if bar is not None:
                    bar.update(1)
                    if k % 500 == 0 and scraper.latest.get("learner"):
                        learned = scraper.learner("prefstream_events_learned_total")
                        bar.set_postfix({m: int(v) for m, v in learned.items()}, refresh=False)
                if k % 1000 == 999:
                    workers.check_alive()
            producer.flush()
            replay_s = time.monotonic() - t_replay
            if bar is not None:
                bar.close()
        finally:
            producer.close()
        if failed:
            raise DemoError(f"{len(failed)} records could not be sent; first error: {failed[0]!r}")
        # ---------------------------------------------------------------- wait for learning
        deadline = time.monotonic() + learn_timeout_s
        while True:
            workers.check_alive()
            scraper.poll()
            learned = scraper.learner("prefstream_events_learned_total")
            if learned and all(learned.get(m, 0) >= examples for m in models):
                break
            if time.monotonic() > deadline:
                raise DemoError(f"Learning stalled: learned {learned} of {examples} examples after {learn_timeout_s:.0f} s "
                                f"(see {log_dir}/learn.log).")
            time.sleep(0.5)
        t_learned = time.monotonic()
        # ---------------------------------------------------------------- wait for explanations
        last_n, last_change = -1.0, time.monotonic()
        deadline = time.monotonic() + explain_timeout_s
        while time.monotonic() < deadline:
            workers.check_alive()
            scraper.poll()
            refits_busy = False
            n = sum(scraper.explainer("prefstream_explanations_total").values())
            n += sum(scraper.explainer("prefstream_explanations_skipped_total", "reason").values())
            if n != last_n:
                last_n, last_change = n, time.monotonic()
            elif time.monotonic() - last_change >= quiet_period_s and not refits_busy:
                break
            time.sleep(0.5)
        scraper.poll()
        codes = workers.stop()
        scraper.stop()
        # ---------------------------------------------------------------- read the output topics
        records = [json.loads(v) for _, v in _read_topic(topics["explanations"], opts) if v is not None]
        dead = [json.loads(v) for _, v in _read_topic(topics["dead-letters"], opts) if v is not None]
        wall = time.monotonic() - t_start
        summary = _summarise(ds.name, models, stream_records, n_pref, n_click, examples, n_items, scraper, records, dead,
                             replay_s - warm_wait, t_learned - t_replay - warm_wait, wall, explain_sample_rate, codes, params)
        if out is not None:
            from stream.report import write_report

            out.mkdir(parents=True, exist_ok=True)
            with (out / "records.jsonl").open("w", encoding="utf-8") as fh:
                for r in records:
                    fh.write(json.dumps(r) + "\n")
            summary["report"] = str(write_report(out, summary, records))
            (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str), encoding="utf-8")
        if verbose:
            print(format_summary(summary), flush=True)
        return summary
    finally:
        try:
            workers.stop(timeout=20)
        except Exception:  # noqa: BLE001
            log.exception("stopping the workers failed")
        if scraper is not None:
            scraper._stop.set()
        if topics and not keep_topics and opts:
            o = {k: v for k, v in opts.items() if k != "client_id"}
            _delete_topics(list(topics.values()), o)
            group = f"prefstream-demo-{run_id}"  # Faust's assignor topics of both workers' groups (best effort)
            for name in (f"{group}-__assignor-__leader", f"{group}-explainer-__assignor-__leader"):
                _delete_topics([name], o, quiet=True)
        if started_broker and not keep_broker:
            try:
                say("stopping the local broker the demo started (use --keep-broker to keep it)…")
                bk.stop_broker()
            except Exception:  # noqa: BLE001
                log.exception("stopping the broker failed")
        tmp.cleanup()


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


def _wait_warm(scraper: MetricsScraper, workers: _Workers, models: list[str], refit_models: list[str],
               timeout: float) -> bool:
    """Until every model is published, the refitted ones refitted, and the explainer holds them all."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        workers.check_alive()
        scraper.poll()
        lv = scraper.learner("prefstream_model_version")
        refits = scraper.learner("prefstream_refit_duration_seconds_count")
        ev = scraper.explainer("prefstream_model_version", "model")
        if (all(lv.get(m, 0) >= 1 for m in models) and all(refits.get(m, 0) >= 1 for m in refit_models)
                and all(ev.get(m, 0) >= 1 for m in models)):
            # the refit forces a snapshot at the next timer tick: give it and the explainer a moment
            time.sleep(1.5)
            scraper.poll()
            lv = scraper.learner("prefstream_model_version")
            ev = scraper.explainer("prefstream_model_version", "model")
            if all(ev.get(m, 0) >= lv.get(m, 0) for m in models):
                return True
        time.sleep(0.5)
    log.warning("warm-up: not every model was ready after %.0f s; replaying the rest anyway", timeout)
    return False


# ============================================================================ summary
def _median(xs) -> float | None:
    xs = [x for x in xs if x is not None]
    return float(statistics.median(xs)) if xs else None


def _summarise(name, models, stream_records, n_pref, n_click, examples, n_items, scraper: MetricsScraper, records,
               dead, replay_s, learn_s, wall, sample_rate, codes, params) -> dict[str, Any]:
    learned = scraper.learner("prefstream_events_learned_total")
    final = {}
    for m in models:
        final[m] = {"accuracy": scraper.learner("prefstream_progressive_accuracy").get(m),
                    "roc_auc": scraper.learner("prefstream_progressive_roc_auc").get(m),
                    "log_loss": scraper.learner("prefstream_progressive_log_loss").get(m)}
    by_method: dict[str, list] = defaultdict(list)
    for r in records:
        by_method[r["method"]].append(r)
    expl = {}
    for method, recs in sorted(by_method.items()):
        tops = {}
        for model in sorted({r.get("model_name", "") for r in recs}):
            tops[model] = _top_features([r for r in recs if r.get("model_name", "") == model], 3)
        expl[method] = {
            "count": len(recs),
            "models": sorted({r.get("model_name", "") for r in recs}),
            "median_latency_ms": (_median([r.get("compute_time_s") for r in recs]) or 0.0) * 1e3,
            "model_versions": [min(int(r.get("model_version", 0)) for r in recs), max(int(r.get("model_version", 0)) for r in recs)],
            "top_features": tops,
        }
    skipped = scraper.explainer("prefstream_explanations_skipped_total", "reason")
    dl_reasons: dict[str, int] = defaultdict(int)
    for d in dead:
        dl_reasons[str(d.get("reason", "?"))] += 1
    refits = defaultdict(list)
    for r in scraper.refits:
        refits[r["model"]].append({"events": r["events"], "duration_s": round(r["duration_s"], 3)})
    versions = {m: int(v) for m, v in scraper.learner("prefstream_model_version").items()}
    return {
        "dataset": name,
        "events_sent": len(stream_records),
        "preferences_sent": n_pref,
        "click_sessions_sent": n_click,
        "examples_sent": examples,
        "items_sent": n_items,
        "learned": {m: int(learned.get(m, 0)) for m in models},
        "dead_letters": len(dead),
        "dead_letter_reasons": dict(dl_reasons),
        "replay_s": round(replay_s, 2),
        "learn_s": round(learn_s, 2),
        "events_per_s": round(examples / max(learn_s, 1e-9), 1),
        "wall_s": round(wall, 1),
        "explain_sample_rate": sample_rate,
        "final": final,
        "model_versions": versions,
        "model_params": params,
        "refits": dict(refits),
        "explanations_total": len(records),
        "explanation_methods": len(by_method),
        "explanations": expl,
        "explanations_skipped": {k: int(v) for k, v in skipped.items()},
        "p50_explain_ms": (_median([r.get("compute_time_s") for r in records]) or 0.0) * 1e3,
        "worker_exit_codes": codes,
        "progress": [{k: p[k] for k in ("events", "model", "accuracy", "roc_auc", "t")} for p in scraper.progress],
        "ok": all(int(learned.get(m, 0)) >= examples for m in models) and not dead,
    }


def _top_features(recs: list[dict], k: int = 3) -> list[str]:
    """The ``k`` features of largest mean |value| over records (the most common feature set)."""
    import numpy as np

    if not recs:
        return []
    names = max({tuple(r["feature_names"]) for r in recs}, key=lambda t: sum(tuple(r["feature_names"]) == t for r in recs))
    rows = [[np.nan if v is None else float(v) for v in r["values"]] for r in recs
            if tuple(r["feature_names"]) == names and r.get("values") is not None]
    if not rows:
        return []
    with np.errstate(all="ignore"):
        m = np.nanmean(np.abs(np.asarray(rows, dtype=float)), axis=0)
    m = np.where(np.isfinite(m), m, -1.0)
    return [names[i] for i in np.argsort(-m, kind="stable")[:k]]


def _f(v, fmt=".3f") -> str:
    return "n/a" if v is None else format(v, fmt)


def format_summary(s: dict) -> str:
    """The printed form of a demo summary."""
    lines = ["", f"=== prefstream demo summary: {s['dataset']} ===",
             f"events replayed      {s['events_sent']} ({s['preferences_sent']} preferences, {s['click_sessions_sent']} click "
             f"sessions → {s['examples_sent']} examples) in {s['replay_s']} s",
             "events learned       " + ", ".join(f"{m}={n}" for m, n in s["learned"].items())
             + f"  ({s['events_per_s']} examples/s end to end)",
             f"dead letters         {s['dead_letters']}" + (f" {s['dead_letter_reasons']}" if s["dead_letters"] else ""),
             "progressive validation (predict, then learn):"]
    by_model = defaultdict(list)
    for p in s["progress"]:
        by_model[p["model"]].append(p)
    for m, pts in by_model.items():
        pts = [p for p in pts if p["accuracy"] is not None or p["roc_auc"] is not None] or pts
        step = max(1, len(pts) // 6)
        shown = pts[::step][:6] + ([pts[-1]] if pts[::step][:6][-1] is not pts[-1] else [])
        lines.append(f"  {m:9s} " + "  ".join(f"@{p['events']}: acc {_f(p['accuracy'], '.3f')} auc {_f(p['roc_auc'], '.3f')}"
                                               for p in shown))
    lines.append("model versions       " + ", ".join(f"{m} v{v}" for m, v in s["model_versions"].items()))
    for m, rs in s["refits"].items():
        durs = [r["duration_s"] for r in rs]
        lines.append(f"refits {m:13s} {len(rs)} (durations {', '.join(f'{d:.2f}' for d in durs[:8])}"
                     f"{' …' if len(durs) > 8 else ''} s; median {statistics.median(durs):.2f} s)")
    if not s["refits"]:
        lines.append("refits               none")
    lines.append(f"explanations         {s['explanations_total']} records, {s['explanation_methods']} methods "
                 f"(sample rate {s['explain_sample_rate']:.3g}; skipped {s['explanations_skipped'] or 0})")
    for method, e in s["explanations"].items():
        tops = "; ".join(f"{m}: {', '.join(t)}" for m, t in e["top_features"].items())
        lines.append(f"  {method:27s} {e['count']:5d}  p50 {e['median_latency_ms']:8.1f} ms  "
                     f"v{e['model_versions'][0]}–{e['model_versions'][1]}  top: {tops}")
    lines.append(f"wall time            {s['wall_s']} s")
    if s.get("report"):
        lines.append(f"report               {s['report']}")
    return "\n".join(lines)


# ============================================================================ report
def rebuild_report(run_dir: str | os.PathLike, out_dir: str | os.PathLike | None = None) -> Path:
    """Redraw the HTML report of a run from ``summary.json`` and ``records.jsonl`` in ``run_dir``.

    Returns
    -------
    Path
        The ``index.html`` written (into ``out_dir``, default ``run_dir``).

    Raises
    ------
    InvalidInputError
        If ``run_dir`` lacks ``summary.json`` or a file is not valid JSON.
    """
    from stream.report import write_report

    d = Path(run_dir)
    sp = d / "summary.json"
    if not sp.is_file():
        raise InvalidInputError(f"{sp} not found: --run-dir must be a folder written by `prefstream demo` or "
                                "`prefstream run` (it holds summary.json and records.jsonl).")
    try:
        summary = json.loads(sp.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise InvalidInputError(f"{sp} is not valid JSON: {exc}.") from None
    records = []
    rp = d / "records.jsonl"
    if rp.is_file():
        for k, line in enumerate(rp.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except ValueError as exc:
                    raise InvalidInputError(f"{rp}, line {k}: not valid JSON ({exc}).") from None
    return write_report(out_dir if out_dir is not None else d, summary, records)


# ============================================================================ worker launcher
def _worker_main(argv: list[str]) -> int:
    """``python -m stream.demo worker learn|explain …``: the CLI with every built-in model registered."""
    from stream import models as builtin_models
    from stream.cli import main

    builtin_models.register_all()
    _capacity_merge_fallback()
    return main(argv)


def _capacity_merge_fallback() -> None:
    """Give ``capacity`` a merger that survives ADMM-RDA parts (not mergeable, paper 002 §4).

    ADMM-RDA learners of different sources (e.g. the preference and the click topic) refuse
    ``+=``; without a merger the explainer's merge raises. Until :mod:`stream.models` registers
    one, the demo's workers pool RDA parts with ``+=`` and otherwise explain the part that saw
    the most examples.
    """
    from stream import registry

    try:
        spec = registry.get_model("capacity")
    except PrefstreamError:
        return
    if spec.merger is not None:
        return

    def merge(parts):
        first = spec.loader(parts[0][0].state_dict())
        try:
            for lr, _ in parts[1:]:
                first += lr
            return first
        except (InvalidParameterError, InvalidInputError):
            return max(parts, key=lambda p: p[1])[0]

    registry.register_model("capacity", spec.factory, spec.loader, merger=merge, replace=True)


if __name__ == "__main__":
    sys.exit(_worker_main(sys.argv[1:]))
