"""The standard prefstream topics and their creation / inspection through the admin API."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from learners.exceptions import InvalidParameterError
from stream.broker.lifecycle import BrokerError
from stream.broker.options import _client_options

__all__ = ["MODEL_SNAPSHOT_MAX_BYTES", "TOPICS", "TopicSpec", "create_topics", "describe_topic_configs",
           "missing_topics", "topic_max_message_bytes"]

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
TOPIC_PEOPLE = "prefstream.people"


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
    TOPIC_DRIFT: TopicSpec(1),  # drift.v1 records of stream.monitoring.monitor
    # per-person state (stream.contract.people), key <model>@<user_id>: a person record goes to the partition of
    # its input partition's number, so as many partitions as the preference topic (docs/personal.md)
    TOPIC_PEOPLE: TopicSpec(3, {"cleanup.policy": "compact"}),
}

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


def missing_topics(
    bootstrap: str | None,
    names: list[str] | tuple[str, ...],
    client_options: Mapping[str, Any] | None = None,
    timeout: float = 10,
) -> list[str]:
    """The topics of ``names`` that do not exist, in the given order (one metadata request).

    A worker calls it before it joins its group: a consumer subscribed to a missing topic would
    have the broker auto-create it (with one partition) or wait on it.

    Raises
    ------
    BrokerError
        If the broker cannot be reached.
    """
    from kafka.admin import KafkaAdminClient

    opts = _client_options(bootstrap, client_options)
    timeout_ms = int(timeout * 1000)
    try:
        admin = KafkaAdminClient(client_id="prefstream-admin", request_timeout_ms=timeout_ms,
                                 bootstrap_timeout_ms=timeout_ms, **opts)
    except Exception as exc:
        raise BrokerError(f"Cannot connect to Kafka at {opts['bootstrap_servers']} to list topics: {exc!r}.") from exc
    try:
        present = set(admin.list_topics())
    except Exception as exc:
        raise BrokerError(f"Kafka at {opts['bootstrap_servers']} did not list its topics: {exc!r}.") from exc
    finally:
        admin.close()
    return [n for n in dict.fromkeys(names) if n not in present]


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


def topic_max_message_bytes(
    topic: str,
    bootstrap: str | None = None,
    client_options: Mapping[str, Any] | None = None,
) -> int | None:
    """The effective ``max.message.bytes`` of ``topic`` (its own setting or the broker default).

    Returns
    -------
    int or None
        Bytes, or ``None`` when the broker does not report it (e.g. the topic does not exist).
    """
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    opts = {**_client_options(bootstrap, client_options), "client_id": "prefstream-admin"}
    admin = KafkaAdminClient(**opts)
    try:
        answer = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    finally:
        admin.close()
    entry = (answer.get("topic", {}).get(topic) or {}).get("max.message.bytes")
    try:
        return int(entry["value"]) if entry and entry.get("value") is not None else None
    except (TypeError, ValueError):
        return None
