"""The main job on a real data set: every duel through the broker, live learning, refits and explanations.

What it does, in one run (reusing :func:`stream.demo.run_demo`):

1. replays the data set (default: the 50,000 Pokémon duels of ``../shared/data/pokemon``, items
   sent once to the compacted item topic, events referring to them by id with inline features)
   through the Kafka broker at ``$PREFSTREAM_BOOTSTRAP`` (the local one is started if none
   answers) into a learner worker (``capacity``: RDA on min-max scaled criteria, 2-additive
   beyond 6 criteria; ``gpm``: GPM first fitted once ``--min-train`` duels are stored, then refitted
   every ``--refit-every`` events on a sliding window, in a worker process)
   and an explainer worker (every method of both models on a ``--sample-rate`` sample);
2. reads the learner's Prometheus endpoint for the progressive (predict-then-learn) ROC AUC
   of each model at the end of the stream, counts explanation records per method from the
   output topic and dead letters from the dead-letter topic;
3. **anchors**, side by side in the same run: the paper's GPM AUC on Pokémon (0.86, Hu, Chau et al. 2022,
   Section 5) and the in-process rate of the same two learners (predict + learn, no broker, no
   refits) on the first ``--anchor-events`` duels — the ceiling of the worker's rate. Both are
   printed as ratios.

4. times ``prefstream run`` (file mode: the same learners and explainers over a JSONL file, no
   Kafka) on the first ``--run-events`` of the same events with the same settings, and prints its
   rate beside the worker's learning rate.

The last line is exactly::

    dataset=<name> events=<int> events_per_s=<f> final_auc_capacity=<f> final_auc_gpm=<f> explanations=<int> methods=<int> p50_explain_ms=<f> dead_letters=<int> replay_events_per_s=<f> learn_events_per_s=<f> run_file_events_per_s=<f> run_over_learn=<f> learn_events_per_learner_cpu_s=<f>

``events_per_s`` (= ``learn_events_per_s``) counts examples learned (by both models) per second
from the start of the replay (less the warm-up wait) to the last example learned;
``replay_events_per_s`` is the replay's own rate (events sent and acknowledged per second, the
warm-up wait excluded); ``p50_explain_ms`` is the median explainer call time over all records;
``run_file_events_per_s`` is ``prefstream run``'s learning rate (its ``learn_seconds``: first record
to last learned, the sampled events explained in the same process included) and ``run_over_learn``
its ratio to the worker's learning rate (the wall rate of the command, start-up and the wait for
the refit in flight included, is printed above the last line);
``learn_events_per_learner_cpu_s`` divides the examples replayed after the warm-up by the CPU
seconds of the learner process (not its refit process) from the end of the warm-up to the last
example learned: what one idle core would give, whatever the load.

Reproduce: ``bash deploy/kafka/start.sh && python bench/mainjob.py --dataset pokemon``
(about 6–10 minutes on 2 shared cores).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

#: GPM hold-out AUC on Pokémon reported in Hu, Chau et al. 2022, Section 5 / Table 2.
PAPER_GPM_AUC = {"pokemon": 0.86}


def in_process_rate(ds, models, params, n: int) -> float:
    """Predict-then-learn examples/s of the same learners in this process (no broker, no refits)."""
    from stream import models as builtin
    from stream import registry
    from stream.settings import Settings

    builtin.register_all()
    s = Settings.load(None, {"models": models, "feature_names": list(ds.feature_names), "model_params": params})
    learners = {m: registry.get_model(m).factory(s, s.params_for(m)) for m in models}
    events = list(ds.to_events(0, n))
    # the GPM predicts only once fitted: fit it once on the first min_train pairs, outside the clock
    for m, lr in learners.items():
        if hasattr(lr, "refit"):
            for e in events[: int(params[m].get("min_train", 200))]:
                lr.learn_one(e["left"]["features"], e["right"]["features"], e["outcome"])
            lr.refit()
    t0 = time.perf_counter()
    for e in events:
        xl, xr = e["left"]["features"], e["right"]["features"]
        for lr in learners.values():
            try:
                lr.predict_proba_one(xl, xr)
            except Exception:  # noqa: BLE001 - not fitted yet
                pass
            lr.learn_one(xl, xr, e["outcome"])
    return len(events) / (time.perf_counter() - t0)


def time_file_mode(ds, models, params, args) -> tuple[float, float]:
    """``prefstream run`` on the first ``args.run_events`` events (same settings, no Kafka):
    ``(learning rate, wall rate)`` in events per second. The learning rate is the run's own
    ``learn_seconds`` (first record to last learned, the sampled events explained inline included),
    the span the worker's learning rate is measured over; the wall rate adds the command's start
    and its wait for the refit in flight at the end (a background GPM fit)."""
    import subprocess
    import tempfile

    import orjson

    from stream.demo.config import write_settings_toml

    tmp = Path(tempfile.mkdtemp(prefix="prefstream-mainjob-run-"))
    events = tmp / "events.jsonl"
    with open(events, "wb") as fh:
        for ev in ds.to_events(0, args.run_events):
            fh.write(orjson.dumps(ev) + b"\n")
    cfg = write_settings_toml(tmp / "run.toml", {"models": models, "feature_names": list(ds.feature_names),
                                                  "model_params": params, "explain_sample_rate": args.sample_rate})
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "stream", "run", "-i", str(events), "-o", str(tmp / "out.jsonl"),
                          "--config", str(cfg), "-q"], cwd=REPO, capture_output=True, text=True,
                         env=dict(os.environ, OMP_NUM_THREADS="1"))
    wall = time.perf_counter() - t
    if out.returncode != 0:
        print(f"prefstream run failed: {out.stderr[-2000:]}", file=sys.stderr)
        return float("nan"), float("nan")
    learn_s = float(json.loads(out.stdout)["learn_seconds"])
    return args.run_events / max(learn_s, 1e-9), args.run_events / wall


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="pokemon")
    ap.add_argument("--data-dir", default=os.environ.get("PREFSTREAM_DATA_DIR", str(REPO.parent / "shared" / "data")))
    ap.add_argument("--max-events", type=int, default=None)
    ap.add_argument("--sample-rate", type=float, default=0.002, help="fraction of events explained")
    ap.add_argument("--refit-every", type=int, default=5000)
    ap.add_argument("--window-size", type=int, default=3000)
    # the first fit waits for a full window: the batched worker outruns the refits (each takes tens
    # of seconds here), so a first model fitted on 1,000 duels would score most of the stream
    ap.add_argument("--min-train", type=int, default=3000)
    ap.add_argument("--anchor-events", type=int, default=3000)
    ap.add_argument("--report-dir", default="/tmp/prefstream-mainjob")
    ap.add_argument("--rate", type=float, default=None)
    ap.add_argument("--run-events", type=int, default=10_000, help="events timed through `prefstream run` (0: skip)")
    args = ap.parse_args(argv)

    from stream.adapters import load_dataset
    from stream.demo import default_model_params, run_demo

    ds = load_dataset(args.dataset, args.data_dir)
    models = ["capacity", "gpm"]
    gpm = {"refit_every": args.refit_every, "window_size": args.window_size, "min_train": args.min_train}
    params = default_model_params(ds, models, gpm)
    print(f"model parameters: {json.dumps(params)}", flush=True)

    anchor = in_process_rate(ds, models, params, args.anchor_events)
    print(f"anchor: in-process predict+learn of {models} on {args.anchor_events} duels: {anchor:.1f} examples/s", flush=True)

    s = run_demo(args.dataset, args.data_dir, rate=args.rate, max_events=args.max_events,
                 explain_sample_rate=args.sample_rate, report_dir=args.report_dir, models=models, gpm_params=gpm,
                 click_every=None, snapshot_every_events=2000, progress=sys.stderr.isatty(), verbose=True,
                 learn_timeout_s=1500, explain_timeout_s=120, quiet_period_s=10, dataset_obj=ds)
    replay_rate = s["events_sent"] / max(s["replay_s"], 1e-9)
    learn_rate = s["events_per_s"]
    per_cpu = s.get("learner_cpu_examples", 0) / s["learner_cpu_s"] if s.get("learner_cpu_s", 0) > 0 else float("nan")
    print(f"learner process: {s.get('learner_cpu_s', float('nan')):.1f} CPU-seconds for the "
          f"{s.get('learner_cpu_examples', 0)} examples after the warm-up (its refit process apart): "
          f"{per_cpu:.1f} examples per CPU-second of the learner", flush=True)
    print(f"replay: {s['events_sent']} events in {s['replay_s']} s = {replay_rate:.1f} events/s; learning "
          f"(replay start to last learned, warm-up wait excluded): {learn_rate:.1f} examples/s; load {os.getloadavg()}",
          flush=True)
    run_rate, run_wall = time_file_mode(ds, models, params, args) if args.run_events else (float("nan"),) * 2
    print(f"prefstream run (file mode) on {args.run_events} of the same events: learning {run_rate:.1f} events/s "
          f"(explaining its sample inline), {run_rate / learn_rate:.3f} of the worker's learning rate; "
          f"{run_wall:.1f} events/s over the command's wall time (start-up and the wait for the last refit "
          f"included); load {os.getloadavg()}", flush=True)
    auc_c = s["final"]["capacity"]["roc_auc"]
    auc_g = s["final"]["gpm"]["roc_auc"]
    paper = PAPER_GPM_AUC.get(args.dataset)
    print("", flush=True)
    print(f"worker rate {s['events_per_s']:.1f} examples/s vs in-process {anchor:.1f} examples/s: "
          f"ratio {s['events_per_s'] / anchor:.3f}")
    if paper is not None and auc_g is not None:
        print(f"GPM progressive ROC AUC {auc_g:.3f} vs Hu, Chau et al. 2022 hold-out AUC {paper:.2f}: ratio {auc_g / paper:.3f}")
    for m, rs in s["refits"].items():
        print(f"{m} refits: {len(rs)}, durations {[r['duration_s'] for r in rs]} s")
    # explained / requested per model and method (requested = sample rate × the events it could explain,
    # those after its model's first snapshot; the explainer's counters), and what was shed
    by = s.get("explain_by_method", {})
    frac = {k: v["explained"] / max(args.sample_rate * v["eligible"], 1.0) for k, v in by.items()}
    print("explained of the requested sample per model/method: "
          + ", ".join(f"{k} {v['explained']}/{args.sample_rate * v['eligible']:.0f} = {frac[k]:.3f}" for k, v in by.items())
          + f"; worst {min(frac.values(), default=float('nan')):.3f}; lag p99 (s, bucket bound) "
          f"{s.get('explanation_lag_p99_s')}; shed {s.get('explanations_shed')}", flush=True)
    print(f"dataset={args.dataset} events={s['events_sent']} events_per_s={s['events_per_s']:.1f} "
          f"final_auc_capacity={(auc_c if auc_c is not None else float('nan')):.4f} "
          f"final_auc_gpm={(auc_g if auc_g is not None else float('nan')):.4f} "
          f"explanations={s['explanations_total']} methods={s['explanation_methods']} "
          f"p50_explain_ms={s['p50_explain_ms']:.2f} dead_letters={s['dead_letters']} "
          f"replay_events_per_s={replay_rate:.1f} learn_events_per_s={learn_rate:.1f} "
          f"run_file_events_per_s={run_rate:.1f} run_over_learn={run_rate / learn_rate:.3f} "
          f"learn_events_per_learner_cpu_s={per_cpu:.1f}", flush=True)
    return 0 if s["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
