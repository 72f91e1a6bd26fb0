"""A newcomer's first hour (issue 31): honest progressive metrics on a small file, exits and summaries
that say what happened, unmeasured gauges NaN, a learning curve at event counts, the TOML hint."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from stream.cli import app

runner = CliRunner()


def clear_signal_events(n=400, seed=0, rename=None):
    """``n`` preference events whose outcome follows u(x) = 3a − 2b with small logistic noise."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        L, R = rng.uniform(0, 1, 2), rng.uniform(0, 1, 2)
        g = 3 * (L[0] - R[0]) - 2 * (L[1] - R[1])
        y = 1 if rng.random() < 1 / (1 + np.exp(-4 * g)) else -1
        names = ["a", rename or "b"]
        out.append({"schema_version": 1, "event_id": f"e{k}", "timestamp": 1714564800 + k,
                    "left": {"features": dict(zip(names, map(float, L)))},
                    "right": {"features": dict(zip(names, map(float, R)))}, "outcome": y})
    return out


def write_jsonl(path, events):
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def run_cli(tmp_path, f, *extra):
    res = runner.invoke(app, ["run", "-q", "-i", str(f), "-o", str(tmp_path / "out.jsonl"),
                              "--sample-rate", "0", "--set", 'feature_names=["a", "b"]', *extra])
    return res


def summary_of(res):
    return json.loads(res.stdout[res.stdout.index("{"):res.stdout.rindex("}") + 1])


def test_a_400_event_file_with_a_clear_signal_reports_what_was_learned(tmp_path):
    # the whole file fits in one 500-event micro-batch: scored as one batch, before anything is
    # learned, it read AUC 0.5 and log loss log 2 (issue 31, item 2)
    f = write_jsonl(tmp_path / "prefs.jsonl", clear_signal_events())
    res = run_cli(tmp_path, f, "-m", "linear-bt,capacity")
    assert res.exit_code == 0, res.output
    s = summary_of(res)
    for m in ("linear-bt", "capacity"):
        assert s[f"learned[{m}]"] == 400
        assert s[f"roc_auc[{m}]"] >= 0.8, s
        assert s[f"log_loss[{m}]"] < 0.6, s


def test_progressive_chunks_bound_the_staleness_of_the_scoring_model():
    from stream.workers.progressive import PROGRESSIVE_GROWTH, PROGRESSIVE_MIN_CHUNK, progressive_chunks

    for learned, n in [(0, 500), (7, 333), (31, 1), (4000, 500), (10**6, 500)]:
        chunks = progressive_chunks(learned, n)
        assert chunks[0][0] == 0 and chunks[-1][1] == n
        assert all(a == b0 for (_, a), (b0, _) in zip(chunks, chunks[1:]))  # contiguous, in order
        for a, b in chunks:  # an event at count k + j is scored by the model at count k
            k = learned + a
            assert b - a <= max(PROGRESSIVE_MIN_CHUNK, int(PROGRESSIVE_GROWTH * k))
    assert progressive_chunks(10**6, 500) == [(0, 500)]  # a warm model: one call per micro-batch


def test_the_worker_scores_a_fresh_batch_in_growing_chunks():
    """The learner core itself (what the worker runs): one 400-event batch, AUC ≥ 0.8."""
    from stream.batch import progressive_values
    from stream.settings import Settings
    from stream.workers.learner_core import LearnerCore

    s = Settings.load(overrides={"models": ["linear-bt"], "feature_names": ["a", "b"]})
    core = LearnerCore(s)
    st = core.new_source(s.topic_preferences, 0, {})
    recs = [(k, json.dumps(e).encode(), None, None) for k, e in enumerate(clear_signal_events())]
    assert core.process_batch(st, recs) == []
    v = progressive_values(*core.progressive["linear-bt"])
    assert v["roc_auc"] >= 0.8 and st.slots["linear-bt"].count == 400


