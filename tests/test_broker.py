"""The real local Kafka broker (deploy/kafka) and stream.broker: topics, round trips, limits.

Every test here that talks to Kafka uses the real broker (no mock): .ci/run starts it, and
locally the ``kafka_bootstrap`` fixture starts it when it is not running.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest

from learners.exceptions import InvalidParameterError
from stream.broker import (
    DEFAULT_BOOTSTRAP,
    MODEL_SNAPSHOT_MAX_BYTES,
    TOPIC_ITEMS,
    TOPIC_MODELS,
    TOPICS,
    BrokerError,
    TopicSpec,
    broker_status,
    create_topics,
    describe_topic_configs,
    kafka_client_options,
    local_bootstrap,
    start_broker,
    wait_for_broker,
)


def _consume_all(options, topic, n_expected, timeout_s=30.0, **extra):
    """Read ``n_expected`` records of ``topic`` from the beginning, bounded by ``timeout_s``."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        topic,
        group_id=f"test-{uuid.uuid4().hex[:8]}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **extra,
        **options,
    )
    records = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(records) < n_expected and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(batch)
    finally:
        consumer.close()
    return records


# ------------------------------------------------------------------ standard topics (no broker)


def test_standard_topics_table():
    expected = {
        "prefstream.preferences": (3, {}),
        "prefstream.clicks": (3, {}),
        "prefstream.items": (1, {"cleanup.policy": "compact"}),
        "prefstream.models": (1, {"cleanup.policy": "compact", "max.message.bytes": "8388608"}),
        "prefstream.explain-requests": (1, {}),
        "prefstream.explanations": (3, {}),
        "prefstream.dead-letters": (1, {}),
        "prefstream.drift": (1, {}),
        "prefstream.people": (3, {"cleanup.policy": "compact"}),
    }
    assert {n: (s.partitions, dict(s.config)) for n, s in TOPICS.items()} == expected
    assert MODEL_SNAPSHOT_MAX_BYTES == 8 * 1024 * 1024


# ------------------------------------------------------------------ connection options (no broker)


def test_broker_module_doctests(monkeypatch):
    import doctest

    import stream.broker.lifecycle
    import stream.broker.options
    import stream.broker.topics

    monkeypatch.delenv("PREFSTREAM_KAFKA_PORT", raising=False)
    attempted = 0
    for mod in (stream.broker.options, stream.broker.lifecycle, stream.broker.topics):
        result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, mod.__name__
        attempted += result.attempted
    assert attempted >= 2


