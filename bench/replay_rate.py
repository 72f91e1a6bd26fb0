"""Replay rate: `prefstream replay` of the Pokémon duels CSV beside the raw produce rate of three clients.

What it does, in one run (the machine's load average is printed beside the figures):

1. writes the 50,000 Pokémon duels (``--data-dir``/pokemon, :func:`stream.adapters.load_dataset`)
   as a replay CSV (``event_id, timestamp, outcome, left_id, right_id, left.<26 features>,
   right.<26 features>``: self-contained events, ~1 KB of JSON each);
2. times :func:`stream.replay.replay` of that CSV into a fresh 3-partition topic (``acks=all``,
   idempotence on: the replay defaults), reading, checking and encoding included, and checks
   that the topic holds exactly N records afterwards;
3. **anchors**, in the same run: the same records, read and encoded beforehand by replay's own
   reader (``stream.event_files._iter_chunks``: the bytes replay sends), produced raw into fresh
   topics by confluent-kafka (replay's producer settings), aiokafka (``acks="all"``,
   idempotence, ``linger_ms=20``, 1 MiB batches) and kafka-python (``acks="all"``, idempotence,
   ``linger_ms=20``, 1 MiB batches): no parsing, the
   ceiling of each client. Each measurement runs ``--repeats`` times; the best is kept.

The last line is exactly::

    replay_events_per_s=<f> raw_produce_events_per_s=<f> over_raw=<f> acks=all

with ``raw_produce_events_per_s`` the fastest raw client of the run and ``over_raw`` the ratio.
The line before it gives each measurement in events per CPU-second of this process (librdkafka's
threads included), which does not depend on the machine's load.

Reproduce: ``bash deploy/kafka/start.sh && python bench/replay_rate.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench.worker_run import delete_topics  # noqa: E402


def write_pokemon_csv(ds, path: Path, n: int | None = None) -> int:
    """The duels as a replay CSV with inline features and item ids; returns the number of rows."""
    import csv

    f = ds.feature_names
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["event_id", "timestamp", "outcome", "left_id", "right_id"]
                   + [f"left.{x}" for x in f] + [f"right.{x}" for x in f])
        k = 0
        for e in ds.to_events(0, n):
            w.writerow([e["event_id"], e["timestamp"], e["outcome"], e["left"]["id"], e["right"]["id"]]
                       + [e["left"]["features"][x] for x in f] + [e["right"]["features"][x] for x in f])
            k += 1
    return k


def _topic(boot: str, name: str, partitions: int) -> str:
    from stream.broker import TopicSpec, create_topics

    create_topics(None, {name: TopicSpec(partitions, {})}, client_options={"bootstrap_servers": boot})
    return name


def topic_size(boot: str, topic: str) -> int:
    """Records in ``topic`` (sum of the partitions' end offsets; fresh topics start at 0)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": boot, "group.id": f"bench-size-{uuid.uuid4().hex[:6]}"})
    try:
        md = c.list_topics(topic, timeout=10)
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in md.topics[topic].partitions)
    finally:
        c.close()


def raw_confluent(boot: str, topic: str, records) -> float:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": boot, "acks": "all", "enable.idempotence": True, "linger.ms": 20,
                  "batch.size": 1 << 20, "queue.buffering.max.kbytes": 256 * 1024,
                  "queue.buffering.max.messages": 1_000_000, "delivery.report.only.error": True})
    p.list_topics(timeout=10)
    t = time.perf_counter()
    produce = p.produce
    for k, v in records:
        produce(topic, v, k)
    left = p.flush(120)
    dt = time.perf_counter() - t
    assert left == 0
    return len(records) / dt


def raw_aiokafka(boot: str, topic: str, records) -> float:
    from aiokafka import AIOKafkaProducer

    async def go() -> float:
        p = AIOKafkaProducer(bootstrap_servers=boot, acks="all", enable_idempotence=True, linger_ms=20,
                             max_batch_size=1 << 20)
        await p.start()
        try:
            t = time.perf_counter()
            futs = [await p.send(topic, key=k, value=v) for k, v in records]
            await asyncio.gather(*futs)
            return len(records) / (time.perf_counter() - t)
        finally:
            await p.stop()

    return asyncio.run(go())


