"""stream.monitoring.monitor: sliding-window global importances, bounded gauges, drift alarms and records."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from prometheus_client import generate_latest

from explainers._result import Explanation
from learners.exceptions import InvalidParameterError
from stream.metrics import build_metrics
from stream.monitoring.monitor import Monitor, drift_record_ok, ndcg

NAMES = [f"f{i}" for i in range(6)]


def expl(rows, model="m", method="linear-shapley", names=NAMES, version=3) -> Explanation:
    rows = np.atleast_2d(np.asarray(rows, dtype=float))
    return Explanation(values=rows, base_values=np.zeros(len(rows)), feature_names=list(names), method=method,
                       model_name=model, model_version=version)


def gauge(m, name, **labels):
    return m.registry.get_sample_value(name, labels)


# ------------------------------------------------------------------ nDCG
def test_ndcg_closed_forms():
    assert ndcg([3, 2, 1], [30, 20, 10], k=3) == pytest.approx(1.0, abs=1e-12)
    # reversed: (1 + 2/log2 3 + 3/2) / (3 + 2/log2 3 + 1/2)
    want = (1 + 2 / math.log2(3) + 1.5) / (3 + 2 / math.log2(3) + 0.5)
    assert ndcg([3, 2, 1], [1, 2, 3], k=3) == pytest.approx(want, abs=1e-15)
    # only the top k of the current ranking count: swapping ranks 3 and 4 changes nothing at k=2
    assert ndcg([4, 3, 2, 1], [4, 3, 1, 2], k=2) == pytest.approx(1.0, abs=1e-12)
    assert ndcg([0, 0], [1, 2]) == pytest.approx(1.0, abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 10, allow_nan=False, allow_subnormal=False), min_size=2, max_size=12),
       st.lists(st.floats(0, 10, allow_nan=False, allow_subnormal=False), min_size=12, max_size=12), st.floats(0.1, 100))
def test_ndcg_is_a_normalised_ranking_statistic(ref, cur, scale):
    cur = cur[: len(ref)]
    v = ndcg(ref, cur, k=5)
    assert 0.0 <= v <= 1.0 + 1e-12
    assert ndcg(ref, ref, k=5) == pytest.approx(1.0)
    assert ndcg(ref, [scale * c for c in cur], k=5) == pytest.approx(v)  # only the order of `current` matters


# ------------------------------------------------------------------ window and gauges
@settings(max_examples=30, deadline=None)
@given(st.integers(2, 40), st.integers(1, 120), st.integers(0, 2**31))
def test_window_means_equal_the_mean_of_the_last_rows(window, n, seed):
    rows = np.random.default_rng(seed).normal(size=(n, len(NAMES)))
    mon = Monitor(window=window, warmup=0, check_every=1000)
    for r in rows:  # one at a time, as the worker feeds it
        mon.observe(expl(r))
    last = rows[-window:]
    got = mon.global_importance("m", "linear-shapley")
    np.testing.assert_allclose([got[f] for f in NAMES], np.abs(last).mean(0), rtol=1e-9, atol=1e-12)
    w = mon._watch[("m", "linear-shapley")].window
    np.testing.assert_allclose(w.means()[0], last.mean(0), rtol=1e-9, atol=1e-12)


def test_topk_gauges_keep_cardinality_bounded_and_mass_conserved():
    m = build_metrics()
    mon = Monitor(m, top_k=2, window=10, warmup=0, check_every=10)
    base = np.array([5.0, -4.0, 3.0, 2.0, -1.0, 0.5])
    mon.observe(expl(np.tile(base, (10, 1))))
    feats = {s.labels["feature"] for s in m.global_mean_abs_phi.collect()[0].samples}
    assert feats == {"f0", "f1", "other"}
    assert gauge(m, "prefstream_global_mean_abs_phi", model="m", method="linear-shapley", feature="f1") == pytest.approx(4.0, abs=1e-12)
    assert gauge(m, "prefstream_global_mean_phi", model="m", method="linear-shapley", feature="f1") == pytest.approx(-4.0, abs=1e-12)
    # other = the sum of the rest: exported mass equals the total mean |φ|
    assert gauge(m, "prefstream_global_mean_abs_phi", model="m", method="linear-shapley", feature="other") == pytest.approx(6.5, abs=1e-12)
    assert gauge(m, "prefstream_global_mean_phi", model="m", method="linear-shapley", feature="other") == pytest.approx(4.5, abs=1e-12)
    # the ranking changes: f5 and f4 lead; f0/f1 series are removed, not left stale
    mon.observe(expl(np.tile([0.1, 0.1, 0.1, 0.1, -4.0, 5.0], (10, 1))))
    feats = {s.labels["feature"] for s in m.global_mean_abs_phi.collect()[0].samples}
    assert feats == {"f5", "f4", "other"}
    assert len(m.global_mean_phi.collect()[0].samples) == 3


def test_capacity_indices_export_top_pairs_plus_other():
    m = build_metrics()
    mon = Monitor(m, top_k=2)
    e = expl([0.5, 0.3, 0.2], method="capacity-interaction", names=["a", "b", "c"])
    e.extra = {"pairs": [["a", "b", -0.3], ["b", "c", 0.2], ["a", "c", 0.1]]}
    mon.observe(e.to_records())
    assert gauge(m, "prefstream_capacity_interaction", model="m", pair="a×b") == pytest.approx(-0.3, abs=1e-12)
    assert gauge(m, "prefstream_capacity_interaction", model="m", pair="b×c") == pytest.approx(0.2, abs=1e-12)
    assert gauge(m, "prefstream_capacity_interaction", model="m", pair="other") == pytest.approx(0.1)
    mon.observe(expl([0.5, 0.3, 0.2], method="capacity-shapley", names=["a", "b", "c"]))
    assert gauge(m, "prefstream_capacity_shapley", model="m", feature="a") == pytest.approx(0.5, abs=1e-12)
    assert gauge(m, "prefstream_capacity_shapley", model="m", feature="other") == pytest.approx(0.2)
    assert len(mon.history) == 0  # per-snapshot indices are not windowed


def test_non_finite_explanations_are_not_exported():
    m = build_metrics()
    mon = Monitor(m, window=5, warmup=0, check_every=1)
    mon.observe(expl([np.nan, 1, 1, 1, 1, 1]))
    assert mon.global_importance("m", "linear-shapley") == {}
    assert b"prefstream_global_mean_phi{" not in generate_latest(m.registry)


# ------------------------------------------------------------------ drift
def _stream(rng, n, weights):
    """φ_j = w_j · (x_left − x_right)_j with Gaussian feature differences: a linear model's Shapley values."""
    return rng.normal(size=(n, len(weights))) * np.asarray(weights)


