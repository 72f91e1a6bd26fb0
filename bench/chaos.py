"""Seeded chaos: Pokémon duels through learners and an explainer while faults hit them, then exactness.

What it does, on a broker of its OWN (``bench/chaos_faults.OwnBroker``: own ports, home and data
dir through ``deploy/kafka/start.sh``; the shared broker on 9092 is never touched):

1. creates fresh topics (``--partitions`` = 3 preference partitions, 1 MiB segments so that
   segments close while the run goes on) and sends the Pokémon items;
2. starts ``--learners`` learner workers (one consumer group; models ``--models``, default
   capacity, gpm and linear-bt) and one explainer worker (the product's ``python -m stream worker``,
   through :class:`stream.demo.workers.Workers`);
3. replays ``--events`` Pokémon duels (the 50,000 duels repeated with distinct event ids
   ``<id>~<round>``, event ``i`` to partition ``i mod partitions``) at ``--rate`` events/s with
   the replay's producer (confluent-kafka, idempotent, ``acks=all``; each duel serialised once)
   paced by ``stream.replay.TokenBucket`` — a broker outage buffers the stream in librdkafka;
4. meanwhile runs a seeded schedule (``--seed``): every 5–15 s one fault of ``--kinds`` —
   SIGKILL a learner, start an extra learner, SIGTERM a learner (a replacement starts whenever
   none is left), stop the broker for 10–30 s and start it again, SIGKILL the explainer and
   restart it, or flip 8 bytes inside a record batch of a *closed* log segment of the input
   topic on disk (``corrupt_batch``: the learners and the explainer are SIGSTOPped — at most 4 s,
   well inside their 10 s session timeout — until a segment holding records produced after the stop
   has closed, a batch there is corrupted, and they are SIGCONTed, so every consumer of the
   partition reads it — ``batch`` None when no segment closed in time; the broker serves it as
   it is, the consumer's CRC check meets it) — until ``--duration`` seconds or ``--faults`` faults;
5. samples once a second the learner group's committed offsets against the produced end
   offsets: **stall** = time a partition with lag > 0 has not moved (its clock paused while the
   broker is down, started at its first commit), and each fault's **recovery**: learner and
   broker faults recover when every partition has moved past where it stood at the fault (or
   has no lag), measured from the kill / the broker's restart; an explainer kill when the new
   explainer has loaded every model; a corrupt batch when both groups' committed offsets passed it;
6. once everything is caught up (or ``--settle-timeout``), SIGTERMs the workers (final snapshots)
   and compares, per model, the snapshots' training counts and order-free digest of learned
   event ids with the **clean run's** — the oracle of a fault-free run, every produced event
   learned once (``--clean-run`` also runs the pipeline without faults on fresh topics and
   compares it too) — and counts duplicated explanation records (same event, model, method).

``--people N``: the duels carry a ``user_id`` of N people (Zipf(1.3) activity) and go to their
person's partition, ``linear-bt-personal`` learns beside the other models with its people on a
changelog, and the run also reports ``people_lost`` / ``people_duplicated``: per person, their
version on the changelog against their events produced (issue 28: kills, rebalances and broker
outages with personal state lose no person's update and apply none twice).

``lost`` / ``duplicated``: the worst model's missing / extra training count against the produced
events; ``digest_equal``: every model's digest equals the clean one. Events of corrupted batches
are destroyed on the only replica: ``corrupted`` counts them and ``digest_equal_without_corrupted``
says whether exactly those are missing. The last line is exactly::

    events=<int> faults=<int> lost=<int> duplicated=<int> digest_equal=<bool> explanation_dupes=<int> max_stall_s=<f> recover_p50_s=<f> recover_max_s=<f> unrecovered=<int> corrupted=<int> ...

Goal (issue 22): 0 lost, 0 duplicated, digest equal, 0 duplicated explanations, every fault
recovered, ``max_stall_s`` ≤ 30. Reproduce: ``python bench/chaos.py --events 200000 --rate 2000
--seed 1 --out DIR`` (needs the broker jars that ``deploy/kafka/start.sh`` resolved once, and
``../shared/data/pokemon``).
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench.chaos_faults import FAULT_KINDS, Fault, OwnBroker, corrupt_batch, overlap, schedule  # noqa: E402
from bench.worker_run import RUN_TOPIC_KINDS, create_run_topics, delete_topics, metrics_text  # noqa: E402
from stream.demo.workers import Workers, free_port  # noqa: E402

SEGMENT_BYTES = 1024 * 1024  # Kafka's minimum; about 700 Pokémon duels: a segment closes every few seconds
STUCK_S = 60.0  # no delivery report for this long, broker up: the replay's producer is stuck (see produce)
PAUSE_S = 4.0  # longest SIGSTOP of the consumers while a corrupt batch is prepared (session timeout: 10 s)


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _metric(text: str, name: str) -> dict[str, float]:
    """``{model label: value}`` of one metric in a Prometheus exposition."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels, value = line[len(name) + 1:].rsplit("} ", 1)
            model = dict(kv.split("=", 1) for kv in labels.split(",") if "=" in kv).get("model", '""').strip('"')
            out[model] = out.get(model, 0.0) + float(value)
    return out


