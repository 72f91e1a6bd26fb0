"""The learners and explainers wired together (stream.models) through the Kafka-free batch runner.

Runs the same LearnerCore / ExplainerCore state machines as the workers over a real data file
(Train choices, bundled) and checks every explanation method's invariant on what it emitted.
"""

import json

import numpy as np
import pytest

from stream.adapters import load_dataset
from stream.batch import run_batch
from stream.settings import Settings

FAST_GPM = {"refit_every": 150, "min_train": 100, "drift": False,
            "model_params": {"penalty": 1e-4, "lengthscale_multiplier": 1.0, "max_centres": 80}}


def _settings(ds, rate=0.08, **kw):
    return Settings.load(overrides={
        "models": ["capacity", "gpm"], "feature_names": ds.feature_names,
        "model_params": {"capacity": {"scaler": "minmax", "decreasing": ds.feature_names, "constraints": ["monotone"]},
                         "gpm": FAST_GPM},
        "snapshot_every_events": 100, "explain_sample_rate": rate, **kw})


@pytest.fixture(scope="module")
def train_run(tmp_path_factory):
    ds = load_dataset("train")
    d = tmp_path_factory.mktemp("batch")
    inp = d / "train.jsonl"
    with open(inp, "w") as f:
        for ev in ds.to_events(stop=400):
            f.write(json.dumps(ev) + "\n")
        f.write('{"schema_version": 1, "event_id": "bad"\n')          # malformed JSON → dead letter
        bad = next(ds.to_events(start=400, stop=401))
        bad["left"]["features"]["price"] = 1e400                       # overflow → non-finite → dead letter
        f.write(json.dumps(bad).replace("inf", "1e400") + "\n")
    out = d / "out.jsonl"
    # refits inline: 402 events are learned long before a background GPM refit would land, and these
    # tests check what the explainers emit for both models
    res = run_batch(inp, out, settings=_settings(ds), progress=False, report_dir=d / "report", inline_refits=True)
    records = [json.loads(line) for line in open(out)]
    return ds, res, records, d


def test_counts_and_dead_letters(train_run):
    ds, res, records, d = train_run
    assert res.records == 402
    assert res.learned == {"capacity": 400, "gpm": 400}
    assert res.dead_letters == 2
    dead = [json.loads(line) for line in open(d / "out.dead-letters.jsonl")]
    assert sorted(x["reason"] for x in dead) == ["malformed_json", "non_finite"]
    assert res.refits >= 1


def test_every_method_present_with_model_versions(train_run):
    _, res, records, _ = train_run
    methods = {r["method"] for r in records}
    assert {"capacity-shapley", "capacity-interaction", "sharp-rank", "sharp-pairwise",
            "distributional-bernoulli", "pref-shap"} <= methods
    assert all(r["model_version"] >= 1 for r in records)
    assert (d := {r["model_name"] for r in records}) == {"capacity", "gpm"}, d


@pytest.mark.parametrize("method", ["pref-shap", "sharp-rank", "sharp-pairwise", "capacity-shapley", "capacity-interaction"])
def test_efficiency_of_emitted_values(train_run, method):
    _, _, records, _ = train_run
    recs = [r for r in records if r["method"] == method]
    assert recs
    for r in recs:
        assert abs(r["base_value"] + sum(r["values"]) - r["prediction"]) < 1e-6 * max(1.0, abs(r["prediction"]))


def test_distributional_bernoulli_records_are_distributions(train_run):
    _, _, records, _ = train_run
    for r in (r for r in records if r["method"] == "distributional-bernoulli"):
        T = np.asarray(r["extra"]["transition"])            # (d, 2, 2) from-class × to-class per feature
        assert np.all(T >= -1e-12) and np.allclose(T.sum(axis=(1, 2)), 1.0, atol=1e-9)
        if r["extra"].get("efficient"):
            assert abs(r["base_value"] + sum(r["values"]) - r["prediction"]) < 1e-6


def test_pref_shap_is_oriented_winner_vs_loser(train_run):
    ds, _, records, _ = train_run
    by_id = {f"train-{k}": k for k in range(len(ds))}
    for r in (r for r in records if r["method"] == "pref-shap"):
        k = by_id[r["request_id"]]
        y = ds.outcome[k]
        diff = (ds.XL[k] - ds.XR[k]) * y                          # x_winner − x_loser
        assert np.allclose(r["data"], diff)


def test_report_written(train_run):
    _, _, _, d = train_run
    html = (d / "report" / "index.html").read_text()
    assert html.count("<img") >= 6 and "unavailable" not in html


def test_click_sessions_give_categorical_values(tmp_path):
    """Train choices re-encoded as click sessions (shown = both trips, clicked = the chosen one)."""
    ds = load_dataset("train")
    inp = tmp_path / "clicks.jsonl"
    with open(inp, "w") as f:
        for k in range(300):
            trips = [{"id": ds.item_ids[i], "features": dict(zip(ds.feature_names, ds.item_features[i].tolist()))}
                     for i in (ds.left[k], ds.right[k])]
            chosen = trips[0]["id"] if ds.outcome[k] == 1 else trips[1]["id"]
            f.write(json.dumps({"schema_version": 1, "session_id": f"s{k}", "timestamp": 1.6e9 + k, "shown": trips,
                                "clicked": [chosen]}) + "\n")
    # micro-batches of 50 sessions, as a worker would take them: the first batch is scored by the
    # untrained model (p = 1/2, counted wrong), the later ones by a learned one
    s = _settings(ds, rate=0.1, models=["capacity"], batch_max_events=50)
    res = run_batch(inp, tmp_path / "out.jsonl", settings=s, kind="click", progress=False)
    recs = [json.loads(line) for line in open(tmp_path / "out.jsonl")]
    cat = [r for r in recs if r["method"] == "distributional-categorical"]
    assert res.learned["capacity"] == 300 and cat
    # every click-derived pair has the clicked item on the left: one class, AUC undefined (None, not 0.0)
    assert res.final["capacity"]["roc_auc"] is None and 0.0 < res.final["capacity"]["accuracy"] <= 1.0
    for r in cat:
        T = np.asarray(r["extra"]["transition"])
        assert T.shape == (4, 2, 2) and np.allclose(T.sum(axis=(1, 2)), 1.0, atol=1e-9)
    assert all(r["method"] == "distributional-categorical" for r in recs)   # session-only explainers only


