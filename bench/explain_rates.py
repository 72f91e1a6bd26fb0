"""Explanations/s per method at d = 4 (Train choices) and d = 26 (Pokémon), one example per call vs a batch per call.

For each data set, the main job's capacity and GPM learners are learned in-process on the first
``--train`` examples (the GPM fitted once); then every registered pair explainer of each model
(``stream.models``) explains ``--n`` held-out examples twice, side by side in one run:

* **one per call** — ``fn(learner, [ex], ctx)`` for each example (the explainer worker's path);
* **one batch per call** — ``fn(learner, examples, ctx)`` once.

Both use the same background (the 256 examples before the held-out ones). Methods that refuse
the data (e.g. ShaRP beyond 20 features) are reported as ``refused``.

The last line is ``key=value`` pairs ``<dataset>_<method>_<model>_one_per_s`` and ``…_batch_per_s``
plus ``load_average``.

Reproduce: ``OMP_NUM_THREADS=1 python bench/explain_rates.py`` (Pokémon in ``$PREFSTREAM_DATA_DIR``).
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=os.environ.get("PREFSTREAM_DATA_DIR", str(REPO.parent / "shared" / "data")))
    ap.add_argument("--train", type=int, default=2000)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--datasets", default="train,pokemon")
    args = ap.parse_args(argv)

    import torch

    from stream import models as builtin
    from stream import registry
    from stream.adapters import load_dataset
    from stream.contract import parse_preference
    from stream.demo import default_model_params
    from stream.settings import Settings

    torch.set_num_threads(1)
    builtin.register_all()
    out = {}
    for name in [d.strip() for d in args.datasets.split(",") if d.strip()]:
        import json

        ds = load_dataset(name, args.data_dir)
        names = list(ds.feature_names)
        models = ["capacity", "gpm"]
        params = default_model_params(ds, models, {"refit_every": 10**9, "min_train": 200,
                                                   "window_size": min(args.train, 3000)})
        s = Settings.load(None, {"models": models, "feature_names": names, "model_params": params}, environ={})
        evs = [parse_preference(json.dumps(e).encode()) for e in ds.to_events(0, args.train + args.n)]
        train, held = evs[:args.train], evs[args.train:]
        XL = np.array([[e.left[f] for f in names] for e in train])
        XR = np.array([[e.right[f] for f in names] for e in train])
        y = np.array([e.outcome for e in train])
        background = train[-256:]
        print(f"{name}: d={len(names)}, learned on {len(train)}, explaining {len(held)} examples", flush=True)
        for m in models:
            lr = registry.get_model(m).factory(s, s.params_for(m))
            lr.learn_many(XL, XR, y)
            if hasattr(lr, "refit"):
                lr.refit()
            for method, fn in sorted(registry.explainers_for(m).items()):
                if getattr(fn, "session_only", False):
                    continue

                def ctx():
                    return registry.ExplainContext(model_name=m, model_version=1, background=background,
                                                   rng=np.random.default_rng(0))

                key = f"{name}_{method}_{m}".replace("-", "_")
                try:
                    t0 = time.perf_counter()
                    for ex in held:
                        fn(lr, [ex], ctx())
                    one = len(held) / (time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    fn(lr, held, ctx())
                    batch = len(held) / (time.perf_counter() - t0)
                except Exception as exc:  # noqa: BLE001 - e.g. ShaRP's feature budget
                    print(f"  {m:9s} {method:26s} refused: {type(exc).__name__}: {str(exc)[:80]}", flush=True)
                    continue
                out[f"{key}_one_per_s"], out[f"{key}_batch_per_s"] = one, batch
                print(f"  {m:9s} {method:26s} one per call {one:10.2f}/s   batch of {len(held)} per call "
                      f"{batch:10.2f}/s   ratio {batch / one:.2f}", flush=True)
    load = "/".join(f"{x:.2f}" for x in os.getloadavg())
    print(" ".join(f"{k}={v:.2f}" for k, v in out.items()) + f" load_average={load}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