def test_a_file_whose_every_record_is_refused_exits_3_and_says_why(tmp_path, caplog):
    # a feature renamed in every event ("b" → "weight_b"): all 400 become schema_violation
    f = write_jsonl(tmp_path / "prefs.jsonl", clear_signal_events(rename="weight_b"))
    res = runner.invoke(app, ["run", "-q", "-i", str(f), "-o", str(tmp_path / "out.jsonl"), "-m", "linear-bt,capacity",
                              "--set", 'feature_names=["a", "b"]', "--sample-rate", "1"])
    from stream.batch import EXIT_NOTHING_LEARNED

    assert res.exit_code == EXIT_NOTHING_LEARNED == 3, res.output
    s = summary_of(res)
    assert s["learned[capacity]"] == 0 and s["learned[linear-bt]"] == 0
    dead_path = tmp_path / "out.dead-letters.jsonl"
    assert s["dead_letters_file"] == str(dead_path)
    assert s["dead_letters_by_reason"] == {"schema_violation": 400}
    err = res.stderr.strip().splitlines()
    assert err[-1] == f"error: 'linear-bt', 'capacity' learned no record (exit status 3): dead letters in {dead_path}.", err
    logged = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert not any("sample-rate" in ln for ln in err + logged), logged  # not the hint that does not help
    assert not any("failed on" in ln for ln in logged), logged[:3]      # refused events are not explained
    # one line with the cause: counts by reason, the first refusal (its line, the missing feature), the file
    assert logged == [f"no model learned any record: 400 of 400 records refused (schema_violation: 400; first: "
                      f"line 1: model 'linear-bt' rejected event 'e0': model 'linear-bt' expects feature 'b'; "
                      f"the event has ['a', 'weight_b']); dead letters in {dead_path}"], logged
    assert (tmp_path / "out.jsonl").read_text() == ""
    dead = [json.loads(x) for x in dead_path.read_text().splitlines()]
    assert [d["line"] for d in dead] == list(range(1, 401))         # the file's line, not only an offset
    assert all(d["detail"].startswith(f"line {d['line']}: ") for d in dead)


def test_dead_letters_carry_the_file_line_across_blank_lines_and_batches(tmp_path):
    evs = clear_signal_events(60)
    lines = []
    for k, e in enumerate(evs):
        lines.append(json.dumps(e))
        if k == 9:
            lines += ["", '{"schema_version": 1, "event_id": "broken"']     # a blank line, then malformed JSON
    (tmp_path / "p.jsonl").write_text("\n".join(lines) + "\n")
    res = runner.invoke(app, ["run", "-q", "-i", str(tmp_path / "p.jsonl"), "-o", str(tmp_path / "out.jsonl"),
                              "-m", "linear-bt", "--set", "batch_max_events=7"])
    assert res.exit_code == 0, res.output
    dead = [json.loads(x) for x in (tmp_path / "out.dead-letters.jsonl").read_text().splitlines()]
    assert [(d["reason"], d["line"], d["offset"]) for d in dead] == [("malformed_json", 12, 10)]
    assert summary_of(res)["dead_letters_by_reason"] == {"malformed_json": 1}


def test_a_refused_event_is_not_explained_but_the_others_are(tmp_path, caplog):
    evs = clear_signal_events(200)
    for e in evs[150:]:
        e["left"]["features"]["b"] = "high"          # wrong type: refused at parse time
    for e in evs[100:150]:
        del e["right"]["features"]["b"]             # a missing feature: refused by the model
    f = write_jsonl(tmp_path / "prefs.jsonl", evs)
    res = runner.invoke(app, ["run", "-q", "-i", str(f), "-o", str(tmp_path / "out.jsonl"), "-m", "linear-bt",
                              "--set", 'feature_names=["a", "b"]', "--sample-rate", "1"])
    assert res.exit_code == 0, res.output
    explained = {r["request_id"] for r in map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines())}
    assert explained and explained <= {f"e{k}" for k in range(100)}
    assert not [r.getMessage() for r in caplog.records if "failed on" in r.getMessage()]


def test_a_model_table_at_the_top_of_a_config_file_points_to_model_params(tmp_path):
    cfg = tmp_path / "prefstream.toml"
    cfg.write_text('models = ["capacity"]\n\n[capacity]\nk_additive = 2\n')
    f = write_jsonl(tmp_path / "prefs.jsonl", clear_signal_events(10))
    res = runner.invoke(app, ["run", "-q", "-i", str(f), "-o", str(tmp_path / "out.jsonl"), "--config", str(cfg)])
    assert res.exit_code != 0
    err = res.stderr.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"error: Unknown setting 'capacity' in config file {cfg}. Parameters of a model go "
                             "under [model_params.capacity] (e.g. [model_params.capacity] then k_additive = 2)."), err
    assert "Traceback" not in res.output


def _core(models, **kw):
    from stream.settings import Settings
    from stream.workers.learner_core import LearnerCore

    s = Settings.load(overrides={"models": models, "feature_names": ["a", "b"], **kw})
    core = LearnerCore(s)
    return core, core.new_source(s.topic_preferences, 0, {})


