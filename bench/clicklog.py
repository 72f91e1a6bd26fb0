"""Counterfactual learning from click logs through Kafka: naive vs IPS vs oracle pairs, and Open Bandit.

Part 1 — the semi-synthetic protocol of counterfactual learning to rank (Joachims, Swaminathan &
Schnabel 2017, §6; Wang et al. 2018, §5; :mod:`stream.clicks.simulate`): the THE 2020 catalog (1,397
universities, 5 pillars, standardised), the truth = THE's published overall score
(0.3·teaching + 0.3·research + 0.3·citations + 0.025·income + 0.075·international), a logging
ranker that favours income and international outlook (Plackett–Luce over 20 uniform candidates,
k = 5 shown), a position-based click model (θ_j = 1/j, click noise 0.02). The simulated sessions
go through the real broker to a real learner worker (``python -m stream worker learn``) three
times, each on fresh topics:

* ``naive``  — click sessions, ``click_weighting=none``;
* ``ips``    — the same click sessions, ``click_weighting=snips`` (IPS with the examination
  propensities the sessions carry, self-normalised);
* ``ips_em`` — the sessions without their propensities, ``click_weighting=snips`` with
  ``click_examination`` estimated from the clicks alone by EM for the position-based model
  (:func:`stream.clicks.log.estimate_examination_em`; Wang et al. 2018, §4);
* ``oracle`` — preference events: the same item pairs labelled by the truth.

The learned catalog ranking (from the worker's final snapshot) is compared with the truth by
Kendall τ and nDCG@3. ``sessions_per_s`` is the ips run's rate from the worker's first to its
last consumed session (Prometheus ``events_consumed_total`` of the click topic).

Part 2 — Open Bandit (``--obd``): the six bundled samples replayed in-process through the same
contract path (sessions → SNIPS-weighted pairs, linear-bt); off-policy click-rate estimates
(IPS / SNIPS, 95 % intervals) of the learned ranking on the random-policy logs, trained (a) on
the Bernoulli-TS logs only (held out) and (b) on all six; CTR per position.

Last line::

    sessions=… pairs=… sessions_per_s=… tau_naive=… tau_ips=… tau_oracle=… ndcg3_ips=…

With ``--gpm`` the same three runs for the refitting GPM (which ignores example weights, so its
IPS run uses ``click_weighting=ips_sample``: pairs kept with probability 0.2/θ_j); the GPM is
scored after one final refit on the window (last 6,000 pairs) of the worker's snapshot.

Reproduce: ``python bench/clicklog.py --sessions 20000 --obd --gpm`` (broker on 127.0.0.1:9092).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench.worker_run import create_run_topics, delete_topics, metrics_text, stop_worker  # noqa: E402

LOGGING_WEIGHTS = [0.0, 0.0, 0.0, 1.0, 1.0]  # the production ranker: income + international
MODEL_PARAMS = {"linear-bt": {"learning_rate": 0.05},
                "capacity": {"scaler": "minmax", "constraints": ["monotone"]},
                # the GPM refits on a sliding window; one refit per 2,000 pairs, the last on the final window
                "gpm": {"refit_every": 2000, "min_train": 200, "window_size": 6000, "window": "sliding", "drift": False}}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _metric_sum(text: str, prefix: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix))


def run_worker(bootstrap: str, model: str, items: list[dict], records: list[dict], kind: str, env_extra: dict,
               expected_learned: int, timeout: float) -> dict:
    """Produce ``records`` to fresh topics, run one learner worker over them, return its model and rate."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    from stream import registry
    from stream.contract import decode_snapshot
    from stream.workers._snapshot import split_stream_meta

    topics, opts, u = create_run_topics("bench.clicklog", bootstrap)
    prod = KafkaProducer(acks="all", linger_ms=20, batch_size=262144, **opts)
    for it in items:
        prod.send(topics["items"], key=it["item_id"].encode(), value=json.dumps(it).encode())
    dest = topics["clicks"] if kind == "click" else topics["preferences"]
    key = "session_id" if kind == "click" else "event_id"
    for r in records:
        prod.send(dest, key=r[key].encode(), value=json.dumps(r).encode())
    prod.flush(120)
    prod.close()

    port = _free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PREFSTREAM_BOOTSTRAP_SERVERS=bootstrap,
               PREFSTREAM_CONSUMER_GROUP=f"bench-clicklog-{u}", PREFSTREAM_STATE_DIR=f"/tmp/prefstream-bench-{u}",
               PREFSTREAM_SNAPSHOT_EVERY_EVENTS="100000", PREFSTREAM_SNAPSHOT_EVERY_SECONDS="1.0",
               PREFSTREAM_MODEL_PARAMS=json.dumps(MODEL_PARAMS),
               **{f"PREFSTREAM_TOPIC_{k.upper()}": v for k, v in topics.items()}, **env_extra)
    log = open(f"/tmp/prefstream-bench-clicklog-{u}.log", "w")
    worker = subprocess.Popen([sys.executable, "-m", "stream", "worker", "learn", "--models", model,
                               "--metrics-port", str(port), "--log-level", "WARNING"], cwd=REPO, env=env,
                              stdout=log, stderr=subprocess.STDOUT)

    def scrape() -> str:
        return metrics_text(port)

    consumed_prefix = f'prefstream_events_consumed_total{{topic="{dest}"}}'
    n = len(records)
    t_first = t_done = None
    first = 0.0
    snap = None
    try:
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            c = _metric_sum(scrape(), consumed_prefix)
            if c > 0 and t_first is None:
                t_first, first = time.perf_counter(), c
            if c >= n:
                t_done = time.perf_counter()
                break
            time.sleep(0.02)
        while time.perf_counter() < deadline:  # the snapshot covering everything
            cons = KafkaConsumer(enable_auto_commit=False, group_id=None, consumer_timeout_ms=800,
                                 max_partition_fetch_bytes=16 * 1024 * 1024, **opts)
            tp = TopicPartition(topics["models"], 0)
            cons.assign([tp])
            cons.seek_to_beginning(tp)
            latest = {}
            for m in cons:
                latest[m.key] = m.value
            cons.close()
            snaps = [decode_snapshot(v) for v in latest.values() if v is not None]
            if snaps and snaps[0]["training_count"] >= expected_learned:
                snap = snaps[0]
                break
            time.sleep(0.5)
        dead = _metric_sum(scrape(), "prefstream_dead_letters_total{")
    finally:
        stop_worker(worker, 20)
        delete_topics(opts, list(topics.values()) + [f"bench-clicklog-{u}-__assignor-__leader"])  # + Faust's assignor topic
    if snap is None:
        raise SystemExit(f"the worker did not learn {expected_learned} pairs in {timeout:.0f} s; see {log.name}")
    clean, _info = split_stream_meta(snap["state"])
    learner = registry.get_model(model).loader(clean)
    if hasattr(learner, "refit"):
        # The worker refits in the background only when an event arrives, so its last refit may
        # predate the last pairs: refit once on the snapshot's window (the last window_size pairs
        # the worker learned) before scoring.
        learner.refit()
    span = (t_done - t_first) if (t_done and t_first) else float("nan")
    rate = (n - first) / span if span == span and span > 0 else float("nan")
    return {"learner": learner, "rate": rate, "learned": int(snap["training_count"]), "dead_letters": int(dead)}


