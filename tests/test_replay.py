"""Replay: file layouts (no Kafka), token bucket, and round trips through the real broker."""

from __future__ import annotations

import json
import time

import pytest

from learners.exceptions import InvalidInputError, InvalidParameterError
from stream.contract import ItemCatalog, parse_click_session, parse_item, parse_preference
from stream.event_files import iter_records
from stream.replay import BrokerUnavailable, ReplayResult, TokenBucket, replay

PREF_CSV = """event_id,timestamp,outcome,left_id,right_id,left.rating,left.price,right.rating,right.price,context.age
ev-1,1714564800,1,sku-1,sku-2,4.5,20,3.0,12,31
ev-2,2024-05-01T12:00:05Z,-1,sku-1,sku-2,,,,,
ev-3,1714564810,2,sku-1,sku-2,,,,,
ev-4,1714564811,1,,,4.5,abc,3,12,
ev-5,1714564812,0,,,1,1,1,,
,,1,,,1,2,3,4,
ev-7,1714564813,1,,,,,1,2,
"""


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


# --------------------------------------------------------------------- file layouts
def test_preference_csv_layout(tmp_path):
    p = write(tmp_path, "prefs.csv", PREF_CSV)
    recs = list(iter_records(p, "preference", on_error="skip"))
    assert [line for line, _ in recs] == [2, 3, 7]
    (_, r1), (_, r2), (_, r6) = recs
    assert r1 == {"schema_version": 1, "event_id": "ev-1", "timestamp": 1714564800.0,
                  "left": {"features": {"rating": 4.5, "price": 20.0}, "id": "sku-1"},
                  "right": {"features": {"rating": 3.0, "price": 12.0}, "id": "sku-2"},
                  "outcome": 1, "context": {"age": 31.0}}
    assert r2["left"] == {"id": "sku-1"} and r2["outcome"] == -1 and "context" not in r2
    assert r2["timestamp"] == "2024-05-01T12:00:05Z"
    assert r6["event_id"] == "prefs:7"  # default id: <file stem>:<line>
    # records are contract-valid: they parse (ids through a catalog)
    cat = ItemCatalog()
    cat.upsert({"schema_version": 1, "item_id": "sku-1", "features": {"rating": 4.5, "price": 20.0}})
    cat.upsert({"schema_version": 1, "item_id": "sku-2", "features": {"rating": 3.0, "price": 12.0}})
    ex = parse_preference(json.dumps(r2).encode(), cat)
    assert ex.left == {"rating": 4.5, "price": 20.0} and ex.timestamp == 1714564805.0


def test_skips_report_line_and_reason(tmp_path):
    p = write(tmp_path, "prefs.csv", PREF_CSV)
    with pytest.raises(InvalidInputError, match=r"prefs.csv, line 4: invalid_outcome"):
        list(iter_records(p, "preference"))
    from stream.event_files import _iter_raw

    skipped = {line: why for line, rec, why in _iter_raw(p, "preference") if rec is None}
    assert set(skipped) == {4, 5, 6, 8}
    assert skipped[4].startswith("invalid_outcome")
    assert "left.price" in skipped[5] and "abc" in skipped[5]
    assert "right.price" in skipped[6]
    assert "neither feature values" in skipped[8]


def test_jsonl_layout_defaults_and_skips(tmp_path):
    lines = [
        {"event_id": "a", "timestamp": 1, "left": {"features": {"x": 1}}, "right": {"features": {"x": 2}}, "outcome": 1},
        {"left": {"id": "i1"}, "right": {"id": "i2"}, "outcome": -1},
        "not json",
        '{"left": {"features": {"x": NaN}}, "right": {"features": {"x": 2}}, "outcome": 1}',
        [1, 2],
        {"schema_version": 2, "left": {"id": "i1"}, "right": {"id": "i2"}, "outcome": 1},
    ]
    text = "\n".join(l if isinstance(l, str) else json.dumps(l) for l in lines) + "\n\n"
    p = write(tmp_path, "events.jsonl", text)
    t0 = time.time()
    recs = list(iter_records(p, "preference", on_error="skip"))
    assert [line for line, _ in recs] == [1, 2]
    assert recs[1][1]["event_id"] == "events:2" and recs[1][1]["schema_version"] == 1
    assert abs(recs[1][1]["timestamp"] - t0) < 60
    from stream.event_files import _iter_raw

    why = {line: w for line, rec, w in _iter_raw(p, "preference") if rec is None}
    assert why[3].startswith("not valid JSON") and "non_finite" in why[4]
    assert why[5].startswith("not_an_object") and why[6].startswith("unknown_schema_version")