def test_stationary_explanations_raise_no_alarm_and_a_swap_is_found_fast():
    m = build_metrics()
    mon = Monitor(m, window=500, warmup=500, check_every=50)
    rng = np.random.default_rng(0)
    w_before = np.array([4.0, 2.0, 1.0, 0.5, 0.25, 0.1])
    for _ in range(40):
        assert mon.observe(expl(_stream(rng, 500, w_before))) == []
    assert mon.alarms == []
    assert gauge(m, "prefstream_global_importance_ndcg", model="m", method="linear-shapley") > 0.99
    w_after = w_before[[2, 1, 0, 3, 4, 5]]  # the first and third features swap importance
    got, seen = [], 0
    while not got and seen < 5000:
        got = mon.observe(expl(_stream(rng, 50, w_after), version=4))
        seen += 50
    assert got, "no alarm within 5,000 explanations after the change"
    assert seen <= 1000
    (rec,) = got
    drift_record_ok(rec)
    assert rec["model"] == "m" and rec["version"] == 4 and rec["method"] == "linear-shapley"
    assert rec["kind"] in ("feature", "ranking")
    assert set(rec["features"][:2]) <= {"f0", "f2"} or rec["features"][0] in ("f0", "f2")
    assert gauge(m, "prefstream_drift_total", model="m", kind=rec["kind"]) == 1.0
    assert mon.drain() == [rec] and mon.drain() == []


