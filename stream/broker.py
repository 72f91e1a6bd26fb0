"""Kafka broker lifecycle, standard topics and client connection options.

Two ways to run prefstream against Kafka:

* the **local broker**: a single-node Apache Kafka 4.x (KRaft, broker + controller in one JVM)
  bound to ``127.0.0.1:9092``, whose jars Maven resolves into
  ``${PREFSTREAM_CACHE:-~/.cache/prefstream}/kafka/<version>/`` (see ``deploy/kafka/`` and
  ``docs/kafka.md``). :func:`start_broker`, :func:`stop_broker` and :func:`broker_status` drive
  its shell scripts;
* an **existing cluster**: :func:`kafka_client_options` turns settings or ``PREFSTREAM_*``
  environment variables (bootstrap servers, security protocol, SASL, CA file) into keyword
  arguments for every kafka-python client (``KafkaProducer``, ``KafkaConsumer``,
  ``KafkaAdminClient``).

:func:`create_topics` creates the standard topics (:data:`TOPICS`) idempotently.

This module is part of ``stream`` and may import kafka-python; ``learners`` and ``explainers``
never import it.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from learners.exceptions import InvalidParameterError, PrefstreamError

__all__ = [
    "BrokerError",
    "DEFAULT_BOOTSTRAP",
    "TOPICS",
    "TOPIC_CLICKS",
    "TOPIC_DEAD_LETTERS",
    "TOPIC_EXPLAIN_REQUESTS",
    "TOPIC_EXPLANATIONS",
    "TOPIC_ITEMS",
    "TOPIC_MODELS",
    "TOPIC_PREFERENCES",
    "TopicSpec",
    "broker_status",
    "create_topics",
    "describe_topic_configs",
    "kafka_client_options",
    "local_bootstrap",
    "start_broker",
    "stop_broker",
    "wait_for_broker",
]

REPO_ROOT = Path(__file__).resolve().parents[1]
KAFKA_DEPLOY_DIR = REPO_ROOT / "deploy" / "kafka"

#: Bootstrap address of the local broker started by ``deploy/kafka/start.sh`` (default port).
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def local_bootstrap() -> str:
    """Address of the local broker: ``127.0.0.1:$PREFSTREAM_KAFKA_PORT`` (default 9092)."""
    return f"127.0.0.1:{os.environ.get('PREFSTREAM_KAFKA_PORT') or 9092}"

#: Largest model snapshot the model topic accepts, in bytes (8 MiB).
MODEL_SNAPSHOT_MAX_BYTES = 8_388_608

TOPIC_PREFERENCES = "prefstream.preferences"
TOPIC_CLICKS = "prefstream.clicks"
TOPIC_ITEMS = "prefstream.items"
TOPIC_MODELS = "prefstream.models"
TOPIC_EXPLAIN_REQUESTS = "prefstream.explain-requests"
TOPIC_EXPLANATIONS = "prefstream.explanations"
TOPIC_DEAD_LETTERS = "prefstream.dead-letters"
TOPIC_DRIFT = "prefstream.drift"


class BrokerError(PrefstreamError, RuntimeError):
    """The local broker could not be started, stopped or reached."""


@dataclass(frozen=True)
class TopicSpec:
    """How one topic is created.

    Parameters
    ----------
    partitions : int
        Number of partitions (>= 1).
    config : Mapping[str, str]
        Topic-level configuration (``cleanup.policy``, ``max.message.bytes``, ...), values as
        strings exactly as Kafka's ``CreateTopics`` API takes them.
    """

    partitions: int = 1
    config: Mapping[str, str] = field(default_factory=dict)


#: The standard prefstream topics: name -> :class:`TopicSpec`.
#: Keys of ``prefstream.items`` are item ids and of ``prefstream.models`` model names, so both
#: are compacted: the latest catalog record / snapshot per key survives.
TOPICS: dict[str, TopicSpec] = {
    TOPIC_PREFERENCES: TopicSpec(3),
    TOPIC_CLICKS: TopicSpec(3),
    TOPIC_ITEMS: TopicSpec(1, {"cleanup.policy": "compact"}),
    TOPIC_MODELS: TopicSpec(
        1, {"cleanup.policy": "compact", "max.message.bytes": str(MODEL_SNAPSHOT_MAX_BYTES)}
    ),
    TOPIC_EXPLAIN_REQUESTS: TopicSpec(1),
    TOPIC_EXPLANATIONS: TopicSpec(3),
    TOPIC_DEAD_LETTERS: TopicSpec(1),
    TOPIC_DRIFT: TopicSpec(1),  # drift.v1 records of stream.monitor
}

# --------------------------------------------------------------------------------------------
# connection options
# --------------------------------------------------------------------------------------------

#: environment variable -> kafka-python keyword argument
ENV_OPTIONS: dict[str, str] = {
    "PREFSTREAM_BOOTSTRAP": "bootstrap_servers",
    "PREFSTREAM_SECURITY_PROTOCOL": "security_protocol",
    "PREFSTREAM_SASL_MECHANISM": "sasl_mechanism",
    "PREFSTREAM_SASL_USERNAME": "sasl_plain_username",
    "PREFSTREAM_SASL_PASSWORD": "sasl_plain_password",
    "PREFSTREAM_SSL_CAFILE": "ssl_cafile",
}
# settings keys accepted besides the kafka-python names themselves
_SETTING_ALIASES: dict[str, str] = {
    "bootstrap": "bootstrap_servers",
    "bootstrap_servers": "bootstrap_servers",
    "security_protocol": "security_protocol",
    "sasl_mechanism": "sasl_mechanism",
    "sasl_username": "sasl_plain_username",
    "sasl_plain_username": "sasl_plain_username",
    "sasl_password": "sasl_plain_password",
    "sasl_plain_password": "sasl_plain_password",
    "ssl_cafile": "ssl_cafile",
}
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")


def kafka_client_options(settings_or_env: Mapping[str, Any] | Any | None = None) -> dict[str, Any]:
    """Keyword arguments for kafka-python clients from settings or the environment.

    Parameters
    ----------
    settings_or_env : Mapping or object or None
        Where to read the connection options from:

        * ``None``: the process environment (``os.environ``);
        * a mapping with ``PREFSTREAM_*`` keys (an environment-like dict): those variables,
          ``PREFSTREAM_BOOTSTRAP``, ``PREFSTREAM_SECURITY_PROTOCOL``, ``PREFSTREAM_SASL_MECHANISM``,
          ``PREFSTREAM_SASL_USERNAME``, ``PREFSTREAM_SASL_PASSWORD``, ``PREFSTREAM_SSL_CAFILE``;
        * any other mapping or an object with attributes (e.g. the CLI's settings): keys
          ``bootstrap`` / ``bootstrap_servers``, ``security_protocol``, ``sasl_mechanism``,
          ``sasl_username`` / ``sasl_plain_username``, ``sasl_password`` /
          ``sasl_plain_password``, ``ssl_cafile``.

        Empty or ``None`` values are ignored.

    Returns
    -------
    dict
        ``{"bootstrap_servers": str, ...}``: always the bootstrap servers (default: the local
        broker, :func:`local_bootstrap`, i.e. ``127.0.0.1:9092``), plus only the security options that were given, ready to be
        passed as ``KafkaProducer(**options)``, ``KafkaConsumer(topic, **options)`` or
        ``KafkaAdminClient(**options)``. The protocol and mechanism are upper-cased.

    Raises
    ------
    InvalidParameterError
        If the security protocol or SASL mechanism is unknown, a SASL protocol lacks its
        mechanism, PLAIN/SCRAM lack username or password, or the CA file does not exist.

    Examples
    --------
    >>> kafka_client_options({"PREFSTREAM_BOOTSTRAP": "kafka-1:9093,kafka-2:9093",
    ...                       "PREFSTREAM_SECURITY_PROTOCOL": "sasl_ssl",
    ...                       "PREFSTREAM_SASL_MECHANISM": "SCRAM-SHA-512",
    ...                       "PREFSTREAM_SASL_USERNAME": "alice",
    ...                       "PREFSTREAM_SASL_PASSWORD": "s3cret"})["security_protocol"]
    'SASL_SSL'
    >>> kafka_client_options({})
    {'bootstrap_servers': '127.0.0.1:9092'}
    """
    owner = "kafka_client_options"
    source: Mapping[str, Any] | Any = os.environ if settings_or_env is None else settings_or_env
    raw: dict[str, Any] = {}
    if isinstance(source, Mapping):
        if any(str(k).startswith("PREFSTREAM_") for k in source):
            for env_name, kw in ENV_OPTIONS.items():
                raw[kw] = source.get(env_name)
        else:
            for key, kw in _SETTING_ALIASES.items():
                if source.get(key) not in (None, ""):
                    raw[kw] = source[key]
    else:
        for key, kw in _SETTING_ALIASES.items():
            value = getattr(source, key, None)
            if value not in (None, ""):
                raw[kw] = value
    opts = {k: v for k, v in raw.items() if v not in (None, "")}

    bootstrap = opts.get("bootstrap_servers") or local_bootstrap()
    if isinstance(bootstrap, (list, tuple)):
        bootstrap = ",".join(str(b) for b in bootstrap)
    bootstrap = str(bootstrap).strip()
    servers = [s.strip() for s in bootstrap.split(",") if s.strip()]
    if not servers or any(":" not in s for s in servers):
        raise InvalidParameterError(
            f"The 'bootstrap_servers' parameter of {owner} must be a comma-separated list of "
            f"host:port pairs, e.g. '127.0.0.1:9092'. Got {bootstrap!r} instead. "
            "Set PREFSTREAM_BOOTSTRAP or the 'bootstrap' setting."
        )
    opts["bootstrap_servers"] = ",".join(servers)

    protocol = str(opts.get("security_protocol", "PLAINTEXT")).upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise InvalidParameterError(
            f"The 'security_protocol' parameter of {owner} must be one of {SECURITY_PROTOCOLS}. "
            f"Got {opts.get('security_protocol')!r} instead (PREFSTREAM_SECURITY_PROTOCOL)."
        )
    if "security_protocol" in opts:
        opts["security_protocol"] = protocol
    if "sasl_mechanism" in opts:
        mech = str(opts["sasl_mechanism"]).upper()
        if mech not in SASL_MECHANISMS:
            raise InvalidParameterError(
                f"The 'sasl_mechanism' parameter of {owner} must be one of {SASL_MECHANISMS}. "
                f"Got {opts['sasl_mechanism']!r} instead (PREFSTREAM_SASL_MECHANISM)."
            )
        opts["sasl_mechanism"] = mech
    if protocol.startswith("SASL_"):
        mech = opts.get("sasl_mechanism")
        if mech is None:
            raise InvalidParameterError(
                f"The 'sasl_mechanism' parameter of {owner} must be set when security_protocol "
                f"is {protocol}. Got None instead; set PREFSTREAM_SASL_MECHANISM "
                "(e.g. PLAIN or SCRAM-SHA-512)."
            )
        if mech in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") and not (
            opts.get("sasl_plain_username") and opts.get("sasl_plain_password")
        ):
            raise InvalidParameterError(
                f"SASL mechanism {mech} in {owner} needs a username and a password. Got "
                f"username={opts.get('sasl_plain_username')!r} and "
                f"password={'<set>' if opts.get('sasl_plain_password') else None}; set "
                "PREFSTREAM_SASL_USERNAME and PREFSTREAM_SASL_PASSWORD."
            )
    elif "sasl_mechanism" in opts:
        raise InvalidParameterError(
            f"The 'sasl_mechanism' parameter of {owner} is only used with security_protocol "
            f"SASL_PLAINTEXT or SASL_SSL. Got it with security_protocol {protocol!r}; set "
            "PREFSTREAM_SECURITY_PROTOCOL=SASL_SSL (or SASL_PLAINTEXT)."
        )
    if "ssl_cafile" in opts:
        cafile = str(opts["ssl_cafile"])
        if not os.path.isfile(cafile):
            raise InvalidParameterError(
                f"The 'ssl_cafile' parameter of {owner} must be an existing PEM file. Got "
                f"{cafile!r}, which does not exist (PREFSTREAM_SSL_CAFILE)."
            )
        opts["ssl_cafile"] = cafile
    return opts


def _client_options(bootstrap: str | None, client_options: Mapping[str, Any] | None) -> dict:
    opts = dict(client_options) if client_options else {}
    if bootstrap:
        opts["bootstrap_servers"] = bootstrap
    opts.setdefault("bootstrap_servers", local_bootstrap())
    return opts


# --------------------------------------------------------------------------------------------
# local broker lifecycle
# --------------------------------------------------------------------------------------------


def _script(name: str) -> Path:
    path = KAFKA_DEPLOY_DIR / name
    if not path.is_file():
        raise BrokerError(
            f"{path} not found: the local broker scripts ship with the source tree, not with an "
            "installed wheel. Run from a prefstream checkout (pip install -e .) or point "
            "PREFSTREAM_BOOTSTRAP at an existing cluster."
        )
    return path


def start_broker(timeout: float = 120) -> str:
    """Start the local single-node broker unless it already runs; return its bootstrap address.

    Runs ``deploy/kafka/start.sh`` (which resolves the jars with Maven and formats the storage
    on first use), then checks with kafka-python that the broker answers.

    Parameters
    ----------
    timeout : float
        Seconds to wait for the broker to answer after the JVM started (jar resolution and
        formatting come on top on the first call). Must be > 0.

    Returns
    -------
    str
        The bootstrap address, ``"127.0.0.1:9092"`` unless ``PREFSTREAM_KAFKA_PORT`` is set
        (same as :func:`local_bootstrap`).

    Raises
    ------
    InvalidParameterError
        If ``timeout`` is not positive.
    BrokerError
        If Java/Maven are missing, the port is taken by something else, or the broker does not
        answer in time; the message carries the script's output and the broker log tail.
    """
    if not (isinstance(timeout, (int, float)) and timeout > 0):
        raise InvalidParameterError(
            f"The 'timeout' parameter of start_broker must be a number of seconds > 0. "
            f"Got {timeout!r} instead."
        )
    script = _script("start.sh")
    proc = subprocess.run(
        ["bash", str(script), "--timeout", str(int(max(1, round(timeout))))],
        capture_output=True,
        text=True,
        timeout=timeout + 600,  # jar resolution on a cold cache comes on top
    )
    if proc.returncode != 0:
        raise BrokerError(
            f"deploy/kafka/start.sh failed with exit code {proc.returncode}.\n"
            f"{proc.stderr[-4000:]}\nFix the cause above, or run `bash {script}` by hand."
        )
    lines = proc.stdout.strip().splitlines()
    bootstrap = lines[-1].strip() if lines else local_bootstrap()
    wait_for_broker(bootstrap, timeout=min(timeout, 30))
    return bootstrap


def stop_broker(timeout: float = 60) -> None:
    """Stop the local broker (SIGTERM, SIGKILL after ``PREFSTREAM_KAFKA_STOP_TIMEOUT`` = 30 s).

    A no-op when it is not running.

    Raises
    ------
    BrokerError
        If ``deploy/kafka/stop.sh`` fails.
    """
    proc = subprocess.run(
        ["bash", str(_script("stop.sh"))], capture_output=True, text=True, timeout=timeout
    )
    if proc.returncode != 0:
        raise BrokerError(
            f"deploy/kafka/stop.sh failed with exit code {proc.returncode}:\n{proc.stderr[-4000:]}"
        )


def broker_status(probe: bool = True) -> dict[str, Any]:
    """State of the local broker.

    Parameters
    ----------
    probe : bool
        Also ask the broker over the Kafka protocol (kafka-python ``describe_cluster``, 3 s
        budget) whether it answers.

    Returns
    -------
    dict
        ``running`` (bool: our pid alive and the port open), ``pid`` (int or None),
        ``port_open``, ``bootstrap``, ``version`` (Apache Kafka version), ``home``, ``libs``,
        ``jars_resolved``, ``data_dir``, ``formatted``, ``log_file``; with ``probe`` also
        ``answers`` (bool) and ``cluster_id`` (str or None).
    """
    proc = subprocess.run(
        ["bash", str(_script("status.sh")), "--json"], capture_output=True, text=True, timeout=30
    )
    try:
        status = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError) as exc:
        raise BrokerError(
            f"deploy/kafka/status.sh printed no JSON (exit {proc.returncode}): "
            f"{proc.stdout!r} {proc.stderr[-2000:]!r}"
        ) from exc
    if probe:
        status["answers"] = False
        status["cluster_id"] = None
        if status.get("port_open"):
            try:
                info = wait_for_broker(status["bootstrap"], timeout=3)
                status["answers"] = True
                status["cluster_id"] = info.get("cluster_id")
            except BrokerError:
                pass
    return status


def wait_for_broker(
    bootstrap: str | None = None,
    timeout: float = 30,
    client_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Poll until a broker answers ``describe_cluster``; return the cluster description.

    Parameters
    ----------
    bootstrap : str or None
        ``host:port[,host:port...]``; ``None`` takes it from ``client_options`` or
        :func:`local_bootstrap`.
    timeout : float
        Seconds to keep trying.
    client_options : Mapping or None
        Extra kafka-python options (see :func:`kafka_client_options`).

    Returns
    -------
    dict
        kafka-python's ``describe_cluster()`` answer (``cluster_id``, ``controller_id``,
        ``brokers``).

    Raises
    ------
    BrokerError
        If no broker answered within ``timeout`` seconds (message gives the last error).
    """
    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaConfigurationError

    opts = _client_options(bootstrap, client_options)
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        remaining = deadline - time.monotonic()
        admin = None
        try:
            budget_ms = int(max(500, min(5000, remaining * 1000)))
            admin = KafkaAdminClient(
                client_id="prefstream-probe",
                request_timeout_ms=budget_ms,
                bootstrap_timeout_ms=budget_ms,
                **opts,
            )
            info = admin.describe_cluster()
            if info.get("brokers"):
                return info
            last = BrokerError("cluster answered but reports no broker yet")
        except (KafkaConfigurationError, TypeError) as exc:  # retrying cannot help
            raise BrokerError(f"Invalid Kafka client options {sorted(opts)}: {exc}") from exc
        except Exception as exc:  # kafka-python raises many types while a broker boots
            last = exc
        finally:
            if admin is not None:
                try:
                    admin.close()
                except Exception:
                    pass
        if time.monotonic() >= deadline:
            break
        time.sleep(0.25)
    raise BrokerError(
        f"No Kafka broker answered at {opts['bootstrap_servers']} within {timeout:g} s "
        f"(last error: {last!r}). Start the local one with `prefstream broker start` "
        "(or `make broker-start`), or set PREFSTREAM_BOOTSTRAP to a reachable cluster."
    )


# --------------------------------------------------------------------------------------------
# topics
# --------------------------------------------------------------------------------------------


def _as_spec(name: str, value: Any, partitions: int | Mapping[str, int] | None) -> TopicSpec:
    if isinstance(value, TopicSpec):
        spec = value
    elif value is None or isinstance(value, Mapping):
        spec = TopicSpec(1, dict(value or {}))
    else:
        raise InvalidParameterError(
            f"The 'topics' parameter of create_topics must map topic names to a TopicSpec or a "
            f"config dict. Got {type(value).__name__} for topic {name!r} instead."
        )
    if isinstance(partitions, Mapping):
        if name in partitions:
            spec = TopicSpec(int(partitions[name]), spec.config)
    elif partitions is not None:
        spec = TopicSpec(int(partitions), spec.config)
    if not (isinstance(spec.partitions, int) and spec.partitions >= 1):
        raise InvalidParameterError(
            f"The partition count of topic {name!r} in create_topics must be an int >= 1. "
            f"Got {spec.partitions!r} instead."
        )
    return spec


def create_topics(
    bootstrap: str | None = None,
    topics: Mapping[str, TopicSpec | Mapping[str, str] | None] | None = None,
    partitions: int | Mapping[str, int] | None = None,
    *,
    replication_factor: int = -1,
    client_options: Mapping[str, Any] | None = None,
    timeout: float = 30,
) -> dict[str, str]:
    """Create topics idempotently (an existing topic is left as it is).

    Parameters
    ----------
    bootstrap : str or None
        Bootstrap servers; ``None`` takes them from ``client_options`` or the default.
    topics : Mapping[str, TopicSpec | Mapping[str, str] | None] or None
        Topic name -> :class:`TopicSpec` (partitions + config) or a plain topic config dict
        (then 1 partition unless ``partitions`` says otherwise). ``None`` = the standard
        :data:`TOPICS`.
    partitions : int or Mapping[str, int] or None
        Override of the partition count: one int for all topics, or per topic name.
    replication_factor : int
        Replicas per partition; -1 (default) uses the cluster's ``default.replication.factor``
        (1 on the local broker).
    client_options : Mapping or None
        kafka-python connection options (see :func:`kafka_client_options`) for a secured
        cluster.
    timeout : float
        Seconds for the admin requests.

    Returns
    -------
    dict[str, str]
        Topic name -> ``"created"`` or ``"exists"``. A topic that exists already keeps its
        partitions and config (compare with :func:`describe_topic_configs`).

    Raises
    ------
    InvalidParameterError
        If a spec is malformed.
    BrokerError
        If the broker cannot be reached or refuses a topic (e.g. an invalid config value);
        the message names the topic and Kafka's error.

    Examples
    --------
    A sketch (needs a running broker)::

        from stream.broker import TOPICS, create_topics, start_broker
        create_topics(start_broker(), TOPICS)   # {'prefstream.preferences': 'created', ...}
    """
    from kafka.admin import KafkaAdminClient
    from kafka.errors import TopicAlreadyExistsError

    specs = {n: _as_spec(n, v, partitions) for n, v in (TOPICS if topics is None else topics).items()}
    if not specs:
        return {}
    opts = _client_options(bootstrap, client_options)
    timeout_ms = int(timeout * 1000)
    try:
        admin = KafkaAdminClient(
            client_id="prefstream-admin",
            request_timeout_ms=timeout_ms,
            bootstrap_timeout_ms=timeout_ms,
            **opts,
        )
    except Exception as exc:
        raise BrokerError(
            f"Cannot connect to Kafka at {opts['bootstrap_servers']} to create topics: {exc!r}. "
            "Start the local broker (`prefstream broker start`) or check PREFSTREAM_BOOTSTRAP."
        ) from exc
    result: dict[str, str] = {}
    try:
        request = {
            name: {
                "num_partitions": spec.partitions,
                "replication_factor": replication_factor,
                "configs": {k: str(v) for k, v in spec.config.items()},
            }
            for name, spec in specs.items()
        }
        answer = admin.create_topics(request, timeout_ms=timeout_ms, raise_errors=False)
        errors = []
        for t in answer.get("topics", []):
            code = t.get("error_code", 0)
            if code == 0:
                result[t["name"]] = "created"
            elif code == TopicAlreadyExistsError.errno:
                result[t["name"]] = "exists"
            else:
                errors.append(f"{t['name']}: error {code} {t.get('error_message')}")
        created = [n for n, r in result.items() if r == "created"]
        if created:
            # CreateTopics only says the controller accepted them; wait until every partition
            # has a leader so that producers see the topics at once.
            admin.wait_for_topics(created, timeout_ms=timeout_ms)
        if errors:
            raise BrokerError(
                "Kafka refused to create topics: " + "; ".join(errors)
                + ". Fix the topic config (see Kafka's topic-level configs) and retry."
            )
        missing = set(specs) - set(result)
        if missing:
            raise BrokerError(f"Kafka gave no answer for topics {sorted(missing)}")
    finally:
        admin.close()
    return result


def describe_topic_configs(
    bootstrap: str | None,
    names: list[str] | tuple[str, ...],
    client_options: Mapping[str, Any] | None = None,
) -> dict[str, dict[str, str]]:
    """Non-default configuration of topics, as Kafka reports it.

    Parameters
    ----------
    bootstrap : str or None
        Bootstrap servers.
    names : sequence of str
        Topic names.
    client_options : Mapping or None
        kafka-python connection options.

    Returns
    -------
    dict[str, dict[str, str]]
        Topic -> {config name: value} for the configs set on the topic itself
        (``DYNAMIC_TOPIC_CONFIG``), e.g. ``{"prefstream.models": {"cleanup.policy": "compact",
        "max.message.bytes": "8388608"}}``.
    """
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    opts = _client_options(bootstrap, client_options)
    admin = KafkaAdminClient(client_id="prefstream-admin", **opts)
    try:
        answer = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, n) for n in names]
        )
    finally:
        admin.close()
    out: dict[str, dict[str, str]] = {}
    for name, configs in answer.get("topic", {}).items():
        out[name] = {
            k: v["value"]
            for k, v in configs.items()
            if v.get("config_source") == "DYNAMIC_TOPIC_CONFIG"
        }
    return out
