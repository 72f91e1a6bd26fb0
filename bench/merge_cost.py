"""Merge cost of snapshots as the number of sources grows (the explainer's side of scale-out).

A learner worker publishes one snapshot per model and source (input partition); the explainer
decodes the latest snapshot of every source and merges them with
:func:`stream.registry.merge_learners` (capacity: RDA parts pooled with ``+=``; GPM: the
count-weighted ensemble; linear-bt: parameters mixed by count). This measures, for 1, 12, 48
and 96 sources, per model: the snapshot size, decode + load of all parts, the merge itself, and
``predict_proba_many`` of the merged model on 500 pairs (the GPM ensemble grows with the parts).

The parts are ``k`` decodings of one snapshot of a model trained on ``--events`` Pokémon duels
(GPM fitted once): the cost of decoding and merging does not depend on the values.

The last line is exactly::

    merge_ms_1=… merge_ms_12=… merge_ms_48=… merge_ms_96=… load_average=…

with ``merge_ms_k`` the decode + merge time of all three models for ``k`` sources (CPU ms).

Reproduce: ``python bench/merge_cost.py`` (no broker needed).
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

MODELS = ["capacity", "gpm", "linear-bt"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=os.environ.get("PREFSTREAM_DATA_DIR", str(REPO.parent / "shared" / "data")))
    ap.add_argument("--events", type=int, default=4000)
    ap.add_argument("--sources", default="1,12,48,96")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    from bench.catchup import settings_for
    from stream import registry
    from stream.adapters import load_dataset
    from stream.contract import decode_snapshot, encode_snapshot
    from stream.demo.config import default_model_params

    ds = load_dataset("pokemon", args.data_dir)
    params = default_model_params(ds, ["capacity", "gpm"])
    s = settings_for(ds, MODELS, params)
    n = args.events
    XL, XR, y = ds.XL[:n], ds.XR[:n], ds.outcome[:n]
    QL, QR = ds.XL[n:n + 500], ds.XR[n:n + 500]
    snaps = {}
    for m in MODELS:
        lr = registry.get_model(m).factory(s, s.params_for(m))
        lr.learn_many(XL, XR, y)
        if hasattr(lr, "refit"):
            lr.refit()
        snaps[m] = encode_snapshot(m, 1, n, lr.state_dict())
    res: dict = {"events_per_part": n, "load_avg": os.getloadavg(), "sizes": {m: len(b) for m, b in snaps.items()}}
    totals = {}
    for k in [int(x) for x in args.sources.split(",")]:
        row = {}
        total = 0.0
        for m in MODELS:
            spec = registry.get_model(m)
            c = time.process_time()
            parts = []
            for _ in range(k):
                snap = decode_snapshot(snaps[m])
                parts.append((spec.loader(snap["state"]), int(snap["training_count"])))
            dec = time.process_time() - c
            c = time.process_time()
            merged = registry.merge_learners(m, parts)
            mer = time.process_time() - c
            c = time.process_time()
            merged.predict_proba_many(QL, QR)
            pred = time.process_time() - c
            row[m] = {"decode_ms": 1e3 * dec, "merge_ms": 1e3 * mer, "predict_500_ms": 1e3 * pred}
            total += dec + mer
        totals[k] = 1e3 * total
        res[str(k)] = row
        print(f"{k:3d} sources: " + "; ".join(f"{m}: decode {r['decode_ms']:.1f} ms, merge {r['merge_ms']:.1f} ms, "
                                              f"predict 500 {r['predict_500_ms']:.1f} ms" for m, r in row.items())
              + f"; load {os.getloadavg()[0]:.2f}", flush=True)
    print("snapshot bytes: " + ", ".join(f"{m}={b}" for m, b in res["sizes"].items()))
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1, default=str))
    load = "/".join(f"{x:.2f}" for x in os.getloadavg())
    print(" ".join(f"merge_ms_{k}={v:.1f}" for k, v in totals.items()) + f" load_average={load}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