def pokemon_stream(n: int, partitions: int, data_dir=None, people: int = 0):
    """``(ds, items, events, users)``: the item records, ``n`` duels as ``(event id, partition, bytes)``,
    and with ``people`` > 0 each duel's person (``person-<k>``, k Zipf(1.3)-drawn, seeded): the
    event then carries that ``user_id`` and goes to the person's partition (CRC-32 of the id), so a
    person's events stay on one partition and in order; ``users`` is None without people."""
    import zlib

    from stream.adapters import load_dataset

    ds = load_dataset("pokemon", data_dir)
    items = list(ds.item_records())
    # each duel serialised once, around its event id (the replay's CPU goes to sending, not to JSON)
    base = []
    for ev in ds.to_events():
        head, tail = json.dumps(dict(ev, event_id="\x01")).encode().split(b"\\u0001")
        base.append((ev["event_id"], head, tail))

    users = None
    if people > 0:
        pick = np.minimum(np.random.default_rng(7).zipf(1.3, size=n) - 1, people - 1)
        users = [f"person-{k}" for k in pick.tolist()]
        home = {u: zlib.crc32(u.encode()) % partitions for u in set(users)}

    def events():
        for i in range(n):
            eid0, head, tail = base[i % len(base)]
            eid = f"{eid0}~{i // len(base)}"
            if users is None:
                yield eid, i % partitions, head + json.dumps(eid)[1:-1].encode() + tail
            else:  # tail starts with the quote that closes the event id
                u = users[i]
                yield eid, home[u], head + json.dumps(eid)[1:-1].encode() + b'", "user_id": "' + u.encode() + tail

    return ds, items, events, users


