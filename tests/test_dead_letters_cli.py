"""``prefstream dead-letters`` on the real broker (issue 30 item 4): summary, export, re-drive.

The dead letters are the records the workers write (:func:`stream.contract.dead_letter_record`) for
real bad payloads: malformed JSON (one not UTF-8), events missing a field, an invalid outcome, an
oversize (truncated) one. Oracles: counts and offsets of what was written; the re-driven records are
the payloads byte for byte, keyed by event id, on their source topic; a second re-drive sends nothing;
an event dead-lettered again after its re-drive is not sent round again.
"""

from __future__ import annotations

import json
import time

import pytest

from stream.contract import dead_letter_record

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]


def _read_all(opts, topic):
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(enable_auto_commit=False, group_id=None, consumer_timeout_ms=1500, **opts)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic) or [])]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        return [(m.key, m.value, dict(m.headers or [])) for m in c]
    finally:
        c.close()


def _cli(capsys, *args) -> tuple[int, str, str]:
    from stream.cli import main

    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def dlq(kafka_bootstrap, kafka_options, unique_topic):
    from kafka import KafkaProducer

    source, dead = unique_topic("dl-source", partitions=2), unique_topic("dl-dead")
    good = lambda i: {"schema_version": 1, "event_id": f"e{i}", "timestamp": 1.7e9,  # noqa: E731
                      "left": {"features": {"a": 1.0}}, "right": {"features": {"a": 0.0}}, "outcome": 1}
    missing = [json.dumps({k: v for k, v in good(i).items() if k != "timestamp"}).encode() for i in (1, 2)]
    bad_outcome = json.dumps({**good(3), "outcome": 7}).encode()
    malformed = [b'{"event_id": "e4", "left": ', b"\xff\xfe not utf-8", b"[1, 2"]
    records = ([dead_letter_record(m, "missing_field", "timestamp is required", source, 0, 10 + k) for k, m in enumerate(missing)]
               + [dead_letter_record(bad_outcome, "invalid_outcome", "outcome must be -1, 0 or 1", source, 1, 5)]
               + [dead_letter_record(m, "malformed_json", "not JSON", source, 0, 20 + k) for k, m in enumerate(malformed)]
               + [dead_letter_record(b"x" * 300_000, "oversize", "too big", source, 1, 9)])
    p = KafkaProducer(acks="all", **kafka_options)
    for r in records:
        p.send(dead, json.dumps(r).encode())
    p.flush(30)
    p.close()
    return {"source": source, "dead": dead, "missing": missing, "bad_outcome": bad_outcome, "malformed": malformed,
            "records": records, "boot": kafka_bootstrap}


def test_summary_by_reason_and_source_with_offsets_and_a_sample(capsys, dlq):
    code, out, err = _cli(capsys, "dead-letters", "-b", dlq["boot"], "--topic", dlq["dead"], "--json")
    assert code == 0, err
    s = json.loads(out)
    assert s["total"] == 7 and s["unreadable"] == 0
    g = {(x["reason"], x["source_topic"]): x for x in s["groups"]}
    src = dlq["source"]
    assert {k: v["count"] for k, v in g.items()} == {("malformed_json", src): 3, ("missing_field", src): 2,
                                                     ("invalid_outcome", src): 1, ("oversize", src): 1}
    assert (g[("missing_field", src)]["first"], g[("missing_field", src)]["last"]) == ("0:0", "0:1")
    assert (g[("malformed_json", src)]["first"], g[("malformed_json", src)]["last"]) == ("0:3", "0:5")
    assert g[("missing_field", src)]["source_offsets"] == [10, 11]
    assert g[("missing_field", src)]["sample"] == dlq["missing"][0].decode()
    code, text, _ = _cli(capsys, "dead-letters", "-b", dlq["boot"], "--topic", dlq["dead"], "--reason", "malformed_json")
    assert code == 0 and text.splitlines()[0] == f"3 dead letters on {dlq['dead']}"
    assert "malformed_json" in text and "missing_field" not in text


def test_export_writes_every_selected_record_with_its_place(capsys, dlq, tmp_path):
    path = tmp_path / "dl.jsonl"
    code, out, err = _cli(capsys, "dead-letters", "-b", dlq["boot"], "--topic", dlq["dead"], "--to", str(path))
    assert code == 0, err and f"exported 7 dead letters to {path}" in out
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) == 7
    assert [r["dead_letter_offset"] for r in rows] == list(range(7))
    for r, want in zip(rows, dlq["records"]):
        assert {k: v for k, v in r.items() if not k.startswith("dead_letter_")} == want