def test_ranking_alarm_reports_ndcg_below_threshold():
    mon = Monitor(window=100, warmup=0, check_every=20, delta=1e-12, min_effect=1.0)  # feature detector off
    rng = np.random.default_rng(1)
    mon.observe(expl(_stream(rng, 300, [5, 4, 3, 2, 1, 0.5])))
    assert mon.alarms == []
    for _ in range(20):
        mon.observe(expl(_stream(rng, 20, [0.5, 1, 2, 3, 4, 5])))
    (rec,) = [a for a in mon.alarms]
    drift_record_ok(rec)
    assert rec["kind"] == "ranking" and rec["statistic"]["name"] == "ndcg"
    assert rec["statistic"]["value"] < 0.9 and rec["statistic"]["threshold"] == 0.9
    assert rec["windows"] == {"reference": 100, "current": 100}


def test_model_drift_fires_on_loss_increase_only():
    m = build_metrics()
    mon = Monitor(m, loss_warmup=500)
    rng = np.random.default_rng(2)

    def feed(n, acc):  # a calibrated model of accuracy `acc`: p = acc on the true side
        out = []
        for _ in range(n):
            y = bool(rng.random() < 0.5)
            right = rng.random() < acc
            out += mon.observe_loss("lin", y, acc if (y == right) else 1 - acc, version=7)
        return out

    assert feed(3000, 0.6) + feed(3000, 0.9) == []  # stationary, then better: no alarm
    got = feed(3000, 0.6)
    assert got and got[0]["kind"] == "model" and got[0]["statistic"]["name"] == "log_loss_increase"
    drift_record_ok(got[0])
    assert got[0]["statistic"]["after"] > got[0]["statistic"]["before"]
    assert gauge(m, "prefstream_drift_total", model="lin", kind="model") >= 1.0


def test_parameters_are_checked():
    with pytest.raises(InvalidParameterError, match="'window' parameter of Monitor"):
        Monitor(window=1)
    with pytest.raises(InvalidParameterError, match="ndcg_threshold"):
        Monitor(ndcg_threshold=1.5)


def test_drift_schema_rejects_unknown_kind():
    import jsonschema

    mon = Monitor()
    rec = mon._record("m", 1, "ranking", "x", ["a"], "ndcg", 0.5, 0.9, 10, 10, 20)
    drift_record_ok(rec)
    with pytest.raises(jsonschema.ValidationError):
        drift_record_ok({**rec, "kind": "vibes"})


def test_drift_schema_is_valid_draft_2020_12_and_loadable_by_name():
    from jsonschema import Draft202012Validator

    from stream.contract import SCHEMA_DIR, load_schema

    schema = load_schema("drift")
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)
    assert (SCHEMA_DIR / "drift.v1.json").is_file()


# ------------------------------------------------------------------ worker hooks and the report
def test_worker_cores_feed_the_monitor_and_export_gauges():
    """LearnerCore → snapshot → ExplainerCore (the workers without Kafka): explanations reach the monitor."""
    import json

    from stream import registry
    from stream.settings import Settings
    from stream.workers.explainer import ExplainerCore
    from stream.workers.learner import LearnerCore

    registry.models()
    s = Settings.load(overrides={"models": ["linear-bt"], "explain_sample_rate": 1.0, "snapshot_every_events": 20, "snapshot_min_seconds": 0,
                                 "monitor_window": 20, "monitor_warmup": 0, "monitor_check_every": 10}, environ={})
    learner, explainer = LearnerCore(s), ExplainerCore(s)
    st = learner.new_source(s.topic_preferences, 0, {})
    rng = np.random.default_rng(0)
    w = np.array([3.0, -1.0, 0.2])
    for k in range(300):
        xl, xr = rng.normal(size=3), rng.normal(size=3)
        ev = {"schema_version": 1, "event_id": f"e{k}", "timestamp": 1.7e9 + k, "outcome": 1 if w @ (xl - xr) > 0 else -1,
              "left": {"features": dict(zip("abc", map(float, xl)))}, "right": {"features": dict(zip("abc", map(float, xr)))}}
        raw = json.dumps(ev).encode()
        learner.process(st, k, raw)
        if learner.snapshot_due(st):
            recs, _a, versions = learner.build_snapshots(st)
            for key, v in recs:
                explainer.on_snapshot(key, v)
            learner.snapshot_done(st, versions, True)
        job = explainer.on_preference(raw)
        if job is not None and (plan := explainer.plan(job)):
            explainer.explain(job, plan)
    imp = explainer.monitor.global_importance("linear-bt", "linear-shapley")
    assert list(imp)[0] == "a"  # the largest true weight leads the global importance
    reg = explainer.metrics.registry
    assert reg.get_sample_value("prefstream_global_mean_abs_phi",
                                {"model": "linear-bt", "method": "linear-shapley", "feature": "a"}) \
        == explainer.monitor.history[-1]["mean_abs"]["a"]  # gauges hold the last check's window
    assert reg.get_sample_value("prefstream_drift_total", {"model": "linear-bt", "kind": "ranking"}) == 0.0
    assert 0.9 <= reg.get_sample_value("prefstream_global_importance_ndcg",
                                       {"model": "linear-bt", "method": "linear-shapley"}) <= 1.0
    assert learner.monitor._loss["linear-bt"][1] > 250  # every scored event reached the loss detector
    assert learner.metrics.registry.get_sample_value("prefstream_drift_total", {"model": "linear-bt", "kind": "model"}) == 0.0


