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

Modules: :mod:`~stream.broker.options` (client options), :mod:`~stream.broker.lifecycle`
(local broker), :mod:`~stream.broker.topics` (standard topics). Import everything from ``stream.broker``.
"""

from __future__ import annotations

from stream.broker.lifecycle import (  # noqa: F401
    KAFKA_DEPLOY_DIR,
    REPO_ROOT,
    BrokerError,
    broker_status,
    start_broker,
    stop_broker,
    wait_for_broker,
)
from stream.broker.options import (  # noqa: F401
    DEFAULT_BOOTSTRAP,
    ENV_OPTIONS,
    SASL_MECHANISMS,
    SECURITY_PROTOCOLS,
    _client_options,
    kafka_client_options,
    local_bootstrap,
)
from stream.broker.topics import (  # noqa: F401
    MODEL_SNAPSHOT_MAX_BYTES,
    TOPIC_CLICKS,
    TOPIC_DEAD_LETTERS,
    TOPIC_DRIFT,
    TOPIC_EXPLAIN_REQUESTS,
    TOPIC_EXPLANATIONS,
    TOPIC_ITEMS,
    TOPIC_MODELS,
    TOPIC_PEOPLE,
    TOPIC_PREFERENCES,
    TOPICS,
    TopicSpec,
    create_topics,
    describe_topic_configs,
    missing_topics,
    topic_max_message_bytes,
)

__all__ = [
    "BrokerError",
    "DEFAULT_BOOTSTRAP",
    "TOPICS",
    "TOPIC_CLICKS",
    "TOPIC_DEAD_LETTERS",
    "TOPIC_DRIFT",
    "TOPIC_EXPLAIN_REQUESTS",
    "TOPIC_EXPLANATIONS",
    "TOPIC_ITEMS",
    "TOPIC_MODELS",
    "TOPIC_PEOPLE",
    "TOPIC_PREFERENCES",
    "TopicSpec",
    "broker_status",
    "create_topics",
    "describe_topic_configs",
    "kafka_client_options",
    "local_bootstrap",
    "missing_topics",
    "start_broker",
    "stop_broker",
    "topic_max_message_bytes",
    "wait_for_broker",
]
