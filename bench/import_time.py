"""Import cost of the three packages, side by side with numpy and torch in the same run.

Each figure is the median wall time of a fresh ``python -c "import X"`` minus that of
``python -c "pass"`` (interpreter start), over ``--repeat`` interleaved runs, with the load
average beside it. The packages load their names lazily (``learners/_exports.py``), so importing
them should cost a fraction of ``import numpy`` and nothing like ``import torch``.

    python bench/import_time.py [--repeat 15] [--out DIR]

Last line: ``key=value`` pairs (milliseconds; ``*_vs_numpy`` are ratios).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGETS = ("pass", "import numpy", "import torch", "import stream", "import learners", "import explainers")


def _once(code: str) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1])))
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--out", default=None, help="Write import_time.txt there.")
    args = ap.parse_args()
    times = {t: [] for t in TARGETS}
    for _ in range(args.repeat):
        for t in TARGETS:
            times[t].append(_once(t))
    med = {t: statistics.median(v) for t, v in times.items()}
    base = med["pass"]
    ms = {t: 1e3 * max(0.0, med[t] - base) for t in TARGETS if t != "pass"}
    load = os.getloadavg()[0]
    kv = {"baseline_ms": round(1e3 * base, 1), "numpy_ms": round(ms["import numpy"], 1), "torch_ms": round(ms["import torch"], 1)}
    for pkg in ("stream", "learners", "explainers"):
        kv[f"{pkg}_ms"] = round(ms[f"import {pkg}"], 1)
        kv[f"{pkg}_vs_numpy"] = round(ms[f"import {pkg}"] / max(ms["import numpy"], 1e-9), 3)
    kv["load1"] = round(load, 2)
    line = " ".join(f"{k}={v}" for k, v in kv.items())
    for t in TARGETS:
        print(f"{t:20s} median {1e3 * med[t]:8.1f} ms (start-up included), load {load:.2f}")
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "import_time.txt").write_text(line + "\n", encoding="utf-8")
    print(line)


if __name__ == "__main__":
    main()
