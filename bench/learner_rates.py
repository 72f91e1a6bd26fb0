"""Per learner, event-by-event against batch rates on the Pokémon duels, in one process and one run.

For each of ``capacity`` (2-additive RDA, min-max scaled, the main job's parameters),
``gpm`` (RefittingGPM fitted once on the first duels) and ``linear-bt`` it times, on the same
``--events`` duels:

* **one by one** — ``predict_proba_one`` then ``learn_one`` per duel (the old worker path);
* **batches** of ``--batch`` rows — ``predict_proba_many`` then ``learn_many`` (the new path:
  progressive validation predicts the batch with the state before the batch, then learns it).

and reports the progressive accuracy of both paths (the quality gap of a mini-batch variant
or of predicting with a state up to one batch old). For the GPM the batch *prediction* rate is
the goal (one kernel block against the Nyström centres).

**Refits beside learning** (issue item 6): the batch rate of capacity + GPM learning is measured
again while a GPM refit (window of ``--window`` duels) runs in a thread (torch limited to one
thread), then in a worker process at lower CPU priority (``fit_window`` with ``refit_process_init``, as
the learner worker does);
``refit_thread_rate_ratio`` / ``refit_process_rate_ratio`` = rate during the refit / rate without.

The last line is ``key=value`` pairs: ``<model>_one_per_s``, ``<model>_batch_per_s``,
``<model>_acc_one``, ``<model>_acc_batch`` for each model, ``gpm_predict_batch_per_s``,
the two refit ratios and ``load_average``.

Reproduce: ``OMP_NUM_THREADS=1 python bench/learner_rates.py`` (data in ``$PREFSTREAM_DATA_DIR``).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _learners(ds, models, window: int):
    from stream import models as builtin
    from stream import registry
    from stream.demo import default_model_params
    from stream.settings import Settings

    builtin.register_all()
    params = default_model_params(ds, [m for m in models if m != "linear-bt"],
                                  {"refit_every": 10**9, "window_size": window, "min_train": 200})
    s = Settings.load(None, {"models": models, "feature_names": list(ds.feature_names), "model_params": params},
                      environ={})
    return {m: registry.get_model(m).factory(s, s.params_for(m)) for m in models}


def _acc(p, y) -> float:
    strict = y != 0
    return float(((p[strict] > 0.5) == (y[strict] == 1)).mean())


def one_by_one(lr, dl, dr, y) -> tuple[float, float]:
    ps = np.full(len(y), 0.5)
    t0 = time.perf_counter()
    for i in range(len(y)):
        try:
            ps[i] = lr.predict_proba_one(dl[i], dr[i])[1]
        except Exception:  # noqa: BLE001 - the GPM before its first fit
            pass
        lr.learn_one(dl[i], dr[i], int(y[i]))
    return len(y) / (time.perf_counter() - t0), _acc(ps, y)


def batches(lr, XL, XR, y, b: int) -> tuple[float, float]:
    ps = np.full(len(y), 0.5)
    t0 = time.perf_counter()
    for s in range(0, len(y), b):
        try:
            ps[s:s + b] = lr.predict_proba_many(XL[s:s + b], XR[s:s + b])
        except Exception:  # noqa: BLE001
            pass
        lr.learn_many(XL[s:s + b], XR[s:s + b], y[s:s + b])
    return len(y) / (time.perf_counter() - t0), _acc(ps, y)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=os.environ.get("PREFSTREAM_DATA_DIR", str(REPO.parent / "shared" / "data")))
    ap.add_argument("--events", type=int, default=20000)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--window", type=int, default=3000)
    args = ap.parse_args(argv)

    import torch

    from stream.adapters import load_dataset

    torch.set_num_threads(1)
    ds = load_dataset("pokemon", args.data_dir)
    names = list(ds.feature_names)
    ev = list(ds.to_events(0, args.events + args.window))
    warm, ev = ev[:args.window], ev[args.window:]
    dl = [e["left"]["features"] for e in ev]
    dr = [e["right"]["features"] for e in ev]
    y = np.array([e["outcome"] for e in ev], dtype=np.int64)
    XL = np.array([[d[f] for f in names] for d in dl])
    XR = np.array([[d[f] for f in names] for d in dr])
    WL = np.array([[e["left"]["features"][f] for f in names] for e in warm])
    WR = np.array([[e["right"]["features"][f] for f in names] for e in warm])
    wy = np.array([e["outcome"] for e in warm], dtype=np.int64)
    print(f"pokemon: {len(ev)} duels timed, d={len(names)}, batches of {args.batch}, OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS')}", flush=True)
    models = ["capacity", "gpm", "linear-bt"]
    out = {}
    for m in models:
        pair = []
        for path in ("one", "batch"):
            lr = _learners(ds, [m], args.window)[m]
            lr.learn_many(WL, WR, wy)  # same warm start for both paths (and the GPM's first fit)
            if hasattr(lr, "refit"):
                lr.refit()
            rate, acc = (one_by_one(lr, dl, dr, y) if path == "one" else batches(lr, XL, XR, y, args.batch))
            out[f"{m}_{path}_per_s"], out[f"{m}_acc_{path}"] = rate, acc
            pair.append((rate, acc))
        print(f"{m:10s} one by one {pair[0][0]:10.0f}/s acc {pair[0][1]:.4f} | batches {pair[1][0]:10.0f}/s "
              f"acc {pair[1][1]:.4f} | speed-up {pair[1][0] / pair[0][0]:.1f}x", flush=True)
    gpm = _learners(ds, ["gpm"], args.window)["gpm"]
    gpm.learn_many(WL, WR, wy)
    gpm.refit()
    t0 = time.perf_counter()
    for s in range(0, len(y), args.batch):
        gpm.predict_proba_many(XL[s:s + args.batch], XR[s:s + args.batch])
    out["gpm_predict_batch_per_s"] = len(y) / (time.perf_counter() - t0)
    print(f"gpm predict_proba_many alone: {out['gpm_predict_batch_per_s']:.0f}/s", flush=True)

    # item 6: the learning rate while a refit runs in a thread (as in the worker's executor)
    lrs = _learners(ds, ["capacity", "gpm"], args.window)
    for lr in lrs.values():
        lr.learn_many(WL, WR, wy)
    lrs["gpm"].refit()

    def learn_for(seconds: float) -> float:
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for s in range(0, len(y), args.batch):
                for lr in lrs.values():
                    lr.predict_proba_many(XL[s:s + args.batch], XR[s:s + args.batch])
                    lr.learn_many(XL[s:s + args.batch], XR[s:s + args.batch], y[s:s + args.batch])
                n += min(args.batch, len(y) - s)
                if time.perf_counter() - t0 >= seconds:
                    break
        return n / (time.perf_counter() - t0)

    base = learn_for(3.0)

    def during_refit(mode: str) -> tuple[float, float]:
        """Mean learning rate while one GPM refit runs in a thread or in a worker process."""
        done = threading.Event()
        took = []

        def refit():
            t = time.perf_counter()
            if mode == "thread":
                lrs["gpm"].refit()
            else:
                job = lrs["gpm"].refit_begin()
                lrs["gpm"].refit_finish(job, pool.submit(lrs["gpm"].refit_function, job).result())
            took.append(time.perf_counter() - t)
            done.set()

        th = threading.Thread(target=refit)
        th.start()
        rates = []
        while not done.is_set():
            rates.append(learn_for(0.5))
        th.join()
        return (float(np.mean(rates)) if rates else float("nan")), took[0]

    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    from learners.refit import fit_window, refit_process_init

    pool = ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn"), initializer=refit_process_init)
    pool.submit(fit_window, lrs["gpm"].refit_begin()).result()  # start the worker process (imports torch) once
    lrs["gpm"].refit_abort()
    for mode in ("thread", "process"):
        rate, took = during_refit(mode)
        out[f"refit_{mode}_rate_ratio"] = rate / base
        print(f"capacity+gpm batch learning: {base:.0f}/s without a refit, {rate:.0f}/s during a {took:.1f} s refit "
              f"in a {mode} (ratio {rate / base:.2f})", flush=True)
    pool.shutdown()
    load = "/".join(f"{x:.2f}" for x in os.getloadavg())
    print(" ".join(f"{k.replace('-', '_')}={v:.4f}" if "acc" in k or "ratio" in k else f"{k.replace('-', '_')}={v:.0f}"
                   for k, v in out.items()) + f" load_average={load}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