def test_click_and_item_csv_layouts(tmp_path):
    clicks = write(tmp_path, "clicks.csv",
                   "session_id,timestamp,user_id,shown,clicked,context.age\n"
                   "s1,100,u1,a|b|c,a,30\n"
                   "s2,101,,a|b,,\n"
                   "s3,102,,a|b,z,\n"
                   ",103,,a,a,\n")
    recs = list(iter_records(clicks, "click", on_error="skip"))
    assert [r["session_id"] for _, r in recs] == ["s1", "s2"]
    s1 = recs[0][1]
    assert s1["shown"] == [{"id": "a"}, {"id": "b"}, {"id": "c"}] and s1["clicked"] == ["a"]
    assert s1["user_id"] == "u1" and s1["context"] == {"age": 30.0}
    items = write(tmp_path, "items.csv", "item_id,features.x,y\na,1,2\nb,,\nc,1,\n")
    irecs = list(iter_records(items, "item", on_error="skip"))
    assert [r for _, r in irecs] == [
        {"schema_version": 1, "item_id": "a", "features": {"x": 1.0, "y": 2.0}},
        {"schema_version": 1, "item_id": "b", "features": None},
    ]
    cat = ItemCatalog()
    for _, r in irecs:
        cat.upsert(parse_item(json.dumps(r).encode()))
    cat.upsert({"schema_version": 1, "item_id": "b", "features": {"x": 0.0, "y": 0.0}})
    cat.upsert({"schema_version": 1, "item_id": "c", "features": {"x": 5.0, "y": 0.0}})
    pairs = parse_click_session(json.dumps(s1).encode(), cat)
    assert [p.event_id for p in pairs] == ["s1:a>b", "s1:a>c"]


def test_bad_arguments(tmp_path):
    with pytest.raises(InvalidParameterError, match="does not exist"):
        list(iter_records(tmp_path / "nope.csv"))
    p = write(tmp_path, "x.parquet", "")
    with pytest.raises(InvalidParameterError, match=".csv, .jsonl"):
        list(iter_records(p))
    p = write(tmp_path, "x.csv", "a\n")
    with pytest.raises(InvalidParameterError, match="kind"):
        list(iter_records(p, "pairs"))
    with pytest.raises(InvalidParameterError, match="on_error"):
        list(iter_records(p, "preference", on_error="ignore"))
    with pytest.raises(InvalidParameterError, match="rate"):
        replay(p, "127.0.0.1:9", "t", rate=0)
    assert list(iter_records(write(tmp_path, "empty.csv", ""), on_error="skip")) == []


def test_token_bucket_paces_with_fake_clock():
    now = [0.0]
    bucket = TokenBucket(100.0, burst=5, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    stamps = []
    for _ in range(105):
        bucket.acquire()
        stamps.append(now[0])
    # the burst goes at once, then exactly 1/rate apart: 100 tokens after the burst take 1 s
    assert stamps[4] == 0.0
    assert stamps[-1] == pytest.approx(1.0, abs=1e-9)
    gaps = [b - a for a, b in zip(stamps[5:], stamps[6:])]
    assert all(g == pytest.approx(0.01, abs=1e-9) for g in gaps)
    with pytest.raises(InvalidParameterError):
        TokenBucket(-1)


def test_result_summary():
    r = ReplayResult(sent=10, skipped=2, failed=1, seconds=2.0)
    assert r.events_per_s == 5.0
    assert r.summary() == "sent=10 skipped=2 failed=1 seconds=2.000 events_per_s=5.0"


# --------------------------------------------------------------- the real broker
def _consume_all(kafka_options, topic, n, timeout=20.0):
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=1000, **kafka_options)
    out, deadline = [], time.time() + timeout
    try:
        while len(out) < n and time.time() < deadline:
            for msg in consumer:
                out.append(msg)
                if len(out) >= n:
                    break
    finally:
        consumer.close()
    return out


