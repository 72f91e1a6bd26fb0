"""Assemble BENCHMARKS.md from the per-area results in bench/results/*.md.

Each benchmark script writes its own ``bench/results/<area>.md`` (what was measured, against which
anchor, the ratio, the command to reproduce) and ``.txt`` (raw output). This script only stitches
them together in a fixed order under a table of the final ``key=value`` lines.

    python bench/make_benchmarks_md.py      # rewrites BENCHMARKS.md
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
ORDER = [
    ("replay", "Replay at the broker's speed: prefstream replay vs three raw producers", "bench/replay_rate.py"),
    ("catchup", "Catch-up on a preloaded topic: learner worker vs raw consumers and in-process learners", "bench/catchup.py"),
    ("scaleout", "Scale-out: two workers, snapshot merge cost, capacity model for 10x / 100x", "bench/catchup.py --workers 2, bench/merge_cost.py"),
    ("stream", "Streaming spine: learner worker throughput vs kafka-python", "bench/stream_throughput.py"),
    ("learner_rates", "Learner rates: micro-batches vs event by event (Pokémon)", "bench/learner_rates.py"),
    ("capacity", "Capacity learning: RDA / ADMM-RDA / FOBOS / LP (Herin, Perny & Sokolovska 2024, Section 5)", "bench/capacity_paper.py, bench/capacity_mcda.py"),
    ("quality", "Capacity stream default vs linear Bradley–Terry on real streams (calibration, merging)", "bench/quality_real.py"),
    ("gpm", "GPM vs UPM (Hu, Chau et al. 2022, Table 3)", "bench/gpm_paper.py"),
    ("gpm_kernels", "GPM item kernel with a constant (GPM ⊇ UPM) vs pure k_E, UPM, linear-bt", "bench/quality_real.py --gpm-kernels-only"),
    ("falkon", "FALKON scaling vs a dense exact solver", "bench/falkon_scaling.py"),
    ("prefshap", "Pref-SHAP (Hu, Chau et al. 2022, Section 4)", "bench/prefshap_paper.py"),
    ("sharp", "ShaRP vs xai-sharp (Pliatsika et al. 2024)", "bench/sharp_vs_xai_sharp.py"),
    ("distributional", "Distributional values: closed form vs Monte Carlo (Franceschi et al. 2024)", "bench/distributional.py"),
    ("mainjob", "The main job on the Pokémon stream", "bench/mainjob.py"),
    ("file_mode", "prefstream run (file mode) vs the learner worker's batch path (Pokémon)", "bench/file_mode.py"),
    ("clicklog", "Counterfactual learning from click logs: naive vs IPS vs oracle; Open Bandit off-policy", "bench/clicklog.py"),
    ("explain_wide", "Every explanation method at catalog width (d = 4, 10, 26)", "bench/explain_wide.py"),
    ("explainer_rate", "Explainer rate on Pokémon: batched calls vs one call per event", "bench/explainer_rate.py"),
    ("explanation_drift", "Explanation drift alarms on a Pokémon stream whose preference changes", "bench/explanation_drift.py"),
    ("explanation_drift_workers", "Explanation drift through the real workers and the broker", "bench/explanation_drift.py --workers"),
    ("soak", "Soak: 10^6 events through a learner worker, RSS and exactness", "bench/soak.py"),
    ("chaos", "Seeded chaos: learners killed/added, broker outages, explainer kills, corrupt batches", "bench/chaos.py"),
    ("serve", "prefstream serve under wrk: rank by id / inline, explain, hot swap (Pokémon, 100 candidates)",
     "bench/serve.py"),
]


def _last_kv_line(txt: Path) -> str:
    if not txt.is_file():
        return "(not run)"
    lines = [ln.strip() for ln in txt.read_text(encoding="utf-8", errors="replace").splitlines()
             if "=" in ln and " " in ln.strip() and not ln.lstrip().startswith("#")]
    return lines[-1] if lines else "(no key=value line)"


def main() -> None:
    out = ["# Benchmarks", "",
           "Speed and quality measured side by side against an anchor (the paper's numbers, a reference library, "
           "or a dense exact solver) in one run, reported as ratios. All figures were measured on the project's "
           "2-core, no-GPU machine, often while other jobs shared it: read times as upper bounds. Each section "
           "names the command that reproduces it; raw outputs are in `bench/results/*.txt`. Regenerate this page "
           "with `python bench/make_benchmarks_md.py`.", "",
           "| area | script | last line |", "|---|---|---|"]
    for area, title, script in ORDER:
        out.append(f"| [{title}](#{area}) | `{script}` | `{_last_kv_line(RESULTS / (area + '.txt'))}` |")
    out.append("")
    for area, title, _ in ORDER:
        md = RESULTS / f"{area}.md"
        out += [f'<a id="{area}"></a>', ""]
        if not md.is_file():
            out += [f"## {title}", "", "Not run yet.", ""]
            continue
        text = md.read_text(encoding="utf-8")
        # figures are referenced relative to bench/results/
        text = text.replace("](", "](bench/results/").replace("](bench/results/http", "](http") \
                   .replace("](bench/results/#", "](#").replace("](bench/results/../../", "](")
        out += [text.rstrip(), ""]
    (ROOT / "BENCHMARKS.md").write_text("\n".join(out) + "\n", encoding="utf-8")
    print(f"wrote {ROOT / 'BENCHMARKS.md'}")


if __name__ == "__main__":
    main()