def raw_kafka_python(boot: str, topic: str, records) -> float:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=boot, acks="all", enable_idempotence=True, linger_ms=20, batch_size=1 << 20)
    t = time.perf_counter()
    for k, v in records:
        p.send(topic, key=k, value=v)
    p.flush()
    dt = time.perf_counter() - t
    p.close()
    return len(records) / dt


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=os.environ.get("PREFSTREAM_DATA_DIR", str(REPO.parent / "shared" / "data")))
    ap.add_argument("--bootstrap", default=os.environ.get("PREFSTREAM_BOOTSTRAP", "127.0.0.1:9092"))
    ap.add_argument("--events", type=int, default=None, help="first N duels (default all 50,000)")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--kafka-python-events", type=int, default=10_000,
                    help="kafka-python is measured on the first N records only (it is the slowest by far)")
    ap.add_argument("--out", default=None, help="write the figures as JSON here")
    args = ap.parse_args(argv)

    from stream.adapters import load_dataset
    from stream.event_files import _iter_chunks
    from stream.replay import replay

    ds = load_dataset("pokemon", args.data_dir)
    tmp = Path(tempfile.mkdtemp(prefix="prefstream-replay-rate-"))
    csv_path = tmp / "pokemon_duels.csv"
    n = write_pokemon_csv(ds, csv_path, args.events)
    t = time.perf_counter()
    records = [kv for ch in _iter_chunks(csv_path, "preference") for kv in zip(ch.keys, ch.values)]
    read_rate = n / (time.perf_counter() - t)
    assert len(records) == n
    print(f"{n} duels, {csv_path.stat().st_size / n:.0f} B of CSV and {sum(len(v) for _, v in records) / n:.0f} B "
          f"of JSON each; read+check+encode alone: {read_rate:,.0f} events/s; load {os.getloadavg()}", flush=True)

    u = uuid.uuid4().hex[:8]
    made: list[str] = []
    results: dict[str, list[float]] = {"replay": [], "confluent_kafka": [], "aiokafka": [], "kafka_python": []}
    raws = {"confluent_kafka": raw_confluent, "aiokafka": raw_aiokafka, "kafka_python": raw_kafka_python}
    cpu: dict[str, list[float]] = {k: [] for k in results}  # events per CPU-second (load-independent)
    try:
        for rep in range(args.repeats):
            topic = _topic(args.bootstrap, f"bench.replay.{u}.{rep}", args.partitions)
            made.append(topic)
            c0 = time.process_time()  # CPU of this process, librdkafka's threads included
            res = replay(csv_path, args.bootstrap, topic, progress=False)
            cpu["replay"].append(n / max(time.process_time() - c0, 1e-9))
            assert (res.sent, res.skipped, res.failed) == (n, 0, 0), res.summary()
            size = topic_size(args.bootstrap, topic)
            assert size == n, f"topic holds {size} records, replay said {n}"
            results["replay"].append(res.events_per_s)
            print(f"[{rep}] replay: {res.summary()} (topic holds {size}); load {os.getloadavg()}", flush=True)
            for name, fn in raws.items():
                topic = _topic(args.bootstrap, f"bench.raw-{name.replace('_', '-')}.{u}.{rep}", args.partitions)
                made.append(topic)
                recs = records[: args.kafka_python_events] if name == "kafka_python" else records
                c0 = time.process_time()
                rate = fn(args.bootstrap, topic, recs)
                cpu[name].append(len(recs) / max(time.process_time() - c0, 1e-9))
                results[name].append(rate)
                print(f"[{rep}] raw {name}: {rate:,.0f} events/s ({len(recs)} records); load {os.getloadavg()}", flush=True)
    finally:
        delete_topics({"bootstrap_servers": args.bootstrap}, made)
    best = {k: max(v) for k, v in results.items()}
    fastest = max((k for k in raws), key=lambda k: best[k])
    best_cpu = {k: max(v) for k, v in cpu.items()}
    out = {"events": n, "load_avg": os.getloadavg(), "repeats": results, "best": best, "fastest_raw": fastest,
           "read_check_encode_events_per_s": read_rate, "per_cpu_s": cpu, "best_per_cpu_s": best_cpu}
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1))
    for k in raws:
        print(f"raw {k}: {best[k]:,.0f} events/s, replay / raw {k} = {best['replay'] / best[k]:.3f}")
    print("per CPU-second of this process (librdkafka's threads included; what one idle core would give): "
          + ", ".join(f"{k} {v:,.0f}" for k, v in best_cpu.items())
          + f"; replay / raw confluent-kafka {best_cpu['replay'] / best_cpu['confluent_kafka']:.3f}")
    print(f"replay_events_per_s={best['replay']:.1f} raw_produce_events_per_s={best[fastest]:.1f} "
          f"over_raw={best['replay'] / best[fastest]:.3f} acks=all", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