def test_report_plots_importances_over_time_with_alarms(tmp_path):
    from stream.monitoring.plots import plot_importance_drift
    from stream.report import write_report

    rng = np.random.default_rng(4)
    rows = np.vstack([_stream(rng, 400, [5, 4, 3, 2, 1, 0.5]), _stream(rng, 400, [0.5, 1, 2, 3, 4, 5])])
    recs = expl(rows, model="lin").to_records(instance_ids=[f"i{k}" for k in range(len(rows))])
    mon = Monitor(window=100, warmup=0, check_every=20)
    mon.observe(recs)
    assert mon.alarms and all(a["statistic"]["value"] < 0.9 or a["kind"] == "feature" for a in mon.alarms)
    fig = plot_importance_drift(mon.history, mon.alarms, tmp_path / "d.png")
    ax = fig.axes[0]
    assert (tmp_path / "d.png").stat().st_size > 10_000
    assert len(ax.lines) >= 6 + len(mon.alarms)  # one line per top feature, one marker per alarm
    index = write_report(tmp_path / "rep", {"dataset": "synthetic"}, recs)
    page = index.read_text()
    assert "Global importance and drift" in page
    assert (tmp_path / "rep" / "drift-linear-shapley-lin.png").is_file()


def test_prefstream_run_writes_drift_records_and_the_report_marks_them(tmp_path):
    """`prefstream run` (stream.batch.run_batch): a preference swap mid-file becomes drift records."""
    import json

    from stream.batch import run_batch
    from stream.settings import Settings

    rng = np.random.default_rng(5)
    lines = []
    for k in range(6000):
        w = np.array([3.0, 0.3, 0.1]) if k < 3000 else np.array([0.1, 0.3, 3.0])
        xl, xr = rng.normal(size=3), rng.normal(size=3)
        lines.append(json.dumps({"schema_version": 1, "event_id": f"e{k}", "timestamp": 1.7e9 + k,
                                 "outcome": 1 if w @ (xl - xr) > 0 else -1,
                                 "left": {"features": dict(zip("abc", map(float, xl)))},
                                 "right": {"features": dict(zip("abc", map(float, xr)))}}))
    inp = tmp_path / "in.jsonl"
    inp.write_text("\n".join(lines) + "\n")
    s = Settings.load(overrides={"models": ["linear-bt"], "explain_sample_rate": 1.0, "snapshot_every_events": 50,
                                 "monitor_window": 200, "monitor_warmup": 300, "monitor_check_every": 20}, environ={})
    run_batch(inp, tmp_path / "out.jsonl", settings=s, progress=False, report_dir=tmp_path / "rep")
    drift = [json.loads(x) for x in (tmp_path / "out.drift.jsonl").read_text().splitlines()]
    for rec in drift:
        drift_record_ok(rec)
    expl = [d for d in drift if d["kind"] != "model"]
    assert expl and all(d["model"] == "linear-bt" and d["method"] == "linear-shapley" for d in expl)
    assert all(d["position"] > 3000 for d in expl)  # none before the swap (one explanation per event)
    assert {"a", "c"} & set(expl[0]["features"])
    assert any(d["kind"] == "model" for d in drift)  # the loss went up at the swap
    assert "Global importance and drift" in (tmp_path / "rep" / "index.html").read_text()
