"""Avro and JSON Schema through a real schema registry (stream/broker/serializers.py, issue 30 item 1).

The oracle of every decoded event is the contract's own parse of the same event as plain JSON:
a wire format must give the same :class:`PreferenceExample`. The registry is the real one
(Apicurio Registry from deploy/registry/start.sh, Confluent API), the broker the real one.
"""

from __future__ import annotations

import io
import json
import signal
import struct
import urllib.request
import uuid

import pytest

from stream.broker.serializers import (AvroFormat, JSONSchemaFormat, RegistryUnavailable, SchemaRegistry, avro_schema,
                                       wire_format)
from stream.contract import DeadLetter, dead_letter_record, parse_item, parse_preference, validator
from stream.contract.decoding import Decoded

DEAD_URL = "http://127.0.0.1:9/apis/ccompat/v7"  # port 9 (discard): nothing answers


def event(i: int, **extra) -> dict:
    doc = {"schema_version": 1, "event_id": f"e{i}", "timestamp": 1_700_000_000 + i,
           "left": {"id": f"a{i}", "features": {"hp": 1.0 + i, "speed": 2.5}},
           "right": {"features": {"hp": 3.0, "speed": -1.0 * i}}, "outcome": (1, -1, 0)[i % 3]}
    doc.update(extra)
    return doc


def v2_schema() -> str:
    """preference v1 plus an optional field: what a producer team's next version looks like."""
    s = json.loads(avro_schema("preference"))
    s["fields"].append({"name": "campaign", "type": ["null", "string"], "default": None})
    return json.dumps(s)


def framed_avro(schema_id: int, schema_text: str, doc: dict) -> bytes:
    import fastavro

    buf = io.BytesIO()
    buf.write(struct.pack(">bI", 0, schema_id))
    fastavro.schemaless_writer(buf, fastavro.parse_schema(json.loads(schema_text)), doc)
    return buf.getvalue()


# ------------------------------------------------------------------------------ no registry needed
def test_values_not_in_the_wire_format_are_dead_letters_without_asking_the_registry():
    fmt = AvroFormat("t.prefs", "preference", SchemaRegistry(DEAD_URL))
    plain = json.dumps(event(1)).encode()
    fmt.prepare([plain, b"\x00\x00"])  # no framed id among them: nothing is fetched (the registry is down)
    for raw in (plain, b"\x00\x00", b""):
        with pytest.raises(DeadLetter) as exc:
            parse_preference(fmt.wrap(raw))
        assert exc.value.reason == "not_wire_format"
        assert "t.prefs" in exc.value.detail
    rec = dead_letter_record(fmt.wrap(plain), "not_wire_format", "x", "t.prefs", 0, 5)
    assert rec["payload"] == plain.decode() and rec["payload_size"] == len(plain)  # the raw bytes, re-drivable
    assert not list(validator("dead_letter").iter_errors(rec))
    assert fmt.wrap(None) is None  # a tombstone stays a tombstone


def test_a_registry_that_is_down_is_one_clear_error():
    fmt = AvroFormat("t.prefs", "preference", SchemaRegistry(DEAD_URL))
    with pytest.raises(RegistryUnavailable) as exc:
        fmt.prepare([b"\x00\x00\x00\x00\x07" + b"\x02" * 8])
    msg = str(exc.value)
    assert DEAD_URL in msg and "does not answer" in msg and "\n" not in msg
    assert fmt.known == {}  # nothing cached: the same batch is tried again once it answers


def test_the_avro_schema_carries_user_id_as_an_optional_field():
    fields = {f["name"]: f for f in json.loads(avro_schema("preference"))["fields"]}
    assert fields["user_id"]["type"] == ["null", "string"] and fields["user_id"]["default"] is None
    assert set(fields) == {"schema_version", "event_id", "timestamp", "left", "right", "outcome", "context", "weight",
                           "user_id"}


