"""stream.metrics: every name built once, buckets in range, the HTTP endpoint."""

from __future__ import annotations

import socket
import urllib.request

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from learners.exceptions import InvalidParameterError
from stream.metrics import EXPLAIN_BUCKETS, LEARN_BUCKETS, METRIC_NAMES, REFIT_BUCKETS, build_metrics, start_metrics_server


def test_every_documented_name_is_exposed_exactly():
    m = build_metrics(CollectorRegistry())
    text = generate_latest(m.registry).decode()
    helps = sorted(line.split()[2] for line in text.splitlines() if line.startswith("# HELP"))
    assert helps == sorted(METRIC_NAMES)


def test_labels_and_types():
    m = build_metrics(CollectorRegistry())
    m.consumer_lag.labels(topic="t", partition="0").set(5)
    m.dead_letters.labels(reason="oversize").inc(2)
    m.learn_latency.labels(model="linear-bt").observe(3e-5)
    text = generate_latest(m.registry).decode()
    assert 'prefstream_consumer_lag{partition="0",topic="t"} 5.0' in text
    assert 'prefstream_dead_letters_total{reason="oversize"} 2.0' in text
    assert "# TYPE prefstream_learn_latency_seconds histogram" in text
    # 30 µs falls in the (25 µs, 50 µs] bucket
    assert 'prefstream_learn_latency_seconds_bucket{le="2.5e-05",model="linear-bt"} 0.0' in text
    assert 'prefstream_learn_latency_seconds_bucket{le="5e-05",model="linear-bt"} 1.0' in text


def test_bucket_ranges_match_their_units():
    assert LEARN_BUCKETS[0] <= 1e-5 and LEARN_BUCKETS[-1] >= 30  # µs learn steps … catch-up waits of seconds
    assert EXPLAIN_BUCKETS[0] <= 1e-3 and EXPLAIN_BUCKETS[-1] >= 10
    assert REFIT_BUCKETS[0] >= 0.1 and REFIT_BUCKETS[-1] >= 600  # seconds–minutes
    for b in (LEARN_BUCKETS, EXPLAIN_BUCKETS, REFIT_BUCKETS):
        assert list(b) == sorted(b)


def test_two_registries_do_not_collide_and_bad_prefix_is_rejected():
    build_metrics(CollectorRegistry())
    build_metrics(CollectorRegistry())
    with pytest.raises(InvalidParameterError, match="prefix"):
        build_metrics(CollectorRegistry(), prefix="bad-prefix")


def test_endpoint_serves_the_registry_and_port_zero_disables():
    m = build_metrics(CollectorRegistry())
    m.events_learned.labels(model="linear-bt").inc(7)
    assert start_metrics_server(0, m.registry) is None
    assert start_metrics_server(None, m.registry) is None
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert start_metrics_server(port, m.registry) == port
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        body = r.read().decode()
    assert 'prefstream_events_learned_total{model="linear-bt"} 7.0' in body
    with pytest.raises(OSError, match="--metrics-port"):
        start_metrics_server(port, m.registry)
