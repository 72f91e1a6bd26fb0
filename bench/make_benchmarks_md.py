"""Write BENCHMARKS.md: one current table, then links to the dated results in bench/results/.

Each benchmark script writes its own ``bench/results/<area>.md`` (what was measured, against which
anchor, the ratio, the command to reproduce, every dated run: the history) and ``.txt`` (raw
output). BENCHMARKS.md is the page one reads first (≤ 400 lines, issue 31): :data:`CURRENT`, one row
per headline figure of the latest run (figure, anchor, ratio, goal, load average, command), then
per area its title, the last ``key=value`` line of its ``.txt`` and a link to its ``.md``. Nothing
is copied out of the result pages any more, so nothing there is lost or duplicated; update a row of
:data:`CURRENT` when a newer run of that benchmark is appended to its page.

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
    ("falkon", "FALKON scaling vs a dense exact solver; CPU and one H200 GPU, the refit per device",
     "bench/falkon_scaling.py, bench/refit_device.py (bench/gpu_check.sh on a GPU)"),
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
    ("progressive_chunks", "Progressive validation in growing chunks vs one chunk per micro-batch (issue 31)",
     "bench/progressive_chunks.py"),
    ("personal", "Personal capacities vs one population model and a hierarchical logistic baseline (issue 28)",
     "bench/personal.py"),
    ("personal_scale", "1,000,000 people through one learner worker: memory, rate, restore, exactness (issue 28)",
     "bench/personal_scale.py"),
    ("person_store", "The per-person store: RocksDB (rocksdict) vs LMDB (issue 28)", "bench/person_store.py"),
    ("prefshap_exact", "Exact product-marginal Pref-SHAP vs enumeration and the coalition path (issue 29)",
     "bench/prefshap_exact.py"),
    ("avro_ingest", "Avro vs JSON catch-up through a real schema registry; evolution; unknown schema ids (issue 30)",
     "bench/avro_ingest.py"),
    ("gpm_partitions", "The served GPM on 1 vs 3 partitions (issue 30)", "bench/gpm_partitions.py"),
]

#: The current headline figures: (area, figure, anchor, ratio, goal, load average, command), from the
#: latest dated run on each area's page (bench/results/<area>.md).
CURRENT = [
    ("personal", "Train / SwissMetro progressive AUC, capacity-personal: **0.826 / 0.940**",
     "population capacity 0.749 / 0.855; hierarchical logistic 0.828 / 0.943", "+0.077 / +0.086",
     "≥ +0.05 and ≥ baseline − 0.005: **met**; Ta-Feng NDCG@10 0.666 > 0.657: **met** (own shrinkage)", "7–12",
     "`python bench/personal.py --data-dir ../shared/data`"),
    ("personal_scale", "1,000,000 people, one learner worker: **12,554 events/s, 1.40 GB RSS**, restore 20.6 s",
     "—", "1,286 B/person", "≥ 10,000/s, ≤ 4 GB, 0 lost / 0 duplicated: **met**", "3.3–3.8",
     "`python bench/personal_scale.py --users 1000000`"),
    ("prefshap_exact", "exact Pref-SHAP at d = 26: **0.26–0.30 ms/duel** (compiled loop; 0.55 in numpy), enumeration diff "
     "7e-14 (d = 12)",
     "coalition path, 9 players (512 coalitions), same run", "65–100× (42× for abe396d's numpy path, same machine)",
     "≤ 1 ms, ≤ 1e-9, ≥ 50×: **met**", "0.3–1.4",
     "`OMP_NUM_THREADS=1 python bench/prefshap_exact.py --data-dir ../shared/data`"),
    ("avro_ingest", "Avro catch-up through Apicurio: **0.92 of JSON** (0.97 per worker CPU-s); lost 0, v2 learned",
     "the same events as JSON, same run", "0.65–1.05 over 3 runs", "≥ 0.8: met in 2 of 3 runs", "2.7–6.2",
     "`python bench/avro_ingest.py --events 50000 --repeat 3`"),
    ("gpm_partitions", "served GPM AUC on 3 partitions: **0.9291**, examples served 3,000",
     "1 partition: 0.9291", "1.000", "≥ p1 − 0.005: **met**", "7–10", "`python bench/gpm_partitions.py`"),
    ("replay", "`prefstream replay` of 50,000 duels, acks=all: **130,592 events/s**",
     "raw confluent-kafka, same bytes: 267,823/s", "0.488", "≥ 50,000/s and ≥ 0.25: **met**", "0.33–0.55",
     "`OMP_NUM_THREADS=1 python bench/replay_rate.py --data-dir ../shared/data`"),
    ("catchup", "learner worker, capacity + GPM + linear-bt: **11,692 events/s** with 5 refits (merged main; 16,458 on the "
     "branch with 0 refits; 14,592 on 381ddbe with 3)",
     "same learners in-process on arrays", "0.257", "≥ 10,000/s: **met**", "1.15–1.27",
     "`OMP_NUM_THREADS=1 python bench/catchup.py --data-dir ../shared/data`"),
    ("catchup", "learner worker, linear-bt alone: **38,468 events/s** (39,216 per CPU-s; 15,177 on 49b7ba5: forget scan + "
     "curve points, mended)",
     "aiokafka raw consume: 259,943/s", "0.148", "≥ 0.3: not met", "1.15–1.27", "same run"),
    ("stream", "learner worker, linear-bt, 50,000 events: **19,906 events/s**, p99 100 ms",
     "kafka-python raw consume: 9,436/s", "2.11", "≥ 0.5: **met**", "11.3",
     "`OMP_NUM_THREADS=1 python bench/stream_throughput.py --events 50000`"),
    ("learner_rates", "capacity `learn_many`, batches of 500: **119,007/s**", "one by one: 5,462/s", "21.8×",
     "≥ 50,000/s: **met**", "1.37–1.84", "`OMP_NUM_THREADS=1 python bench/learner_rates.py --events 20000`"),
    ("mainjob", "50,000 Pokémon duels through broker and workers: **11,798 examples/s**, AUC 0.931 / 0.937",
     "replay 128,205/s (not the cap)", "—", "≥ 8,000/s: **met**; every method ≥ 0.95 of its sample: **met** (0.977)",
     "0.9–1.5", "`OMP_NUM_THREADS=1 python bench/mainjob.py --dataset pokemon --sample-rate 0.01`"),
    ("file_mode", "`prefstream run` on 10,000 duels: **4,678 events/s**", "the worker's batch path in-process: 3,502/s",
     "1.336", "≥ 1.0: **met**", "15.84", "`OMP_NUM_THREADS=1 python bench/file_mode.py --events 10000 --before 5a1c866`"),
    ("explainer_rate", "through the broker at 10,000 events/s, 7 (model, method) pairs: lag p99 **3–4 s** at 1 % "
     "(97.7 explained/s: all the sample offers), **3 s at 1.25 %: 118 explained/s**",
     "the realised hash sample (430 / 519 of 44,000)", "achieved 1.000",
     "≥ 100/s, ≥ 0.95, lag p99 ≤ 5 s: **met** (≥ 100 at 1.25 %)", "0.7–1.1",
     "`OMP_NUM_THREADS=1 python bench/explainer_rate.py --broker --no-in-process --rate 10000 [--sample-rate 0.0125]`"),
    ("serve", "`prefstream serve`, rank 100 candidates by id (capacity): **3,700 req/s**; rank p99 2.4 ms; "
     "explained rank p99 1.0 / 1.5 ms (capacity / GPM); personal rank 2.2 ms, recommend 1.7 ms",
     "empty endpoint: 6,935 req/s (a slower machine than 12-03's 9,782)", "0.534",
     "explained ≤ 15 / 25 ms, personal ≤ 10, recommend ≤ 20, 0 errors: **met**",
     "0.78 → 0.98", "`PREFSTREAM_DATA_DIR=../shared/data OMP_NUM_THREADS=1 python bench/serve.py --seconds 5 --explain-seconds 8 --swap-seconds 10`"),
    ("sharp", "ShaRP rank QoI, THE 2020 (n = 1,397, d = 5): **0.504 ms/item**, max diff 1.9e-13",
     "xai-sharp 0.1.1: 45.0 ms/item", "89.4× (91.6× at 83aa725)", "≥ 50×, exact agreement: **met**", "0.9",
     "`python bench/sharp_vs_xai_sharp.py --dataset the2020 --items 50`"),
    ("soak", "10⁶ events through a learner worker: RSS growth **4.86 %**, lost / duplicated 0 / 0", "RSS after warm-up",
     "1.049", "growth ≤ 10 %: **met**", "4.4–5.7", "`python bench/soak.py --events 1000000 --out DIR`"),
    ("progressive_chunks", "worker core, chunked progressive validation: **21,245 events per CPU-s**",
     "one chunk per batch (before issue 31): 20,148 per CPU-s", "1.05", "no worse than the anchor: **met**",
     "10.5–12.4", "`python bench/progressive_chunks.py --events 30000 --models capacity,linear-bt`"),
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
           "2-core, no-GPU machine, often while other jobs shared it: the load average (1 min, or its range "
           "during the run) stands beside each figure; read times at a high load as upper bounds. "
           "Each benchmark's page in `bench/results/` holds every dated run (the history), its raw output "
           "(`.txt`) and the command. Regenerate this page with `python bench/make_benchmarks_md.py`.", "",
           "## Current figures", "",
           "| area | figure | anchor (same run) | ratio | goal | load average | command |",
           "|---|---|---|---|---|---|---|"]
    for area, figure, anchor, ratio, goal, load, cmd in CURRENT:
        out.append(f"| [{area}](bench/results/{area}.md) | {figure} | {anchor} | {ratio} | {goal} | {load} | {cmd} |")
    out += ["", "## Every benchmark", "",
            "Title, script, and the last `key=value` line of its latest raw output; the link opens its dated results.", "",
            "| area | script | last line |", "|---|---|---|"]
    for area, title, script in ORDER:
        md = RESULTS / f"{area}.md"
        link = f"[{title}](bench/results/{area}.md)" if md.is_file() else f"{title} (not run yet)"
        out.append(f"| {link} | `{script}` | `{_last_kv_line(RESULTS / (area + '.txt'))}` |")
    out += ["", "Older figures and the reasoning behind past changes (e.g. why the workers left Faust) are in "
            "the dated sections of those pages and in [docs/history.md](docs/history.md)."]
    (ROOT / "BENCHMARKS.md").write_text("\n".join(out) + "\n", encoding="utf-8")
    print(f"wrote {ROOT / 'BENCHMARKS.md'}")


if __name__ == "__main__":
    main()