def test_client_options_from_env_mapping(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    env = {
        "PREFSTREAM_BOOTSTRAP": " kafka-1:9093 , kafka-2:9093 ",
        "PREFSTREAM_SECURITY_PROTOCOL": "sasl_ssl",
        "PREFSTREAM_SASL_MECHANISM": "scram-sha-512",
        "PREFSTREAM_SASL_USERNAME": "alice",
        "PREFSTREAM_SASL_PASSWORD": "s3cret",
        "PREFSTREAM_SSL_CAFILE": str(ca),
        "PREFSTREAM_CACHE": "/ignored",
    }
    assert kafka_client_options(env) == {
        "bootstrap_servers": "kafka-1:9093,kafka-2:9093",
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
        "sasl_plain_password": "s3cret",
        "ssl_cafile": str(ca),
    }


def test_client_options_from_settings_object_and_defaults():
    class Settings:  # attribute names of stream.settings.Settings
        bootstrap_servers = "b:9092"
        security_protocol = "SASL_PLAINTEXT"
        sasl_mechanism = "PLAIN"
        sasl_username = "u"
        sasl_password = "p"
        ssl_cafile = None

    assert kafka_client_options(Settings()) == {
        "bootstrap_servers": "b:9092",
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "u",
        "sasl_plain_password": "p",
    }
    assert kafka_client_options({}) == {"bootstrap_servers": local_bootstrap()}
    assert kafka_client_options({"bootstrap": ["h1:1", "h2:2"]}) == {"bootstrap_servers": "h1:1,h2:2"}


@pytest.mark.parametrize(
    "env, match",
    [
        ({"PREFSTREAM_SECURITY_PROTOCOL": "TLS"}, "security_protocol"),
        ({"PREFSTREAM_SECURITY_PROTOCOL": "SASL_SSL"}, "sasl_mechanism"),
        ({"PREFSTREAM_SECURITY_PROTOCOL": "SASL_SSL", "PREFSTREAM_SASL_MECHANISM": "MD5"}, "sasl_mechanism"),
        ({"PREFSTREAM_SECURITY_PROTOCOL": "SASL_SSL", "PREFSTREAM_SASL_MECHANISM": "PLAIN",
          "PREFSTREAM_SASL_USERNAME": "u"}, "username and a password"),
        ({"PREFSTREAM_SASL_MECHANISM": "PLAIN"}, "only used with"),
        ({"PREFSTREAM_SSL_CAFILE": "/nonexistent/ca.pem"}, "ssl_cafile"),
        ({"PREFSTREAM_BOOTSTRAP": "localhost"}, "host:port"),
    ],
)
def test_client_options_reject_bad_settings(env, match):
    with pytest.raises(InvalidParameterError, match=match):
        kafka_client_options(env)


def test_local_bootstrap_follows_the_port_setting(monkeypatch):
    monkeypatch.delenv("PREFSTREAM_KAFKA_PORT", raising=False)
    assert local_bootstrap() == DEFAULT_BOOTSTRAP == "127.0.0.1:9092"
    monkeypatch.setenv("PREFSTREAM_KAFKA_PORT", "19092")
    assert local_bootstrap() == "127.0.0.1:19092"
    assert kafka_client_options({})["bootstrap_servers"] == "127.0.0.1:19092"


def test_unreachable_broker_fails_fast_with_advice():
    t0 = time.monotonic()
    with pytest.raises(BrokerError, match="PREFSTREAM_BOOTSTRAP"):
        wait_for_broker("127.0.0.1:1", timeout=1.0)
    assert time.monotonic() - t0 < 10


# ------------------------------------------------------------------ real broker


def test_produce_consume_round_trip(kafka_options, unique_topic):
    from kafka import KafkaProducer

    topic = unique_topic("roundtrip", partitions=3)
    producer = KafkaProducer(acks="all", **kafka_options)
    sent = {}
    for i in range(60):
        key = f"user-{i % 7}"
        value = json.dumps({"i": i, "key": key}).encode()
        meta = producer.send(topic, key=key.encode(), value=value).get(timeout=30)
        sent[i] = (key, meta.partition, meta.offset)
    producer.flush()
    producer.close()

    records = _consume_all(kafka_options, topic, 60)
    got = {json.loads(r.value)["i"]: (r.key.decode(), r.partition, r.offset) for r in records}
    assert got == sent  # every record exactly once, at the partition/offset the broker acked
    # one key -> one partition, and per-partition order = send order
    by_key = {}
    for i in sorted(sent):
        by_key.setdefault(sent[i][0], set()).add(sent[i][1])
    assert all(len(p) == 1 for p in by_key.values())
    assert len({p for _, p, _ in sent.values()}) > 1  # 7 keys spread over the 3 partitions
    for part in range(3):
        offs = [got[i][2] for i in sorted(got) if got[i][1] == part]
        assert offs == sorted(offs)


def test_create_topics_is_idempotent_and_applies_specs(kafka_options):
    from kafka.admin import KafkaAdminClient

    tag = uuid.uuid4().hex[:10]
    specs = {
        f"test.idem.models.{tag}": TOPICS[TOPIC_MODELS],
        f"test.idem.items.{tag}": TOPICS[TOPIC_ITEMS],
        f"test.idem.plain.{tag}": {"retention.ms": "3600000"},
    }
    try:
        first = create_topics(None, specs, partitions={f"test.idem.plain.{tag}": 2},
                              client_options=kafka_options)
        assert first == {n: "created" for n in specs}
        second = create_topics(None, specs, client_options=kafka_options)
        assert second == {n: "exists" for n in specs}

        configs = describe_topic_configs(None, list(specs), client_options=kafka_options)
        assert configs[f"test.idem.models.{tag}"] == {
            "cleanup.policy": "compact",
            "max.message.bytes": "8388608",
        }
        assert configs[f"test.idem.items.{tag}"] == {"cleanup.policy": "compact"}
        assert configs[f"test.idem.plain.{tag}"] == {"retention.ms": "3600000"}

        admin = KafkaAdminClient(**kafka_options)
        try:
            parts = {t["name"]: len(t["partitions"]) for t in admin.describe_topics(list(specs))}
            admin.delete_topics(list(specs))
        finally:
            admin.close()
        assert parts == {f"test.idem.models.{tag}": 1, f"test.idem.items.{tag}": 1,
                         f"test.idem.plain.{tag}": 2}
    except BaseException:
        try:
            admin = KafkaAdminClient(**kafka_options)
            admin.delete_topics(list(specs))
            admin.close()
        except Exception:
            pass
        raise


def test_invalid_topic_config_is_reported(kafka_options):
    name = f"test.badconf.{uuid.uuid4().hex[:10]}"
    with pytest.raises(BrokerError, match="cleanup.policy"):
        create_topics(None, {name: {"cleanup.policy": "sometimes"}}, client_options=kafka_options)


def test_model_topic_takes_an_8_mib_snapshot_and_refuses_more(kafka_options, unique_topic):
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    spec = TOPICS[TOPIC_MODELS]
    topic = unique_topic("models", spec.partitions, dict(spec.config))
    rng = __import__("numpy").random.default_rng(7)
    snapshot = rng.bytes(MODEL_SNAPSHOT_MAX_BYTES - 4096)  # incompressible, just under the limit
    producer = KafkaProducer(max_request_size=16 * 1024 * 1024, **kafka_options)
    try:
        producer.send(topic, key=b"linear-bt", value=snapshot).get(timeout=60)
        with pytest.raises(KafkaError, match="(?i)too ?large"):
            producer.send(topic, key=b"linear-bt", value=rng.bytes(MODEL_SNAPSHOT_MAX_BYTES + 65536)).get(timeout=60)
    finally:
        producer.close()
    records = _consume_all(kafka_options, topic, 1, max_partition_fetch_bytes=16 * 1024 * 1024,
                           fetch_max_bytes=32 * 1024 * 1024)
    assert len(records) == 1 and records[0].value == snapshot


def test_transactions_work_on_the_single_node(kafka_options, unique_topic):
    """transaction.state.log.replication.factor=1 / min.isr=1 let exactly-once producers run."""
    from kafka import KafkaProducer

    topic = unique_topic("txn", partitions=1)
    producer = KafkaProducer(transactional_id=f"test-txn-{uuid.uuid4().hex[:8]}", **kafka_options)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(3):
            producer.send(topic, value=b"committed-%d" % i)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic, value=b"aborted")
        producer.flush()
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(topic, value=b"committed-3")
        producer.commit_transaction()
    finally:
        producer.close()
    records = _consume_all(kafka_options, topic, 4, isolation_level="read_committed")
    assert [r.value for r in records] == [b"committed-%d" % i for i in range(4)]


def test_local_broker_status_and_idempotent_start(kafka_bootstrap):
    if kafka_bootstrap != local_bootstrap():
        pytest.skip("tests run against an external cluster, not the local broker")
    status = broker_status()
    if status["pid"] is None:
        pytest.skip(f"a broker answers on {kafka_bootstrap} but was not started by deploy/kafka/start.sh")
    assert status["running"] and status["answers"] and status["jars_resolved"] and status["formatted"]
    assert status["cluster_id"] == wait_for_broker(kafka_bootstrap, timeout=10)["cluster_id"]
    t0 = time.monotonic()
    assert start_broker() == kafka_bootstrap  # already running: returns at once, same process
    assert time.monotonic() - t0 < 15
    assert broker_status(probe=False)["pid"] == status["pid"]