def obd_part() -> dict:
    """Open Bandit: train on sessions in-process, off-policy estimates on the random-policy logs."""
    from learners.linear import LinearBT
    from stream.adapters.clicks import load_open_bandit
    from stream.clickeval import click_log_summary
    from stream.clicks.log import ClickPairing, SessionExpander
    from stream.contract import parse_click_session

    log = load_open_bandit()
    out = {}
    for train in ("bts", "all"):
        m = LinearBT(learning_rate=0.05)
        ex = SessionExpander(ClickPairing(weighting="snips", orientation="hashed"))
        pairs = 0
        t0 = time.perf_counter()
        recs = list(log.click_sessions())
        for rec in recs:
            if train == "bts" and not rec["session_id"].startswith("obd-bts"):
                continue
            for e in parse_click_session(json.dumps(rec).encode(), expander=ex):
                m.learn_one(e.left, e.right, e.outcome, e.context, e.weight)
                pairs += 1
        s = click_log_summary(log, m)
        s["train"] = train
        s["pairs"] = pairs
        s["seconds"] = time.perf_counter() - t0
        out[train] = s
    return out


def main(argv=None) -> int:
    from stream import load_builtins

    load_builtins()  # the registry knows no model until the built-ins are registered
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=20000)
    ap.add_argument("--model", default="linear-bt", help="learner worker model (linear-bt or capacity)")
    ap.add_argument("--bootstrap", default=os.environ.get("PREFSTREAM_BOOTSTRAP", "127.0.0.1:9092"))
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--obd", action="store_true", help="also the Open Bandit figures")
    ap.add_argument("--gpm", action="store_true", help="also the refitting GPM (naive, ips_sample, oracle)")
    ap.add_argument("--out", default=None, help="write clicklog.json here")
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args(argv)

    from stream.adapters.rankings import load_the2020
    from stream.clicks.simulate import ClickSimulation, catalog_scores, kendall_tau, ndcg_at_k

    print(f"load average before: {os.getloadavg()}", flush=True)
    cat = load_the2020(args.data_dir)
    X = (cat.X - cat.X.mean(0)) / cat.X.std(0)
    truth = cat.score_fn(cat.X)
    sim = ClickSimulation(X, cat.feature_names, truth, np.array(LOGGING_WEIGHTS), k=5, n_candidates=20, eta=1.0,
                          r_max=0.5, beta=0.7, noise=0.02, item_ids=[f"the-{j}" for j in range(len(X))])
    sessions = sim.simulate(args.sessions, seed=args.seed)
    oracle = sim.oracle_events(sessions)
    items = list(sim.item_records())
    n_pairs = len(oracle)
    print(f"simulated {len(sessions)} sessions, {sum(len(s['clicked']) for s in sessions)} clicks, {n_pairs} pairs "
          f"(clicked ≻ other shown)", flush=True)
    from stream.clicks.log import ClickPairing, SessionExpander

    def n_learned(weighting: str, clip: float) -> int:
        ex = SessionExpander(ClickPairing(weighting=weighting, clip=clip))
        return sum(len(ex.plan(s["session_id"], s["shown"], set(s["clicked"]))) for s in sessions)

    from stream.clicks.log import estimate_examination_em

    # the same sessions without propensities: IPS with examination estimated by EM from the clicks
    bare = [{**s, "shown": [{k: v for k, v in slot.items() if k != "propensity"} for slot in s["shown"]]}
            for s in sessions]
    theta_em = estimate_examination_em(bare, n_iter=300)
    print("examination by EM (no propensities): " + ", ".join(f"{t:.3f}" for t in theta_em)
          + "  (true: " + ", ".join(f"{t:.3f}" for t in sim.theta) + ")", flush=True)
    feats = ",".join(cat.feature_names)
    plans = [(args.model, "naive", "click", sessions, {"PREFSTREAM_CLICK_WEIGHTING": "none"}, n_pairs),
             (args.model, "ips", "click", sessions, {"PREFSTREAM_CLICK_WEIGHTING": "snips"}, n_pairs),
             (args.model, "ips_em", "click", bare, {"PREFSTREAM_CLICK_WEIGHTING": "snips",
                                                    "PREFSTREAM_CLICK_EXAMINATION": ",".join(map(str, theta_em))}, n_pairs),
             (args.model, "oracle", "preference", oracle, {}, n_pairs)]
    if args.gpm:  # the refitting GPM ignores weights: IPS by rejection sampling (click_weighting=ips_sample)
        g = {"PREFSTREAM_FEATURE_NAMES": feats}
        plans += [("gpm", "naive", "click", sessions, {**g, "PREFSTREAM_CLICK_WEIGHTING": "none"}, n_pairs),
                  ("gpm", "ips_sample", "click", sessions, {**g, "PREFSTREAM_CLICK_WEIGHTING": "ips_sample",
                                                            "PREFSTREAM_CLICK_PROPENSITY_CLIP": "0.2"},
                   n_learned("ips_sample", 0.2)),
                  ("gpm", "oracle", "preference", oracle, g, n_pairs)]
    res: dict = {}
    for model, name, kind, recs, extra, expected in plans:
        extra = {"PREFSTREAM_FEATURE_NAMES": feats, **extra}
        r = run_worker(args.bootstrap, model, items, recs, kind, extra, expected, args.timeout)
        s = catalog_scores(r["learner"], X, cat.feature_names)
        res.setdefault(model, {})[name] = {
            "tau": kendall_tau(s, truth), "ndcg3": ndcg_at_k(s, sim.relevance, 3), "rate": r["rate"],
            "learned": r["learned"], "dead_letters": r["dead_letters"], "load": os.getloadavg()[0]}
        e = res[model][name]
        print(f"{model:<9} {name:<10} learned={r['learned']} tau={e['tau']:.4f} ndcg3={e['ndcg3']:.4f} "
              f"{'sessions' if kind == 'click' else 'events'}_per_s={r['rate']:.1f} dead_letters={r['dead_letters']} "
              f"load1={e['load']:.2f}", flush=True)
    summary = {"sessions": len(sessions), "pairs": n_pairs, "runs": res, "model": args.model}
    res = res[args.model]
    if args.obd:
        obd = obd_part()
        summary["open_bandit"] = obd
        for train, s in obd.items():
            print(f"open_bandit train={train}: {s['pairs']} pairs; " + "; ".join(
                f"{p} IPS {e['ips']['value']:.4f} [{e['ips']['lo']:.4f}, {e['ips']['hi']:.4f}] SNIPS {e['snips']['value']:.4f} "
                f"[{e['snips']['lo']:.4f}, {e['snips']['hi']:.4f}] matched={e['ips']['matched']}"
                for p, e in s["off_policy"].items()) + f"; logging CTR {s['logging_ctr']['value']:.4f} "
                f"[{s['logging_ctr']['lo']:.4f}, {s['logging_ctr']['hi']:.4f}]", flush=True)
        s = obd["all"]
        print("open_bandit CTR by position (random logs): " + ", ".join(
            f"{p}: {v['clicks']}/{v['impressions']} = {v['ctr']:.4f}" for p, v in s["ctr_by_position"].items())
            + f"; sessions={s['sessions']} impressions={s['impressions']} clicks={s['clicks']}", flush=True)
    print(f"load average after: {os.getloadavg()}", flush=True)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "clicklog.json").write_text(json.dumps(summary, indent=1, default=float))
    print(f"sessions={len(sessions)} pairs={n_pairs} sessions_per_s={res['ips']['rate']:.1f} "
          f"tau_naive={res['naive']['tau']:.4f} tau_ips={res['ips']['tau']:.4f} tau_oracle={res['oracle']['tau']:.4f} "
          f"ndcg3_ips={res['ips']['ndcg3']:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
