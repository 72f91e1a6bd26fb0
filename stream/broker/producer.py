"""The replay producer: confluent-kafka (librdkafka) configured from kafka-python keyword arguments.

``prefstream replay`` sends with confluent-kafka because it is the fastest of the three Python
clients on this project's machines (``bench/replay_rate.py``: the same pre-encoded Pokémon
events with ``acks=all`` and idempotence, confluent-kafka several times aiokafka and tens of
times kafka-python; the README gives the measured rates). Every other part of prefstream speaks
kafka-python's keyword names (:func:`stream.broker.kafka_client_options`,
:meth:`stream.settings.Settings.producer_options`); :func:`confluent_config` maps them, so the
same settings (bootstrap, SASL, TLS CA file, request size, compression) reach librdkafka.

Examples
--------
>>> cfg = confluent_config({"bootstrap_servers": ["h1:9093", "h2:9093"], "security_protocol": "SASL_SSL",
...                         "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "alice",
...                         "sasl_plain_password": "s3cret", "compression_type": None, "acks": "all"})
>>> cfg["bootstrap.servers"], cfg["sasl.username"], cfg["compression.type"], cfg["acks"]
('h1:9093,h2:9093', 'alice', 'none', 'all')
"""

from __future__ import annotations

from typing import Any, Mapping

from learners.exceptions import InvalidParameterError

__all__ = ["KAFKA_PYTHON_TO_LIBRDKAFKA", "Sender", "confluent_config", "error_name", "record_size"]

#: kafka-python keyword -> librdkafka property
KAFKA_PYTHON_TO_LIBRDKAFKA: dict[str, str] = {
    "bootstrap_servers": "bootstrap.servers",
    "client_id": "client.id",
    "security_protocol": "security.protocol",
    "sasl_mechanism": "sasl.mechanism",
    "sasl_plain_username": "sasl.username",
    "sasl_plain_password": "sasl.password",
    "ssl_cafile": "ssl.ca.location",
    "ssl_certfile": "ssl.certificate.location",
    "ssl_keyfile": "ssl.key.location",
    "ssl_password": "ssl.key.password",
    "acks": "acks",
    "linger_ms": "linger.ms",
    "batch_size": "batch.size",
    "retries": "message.send.max.retries",
    "retry_backoff_ms": "retry.backoff.ms",
    "request_timeout_ms": "request.timeout.ms",
    "delivery_timeout_ms": "delivery.timeout.ms",
    "max_in_flight_requests_per_connection": "max.in.flight.requests.per.connection",
    "enable_idempotence": "enable.idempotence",
    "compression_type": "compression.type",
    "max_request_size": "message.max.bytes",
}
#: kafka-python keywords that have no librdkafka property and are read by the caller instead
CALLER_OPTIONS = ("bootstrap_timeout_ms",)
#: librdkafka's smallest ``message.max.bytes``
_MIN_MESSAGE_MAX_BYTES = 1000
#: bytes librdkafka adds around one record in a v2 batch (record header, batch header) — an
#: upper bound used to size ``message.max.bytes`` so that kafka-python's per-record check holds
RECORD_OVERHEAD = 128


def record_size(key: bytes | None, value: bytes) -> int:
    """Bytes a record counts against ``max_request_size`` (key + value + fixed overhead)."""
    return (len(key) if key else 0) + len(value) + RECORD_OVERHEAD


