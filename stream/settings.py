"""prefstream settings: one typed, documented field per option, each bound to ``PREFSTREAM_<NAME>``.

Precedence (highest first)::

    overrides (CLI flags)  >  environment (PREFSTREAM_<NAME>)  >  config file (TOML or JSON)  >  defaults

Config file: a flat TOML (``.toml``, read with :mod:`tomllib`) or JSON (``.json``) mapping of
field names to values, e.g.::

    bootstrap_servers = "broker-1:9093,broker-2:9093"
    security_protocol = "SASL_SSL"
    sasl_mechanism = "SCRAM-SHA-512"
    sasl_username = "prefstream"
    models = ["linear-bt"]
    snapshot_every_events = 5000

    [model_params.linear-bt]
    learning_rate = 0.05

Environment values are strings: integers and floats as usual, booleans as ``1/0/true/false``,
lists as comma-separated text or a JSON array, ``model_params`` as a JSON object; an empty
string sets an optional field to ``None``. ``bootstrap_servers`` is also read from
``PREFSTREAM_BOOTSTRAP`` (the name the broker scripts and test fixtures use);
``PREFSTREAM_BOOTSTRAP_SERVERS`` wins when both are set. Unknown keys in the file or in the overrides, and
values of the wrong type, raise :class:`~learners.exceptions.InvalidParameterError` naming the
key, where it came from, and what was expected. Unknown ``PREFSTREAM_*`` environment variables
are ignored (scripts use a few, e.g. ``PREFSTREAM_CACHE``).

Examples
--------
>>> s = Settings.load(None, {"snapshot_every_events": 10}, environ={"PREFSTREAM_MODELS": "linear-bt,capacity"})
>>> s.snapshot_every_events, s.models, s.topic_preferences
(10, ['linear-bt', 'capacity'], 'prefstream.preferences')
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from learners.exceptions import InvalidParameterError

__all__ = ["ENV_PREFIX", "Settings", "default_data_dir"]

ENV_PREFIX = "PREFSTREAM_"
_REPO = Path(__file__).resolve().parents[1]


def default_data_dir() -> str:
    """``$PREFSTREAM_DATA_DIR`` or ``<repo>/../shared/data`` (the bundled real data sets)."""
    return os.environ.get("PREFSTREAM_DATA_DIR", str((_REPO / ".." / "shared" / "data").resolve()))


def _default_state_dir() -> str:
    cache = os.environ.get("PREFSTREAM_CACHE", str(Path.home() / ".cache" / "prefstream"))
    return str(Path(cache) / "state")


# kinds: "str", "hostports" (host:port[,host:port]), "opt_str", "int", "float", "list", "opt_list", "dict", "choice", "opt_choice"
def _f(default: Any, doc: str, kind: str, *, lo: float | None = None, hi: float | None = None,
       lo_open: bool = False, choices: tuple = (), secret: bool = False, factory=None, aliases: tuple = ()):
    meta = {"doc": doc, "kind": kind, "lo": lo, "hi": hi, "lo_open": lo_open, "choices": choices, "secret": secret,
            "aliases": aliases}
    if factory is not None:
        return field(default_factory=factory, metadata=meta, repr=not secret)
    return field(default=default, metadata=meta, repr=not secret)


@dataclass(frozen=True)
class Settings:
    """All prefstream options. Build with :meth:`load`; each field's env var is ``PREFSTREAM_<FIELD>``.

    Raises
    ------
    InvalidParameterError
        From ``__post_init__`` if a field has the wrong type or is out of range.
    """

    # ----------------------------------------------------------------- Kafka connection
    bootstrap_servers: str = _f("127.0.0.1:9092", "Comma-separated host:port list of Kafka brokers "
                                "(also read from PREFSTREAM_BOOTSTRAP, as deploy/ and stream.broker do).", "hostports",
                                aliases=("PREFSTREAM_BOOTSTRAP",))
    security_protocol: str = _f("PLAINTEXT", "Kafka security protocol.", "choice",
                                choices=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"))
    sasl_mechanism: str | None = _f(None, "SASL mechanism when security_protocol is SASL_*.", "opt_choice",
                                    choices=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"))
    sasl_username: str | None = _f(None, "SASL user name.", "opt_str")
    sasl_password: str | None = _f(None, "SASL password (never printed; prefer the environment over files).", "opt_str",
                                   secret=True)
    ssl_cafile: str | None = _f(None, "PEM file of the CA that signed the brokers' certificates.", "opt_str")
    client_id: str = _f("prefstream", "Kafka client.id prefix.", "str")
    broker_wait_seconds: float = _f(5.0, "Seconds the workers, replay, tail and topics commands wait for a broker "
                                    "to answer before they stop with one error line.", "float", lo=0, lo_open=True)
    # ----------------------------------------------------------------------- topics
    topic_preferences: str = _f("prefstream.preferences", "Preference events in (key event_id).", "str")
    topic_clicks: str = _f("prefstream.clicks", "Click sessions in (key session_id).", "str")
    topic_items: str = _f("prefstream.items", "Item catalog, compacted (key item_id).", "str")
    topic_models: str = _f("prefstream.models", "Model snapshots, compacted (key model name).", "str")
    topic_explain_requests: str = _f("prefstream.explain-requests", "Explain requests in.", "str")
    topic_explanations: str = _f("prefstream.explanations", "Explanation records out (key request id).", "str")
    topic_dead_letters: str = _f("prefstream.dead-letters", "Dead-letter records out.", "str")
    topic_drift: str = _f("prefstream.drift", "Drift records out (drift.v1.json, key model name; stream.monitoring.monitor).", "str")
    topic_people: str = _f("prefstream.people", "Per-person state of the personal models, compacted (key "
                           "<model>@<user_id>, a tombstone when forgotten; stream.contract.people).", "str")
    # -------------------------------------------------- wire formats (stream.broker.serializers)
    schema_registry_url: str | None = _f(None, "Confluent-compatible schema registry API, e.g. "
                                         "http://127.0.0.1:8081/apis/ccompat/v7 (deploy/registry/start.sh prints it); "
                                         "needed by every topic whose format is avro or jsonschema.", "opt_str")
    format_preferences: str = _f("json", "Wire format of the preference events: json, or avro / jsonschema in the "
                                 "Confluent wire format (schema id from the registry; docs/kafka.md).", "choice",
                                 choices=("json", "avro", "jsonschema"))
    format_clicks: str = _f("json", "Wire format of the click sessions (json, avro, jsonschema).", "choice",
                            choices=("json", "avro", "jsonschema"))
    format_items: str = _f("json", "Wire format of the item records (json, avro, jsonschema).", "choice",
                           choices=("json", "avro", "jsonschema"))
    format_explanations: str = _f("json", "Wire format the explainer writes explanation records in (json, or "
                                  "jsonschema: explanation.v1.json registered, the Confluent header before the JSON).",
                                  "choice", choices=("json", "jsonschema"))
    format_dead_letters: str = _f("json", "Wire format the workers write dead letters in (json, avro, jsonschema).",
                                  "choice", choices=("json", "avro", "jsonschema"))
    consumer_group: str = _f("prefstream-learner", "Consumer group id of the learner workers.", "str")
    # ----------------------------------------------------------------------- models
    models: list = _f(None, "Models the learner trains (model_name values).", "list", factory=lambda: ["linear-bt"])
    feature_names: list | None = _f(None, "Item feature names in model column order; None = from the first event.",
                                    "opt_list")
    context_names: list | None = _f(None, "Context feature names; None = from the first event.", "opt_list")
    model_params: dict = _f(None, "Constructor keyword arguments per model: {model_name: {param: value}}.", "dict",
                            factory=dict)
    # -------------------------------------------------------------------- snapshots
    snapshot_every_events: int = _f(1000, "Publish a snapshot after this many learned events.", "int", lo=1)
    snapshot_every_seconds: float = _f(30.0, "...or after this many seconds with new events.", "float", lo=0,
                                       lo_open=True)
    snapshot_min_seconds: float = _f(1.0, "...but an event-count snapshot of a partition at most once per this many "
                                     "seconds (catch-up: fewer, larger rounds; 0 = every snapshot_every_events; "
                                     "`prefstream run` always snapshots by count).",
                                     "float", lo=0)
    # ------------------------------------------------------- people (personal models; docs/personal.md)
    people_ttl_seconds: float = _f(3600.0, "A person of a personal model idle this long leaves the learner's memory "
                                   "(after a snapshot round wrote their state to the changelog); they come back from "
                                   "the worker's store on their next event.", "float", lo=0, lo_open=True)
    people_memory_bytes: int = _f(1_073_741_824, "Budget of the people a learner worker holds in memory, over all "
                                  "personal models and partitions (estimated from their record size); beyond it the "
                                  "least recently seen leave memory after the next round.", "int", lo=1024)
    people_store_cache_bytes: int = _f(67_108_864, "Block cache of the learner worker's local person store "
                                       "(RocksDB, under state_dir).", "int", lo=1_048_576)
    # ------------------------------------------------------------------ micro-batches
    batch_max_events: int = _f(500, "Learner micro-batch: learn at most this many messages at once.", "int", lo=1)
    batch_max_ms: float = _f(50.0, "...or what arrived within this many ms of the batch's first message.", "float",
                             lo=0)
    refit_executor: str = _f("PROCESS", "Where the learner fits model refits (GPM): a worker PROCESS or a THREAD.",
                             "choice", choices=("PROCESS", "THREAD"))
    max_snapshot_bytes: int = _f(8_388_608, "Largest snapshot (bytes); keep ≤ the model topic's max.message.bytes.",
                                 "int", lo=1024)
    # ----------------------------------------------------------------- explanations
    explain_sample_rate: float = _f(0.05, "Fraction of preference events the explainer explains.", "float",
                                    lo=0.0, hi=1.0)
    explain_max_queue: int = _f(1000, "Pending explanations per method beyond this are shed, oldest first (and "
                                "counted); explain requests beyond it pause the request topic instead.", "int", lo=1)
    explain_max_batch: int = _f(64, "Examples per explainer call, for methods without their own fn.max_batch "
                                "(the explainer worker's micro-batches of sampled events).", "int", lo=1)
    explain_budget_s: float = _f(2.0, "Target seconds per explainer call, for methods without their own "
                                 "fn.budget_s: the batch size adapts so that one call stays near it.", "float",
                                 lo=0.001)
    explain_max_lag_s: float = _f(30.0, "A sampled event still queued this many seconds after it arrived is shed "
                                  "(reason stale): explanations stay recent.", "float", lo=0.1)
    explain_dedupe_seconds: float = _f(300.0, "On a new partition assignment the explainer reads back this many "
                                       "seconds of the explanation topic, so that an event already explained by a "
                                       "method (same event id and model; requests: also the model version) is not "
                                       "explained again.", "float",
                                       lo=0.0)
    seed: int = _f(0, "Seed of the explainer's RNG (the sampled explainers' seeds); which events are "
                 "sampled depends on their ids only.", "int", lo=0)
    explain_exact_players: int = _f(10, "Shapley-type explainers enumerate all coalitions up to this many players "
                                    "(one-hot groups count as one player above it); beyond, they sample.", "int",
                                    lo=1, hi=20)
    explain_max_coalitions: int = _f(2048, "Coalition budget per explanation of a sampled estimator (Pref-SHAP "
                                     "Kernel SHAP coalitions, distributional Monte Carlo evaluations, ShaRP "
                                     "permutations × players).", "int", lo=16)
    explain_reference_size: int = _f(128, "Reference sample of the explainers: catalog items for Pref-SHAP's "
                                     "conditional mean embeddings and ShaRP's marginal removal.", "int", lo=2)
    explain_target_se: float = _f(0.005, "Sampled Pref-SHAP and Bernoulli distributional values stop when every "
                                  "standard error is below this fraction of the event's largest |value| "
                                  "(explain_max_coalitions is then the cap); 0 = a fixed explain_max_coalitions. "
                                  "Written in every record's extra.budgets.", "float", lo=0.0, hi=0.5)
    # ------------------------------------------------- monitoring (stream.monitoring.monitor)
    monitor_top_k: int = _f(20, "Features (capacity pairs) exported by name in the global-importance gauges; "
                            "the rest are summed as feature=other.", "int", lo=1)
    monitor_window: int = _f(1000, "Explanations in the sliding window of the global importances (and in the "
                             "drift reference window).", "int", lo=2)
    monitor_check_every: int = _f(50, "Explanations between two gauge updates / nDCG checks.", "int", lo=1)
    monitor_warmup: int = _f(2000, "Explanations ignored before the drift reference window (and after an alarm).",
                             "int", lo=0)
    drift_ndcg_threshold: float = _f(0.9, "Ranking drift alarm when the nDCG@K of the importance ranking against "
                                     "the reference falls below this.", "float", lo=0.0, hi=1.0, lo_open=True)
    drift_delta: float = _f(1e-4, "ADWIN confidence of the per-feature explanation drift detectors.", "float",
                            lo=0.0, hi=1.0, lo_open=True)
    drift_min_effect: float = _f(0.1, "Smallest change of a feature's share of the mean abs(phi) (recent "
                                 "explanations vs the reference window) that raises a feature drift alarm.", "float",
                                 lo=0.0, hi=1.0)
    # ------------------------------------------------------------------- operations
    metrics_port: int | None = _f(None, "Prometheus port for this worker; None = the role default below.",
                                  "opt_int", lo=0, hi=65535)
    progress_log: str | None = _f(None, "The learner worker appends its learning curve here: its progressive metrics "
                                  "at event counts, one JSON object per line ({events, model, accuracy, roc_auc, "
                                  "log_loss, t}); None = not written.", "opt_str")
    learner_metrics_port: int = _f(9464, "Default Prometheus port of the learner worker.", "int", lo=0, hi=65535)
    explainer_metrics_port: int = _f(9465, "Default Prometheus port of the explainer worker.", "int", lo=0, hi=65535)
    max_message_bytes: int = _f(1_048_576, "Larger input messages are dead-lettered as oversize.", "int", lo=1)
    # ------------------------------------------------------- prefstream serve (stream.serving)
    serve_host: str = _f("127.0.0.1", "Address prefstream serve binds to (0.0.0.0 exposes it to the network).", "str")
    serve_port: int = _f(8000, "TCP port of prefstream serve.", "int", lo=0, hi=65535)
    serve_workers: int = _f(1, "Server worker processes of prefstream serve on one box (each follows the topics).",
                            "int", lo=1, hi=64)
    serve_token: str | None = _f(None, "Bearer token required on every endpoint of prefstream serve but /healthz; "
                                 "None = no authentication (never printed).", "opt_str", secret=True)
    serve_models: list | None = _f(None, "Models prefstream serve must have loaded before /readyz answers 200; "
                                   "None = the models setting.", "opt_list")
    serve_max_body_bytes: int = _f(1_048_576, "Larger request bodies are refused with 413.", "int", lo=1024)
    serve_max_items: int = _f(1000, "Largest number of candidates in one rank request (more: 413).", "int", lo=2)
    serve_explain_deadline_s: float = _f(2.0, "Seconds an explanation may take before prefstream serve answers 504.",
                                         "float", lo=0, lo_open=True)
    serve_rank_explain_deadline_s: float = _f(0.25, "Seconds a ranking waits for its explanations; the ones not done "
                                              "are answered as missing (and finish in the background).",
                                              "float", lo=0, lo_open=True)
    serve_explain_cache_items: int = _f(4096, "Explanation records prefstream serve keeps per model version "
                                        "(least recently used leave first; 0 keeps none).", "int", lo=0)
    serve_explain_threads: int = _f(2, "Explanations computed at once per server process (the others wait, within "
                                    "their deadline).", "int", lo=1, hi=64)
    # ------------------------------------------------------------ click sessions → pairs
    click_pairs: str = _f("all", "Pair strategy for click sessions: all (clicked ≻ every non-clicked shown item), "
                          "skipped_above (Joachims 2002) or next (stream/clicks/log.py).", "str")
    click_weighting: str = _f("none", "Click-pair weights: none, ips (1/propensity, or 1/examination of the position "
                              "when propensities are absent), snips (ips self-normalised by its running mean) or "
                              "ips_sample (keep pairs with probability clip/propensity, weight 1: for learners that "
                              "ignore weights).", "str")
    click_propensity_clip: float = _f(0.01, "Propensities below this count as this (IPS weights ≤ 1/clip).", "float",
                                      lo=0, hi=1, lo_open=True)
    click_examination: str | None = _f(None, "Examination probability per position, top first, e.g. '1,0.6,0.4': "
                                       "the IPS propensity of clicks without one.", "opt_str")
    click_orientation: str = _f("clicked_left", "Pair sides: clicked_left (outcome +1) or hashed (side by a hash of "
                                "the pair id, outcome ±1, so progressive AUC sees both classes).", "str")
    max_request_bytes: int = _f(1_048_576, "Largest request a producer of replay sends (kafka-python "
                                "max_request_size); a larger record fails with MessageSizeTooLargeError.", "int",
                                lo=1024)
    compression_type: str = _f("none", "Compression of what replay and the workers produce: none, gzip, snappy, "
                               "lz4 or zstd (consumers read every codec whatever this says).", "choice",
                               choices=("none", "gzip", "snappy", "lz4", "zstd"))
    max_output_bytes: int | None = _f(None, "Largest explanation / dead-letter record the workers publish; None = "
                                      "the topic's max.message.bytes read from the broker (1 MiB if unknown).",
                                      "opt_int", lo=1024)
    data_dir: str = _f(None, "Directory of the bundled data sets (PREFSTREAM_DATA_DIR).", "str",
                       factory=default_data_dir)
    state_dir: str = _f(None, "Local worker state.", "str", factory=_default_state_dir)
    log_level: str = _f("INFO", "Python logging level.", "choice", choices=("DEBUG", "INFO", "WARNING", "ERROR"))

    # ------------------------------------------------------------------ validation
    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, _coerce(f, getattr(self, f.name), "value"))
        if self.security_protocol.startswith("SASL") and self.sasl_mechanism is None:
            raise InvalidParameterError(
                f"security_protocol={self.security_protocol} needs sasl_mechanism (PREFSTREAM_SASL_MECHANISM), "
                "e.g. 'PLAIN' or 'SCRAM-SHA-512'.")
        framed = [f"format_{w}" for w in ("preferences", "clicks", "items", "explanations", "dead_letters")
                  if getattr(self, f"format_{w}") != "json"]
        if framed and not self.schema_registry_url:
            raise InvalidParameterError(
                f"{framed[0]}={getattr(self, framed[0])} needs a schema registry: set schema_registry_url "
                "(PREFSTREAM_SCHEMA_REGISTRY_URL), e.g. the URL deploy/registry/start.sh prints.")
        for name, params in self.model_params.items():
            if not isinstance(params, dict):
                raise InvalidParameterError(
                    f"model_params[{name!r}] must be a table/object of constructor arguments. Got {params!r} instead.")

    # ------------------------------------------------------------------- loading
    @classmethod
    def env_var(cls, name: str) -> str:
        """The environment variable bound to field ``name``: ``PREFSTREAM_<NAME>``."""
        return ENV_PREFIX + name.upper()

    @classmethod
    def load(cls, config_file: str | os.PathLike | None = None, overrides: Mapping[str, Any] | None = None,
             environ: Mapping[str, str] | None = None) -> "Settings":
        """Settings from defaults < config file < environment < overrides.

        Parameters
        ----------
        config_file : path, optional
            ``.toml`` or ``.json`` file of field values. ``None`` reads ``$PREFSTREAM_CONFIG`` if set.
        overrides : dict, optional
            Highest-precedence values, e.g. CLI flags; entries whose value is ``None`` are ignored
            (flags not given).
        environ : mapping, optional
            Environment to read (default :data:`os.environ`).

        Returns
        -------
        Settings

        Raises
        ------
        InvalidParameterError
            Unknown key in the file or overrides, a value of the wrong type or range, an
            unreadable config file.
        """
        env = os.environ if environ is None else environ
        names = {f.name: f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        if config_file is None:
            config_file = env.get(ENV_PREFIX + "CONFIG") or None
        if config_file is not None:
            src = f"config file {os.fspath(config_file)}"
            for k, v in _read_config(config_file).items():
                f = _known(names, k, src, v)
                values[k] = _coerce(f, v, src)
        for name, f in names.items():
            # the canonical PREFSTREAM_<NAME> wins over an alias (e.g. PREFSTREAM_BOOTSTRAP)
            for var in (*f.metadata["aliases"][::-1], cls.env_var(name)):
                if var in env:
                    values[name] = _coerce(f, _from_env(f, env[var], var), f"environment variable {var}")
        for k, v in (overrides or {}).items():
            if v is None:
                continue
            f = _known(names, k, _OVERRIDES, v)
            values[k] = _coerce(f, v, _OVERRIDES)
        return cls(**values)

    # ------------------------------------------------------------------- helpers
    def port_for(self, role: str) -> int:
        """Prometheus port of a worker ``role`` (``"learner"`` or ``"explainer"``)."""
        if self.metrics_port is not None:
            return self.metrics_port
        if role not in ("learner", "explainer"):
            raise InvalidParameterError(f"role must be 'learner' or 'explainer'. Got {role!r} instead.")
        return self.learner_metrics_port if role == "learner" else self.explainer_metrics_port

    def kafka_client_options(self) -> dict[str, Any]:
        """Connection keyword arguments for kafka-python ``KafkaProducer``/``KafkaConsumer``/``KafkaAdminClient``."""
        opts: dict[str, Any] = {
            "bootstrap_servers": [s.strip() for s in self.bootstrap_servers.split(",") if s.strip()],
            "security_protocol": self.security_protocol,
            "client_id": self.client_id,
        }
        if self.sasl_mechanism is not None:
            opts["sasl_mechanism"] = self.sasl_mechanism
        if self.sasl_username is not None:
            opts["sasl_plain_username"] = self.sasl_username
        if self.sasl_password is not None:
            opts["sasl_plain_password"] = self.sasl_password
        if self.ssl_cafile is not None:
            opts["ssl_cafile"] = self.ssl_cafile
        return opts

    def producer_options(self) -> dict[str, Any]:
        """Producer-only kafka-python keywords: ``max_request_size`` and ``compression_type`` (None = none)."""
        return {"max_request_size": self.max_request_bytes,
                "compression_type": None if self.compression_type == "none" else self.compression_type}

    def params_for(self, model_name: str) -> dict[str, Any]:
        """Constructor keyword arguments configured for ``model_name`` (empty dict if none)."""
        return dict(self.model_params.get(model_name, {}))

    def as_dict(self, redact: bool = True) -> dict[str, Any]:
        """All fields as a JSON-able dict; secrets (SASL password, serve token) shown as ``"***"`` unless
        ``redact`` is false."""
        out = dataclasses.asdict(self)
        if redact:
            for f in dataclasses.fields(self):
                if f.metadata.get("secret") and out.get(f.name) is not None:
                    out[f.name] = "***"
        return out

    @classmethod
    def describe(cls) -> list[tuple[str, str, str, str]]:
        """``(field, env var, default, doc)`` rows, for ``prefstream --help`` and the docs."""
        rows = []
        for f in dataclasses.fields(cls):
            d = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            rows.append((f.name, cls.env_var(f.name), repr(d), f.metadata["doc"]))
        return rows


# ------------------------------------------------------------------------ internals
def _known(names: dict, key: str, src: str, value: Any = None):
    """The field ``key``, or one error line: the closest name, or where a table of model parameters goes.

    Examples
    --------
    >>> _known({"models": 1, "model_params": 2}, "capacity", "config file x.toml", {"k": 2})
    Traceback (most recent call last):
    ...
    learners.exceptions.InvalidParameterError: Unknown setting 'capacity' in config file x.toml. Parameters of a model go under [model_params.capacity] (e.g. [model_params.capacity] then k = 2). Known settings: model_params, models.
    """
    if key not in names:
        close = difflib.get_close_matches(key, list(names), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        if isinstance(value, Mapping) and "model_params" in names:  # a [table] of its own: a model's parameters
            first = next(iter(value.items()), None)
            eg = f" (e.g. [model_params.{key}] then {first[0]} = {json.dumps(first[1])})" if first else ""
            hint = f" Parameters of a model go under [model_params.{key}]{eg}."
        raise InvalidParameterError(f"Unknown setting {key!r} in {src}.{hint} Known settings: {', '.join(sorted(names))}.")
    return names[key]


def _read_config(path) -> dict:
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise InvalidParameterError(f"Cannot read config file {p}: {exc}.") from None
    try:
        if p.suffix.lower() == ".json":
            doc = json.loads(data.decode("utf-8"))
        elif p.suffix.lower() == ".toml":
            doc = tomllib.loads(data.decode("utf-8"))
        else:
            raise InvalidParameterError(f"Config file {p} must end in .toml or .json. Got {p.suffix!r} instead.")
    except (ValueError, UnicodeDecodeError) as exc:
        if isinstance(exc, InvalidParameterError):
            raise
        raise InvalidParameterError(f"Config file {p} is not valid {p.suffix[1:].upper()}: {exc}.") from None
    if not isinstance(doc, dict):
        raise InvalidParameterError(f"Config file {p} must hold a table/object of settings.")
    return doc


def _from_env(f, text: str, var: str) -> Any:
    """Environment string → Python value before type checks."""
    kind = f.metadata["kind"]
    t = text.strip()
    if kind.startswith("opt_") and t == "":
        return None
    if kind in ("int", "opt_int"):
        try:
            return int(t)
        except ValueError:
            return text  # _coerce reports it
    if kind == "float":
        try:
            return float(t)
        except ValueError:
            return text
    if kind in ("list", "opt_list"):
        if t.startswith("["):
            try:
                return json.loads(t)
            except ValueError:
                raise InvalidParameterError(f"{var} must be a comma-separated list or a JSON array. Got {text!r} instead.") from None
        return [s.strip() for s in t.split(",") if s.strip()]
    if kind == "dict":
        try:
            return json.loads(t) if t else {}
        except ValueError:
            raise InvalidParameterError(f"{var} must be a JSON object. Got {text!r} instead.") from None
    return text


#: Where a value passed to :meth:`Settings.load` as an override came from (the CLI's flags and ``--set``).
_OVERRIDES = "the command line (a flag or --set)"


def _coerce(f, v: Any, src: str) -> Any:
    """Check (and lightly normalise) one value; raise the house message otherwise."""
    m = f.metadata
    kind = m["kind"]

    def bad(expected: str):
        shown = "***" if m["secret"] else repr(v)
        return InvalidParameterError(
            f"The {f.name!r} setting must be {expected}. Got {shown} instead (from {src}).")

    if v is None and (kind.startswith("opt_")):
        return None
    if kind in ("str", "opt_str"):
        if not isinstance(v, str) or not v:
            raise bad("a non-empty string")
        return v
    if kind == "hostports":
        servers = [x.strip() for x in v.split(",")] if isinstance(v, str) else []
        if not servers or not all(h and p.isdigit() and 0 < int(p) < 65536
                                  for h, _, p in (x.rpartition(":") for x in servers)):
            raise bad("a comma-separated list of host:port (e.g. '127.0.0.1:9092')")
        return ",".join(servers)
    if kind in ("choice", "opt_choice"):
        hit = [c for c in m["choices"] if isinstance(v, str) and c.upper() == v.upper()]
        if not hit:
            raise bad(f"one of {m['choices']}")
        return hit[0]  # the canonical spelling (PLAINTEXT, INFO, lz4)
    rng = ""
    if m["lo"] is not None or m["hi"] is not None:
        lo_txt = "-inf" if m["lo"] is None else m["lo"]
        hi_txt = "inf)" if m["hi"] is None else f"{m['hi']}]"
        rng = f" in the range {'(' if m['lo_open'] or m['lo'] is None else '['}{lo_txt}, {hi_txt}"
    if kind in ("int", "opt_int"):
        if isinstance(v, bool) or not isinstance(v, int):
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            else:
                raise bad("an integer" + rng)
        if (m["lo"] is not None and v < m["lo"]) or (m["hi"] is not None and v > m["hi"]):
            raise bad("an integer" + rng)
        return v
    if kind == "float":
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise bad("a finite number" + rng)
        v = float(v)
        lo, hi = m["lo"], m["hi"]
        if (lo is not None and (v <= lo if m["lo_open"] else v < lo)) or (hi is not None and v > hi):
            raise bad("a number" + rng)
        return v
    if kind in ("list", "opt_list"):
        if isinstance(v, tuple):
            v = list(v)
        if not isinstance(v, list) or not all(isinstance(s, str) and s for s in v):
            raise bad("a list of non-empty strings")
        if kind == "list" and not v:
            raise bad("a non-empty list of strings")
        return list(v)
    if kind == "dict":
        if not isinstance(v, dict):
            raise bad("a table/object mapping model names to parameter tables")
        return {str(k): (dict(p) if isinstance(p, dict) else p) for k, p in v.items()}
    raise AssertionError(f"unhandled kind {kind}")  # pragma: no cover - programming error