def test_a_framed_format_needs_a_registry_url():
    from learners.exceptions import InvalidParameterError
    from stream.settings import Settings

    with pytest.raises(InvalidParameterError, match="PREFSTREAM_SCHEMA_REGISTRY_URL"):
        Settings.load(None, {"format_preferences": "avro"}, environ={})
    with pytest.raises(InvalidParameterError, match="schema_registry_url"):
        wire_format("avro", "t", "preference", None)


def _known_avro_format(topic: str = "t.prefs", schema_id: int = 1) -> AvroFormat:
    """An :class:`AvroFormat` that already holds this build's schema under ``schema_id`` (what
    :meth:`~AvroFormat.fetch` caches from the registry), so no registry is asked."""
    from confluent_kafka.schema_registry import Schema

    fmt = AvroFormat(topic, "preference", SchemaRegistry(DEAD_URL))
    fmt.known[schema_id] = fmt._reader(schema_id, Schema(avro_schema("preference"), "AVRO"))
    return fmt


def test_avro_events_and_a_json_forget_record_go_through_the_learner_core():
    """The people part of the learner core looks for forget records among the values of a batch:
    on an Avro topic those are :class:`Decoded` (once a TypeError on every batch). Decoded events
    are learned exactly as the same events as JSON, and a forget record (plain JSON, as
    ``prefstream forget`` writes it: not the wire format) forgets its person there too."""
    import numpy as np

    from stream.contract.people import forget_record, forget_user
    from stream.settings import Settings
    from stream.workers.learner_core import LearnerCore

    fmt = _known_avro_format()
    docs = [event(i, user_id=f"u{i % 3}") for i in range(60)]
    for d in docs:
        d["left"].pop("id")  # inline features only: the models take hp and speed
    cores, states = [], []
    for wire in ("json", "avro"):
        core = LearnerCore(Settings.load(None, {"models": ["linear-bt-personal"], "feature_names": ["hp", "speed"],
                                                "topic_preferences": "t.prefs", "snapshot_every_events": 10**9},
                                         environ={}))
        st = core.new_source("t.prefs", 0, {})
        vals = [json.dumps(d).encode() if wire == "json" else fmt.wrap(framed_avro(1, avro_schema("preference"), d))
                for d in docs]
        assert wire == "json" or all(type(v) is Decoded and v.error is None for v in vals)
        for a in range(0, 60, 20):
            assert core.process_batch(st, [(a + j, v, None, None) for j, v in enumerate(vals[a:a + 20])]) == []
        cores.append(core)
        states.append(st)
    lj, la = (st.slots["linear-bt-personal"].learner for st in states)
    assert la.person_info("u1") == lj.person_info("u1") == {"personalized": True, "version": 20}
    aj, aa = lj.state_dict()["arrays"], la.state_dict()["arrays"]
    assert sorted(aa) == sorted(aj) and aa
    for k in aj:  # the same arithmetic on the same inputs
        np.testing.assert_allclose(aa[k], aj[k], rtol=1e-12, atol=0, err_msg=k)
    forget = fmt.wrap(forget_record("u1"))
    assert forget.error.reason == "not_wire_format" and forget_user(forget) == "u1"
    assert forget_user(fmt.wrap(framed_avro(1, avro_schema("preference"), event(99, event_id="forget")))) is None
    assert cores[1].process_batch(states[1], [(60, forget, None, None)]) == []
    assert la.person_info("u1") == {"personalized": False, "version": 0}
    assert la.person_info("u2") == {"personalized": True, "version": 20}


