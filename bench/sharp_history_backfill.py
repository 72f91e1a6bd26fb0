"""One row of ``bench/results/sharp_history.tsv`` for an older commit's ShaRP, measured beside xai-sharp.

Same protocol and columns as ``bench/sharp_vs_xai_sharp.py --record`` (THE 2020, 5 items, exact rank QoI,
xai-sharp convention, build + explain best of 3 in CPU time, xai-sharp one run), with the old commit's
``explainers/`` imported instead of this checkout's. Reproduce::

    git archive <commit> explainers | tar -x -C /tmp/c_<commit>
    OMP_NUM_THREADS=1 python bench/sharp_history_backfill.py /tmp/c_<commit> <commit> [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import datetime
import inspect
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tree", help="folder holding the old commit's explainers/")
    ap.add_argument("label", help="commit label written in the row")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--out", default=None, help="TSV to append to (default bench/results/sharp_history.tsv)")
    args = ap.parse_args(argv)
    sys.path[:0] = [str(Path(args.tree).resolve()), str(ROOT), str(ROOT / "bench")]
    import explainers
    if not explainers.__file__.startswith(str(Path(args.tree).resolve())):
        raise SystemExit(f"error: {args.tree} holds no explainers/ package")
    import numpy as np
    import sharp_vs_xai_sharp as bench
    from explainers.sharp import SharpExplainer

    cat = bench.load("the2020", args.data_dir)
    items = bench.pick_items(cat, 5)
    K = items.size
    kw = {"ties": "max"}
    if "tie_rtol" in inspect.signature(SharpExplainer).parameters:
        kw["tie_rtol"] = 0
    ours, t = bench.timed(lambda: SharpExplainer(cat.score_fn, cat.X, **kw).explain(items, "rank", exclude_item=False))
    ref, tx = bench.xai_sharp_rank(cat, items)
    ex = SharpExplainer(cat.score_fn, cat.X)
    _, td = bench.timed(lambda: ex.explain(items, "rank"))
    ms, xms = 1e3 * t / K, 1e3 * tx / K
    row = dict(commit=args.label, date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
               load1=f"{os.getloadavg()[0]:.2f}", dataset="the2020", n=cat.n, items=K, ms_per_item=f"{ms:.4f}",
               xai_sharp_ms_per_item=f"{xms:.3f}", ratio=f"{xms / ms:.2f}", default_ms_per_item=f"{1e3 * td / K:.4f}")
    bench.record_row(Path(args.out) if args.out else bench.HISTORY, row)
    print(f"commit={args.label} ms_per_item={ms:.4f} ratio={xms / ms:.2f} max_abs_diff={np.abs(ours.values - ref).max():.3g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
