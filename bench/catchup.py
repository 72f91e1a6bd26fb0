"""Catch-up: a learner worker on a preloaded topic of Pokémon duels, beside three raw consumers and the compute ceiling.

What it does, in one run (the load average is printed beside every figure):

1. preloads ``--events`` (default 200,000) Pokémon duels into a fresh topic of ``--partitions``
   (3) partitions: the 50,000 duels of ``--data-dir``/pokemon repeated with fresh event ids
   (self-contained events, 26 features a side, ~1 KB of JSON), sent with confluent-kafka;
2. **anchors** on that topic: raw consume rates (no decoding) of kafka-python, aiokafka and
   confluent-kafka; and the same learners **in-process on arrays** (``predict_proba_many`` then
   ``learn_many`` per batch of ``batch_max_events``, GPM fitted once beforehand, no refits):
   the compute ceiling;
3. starts ``--workers`` (1) ``python -m stream worker learn --models capacity,gpm,linear-bt``
   at the stream defaults for this data set (:func:`stream.demo.default_model_params`: capacity
   2-additive on 26 criteria, GPM refitted every 500 events on a 3,000-pair window, in a worker
   process) and times its first learned event → the moment every model learned every event;
   arrival → learned p50/p99 from the worker's histogram; CPU seconds of each process (refit
   children included) over the run; lost / duplicated from the final snapshots (counts and the
   digest of learned event ids, per model); refits done;
4. the same with ``--models linear-bt`` alone (the learner loop without heavy models);
5. ``--profile``: the worker's core (:class:`stream.workers.learner_core.LearnerCore`) on the
   same message bytes in this process under cProfile, time split into decode+validate, arrays,
   predict, learn, refit, snapshot and the rest (commits happen in the Kafka loop: see the
   worker's rate against this one).

The last line is exactly::

    events_per_s=… linear_bt_events_per_s=… aiokafka_raw=… confluent_raw=… kafka_python_raw=… linear_bt_over_aiokafka_raw=… over_in_process=… refits=… lost=… duplicated=…

Scale-out: ``--workers 2 --partitions 6`` runs two learner workers in one group (then
``two_over_one`` needs the one-worker figure of the same run: ``--compare-one``).

Reproduce: ``bash deploy/kafka/start.sh && python bench/catchup.py`` (add ``--out results.json``).
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
from bench.stream_throughput import _histogram_quantile  # noqa: E402
from bench.worker_run import create_run_topics, delete_topics, latest_snapshots, metrics_text, stop_worker  # noqa: E402
from stream.demo.workers import cpu_seconds, free_port  # noqa: E402

MODELS = ["capacity", "gpm", "linear-bt"]


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


# ----------------------------------------------------------------------------- data
def make_events(ds, n: int) -> tuple[list[tuple[bytes, bytes]], np.ndarray, np.ndarray, np.ndarray]:
    """``n`` duels (the data set cycled, fresh ids): ``[(key, value)]`` and the arrays XL, XR, y."""
    import orjson

    base = list(ds.to_events())
    out = []
    for k in range(n):
        e = dict(base[k % len(base)])
        e["event_id"] = f"pokemon-{k}"
        e["timestamp"] = 1_600_000_000.0 + k
        out.append((e["event_id"].encode(), orjson.dumps(e)))
    idx = np.arange(n) % len(base)
    return out, ds.XL[idx], ds.XR[idx], ds.outcome[idx]


def preload(boot: str, topic: str, records) -> float:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": boot, "acks": "all", "enable.idempotence": True, "linger.ms": 20,
                  "batch.size": 1 << 20, "queue.buffering.max.messages": 1_000_000,
                  "queue.buffering.max.kbytes": 512 * 1024, "delivery.report.only.error": True})
    t = time.perf_counter()
    for k, v in records:
        while True:
            try:
                p.produce(topic, v, k)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(300) == 0
    return len(records) / (time.perf_counter() - t)


# ----------------------------------------------------------------------------- raw consumers
def raw_confluent(boot: str, topic: str, partitions: int, n: int) -> float:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": boot, "group.id": f"bench-raw-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "fetch.max.bytes": 64 << 20})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got, t = 0, time.perf_counter()
    while got < n and time.perf_counter() - t < 300:
        got += sum(1 for m in c.consume(10_000, 1.0) if m.error() is None)
    dt = time.perf_counter() - t
    c.close()
    return got / dt


def raw_aiokafka(boot: str, topic: str, partitions: int, n: int) -> float:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def go() -> float:
        c = AIOKafkaConsumer(bootstrap_servers=boot, enable_auto_commit=False, group_id=None,
                             max_partition_fetch_bytes=8 << 20, fetch_max_bytes=64 << 20)
        await c.start()
        try:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            c.assign(tps)
            await c.seek_to_beginning(*tps)
            got, t = 0, time.perf_counter()
            while got < n and time.perf_counter() - t < 300:
                batch = await c.getmany(timeout_ms=500, max_records=10_000)
                got += sum(len(v) for v in batch.values())
            return got / (time.perf_counter() - t)
        finally:
            await c.stop()

    return asyncio.run(go())


def raw_kafka_python(boot: str, topic: str, partitions: int, n: int) -> float:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=boot, enable_auto_commit=False, group_id=None,
                      max_partition_fetch_bytes=8 << 20, fetch_max_bytes=64 << 20)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    got, t = 0, time.perf_counter()
    while got < n and time.perf_counter() - t < 300:
        for msgs in c.poll(timeout_ms=500, max_records=10_000).values():
            got += len(msgs)
    dt = time.perf_counter() - t
    c.close()
    return got / dt


# ----------------------------------------------------------------------------- in process
def settings_for(ds, models: list[str], params: dict, **extra):
    from stream import models as builtin
    from stream.settings import Settings

    builtin.register_all()
    return Settings.load(None, {"models": models, "feature_names": list(ds.feature_names),
                                "model_params": {m: p for m, p in params.items() if m in models}, **extra})


def in_process(ds, models: list[str], params: dict, XL, XR, y, batch: int) -> dict[str, float]:
    """Per model and all together: examples/s of predict_proba_many + learn_many on arrays."""
    from stream import registry

    s = settings_for(ds, models, params)
    learners = {m: registry.get_model(m).factory(s, s.params_for(m)) for m in models}
    for lr in learners.values():  # the GPM predicts once fitted: fit it once, outside the clock
        if hasattr(lr, "refit"):
            k = int(getattr(lr, "min_train", 200)) + 1
            lr.learn_many(XL[:k], XR[:k], y[:k])
            lr.refit()
    out = {}
    for m, lr in learners.items():
        t, c = time.perf_counter(), time.process_time()
        for a in range(0, len(y), batch):
            sl = slice(a, a + batch)
            lr.predict_proba_many(XL[sl], XR[sl])
            lr.learn_many(XL[sl], XR[sl], y[sl])
        out[m] = len(y) / (time.perf_counter() - t)
        out[m + "_per_cpu_s"] = len(y) / (time.process_time() - c)
    out["all"] = 1.0 / sum(1.0 / out[m] for m in models)
    out["all_per_cpu_s"] = 1.0 / sum(1.0 / out[m + "_per_cpu_s"] for m in models)
    return out


_CATEGORIES = [  # (category, substrings of "file:function" in the profile), first match wins
    ("refit", (".py:refit", "falkon.py", "fit_window", "_maybe_refit")),
    ("snapshot", ("build_snapshots", "encode_snapshot", "state_dict", "snapshot_done")),
    ("decode+validate", ("parse_batch", "ingest.py", "contract/")),
    ("arrays", ("learner_arrays", "example_arrays")),
    ("predict", ("_score", "predict_proba_many", "margin_many")),
    ("learn", ("learn_many", "learn_batch", "learn_one")),
    ("bookkeeping", ("_after_learning", "digest_add", "event_hash", "remember", "observe_n")),
]


def profile_core(ds, models, params, records, batch: int, partitions: int) -> dict:
    """The worker's core on the message bytes, no Kafka, under cProfile: seconds per category."""
    import cProfile
    import pstats

    from stream.workers.learner_core import LearnerCore

    # refits run in a separate process in the worker; here the GPM is fitted once (on the first
    # min_train events, outside the clock) and not refitted, so the profile is the loop's own cost
    params = {m: dict(p, **({"refit_every": None, "drift": False} if m in ("gpm", "cgpm") else {}))
              for m, p in params.items()}
    s = settings_for(ds, models, params, snapshot_every_events=1000)
    core = LearnerCore(s)
    st = core.new_source(s.topic_preferences, 0, {})
    vals = [v for _, v in records]
    warm = 1000
    for a in range(0, warm, batch):
        core.process_batch(st, [(a + j, v, None, None) for j, v in enumerate(vals[a:a + batch])])
    prof = cProfile.Profile()
    t, c = time.perf_counter(), time.process_time()
    prof.enable()
    for a in range(warm, len(vals), batch):
        core.process_batch(st, [(a + j, v, None, None) for j, v in enumerate(vals[a:a + batch])])
        if core.snapshot_due(st):
            recs, _acks, versions = core.build_snapshots(st)
            core.snapshot_done(st, versions, True)
    prof.disable()
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    n = len(vals) - warm
    stats = pstats.Stats(prof).stats
    # attribute each function's *inclusive* time to the outermost category on its call path:
    # approximate by the tottime of every function, categorised by its own name or its callers'
    cat_time = {c: 0.0 for c, _ in _CATEGORIES}
    cat_time["other"] = 0.0

    def category(func, depth=0, seen=None):
        name = f"{func[0]}:{func[2]}"
        for c, keys in _CATEGORIES:
            if any(k in name for k in keys):
                return c
        if depth > 12:
            return "other"
        seen = seen or set()
        callers = stats.get(func, (0, 0, 0, 0, {}))[4]
        best = None
        for caller in sorted(callers, key=lambda f: -callers[f][3]):
            if caller in seen:
                continue
            seen.add(caller)
            best = category(caller, depth + 1, seen)
            if best != "other":
                return best
        return best or "other"

    for func, (_cc, _nc, tt, _ct, _callers) in stats.items():
        cat_time[category(func)] += tt
    total = sum(cat_time.values())
    return {"wall_s": wall, "cpu_s": cpu, "events": n, "events_per_s": n / wall, "events_per_cpu_s": n / cpu,
            "share": {c: round(v / total, 3) for c, v in cat_time.items()}}


