"""Personal state at stream scale: a million people through one learner worker on the broker, catching up.

What it does (the load average is printed beside every figure):

1. a synthetic stream of ``--users`` (1,000,000) people on d = 8 criteria: every person once,
   plus ``--extra`` × users events whose people are drawn Zipf(``--zipf``, 1.2) over a random
   ranking of the people (a few very active people, most seen once or twice); each person's
   outcome comes from the population's weights plus their own deviation, so persons differ.
   Preloaded, keyed by person (one person's events on one partition, in order), into a fresh
   topic of ``--partitions`` (3) partitions with confluent-kafka; fresh model topic and a fresh
   compacted people changelog of as many partitions;
2. one ``python -m stream worker learn --models capacity-personal`` (``--model``) at the
   stream defaults catches up: events per second from its first learned event to the last
   (``prefstream_events_learned_total``, scraped every second) and per CPU-second of the worker
   (the rate it would reach with a core of its own on a machine shared by others), its peak RSS (``VmHWM``) and
   the RSS growth per person over its RSS at the first learned event (``bytes_per_user``);
   ``people_memory_bytes`` (``--memory-bytes``, default 1 GiB) bounds the people in memory;
3. SIGTERM: final snapshots and people; a second worker in the same group restores every
   partition's people from the changelog (``restore_s``: the sum of its "people of … restored
   in X s" log lines), learns what the first one's last rounds did not cover (nothing when its
   final rounds landed) and stops with SIGTERM;
4. **lost / duplicated**: the changelog read to its end, last record per person: per person,
   ``lost`` += events sent − version (when below), ``duplicated`` += version − events sent (when
   above), a person missing from the changelog counting all their events lost; plus the
   population's (Σ training_count of the snapshots against the events sent).

The last line is exactly::

    users= events_per_s= rss_gb= bytes_per_user= restore_s= lost= duplicated=

Goals (issue 28): 1,000,000 people in ``rss_gb`` ≤ 4 at ``events_per_s`` ≥ 10,000, lost = 0,
duplicated = 0. Reproduce: ``bash deploy/kafka/start.sh && python bench/personal_scale.py``
(``--users 20000`` for a small run, a few minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench.worker_run import create_run_topics, delete_topics, latest_snapshots, metrics_text  # noqa: E402
from stream.demo.workers import cpu_seconds, free_port  # noqa: E402

CRIT = [f"c{i}" for i in range(8)]


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def say(msg: str) -> None:
    print(f"{msg}  (load {load()})", flush=True)


def stream_people(users: int, extra: float, zipf: float, seed: int) -> np.ndarray:
    """The person index of every event, in stream order: everyone once, plus Zipf-drawn extras."""
    rng = np.random.default_rng(seed)
    n_extra = int(round(extra * users))
    rank = rng.permutation(users)  # rank r -> person
    extras = rank[np.minimum(rng.zipf(zipf, size=n_extra) - 1, users - 1)]
    order = np.concatenate([np.arange(users), extras])
    rng.shuffle(order)
    return order


def produce(boot: str, topic: str, who: np.ndarray, seed: int, chunk: int = 50_000) -> float:
    """Send the events (keyed by person) with confluent-kafka; the rate in events per second."""
    from confluent_kafka import Producer

    rng = np.random.default_rng(seed + 1)
    w = np.array([1.0, -0.8, 0.6, 0.4, -0.3, 0.2, 0.1, -0.05])
    p = Producer({"bootstrap.servers": boot, "acks": "all", "enable.idempotence": True, "linger.ms": 20,
                  "batch.size": 1 << 20, "queue.buffering.max.messages": 1_000_000,
                  "queue.buffering.max.kbytes": 512 * 1024, "delivery.report.only.error": True})
    t = time.perf_counter()
    fmt = ",".join(f'"{c}":%.4f' for c in CRIT)
    for start in range(0, len(who), chunk):
        ids = who[start:start + chunk]
        X = rng.random((len(ids), 16))
        # each person's own deviation on two criteria, from their index (the same at every event)
        dev = np.stack([np.sin(ids * 1.7), np.cos(ids * 0.9)], axis=1)
        margin = (X[:, :8] - X[:, 8:]) @ w + ((X[:, :2] - X[:, 8:10]) * dev).sum(axis=1)
        y = np.where(margin > 0, 1, -1)
        for j in range(len(ids)):
            i = start + j
            u = b"u%07d" % ids[j]
            row = X[j]
            v = (b'{"schema_version":1,"event_id":"e%d","timestamp":%d,"user_id":"%s","left":{"features":{'
                 % (i, 1_600_000_000 + i, u)
                 + (fmt % tuple(row[:8])).encode() + b'}},"right":{"features":{'
                 + (fmt % tuple(row[8:])).encode() + b'}},"outcome":%d}' % y[j])
            while True:
                try:
                    p.produce(topic, v, u)
                    break
                except BufferError:
                    p.poll(0.05)
        p.poll(0)
    assert p.flush(600) == 0
    return len(who) / (time.perf_counter() - t)


def rss(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process, bytes."""
    out = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith(("VmRSS:", "VmHWM:")):
                k, v = line.split(":")
                out[k] = int(v.split()[0]) * 1024
    return out.get("VmRSS", 0), out.get("VmHWM", 0)