def confluent_config(options: Mapping[str, Any]) -> dict[str, Any]:
    """librdkafka properties for ``confluent_kafka.Producer`` from kafka-python keyword arguments.

    Parameters
    ----------
    options : mapping
        kafka-python names (table :data:`KAFKA_PYTHON_TO_LIBRDKAFKA`); ``None`` values are
        dropped (``compression_type=None`` becomes ``"none"``). Keys already in librdkafka's
        dotted form pass through unchanged. ``bootstrap_timeout_ms`` is left to the caller.

    Returns
    -------
    dict
        Ready for ``confluent_kafka.Producer(config)``.

    Raises
    ------
    InvalidParameterError
        For a keyword that has no librdkafka equivalent (the message names it).
    """
    out: dict[str, Any] = {}
    for key, value in options.items():
        if key in CALLER_OPTIONS:
            continue
        if "." in key:  # already a librdkafka property
            out[key] = value
            continue
        prop = KAFKA_PYTHON_TO_LIBRDKAFKA.get(key)
        if prop is None:
            raise InvalidParameterError(
                f"The producer option {key!r} has no confluent-kafka (librdkafka) equivalent; known options: "
                f"{sorted(KAFKA_PYTHON_TO_LIBRDKAFKA)} (or pass a librdkafka property such as 'linger.ms').")
        if key == "compression_type":
            value = "none" if value in (None, "") else str(value)
        if value is None:
            continue
        if key == "bootstrap_servers" and not isinstance(value, str):
            value = ",".join(str(v) for v in value)
        if key == "acks":
            value = "all" if value in ("all", -1, "-1") else str(value)
        if key == "max_request_size":
            # kafka-python refuses a record larger than max_request_size before sending; the
            # caller does that check itself (record_size), librdkafka only needs room for it
            value = max(_MIN_MESSAGE_MAX_BYTES, int(value) + RECORD_OVERHEAD)
        out[prop] = value
    if "message.max.bytes" in out and "batch.size" in out:
        out["batch.size"] = min(int(out["batch.size"]), int(out["message.max.bytes"]))
    return out


#: librdkafka error names -> the kafka-python error class names replay reports (and hints at)
_ERROR_NAMES = {
    "MSG_SIZE_TOO_LARGE": "MessageSizeTooLargeError",
    "_MSG_TIMED_OUT": "KafkaTimeoutError",
    "_TIMED_OUT": "KafkaTimeoutError",
    "REQUEST_TIMED_OUT": "KafkaTimeoutError",
    "_TRANSPORT": "KafkaConnectionError",
    "_ALL_BROKERS_DOWN": "NoBrokersAvailable",
    "UNKNOWN_TOPIC_OR_PART": "UnknownTopicOrPartitionError",
    "_UNKNOWN_TOPIC": "UnknownTopicOrPartitionError",
    "TOPIC_AUTHORIZATION_FAILED": "TopicAuthorizationFailedError",
    "_AUTHENTICATION": "AuthenticationFailedError",
    "SASL_AUTHENTICATION_FAILED": "AuthenticationFailedError",
    "_SSL": "SSLError",
}


def error_name(err: Any) -> str:
    """The failure reason of a ``confluent_kafka.KafkaError``, named as kafka-python names it.

    Examples
    --------
    >>> from confluent_kafka import KafkaError
    >>> error_name(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)), error_name(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION))
    ('MessageSizeTooLargeError', 'KafkaError.NOT_LEADER_FOR_PARTITION')
    """
    name = err.name() if hasattr(err, "name") else type(err).__name__
    return _ERROR_NAMES.get(name, f"KafkaError.{name}")