def test_avro_events_stay_on_the_batch_fast_path_and_its_block_arrays():
    """The fast reader's feature maps are FeatureRows (names shared by the layout, values a tuple):
    the contract's batch path takes them as they are — row examples of one block, arrays indexed
    from it — and gives what it gives for the same events as JSON; the events it declines (another
    key order on the right, a value out of range) reach the validators as plain dicts, with the
    JSON events' result or reason. :meth:`Decoded.get` gives plain dicts (fastavro's document)."""
    import fastavro
    import numpy as np

    from stream.contract.batch import RowExample, _block_arrays, learner_arrays, parse_batch
    from stream.contract.decoding import FeatureRow
    from stream.broker.serializers import _strip_preference

    fmt = _known_avro_format()
    docs = [event(i) for i in range(40)]
    docs[7]["right"]["features"] = {"speed": -7.0, "hp": 3.0}  # another key order: the validator's path
    docs[9]["left"]["features"]["hp"] = 1e300  # out of range: the validator's reason
    vals = [fmt.wrap(framed_avro(1, avro_schema("preference"), d)) for d in docs]
    assert all(type(v.doc["left"]["features"]) is FeatureRow for v in vals)
    assert vals[3].doc["left"]["features"].names is vals[4].doc["right"]["features"].names  # one layout
    parsed = parse_batch("preferences", vals, None, 1 << 20)
    plain = parse_batch("preferences", [json.dumps(d).encode() for d in docs], None, 1 << 20)
    assert parsed[9].reason == plain[9].reason == "out_of_range"
    assert type(parsed[7][0]) is not RowExample and parsed[7] == plain[7]
    fast = [k for k in range(40) if k not in (7, 9)]
    assert all(type(parsed[k][0]) is RowExample for k in fast) and len(parsed.blocks) == 1
    assert [parsed[k] for k in fast] == [plain[k] for k in fast]  # equal PreferenceExamples
    exs, ref = [parsed[k][0] for k in fast], [plain[k][0] for k in fast]
    got = _block_arrays(exs, ["speed", "hp"], None)
    assert got is not None  # indexed from the block, no dict read back
    want = learner_arrays(ref, ["speed", "hp"], None)
    for a in ("X_left", "X_right", "y", "weight"):
        np.testing.assert_allclose(getattr(got, a), getattr(want, a), rtol=0, atol=0, err_msg=a)
    assert type(exs[0].left) is dict and exs[0].left == ref[0].left
    schema = fastavro.parse_schema(json.loads(avro_schema("preference")))
    raw = framed_avro(1, avro_schema("preference"), docs[3])
    doc = fmt.wrap(raw).get()
    assert type(doc["left"]["features"]) is dict and type(doc["right"]["features"]) is dict
    assert doc == _strip_preference(fastavro.schemaless_reader(io.BytesIO(raw[5:]), schema, None))


# ------------------------------------------------------------------------------ the real registry
def test_compatibility_is_backward(schema_registry_url):
    with urllib.request.urlopen(schema_registry_url + "/config", timeout=5) as r:
        assert json.loads(r.read())["compatibilityLevel"] == "BACKWARD"


def test_avro_and_json_schema_decode_to_what_the_json_contract_decodes(schema_registry_url):
    reg = SchemaRegistry(schema_registry_url)
    topic = f"test.sr.{uuid.uuid4().hex[:8]}"
    docs = [event(i) for i in range(6)] + [event(7, context={"hour": 3.0}, weight=0.5)]
    for fmt in (AvroFormat(topic + ".avro", "preference", reg), JSONSchemaFormat(topic + ".js", "preference", reg)):
        raws = [fmt.dumps(d) for d in docs]
        assert all(r[0] == 0 and int.from_bytes(r[1:5], "big") == fmt.writer_id() for r in raws)
        fmt.prepare(raws)
        for d, raw in zip(docs, raws):
            assert parse_preference(fmt.wrap(raw)) == parse_preference(json.dumps(d).encode())
    item = {"schema_version": 1, "item_id": "pikachu", "features": {"hp": 35.0}}
    gone = {"schema_version": 1, "item_id": "ditto", "features": None}
    fmt = AvroFormat(topic + ".items", "item", reg)
    raws = [fmt.dumps(item), fmt.dumps(gone)]
    fmt.prepare(raws)
    assert [parse_item(fmt.wrap(r)) for r in raws] == [parse_item(json.dumps(x).encode()) for x in (item, gone)]


