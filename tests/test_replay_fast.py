"""Replay's preference CSV encoder (stream.adapters.record_bytes) against the row path, its oracle, and the producer options."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from learners.exceptions import InvalidParameterError
from stream.adapters import record_bytes as replay_csv
from stream.broker.producer import confluent_config, error_name
from stream.event_files import _iter_chunks, _iter_raw

HEADER = "event_id,timestamp,outcome,left_id,right_id,left.a,left.b,right.a,right.b,context.c,weight\n"
BROKEN = [
    "e1,1700000000,1,x,y,1,2,3,4,5,1\n",
    "\n",                                    # blank line: skipped, counted as a line
    "e2,1700000001,-1,x,y,1,,3,4,5,1\n",     # empty feature cell
    "e3,1700000002,1,x,y,nan,2,3,4,5,1\n",    # non-finite
    "e4,1700000003,1,x,y,1e16,2,3,4,5,1\n",   # out of range
    "e5,1700000004,2,x,y,1,2,3,4,5,1\n",      # bad outcome
    "e6,1700000005,1,x,y,1,2,3,4,5\n",        # a cell short
    "e7,1700000006,1,x,y,1,2,3,4,5,1,9\n",    # a cell too many
    " e8,1700000007,1,x,y,1,2,3,4,5,1\n",     # id with a space around it
    "e9,1700000008,1,x,y,1,2,3,4,5,0\n",      # weight out of range
    ",1700000009,0,,,1,2,3,4,5,2\n",          # empty event id: <stem>:<line>
    "e11,-5,1,x,y,1,2,3,4,5,1\n",             # negative timestamp
    "e12,1700000011,1,x,y,1,2,3,4,,1\n",      # empty context
    "e13,1700000012,1.0,x,y,1,2,3,4,5,1e-3\n",
    "e14,1700000013,1,x,y,TRUE,2,3,4,5,1\n",  # pandas would read TRUE as 1.0
    "e15,2024-05-01T12:00:05Z,1,x,y,1,2,3,4,5,1\n",  # ISO timestamp: that chunk goes the row way
    "e16,1700000015,1,x,y,1_0,2,3,4,5,1\n",   # Python reads 1_0, pandas not
    "e" + "x" * 600 + ",1700000016,1,x,y,1,2,3,4,5,1\n",  # id too long
    "e18,1700000017,-1,x,y,0.1,0.2,0.30000000000000004,4,5,1\n",
    'e19,1700000018,1,"x,1",y,1,2,3,4,5,1\n',  # a quote: the csv module reads the rest
    'e20,1700000019,1,"multi\nline",y,1,2,3,4,5,1\n',
    "e21,1700000020,1,x,y,1,2,3,4,5,1\n",
]


def _fixed_now(monkeypatch):
    """Both paths read the same replay start time (the timestamp of rows without one)."""
    import types

    from stream import event_files

    monkeypatch.setattr(event_files, "time", types.SimpleNamespace(time=lambda: 1_700_000_000.25))


def _both(path, monkeypatch):
    _fixed_now(monkeypatch)
    fast = list(_iter_raw(path, "preference"))
    with monkeypatch.context() as m:
        m.setattr(replay_csv, "preference_chunks", lambda *a, **k: None)
        slow = list(_iter_raw(path, "preference"))
    return fast, slow


@pytest.mark.parametrize("chunk", [64, 300, 1 << 20])
def test_column_reader_gives_the_row_path_s_lines_records_and_reasons(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(replay_csv, "CHUNK_BYTES", chunk)
    p = tmp_path / "mixed.csv"
    p.write_text(HEADER + "".join(BROKEN))
    fast, slow = _both(p, monkeypatch)
    assert fast == slow
    good = [line for line, rec, _ in slow if rec is not None]
    # a short row lacks only the optional weight, a stripped id and an empty context are fine, the
    # multi-line row ends on line 23
    assert good == [2, 8, 10, 12, 14, 15, 17, 18, 20, 21, 23, 24]
    assert dict((line, rec["event_id"]) for line, rec, _ in slow if rec is not None)[12] == "mixed:12"
    reasons = {line: why for line, rec, why in slow if rec is None}
    assert sorted(reasons) == [4, 5, 6, 7, 9, 11, 13, 16, 19]
    assert reasons[4] == "column 'left.b' must be a number; got ''" and reasons[16].endswith("got 'TRUE'")


def test_column_reader_on_wide_random_numbers_is_exact(tmp_path, monkeypatch):
    rng = np.random.default_rng(3)
    n, d = 2000, 26
    X = rng.standard_normal((n, 2 * d)) * 10.0 ** rng.integers(-8, 8, (n, 2 * d))
    cols = ["event_id", "timestamp", "outcome", *[f"left.f{j}" for j in range(d)], *[f"right.f{j}" for j in range(d)]]
    lines = [",".join(cols)] + [",".join([f"ev{i}", str(1.7e9 + i / 7), str(int(rng.choice([1, -1, 0])))] + [repr(float(v)) for v in X[i]])
                                for i in range(n)]
    p = tmp_path / "wide.csv"
    p.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(replay_csv, "CHUNK_BYTES", 50_000)
    fast, slow = _both(p, monkeypatch)
    assert len(fast) == n and all(rec is not None for _, rec, _ in fast)
    assert fast == slow


def test_files_the_column_reader_leaves_to_the_row_path(tmp_path):
    for header in ("event_id,left.a,right.a\n",          # no outcome column
                   "outcome,left.a,left.a,right.a\n",    # a repeated column
                   "outcome,left.a,right.b\n"):          # left and right features differ
        p = tmp_path / "h.csv"
        p.write_text(header + "1,2,3\n")
        assert replay_csv.preference_chunks(p, "h", 0.0, None) is None


def _bytes_both(path, monkeypatch):
    """(line, key, value) of every record: the encoder's, and orjson of the row path's record."""
    _fixed_now(monkeypatch)
    fast = [(line, k, v) for ch in _iter_chunks(path, "preference") for line, k, v in zip(ch.lines, ch.keys, ch.values)]
    with monkeypatch.context() as m:
        m.setattr(replay_csv, "preference_chunks", lambda *a, **k: None)
        slow = [(line, rec["event_id"].encode("utf-8", "surrogateescape"), replay_csv.encode_record(rec))
                for line, rec, _ in _iter_raw(path, "preference") if rec is not None]
    return fast, slow


#: header layouts: ids and scalars first (runs split off at once), runs first with scalars after,
#: left and right columns interleaved (every cell split), ids only, no ids with context and
#: columns replay ignores, a short run (shorter than the lookup prefix)
LAYOUTS = {
    "ids_first": ["event_id", "timestamp", "outcome", "left_id", "right_id", "left.a", "left.b", "right.a", "right.b"],
    "runs_first": ["left.a", "left.b", "right.a", "right.b", "context.c", "outcome", "weight", "event_id", "left_id"],
    "interleaved": ["outcome", "left.a", "right.a", "left.b", "right.b", "right_id", "timestamp", "left_id"],
    "ids_only": ["event_id", "outcome", "left_id", "right_id", "weight"],
    "no_ids": ["outcome", "note", "left.a", "left.b", "right.a", "right.b", "context.c", "context.d", "extra"],
    "short": ["event_id", "outcome", "left_id", "left.a", "right.a", "right_id"],
}
#: cell values a column may get, good and bad (the row path is the judge)
CELLS = {
    "num": ["1.5", "-2", "0", "1e3", "7", "7", "7", "3.25", "", "nan", "1e16", " 1", "abc", "1_0", "-0", "inf"],
    "id": ["i1", "i2", "i3", "i1", "i2", "", " i4", "x" * 513, "caf\u00e9", "i\u2028"],
    "outcome": ["1", "-1", "0", "1", "-1", "1.0", "-0", "2", "", "0.5", "+1", " 1"],
    "timestamp": ["1700000000", "1700000000.5", "", "2024-05-01T12:00:05Z", "-1", "inf", "1e9"],
    "weight": ["1", "0.5", "", "0", "1e7", "2"],
    "event_id": ["e", "e", "", " e ", "ev" * 300],
}


def _cell(col: str, rng) -> str:
    kind = ("num" if "." in col else "id" if col.endswith("_id") and col != "event_id"
            else col if col in CELLS else "id")
    vals = CELLS[kind]
    v = vals[rng.integers(len(vals))] if rng.random() < 0.25 else vals[rng.integers(min(len(vals), 4))]
    return v.encode().decode("unicode_escape") if "\\" in v else v


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("small_cache", [False, True])
def test_encoder_bytes_equal_the_row_path_s_records_on_every_layout(tmp_path, monkeypatch, layout, small_cache):
    if small_cache:  # cache full after two fragments, one per key: most sides computed per row
        monkeypatch.setattr(replay_csv, "MAX_CACHED", 2)
        monkeypatch.setattr(replay_csv, "_PER_KEY", 1)
    monkeypatch.setattr(replay_csv, "CHUNK_BYTES", 2000)
    rng = np.random.default_rng(sum(map(ord, layout)))
    cols = LAYOUTS[layout]
    rows = []
    for k in range(600):
        row = [_cell(c, rng) for c in cols]
        if "event_id" in cols and row[cols.index("event_id")] == "e":
            row[cols.index("event_id")] = f"e{k}"
        if k % 97 == 5:
            row = row[:-1]  # a cell short (the row path fills None)
        if k % 89 == 7:
            row.append("9")  # a cell too many
        if k % 83 == 3:
            rows.append("")  # a blank line
        rows.append(",".join(row))
    p = tmp_path / "layout.csv"
    p.write_bytes(("\n".join([",".join(cols)] + rows) + "\n").encode() + b"ok-not-utf8-\xff,1\n")
    fast, slow = _both(p, monkeypatch)
    assert fast == slow
    good = [line for line, rec, _ in slow if rec is not None]
    assert 100 < len(good) < 600 and len(slow) - len(good) > 30  # both kinds of line are there
    fast_b, slow_b = _bytes_both(p, monkeypatch)
    assert fast_b == slow_b  # byte for byte: the same JSON as orjson.dumps of the row path's record


@pytest.mark.parametrize("ids", [True, False])
def test_same_item_id_with_other_features_is_not_mistaken_for_the_cached_one(tmp_path, monkeypatch, ids):
    # one id (or, without ids, one run prefix longer than the lookup key), runs differing in the
    # last cell only or in length only: the cache must compare the whole run
    from stream.event_files import iter_records

    pad = ",".join(["1234567.0"] * 5)  # 49 bytes shared by every left run
    body = ["event_id,outcome," + ("left_id,right_id," if ids else "")
            + ",".join([f"left.p{j}" for j in range(5)] + ["left.a", "left.b"] + [f"right.p{j}" for j in range(5)]
                       + ["right.a", "right.b"])]
    pairs = [("1", "2"), ("1", "22"), ("1", "2"), ("11", "2"), ("1", "2.0"), ("1", "2")]
    for k, (la, lb) in enumerate(pairs):
        body.append(f"e{k},1," + ("x,y," if ids else "") + f"{pad},{la},{lb},{pad},{lb},{la}")
    p = tmp_path / "same_id.csv"
    p.write_text("\n".join(body) + "\n")
    fast, slow = _bytes_both(p, monkeypatch)
    assert fast == slow
    recs = [r for _, r in iter_records(p)]
    assert [r["left"]["features"]["b"] for r in recs] == [2.0, 22.0, 2.0, 2.0, 2.0, 2.0]
    assert [r["left"]["features"]["a"] for r in recs] == [1.0, 1.0, 1.0, 11.0, 1.0, 1.0]
    assert [r["right"]["features"]["a"] for r in recs] == [2.0, 22.0, 2.0, 2.0, 2.0, 2.0]


def test_pokemon_duels_encoded_as_the_data_set_s_events(tmp_path, monkeypatch, data_dir):
    from bench.replay_rate import write_pokemon_csv
    from stream.adapters import load_dataset

    ds = load_dataset("pokemon", data_dir)
    p = tmp_path / "pokemon_duels.csv"
    n = write_pokemon_csv(ds, p, 3000)
    fast, slow = _bytes_both(p, monkeypatch)
    assert len(fast) == n and fast == slow
    # the oracle beside the row path: the data set's own events, decoded from the bytes sent
    assert [orjson.loads(v) for _, _, v in fast] == list(ds.to_events(0, n))
    assert [k for _, k, _ in fast] == [f"pokemon-{k}".encode() for k in range(n)]


def test_jsonl_read_by_orjson_gives_the_standard_library_s_records_and_reasons(tmp_path, monkeypatch):
    from stream import event_files

    ev = '"left": {"features": {"x": %s}}, "right": {"features": {"x": 0}}, "outcome": 1'
    lines = [
        '{"event_id": "a", "timestamp": 18446744073709551616, ' + ev % "1" + "}",   # 2**64: an int, not a float
        '{"event_id": "b", "timestamp": 1700000000, ' + ev % "-9223372036854775809" + "}",  # reason shows the int
        '{"event_id": "c", "timestamp": 1e400, ' + ev % "1" + "}",                   # inf: json reads it, orjson refuses
        '{"event_id": "d", "timestamp": 1, ' + ev % "NaN" + "}",
        '{"event_id": "e\\ud800", "timestamp": 1, ' + ev % "-0" + "}",               # a lone surrogate
        '{"event_id": "f", "timestamp": 0.1234567890123456789, ' + ev % "1e-400" + "}",
        '{"event_id": "g", ' + ev % "2.5" + ', "weight": 1e7}',
        "null",
        '{"event_id": "h", "timestamp": 1, ' + ev % "1" + "}",
    ]
    p = tmp_path / "edge.jsonl"
    p.write_bytes(("\n".join(lines) + "\n").encode() + b'{"event_id": "\xff", "outcome": 1}\n')
    monkeypatch.setattr(event_files, "time", __import__("types").SimpleNamespace(time=lambda: 1_700_000_000.25))
    fast = list(_iter_raw(p, "preference"))
    monkeypatch.setattr(replay_csv, "_LONG_RUN", b"")  # every line "may hold a long integer": json reads all
    slow = list(_iter_raw(p, "preference"))
    assert repr(fast) == repr(slow)  # repr: an int and the float of the same value differ
    good = {rec["event_id"]: rec for _, rec, _ in slow if rec is not None}
    assert sorted(good) == ["a", "e\ud800", "f", "h"] and good["a"]["timestamp"] == 2**64
    assert type(good["a"]["timestamp"]) is int
    reasons = {line: why for line, rec, why in slow if rec is None}
    assert sorted(reasons) == [2, 3, 4, 7, 8, 10]
    assert "-9223372036854775809" in reasons[2] and "non_finite" in reasons[4]


def test_producer_options_map_onto_librdkafka():
    cfg = confluent_config({"bootstrap_servers": ["a:1", "b:2"], "security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN",
                            "sasl_plain_username": "u", "sasl_plain_password": "p", "ssl_cafile": "/ca.pem",
                            "client_id": "c", "max_request_size": 200, "compression_type": "zstd", "batch_size": 262144,
                            "linger_ms": 5, "acks": -1, "bootstrap_timeout_ms": 1500, "queue.buffering.max.kbytes": 1024})
    assert cfg == {"bootstrap.servers": "a:1,b:2", "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                   "sasl.username": "u", "sasl.password": "p", "ssl.ca.location": "/ca.pem", "client.id": "c",
                   "message.max.bytes": 1000, "compression.type": "zstd", "batch.size": 1000, "linger.ms": 5,
                   "acks": "all", "queue.buffering.max.kbytes": 1024}
    assert confluent_config({"compression_type": None}) == {"compression.type": "none"}
    with pytest.raises(InvalidParameterError, match="'api_version' has no confluent-kafka"):
        confluent_config({"api_version": (2, 0)})


def test_librdkafka_errors_keep_kafka_python_s_names():
    from confluent_kafka import KafkaError

    assert error_name(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)) == "MessageSizeTooLargeError"
    assert error_name(KafkaError(KafkaError._MSG_TIMED_OUT)) == "KafkaTimeoutError"
    assert error_name(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)) == "TopicAuthorizationFailedError"
    assert error_name(KafkaError(KafkaError.INVALID_REQUIRED_ACKS)) == "KafkaError.INVALID_REQUIRED_ACKS"
