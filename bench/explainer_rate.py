"""Fully explained events per second on Pokémon: one call per event (the anchor) vs one batch per call (issue 23).

Pokémon (d = 26 features; the 18 type indicators one player: 9 players). The capacity model and the
GPM are learned on the first ``--train`` duels (the GPM fitted once, one torch thread: deterministic),
then the same ``--events`` held-out duels are explained by all six methods — capacity-shapley,
capacity-interaction, sharp-rank, sharp-pairwise, distributional-bernoulli (capacity and GPM) and
pref-shap: seven explainer calls make one *fully explained event*. Side by side in one run:

* **per event (the anchor)**: ``fn(learner, [event], ctx)`` for every event and method, a fresh
  context per call (the explainer worker's path before batching), all seeded alike so that ShaRP's
  per-call reference draw is the batch's;
* **batched**: micro-batches of ``--batch`` events; every method takes the micro-batch in calls of
  at most ``fn.max_batch`` events (``fn.budget_s`` bounds a call; a call that stops early is counted
  and its unfinished events are explained by the next call, so nothing is lost);
* ``max_abs_diff_exact``: the largest |batched − per-event| over values, base values and predictions of
  every method (all exact at the default budgets on Pokémon).

Rates are per core: events / thread CPU time (torch on one thread, so the work is the calling
thread's), which the other jobs on a shared machine disturb far less than wall time; the wall
times are printed beside them. Both paths run after one warm-up call per method (kernel blocks of the GPM snapshot filled, as the
worker does once per snapshot). Per-method rates of both paths are printed: the profile of where the
time goes.

``--broker`` adds the stream part: ``--broker-events`` (≥ 50,000) Pokémon events replayed through the
broker (:func:`stream.demo.run_demo`: items on the compacted topic; a warm-up of 2 · min_train events
waits for the GPM's one fit, then the stream is paced at ``--rate`` events/s, 3,500 by default) into the
learner worker and ``python -m stream worker explain`` beside it, with ``explain_sample_rate =
--sample-rate`` (0.01), every method of both models. From the explainer's counters, per (model,
method): ``achieved`` = explained / sampled, where sampled = the eligible events (those after the model's
first snapshot) that the hash sample takes (the replayed ids hashed as the explainer does: 430 of 44,000
at 1 % on Pokémon, not 440 — the nominal share explained / (sample rate × eligible) is printed beside it,
``of rate``); ``achieved_fraction`` is the worst method's; ``explained_events_per_s`` = the worst
method's explained events per second of stream (explained × rate / eligible: the fully explained events/s
the explainer sustained, at most the realised sample × rate — 97.7/s at 10,000 events/s on Pokémon, so
100 needs ``--rate`` ≥ 10,240); ``lag_p99_s`` the largest p99 of the per-method lag histograms (event arrival →
record delivered; the upper bound of the bucket, so 5.0 means "≤ 5 s"); ``shed`` the skipped work items
(all reasons).

Last line: ``explained_events_per_s=… per_event_events_per_s=… batched_over_per_event=… achieved_fraction=…
shed=… lag_p99_s=… max_abs_diff_exact=…`` (in-process only: ``explained_events_per_s`` is the batched
in-process rate and ``achieved_fraction``/``shed``/``lag_p99_s`` are ``nan``).

Reproduce: ``OMP_NUM_THREADS=1 python bench/explainer_rate.py [--events 128] [--broker]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

LINES: list[str] = []


def say(line: str = "") -> None:
    print(line, flush=True)
    LINES.append(line)


#: (model, method): the six methods of the issue on Pokémon's two models, seven calls per event
METHODS = (("capacity", "capacity-shapley"), ("capacity", "capacity-interaction"), ("capacity", "sharp-rank"),
           ("capacity", "sharp-pairwise"), ("capacity", "distributional-bernoulli"), ("gpm", "pref-shap"),
           ("gpm", "distributional-bernoulli"))


def _ctx(model, train, cat, seed):
    from stream import registry

    return registry.ExplainContext(model_name=model, model_version=1, background=train[:256], catalog=cat,
                                   rng=np.random.default_rng(seed))


def _arrays(e):
    return (np.atleast_2d(np.asarray(e.values, float)),
            np.asarray(e.base_values, float).reshape(-1),
            None if e.prediction is None else np.asarray(e.prediction, float).reshape(-1))


def _diff(one: list, batch) -> float:
    """max |batched − per-event| over values, base values and predictions."""
    v1 = np.concatenate([_arrays(o)[0] for o in one])
    vb, bb, pb = _arrays(batch)
    b1 = np.concatenate([_arrays(o)[1] for o in one])
    out = max(np.abs(vb - v1).max(), np.abs(np.broadcast_to(bb, b1.shape) - b1).max())
    if pb is not None:
        p1 = np.concatenate([_arrays(o)[2] for o in one])
        out = max(out, np.abs(np.broadcast_to(pb, p1.shape) - p1).max())
    return float(out)


def batched_call(fn, lr, events, ctx_of):
    """Explain ``events`` in calls of at most ``fn.max_batch``; a call that stops on ``fn.budget_s``
    leaves its unfinished events to the next call. Returns (explanations, calls, early stops)."""
    from explainers import Explanation

    parts, calls, early, done = [], 0, 0, 0
    cap = int(getattr(fn, "max_batch", len(events)))
    while done < len(events):
        e = fn(lr, events[done:done + cap], ctx_of())
        calls += 1
        early += int("unfinished" in e.extra)
        parts.append(e)
        done += e.n_instances
    return Explanation.stack(parts), calls, early


def in_process(args) -> dict:
    import torch

    import stream
    from explain_wide import fit, load
    from stream import registry

    torch.set_num_threads(1)                       # the GPM fit and the explainers: thread-count independent
    stream.load_builtins()
    ds, names, cnames, train, events, cat = load("pokemon", args.train, args.events + 1)
    warm, events = events[0], events[1:]
    learners = {}
    for m in ("capacity", "gpm"):
        t0 = time.perf_counter()
        learners[m] = fit(ds, names, cnames, m, train)
        say(f"{m} fitted on {len(train)} duels in {time.perf_counter() - t0:.1f} s")
    fns = {(m, k): registry.explainers_for(m)[k] for m, k in METHODS}
    for (m, k), fn in fns.items():                 # warm-up: kernel blocks of the snapshot, imports
        fn(learners[m], [warm], _ctx(m, train, cat, 0))
    n = len(events)
    load0 = os.getloadavg()
    from stream.workers.heap import settle_heap

    settle_heap()                                  # as the worker does (stream.workers.heap), before each path
    # ---- anchor: one call per event and method (events outer, as a worker explains an event by every method)
    one = {key: [] for key in fns}
    t_one = {key: 0.0 for key in fns}
    t0 = time.perf_counter()
    for ev in events:
        for (m, k), fn in fns.items():
            c0 = time.thread_time()
            one[(m, k)].append(fn(learners[m], [ev], _ctx(m, train, cat, 0)))
            t_one[(m, k)] += time.thread_time() - c0
    wall_one = time.perf_counter() - t0
    per_event_s = sum(t_one.values())
    # ---- batched: micro-batches, every method on the whole micro-batch in calls of at most max_batch.
    # The GPM explainer keeps its player-table columns per duel (the methods of one model share them): forget
    # the anchor's, so that the batched path computes its own (the kernel blocks of the fit stay, as in the worker)
    from stream.plugins.gpm import _prefshap_for

    _prefshap_for(learners["gpm"], _ctx("gpm", train, cat, 0))[1].__dict__.pop("_columns", None)
    settle_heap()
    got = {key: [] for key in fns}
    t_b = {key: 0.0 for key in fns}
    calls = {key: 0 for key in fns}
    early = {key: 0 for key in fns}
    t0 = time.perf_counter()
    for s in range(0, n, args.batch):
        mb = events[s:s + args.batch]
        for (m, k), fn in fns.items():
            c0 = time.thread_time()
            e, c, x = batched_call(fn, learners[m], mb, lambda: _ctx(m, train, cat, 0))
            t_b[(m, k)] += time.thread_time() - c0
            got[(m, k)].append(e)
            calls[(m, k)] += c
            early[(m, k)] += x
    wall_b = time.perf_counter() - t0
    batched_s = sum(t_b.values())
    load1 = os.getloadavg()
    from explainers import Explanation

    diffs = {key: _diff(one[key], Explanation.stack(got[key])) for key in fns}
    say(f"\n{n} events, micro-batches of {args.batch}; load average {load0[0]:.2f} at start, {load1[0]:.2f} at end; "
        f"rates per core = events / thread CPU time (wall: per event {wall_one:.0f} s, batched {wall_b:.0f} s)")
    say(f"{'model':9s} {'method':26s} {'per event /s':>12s} {'batched /s':>11s} {'ratio':>6s} {'calls':>5s} "
          f"{'early':>5s} {'max_batch':>9s} {'budget_s':>8s} {'max |diff|':>10s} {'share of batched time':>21s}")
    for (m, k), fn in fns.items():
        say(f"{m:9s} {k:26s} {n / t_one[(m, k)]:12.1f} {n / t_b[(m, k)]:11.1f} {t_one[(m, k)] / t_b[(m, k)]:6.2f} "
              f"{calls[(m, k)]:5d} {early[(m, k)]:5d} {fn.max_batch:9d} {fn.budget_s:8.1f} {diffs[(m, k)]:10.1e} "
              f"{t_b[(m, k)] / batched_s:21.1%}")
    r = {"per_event_events_per_s": n / per_event_s, "batched_events_per_s": n / batched_s,
         "max_abs_diff_exact": max(diffs.values()), "load": f"{load0[0]:.2f}/{load1[0]:.2f}"}
    say(f"\nfully explained events/s on one core (CPU time): per event {r['per_event_events_per_s']:.1f}, batched "
          f"{r['batched_events_per_s']:.1f} (ratio {r['batched_events_per_s'] / r['per_event_events_per_s']:.2f}); "
          f"100 fully explained events/s (1 % of 10,000 events/s) is {100 / r['batched_events_per_s']:.1f}x away")
    return r


def broker(args) -> dict:
    """The stream part through the broker (module notes); whatever ``python -m stream worker explain`` is."""
    from stream.adapters import load_dataset
    from stream.demo import run_demo

    ds = load_dataset("pokemon", args.data_dir)
    models = ["capacity", "gpm"]
    # one GPM fit (on the first 3000 duels, or half of a short smoke run): the explainer explains one snapshot;
    # the demo's warm-up replays 2 · min_train events and waits for that fit before the paced stream
    gpm = {"refit_every": 10 ** 9, "window_size": 3000, "min_train": min(args.min_train, args.broker_events // 4)}
    t0 = time.perf_counter()
    s = run_demo("pokemon", args.data_dir, max_events=args.broker_events, explain_sample_rate=args.sample_rate,
                 rate=args.rate or None, report_dir=args.report_dir, models=models, gpm_params=gpm, click_every=None,
                 snapshot_every_events=5000, progress=False, verbose=True, learn_timeout_s=1500,
                 explain_timeout_s=600, quiet_period_s=10, warmup_timeout_s=600, dataset_obj=ds)
    wall = time.perf_counter() - t0
    by = s.get("explain_by_method", {})
    # per (model, method): explained / sampled, sampled = the events the hash sample takes among those it could
    # explain (eligible: after its model's first snapshot, the explainer's counter) — the replayed events' last
    # ``eligible`` ids hashed as the explainer does. The nominal share (sample rate × eligible) is beside it: the
    # hash sample's realised share of a finite stream is not exactly the rate (430 of 44,000 at 1 %, not 440)
    ids = [e["event_id"] for e in ds.to_events(0, args.broker_events)]
    sampled = {f"{m}/{k}": realised_sample(ids, by.get(f"{m}/{k}", {}).get("eligible", 0), args.sample_rate)
               for m, k in METHODS}
    frac = {key: by.get(key, {}).get("explained", 0) / max(sampled[key], 1) for key in sampled}
    nominal = {f"{m}/{k}": by.get(f"{m}/{k}", {}).get("explained", 0) /
               max(args.sample_rate * by.get(f"{m}/{k}", {}).get("eligible", 0), 1.0) for m, k in METHODS}
    worst = min(frac.values())
    lag = max(s.get("explanation_lag_p99_s", {}).values(), default=float("nan"))
    shed = sum(s.get("explanations_skipped", {}).values())
    rate = args.rate or s["events_per_s"]
    say(f"\nbroker: {s['events_sent']} events at {rate:.0f} events/s (learned at {s['events_per_s']:.0f}/s), "
        f"sample rate {args.sample_rate}, wall {wall:.0f} s; refits {s.get('refits')}")
    say(f"{'model/method':36s} {'eligible':>8s} {'sampled':>7s} {'explained':>9s} {'achieved':>8s} {'of rate':>7s} "
        f"{'lag p99 (s)':>11s}")
    for m, k in METHODS:
        e = by.get(f"{m}/{k}", {})
        say(f"{m + '/' + k:36s} {e.get('eligible', 0):8d} {sampled[f'{m}/{k}']:7d} {e.get('explained', 0):9d} "
            f"{frac[f'{m}/{k}']:8.3f} {nominal[f'{m}/{k}']:7.3f} "
            f"{s.get('explanation_lag_p99_s', {}).get(k, float('nan')):11.2f}")
    say(f"shed {s.get('explanations_shed')}; skipped {s.get('explanations_skipped')}")
    # fully explained events/s the explainer sustained: the worst method's explained events per second of the
    # stream (eligible / rate seconds); at most the sample's realised share × the rate (97.7/s at 10,000 events/s
    # on Pokémon's ids at 1 %), whatever the explainer does
    per_s = min(by.get(key, {}).get("explained", 0) * rate / max(by.get(key, {}).get("eligible", 0), 1) for key in frac)
    offered = min(sampled[key] * rate / max(by.get(key, {}).get("eligible", 0), 1) for key in sampled)
    say(f"fully explained events/s {per_s:.2f} of the {offered:.2f}/s the hash sample offers at {rate:.0f} events/s "
        f"(nominal {args.sample_rate * rate:.0f}/s)")
    return {"explained_events_per_s": per_s, "achieved_fraction": worst, "shed": shed, "lag_p99_s": lag}


def realised_sample(ids: list, eligible: int, rate: float) -> int:
    """How many of the last ``eligible`` of ``ids`` the explainer's hash sample takes at ``rate``
    (:meth:`stream.workers.explainer.ExplainerCore.sampled`)."""
    from stream.workers._snapshot import event_hash

    return sum(event_hash(str(i)) < rate * 2.0**64 for i in ids[len(ids) - min(int(eligible), len(ids)):])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=128)
    ap.add_argument("--train", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=64, help="events per micro-batch of the batched path")
    ap.add_argument("--broker", action="store_true", help="also run the workers through the broker")
    ap.add_argument("--broker-events", type=int, default=50_000)
    ap.add_argument("--sample-rate", type=float, default=0.01)
    ap.add_argument("--min-train", type=int, default=3000, help="duels of the broker part's one GPM fit")
    ap.add_argument("--no-in-process", action="store_true", help="only the broker part (a smoke run)")
    ap.add_argument("--rate", type=float, default=3500.0, help="events/s of the broker stream (0: as fast as it goes)")
    ap.add_argument("--data-dir", default=os.environ.get("PREFSTREAM_DATA_DIR", str(REPO.parent / "shared" / "data")))
    ap.add_argument("--report-dir", default="/tmp/prefstream-explainer-rate")
    ap.add_argument("--out", default=None, help="write explainer_rate.txt here (e.g. bench/results)")
    args = ap.parse_args(argv)
    os.environ.setdefault("PREFSTREAM_DATA_DIR", args.data_dir)
    r = in_process(args) if not args.no_in_process else {"per_event_events_per_s": float("nan"), "load": "-",
                                                          "batched_events_per_s": float("nan"),
                                                          "max_abs_diff_exact": float("nan")}
    b = broker(args) if args.broker else {}
    last = (f"explained_events_per_s={b.get('explained_events_per_s', r['batched_events_per_s']):.2f} "
            f"per_event_events_per_s={r['per_event_events_per_s']:.2f} "
            f"batched_over_per_event={r['batched_events_per_s'] / r['per_event_events_per_s']:.2f} "
            f"achieved_fraction={b.get('achieved_fraction', float('nan')):.3f} shed={b.get('shed', float('nan'))} "
            f"lag_p99_s={b.get('lag_p99_s', float('nan')):.2f} max_abs_diff_exact={r['max_abs_diff_exact']:.1e}")
    say(f"load average {r['load']} (start/end of the in-process part)")
    say(last)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        head = ["## Explainer rate: batched vs one call per event (bench/explainer_rate.py, issue 23)", "",
                f"Reproduce: `OMP_NUM_THREADS=1 python bench/explainer_rate.py --events {args.events} --batch {args.batch}"
                f"{' --broker' if args.broker else ''} --out bench/results`", "", "```"]
        if not (out / "explainer_rate.md").exists():     # the results page is edited by hand (dated sections)
            (out / "explainer_rate.md").write_text("\n".join(head + LINES + ["```"]) + "\n", encoding="utf-8")
        (out / "explainer_rate.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
