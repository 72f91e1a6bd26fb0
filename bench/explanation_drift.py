"""Explanation drift on a real stream whose preference changes at a known event t0.

The stream is the Kaggle Pokémon duels (50,000 real battles, outcomes largely led by Speed):
``--stationary`` events (default: all 50,000, shuffled once with ``--seed``) with their real
outcomes, then from event t0 on ``--after`` duels drawn from the same battles whose outcome comes
from another real criterion: the Pokémon with the higher Defense wins (ties dropped).

The events go through the workers' own cores as ``prefstream run`` drives them, without Kafka:
:class:`stream.workers.learner.LearnerCore` (linear-bt, progressive validation, snapshots every
``--snapshot-every`` events) → snapshot records → :class:`stream.workers.explainer.ExplainerCore`
(``linear-shapley`` of a fraction ``--sample-rate`` of the events) → its :class:`stream.monitoring.monitor.Monitor`
(default monitor settings unless overridden). The model-drift detector (ADWIN on the loss) runs
in the learner's monitor.

Reported (last line): ``events``, ``t0``, ``detect_delay_events`` (events from t0 to the first
explanation-drift alarm, ranking or feature), ``false_alarms`` (explanation-drift alarms before
t0), ``ndcg_before`` (nDCG of the last check before t0 against the reference), ``ndcg_after``
(nDCG of the ranking at the end of the stream against the pre-t0 reference window); plus
``model_alarm_delay_events`` and ``model_false_alarms`` for the loss detector.

Run: ``python bench/explanation_drift.py [--out bench/results] [--plot docs/img/drift.png]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def build_events(stationary: int, after: int, seed: int, data_dir=None):
    """(list of preference-event bytes, t0, feature names)."""
    from stream.adapters.duels import load_pokemon

    ds = load_pokemon(data_dir)
    rng = np.random.default_rng(seed)
    n = len(ds)
    order = rng.permutation(n)
    if stationary > n:
        order = np.concatenate([order, rng.integers(0, n, stationary - n)])
    order = order[:stationary]
    X, names = ds.item_features, list(ds.feature_names)
    d_col = names.index("Defense")

    def event(k: int, i: int, outcome: int) -> bytes:
        left = {f: float(v) for f, v in zip(names, X[ds.left[i]])}
        right = {f: float(v) for f, v in zip(names, X[ds.right[i]])}
        return json.dumps({"schema_version": 1, "event_id": f"poke-{k}", "timestamp": 1.6e9 + k,
                           "left": {"id": ds.item_ids[ds.left[i]], "features": left},
                           "right": {"id": ds.item_ids[ds.right[i]], "features": right},
                           "outcome": int(outcome)}).encode()

    events = [event(k, int(i), int(ds.outcome[i])) for k, i in enumerate(order)]
    t0 = len(events)
    while len(events) < t0 + after:
        i = int(rng.integers(0, n))
        dl, dr = X[ds.left[i], d_col], X[ds.right[i], d_col]
        if dl == dr:
            continue
        events.append(event(len(events), i, 1 if dl > dr else -1))
    return events, t0, names


def run(events, t0, settings) -> dict:
    from stream import registry
    from stream.workers.explainer import ExplainerCore
    from stream.workers.learner import LearnerCore

    registry.models()
    learner = LearnerCore(settings)
    explainer = ExplainerCore(settings)
    st = learner.new_source(settings.topic_preferences, 0, {})
    # event position of every explanation / scored event, to express monitor positions in events
    expl_at: list[int] = []
    loss_at: list[int] = []
    t_start = time.perf_counter()

    def publish():
        recs, _acks, versions = learner.build_snapshots(st)
        for k, v in recs:
            explainer.on_snapshot(k, v)
        learner.snapshot_done(st, versions, True)

    for k, raw in enumerate(events):
        learner.process(st, k, raw)
        loss_at.append(k)
        if learner.snapshot_due(st) or (k and "linear-bt" not in explainer.parts):
            publish()
        job = explainer.on_preference(raw)
        if job is not None:
            plan = explainer.plan(job)
            if plan:
                n = len(explainer.explain(job, plan))
                expl_at.extend([k] * n)
    seconds = time.perf_counter() - t_start
    mon = explainer.monitor
    expl_alarms = [(expl_at[a["position"] - 1], a) for a in mon.alarms]
    model_alarms = [(loss_at[a["position"] - 1], a) for a in learner.monitor.alarms]
    hist = [{"event": expl_at[h["position"] - 1], **h} for h in mon.history if h["method"] == "linear-shapley"]
    return _summary(len(events), t0, expl_alarms, model_alarms, hist, len(expl_at), seconds, mon.top_k)


def run_workers(events, t0, settings, args) -> dict:
    """The same stream through the real workers: producer → broker → ``prefstream worker learn`` and
    ``worker explain`` subprocesses (run-unique topics, one partition so that the monitors see the
    events in stream order) → the drift and explanation topics, read back at the end."""
    import subprocess
    import urllib.request
    import uuid

    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient

    from stream.broker import TOPICS, TopicSpec, create_topics, kafka_client_options

    opts = kafka_client_options()
    u = uuid.uuid4().hex[:8]
    kinds = {"preferences": "topic_preferences", "items": "topic_items", "models": "topic_models",
             "explain-requests": "topic_explain_requests", "explanations": "topic_explanations",
             "dead-letters": "topic_dead_letters", "drift": "topic_drift", "clicks": "topic_clicks"}
    topics = {k: f"bench.drift.{k}.{u}" for k in kinds}
    specs = {topics[k]: TopicSpec(1, dict(TOPICS[f"prefstream.{k}"].config)) for k in kinds}
    create_topics(None, specs, client_options=opts)
    env = dict(os.environ, PREFSTREAM_MODELS="linear-bt", PREFSTREAM_SNAPSHOT_EVERY_EVENTS=str(args.snapshot_every),
               PREFSTREAM_SNAPSHOT_EVERY_SECONDS="1", PREFSTREAM_CONSUMER_GROUP=f"bench-drift-{u}",
               PREFSTREAM_STATE_DIR=f"/tmp/prefstream-bench-drift-{u}", PYTHONUNBUFFERED="1",
               PREFSTREAM_EXPLAIN_MAX_QUEUE="100000",
               **{f"PREFSTREAM_{kinds[k].upper()}": t for k, t in topics.items()})
    lport = int(os.environ.get("PREFSTREAM_LEARNER_METRICS_PORT", 21764))
    eport = int(os.environ.get("PREFSTREAM_EXPLAINER_METRICS_PORT", 21765))
    logs = [open(f"/tmp/prefstream-bench-drift-{u}-{r}.log", "w") for r in ("learn", "explain")]
    procs = [subprocess.Popen([sys.executable, "-m", "stream", "worker", "learn", "--metrics-port", str(lport)],
                              env=env, stdout=logs[0], stderr=subprocess.STDOUT),
             subprocess.Popen([sys.executable, "-m", "stream", "worker", "explain", "--metrics-port", str(eport),
                               "--sample-rate", str(args.sample_rate)], env=env, stdout=logs[1], stderr=subprocess.STDOUT)]

    def metric(port, name):
        try:
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        except OSError:
            return None
        return sum(float(ln.rsplit(" ", 1)[1]) for ln in text.splitlines() if ln.startswith(name))

    t_start = time.perf_counter()
    try:
        while metric(lport, "prefstream_events_consumed_total") is None or metric(eport, "prefstream_explanations_total") is None:
            time.sleep(1)
        time.sleep(5)  # both consumers joined
        # Paced to the slower worker, as a live stream at the pipeline's capacity: a chunk is sent only
        # when the explainer has handled the events sent up to `slack` ago. (Unpaced, the explainer
        # would explain old events with snapshots learned from later ones.)
        # The explainer may only lag by `slack` events (sampling noise: an explainer idle for 3 s has
        # handled everything sent), so each explanation uses a snapshot at most ~slack events ahead.
        prod = KafkaProducer(acks="all", linger_ms=20, **opts)
        chunk, slack = 100, 250
        for lo in range(0, len(events), chunk):
            last_done, idle_since = None, time.monotonic()
            while True:
                done = (metric(eport, "prefstream_explanations_total") or 0) \
                    + (metric(eport, "prefstream_explanations_skipped_total") or 0)
                if done != last_done:
                    last_done, idle_since = done, time.monotonic()
                if done >= args.sample_rate * (lo - slack) or time.monotonic() - idle_since > 3.0:
                    break
                time.sleep(0.1)
            for k in range(lo, min(lo + chunk, len(events))):
                prod.send(topics["preferences"], key=f"poke-{k}".encode(), value=events[k])
            prod.flush(120)
        prod.close()
        last, still = None, 0
        while still < 6:  # learner done and the explainer idle for 30 s
            time.sleep(5)
            now = (metric(lport, "prefstream_events_learned_total"), metric(eport, "prefstream_explanations_total"))
            still = still + 1 if now == last and (now[0] or 0) >= len(events) else 0  # (re-learned after a rebalance: ≥)
            last = now
            if any(p.poll() is not None for p in procs):
                raise RuntimeError("a worker exited; see /tmp/prefstream-bench-drift-*.log")
        seconds = time.perf_counter() - t_start

        def read(topic):
            c = KafkaConsumer(enable_auto_commit=False, group_id=None, consumer_timeout_ms=5000, **opts)
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            c.seek_to_beginning(tp)
            end = c.end_offsets([tp])[tp]
            out = []
            while c.position(tp) < end:
                for msgs in c.poll(timeout_ms=1000).values():
                    out.extend(json.loads(m.value) for m in msgs)
            c.close()
            return out

        expl = read(topics["explanations"])
        drift = read(topics["drift"])
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        admin = KafkaAdminClient(**opts)
        admin.delete_topics(list(topics.values()))
        admin.close()
    expl_at = [int(r["request_id"].split("-")[1]) for r in expl if r["method"] == "linear-shapley"]
    ex_alarms = [(expl_at[a["position"] - 1], a) for a in drift if a["kind"] != "model"]
    model_alarms = [(a["position"], a) for a in drift if a["kind"] == "model"]  # scored events ≈ events
    # the global importances over time: replay the explanation records through a monitor as the report does
    from stream.monitoring.monitor import Monitor, ndcg

    mon = Monitor.from_settings(settings)
    mon.observe(expl)
    hist = [{"event": expl_at[h["position"] - 1], **h} for h in mon.history if h["method"] == "linear-shapley"]
    return _summary(len(events), t0, ex_alarms, model_alarms, hist, len(expl_at), seconds, mon.top_k)


def _summary(n_events, t0, expl_alarms, model_alarms, hist, n_expl, seconds, top_k) -> dict:
    from stream.monitoring.monitor import ndcg

    false = [e for e, _ in expl_alarms if e < t0]
    after = [e for e, _ in expl_alarms if e >= t0]
    m_false = [e for e, _ in model_alarms if e < t0]
    m_after = [e for e, _ in model_alarms if e >= t0]
    before = [h for h in hist if h["ndcg"] is not None and h["event"] < t0]
    pre = [h for h in hist if h["event"] < t0]
    names = list(hist[-1]["mean_abs"])
    ref = np.array([pre[-1]["mean_abs"][f] for f in names])
    end = np.array([hist[-1]["mean_abs"][f] for f in names])
    return {
        "events": n_events, "t0": t0,
        "detect_delay_events": (after[0] - t0) if after else None,
        "false_alarms": len(false),
        "ndcg_before": before[-1]["ndcg"] if before else float("nan"),
        "ndcg_after": ndcg(ref, end, top_k),
        "model_alarm_delay_events": (m_after[0] - t0) if m_after else None,
        "model_false_alarms": len(m_false),
        "explanations": n_expl, "seconds": seconds,
        "alarms": [{"event": e, **a} for e, a in expl_alarms],
        "model_alarms": [{"event": e, **a} for e, a in model_alarms],
        "history": hist,
    }


def main(argv=None) -> int:
    from stream import load_builtins

    load_builtins()  # the registry knows no model until the built-ins are registered
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stationary", type=int, default=50_000, help="events before t0 (real outcomes)")
    ap.add_argument("--after", type=int, default=10_000, help="events after t0 (Defense-led outcomes)")
    ap.add_argument("--sample-rate", type=float, default=0.5, help="fraction of events explained")
    ap.add_argument("--snapshot-every", type=int, default=200, help="learner snapshot cadence (events)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", action="store_true",
                    help="through the real worker processes and the broker (PREFSTREAM_BOOTSTRAP) instead of their cores")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="monitor settings overrides")
    ap.add_argument("--out", default=None, help="write explanation_drift.{md,txt,json} there")
    ap.add_argument("--plot", default=None, help="write the report's importance-drift plot (PNG) there")
    a = ap.parse_args(argv)
    from stream.settings import Settings

    def num(v: str):
        for t in (int, float):
            try:
                return t(v)
            except ValueError:
                pass
        return v

    over = {k: num(v) for k, v in (kv.split("=", 1) for kv in a.set)}
    settings = Settings.load(overrides={"models": ["linear-bt"], "explain_sample_rate": a.sample_rate,
                                        "snapshot_every_events": a.snapshot_every, "seed": a.seed, **over})
    events, t0, _ = build_events(a.stationary, a.after, a.seed)
    res = run_workers(events, t0, settings, a) if a.workers else run(events, t0, settings)
    load = os.getloadavg()
    if a.plot:
        from stream.monitoring.plots import plot_importance_drift

        plot_importance_drift(res["history"], res["alarms"], a.plot, t0=t0, x="event",
                              title=f"linear-bt / linear-shapley on Pokémon duels (Defense-led from event {t0})")
    line = (f"events={res['events']} t0={res['t0']} detect_delay_events={res['detect_delay_events']} "
            f"false_alarms={res['false_alarms']} ndcg_before={res['ndcg_before']:.4f} ndcg_after={res['ndcg_after']:.4f}")
    print(f"explanations={res['explanations']} seconds={res['seconds']:.1f} load_avg={load[0]:.2f},{load[1]:.2f},{load[2]:.2f}")
    print(f"model_alarm_delay_events={res['model_alarm_delay_events']} model_false_alarms={res['model_false_alarms']}")
    for al in res["alarms"]:
        print(f"alarm at event {al['event']}: {al['kind']} {al['statistic']['name']}={al['statistic']['value']:.4f} "
              f"features={al['features']}")
    if a.out:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        cmd = "python bench/explanation_drift.py " + " ".join(argv if argv is not None else sys.argv[1:])
        md = [
            "# Explanation drift (bench/explanation_drift.py" + (" --workers)" if a.workers else ")"), "",
            f"Command: `{cmd}`; load average (1/5/15 min) at the end: {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} "
            "on the shared 2-core machine.", "",
            f"Stream: {t0:,} real Pokémon duels (real, Speed-led outcomes), then {res['events'] - t0:,} duels whose "
            "winner is the Pokémon with the higher Defense. linear-bt through "
            + ("the real worker processes (`prefstream worker learn` and `worker explain`, one-partition run-unique "
               "topics on the broker; drift records read back from the drift topic) " if a.workers else
               "the workers' cores without Kafka (`LearnerCore` → snapshots → `ExplainerCore`) ")
            + f"(linear-shapley on {a.sample_rate:g} of the events, {res['explanations']:,} explanations) "
            f"→ `stream.monitoring.monitor.Monitor` with window {settings.monitor_window}, warm-up {settings.monitor_warmup}, "
            f"nDCG@{settings.monitor_top_k} threshold {settings.drift_ndcg_threshold}, ADWIN δ {settings.drift_delta}, "
            f"min effect {settings.drift_min_effect}. {res['seconds']:.0f} s wall.", "",
            "| figure | value | goal |", "| --- | --- | --- |",
            f"| events | {res['events']:,} | |", f"| t0 | {t0:,} | ≥ 50,000 stationary events |",
            f"| detect_delay_events | {res['detect_delay_events']} | ≤ 2,000 |",
            f"| false_alarms (explanation drift before t0) | {res['false_alarms']} | 0 |",
            f"| ndcg_before (last check before t0) | {res['ndcg_before']:.4f} | |",
            f"| ndcg_after (end of stream vs pre-t0 window) | {res['ndcg_after']:.4f} | |",
            f"| model drift (ADWIN on log loss): delay / false alarms | {res['model_alarm_delay_events']} / "
            f"{res['model_false_alarms']} | |", "",
            *(["The producer is paced to the explainer (it may lag the learner by about 250 events), so an "
               "explanation uses a snapshot at most that far ahead of its event; positions of the monitor's alarms "
               "are mapped to events through the explanation records' request ids (= event ids).", ""]
              if a.workers else []),
            *([f"![importance over time with the alarms]({os.path.relpath(a.plot, out)})", ""] if a.plot else []),
            "Alarms:", "",
        ] + [f"* event {al['event']:,}: `{al['kind']}` {al['statistic']['name']} = {al['statistic']['value']:.4f}, "
             f"features {', '.join(al['features'])}" for al in res["alarms"]] + ["", "```", line, "```", ""]
        stem = "explanation_drift_workers" if a.workers else "explanation_drift"
        (out / f"{stem}.md").write_text("\n".join(md), encoding="utf-8")
        (out / f"{stem}.txt").write_text(line + "\n", encoding="utf-8")
    print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