def test_a_v2_schema_with_an_optional_field_is_read_and_an_unknown_id_is_a_dead_letter(schema_registry_url):
    reg = SchemaRegistry(schema_registry_url)
    topic = f"test.sr.evolve.{uuid.uuid4().hex[:8]}"
    fmt = AvroFormat(topic, "preference", reg)
    v1_id = fmt.writer_id()
    v2_id = reg.register(fmt.subject, v2_schema(), "AVRO")  # BACKWARD-compatible: accepted
    assert v2_id != v1_id
    old, new = fmt.dumps(event(1)), framed_avro(v2_id, v2_schema(), {**event(2), "campaign": "spring"})
    unknown = struct.pack(">bI", 0, 2**31 - 7) + old[5:]
    fmt.prepare([old, new, unknown])
    assert parse_preference(fmt.wrap(old)) == parse_preference(json.dumps(event(1)).encode())
    # the v2 event is read into this build's v1 reader schema: the new field is left out, the event is learned
    assert parse_preference(fmt.wrap(new)) == parse_preference(json.dumps(event(2)).encode())
    with pytest.raises(DeadLetter) as exc:
        parse_preference(fmt.wrap(unknown))
    assert exc.value.reason == "unknown_schema" and str(2**31 - 7) in exc.value.detail
    # a v3 that adds a REQUIRED field breaks BACKWARD compatibility: the registry refuses it
    s3 = json.loads(v2_schema())
    s3["fields"].append({"name": "region", "type": "string"})
    from learners.exceptions import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="incompatible"):
        reg.register(fmt.subject, json.dumps(s3), "AVRO")


def test_a_learner_worker_learns_avro_events_of_both_versions_and_dead_letters_the_rest(
        kafka_bootstrap, kafka_options, schema_registry_url, tmp_path):
    from tests.test_workers_kafka import Stack, expected_digest

    stack = Stack(kafka_bootstrap, kafka_options, tmp_path, partitions=1)
    try:
        reg = SchemaRegistry(schema_registry_url)
        fmt = AvroFormat(stack.topics["preferences"], "preference", reg)
        v2_id = reg.register(fmt.subject, v2_schema(), "AVRO")
        good = [(f"e{i}", fmt.dumps(event(i))) for i in range(40)]
        evolved = [("e40", framed_avro(v2_id, v2_schema(), {**event(40), "campaign": "x"}))]
        bad = [("u", struct.pack(">bI", 0, 2**31 - 11) + good[0][1][5:]), ("p", json.dumps(event(41)).encode())]
        w = stack.start("learn", PREFSTREAM_FORMAT_PREFERENCES="avro", PREFSTREAM_FORMAT_DEAD_LETTERS="avro",
                        PREFSTREAM_SCHEMA_REGISTRY_URL=schema_registry_url)
        stack.send("preferences", good + evolved + bad)
        stack.wait(lambda: len(stack.read("dead_letters")) >= 2 and stack.totals()[0] >= 41 or None, 120,
                   "41 events learned and 2 dead letters")
        w.send_signal(signal.SIGTERM)
        w.wait(30)
        n, d = stack.totals(topic_key="preferences")
        assert n == 41 and d == expected_digest([f"e{i}" for i in range(41)])
        dl_fmt = AvroFormat(stack.topics["dead_letters"], "dead_letter", reg)
        values = [v for _, v in stack.read("dead_letters")]
        dl_fmt.prepare(values)
        dls = [dl_fmt.wrap(v).get() for v in values]  # written in Avro too (format_dead_letters=avro)
        assert sorted(r["reason"] for r in dls) == ["not_wire_format", "unknown_schema"]
        plain = next(r for r in dls if r["reason"] == "not_wire_format")
        assert json.loads(plain["payload"])["event_id"] == "e41"
    finally:
        stack.close()


