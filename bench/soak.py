"""Soak: many events through one learner worker (capacity + linear-bt) on the real broker, RSS sampled.

What it does:

1. creates fresh topics (``--partitions`` preference partitions) on the broker at ``--bootstrap``;
2. produces ``--events`` synthetic preference events (3 features, Bradley–Terry labels, every
   ``--dup-every``-th event re-sent once more at another offset, as producer retries do) and
   waits until the broker acknowledged them;
3. starts ``python -m stream worker learn --models capacity,linear-bt`` and samples the worker's
   resident set size (``VmRSS`` of ``/proc/<pid>/status``) every ``--sample-s`` seconds while it
   learns, with the learned count from its Prometheus endpoint;
4. when the final snapshots hold every event (or ``--timeout`` passes) reads them back: per
   model the training count and the order-free digest of learned event ids, against the
   produced ids. ``lost`` = produced distinct events not in the snapshots, ``duplicated`` =
   learned more than once (count − distinct), the worst over the two models.

RSS growth is measured after warm-up: ``rss_start_mb`` is the median RSS of the samples taken
while the learned count was between ``--warmup`` (default 10 %) and twice that (allocator pools,
the dedupe window and the capacity's window are full by then), ``rss_end_mb`` the median over
the last ``--warmup`` of the events. Medians, because single samples swing by ±10 MB while a
snapshot is encoded or a fetch buffer is full (a first run with single samples read 199.9 →
227.8 MB although the RSS had already touched 228.4 MB at 16 % of the run). ``rss_peak_mb`` is
the largest sample. Goal: growth ≤ 10 %, 0 lost. The load average is printed beside the figures
(the machine is shared).

The last line is exactly::

    events=<int> rss_start_mb=<float> rss_end_mb=<float> rss_growth_pct=<float> lost=<int> duplicated=<int> ...

Reproduce: ``bash deploy/kafka/start.sh && python bench/soak.py --events 1000000``; ``--out DIR``
also writes ``DIR/soak.txt`` (the RSS samples and the last line).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench.worker_run import create_run_topics, delete_topics, metrics_text, stop_worker  # noqa: E402
from stream.demo.workers import free_port as _free_port  # noqa: E402


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--bootstrap", default=os.environ.get("PREFSTREAM_BOOTSTRAP", "127.0.0.1:9092"))
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--models", default="capacity,linear-bt")
    ap.add_argument("--dup-every", type=int, default=1000, help="re-send every k-th event once (0: never)")
    ap.add_argument("--warmup", type=float, default=0.10, help="fraction of events before rss_start is taken")
    ap.add_argument("--sample-s", type=float, default=5.0)
    ap.add_argument("--timeout", type=float, default=3600.0)
    ap.add_argument("--out", default=None, help="directory for soak.txt (nothing is written without it)")
    args = ap.parse_args(argv)

    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    from stream.contract import decode_snapshot
    from stream.workers._snapshot import digest_add, event_hash, split_stream_meta

    topics, opts, u = create_run_topics("bench.soak", args.bootstrap, args.partitions)
    models = [m for m in args.models.split(",") if m]
    N = args.events
    rng = np.random.default_rng(0)
    w = np.array([1.0, -2.0, 0.5])
    prod = KafkaProducer(acks="all", linger_ms=50, batch_size=524288, compression_type="lz4", **opts)
    expected, sent = 0, 0
    t0 = time.perf_counter()
    for start in range(0, N, 50_000):
        n = min(50_000, N - start)
        XL, XR = rng.uniform(0, 1, size=(n, 3)).round(4), rng.uniform(0, 1, size=(n, 3)).round(4)
        y = np.where((XL - XR) @ w > 0, 1, -1)
        for j in range(n):
            i = start + j
            eid = f"s{i}"
            v = (f'{{"schema_version":1,"event_id":"{eid}","timestamp":{1700000000 + i},'
                 f'"left":{{"features":{{"a":{XL[j, 0]},"b":{XL[j, 1]},"c":{XL[j, 2]}}}}},'
                 f'"right":{{"features":{{"a":{XR[j, 0]},"b":{XR[j, 1]},"c":{XR[j, 2]}}}}},"outcome":{int(y[j])}}}').encode()
            prod.send(topics["preferences"], key=eid.encode(), value=v)
            sent += 1
            if args.dup_every and i % args.dup_every == 0:
                prod.send(topics["preferences"], key=eid.encode(), value=v)  # a re-sent copy
                sent += 1
            expected = digest_add(expected, event_hash(eid))
    prod.flush(600)
    prod.close()
    produce_s = time.perf_counter() - t0
    print(f"produced {N} events (+{sent - N} re-sent copies) in {produce_s:.1f} s; load {_load()}", flush=True)

    port = _free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PREFSTREAM_BOOTSTRAP_SERVERS=args.bootstrap,
               PREFSTREAM_CONSUMER_GROUP=f"soak-{u}", PREFSTREAM_STATE_DIR=f"/tmp/prefstream-soak-{u}",
               PREFSTREAM_SNAPSHOT_EVERY_EVENTS="20000", PREFSTREAM_SNAPSHOT_EVERY_SECONDS="10",
               PREFSTREAM_FEATURE_NAMES="a,b,c",
               **{f"PREFSTREAM_TOPIC_{k.upper()}": v for k, v in topics.items()})
    log = open(f"/tmp/prefstream-soak-{u}.log", "w")
    worker = subprocess.Popen([sys.executable, "-m", "stream", "worker", "learn", "--models", ",".join(models),
                               "--metrics-port", str(port), "--log-level", "WARNING"], cwd=REPO, env=env,
                              stdout=log, stderr=subprocess.STDOUT)

    def learned() -> float:
        text = metrics_text(port, timeout=5)
        if not text:
            return -1.0
        vals = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                if line.startswith("prefstream_events_learned_total{")]
        return min(vals) if len(vals) == len(models) else 0.0

    def snapshots() -> dict:
        c = KafkaConsumer(enable_auto_commit=False, group_id=None, consumer_timeout_ms=2000,
                          max_partition_fetch_bytes=16 * 1024 * 1024, **opts)
        tp = TopicPartition(topics["models"], 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        latest = {}
        for m in c:
            latest[m.key.decode()] = m.value
        c.close()
        return {k: decode_snapshot(v) for k, v in latest.items() if v is not None}

    samples: list[tuple[float, float, float, str]] = []  # (t, learned, rss_mb, load)
    rss_start = rss_end = float("nan")
    t_start = time.perf_counter()
    deadline = t_start + args.timeout
    try:
        while time.perf_counter() < deadline:
            if worker.poll() is not None:
                print(f"the worker exited with {worker.returncode}; see {log.name}", file=sys.stderr)
                break
            n = learned()
            rss = _rss_mb(worker.pid)
            samples.append((time.perf_counter() - t_start, n, rss, _load()))
            print(f"t={samples[-1][0]:7.1f}s learned={n:9.0f} rss_mb={rss:7.1f} load={samples[-1][3]}", flush=True)
            if n >= N:
                rss_end = rss
                break
            time.sleep(args.sample_s)
        # the final snapshots (every 10 s or 20000 events)
        per_model: dict[str, tuple[int, int]] = {}
        while time.perf_counter() < deadline + 60:
            snaps = snapshots()
            per_model = {}
            for key, s in snaps.items():
                m = key.split("@", 1)[0]
                c, d = per_model.get(m, (0, 0))
                per_model[m] = (c + s["training_count"], digest_add(d, split_stream_meta(s["state"])[1]["digest"]))
            if all(per_model.get(m, (0, 0))[0] >= N for m in models) or rss_end != rss_end:
                break
            time.sleep(2.0)
    finally:
        stop_worker(worker, 30)
        delete_topics(opts, topics.values())

    lost = duplicated = 0
    learned_min = N
    for m in models:
        count, digest = per_model.get(m, (0, 0))
        learned_min = min(learned_min, count)
        if digest == expected and count == N:
            continue
        lost = max(lost, max(N - count, 0))
        duplicated = max(duplicated, max(count - N, 0))
        if count == N and digest != expected:  # same count, other ids: some lost, as many doubled
            lost, duplicated = max(lost, 1), max(duplicated, 1)
    start_win = [r for _, n, r, _ in samples if args.warmup * N <= n < 2 * args.warmup * N]
    end_win = [r for _, n, r, _ in samples if n >= (1 - args.warmup) * N]
    finished = rss_end == rss_end
    rss_start = float(np.median(start_win)) if start_win else float("nan")
    rss_end = float(np.median(end_win)) if (end_win and finished) else float("nan")
    rss_peak = max((r for _, n, r, _ in samples if n > 0), default=float("nan"))
    growth = 100.0 * (rss_end - rss_start) / rss_start if rss_start == rss_start and rss_end == rss_end else float("nan")
    secs = samples[-1][0] if samples else float("nan")
    print("per model (training count, digest ok): "
          + ", ".join(f"{m}=({per_model.get(m, (0, 0))[0]}, {per_model.get(m, (0, 0))[1] == expected})" for m in models))
    last = (f"events={learned_min} rss_start_mb={rss_start:.1f} rss_end_mb={rss_end:.1f} rss_growth_pct={growth:.2f} "
            f"lost={lost} duplicated={duplicated} rss_peak_mb={rss_peak:.1f} target={N} resent_copies={sent - N} seconds={secs:.0f} "
            f"events_per_s={learned_min / secs if secs == secs and secs > 0 else float('nan'):.0f} "
            f"load_avg=\"{_load()}\"")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "soak.txt", "w") as fh:
            fh.write("t_s learned rss_mb load_avg\n")
            for t, n, r, ld in samples:
                fh.write(f"{t:.1f} {n:.0f} {r:.1f} {ld}\n")
            fh.write(last + "\n")
    print(last)
    return 0 if lost == 0 and duplicated == 0 and learned_min == N else 1


if __name__ == "__main__":
    sys.exit(main())