# ----------------------------------------------------------------------------- the worker
def _proc_cpu(pid: int, descendants: bool = True) -> float:
    """CPU seconds (user + system) of ``pid`` and (unless ``descendants`` is False) its living descendants."""
    return cpu_seconds(pid, descendants)


def run_workers(boot: str, topics: dict, models: list[str], config: Path, n: int, n_workers: int, timeout: float,
                tag: str, env: dict | None = None) -> dict:
    """Start ``n_workers`` learner workers in one group (``env``: settings over this process's
    environment, e.g. ``PREFSTREAM_FORMAT_PREFERENCES``); time first learned → all learned."""
    from stream.contract import decode_snapshot
    from stream.workers._snapshot import digest_add, split_stream_meta

    u = uuid.uuid4().hex[:6]
    ports = [free_port() for _ in range(n_workers)]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PREFSTREAM_BOOTSTRAP_SERVERS=boot,
               PREFSTREAM_CONSUMER_GROUP=f"bench-catchup-{tag}-{u}", PREFSTREAM_MODELS=",".join(models),
               **{f"PREFSTREAM_TOPIC_{k.upper()}": v for k, v in topics.items()}, **(env or {}))
    procs, logs = [], []
    for i, port in enumerate(ports):
        log = open(f"/tmp/prefstream-catchup-{tag}-{u}-{i}.log", "w")
        logs.append(log.name)
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "stream", "worker", "learn", "--config", str(config), "--models", ",".join(models),
             "--metrics-port", str(port), "--log-level", "WARNING"], cwd=REPO,
            env=dict(env, PREFSTREAM_STATE_DIR=f"/tmp/prefstream-catchup-{tag}-{u}-{i}"), stdout=log,
            stderr=subprocess.STDOUT))

    def counter(name: str, text: str) -> float:
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{"))

    def learned() -> float:
        return sum(counter("prefstream_events_learned_total", metrics_text(p)) for p in ports)

    goal = n * len(models)
    deadline = time.perf_counter() + timeout
    t_first = t_done = None
    first = 0.0
    cpu0: dict[int, float] = {}
    while time.perf_counter() < deadline:
        got = learned()
        if got > 0:
            t_first, first = time.perf_counter(), got
            cpu0 = {p.pid: _proc_cpu(p.pid) for p in procs}
            own0 = {p.pid: _proc_cpu(p.pid, False) for p in procs}
            break
        time.sleep(0.05)
    while t_first is not None and time.perf_counter() < deadline:
        if learned() >= goal:
            t_done = time.perf_counter()
            break
        time.sleep(0.1)
    cpu = {p.pid: _proc_cpu(p.pid) - cpu0.get(p.pid, 0.0) for p in procs}
    own = {p.pid: _proc_cpu(p.pid, False) - own0.get(p.pid, 0.0) for p in procs} if t_first is not None else {}
    texts = [metrics_text(p) for p in ports]
    refits = sum(counter("prefstream_refit_duration_seconds_count", t) for t in texts)
    hist = "\n".join(texts)
    p50 = _histogram_quantile(hist, "prefstream_learn_latency_seconds", 0.50) * 1e3
    p99 = _histogram_quantile(hist, "prefstream_learn_latency_seconds", 0.99) * 1e3
    top = [ln for ln in hist.splitlines() if ln.startswith("prefstream_learn_latency_seconds_bucket{") and 'le="+Inf"' in ln]
    # final snapshots: per model, count and digest over every partition. With several workers the
    # learned counters can pass N before every event is in a snapshot (a partition that moved at
    # the start is relearned by its new owner and counted by both), so wait for the snapshots
    # to cover N (or stop changing) before stopping the workers
    def final_snapshots() -> dict:
        latest = latest_snapshots({"bootstrap_servers": boot}, topics["models"])
        per = {}
        for k, v in latest.items():
            if v is None:
                continue
            snap = decode_snapshot(v)
            name = k.decode().split("@", 1)[0]
            cnt, dig = per.get(name, (0, 0))
            per[name] = (cnt + snap["training_count"], digest_add(dig, split_stream_meta(snap["state"])[1]["digest"]))
        return per

    end = time.perf_counter() + 120
    per_model = final_snapshots()
    while time.perf_counter() < end and not all(per_model.get(m, (0, 0))[0] >= n for m in models):
        time.sleep(2.0)
        per_model = final_snapshots()
    for p in procs:
        stop_worker(p, 30)
    time.sleep(1.0)
    per_model = final_snapshots()
    span = (t_done - t_first) if (t_first and t_done) else float("nan")
    rate = (n - first / len(models)) / span if span == span else float("nan")
    return {"events_per_s": rate, "span_s": span, "done": t_done is not None, "p50_ms": p50, "p99_ms": p99,
            "latency_inf_bucket": top, "refits": refits, "cpu_s": cpu, "worker_cpu_s": own, "per_model": per_model,
            "logs": logs}


def catchup_round(boot: str, opts: dict, topics: dict, models_topic: str, models: list[str], config: Path, n: int,
                  timeout: float, label: str, expected: int | None = None, workers: int = 1,
                  env: dict | None = None) -> dict:
    """One catch-up of the preloaded ``topics`` by a fresh worker group into a fresh compacted
    ``models_topic`` (8 MiB records; created here, the caller deletes it): :func:`run_workers`'
    result plus ``lost`` / ``duplicated`` per model (a model without a snapshot lost every
    event), ``digest_equal`` per model against ``expected`` (the digest of the ``n`` event ids; absent
    without it), ``events_per_cpu_s`` (refit processes included), ``events_per_worker_cpu_s`` and
    ``cores`` (CPU cores per worker process over the span)."""
    from stream.broker import TopicSpec, create_topics

    create_topics(None, {models_topic: TopicSpec(1, {"cleanup.policy": "compact", "max.message.bytes": "8388608"})},
                  client_options=opts)
    r = run_workers(boot, dict(topics, models=models_topic), models, config, n, workers, timeout, label, env)
    got = {m: r["per_model"].get(m, (0, 0)) for m in models}
    r["lost"] = {m: max(n - c, 0) for m, (c, _) in got.items()}
    r["duplicated"] = {m: max(c - n, 0) for m, (c, _) in got.items()}
    if expected is not None:
        r["digest_equal"] = {m: d == expected for m, (_, d) in got.items()}
    span = r["span_s"]
    r["cores"] = {pid: round(c / span, 2) for pid, c in r["cpu_s"].items()} if span == span else {}
    cpu, own = sum(r["cpu_s"].values()), sum(r["worker_cpu_s"].values())
    r["events_per_cpu_s"] = n / cpu if cpu > 0 else float("nan")
    r["events_per_worker_cpu_s"] = n / own if own > 0 else float("nan")
    return r


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=os.environ.get("PREFSTREAM_DATA_DIR", str(REPO.parent / "shared" / "data")))
    ap.add_argument("--bootstrap", default=os.environ.get("PREFSTREAM_BOOTSTRAP", "127.0.0.1:9092"))
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--compare-one", action="store_true", help="also run one worker on the same topic (two_over_one)")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--kafka-python-events", type=int, default=50_000, help="kafka-python reads only this many")
    ap.add_argument("--profile-events", type=int, default=30_000, help="events of the in-process core profile (0: none)")
    ap.add_argument("--skip-linear-bt", action="store_true")
    ap.add_argument("--in-process-events", type=int, default=50_000)
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]

    from stream.adapters import load_dataset
    from stream.demo.config import default_model_params, write_settings_toml
    from stream.workers._snapshot import digest_add, event_hash

    ds = load_dataset("pokemon", args.data_dir)
    params = default_model_params(ds, [m for m in models if m != "linear-bt"])
    records, XL, XR, y = make_events(ds, args.events)
    n = len(records)
    expected = 0
    for k, _ in records:
        expected = digest_add(expected, event_hash(k.decode()))
    res: dict = {"events": n, "partitions": args.partitions, "workers": args.workers, "models": models, "params": params}
    topics, opts, u = create_run_topics("bench.catchup", args.bootstrap, args.partitions)
    extra = []
    try:
        res["preload_events_per_s"] = preload(args.bootstrap, topics["preferences"], records)
        print(f"preloaded {n} duels into {args.partitions} partitions at {res['preload_events_per_s']:,.0f}/s; "
              f"load {load()}", flush=True)
        raw = {}
        raw["confluent_raw"] = raw_confluent(args.bootstrap, topics["preferences"], args.partitions, n)
        raw["aiokafka_raw"] = raw_aiokafka(args.bootstrap, topics["preferences"], args.partitions, n)
        raw["kafka_python_raw"] = raw_kafka_python(args.bootstrap, topics["preferences"], args.partitions,
                                                   min(n, args.kafka_python_events))
        res.update(raw)
        print("raw consume: " + ", ".join(f"{k}={v:,.0f}/s" for k, v in raw.items()) + f"; load {load()}", flush=True)
        ip = in_process(ds, models, params, XL[:args.in_process_events], XR[:args.in_process_events],
                        y[:args.in_process_events], 500)
        res["in_process"] = ip
        print(f"in-process on arrays ({args.in_process_events} duels, batches of 500): "
              + ", ".join(f"{k}={v:,.0f}/s" for k, v in ip.items()) + f"; load {load()}", flush=True)
        if args.profile_events:
            prof = profile_core(ds, models, params, records[: args.profile_events], 500, args.partitions)
            res["profile"] = prof
            print(f"worker core in-process on {prof['events']} message bytes (no refits, under cProfile): "
                  f"{prof['events_per_s']:,.0f} events/s, {prof['events_per_cpu_s']:,.0f} per CPU-second; share of "
                  f"time: {json.dumps(prof['share'])}; load {load()}", flush=True)
        tmp = Path(f"/tmp/prefstream-catchup-{u}")
        tmp.mkdir(parents=True, exist_ok=True)
        config = write_settings_toml(tmp / "catchup.toml", {"feature_names": list(ds.feature_names),
                                                            "model_params": params})

        def run(label: str, mods: list[str], workers: int) -> dict:
            models_topic = f"bench.catchup.models-{label}.{u}"
            extra.append(models_topic)
            r = catchup_round(args.bootstrap, opts, topics, models_topic, mods, config, n, args.timeout, label,
                              expected, workers)
            print(f"[{label}] {workers} worker(s), models {mods}: {r['events_per_s']:,.0f} events/s over {r['span_s']:.1f} s; "
                  f"arrival->learned p50={r['p50_ms']:.1f} ms p99={r['p99_ms']:.1f} ms; refits={r['refits']:.0f}; "
                  f"CPU cores per process {r['cores']} ({r['events_per_cpu_s']:,.0f} events per CPU-second, refit processes included; "
                  f"{r['events_per_worker_cpu_s']:,.0f} per CPU-second of the worker process alone); lost {r['lost']} duplicated {r['duplicated']} "
                  f"digest equal {r['digest_equal']}; load {load()}", flush=True)
            return r

        full = run("full", models, args.workers)
        res["worker"] = full
        if args.compare_one and args.workers > 1:
            one = run("one", models, 1)
            res["worker_one"] = one
            res["two_over_one"] = full["events_per_s"] / one["events_per_s"]
            print(f"two_over_one={res['two_over_one']:.3f} ({args.workers} workers over 1, {args.partitions} partitions)")
        lbt = run("lbt", ["linear-bt"], args.workers) if not args.skip_linear_bt else {"events_per_s": float("nan")}
        res["linear_bt_worker"] = lbt
    finally:
        delete_topics(opts, list(topics.values()) + extra)
    res["load_avg"] = load()
    lost = sum(full["lost"].values()) + sum(lbt.get("lost", {}).values())
    dup = sum(full["duplicated"].values()) + sum(lbt.get("duplicated", {}).values())
    if not all(full["digest_equal"].values()) and lost == 0 and dup == 0:
        lost = dup = -1  # same count, different event set
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1, default=str))
    print(f"per CPU-second (load-independent): worker {full.get('events_per_cpu_s', float('nan')):,.0f}, in-process "
          f"{ip['all_per_cpu_s']:,.0f}, ratio {full.get('events_per_cpu_s', float('nan')) / ip['all_per_cpu_s']:.3f}; "
          f"linear-bt worker {lbt.get('events_per_cpu_s', float('nan')):,.0f}")
    print(f"load_average={load()}")
    print(f"events_per_s={full['events_per_s']:.1f} linear_bt_events_per_s={lbt['events_per_s']:.1f} "
          f"aiokafka_raw={raw['aiokafka_raw']:.1f} confluent_raw={raw['confluent_raw']:.1f} "
          f"kafka_python_raw={raw['kafka_python_raw']:.1f} "
          f"linear_bt_over_aiokafka_raw={lbt['events_per_s'] / raw['aiokafka_raw']:.3f} "
          f"over_in_process={full['events_per_s'] / ip['all']:.3f} refits={full['refits']:.0f} lost={lost} duplicated={dup}",
          flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
