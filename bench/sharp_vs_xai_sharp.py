"""ShaRP (prefstream) vs xai-sharp 0.1.1, exact rank QoI, side by side in one run.

Reproduce::

    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python bench/sharp_vs_xai_sharp.py --dataset the2020 --items 50

Both libraries explain the same K items (spread evenly over the ranking) of the same catalog with
the same scoring callable, exactly (every reference row, every coalition): xai-sharp with
``sample_size=n, replace=False, cache=False``, no coalition cap, ``n_jobs=1``; prefstream with its
xai-sharp convention mapping (``ties="max", exclude_item=False``, docs/sharp.md). Reported:
``max_abs_diff`` between the two, milliseconds per explained item for each and their ratio.
Times are CPU seconds of this process (``time.process_time``; prefstream best of 3 runs, xai-sharp one
run), single-threaded. Then Section 8.3.2's approximations (reference sample size m, maximum coalition size c) are run
with prefstream against its own exact values: time, fidelity (Eq. 9) and Kendall agreement.
``fidelity`` on the last line is Eq. 9 of the m = 20 sample approximation (prefstream default,
anchored at the exact mean rank — see docs/sharp.md) on the K items.

``--record`` appends one row per run to ``bench/results/sharp_history.tsv`` (tracked; columns
``commit date load1 dataset n items ms_per_item xai_sharp_ms_per_item ratio default_ms_per_item``; the last is
the Eq. 3 default — v removed, ties=min, tie tolerance — on an explainer built once), so a
regression of the exact rank QoI shows against earlier commits; the ratio to xai-sharp, measured in the
same run, is the figure to compare on a loaded machine (``load1`` = 1-minute load average).

Last line::

    dataset=<name> n=<int> d=<int> qoi=rank max_abs_diff=<f> ms_per_item=<f> xai_sharp_ms_per_item=<f> speedup=<f> fidelity=<f>
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from explainers.sharp import SharpExplainer  # noqa: E402
from explainers.sharp_metrics import method_agreement, method_fidelity  # noqa: E402
from stream.adapters.rankings import load_ranked_catalog, make_synthetic  # noqa: E402

RESULTS = ROOT / "bench" / "results"
HISTORY = RESULTS / "sharp_history.tsv"
HISTORY_COLUMNS = ("commit", "date", "load1", "dataset", "n", "items", "ms_per_item", "xai_sharp_ms_per_item",
                   "ratio", "default_ms_per_item")


def current_commit() -> str:
    """Short hash of the checkout's HEAD, ``+dirty`` when tracked files (other than the history) differ."""
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", "HEAD", "--", ".",
                                f":!{HISTORY.relative_to(ROOT)}"], capture_output=True).returncode
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def record_row(path: Path, row: dict) -> None:
    """Append ``row`` (keys :data:`HISTORY_COLUMNS`) to the TSV at ``path``, writing the header first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists() or path.stat().st_size == 0
    with open(path, "a", encoding="utf-8") as fh:
        if new:
            fh.write("\t".join(HISTORY_COLUMNS) + "\n")
        fh.write("\t".join(str(row[c]) for c in HISTORY_COLUMNS) + "\n")


def load(name: str, data_dir: str | None):
    if name == "synthetic":
        return make_synthetic("S2", n=2000, seed=0)          # Appendix A: 2,000 items, 3 correlated normals
    return load_ranked_catalog(name, data_dir)


def pick_items(cat, K: int) -> np.ndarray:
    order = cat.order()
    K = min(K, cat.n)
    return order[np.unique(np.linspace(0, cat.n - 1, K).round().astype(int))]


def xai_sharp_rank(cat, items, qoi="rank", pairs=None):
    from sharp import ShaRP

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.process_time()
        s = ShaRP(qoi={"rank": "rank", "score": "rank_score"}[qoi], target_function=cat.score_fn, measure="shapley",
                  sample_size=cat.n, replace=False, cache=False, random_state=0, n_jobs=1)
        s.fit(cat.X)
        if pairs is None:
            vals = np.array([s.individual(int(i), cat.X) for i in items], dtype=float)
        else:
            vals = np.array([s.pairwise(cat.X[a], cat.X[b]) for a, b in pairs], dtype=float)
        dt = time.process_time() - t0
    return vals, dt


def timed(fn, repeat: int = 3):
    """Best of ``repeat`` runs, in CPU seconds of this process (both libraries are single-threaded
    here; CPU time is far less sensitive than wall time to other jobs sharing the machine)."""
    best, out = np.inf, None
    for _ in range(repeat):
        t0 = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t0)
    return out, best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", choices=["the2020", "csrankings", "atp", "synthetic"], default="the2020")
    ap.add_argument("--items", type=int, default=50, help="K items explained by both libraries")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--record", nargs="?", const=str(HISTORY), default=None, metavar="TSV",
                    help=f"append this run's exact-rank row to TSV (default {HISTORY.relative_to(ROOT)})")
    args = ap.parse_args(argv)

    cat = load(args.dataset, args.data_dir)
    n, d = cat.X.shape
    items = pick_items(cat, args.items)
    K = items.size
    print(f"# {cat.name}: n={n} d={d} features={cat.feature_names} K={K} items; scorer {cat.meta.get('scorer', cat.score_fn)}")

    # --- exact rank QoI, both libraries (ours: build the explainer = score + sort the catalog, then explain)
    ours, t_ours = timed(lambda: SharpExplainer(cat.score_fn, cat.X, ties="max", tie_rtol=0).explain(items, "rank", exclude_item=False))
    ref, t_xai = xai_sharp_rank(cat, items)
    diff = float(np.abs(ours.values - ref).max())
    ms, xms = 1e3 * t_ours / K, 1e3 * t_xai / K
    print(f"exact rank  prefstream {ms:.3f} ms/item  xai-sharp {xms:.2f} ms/item  speedup {xms / ms:.1f}x  "
          f"max|diff| {diff:.3g}  additivity {ours.additivity_error().max():.2g}")

    ex = SharpExplainer(cat.score_fn, cat.X, feature_names=cat.feature_names, item_ids=cat.item_ids)
    exact, t_def = timed(lambda: ex.explain(items, "rank"))
    print(f"exact rank (Eq. 3 default: v removed, ties=min)  {1e3 * t_def / K:.3f} ms/item  "
          f"fidelity {method_fidelity(exact):.6f}")

    # --- score QoI and pairwise, smaller side runs
    K2 = min(K, 20)
    so, t_so = timed(lambda: SharpExplainer(cat.score_fn, cat.X).explain(items[:K2], "score", exclude_item=False))
    sr, t_sx = xai_sharp_rank(cat, items[:K2], qoi="score")
    print(f"exact score prefstream {1e3 * t_so / K2:.3f} ms/item  xai-sharp {1e3 * t_sx / K2:.2f} ms/item  "
          f"speedup {t_sx / t_so:.1f}x  max|diff| {np.abs(so.values - sr).max():.3g}")
    pairs = np.column_stack([items[:K2], np.roll(items[:K2], 1)])
    po, t_po = timed(lambda: SharpExplainer(cat.score_fn, cat.X, ties="max", tie_rtol=0).explain_pairwise(pairs, "rank"))
    pr, t_px = xai_sharp_rank(cat, None, pairs=pairs)
    print(f"pairwise    prefstream {1e3 * t_po / K2:.3f} ms/pair  xai-sharp {1e3 * t_px / K2:.2f} ms/pair  "
          f"speedup {t_px / t_po:.1f}x  max|diff| {np.abs(po.values - pr).max():.3g}  (both incl. setup)")
    built, t_build = timed(lambda: SharpExplainer(cat.score_fn, cat.X, ties="max", tie_rtol=0))
    _, t_pw = timed(lambda: built.explain_pairwise(pairs, "rank"))
    _, t_it = timed(lambda: built.explain(items, "rank", exclude_item=False))
    print(f"steady state (explainer built once per model snapshot: {1e3 * t_build:.2f} ms): "
          f"rank {1e3 * t_it / K:.3f} ms/item, pairwise {1e3 * t_pw / K2:.4f} ms/pair")

    # --- approximations (Section 8.3.2) against our exact values
    print("approximation  m      c  ms/item  speedup_vs_exact  fidelity  fidelity_unanchored  kendall_vs_exact  mean|err|")
    fid20 = None
    t_exact_item = t_def / K
    for m in [20, 50, 100, 200]:
        if m >= n - 1:
            continue
        a, t_a = timed(lambda: ex.explain(items, "rank", sample_size=m, seed=0))
        u = ex.explain(items, "rank", sample_size=m, seed=0, anchor=False)
        f_a, f_u = method_fidelity(a), method_fidelity(u)
        if m == 20:
            fid20 = f_a
        print(f"sample       {m:5d} {d - 1:3d}  {1e3 * t_a / K:7.3f}  {t_exact_item / (t_a / K):8.1f}  "
              f"{f_a:.4f}  {f_u:.4f}  {method_agreement(a, exact, 'kendall'):.3f}  {np.abs(a.values - exact.values).mean():.3g}")
    for c in range(1, d - 1):
        a, t_a = timed(lambda: ex.explain(items, "rank", max_coalition_size=c))
        print(f"coalition    {n - 1:5d} {c:3d}  {1e3 * t_a / K:7.3f}  {t_exact_item / (t_a / K):8.1f}  "
              f"{method_fidelity(a):.4f}  {'-':>6}  {method_agreement(a, exact, 'kendall'):.3f}  "
              f"{np.abs(a.values - exact.values).mean():.3g}")

    if not args.no_plots:
        from explainers.sharp_plots import pairwise_bars, strata_boxplot, waterfall

        RESULTS.mkdir(parents=True, exist_ok=True)
        every = ex.explain(np.arange(n) if n <= 2500 else items, "rank")
        target = "Texas A&M University" if "Texas A&M University" in cat.item_ids else cat.item_ids[items[K // 3]]
        w = ex.explain([cat.item_ids.index(target)], "rank")
        waterfall(w, 0, path=RESULTS / f"sharp_{args.dataset}_waterfall.png")
        strata_boxplot(every, path=RESULTS / f"sharp_{args.dataset}_strata.png")
        top = cat.order()
        pair = ex.explain_pairwise([(top[4], top[5])], "rank")          # Figure 4c: ranks 5 vs 6
        pairwise_bars(pair, 0, path=RESULTS / f"sharp_{args.dataset}_pair.png")
        print(f"plots: bench/results/sharp_{args.dataset}_waterfall.png ({target}), "
              f"bench/results/sharp_{args.dataset}_strata.png ({every.n_instances} items), "
              f"bench/results/sharp_{args.dataset}_pair.png ({pair.instance_ids[0]}: {pair.values[0].round(2).tolist()})")

    if args.record:
        row = dict(commit=current_commit(), date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
                   load1=f"{os.getloadavg()[0]:.2f}", dataset=args.dataset, n=n, items=K, ms_per_item=f"{ms:.4f}",
                   xai_sharp_ms_per_item=f"{xms:.3f}", ratio=f"{xms / ms:.2f}", default_ms_per_item=f"{1e3 * t_def / K:.4f}")
        record_row(Path(args.record), row)
        print(f"recorded: {args.record}")
    print(f"dataset={args.dataset} n={n} d={d} qoi=rank max_abs_diff={diff:.3g} ms_per_item={ms:.4f} "
          f"xai_sharp_ms_per_item={xms:.3f} speedup={xms / ms:.2f} fidelity={fid20 if fid20 is not None else 1.0:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