class Sender:
    """A confluent-kafka producer configured with kafka-python options; failures counted by reason.

    Parameters
    ----------
    options : mapping
        kafka-python keyword arguments (mapped by :func:`confluent_config`) over the defaults
        ``acks="all"``, idempotence on, ``linger_ms=20``, 1 MiB batches, no compression, 120 s
        delivery timeout.
    on_failure : callable, optional
        ``on_failure(reason, message)`` per record that could not be delivered (``reason`` in
        kafka-python's error names, :func:`error_name`).
    on_delivered : callable, optional
        ``on_delivered(key, partition, offset)`` per record the broker acknowledged, called from
        :meth:`poll` / :meth:`flush` (a benchmark that checks every offset, ``bench/chaos.py``).
        Without it librdkafka reports failures only (``delivery.report.only.error``), the
        cheapest setting for a replay.

    Attributes
    ----------
    queued : int
        Records handed to librdkafka.
    lost : int
        Queued records that failed afterwards (delivery report or flush timeout); the records
        delivered are ``queued - lost`` once :meth:`flush` returned.
    last_error : str or None
        librdkafka's last client-level error (connection, authentication, TLS).
    """

    DEFAULTS = {"acks": "all", "enable_idempotence": True, "linger_ms": 20, "batch_size": 1 << 20,
                "compression_type": None, "queue.buffering.max.kbytes": 256 * 1024,
                "queue.buffering.max.messages": 1_000_000, "delivery_timeout_ms": 120_000}

    def __init__(self, options: Mapping[str, Any], on_failure=None, on_delivered=None) -> None:
        from confluent_kafka import Producer

        opts = {**self.DEFAULTS, **options}
        self.delivery_timeout_s = float(opts["delivery_timeout_ms"]) / 1000.0
        self.max_request = int(opts.get("max_request_size") or 1_048_576)
        self.queued = self.lost = 0
        self.last_error: str | None = None
        self._on_failure = on_failure or (lambda reason, msg: None)

        def on_delivery(err, msg) -> None:  # failures only unless on_delivered is given
            if err is not None:
                self.lost += 1
                self._on_failure(error_name(err), err.str())
            elif on_delivered is not None:
                on_delivered(msg.key(), msg.partition(), msg.offset())

        def on_error(err) -> None:
            self.last_error = f"{error_name(err)}: {err.str()}"

        cfg = confluent_config(opts)
        # failures reach on_failure / last_error (and the caller's message): no librdkafka console log
        cfg.update({"delivery.report.only.error": on_delivered is None, "on_delivery": on_delivery,
                    "error_cb": on_error, "log_level": 2, "allow.auto.create.topics": False})  # never create topics
        self._p = Producer(cfg)
        self.poll = self._p.poll

    def probe(self, timeout_s: float) -> bool:
        """True when a broker answered a metadata request within ``timeout_s`` seconds."""
        from confluent_kafka import KafkaException

        try:
            self._p.list_topics(timeout=timeout_s)
        except KafkaException:
            return False
        return True

    def send(self, topic: str, key: bytes | None, value: bytes, partition: int | None = None) -> bool:
        """Queue one record (waiting while librdkafka's queue is full); False when refused at once.

        ``partition`` None: the key's partition (librdkafka's default partitioner).
        """
        from confluent_kafka import KafkaException

        size = record_size(key, value)
        if size > self.max_request:  # kafka-python's check before sending, with its words
            self._on_failure("MessageSizeTooLargeError", f"The message is {size} bytes when serialized which is "
                             "larger than the maximum request size you have configured with the max_request_size "
                             f"configuration ({self.max_request})")
            return False
        while True:
            try:
                self._p.produce(topic, value, key, -1 if partition is None else partition)
                self.queued += 1
                return True
            except BufferError:  # the queue is full: let librdkafka send
                self._p.poll(0.05)
            except KafkaException as exc:
                self._on_failure(error_name(exc.args[0]), exc.args[0].str())
                return False

    def send_many(self, topic: str, keys: list[bytes], values: list[bytes]) -> None:
        """Queue records ``(keys[i], values[i])`` as :meth:`send` does, in a loop without a call per record.

        A record too large for ``max_request_size``, a full queue or a refusal takes the
        :meth:`send` path for that record (its failure counted with its reason).
        """
        if not keys:
            return
        if max(map(len, keys)) + max(map(len, values)) + RECORD_OVERHEAD > self.max_request:
            for k, v in zip(keys, values):  # one or more too large: each record checked
                self.send(topic, k, v)
            return
        produce, send, redo = self._p.produce, self.send, 0
        for k, v in zip(keys, values):
            try:
                produce(topic, v, k)
            except Exception:  # BufferError (queue full) or KafkaException: send() waits or reports
                redo += 1
                send(topic, k, v)
        self.queued += len(keys) - redo

    def flush(self, timeout_s: float | None = None) -> int:
        """Wait for every queued record; the ones still pending after the timeout count as lost."""
        left = self._p.flush(self.delivery_timeout_s + 10 if timeout_s is None else timeout_s)
        for _ in range(left):
            self.lost += 1
            self._on_failure("KafkaTimeoutError", "the broker did not acknowledge the record in time")
        return left

    @property
    def delivered(self) -> int:
        """Records acknowledged so far (exact once :meth:`flush` returned)."""
        return self.queued - self.lost