class Monitor(threading.Thread):
    """Samples the learner group's committed offsets once a second: stalls and fault recoveries."""

    def __init__(self, bootstrap: str, group: str, topic: str, partitions: int, t0: float) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.group, self.topic, self.partitions, self.t0 = bootstrap, group, topic, partitions, t0
        self.end = [0] * partitions            # produced end offsets (from the producer's acks)
        self.committed = [0] * partitions
        self.explainer_committed = [0] * partitions  # the explainer's group (f"{group}-explainer")
        self.last_move = [0.0] * partitions
        #: a partition's stall clock starts at its first commit (before it: the group forming at start-up)
        self.first_commit: list[float | None] = [None] * partitions
        self.max_stall = 0.0
        self.max_stall_at: tuple | None = None
        self.broker_down = False
        self.down: list[tuple[float, float]] = []  # broker outages (start, end)
        self.faults: list[Fault] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.explainer_port: int | None = None
        self.models: list[str] = []
        self._admin = None

    def now(self) -> float:
        return time.monotonic() - self.t0

    def _offsets(self) -> tuple[list[int], list[int]] | None:
        """Committed offsets per partition of the learner group and of the explainer group."""
        from kafka import TopicPartition
        from kafka.admin import KafkaAdminClient

        egroup = f"{self.group}-explainer"
        try:
            if self._admin is None:
                self._admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=5000,
                                               client_id="prefstream-chaos-monitor")
            got = self._admin.list_group_offsets({self.group: None, egroup: None})
        except Exception:  # noqa: BLE001 - the broker may be down: no sample
            try:
                if self._admin is not None:
                    self._admin.close()
            except Exception:  # noqa: BLE001
                pass
            self._admin = None
            return None

        def of(g):
            tps = got.get(g, {})
            return [max(0, tps[TopicPartition(self.topic, p)].offset) if TopicPartition(self.topic, p) in tps else 0
                    for p in range(self.partitions)]

        return of(self.group), of(egroup)

    def broker_stopping(self) -> None:
        with self.lock:
            self.broker_down = True
            self.down.append((self.now(), float("inf")))

    def broker_back(self) -> None:
        """The stall clocks restart when the broker is back (an outage is not a consumer stall);
        recoveries of other faults do not count the outage either."""
        now = self.now()
        with self.lock:
            self.broker_down = False
            self.down[-1] = (self.down[-1][0], now)
            self.last_move = [max(t, now) for t in self.last_move]

    def run(self) -> None:
        while not self.stop.wait(1.0):
            if self.broker_down:
                continue
            got = self._offsets()
            if got is None or self.broker_down:
                continue
            offs, self.explainer_committed = got
            now = self.now()
            with self.lock:
                for p, c in enumerate(offs):
                    if c != self.committed[p] or c >= self.end[p]:
                        self.last_move[p] = now
                    self.committed[p] = c
                    if self.first_commit[p] is None:
                        if c == 0:
                            continue
                        self.first_commit[p] = now
                    stall = now - self.last_move[p]
                    if stall > self.max_stall:
                        self.max_stall, self.max_stall_at = stall, (p, round(now, 1), c, self.end[p])
                self._check_recoveries(now)

    def snapshot_committed(self) -> list[int]:
        with self.lock:
            return list(self.committed)

    def caught_up(self) -> bool:
        with self.lock:
            return all(c >= e for c, e in zip(self.committed, self.end))

    def _check_recoveries(self, now: float) -> None:
        for f in self.faults:
            if f.recovered_at is not None or f.t_ref is None:
                continue
            d = f.detail
            if f.kind == "corrupt_batch":
                # both consumers of the input topic went past it: the learners' group and the explainer's
                p = d["partition"]
                ok = d.get("batch") is None or min(self.committed[p], self.explainer_committed[p]) > d["batch"][1]
            elif f.kind == "kill_explainer":
                text = metrics_text(d["port"])
                versions = _metric(text, "prefstream_model_version") if text else {}
                ok = bool(text) and all(versions.get(m, 0) >= 1 for m in self.models)
            else:
                before = d["committed_before"]
                ok = all(self.committed[p] > before[p] or self.committed[p] >= self.end[p]
                         for p in range(self.partitions))
            if ok:
                f.recovered_at = now
                f.paused_s = overlap(self.down, f.t_ref, now)


def _active_segment_bytes(data_dir: Path, topic: str, partition: int) -> int:
    segs = sorted((Path(data_dir) / f"{topic}-{partition}").glob("*.log"))
    return segs[-1].stat().st_size if segs else 0


def corrupt_met(log_dir: Path) -> dict[str, int]:
    """How often a worker met a corrupt batch, from its log: the learners' consumer loop logs each
    skipped record (``skipping … record at``), aiokafka's fetcher in the Faust explainer its crash."""
    out = {"learners": 0, "explainer": 0}
    for f in Path(log_dir).glob("*.log"):
        text = f.read_text(errors="replace")
        role = "learners" if f.name.startswith("learn-") else "explainer"
        out[role] += sum(1 for ln in text.splitlines() if ("skipping" in ln and "record at" in ln)
                         or ("Crashed reason=CorruptRecordException" in ln))
    return out


def read_snapshots(topic: str, opts: dict, models: list[str]) -> dict[str, tuple[int, int, dict]]:
    """Per model: (Σ training count, Σ digest mod 2⁶⁴, {source: count}) of the latest snapshots."""
    from stream.contract import decode_snapshot
    from stream.demo.topics import read_topic
    from stream.workers._snapshot import digest_add, split_stream_meta

    latest = {}
    for k, v in read_topic(topic, dict(opts, max_partition_fetch_bytes=16 * 1024 * 1024), timeout=120):
        if k is not None:
            latest[k.decode()] = v
    out = {m: (0, 0, {}) for m in models}
    for key, v in latest.items():
        if v is None:
            continue
        m, src = key.split("@", 1)
        if m not in out:
            continue
        snap = decode_snapshot(v)
        n, d, per = out[m]
        per[src] = snap["training_count"]
        out[m] = (n + snap["training_count"], digest_add(d, split_stream_meta(snap["state"])[1]["digest"]), per)
    return out


