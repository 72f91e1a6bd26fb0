"""Progressive validation in growing chunks (issue 31): the worker's core on a fresh source, with
and without the chunks, side by side in one run.

The learner core (:class:`stream.workers.learner_core.LearnerCore`) takes ``--events`` Pokémon duels
(message bytes, as bench/catchup.py makes them) in micro-batches of 500 from a fresh source, once as
it runs now (each batch scored and learned in chunks that grow with what the model has learned,
:func:`stream.workers.progressive.progressive_chunks`) and once as the **anchor**: one chunk per
batch (the whole batch scored by the pre-batch model, as before issue 31). Printed per mode: events/s
(wall and CPU), the progressive ROC AUC and log loss per model; each mode runs twice, alternating,
after a warm-up pass; the ratios are of the means (``ratio`` of wall rates, ``cpu_ratio`` of
events per CPU-second, the one to read on a loaded machine). GPM refits run
off in both modes (in the worker they run in another process; the refit trigger is checked once
per batch either way).

The last line is exactly::

    events=… chunked_events_per_s=… one_chunk_events_per_s=… ratio=… cpu_ratio=… chunked_auc_capacity=… one_chunk_auc_capacity=… load=…

Reproduce: ``python bench/progressive_chunks.py --events 20000``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def run_core(ds, models, params, vals, batch: int) -> dict:
    from catchup import settings_for

    from stream.batch import progressive_values
    from stream.workers.learner_core import LearnerCore

    s = settings_for(ds, models, params, snapshot_every_events=1000)
    core = LearnerCore(s)
    st = core.new_source(s.topic_preferences, 0, {})
    t, c = time.perf_counter(), time.process_time()
    for a in range(0, len(vals), batch):
        core.process_batch(st, [(a + j, v, None, None) for j, v in enumerate(vals[a:a + batch])])
        if core.snapshot_due(st):
            _recs, _acks, versions = core.build_snapshots(st)
            core.snapshot_done(st, versions, True)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    return {"events_per_s": len(vals) / wall, "events_per_cpu_s": len(vals) / cpu,
            "metrics": {m: progressive_values(*core.progressive[m]) for m in models}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=os.environ.get("PREFSTREAM_DATA_DIR", str(REPO.parent / "shared" / "data")))
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--models", default="capacity,gpm,linear-bt")
    args = ap.parse_args(argv)
    models = [m for m in args.models.split(",") if m]

    from catchup import make_events

    import stream.workers.learner_core as lc
    from stream.adapters import load_dataset
    from stream.demo.config import default_model_params

    ds = load_dataset("pokemon", args.data_dir)
    params = default_model_params(ds, [m for m in models if m != "linear-bt"])
    # no GPM refits (they run in another process in the worker, and would dominate both modes alike):
    # the GPM's share is its window append and, in the chunked mode, the extra guard checks
    params = {m: dict(p, **({"refit_every": None, "drift": False} if m in ("gpm", "cgpm") else {}))
              for m, p in params.items()}
    vals = [v for _, v in make_events(ds, args.events)[0]]
    print(f"command: python bench/progressive_chunks.py --events {args.events} --models {args.models}", flush=True)
    out = {}
    chunks = lc.progressive_chunks
    run_core(ds, models, params, vals[:2000], 500)  # warm-up (imports, first calls), not counted
    for mode in ("chunked", "one_chunk", "chunked_2", "one_chunk_2"):
        lc.progressive_chunks = chunks if mode.startswith("chunked") else (lambda learned, n: [(0, n)] if n else [])
        r = run_core(ds, models, params, vals, 500)
        out[mode] = r
        print(f"{mode}: {r['events_per_s']:,.0f} events/s ({r['events_per_cpu_s']:,.0f}/CPU-s); "
              + "; ".join(f"{m} auc={v['roc_auc']} log_loss={v['log_loss']}" for m, v in r["metrics"].items())
              + f"; load {load()}", flush=True)
    lc.progressive_chunks = chunks
    new = 0.5 * (out["chunked"]["events_per_s"] + out["chunked_2"]["events_per_s"])
    old = 0.5 * (out["one_chunk"]["events_per_s"] + out["one_chunk_2"]["events_per_s"])
    cpu = {k: 0.5 * (out[k]["events_per_cpu_s"] + out[k + "_2"]["events_per_cpu_s"]) for k in ("chunked", "one_chunk")}
    auc = lambda mode, m: out[mode]["metrics"].get(m, {}).get("roc_auc")  # noqa: E731
    print(f"events={args.events} chunked_events_per_s={new:.0f} one_chunk_events_per_s={old:.0f} ratio={new / old:.3f} "
          f"cpu_ratio={cpu['chunked'] / cpu['one_chunk']:.3f} "
          f"chunked_auc_capacity={auc('chunked', 'capacity')} one_chunk_auc_capacity={auc('one_chunk', 'capacity')} "
          f"load={load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