def test_a_worker_waits_while_the_registry_is_down(kafka_bootstrap, kafka_options, tmp_path):
    """The registry URL answers nothing: the worker says so in one line, keeps running, learns nothing."""
    from tests.test_workers_kafka import Stack

    stack = Stack(kafka_bootstrap, kafka_options, tmp_path, partitions=1)
    try:
        framed = struct.pack(">bI", 0, 1) + b"\x02\x04e1"
        w = stack.start("learn", PREFSTREAM_FORMAT_PREFERENCES="avro", PREFSTREAM_SCHEMA_REGISTRY_URL=DEAD_URL)
        stack.send("preferences", [("e1", framed)])
        stack.wait(lambda: "does not answer" in stack.log_text() or None, 90, "the registry-down line")
        assert w.poll() is None  # still running
        lines = [ln for ln in stack.log_text().splitlines() if "does not answer" in ln]
        assert len(lines) == 1 and DEAD_URL in lines[0] and "waiting" in lines[0]
        assert stack.read("dead_letters") == []  # not dead-lettered: it waits for the registry
        w.send_signal(signal.SIGTERM)
        assert w.wait(30) == 0
    finally:
        stack.close()


def test_the_fast_preference_reader_agrees_with_fastavro_or_declines():
    """stream/broker/avro_fast.py against fastavro (the reference) on random records of the v1 schema,
    and on every truncation of one: equal documents, or None (then fastavro reads it)."""
    import random

    import fastavro

    from stream.broker.avro_fast import PreferenceReader
    from stream.broker.serializers import _strip_preference
    from stream.contract.decoding import plain_doc

    schema = fastavro.parse_schema(json.loads(avro_schema("preference")))
    reader, rng = PreferenceReader(), random.Random(7)
    accepted = 0
    for i in range(1500):
        d = {"schema_version": rng.choice([1, 2, -3, 300]), "event_id": "é" * rng.randint(0, 70),
             "timestamp": rng.choice([rng.random() * 1e9, "2024-01-01T00:00:00"]), "left": {}, "right": {},
             "outcome": rng.choice([1, -1, 0, 70000])}
        names = [f"k{j}" * rng.randint(1, 3) for j in range(rng.randint(0, 40))]
        for side in ("left", "right"):
            if rng.random() < 0.7:
                d[side]["id"] = f"i{rng.randint(0, 10**6)}"
            if rng.random() < 0.8:  # often the same layout as the other side / the last record
                d[side]["features"] = {n: rng.uniform(-1e6, 1e6) for n in (names if rng.random() < 0.7 else names[::-1])}
        if rng.random() < 0.3:
            d["context"] = {f"c{j}": rng.random() for j in range(rng.randint(0, 3))}
        if rng.random() < 0.3:
            d["weight"] = rng.random()
        if rng.random() < 0.3:
            d["user_id"] = f"u{i}"
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, schema, d)
        raw = b"\x00\x00\x00\x00\x01" + buf.getvalue()
        got = reader.read(raw)
        if got is not None:
            accepted += 1
            assert plain_doc(got) == _strip_preference(fastavro.schemaless_reader(io.BytesIO(raw[5:]), schema, None))
        if i < 30:
            for cut in range(5, len(raw)):
                assert reader.read(raw[:cut]) is None
            assert reader.read(raw + b"\x00") is None
    assert accepted > 1000
    # a map that repeats a key (fastavro keeps the last value): declined, whether a layout is cached or not
    d = {"schema_version": 1, "event_id": "dup", "timestamp": 1.0, "left": {"features": {"aa": 1.0, "bb": 2.0}},
         "right": {"features": {"aa": 3.0, "bb": 4.0}}, "outcome": 1}
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, schema, d)
    raw = b"\x00\x00\x00\x00\x01" + buf.getvalue().replace(b"\x04bb", b"\x04aa")
    assert fastavro.schemaless_reader(io.BytesIO(raw[5:]), schema, None)["left"]["features"] == {"aa": 2.0}
    assert PreferenceReader().read(raw) is None and reader.read(raw) is None