def _records(events):
    return [(k, json.dumps(e).encode(), None, None) for k, e in enumerate(events)]


def test_unmeasured_progressive_gauges_read_nan_never_zero():
    import math

    core, st = _core(["linear-bt", "gpm"], model_params={"gpm": {"refit_every": 1000, "min_train": 1000, "window_size": 3000}})
    reg = core.metrics.registry
    read = lambda name, m: reg.get_sample_value(f"prefstream_progressive_{name}", {"model": m})  # noqa: E731
    core.update_gauges()
    for m in ("linear-bt", "gpm"):
        for name in ("accuracy", "log_loss", "roc_auc"):
            assert math.isnan(read(name, m)), (name, m)   # before: 0.0
    core.process_batch(st, _records(clear_signal_events(100)))
    core.update_gauges()
    assert 0.5 < read("accuracy", "linear-bt") <= 1.0 and 0.5 < read("roc_auc", "linear-bt") <= 1.0
    assert 0.0 < read("log_loss", "linear-bt") < math.log(2)
    for name in ("accuracy", "log_loss", "roc_auc"):  # the GPM has not fitted: it scored nothing
        assert math.isnan(read(name, "gpm")), name


def test_the_learning_curve_is_the_progressive_metrics_at_event_counts():
    from stream.batch import progressive_values

    core, st = _core(["linear-bt", "capacity"])
    core.process_batch(st, _records(clear_signal_events(400)))
    pts = core.drain_curve()
    assert core.drain_curve() == []
    for m in ("linear-bt", "capacity"):
        mine = [p for p in pts if p["model"] == m]
        assert len(mine) >= 20, len(mine)
        ev = [p["events"] for p in mine]
        assert ev == sorted(set(ev)) and ev[-1] <= 400
        assert all(p["roc_auc"] is not None and 0 <= p["accuracy"] <= 1 for p in mine)
        assert mine[-1]["roc_auc"] >= 0.8
    # oracle: a fresh core on the first n events alone ends with the metrics of the point at n (the
    # chunks depend only on the counts, so the same models score the same events)
    lin = [p for p in pts if p["model"] == "linear-bt"]
    for p in (lin[3], lin[len(lin) // 2], lin[-2]):
        fresh, fst = _core(["linear-bt", "capacity"])
        fresh.process_batch(fst, _records(clear_signal_events(400)[:p["events"]]))
        want = progressive_values(*fresh.progressive["linear-bt"])
        for k in ("accuracy", "roc_auc", "log_loss"):
            assert p[k] == pytest.approx(want[k], rel=1e-12, abs=1e-12), (p, want)


def test_run_summary_and_report_carry_the_learners_curve(tmp_path):
    f = write_jsonl(tmp_path / "prefs.jsonl", clear_signal_events())
    res = runner.invoke(app, ["run", "-q", "-i", str(f), "-o", str(tmp_path / "out.jsonl"), "-m", "linear-bt,capacity",
                              "--set", 'feature_names=["a", "b"]', "--sample-rate", "0.02",
                              "--report-dir", str(tmp_path / "rep")])
    assert res.exit_code == 0, res.output
    s = json.loads((tmp_path / "rep" / "summary.json").read_text())
    for m in ("linear-bt", "capacity"):
        pts = [p for p in s["progress"] if p["model"] == m]
        assert len(pts) >= 20 and all(p["roc_auc"] is not None for p in pts)   # before: 2 points (every 200 records)
        assert pts[-1]["events"] == 400 and pts[-1]["roc_auc"] == pytest.approx(s[f"roc_auc[{m}]"], abs=1e-12)


def test_the_worker_appends_its_curve_to_progress_log(tmp_path):
    from stream.demo.summary import read_curve
    from stream.workers.learner import LearnerLoop

    log = tmp_path / "curve.jsonl"
    core, st = _core(["linear-bt"], progress_log=str(log))
    core.process_batch(st, _records(clear_signal_events(200)))
    loop = LearnerLoop.__new__(LearnerLoop)
    loop.core, loop.settings = core, core.settings
    loop.write_curve()
    loop.write_curve()  # nothing new: nothing appended
    got = read_curve(log)
    assert len(got) >= 20 and all(p["model"] == "linear-bt" and p["roc_auc"] is not None for p in got)
    assert [p["events"] for p in got] == sorted({p["events"] for p in got})
    loop.write_curve(final=True)  # stopping: the last point is at the final count
    got = read_curve(log)
    assert got[-1]["events"] == 200 and [p["events"] for p in got] == sorted({p["events"] for p in got})


def test_without_progress_log_the_worker_takes_no_curve_points_and_the_same_metrics():
    """run_learner builds its core with curve=bool(progress_log): no points nobody reads, and the
    progressive metrics equal to those of a core that takes them."""
    from stream.settings import Settings
    from stream.workers.learner_core import LearnerCore
    from stream.workers.progressive import progressive_values

    s = Settings.load(overrides={"models": ["linear-bt"], "feature_names": ["a", "b"]})
    cores = [LearnerCore(s), LearnerCore(s, curve=False)]
    for core in cores:
        core.process_batch(core.new_source(s.topic_preferences, 0, {}), _records(clear_signal_events(300)))
        core.end_curve()
    with_pts, without = cores
    assert len(with_pts.drain_curve()) >= 20 and without.drain_curve() == []
    a, b = (progressive_values(*c.progressive["linear-bt"]) for c in cores)
    assert b == pytest.approx(a, rel=1e-12)


def test_the_report_labels_versions_and_explains_its_rows_and_diagonals(tmp_path):
    from stream.report import write_report

    def rec(method, model, v):
        return {"schema_version": 1, "request_id": f"{method}{v}", "method": method, "model_name": model,
                "model_version": v, "feature_names": ["a", "b"], "values": [0.5, -0.25], "base_value": 0.0,
                "prediction": 0.25, "compute_time_s": 0.001, "created_at": 0.0, "extra": {}}

    records = [rec("linear-shapley", "linear-bt", v) for v in (1, 4, 7)] + [rec("capacity-shapley", "capacity", 3)]
    summary = {"dataset": "x", "learner_cpu_s": 2.5, "learner_cpu_examples": 2500,
               "progress": [{"events": n, "model": "linear-bt", "accuracy": 0.8, "roc_auc": 0.9} for n in (10, 100, 1000)]}
    page = write_report(tmp_path, summary, records).read_text()
    assert "How to read this report" in page
    assert "learner_cpu_s</b>: CPU seconds of the learner worker process" in page
    assert "learner_cpu_examples</b>: Examples the learner learned" in page
    assert "diagonal of a distributional transition heatmap is left blank" in page
    assert "Model versions differ between methods" in page and "capacity-shapley (capacity) v3" in page
    assert "linear-shapley (linear-bt) v1–v7" in page and "model v1–v7" in page   # the section header: the range


def test_the_front_pages_are_short_and_lose_nothing():
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text(encoding="utf-8")
    bench = (root / "BENCHMARKS.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 220 and len(bench.splitlines()) <= 400   # before: 414 and 2,262
    top = "\n".join(readme.splitlines()[:40])
    assert "make demo" in top and "make test" in top
    assert "## Architecture" in readme and "prefstream.preferences" in readme and "Event contract" in readme
    for page in sorted((root / "docs").glob("*.md")):                      # every doc page is linked
        assert f"(docs/{page.name})" in readme, page.name
    # BENCHMARKS.md is generated, and links every dated results page (the history lives there)
    spec = importlib.util.spec_from_file_location("make_benchmarks_md", root / "bench" / "make_benchmarks_md.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    for md in sorted((root / "bench" / "results").glob("*.md")):
        assert f"(bench/results/{md.name})" in bench, md.name
    assert {a for a, *_ in gen.ORDER} == {p.stem for p in (root / "bench" / "results").glob("*.md")}
    assert "| figure | anchor (same run) | ratio | goal | load average | command |" in bench
    # what left the README is kept in docs/
    hist = (root / "docs" / "history.md").read_text(encoding="utf-8")
    assert "## Why Faust went" in hist and "4,276 events/s" in hist
    arch = (root / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert "## Layout" in arch and "Why there is no single `prefstream` import name" in arch


def test_a_reused_report_folder_starts_a_fresh_learning_curve(tmp_path):
    # the learner appends to progress_log: a second `make demo` into reports/demo read both runs' points
    from stream.demo.run import _fresh
    from stream.demo.summary import read_curve

    log = tmp_path / "learning_curve.jsonl"
    log.write_text(json.dumps({"events": 4, "model": "capacity", "accuracy": 0.5, "roc_auc": 0.5}) + "\n")
    assert _fresh(log) == log and not log.exists() and read_curve(log) is None
    assert _fresh(log) == log  # nothing there: fine
