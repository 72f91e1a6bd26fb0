"""FALKON scaling on GPM pairs vs a dense exact kernel ridge regression solver.

Data: the synthetic cluster duels of Hu, Chau et al. 2022 Section 4 (:mod:`bench.synthetic_cluster`), with
``n`` training pairs and 5,000 held-out test pairs; kernel: the generalised preferential kernel k_E
over product RBFs (median-heuristic length-scales × ``--multiplier``), penalty ``--penalty``,
squared loss on ±1 labels (kernel ridge regression) for both solvers, so both estimate the same
function:

* exact: ``α = (K_nn + λ n I)⁻¹ y`` by a dense Cholesky solve (K_nn built block-wise; only for
  ``n ≤ --dense-max`` since it needs n² memory and O(n³) time);
* FALKON (:class:`learners.falkon.Falkon`): ``M = min(--max-centres, c √n)`` uniform Nyström
  centres, Cholesky preconditioner, ``--iters`` CG iterations — O(n M t + M³) = O(n √n) time for
  M ∝ √n, O(block · M + M²) memory.

The script prints per-n timings, the speed-up ratio (exact / FALKON), test ROC AUC of both and the
log-log slope of FALKON time vs n (O(n√n) ⇒ 1.5). It stops growing n once a FALKON fit exceeds
``--time-budget`` seconds.

Usage::

    python bench/falkon_scaling.py --sizes 1000 2000 5000 10000 20000 50000 100000 --device cpu
    python bench/falkon_scaling.py --device cuda --sizes 1000 ... 1000000   # on a GPU

Last line: ``n_ref=<int> speedup=<f> auc_falkon=<f> auc_exact=<f> slope=<f> n_max=<int> device=<str>``
where ``n_ref`` is the largest n that ran with both solvers (20,000 by default).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.synthetic_cluster import make_synthetic_cluster  # noqa: E402
from learners.falkon import Falkon, default_n_centres  # noqa: E402
from learners.metrics import roc_auc  # noqa: E402
from learners.kernels import PairKernel, median_heuristic  # noqa: E402


def _sync(device):
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def exact_krr(kernel, Z, y, lam, Zte, block=2048):
    """Dense exact KRR: K built in row blocks, then Cholesky solve of (K + λ n I) α = y."""
    n = Z.shape[0]
    K = torch.empty((n, n), dtype=Z.dtype, device=Z.device)
    for s in range(0, n, block):
        K[s:s + block] = kernel(Z[s:s + block], Z)
    K.diagonal().add_(lam * n)
    L, info = torch.linalg.cholesky_ex(K)
    if int(info) != 0:
        raise RuntimeError("dense Cholesky failed; raise the penalty")
    del K
    alpha = torch.cholesky_solve(y[:, None], L)[:, 0]
    del L
    out = []
    for s in range(0, Zte.shape[0], block):
        out.append(kernel(Zte[s:s + block], Z) @ alpha)
    return torch.cat(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000])
    p.add_argument("--dense-max", type=int, default=20000)
    p.add_argument("--centre-factor", type=float, default=10.0)
    p.add_argument("--max-centres", type=int, default=5000)
    p.add_argument("--iters", type=int, default=20, help="CG iterations of FALKON")
    p.add_argument("--penalty", type=float, default=1e-6)
    p.add_argument("--multiplier", type=float, default=1.0)
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    p.add_argument("--device", default="cpu")
    p.add_argument("--time-budget", type=float, default=120.0, help="stop growing n after a FALKON fit slower than this (s)")
    p.add_argument("--n-test", type=int, default=5000)
    p.add_argument("--cache-mb", type=float, default=1024.0, help="cache K_nM when it fits in this many MiB (0: recompute blocks)")
    p.add_argument("--block-size", type=int, default=None, help="rows of K_nM formed at once (default: Falkon's, ~64 MB a block)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    dt = torch.float32 if args.dtype == "float32" else torch.float64
    dev = torch.device(args.device)
    n_max = max(args.sizes)
    data = make_synthetic_cluster(n_items=1000, n_matches=n_max + args.n_test, seed=args.seed)
    X = data.item_features
    mu, sd = X.mean(0), X.std(0)
    Xs = (X - mu) / sd
    ls = median_heuristic(Xs, seed=args.seed) * math.sqrt(X.shape[1]) * args.multiplier
    kern = PairKernel("gpm", torch.tensor(ls, dtype=dt, device=dev))
    Zall = torch.tensor(np.c_[Xs[data.left], Xs[data.right]], dtype=dt, device=dev)
    yall = torch.tensor(data.outcome, dtype=dt, device=dev)
    Zte, yte = Zall[n_max:], data.outcome[n_max:]
    gpu = f" ({torch.cuda.get_device_name(dev)}, torch {torch.__version__})" if dev.type == "cuda" else ""
    print(f"# FALKON vs exact KRR on synthetic-cluster pairs; kernel k_E, lambda={args.penalty}, multiplier={args.multiplier}, "
          f"dtype={args.dtype}, device={args.device}{gpu}, torch threads={torch.get_num_threads()}, CG iters={args.iters}, "
          f"centres=min({args.max_centres}, {args.centre_factor:g}*sqrt(n)), K_nM cache {args.cache_mb:g} MiB, "
          f"block {args.block_size or 'default'}")
    # warm-up, untimed: CUDA context, cuBLAS / cuSOLVER handles and kernel loads stay out of the first row
    w = min(512, n_max)
    Falkon(kern, penalty=args.penalty, n_centres=min(64, w), max_iter=2, tol=0.0, dtype=dt, device=dev).fit(Zall[:w], yall[:w])
    exact_krr(kern, Zall[:w], yall[:w], args.penalty, Zte[:w])
    _sync(dev)
    print("# n        M     falkon_s   exact_s    speedup  auc_falkon auc_exact")
    rows = []
    for n in sorted(args.sizes):
        Z, y = Zall[:n], yall[:n]
        M = min(args.max_centres, default_n_centres(n, args.centre_factor, 10**9))
        _sync(dev)
        t0 = time.perf_counter()
        m = Falkon(kern, penalty=args.penalty, n_centres=M, loss="squared", max_iter=args.iters, tol=0.0, dtype=dt,
                   device=dev, seed=args.seed, cache_bytes=int(args.cache_mb * 2**20), block_size=args.block_size).fit(Z, y)
        _sync(dev)
        tf = time.perf_counter() - t0
        auc_f = roc_auc(yte, m.predict(Zte).cpu().numpy())
        te, auc_e = float("nan"), float("nan")
        if n <= args.dense_max:
            try:
                _sync(dev)
                t0 = time.perf_counter()
                ge = exact_krr(kern, Z, y, args.penalty, Zte)
                _sync(dev)
                te = time.perf_counter() - t0
                auc_e = roc_auc(yte, ge.cpu().numpy())
            except (RuntimeError, MemoryError) as exc:  # out of memory
                print(f"# exact solver failed at n={n}: {type(exc).__name__}: {str(exc)[:80]}")
        rows.append((n, M, tf, te, te / tf if te == te else float("nan"), auc_f, auc_e))
        print(f"  {n:<8d} {M:<5d} {tf:9.2f}  {te:9.2f}  {rows[-1][4]:8.2f}  {auc_f:.4f}     {auc_e:.4f}", flush=True)
        if tf > args.time_budget:
            print(f"# stopping: FALKON fit took {tf:.0f}s > --time-budget {args.time_budget:.0f}s")
            break
    ns = np.array([r[0] for r in rows], dtype=float)
    ts = np.array([r[2] for r in rows])
    big = ns >= 5000
    slope = float(np.polyfit(np.log(ns[big]), np.log(ts[big]), 1)[0]) if big.sum() >= 2 else float("nan")
    print(f"# log-log slope of FALKON time vs n (n >= 5000): {slope:.2f}  (O(n sqrt n) => 1.5)")
    both = [r for r in rows if r[3] == r[3]]
    ref = both[-1] if both else rows[-1]
    print(f"n_ref={ref[0]} speedup={ref[4]:.2f} auc_falkon={ref[5]:.4f} auc_exact={ref[6]:.4f} slope={slope:.2f} "
          f"n_max={int(ns.max())} device={args.device}")
    return rows


if __name__ == "__main__":
    main()