def learned(port: int, model: str) -> float:
    try:
        text = metrics_text(port)
    except OSError:
        return -1.0
    total = 0.0
    for line in text.splitlines():
        if line.startswith(f'prefstream_events_learned_total{{model="{model}"}}'):
            total += float(line.rsplit(" ", 1)[1])
    return total


def start_worker(env: dict, model: str, port: int, log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "stream", "worker", "learn", "--models", model,
                             "--metrics-port", str(port)], cwd=REPO, env=env, stdout=open(log, "w"),
                            stderr=subprocess.STDOUT)


def changelog_versions(boot: str, topic: str, partitions: int, model: str) -> dict[str, int]:
    """Last record per person of ``model`` on the changelog: ``{user: version}`` (tombstones dropped)."""
    import orjson
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    from learners.state import SMALL_MAGIC

    c = Consumer({"bootstrap.servers": boot, "group.id": f"bench-people-{os.getpid()}", "enable.auto.commit": False,
                  "fetch.max.bytes": 64 << 20})
    tps = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)]
    ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)}
    c.assign(tps)
    last: dict[str, int | None] = {}
    done = {p for p, e in ends.items() if e == 0}
    prefix = f"{model}@".encode()
    m0 = len(SMALL_MAGIC)
    deadline = time.monotonic() + 900
    while len(done) < partitions and time.monotonic() < deadline:
        for m in c.consume(20_000, 1.0):
            if m.error() is not None:
                continue
            k, v = m.key(), m.value()
            if k.startswith(prefix):
                user = k[len(prefix):].decode()
                if v is None:
                    last[user] = None
                else:
                    n = int.from_bytes(v[m0:m0 + 4], "little")
                    last[user] = int(orjson.loads(v[m0 + 4:m0 + 4 + n])["version"])
            if m.offset() + 1 >= ends[m.partition()]:
                done.add(m.partition())
    c.close()
    return {u: v for u, v in last.items() if v is not None}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=int, default=1_000_000)
    ap.add_argument("--extra", type=float, default=1.0, help="Zipf-drawn events per person beyond their first.")
    ap.add_argument("--zipf", type=float, default=1.2)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--model", default="capacity-personal")
    ap.add_argument("--memory-bytes", type=int, default=None, help="people_memory_bytes of the worker.")
    ap.add_argument("--bootstrap", default=os.environ.get("PREFSTREAM_BOOTSTRAP", "127.0.0.1:9092"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=3600.0)
    args = ap.parse_args(argv)
    from stream.broker import TopicSpec, create_topics

    print(f"# command: python bench/personal_scale.py {' '.join(sys.argv[1:])}", flush=True)
    who = stream_people(args.users, args.extra, args.zipf, args.seed)
    sent = np.bincount(who, minlength=args.users)
    N = len(who)
    say(f"stream: {N:,} events of {args.users:,} people (max {sent.max():,} events for one person, "
        f"{(sent == 1).mean():.0%} seen once), d = {len(CRIT)}")
    topics, opts, run = create_run_topics("bench.personal", args.bootstrap, partitions=args.partitions)
    topics["people"] = f"bench.personal.people.{run}"
    create_topics(None, {topics["people"]: TopicSpec(args.partitions, {"cleanup.policy": "compact"})},
                  client_options=opts)
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"personal-scale-{run}"
    tmp.mkdir(parents=True, exist_ok=True)
    workers: list[subprocess.Popen] = []
    try:
        rate_in = produce(args.bootstrap, topics["preferences"], who, args.seed)
        say(f"preloaded at {rate_in:,.0f} events/s")
        env = dict(os.environ)
        env.update({f"PREFSTREAM_TOPIC_{k.upper()}": v for k, v in topics.items()})
        env.update({"PREFSTREAM_BOOTSTRAP_SERVERS": args.bootstrap, "PREFSTREAM_CONSUMER_GROUP": f"bench-personal-{run}",
                    "PREFSTREAM_FEATURE_NAMES": ",".join(CRIT), "PREFSTREAM_STATE_DIR": str(tmp / "state"),
                    "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"})
        if args.memory_bytes:
            env["PREFSTREAM_PEOPLE_MEMORY_BYTES"] = str(args.memory_bytes)
        port = free_port()
        w = start_worker(env, args.model, port, tmp / "worker-1.log")
        workers.append(w)
        t_first = base = None
        peak = 0
        deadline = time.monotonic() + args.timeout
        n = 0.0
        while time.monotonic() < deadline and w.poll() is None:
            time.sleep(1.0)
            n = learned(port, args.model)
            cur, hwm = rss(w.pid)
            peak = max(peak, hwm)
            if n > 0 and t_first is None:
                t_first, base, cpu_first, n_first = time.perf_counter(), cur, cpu_seconds(w.pid), n
                say(f"first learned; RSS {cur / 2**30:.2f} GiB")
            if n >= N:
                break
        t_done = time.perf_counter()
        if n < N:
            raise SystemExit(f"the worker learned {n:,.0f} of {N:,} events before the timeout\n"
                             + (tmp / "worker-1.log").read_text()[-3000:])
        eps = N / (t_done - t_first)
        per_cpu = (N - n_first) / max(cpu_seconds(w.pid) - cpu_first, 1e-9)
        cur, hwm = rss(w.pid)
        peak = max(peak, hwm)
        text = metrics_text(port)
        held = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("prefstream_people_held{"))
        evicted = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                      if line.startswith("prefstream_people_evicted_total{"))
        say(f"caught up: {eps:,.0f} events/s ({per_cpu:,.0f} per worker CPU-second: the machine's share of it); peak RSS {peak / 2**30:.2f} GiB, {held:,.0f} people in memory, "
            f"{evicted:,.0f} evicted")
        w.send_signal(signal.SIGTERM)
        w.wait(300)
        # restore: a second worker restores every partition's people from the changelog
        port2 = free_port()
        log2 = tmp / "worker-2.log"
        w2 = start_worker(env, args.model, port2, log2)
        workers.append(w2)
        pat = re.compile(r"people of (\S+) restored from .* in ([0-9.]+) s")
        t0 = time.monotonic()
        found: dict[str, float] = {}
        while time.monotonic() - t0 < 1800 and w2.poll() is None:
            found = {m.group(1): float(m.group(2)) for m in pat.finditer(log2.read_text())}
            if sum(1 for s in found if s.startswith(topics["preferences"] + ":")) >= args.partitions:
                break
            time.sleep(1.0)
        restore_s = sum(v for s, v in found.items() if s.startswith(topics["preferences"] + ":"))
        say(f"restore: {restore_s:.1f} s over {len(found)} sources ({found})")
        from stream.contract import decode_snapshot

        def population() -> int:
            snaps = latest_snapshots(opts, topics["models"])
            return sum(decode_snapshot(v)["training_count"] for k, v in snaps.items()
                       if v is not None and k.decode().startswith(args.model + "@"))

        t1 = time.monotonic()  # what the first worker's last rounds did not cover, the second learns
        while population() < N and time.monotonic() - t1 < 600 and w2.poll() is None:
            time.sleep(2.0)
        w2.send_signal(signal.SIGTERM)
        w2.wait(300)
        # lost / duplicated: per person from the changelog, and the population from the snapshots
        versions = changelog_versions(args.bootstrap, topics["people"], args.partitions, args.model)
        got = np.zeros(args.users, dtype=np.int64)
        for u, v in versions.items():
            got[int(u[1:])] = v
        lost = int(np.maximum(sent - got, 0).sum())
        dup = int(np.maximum(got - sent, 0).sum())
        pop = population()
        say(f"changelog: {len(versions):,} people; per person lost {lost}, duplicated {dup}; population learned "
            f"{pop:,} of {N:,}")
        lost += max(N - pop, 0)
        dup += max(pop - N, 0)
        bpu = (peak - base) / args.users
        print(f"# load at the end {load()}; worker logs in {tmp}", flush=True)
        print(f"users={args.users} events_per_s={eps:.0f} rss_gb={peak / 2**30:.2f} bytes_per_user={bpu:.0f} "
              f"restore_s={restore_s:.1f} lost={lost} duplicated={dup}")
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
        delete_topics(opts, list(topics.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
