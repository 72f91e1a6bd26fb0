"""Avro ingest: the same Pokémon duels caught up as JSON and as Avro through the real registry, then a v2 schema and an unknown id.

What it does, in one run (the load average is printed beside every figure):

1. makes ``--events`` (default 50,000) Pokémon duels (the 50,000 duels of ``--data-dir``/pokemon
   cycled with fresh ids, 26 features a side: ``bench/catchup.py``'s events) and writes them twice,
   into two fresh one-partition topic sets: as the contract's JSON, and as Avro in the Confluent
   wire format (:class:`stream.broker.serializers.AvroFormat`: this build's
   ``stream/schemas/avro/preference.v1.avsc`` registered in the registry under
   ``<topic>-value``, its id before every record);
2. **catch-up**, JSON then Avro, ``--repeat`` (2) times alternated: one ``prefstream worker learn
   --models <--models>`` (default linear-bt,capacity) on each preloaded topic, a fresh group each
   time, timed from its first learned event to every event learned (``bench/catchup.py``'s
   ``catchup_round``; counts and digests of the final snapshots give ``lost``); the Avro worker runs
   with ``format_preferences=avro``. ``avro_over_json`` is the ratio of the best rate of each in
   this run (the anchor is the JSON worker beside it; the best of alternated runs, because the
   machine is shared);
3. **evolution**: a v2 schema (v1 plus an optional ``campaign`` field) is registered under the
   same subject (the registry checks BACKWARD compatibility), one duel is written with it, and one
   record with a schema id the registry does not hold; a fresh worker group reads the Avro topic
   from the beginning: ``evolved_learned`` is how many v2 events its snapshots hold beyond the v1
   ones (the event-id digest must match), ``unknown_schema_dead_letters`` the dead letters of
   reason ``unknown_schema`` on the dead-letter topic.

The last line is exactly::

    json_events_per_s=… avro_events_per_s=… avro_over_json=… lost=… evolved_learned=… unknown_schema_dead_letters=…

Goals (issue 30): ``avro_over_json ≥ 0.8``, ``lost = 0``, ``evolved_learned = 1``,
``unknown_schema_dead_letters ≥ 1``.

Reproduce: ``make broker-start registry-start && python bench/avro_ingest.py`` (the registry URL
from ``PREFSTREAM_SCHEMA_REGISTRY_URL`` or ``--registry``; ``--out results.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench.catchup import catchup_round, load, make_events, preload  # noqa: E402
from bench.worker_run import create_run_topics, delete_topics  # noqa: E402

DEFAULT_MODELS = "linear-bt,capacity"


def dead_letter_reasons(boot: str, topic: str) -> dict:
    """``{reason: count}`` of the dead-letter topic (plain JSON records)."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(enable_auto_commit=False, group_id=None, consumer_timeout_ms=2000, bootstrap_servers=boot,
                      allow_auto_create_topics=False)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    out: dict = {}
    for m in c:
        r = json.loads(m.value)
        out[r["reason"]] = out.get(r["reason"], 0) + 1
    c.close()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=os.environ.get("PREFSTREAM_DATA_DIR", str(REPO.parent / "shared" / "data")))
    ap.add_argument("--bootstrap", default=os.environ.get("PREFSTREAM_BOOTSTRAP", "127.0.0.1:9092"))
    ap.add_argument("--registry", default=os.environ.get("PREFSTREAM_SCHEMA_REGISTRY_URL")
                    or f"http://127.0.0.1:{os.environ.get('PREFSTREAM_REGISTRY_PORT', '8081')}/apis/ccompat/v7")
    ap.add_argument("--events", type=int, default=50_000)
    ap.add_argument("--models", default=DEFAULT_MODELS)
    ap.add_argument("--repeat", type=int, default=2, help="alternated JSON/Avro catch-ups; the best rate of each")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]

    import fastavro

    from stream.adapters import load_dataset
    from stream.broker.serializers import AvroFormat, SchemaRegistry, avro_schema
    from stream.demo.config import default_model_params, write_settings_toml
    from stream.workers._snapshot import digest_add, event_hash

    ds = load_dataset("pokemon", args.data_dir)
    params = default_model_params(ds, [m for m in models if m != "linear-bt"])
    records, *_ = make_events(ds, args.events)
    n = len(records)
    expected = 0
    for k, _ in records:
        expected = digest_add(expected, event_hash(k.decode()))
    print(f"command: {' '.join([sys.executable, *sys.argv])}", flush=True)
    res: dict = {"events": n, "models": models, "registry": args.registry}
    tj, opts, u = create_run_topics("bench.avro.json", args.bootstrap, 1)
    ta, _, _ = create_run_topics("bench.avro.avro", args.bootstrap, 1)
    extra: list[str] = []
    reg = SchemaRegistry(args.registry)
    fmt = AvroFormat(ta["preferences"], "preference", reg)
    t = time.perf_counter()
    avro_records = [(k, fmt.frame(v)) for k, v in records]
    res["avro_encode_per_s"] = n / (time.perf_counter() - t)
    res["bytes_per_event"] = {"json": sum(len(v) for _, v in records) / n,
                              "avro": sum(len(v) for _, v in avro_records) / n}
    print(f"{n} duels: JSON {res['bytes_per_event']['json']:.0f} B/event, Avro {res['bytes_per_event']['avro']:.0f} "
          f"B/event (schema id {fmt.writer_id()}, encoded at {res['avro_encode_per_s']:,.0f}/s); load {load()}",
          flush=True)
    tmp = Path(f"/tmp/prefstream-avro-{u}")
    tmp.mkdir(parents=True, exist_ok=True)
    config = write_settings_toml(tmp / "avro.toml", {"feature_names": list(ds.feature_names), "model_params": params})
    lost = 0

    def run(label: str, topics: dict, count: int, env: dict) -> dict:
        nonlocal lost
        models_topic = f"bench.avro.models-{label}.{u}"
        extra.append(models_topic)
        r = catchup_round(args.bootstrap, opts, topics, models_topic, models, config, count, args.timeout,
                          f"avro-{label}", env=env)
        lost += sum(r["lost"].values())
        print(f"[{label}] {r['events_per_s']:,.0f} events/s over {r['span_s']:.1f} s "
              f"({r['events_per_cpu_s']:,.0f} per CPU-second of the worker), "
              f"p50={r['p50_ms']:.1f} ms p99={r['p99_ms']:.1f} ms; lost {r['lost']}; load {load()}", flush=True)
        return r

    avro_env = {"PREFSTREAM_FORMAT_PREFERENCES": "avro", "PREFSTREAM_SCHEMA_REGISTRY_URL": args.registry}
    try:
        for name, recs, topics in (("json", records, tj), ("avro", avro_records, ta)):
            rate = preload(args.bootstrap, topics["preferences"], recs)
            print(f"preloaded {n} {name} records at {rate:,.0f}/s; load {load()}", flush=True)
        rates: dict = {"json": [], "avro": []}
        per_cpu: dict = {"json": [], "avro": []}
        ok_digest = True
        for rep in range(args.repeat):  # alternated, so that a burst of load elsewhere hits both formats
            for name, topics, env in (("json", tj, {}), ("avro", ta, avro_env)):
                r = run(f"{name}-{rep}", topics, n, env)
                rates[name].append(r["events_per_s"])
                per_cpu[name].append(r["events_per_cpu_s"])
                ok_digest &= all(d == expected for _, d in r["per_model"].values())
        res.update(json_events_per_s=max(rates["json"]), avro_events_per_s=max(rates["avro"]), rates=rates,
                   per_cpu_s=per_cpu, digests_equal=ok_digest)
        print(f"best of {args.repeat} alternated runs: json {max(rates['json']):,.0f}/s, avro "
              f"{max(rates['avro']):,.0f}/s (all: {rates}); per CPU-second of the worker (less load-dependent): json "
              f"{max(per_cpu['json']):,.0f}, avro {max(per_cpu['avro']):,.0f}, ratio "
              f"{max(per_cpu['avro']) / max(per_cpu['json']):.3f}; digests equal: {ok_digest}; load {load()}", flush=True)

        # ---- evolution: a v2 event and an unknown schema id on the Avro topic, read by a fresh group
        v2 = json.loads(avro_schema("preference"))
        v2["fields"].append({"name": "campaign", "type": ["null", "string"], "default": None})
        v2_id = reg.register(fmt.subject, json.dumps(v2), "AVRO")
        import io

        e = json.loads(records[0][1])
        e["event_id"], e["campaign"] = "pokemon-v2-0", "spring"
        buf = io.BytesIO()
        buf.write(struct.pack(">bI", 0, v2_id))
        fastavro.schemaless_writer(buf, fastavro.parse_schema(v2), e)
        unknown_id = 2**31 - 1
        tail = [(b"pokemon-v2-0", buf.getvalue()),
                (b"pokemon-unknown-0", struct.pack(">bI", 0, unknown_id) + avro_records[1][1][5:])]
        preload(args.bootstrap, ta["preferences"], tail)
        print(f"registered v2 (id {v2_id}, optional field 'campaign', BACKWARD check passed); wrote one v2 event "
              f"and one record with schema id {unknown_id}; load {load()}", flush=True)
        re_ = run("evolved", ta, n + 1, avro_env)
        want = digest_add(expected, event_hash("pokemon-v2-0"))
        evolved = min(c - n for c, _ in re_["per_model"].values()) if re_["per_model"] else 0
        evolved_ok = all(d == want for _, d in re_["per_model"].values())
        res["evolved_learned"] = evolved if evolved_ok else 0
        reasons = dead_letter_reasons(args.bootstrap, ta["dead_letters"])
        res["dead_letter_reasons"] = reasons
        res["unknown_schema_dead_letters"] = reasons.get("unknown_schema", 0)
        print(f"[evolved] learned {n + 1} (v1 + v2) per model: {dict((m, c) for m, (c, _) in re_['per_model'].items())}"
              f", digests equal: {evolved_ok}; dead letters by reason: {reasons}; load {load()}", flush=True)
    finally:
        delete_topics(opts, [*tj.values(), *ta.values(), *extra])
    res["lost"] = lost
    res["avro_over_json"] = res["avro_events_per_s"] / res["json_events_per_s"]
    res["load_average"] = load()
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1, default=str))
    print(f"load_average={load()}")
    print(f"json_events_per_s={res['json_events_per_s']:.1f} avro_events_per_s={res['avro_events_per_s']:.1f} "
          f"avro_over_json={res['avro_over_json']:.3f} lost={lost} evolved_learned={res['evolved_learned']} "
          f"unknown_schema_dead_letters={res['unknown_schema_dead_letters']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