def test_redrive_resends_the_raw_payloads_once_by_event_id(capsys, dlq, kafka_options):
    from kafka import KafkaProducer

    from stream.dead_letter_topic import REDRIVE_HEADER

    args = ["dead-letters", "-b", dlq["boot"], "--topic", dlq["dead"], "--redrive", "--json"]
    code, out, err = _cli(capsys, *args, "--reason", "missing_field")
    assert code == 0, err
    assert json.loads(out)["redrive"] == {"sent": 2, "already_redriven": 0, "truncated": 0, "no_payload": 0,
                                          "missing_topic": 0, "by_topic": {dlq["source"]: 2}}
    got = _read_all(kafka_options, dlq["source"])
    assert sorted((k, v) for k, v, _ in got) == sorted([(b"e1", dlq["missing"][0]), (b"e2", dlq["missing"][1])])
    assert sorted(h[REDRIVE_HEADER].decode() for _, _, h in got) == [f"{dlq['dead']}:0:0", f"{dlq['dead']}:0:1"]
    # again: nothing new
    code, out, _ = _cli(capsys, *args, "--reason", "missing_field")
    assert json.loads(out)["redrive"]["sent"] == 0 and json.loads(out)["redrive"]["already_redriven"] == 2
    # every reason: the rest, once; the truncated payload cannot be re-driven
    code, out, _ = _cli(capsys, *args)
    r = json.loads(out)["redrive"]
    assert (r["sent"], r["already_redriven"], r["truncated"]) == (4, 2, 1)
    got = _read_all(kafka_options, dlq["source"])
    assert sorted(v for _, v, _ in got) == sorted(dlq["missing"] + [dlq["bad_outcome"]] + dlq["malformed"])
    assert [k for k, v, _ in got if v == dlq["bad_outcome"]] == [b"e3"]
    code, out, _ = _cli(capsys, *args)
    assert json.loads(out)["redrive"]["sent"] == 0
    # the re-driven e1 fails again: a new dead letter of the same event id is not sent round again
    time.sleep(0.01)
    p = KafkaProducer(acks="all", **kafka_options)
    p.send(dlq["dead"], json.dumps(dead_letter_record(dlq["missing"][0], "missing_field", "again", dlq["source"], 0, 99)).encode())
    p.flush(30)
    p.close()
    code, out, _ = _cli(capsys, *args, "--reason", "missing_field")
    r = json.loads(out)["redrive"]
    assert (r["sent"], r["already_redriven"]) == (0, 3)
    assert len(_read_all(kafka_options, dlq["source"])) == 6
    code, text, _ = _cli(capsys, "dead-letters", "-b", dlq["boot"], "--topic", dlq["dead"], "--redrive")
    assert code == 0 and "redrove 0 dead letters; skipped 7 already redriven, 1 truncated" in text


def test_a_missing_source_topic_is_counted_and_not_created(capsys, kafka_bootstrap, kafka_options, unique_topic):
    from kafka import KafkaProducer

    from stream.broker import missing_topics

    dead = unique_topic("dl-dead")
    gone = dead + ".no-such-source"
    p = KafkaProducer(acks="all", **kafka_options)
    p.send(dead, json.dumps(dead_letter_record(b'{"event_id": "z"}', "missing_field", "x", gone, 0, 1)).encode())
    p.flush(30)
    p.close()
    code, out, _ = _cli(capsys, "dead-letters", "-b", kafka_bootstrap, "--topic", dead, "--redrive", "--json")
    assert code == 0 and json.loads(out)["redrive"]["missing_topic"] == 1 and json.loads(out)["redrive"]["sent"] == 0
    assert missing_topics(kafka_bootstrap, [gone], kafka_options) == [gone]


def test_user_mistakes_are_one_line_and_exit_2(capsys, kafka_bootstrap, tmp_path, unique_topic):
    code, _, err = _cli(capsys, "dead-letters", "-b", kafka_bootstrap, "--reason", "typo")
    assert code == 2 and err.count("\n") == 1 and "Unknown dead-letter reason 'typo'" in err
    code, _, err = _cli(capsys, "dead-letters", "-b", kafka_bootstrap, "--topic", "no.such.dead-letter.topic")
    assert code == 2 and err.strip() == ("error: Topic 'no.such.dead-letter.topic' does not exist; create it with "
                                         "`prefstream topics create`.")
    dead = unique_topic("dl-dead")
    code, _, err = _cli(capsys, "dead-letters", "-b", kafka_bootstrap, "--topic", dead, "--to", str(tmp_path / "no" / "x"))
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: Cannot write")


@pytest.mark.timeout(240)
def test_a_real_learner_learns_the_redriven_events_once_their_items_exist(capsys, kafka_bootstrap, kafka_options, tmp_path):
    """End to end: events naming items not yet in the catalog are dead-lettered (``unknown_item``) by a real
    learner worker; once the items are published, ``--redrive`` sends them back and the worker learns each
    once (the digest of learned event ids); a second redrive sends nothing."""
    from tests.test_serve import item_records
    from tests.test_workers_kafka import Stack, expected_digest

    stack = Stack(kafka_bootstrap, kafka_options, tmp_path, partitions=2)
    try:
        ids = [f"late{i}" for i in range(6)]
        evs = [(e, json.dumps({"schema_version": 1, "event_id": e, "timestamp": 1.7e9 + k,
                               "left": {"id": f"i{k}"}, "right": {"id": f"i{k + 1}"}, "outcome": 1}).encode())
               for k, e in enumerate(ids)]
        stack.start("learn", "--models", "linear-bt", PREFSTREAM_FEATURE_NAMES="a,b,c")
        stack.send("preferences", evs)
        stack.wait(lambda: len([v for _, v in stack.read("dead_letters", 1.0) if v]) == 6, 120, "6 dead letters")
        args = ["dead-letters", "-b", kafka_bootstrap, "--topic", stack.topics["dead_letters"], "--json"]
        code, out, _ = _cli(capsys, *args)
        s = json.loads(out)
        assert code == 0 and [(g["reason"], g["count"]) for g in s["groups"]] == [("unknown_item", 6)]
        stack.send("items", item_records(8))
        time.sleep(2.0)   # the worker follows the catalog
        code, out, _ = _cli(capsys, *args, "--redrive", "--reason", "unknown_item")
        assert json.loads(out)["redrive"]["sent"] == 6
        stack.wait(lambda: stack.totals("linear-bt") == (6, expected_digest(ids)), 120, "the redriven events learned")
        code, out, _ = _cli(capsys, *args, "--redrive")
        assert json.loads(out)["redrive"]["sent"] == 0 and json.loads(out)["redrive"]["already_redriven"] == 6
        time.sleep(2.0)
        assert stack.totals("linear-bt") == (6, expected_digest(ids))
        assert len([v for _, v in stack.read("dead_letters", 1.0) if v]) == 6   # nothing failed again
    finally:
        stack.close()