def test_replay_format_avro_writes_registered_avro(kafka_bootstrap, kafka_options, unique_topic, schema_registry_url,
                                                  tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    from kafka import KafkaConsumer, TopicPartition

    topic = unique_topic("avro-replay")
    docs = [event(i) for i in range(5)]
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    proc = subprocess.run([sys.executable, "-m", "stream", "replay", str(path), "--topic", topic, "--format", "avro",
                           "--no-progress"], cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PREFSTREAM_BOOTSTRAP_SERVERS": kafka_bootstrap,
                                            "PREFSTREAM_SCHEMA_REGISTRY_URL": schema_registry_url})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "sent=5 skipped=0 failed=0"
    c = KafkaConsumer(enable_auto_commit=False, group_id=None, consumer_timeout_ms=3000, **kafka_options)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    values = [m.value for m in c]
    c.close()
    fmt = AvroFormat(topic, "preference", SchemaRegistry(schema_registry_url))
    assert {int.from_bytes(v[1:5], "big") for v in values} == {fmt.writer_id()}  # the registered v1 schema's id
    fmt.prepare(values)
    assert [parse_preference(fmt.wrap(v)) for v in values] == [parse_preference(json.dumps(d).encode()) for d in docs]


def test_explanations_in_json_schema_carry_the_registered_id(schema_registry_url):
    import asyncio

    from stream.outputs.publish import ProducerTopic

    sent = []

    class Producer:
        async def send(self, topic, key=None, value=None):
            sent.append((topic, key, value))

    reg = SchemaRegistry(schema_registry_url)
    topic = f"test.sr.expl.{uuid.uuid4().hex[:8]}"
    fmt = wire_format("jsonschema", topic, "explanation", reg)
    body = b'{"request_id": "r1"}'
    asyncio.run(ProducerTopic(Producer(), topic, fmt).send(b"r1", body))
    (_, key, value), = sent
    assert key == b"r1" and value[0] == 0 and value[5:] == body and fmt.unframe(value) == body
    schema = reg.schema(int.from_bytes(value[1:5], "big"))
    assert schema.schema_type == "JSON" and json.loads(schema.schema_str)["$id"].endswith("explanation.v1.json")


def test_what_a_worker_writes_falls_back_to_json_while_the_registry_is_down(caplog):
    """A dead letter (or explanation) is never dropped, nor the worker stopped, for want of a schema id."""
    fmt = AvroFormat("t.dead", "dead_letter", SchemaRegistry(DEAD_URL))
    rec = dead_letter_record(b"x", "not_wire_format", "d", "t.prefs", 0, 1)
    body = json.dumps(rec).encode()
    with caplog.at_level("ERROR"):
        assert fmt.frame_or_json(body) == body
    assert any(DEAD_URL in r.getMessage() and "plain JSON" in r.getMessage() for r in caplog.records)
    assert fmt.unframe(body) == body


def test_replay_with_the_registry_down_is_one_line(kafka_bootstrap, unique_topic, tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    topic = unique_topic("avro-down")
    path = tmp_path / "events.jsonl"
    path.write_text(json.dumps(event(1)) + "\n")
    proc = subprocess.run([sys.executable, "-m", "stream", "replay", str(path), "--topic", topic, "--format", "avro",
                           "--no-progress"], cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PREFSTREAM_BOOTSTRAP_SERVERS": kafka_bootstrap,
                                            "PREFSTREAM_SCHEMA_REGISTRY_URL": DEAD_URL})
    assert proc.returncode == 1
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: The schema registry at " + DEAD_URL) and "Traceback" not in proc.stderr
