"""Throughput of the learner worker through a real Kafka broker, beside kafka-python's raw consume rate.

What it does, in one run:

1. creates fresh topics (3 preference partitions) on the broker at ``--bootstrap``;
2. produces ``--events`` synthetic preference events (3 features, Bradley–Terry labels) and
   waits until the broker acknowledged all of them;
3. **anchors** — reads the whole preference topic with a bare kafka-python ``KafkaConsumer``
   (no parsing, no learning): the ceiling for a Python Kafka client on this machine; with a bare
   aiokafka consumer (``getmany``, the client the workers use); and with a bare Faust agent that
   only iterates and acknowledges (the ceiling for a Faust worker — why the workers left Faust);
4. starts ``python -m stream worker learn --models <--models>`` (default ``linear-bt``; micro-batches
   at the default ``batch_max_events`` / ``batch_max_ms`` unless ``--batch-max-events`` /
   ``--batch-max-ms`` say otherwise) and measures the time from its first learned event to the
   moment its learned counter reaches N (events/s over that window, so the worker's start-up is
   not counted), the p50/p99 of the **arrival → learned** latency of each event from the worker's
   ``prefstream_learn_latency_seconds`` histogram (bucket bounds, linearly interpolated), and
   lost / duplicated events from the final snapshots (count and the digest of learned event ids).

The last line is exactly::

    events_per_s=<f> raw_consume_events_per_s=<f> worker_over_raw_ratio=<f> p99_learn_latency_ms=<f> lost=<int> duplicated=<int>

Reproduce: ``bash deploy/kafka/start.sh && python bench/stream_throughput.py --events 50000``
(and ``--models capacity``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench.worker_run import create_run_topics, delete_topics, latest_snapshots, metrics_text, stop_worker  # noqa: E402
from stream.demo.workers import free_port as _free_port  # noqa: E402


def _histogram_quantile(text: str, name: str, q: float) -> float:
    """Quantile of a Prometheus histogram from its exposition text (linear in the bucket)."""
    buckets = []
    for line in text.splitlines():
        if line.startswith(name + "_bucket{"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            buckets.append((float("inf") if le == "+Inf" else float(le), float(line.rsplit(" ", 1)[1])))
    buckets.sort()
    if not buckets or buckets[-1][1] == 0:
        return float("nan")
    total = buckets[-1][1]
    rank = q * total
    prev_le, prev_c = 0.0, 0.0
    for le, c in buckets:
        if c >= rank:
            if le == float("inf"):
                return prev_le
            return prev_le + (le - prev_le) * ((rank - prev_c) / max(c - prev_c, 1e-12))
        prev_le, prev_c = le, c
    return prev_le


async def _bare_aiokafka(opts: dict, topic: str, partitions: int, n: int, timeout: float) -> float:
    """Anchor 1b: events/s of a bare aiokafka consumer (``getmany``, the workers' client) over the topic."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from stream.broker.clients import aiokafka_options
    from stream.settings import Settings

    s = Settings.load(None, {"bootstrap_servers": opts["bootstrap_servers"]
                             if isinstance(opts["bootstrap_servers"], str) else ",".join(opts["bootstrap_servers"])},
                      environ=dict(os.environ))
    c = AIOKafkaConsumer(enable_auto_commit=False, group_id=None, **aiokafka_options(s))
    await c.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        got, t0 = 0, time.perf_counter()
        while got < n and time.perf_counter() - t0 < timeout:
            for msgs in (await c.getmany(timeout_ms=500, max_records=5000)).values():
                got += len(msgs)
        return got / (time.perf_counter() - t0)
    finally:
        await c.stop()


def _bare_faust_agent(bootstrap: str, topic: str, n: int, out: str) -> int:
    """Second anchor: a Faust agent that only iterates ``stream.noack().events()`` and acks."""
    import faust

    u = uuid.uuid4().hex[:8]
    app = faust.App(f"bench-bare-{u}", broker=f"kafka://{bootstrap}", store="memory://", web_enabled=False,
                    topic_allow_declare=False, consumer_auto_offset_reset="earliest", stream_wait_empty=False,
                    datadir=f"/tmp/prefstream-bench-bare-{u}")
    src = app.topic(topic, key_serializer="raw", value_serializer="raw")
    state = {"n": 0, "t0": None}

    @app.agent(src)
    async def count(stream):
        async for ev in stream.noack().events():
            if state["t0"] is None:
                state["t0"] = time.perf_counter()
            state["n"] += 1
            ev.ack()
            if state["n"] >= n:
                Path(out).write_text(f"{(n - 1) / (time.perf_counter() - state['t0']):.1f}")
                os._exit(0)

    faust.Worker(app, loglevel="error", quiet=True, redirect_stdouts=False).execute_from_commandline()
    return 0


def main(argv=None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--bare-faust-agent":
        return _bare_faust_agent(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=20000)
    ap.add_argument("--bootstrap", default=os.environ.get("PREFSTREAM_BOOTSTRAP", "127.0.0.1:9092"))
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--models", default="linear-bt", help="comma-separated models of the learner worker")
    ap.add_argument("--batch-max-events", type=int, default=None)
    ap.add_argument("--batch-max-ms", type=float, default=None)
    args = ap.parse_args(argv)
    n_models = len([m for m in args.models.split(",") if m.strip()])

    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    from stream.contract import decode_snapshot
    from stream.workers._snapshot import digest_add, event_hash, split_stream_meta

    topics, opts, u = create_run_topics("bench.stream", args.bootstrap, args.partitions)
    N = args.events
    rng = np.random.default_rng(0)
    w = np.array([1.0, -2.0, 0.5])
    # features in [0, 1] so that every model (the capacity expects criteria in [0, 1]) takes them
    XL, XR = rng.uniform(size=(N, 3)), rng.uniform(size=(N, 3))
    y = np.where((XL - XR) @ w > 0, 1, -1)
    prod = KafkaProducer(acks="all", linger_ms=20, batch_size=262144, **opts)
    t0 = time.perf_counter()
    expected = 0
    for i in range(N):
        eid = f"b{i}"
        ev = {"schema_version": 1, "event_id": eid, "timestamp": 1700000000 + i,
              "left": {"features": {"a": XL[i, 0], "b": XL[i, 1], "c": XL[i, 2]}},
              "right": {"features": {"a": XR[i, 0], "b": XR[i, 1], "c": XR[i, 2]}}, "outcome": int(y[i])}
        prod.send(topics["preferences"], key=eid.encode(), value=json.dumps(ev).encode())
        expected = digest_add(expected, event_hash(eid))
    prod.flush(120)
    prod.close()
    produce_s = time.perf_counter() - t0
    print(f"produced {N} events in {produce_s:.2f} s ({N / produce_s:.0f} events/s)", flush=True)

    # anchor: bare kafka-python consume of the same topic
    c = KafkaConsumer(enable_auto_commit=False, group_id=None, **opts)
    tps = [TopicPartition(topics["preferences"], p) for p in range(args.partitions)]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    n = 0
    t0 = time.perf_counter()
    while n < N and time.perf_counter() - t0 < args.timeout:
        for msgs in c.poll(timeout_ms=500, max_records=5000).values():
            n += len(msgs)
    raw_s = time.perf_counter() - t0
    c.close()
    raw_rate = n / raw_s
    print(f"raw kafka-python consume: {n} events in {raw_s:.2f} s", flush=True)

    # anchor 1b: the client the workers use, bare — aiokafka getmany, no parsing, no learning
    aio_rate = asyncio.run(_bare_aiokafka(opts, topics["preferences"], args.partitions, N, args.timeout))
    print(f"raw aiokafka getmany consume: {aio_rate:.1f} events/s", flush=True)

    # second anchor: a bare Faust agent (no parsing, no learning) on the same topic; faust-streaming
    # is no longer a requirement (docs/history.md, "Why Faust went"): install it by hand to measure this anchor
    out = f"/tmp/prefstream-bench-bare-{u}.txt"
    try:
        import faust  # noqa: F401

        subprocess.run([sys.executable, __file__, "--bare-faust-agent", args.bootstrap, topics["preferences"], str(N), out],
                       cwd=REPO, timeout=args.timeout, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
        bare_rate = float(Path(out).read_text())
    except (ImportError, subprocess.TimeoutExpired, OSError, ValueError):
        bare_rate = float("nan")
    print(f"bare faust agent consume: {bare_rate:.1f} events/s", flush=True)

    # the learner worker
    port = _free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PREFSTREAM_BOOTSTRAP_SERVERS=args.bootstrap,
               PREFSTREAM_CONSUMER_GROUP=f"bench-{u}", PREFSTREAM_STATE_DIR=f"/tmp/prefstream-bench-{u}",
               PREFSTREAM_SNAPSHOT_EVERY_EVENTS="5000", PREFSTREAM_SNAPSHOT_EVERY_SECONDS="0.5",
               PREFSTREAM_FEATURE_NAMES="a,b,c",
               **{f"PREFSTREAM_TOPIC_{k.upper()}": v for k, v in topics.items()})
    if args.batch_max_events is not None:
        env["PREFSTREAM_BATCH_MAX_EVENTS"] = str(args.batch_max_events)
    if args.batch_max_ms is not None:
        env["PREFSTREAM_BATCH_MAX_MS"] = str(args.batch_max_ms)
    log = open(f"/tmp/prefstream-bench-{u}.log", "w")
    worker = subprocess.Popen([sys.executable, "-m", "stream", "worker", "learn", "--models", args.models,
                               "--metrics-port", str(port), "--log-level", "WARNING"], cwd=REPO, env=env,
                              stdout=log, stderr=subprocess.STDOUT)

    def scrape() -> str:
        return metrics_text(port)

    def learned(text: str) -> float:
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("prefstream_events_learned_total{"))

    def snapshots():
        latest = latest_snapshots(opts, topics["models"], timeout_ms=800)
        return {k: decode_snapshot(v) for k, v in latest.items() if v is not None}

    try:
        deadline = time.perf_counter() + args.timeout
        t_first, first_count = None, 0.0
        while time.perf_counter() < deadline:
            got = learned(scrape())
            if got > 0:
                t_first = time.perf_counter()
                first_count = got
                break
            time.sleep(0.01)
        t_done = None
        while time.perf_counter() < deadline and t_first is not None:
            if learned(scrape()) >= N * n_models:
                t_done = time.perf_counter()
                break
            time.sleep(0.02)
        if t_done is None:
            print("worker did not learn every event in time; see", log.name, file=sys.stderr)
        # wait for the final snapshots
        total, digest = 0, 0
        while time.perf_counter() < deadline:
            snaps = snapshots()
            total = sum(s["training_count"] for s in snaps.values())
            if total >= N * n_models:
                break
            time.sleep(0.5)
        time.sleep(1.0)
        snaps = snapshots()
        first_model = args.models.split(",")[0].strip()
        mine = {k: s for k, s in snaps.items() if k.decode().startswith(first_model + "@")}
        total = sum(s["training_count"] for s in mine.values())
        digest = 0
        for s in mine.values():
            digest = digest_add(digest, split_stream_meta(s["state"])[1]["digest"])
        text = scrape()
        p99 = _histogram_quantile(text, "prefstream_learn_latency_seconds", 0.99) * 1000.0
        p50 = _histogram_quantile(text, "prefstream_learn_latency_seconds", 0.50) * 1000.0
        print("arrival->learned histogram (cumulative):", " ".join(
            line.split('le="', 1)[1].split('"', 1)[0] + ":" + line.rsplit(" ", 1)[1].split(".")[0]
            for line in text.splitlines() if line.startswith("prefstream_learn_latency_seconds_bucket{")))
    finally:
        stop_worker(worker, 20)
        delete_topics(opts, topics.values())

    span = (t_done - t_first) if (t_done and t_first) else float("nan")
    first_count /= n_models  # the counter sums over models
    rate = (N - first_count) / span if span == span and span > 0 else float("nan")
    lost = max(N - total, 0)
    duplicated = max(total - N, 0)
    print(f"worker: {N - first_count:.0f} events in {span:.2f} s after the first learned event; "
          f"arrival->learned p50={p50:.3f} ms p99={p99:.3f} ms; snapshots ({first_model}): {total} learned, digest "
          f"{'matches' if digest == expected else 'DIFFERS'}")
    print(f"raw_consume_events_per_s={raw_rate:.1f} aiokafka_raw_events_per_s={aio_rate:.1f} "
          f"faust_bare_events_per_s={bare_rate:.1f} faust_bare_over_aiokafka_raw={bare_rate / aio_rate:.3f} "
          f"worker_over_raw_ratio={rate / raw_rate:.3f} worker_over_faust_bare_ratio={rate / bare_rate:.3f}")
    if digest != expected and lost == 0 and duplicated == 0:
        lost = duplicated = -1  # same count, different event set: flag it
    try:
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "n/a"
    print(f"models={args.models} load_average={load.replace(' ', '/')}")
    print(f"events_per_s={rate:.1f} raw_consume_events_per_s={raw_rate:.1f} worker_over_raw_ratio={rate / raw_rate:.3f} "
          f"p99_learn_latency_ms={p99:.3f} lost={lost} duplicated={duplicated}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
