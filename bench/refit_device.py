"""The refitting GPM's refit on each torch device: grid-search refit, fixed-point refit, serving latency.

Data: the synthetic cluster duels of Hu, Chau et al. 2022 Section 4 (:mod:`bench.synthetic_cluster`), a
window of ``w`` training pairs and 5,000 held-out pairs. For each device and window size one
:class:`learners.refit.RefittingGPM` (the refit's default model parameters: a 4 penalties × 3
length-scale multipliers × 4 item constants hold-out search, ≤ 1,000 Nyström centres, float32 on
CUDA and float64 on the CPU, as :meth:`~learners.refit.RefittingGPM.refit` picks them) is filled
with the window and refitted twice: the first refit searches the grid, the second
(``reselect_every=2``) fits at the selected point only. Then the served model's per-call
``margin_one`` latency (median of 200 calls), the same latency while a third (fixed-point) refit
runs in another thread, as the worker runs it (median and 99th percentile), and the
``margin_many`` rate on 5,000 pairs.

CUDA is warmed up with one small refit first (context, cuBLAS/cuSOLVER handles), and every timing
ends with the model's arrays copied to the host (``refit`` installs numpy arrays), so no timing
ends before the device finished.

Usage::

    python bench/refit_device.py --devices cpu cuda --windows 1000 5000

Last line: ``window=<int> search_s_<dev>=<f> fixed_s_<dev>=<f> auc_<dev>=<f> margin_one_us_<dev>=<f> ...
search_speedup=<f>`` for the largest window (speed-up = first device's time / last device's).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.synthetic_cluster import FEATURE_NAMES, make_synthetic_cluster  # noqa: E402
from learners.metrics import roc_auc  # noqa: E402
from learners.refit import RefittingGPM  # noqa: E402


def _learner(device, window, seed):
    return RefittingGPM(FEATURE_NAMES, window_size=window, min_train=min(window, 50), refit_every=None, drift=False,
                        device=device, seed=seed, reselect_every=2)


def run_one(device, XL, XR, y, XLt, XRt, yt, seed=0):
    r = _learner(device, XL.shape[0], seed)
    r.learn_many(XL, XR, y)
    t0 = time.perf_counter()
    info_s = r.refit()
    ts = time.perf_counter() - t0
    t0 = time.perf_counter()
    info_f = r.refit()
    tf = time.perf_counter() - t0
    assert info_s["searched"] and not info_f["searched"] and info_f["device"] == device
    g = r.margin_many(XLt, XRt)
    auc = roc_auc(yt, g)
    names = FEATURE_NAMES
    rows = [(dict(zip(names, a)), dict(zip(names, b))) for a, b in zip(XLt[:200], XRt[:200])]
    lat = []
    for a, b in rows:
        t0 = time.perf_counter()
        r.margin_one(a, b)
        lat.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    r.margin_many(XLt, XRt)
    tm = time.perf_counter() - t0
    busy = _serve_during_refit(r, rows)
    return {"search_s": ts, "fixed_s": tf, "auc": auc, "margin_one_us": 1e6 * float(np.median(lat)),
            "busy_median_us": 1e6 * float(np.median(busy)), "busy_p99_us": 1e6 * float(np.quantile(busy, 0.99)),
            "busy_calls": len(busy), "margin_many_per_s": XLt.shape[0] / tm, "penalty": info_s["penalty"], "multiplier": info_s["multiplier"],
            "constant": info_s["item_constant"], "n_train": info_s["n_train"]}


def _serve_during_refit(r, rows):
    """``margin_one`` latencies (s) while a fixed-point refit runs in another thread, as in the
    worker (refit in an executor thread, events served meanwhile from the current model)."""
    done, err = threading.Event(), []

    def work():
        try:
            r.refit()
        except BaseException as exc:  # noqa: BLE001  (reported below, the serving loop must end)
            err.append(exc)
        finally:
            done.set()

    th = threading.Thread(target=work)
    lat = []
    th.start()
    while not done.is_set() or not lat:
        a, b = rows[len(lat) % len(rows)]
        t0 = time.perf_counter()
        r.margin_one(a, b)
        lat.append(time.perf_counter() - t0)
    th.join()
    if err:
        raise err[0]
    return lat


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--devices", nargs="+", default=["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"])
    p.add_argument("--windows", type=int, nargs="+", default=[1000, 5000])
    p.add_argument("--n-test", type=int, default=5000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    n_max = max(args.windows)
    data = make_synthetic_cluster(n_items=1000, n_matches=n_max + args.n_test, seed=args.seed)
    X = data.item_features
    XL, XR, y = X[data.left], X[data.right], data.outcome
    XLt, XRt, yt = XL[n_max:], XR[n_max:], y[n_max:]
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    print(f"# RefittingGPM refit per device; synthetic-cluster pairs (d = 7), {args.n_test} test pairs; torch {torch.__version__}, "
          f"CPU threads {torch.get_num_threads()}, GPU {gpu}")
    if any(str(d).startswith("cuda") for d in args.devices):
        run_one("cuda", XL[:200], XR[:200], y[:200], XLt[:100], XRt[:100], yt[:100], args.seed)  # warm-up, untimed
    print("# device window  n_train  search_s  fixed_s   auc     margin_one_us  during_refit_us(median/p99, calls)  "
          "margin_many/s  penalty  mult  const")
    res = {}
    for w in sorted(args.windows):
        for dev in args.devices:
            r = res[(dev, w)] = run_one(dev, XL[:w], XR[:w], y[:w], XLt, XRt, yt, args.seed)
            print(f"  {dev:<6} {w:<6d} {r['n_train']:<7d} {r['search_s']:8.2f}  {r['fixed_s']:7.2f}  {r['auc']:.4f}  "
                  f"{r['margin_one_us']:12.0f}  {r['busy_median_us']:9.0f} / {r['busy_p99_us']:8.0f} ({r['busy_calls']:6d})  "
                  f"{r['margin_many_per_s']:13.0f}  {r['penalty']:.0e}  {r['multiplier']:g}  "
                  f"{r['constant']:g}", flush=True)
    w = n_max
    parts = [f"window={w}"]
    for dev in args.devices:
        r = res[(dev, w)]
        parts += [f"search_s_{dev}={r['search_s']:.2f}", f"fixed_s_{dev}={r['fixed_s']:.2f}", f"auc_{dev}={r['auc']:.4f}",
                  f"margin_one_us_{dev}={r['margin_one_us']:.0f}", f"during_refit_p99_us_{dev}={r['busy_p99_us']:.0f}"]
    d0, d1 = args.devices[0], args.devices[-1]
    parts.append(f"search_speedup={res[(d0, w)]['search_s'] / res[(d1, w)]['search_s']:.2f}")
    print(" ".join(parts))
    return res


if __name__ == "__main__":
    main()
