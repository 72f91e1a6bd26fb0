"""``prefstream run`` (file mode) against the learner worker's batch path, side by side in one run.

On the same events of a data set (default: Pokémon duels, 26 features), in this process:

* **file mode** — :func:`stream.batch.run_batch` on a JSON Lines file of the events (micro-batches
  of ``batch_max_events``, refits on the worker's executors, explanations at ``--sample-rate``);
* **core batch path (anchor)** — what the learner worker does with each fetched micro-batch, minus
  Kafka: :meth:`LearnerCore.process_batch` on micro-batches of the same raw messages, a snapshot
  built whenever :meth:`LearnerCore.snapshot_due` says so, refits on the same executors;
* optionally **before** (``--before REV``): the per-event file mode of an older commit's
  ``stream/batch.py`` (one ``process`` call per record, inline refits).

Rates are learned records per second until the last record is learned (startup imports done
before the clock; the wait for a refit in flight at the end is not counted, as the worker's
``events_per_s`` in ``bench/mainjob.py`` does not count it). The GPM uses the main job's window
(``--min-train`` 3000, refit every 5000 on 3000 pairs) with a one-point hold-out grid and 300
centres, so that a refit costs seconds: refits run in another process and the measured rate is
learning (``--gpm-full``: the main job's refit, 4 × 3 hold-out grid and 1000 centres). Last line::

    dataset=<name> events=<int> file_events_per_s=<f> core_batch_events_per_s=<f> file_over_core=<f> before_events_per_s=<f|nan> load1=<f>

Reproduce: ``OMP_NUM_THREADS=1 python bench/file_mode.py --events 20000 --before 5a1c866``
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def settings_for(ds, models, sample_rate, batch_max_events, gpm_full=False):
    from stream.demo import default_model_params
    from stream.settings import Settings

    gpm = {"refit_every": 5000, "window_size": 3000, "min_train": 3000}
    if not gpm_full:                               # a refit of seconds, not minutes
        gpm["model_params"] = {"penalty_grid": [1e-4], "multiplier_grid": [1.0], "max_centres": 300}
    params = default_model_params(ds, models, gpm)
    return Settings.load(overrides={"models": models, "feature_names": list(ds.feature_names), "model_params": params,
                                    "snapshot_every_events": 2000, "explain_sample_rate": sample_rate,
                                    "batch_max_events": batch_max_events})


def core_batch_rate(settings, raws) -> float:
    """Records/s of LearnerCore.process_batch on micro-batches (the worker's handle(), no Kafka)."""
    from stream.batch import _Refits
    from stream.workers.learner_core import LearnerCore

    with _Refits(settings, inline=False) as refits:
        core = LearnerCore(settings, **refits.core_kwargs())
        st = core.new_source(settings.topic_preferences, 0, {})
        size = int(settings.batch_max_events)
        t0 = time.perf_counter()
        for start in range(0, len(raws), size):
            core.process_batch(st, [(off, raws[off], None, None) for off in range(start, min(start + size, len(raws)))])
            refits.poll()
            if core.snapshot_due(st):
                _r, _a, versions = core.build_snapshots(st)
                core.snapshot_done(st, versions, True)
        rate = len(raws) / (time.perf_counter() - t0)
        refits.drain(st)     # as run_batch does: no refit left running into the next measurement
        return rate


def before_rate(rev: str, path: Path, settings) -> float:
    """Records/s of the per-event ``run_batch`` of commit ``rev`` (its stream/batch.py, this checkout's cores)."""
    src = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:stream/batch.py"], capture_output=True, text=True,
                         check=True).stdout
    mod_path = Path(tempfile.mkdtemp()) / "batch_before.py"
    mod_path.write_text(src)
    spec = importlib.util.spec_from_file_location("batch_before", mod_path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["batch_before"] = mod
    spec.loader.exec_module(mod)
    t0 = time.perf_counter()
    res = mod.run_batch(path, path.with_name("before_out.jsonl"), settings=settings, progress=False)
    return res.records / (time.perf_counter() - t0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="pokemon")
    ap.add_argument("--data-dir", default=os.environ.get("PREFSTREAM_DATA_DIR", str(REPO.parent / "shared" / "data")))
    ap.add_argument("--events", type=int, default=20000)
    ap.add_argument("--models", default="capacity,gpm")
    ap.add_argument("--sample-rate", type=float, default=0.0, help="explained fraction in file mode")
    ap.add_argument("--batch-max-events", type=int, default=500)
    ap.add_argument("--gpm-full", action="store_true", help="the main job's GPM refit (4 x 3 grid, 1000 centres)")
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds of the two paths; best of each")
    ap.add_argument("--before", default=None, metavar="REV", help="also time the per-event file mode of commit REV")
    args = ap.parse_args(argv)

    import river.metrics  # noqa: F401 - imports before the clocks (the worker has them loaded too)

    from stream.adapters import load_dataset
    from stream.batch import run_batch
    from stream.models import register_all

    register_all()
    ds = load_dataset(args.dataset, args.data_dir)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    s = settings_for(ds, models, args.sample_rate, args.batch_max_events, args.gpm_full)
    tmp = Path(tempfile.mkdtemp(prefix="prefstream-file-mode-"))
    path = tmp / f"{args.dataset}.jsonl"
    raws = [json.dumps(ev).encode() for ev in ds.to_events(stop=args.events)]
    path.write_bytes(b"\n".join(raws) + b"\n")
    print(f"# {args.dataset}: {len(raws)} events, models {models}, batch_max_events {args.batch_max_events}, "
          f"sample rate {args.sample_rate}; load {os.getloadavg()}", flush=True)

    warm = tmp / "warm.jsonl"                      # first calls of every code path, outside the clocks
    warm.write_bytes(b"\n".join(raws[:600]) + b"\n")
    core_batch_rate(s, raws[:600])
    run_batch(warm, tmp / "warm_out.jsonl", settings=s, progress=False)
    core, file_rate = 0.0, 0.0
    for r in range(args.rounds):                   # alternating order, best of each: the machine is shared
        if r % 2 == 0:
            c = core_batch_rate(s, raws)
        t0 = time.perf_counter()
        res = run_batch(path, tmp / "out.jsonl", settings=s, progress=False)
        f = res.records / res.learn_seconds
        if r % 2 == 1:
            c = core_batch_rate(s, raws)
        core, file_rate = max(core, c), max(file_rate, f)
        print(f"round {r + 1}: core batch path (anchor) {c:.0f} events/s, file mode {f:.0f} events/s (learned "
              f"{res.learned}, refits {res.refits}, explanations {sum(res.explanations.values())}, wall "
              f"{time.perf_counter() - t0:.1f} s incl. the last refit; final {json.dumps(res.final)}; "
              f"load {os.getloadavg()[0]:.1f})", flush=True)
    before = float("nan")
    if args.before:
        before = before_rate(args.before, path, s)
        print(f"before ({args.before}, per-event file mode, inline refits): {before:.0f} events/s", flush=True)
    load1 = os.getloadavg()[0]
    print(f"dataset={args.dataset} events={len(raws)} file_events_per_s={file_rate:.1f} core_batch_events_per_s={core:.1f} "
          f"file_over_core={file_rate / core:.3f} before_events_per_s={before:.1f} load1={load1:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