def explanation_dupes(topic: str, opts: dict) -> tuple[int, int]:
    """(records, duplicated records): the same event explained twice by the same model and method."""
    from stream.demo.topics import read_topic

    seen, dupes, n = set(), 0, 0
    for _, v in read_topic(topic, opts, timeout=120):
        r = json.loads(v)
        key = (r.get("request_id"), r.get("model_name"), r.get("method"), (r.get("extra") or {}).get("origin"))
        n += 1
        dupes += key in seen
        seen.add(key)
    return n, dupes


def run_chaos(broker: OwnBroker, *, events: int, rate: float, duration: float | None, seed: int, kinds=FAULT_KINDS,
              max_faults: int | None = None, models=("capacity", "gpm", "linear-bt"), partitions: int = 3,
              learners: int = 2, sample_rate: float = 0.002, settle_timeout: float = 300.0, gpm_min_train: int = 3000,
              gpm_refit_every: int = 20000, log_dir: Path | None = None, say=print, data_dir=None,
              people: int = 0) -> dict:
    """One chaos run (``kinds=()``: a clean run) on ``broker``; returns the figures (see the module docstring).

    ``people`` > 0: person-keyed events and a personal model (``linear-bt-personal`` unless one is
    among ``models``) with its changelog; the result then has ``people_lost`` / ``people_duplicated``:
    per person, the version of their last changelog record against their events produced (corrupted
    ones excepted)."""
    from kafka import KafkaProducer

    from stream.demo import default_model_params, write_settings_toml
    from confluent_kafka import KafkaError, Producer

    from stream.broker.producer import Sender, confluent_config
    from stream.replay import TokenBucket
    from stream.workers._snapshot import digest_add, event_hash

    rng = random.Random(seed)
    models = list(models)
    personal = [m for m in models if m.endswith("-personal")]
    if people and not personal:
        models.append("linear-bt-personal")
        personal = ["linear-bt-personal"]
    boot = broker.bootstrap
    ds, items, gen, users = pokemon_stream(events, partitions, data_dir, people)
    topics, opts, u = create_run_topics("bench.chaos", boot, partitions, kinds=RUN_TOPIC_KINDS + ("drift",),
                                        preferences_config={"segment.bytes": str(SEGMENT_BYTES)})
    if people:
        from stream.broker import TopicSpec, create_topics

        topics["people"] = f"bench.chaos.people.{u}"
        create_topics(None, {topics["people"]: TopicSpec(partitions, {"cleanup.policy": "compact"})},
                      client_options=opts)
    log_dir = Path(log_dir or tempfile.mkdtemp(prefix="prefstream-chaos-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    params = default_model_params(ds, models, {"min_train": gpm_min_train, "refit_every": gpm_refit_every})
    group = f"chaos-{u}"
    cfg = write_settings_toml(log_dir / f"chaos-{u}.toml", {
        "bootstrap_servers": boot, "consumer_group": group, "models": models,
        **{f"topic_{k.replace('-', '_')}": v for k, v in topics.items()},
        "feature_names": list(ds.feature_names), "model_params": params, "snapshot_every_events": 5000,
        "snapshot_every_seconds": 2.0, "explain_sample_rate": float(sample_rate), "state_dir": str(log_dir / "state"),
        "log_level": "INFO"})
    workers = Workers(log_dir)
    names = iter(range(1, 10_000))
    learner_names: list[str] = []
    explainer = {"name": None, "port": None}

    def start_learner() -> str:
        name = f"learn-{next(names)}"
        workers.start("learn", cfg, free_port(), name=name)
        learner_names.append(name)
        return name

    def alive_learners() -> list[str]:
        return [n for n in learner_names if workers.procs[n].poll() is None]

    def start_explainer() -> int:
        port = free_port()
        explainer.update(name=f"explain-{next(names)}", port=port)
        workers.start("explain", cfg, port, name=explainer["name"])
        return port

    producer = KafkaProducer(acks="all", linger_ms=20, max_block_ms=300_000, request_timeout_ms=30_000, **opts)
    for rec in items:
        producer.send(topics["items"], key=str(rec["item_id"]).encode(), value=json.dumps(rec).encode())
    producer.flush(120)
    producer.close(30)
    for _ in range(learners):
        start_learner()
    start_explainer()
    t0 = time.monotonic()
    mon = Monitor(boot, group, topics["preferences"], partitions, t0)
    mon.models = models
    ids: list[str] = []
    parts = np.zeros(events, dtype=np.int8)
    acked = np.full(events, -1, dtype=np.int64)
    failed: list[int] = []
    #: key (event id) -> (event number, partition, value), until its delivery report
    index: dict[bytes, tuple[int, int, bytes]] = {}

    def on_delivery(err, msg):  # librdkafka's delivery report, served by poll()/flush() in the producing thread
        if err is not None and err.code() in purged:  # taken back from a stuck producer: sent again
            return
        got = index.pop(msg.key(), None)
        if got is None:  # the other copy of a record the watchdog sent again was reported first
            return
        i = got[0]
        if err is not None:
            failed.append(i)
            return
        acked[i] = msg.offset()
        with mon.lock:
            mon.end[msg.partition()] = max(mon.end[msg.partition()], msg.offset() + 1)

    # the replay's producer (confluent-kafka, stream.broker.producer), idempotent: a broker outage
    # buffers the stream in librdkafka and retries it without a duplicate
    # (its Sender reports failures only: the offsets of delivered records need every report here)
    def new_producer():
        return Producer({**confluent_config({**Sender.DEFAULTS, **opts, "delivery_timeout_ms": 900_000,
                                             "request_timeout_ms": 30_000}), "log_level": 2})

    producers = [new_producer()]
    purged = (KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT)
    replay = {}  # when the replay's first record was queued and its last one acknowledged (run clock)
    topic = topics["preferences"]

    def send(pr, key, value, p):
        while True:
            try:
                pr.produce(topic, value, key, partition=p, on_delivery=on_delivery)
                return
            except BufferError:  # librdkafka's queue is full (e.g. the broker is down): let it drain
                pr.poll(0.05)

    def produce():
        bucket = TokenBucket(rate, burst=max(1.0, rate))  # a second of catch-up after a slow stretch (load)
        replay["start"] = mon.now()
        pr = producers[0]
        for i, (eid, p, value) in enumerate(gen()):
            bucket.acquire()
            ids.append(eid)
            parts[i] = p
            key = eid.encode()
            index[key] = (i, p, value)
            send(pr, key, value, p)
            if not i & 255:
                pr.poll(0)
        replay["queued"] = mon.now()
        # wait for every acknowledgement; watchdog: once (in one run of tests/test_chaos.py) librdkafka's
        # idempotent producer delivered nothing after the broker's restart, for minutes — when no
        # report comes for STUCK_S with the broker up, a fresh producer sends what is unacknowledged
        # again (the stuck one's queue is purged first; a request of it in flight that lands anyway is a
        # re-sent event, which the learners' dedupe window drops)
        deadline, left, moved = time.monotonic() + 900, len(index), time.monotonic()
        while index and time.monotonic() < deadline:
            for q in producers:
                q.flush(1.0) if q is producers[-1] else q.poll(0)
            now = time.monotonic()
            if len(index) != left or mon.broker_down:
                left, moved = len(index), now
            elif now - moved > STUCK_S:
                say(f"t={mon.now():6.1f}s producer stuck for {STUCK_S:g} s with {left} records unacknowledged: "
                    "sending them again with a fresh producer")
                producers[-1].purge()  # its queue will not go out twice
                producers[-1].poll(0)
                producers.append(new_producer())
                for key, (_i, p, value) in list(index.items()):
                    send(producers[-1], key, value, p)
                moved = now
        replay["end"] = mon.now()
        failed.extend(i for i, _, _ in index.values())  # never reported in time: not delivered
        index.clear()

    prod = threading.Thread(target=produce, daemon=True)
    say(f"chaos run {u}: {events} events at {rate:g}/s into {partitions} partitions, models {models}, "
        f"{learners} learners + 1 explainer, broker {boot}; load {_load()}")
    prod.start()
    mon.start()
    plan = schedule(seed, duration if duration is not None else events / rate, kinds, max_faults)
    next_at = 0.0
    try:
        for gap, kind, outage_s in plan:
            next_at += gap
            while mon.now() < next_at:
                time.sleep(0.2)
            f = Fault(kind, mon.now(), {"committed_before": mon.snapshot_committed()})
            if kind in ("kill_learner", "term_learner"):
                alive = alive_learners()
                victim = rng.choice(alive) if alive else None
                if victim is not None:
                    workers.procs[victim].send_signal(9 if kind == "kill_learner" else 15)
                f.detail["victim"] = victim
                if len(alive) <= 1:
                    f.detail["replacement"] = start_learner()
                f.t_ref = mon.now()
            elif kind == "start_learner":
                f.detail["started"] = start_learner()
                f.t_ref = mon.now()
            elif kind == "broker_outage":
                mon.broker_stopping()
                broker.stop()
                time.sleep(outage_s)
                broker.start()
                mon.broker_back()
                f.detail["outage_s"] = round(outage_s, 1)
                f.t_ref = mon.now()
            elif kind == "kill_explainer":
                workers.procs[explainer["name"]].send_signal(9)
                workers.procs[explainer["name"]].wait(30)
                f.detail["port"] = start_explainer()
                f.t_ref = mon.now()
            elif kind == "corrupt_batch":
                # freeze every consumer (SIGSTOP, well inside the 10 s session timeout), let the
                # producer close a segment past where they stand, corrupt a batch there, thaw them:
                # every consumer of the partition then reads that batch
                # the partition whose active segment is fullest closes one soonest (Kafka's minimum
                # segment is 1 MiB); ties by the seeded generator
                p = max(range(partitions), key=lambda q: (_active_segment_bytes(broker.data, topics["preferences"], q),
                                                          rng.random()))
                frozen = [workers.procs[n] for n in alive_learners() + [explainer["name"]]
                          if workers.procs[n].poll() is None]
                for proc in frozen:
                    proc.send_signal(signal.SIGSTOP)
                try:
                    with mon.lock:
                        start = mon.end[p] + 50  # + records appended but not yet acknowledged
                    # at most 4 s: a pause near the session timeout is a fault of its own (a member whose
                    # session expired while frozen comes back as a zombie: see bench/results/chaos.md)
                    b, give_up = None, time.monotonic() + PAUSE_S
                    while b is None and time.monotonic() < give_up:
                        time.sleep(0.25)
                        b = corrupt_batch(broker.data, topics["preferences"], p, start, rng, fallback=False)
                finally:
                    for proc in frozen:
                        proc.send_signal(signal.SIGCONT)
                f.detail.update(partition=p, batch=None if b is None else (b.first, b.last), ahead=b is not None)
                f.t_ref = mon.now()
            with mon.lock:
                mon.faults.append(f)
            say(f"t={f.t:6.1f}s fault {kind} {({k: v for k, v in f.detail.items() if k != 'committed_before'})}; "
                f"load {_load()}")
            next_at = max(next_at, mon.now())
        prod.join()
        t_produced = replay["end"]
        say(f"t={t_produced:6.1f}s all {len(ids)} events produced ({len(failed)} failed sends) in "
            f"{t_produced - replay['start']:.1f} s; load {_load()}")
        deadline = time.monotonic() + settle_timeout
        while time.monotonic() < deadline:
            with mon.lock:
                pending = [f for f in mon.faults if f.recovered_at is None]
            if mon.caught_up() and not pending:
                break
            if not alive_learners():
                start_learner()
            time.sleep(1.0)
        t_settled = mon.now()
        mon.stop.set()
        mon.join(10)
        say(f"t={t_settled:6.1f}s settled (caught up: {mon.caught_up()}, committed {mon.committed}, "
            f"end {mon.end}); load {_load()}")
    finally:
        codes = workers.stop(timeout=60)

    # ---- the clean run's answer: every acknowledged event learned once, by every model
    produced = [i for i in range(len(ids)) if acked[i] >= 0]
    clean = 0
    for i in produced:
        clean = digest_add(clean, event_hash(ids[i]))
    corrupted_ids = set()
    for f in mon.faults:
        if f.kind == "corrupt_batch" and f.detail.get("batch") is not None:
            p, (lo, hi) = f.detail["partition"], f.detail["batch"]
            corrupted_ids |= {ids[i] for i in produced if parts[i] == p and lo <= acked[i] <= hi}
    clean_wo = 0
    for i in produced:
        if ids[i] not in corrupted_ids:
            clean_wo = digest_add(clean_wo, event_hash(ids[i]))
    learned = read_snapshots(topics["models"], opts, models)
    people_res = {}
    if people:
        import collections

        from stream.contract.people import decode_person
        from stream.demo.topics import read_topic

        want = collections.Counter(users[i] for i in produced if ids[i] not in corrupted_ids)
        last = dict(read_topic(topics["people"], dict(opts, max_partition_fetch_bytes=16 * 1024 * 1024), timeout=120))
        p_lost = p_dup = 0
        for m in personal:
            got = {k.decode().split("@", 1)[1]: decode_person(v)[0]["meta"]["version"]
                   for k, v in last.items() if v is not None and k.decode().startswith(m + "@")}
            p_lost = max(p_lost, sum(max(n_u - got.get(x, 0), 0) for x, n_u in want.items()))
            p_dup = max(p_dup, sum(max(v - want.get(x, 0), 0) for x, v in got.items()))
        people_res = {"people": len(want), "people_lost": p_lost, "people_duplicated": p_dup}
        say(f"people: {len(want)} persons; worst personal model: {p_lost} person updates lost, {p_dup} applied twice")
    n_expl, dupes = explanation_dupes(topics["explanations"], opts)
    n = len(produced)
    lost = max(max(n - c, 0) for c, _, _ in learned.values())
    duplicated = max(max(c - n, 0) for c, _, _ in learned.values())
    if any(c == n and d != clean for c, d, _ in learned.values()):
        lost, duplicated = max(lost, 1), max(duplicated, 1)
    met = corrupt_met(log_dir)
    rec = [f.recover_s for f in mon.faults if f.recover_s is not None]
    unrecovered = sum(f.recovered_at is None for f in mon.faults)
    delete_topics(opts, topics.values())
    return {
        "run": u, "events": n, "failed_sends": len(failed), "faults": len(mon.faults),
        "fault_kinds": [f.kind for f in mon.faults], "lost": lost, "duplicated": duplicated,
        "digest_equal": all(d == clean for _, d, _ in learned.values()),
        "digest_equal_without_corrupted": all(d == clean_wo for _, d, _ in learned.values()),
        "digests": {m: d for m, (_, d, _) in learned.items()},
        "learned": {m: c for m, (c, _, _) in learned.items()}, "learned_per_source": {m: per for m, (_, _, per) in learned.items()},
        "explanations": n_expl, "explanation_dupes": dupes, "max_stall_s": round(mon.max_stall, 1),
        "max_stall_at": mon.max_stall_at, "first_commit_s": mon.first_commit, "recover_p50_s": round(statistics.median(rec), 1) if rec else float("nan"),
        "recover_max_s": float("inf") if unrecovered else (round(max(rec), 1) if rec else float("nan")),
        "unrecovered": unrecovered, "corrupted": len(corrupted_ids), "corrupt_met": met, "seconds": round(t_settled, 1),
        "produce_s": round(t_produced - replay["start"], 1),  # to the last acknowledgement (outages included)
        # the rate the replay offered: every event queued to the producer, paced by the token bucket
        "replay_events_per_s": round(len(ids) / max(replay["queued"] - replay["start"], 1e-9), 1), "exit_codes": codes, "log_dir": str(log_dir),
        "fault_table": [{"kind": f.kind, "t": round(f.t, 1), "recover_s": None if f.recover_s is None else round(f.recover_s, 1),
                         **{k: v for k, v in f.detail.items() if k != "committed_before"}} for f in mon.faults],
        **people_res,
    }


def last_line(r: dict, load: str) -> str:
    return (f"events={r['events']} faults={r['faults']} lost={r['lost']} duplicated={r['duplicated']} "
            f"digest_equal={r['digest_equal']} explanation_dupes={r['explanation_dupes']} "
            f"max_stall_s={r['max_stall_s']} recover_p50_s={r['recover_p50_s']} recover_max_s={r['recover_max_s']} "
            f"unrecovered={r['unrecovered']} corrupted={r['corrupted']} "
            f"digest_equal_without_corrupted={r['digest_equal_without_corrupted']} seconds={r['seconds']} "
            f"replay_events_per_s={r['replay_events_per_s']} "
            + (f"people_lost={r['people_lost']} people_duplicated={r['people_duplicated']} " if "people_lost" in r else "")
            + f"load_avg=\"{load}\"")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--rate", type=float, default=2000.0, help="events per second replayed")
    ap.add_argument("--duration", type=float, default=None, help="fault window in s (default: the replay's length)")
    ap.add_argument("--faults", type=int, default=None, help="at most this many faults")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--kinds", default=",".join(FAULT_KINDS), help=f"fault kinds among {','.join(FAULT_KINDS)}")
    ap.add_argument("--models", default="capacity,gpm,linear-bt")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--learners", type=int, default=2, help="learner workers at the start")
    ap.add_argument("--sample-rate", type=float, default=0.002, help="explainer sample rate")
    ap.add_argument("--gpm-min-train", type=int, default=3000)
    ap.add_argument("--gpm-refit-every", type=int, default=20000)
    ap.add_argument("--settle-timeout", type=float, default=300.0)
    ap.add_argument("--clean-run", action="store_true", help="also run without faults and compare the digests")
    ap.add_argument("--people", type=int, default=0,
                    help="person-keyed events over this many people, with a personal model and its changelog")
    ap.add_argument("--log-dir", default=None, help="worker logs and settings (default: a new temporary folder, kept)")
    ap.add_argument("--out", default=None, help="directory for chaos.txt / chaos.json (nothing written without it)")
    args = ap.parse_args(argv)
    kinds = tuple(k for k in args.kinds.split(",") if k)
    bad = set(kinds) - set(FAULT_KINDS)
    if bad:
        ap.error(f"unknown fault kinds {sorted(bad)}; choose among {','.join(FAULT_KINDS)}")
    root = Path(tempfile.mkdtemp(prefix="prefstream-chaos-broker-"))
    broker = OwnBroker(root)
    load_before = _load()
    print(f"starting the chaos broker at {broker.bootstrap} (home {broker.home}); load {load_before}", flush=True)
    broker.start()
    kw = dict(events=args.events, rate=args.rate, duration=args.duration, seed=args.seed, max_faults=args.faults,
              models=args.models.split(","), partitions=args.partitions, learners=args.learners,
              sample_rate=args.sample_rate, settle_timeout=args.settle_timeout, gpm_min_train=args.gpm_min_train,
              gpm_refit_every=args.gpm_refit_every, say=lambda m: print(m, flush=True), people=args.people,
              log_dir=Path(args.log_dir or tempfile.mkdtemp(prefix="prefstream-chaos-logs-")))
    try:
        r = run_chaos(broker, kinds=kinds, **kw)
        if args.clean_run:
            c = run_chaos(broker, kinds=(), **dict(kw, log_dir=kw["log_dir"] / "clean"))
            r["clean_run_digest_equal"] = c["digests"] == r["digests"]
            r["clean_run"] = {k: c[k] for k in ("events", "lost", "duplicated", "digest_equal", "max_stall_s", "seconds")}
    finally:
        broker.destroy()
    load = _load()
    for f in r["fault_table"]:
        print(f"  {f}")
    print("corrupt batches met (log lines):", r["corrupt_met"])
    print("learned per model:", r["learned"], "of", r["events"], "| explanations", r["explanations"],
          "| exit codes", r["exit_codes"], "| worst stall (partition, t, committed, end):", r["max_stall_at"])
    if "clean_run" in r:
        print("clean run:", r["clean_run"], "digests equal to the chaos run's:", r["clean_run_digest_equal"])
    line = last_line(r, load)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "chaos.json").write_text(json.dumps(r, indent=1, default=str))
        with open(out / "chaos.txt", "w") as fh:
            fh.write(f"# load before: {load_before}\n")
            fh.writelines(f"{f}\n" for f in r["fault_table"])
            fh.write(line + "\n")
    print(f"worker logs: {r['log_dir']}")
    print(line)
    ok = (r["lost"] == 0 and r["duplicated"] == 0 and r["digest_equal"] and r["explanation_dupes"] == 0
          and r["unrecovered"] == 0 and r.get("people_lost", 0) == 0 and r.get("people_duplicated", 0) == 0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