def test_replay_round_trip_through_broker(tmp_path, kafka_bootstrap, kafka_options, unique_topic):
    topic = unique_topic("replay", partitions=2)
    p = write(tmp_path, "prefs.csv", PREF_CSV)
    client = {k: v for k, v in kafka_options.items() if k != "bootstrap_servers"}
    res = replay(p, kafka_bootstrap, topic, progress=False, client_options=client)
    assert (res.sent, res.skipped, res.failed) == (3, 4, 0)
    assert [line for line, _ in res.skipped_lines] == [4, 5, 6, 8]
    msgs = _consume_all(kafka_options, topic, 3)
    assert sorted(m.key for m in msgs) == [b"ev-1", b"ev-2", b"prefs:7"]
    cat = ItemCatalog()
    cat.upsert({"schema_version": 1, "item_id": "sku-1", "features": {"rating": 4.5, "price": 20.0}})
    cat.upsert({"schema_version": 1, "item_id": "sku-2", "features": {"rating": 3.0, "price": 12.0}})
    parsed = {m.key: parse_preference(m.value, cat) for m in msgs}
    assert parsed[b"ev-1"].context == {"age": 31.0} and parsed[b"ev-2"].outcome == -1
    # keys decide partitions: the same event id always lands on the same partition
    res2 = replay(p, kafka_bootstrap, topic, progress=False, client_options=client)
    again = _consume_all(kafka_options, topic, 6)
    part = {}
    for m in again:
        part.setdefault(m.key, set()).add(m.partition)
    assert res2.sent == 3 and all(len(v) == 1 for v in part.values())


def test_replay_rate_limit_and_items(tmp_path, kafka_bootstrap, kafka_options, unique_topic):
    topic = unique_topic("items", config={"cleanup.policy": "compact"})
    rows = "item_id,x\n" + "".join(f"i{k},{k}\n" for k in range(30))
    p = write(tmp_path, "items.csv", rows)
    client = {k: v for k, v in kafka_options.items() if k != "bootstrap_servers"}
    res = replay(p, kafka_bootstrap, topic, rate=100.0, kind="item", progress=True, client_options=client)
    assert (res.sent, res.skipped, res.failed) == (30, 0, 0)
    assert res.seconds >= 0.25  # 30 records at 100/s with a burst of 1 take ≥ 0.29 s
    msgs = _consume_all(kafka_options, topic, 30)
    cat = ItemCatalog()
    for m in msgs:
        cat.upsert(parse_item(m.value))
    assert len(cat) == 30 and cat.get("i7") == {"x": 7.0}


def test_producer_errors_count_as_failed(tmp_path, kafka_bootstrap, kafka_options, unique_topic):
    topic = unique_topic("fail")
    lines = "".join(json.dumps({"event_id": f"e{i}", "timestamp": 1, "left": {"features": {"x": i}},
                                "right": {"features": {"x": 0}}, "outcome": 1, "context": {f"c{j}": j for j in range(40)}}) + "\n"
                    for i in range(5))
    p = write(tmp_path, "big.jsonl", lines)
    client = {k: v for k, v in kafka_options.items() if k != "bootstrap_servers"}
    client["max_request_size"] = 200  # every record is larger than this: the producer refuses them
    res = replay(p, kafka_bootstrap, topic, progress=False, client_options=client)
    assert (res.sent, res.skipped, res.failed) == (0, 0, 5)
    assert res.errors and "MessageSizeTooLarge" in res.errors[0]


def test_unreachable_broker(tmp_path):
    p = write(tmp_path, "one.jsonl", json.dumps({"left": {"id": "a"}, "right": {"id": "b"}, "outcome": 1}) + "\n")
    t0 = time.time()
    with pytest.raises(BrokerUnavailable, match="127.0.0.1:9"):
        replay(p, "127.0.0.1:9", "t", progress=False, client_options={"bootstrap_timeout_ms": 1500})
    assert time.time() - t0 < 20


def test_sender_reports_every_acknowledged_offset_when_asked(kafka_bootstrap, kafka_options, unique_topic):
    from stream.broker.producer import Sender

    topic = unique_topic("acks", partitions=2)
    acked = []
    sender = Sender(dict(kafka_options), on_delivered=lambda key, partition, offset: acked.append((key, partition, offset)))
    for i in range(30):
        assert sender.send(topic, f"k{i}".encode(), b"{}", partition=i % 2)
        sender.poll(0)
    assert sender.flush(30) == 0 and sender.delivered == 30
    # each record once, on the partition asked for, at consecutive offsets (one producer, acks=all)
    assert sorted(acked) == sorted((f"k{i}".encode(), i % 2, i // 2) for i in range(30))