def test_gpm_merge_is_the_weighted_ensemble():
    """Merging per-partition GPMs = count-weighted average of their decision functions."""
    from learners.refit import RefittingGPM
    from stream import registry

    rng = np.random.default_rng(0)
    parts = []
    for n in (150, 250):
        lr = RefittingGPM(["a", "b"], refit_every=None, min_train=50, drift=False,
                          model_params={"penalty": 1e-4, "lengthscale_multiplier": 1.0, "max_centres": 40})
        for _ in range(n):
            xl, xr = rng.normal(size=2), rng.normal(size=2)
            lr.learn_one(dict(a=xl[0], b=xl[1]), dict(a=xr[0], b=xr[1]), 1 if xl[0] + 0.5 * xl[1] > xr[0] + 0.5 * xr[1] else -1)
        lr.refit()
        parts.append((lr, n))
    merged = registry.merge_learners("gpm", parts)
    A, B = rng.normal(size=(20, 2)), rng.normal(size=(20, 2))
    want = sum(n * lr.model.decision_function(A, B) for lr, n in parts) / 400
    got = merged.model.decision_function(A, B)
    same_scaling = np.allclose(parts[0][0].model.lengthscales_, parts[1][0].model.lengthscales_) and \
        parts[0][0].model.item_constant_ == parts[1][0].model.item_constant_      # same item kernel (c + k)
    if same_scaling:
        assert np.allclose(got, want, rtol=1e-5, atol=1e-8)
    else:  # different length-scales: the part with most examples is used
        assert np.allclose(got, parts[1][0].model.decision_function(A, B))


def test_wide_data_group_one_hot_features_into_players(data_dir):
    """Pokémon's 18 type indicators are one player; a grouped value function sees whole groups."""
    from stream import models
    from stream.adapters import load_dataset

    names = load_dataset("pokemon", data_dir=data_dir).feature_names
    assert models.feature_groups(names) == {"type": [n for n in names if n.startswith("type_")]}
    assert models.feature_groups(["price", "time", "change", "comfort"]) == {}
    players, member = models._players(names)
    assert players == names[:8] + ["type"] and member.sum() == len(names) and member[-1].sum() == 18
    seen = []
    nu = models._on_features(lambda C: seen.append(C.copy()) or C.sum(axis=1).astype(float), member)
    out = nu(np.array([[False] * 8 + [True], [True] + [False] * 8]))
    np.testing.assert_allclose(out, [18.0, 1.0], rtol=1e-12)
    assert seen[0].shape == (2, len(names))


def test_short_file_with_default_settings_still_explains(tmp_path):
    """Fewer events than snapshot_every_events: the model is published before the first explanation."""
    ds = load_dataset("train")
    inp = tmp_path / "few.jsonl"
    with open(inp, "w") as f:
        for ev in ds.to_events(stop=60):
            f.write(json.dumps(ev) + "\n")
    s = Settings.load(overrides={"models": ["capacity"], "feature_names": ds.feature_names, "explain_sample_rate": 0.2})
    assert s.snapshot_every_events > 60
    res = run_batch(inp, tmp_path / "out.jsonl", settings=s, progress=False, report_dir=tmp_path / "rep")
    assert res.learned == {"capacity": 60} and res.dead_letters == 0     # raw features: minmax scaler by default
    assert res.explanations.get("capacity-shapley", 0) >= 1
    assert sum(1 for _ in open(tmp_path / "rep" / "records.jsonl")) == sum(res.explanations.values())


def test_clear_errors_for_bad_parameters_and_paths(tmp_path):
    from learners.exceptions import InvalidInputError, InvalidParameterError

    ds = load_dataset("train")
    inp = tmp_path / "x.jsonl"
    inp.write_text(json.dumps(next(ds.to_events())) + "\n")
    s = Settings.load(overrides={"models": ["gpm"], "feature_names": ds.feature_names,
                                 "model_params": {"gpm": {"nosuchparam": 3}}})
    with pytest.raises(InvalidParameterError, match=r"--param gpm\.<name>"):
        run_batch(inp, tmp_path / "o.jsonl", settings=s, progress=False)
    with pytest.raises(InvalidParameterError, match="is a directory"):
        run_batch(inp, tmp_path, settings=_settings(ds), progress=False)
    with pytest.raises(InvalidParameterError, match="is not a file"):
        run_batch(tmp_path, tmp_path / "o.jsonl", settings=_settings(ds), progress=False)
    with pytest.raises(InvalidInputError, match="is not a directory"):
        load_dataset("pokemon", data_dir=tmp_path / "nope")
