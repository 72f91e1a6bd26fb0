"""File mode is stream mode: ``prefstream run`` learns in the learner worker's micro-batches.

The same file goes through :func:`stream.batch.run_batch` (refits inline, so both runs are
reproducible) and, by hand, through the worker's path —
:meth:`LearnerCore.process_batch` on micro-batches of ``batch_max_events`` messages, a snapshot
published whenever :meth:`LearnerCore.snapshot_due` says so after a batch (as
``stream.workers.learner`` does) — and the two must end with identical models, counts and
progressive metrics.
"""

import json

import numpy as np
import pytest

from stream.adapters import load_dataset
from stream.batch import _explain_jobs, progressive_values, run_batch
from stream.models import register_all
from stream.settings import Settings
from stream.workers.explainer import ExplainJob
from stream.workers.learner_core import LearnerCore

FAST_GPM = {"refit_every": 120, "min_train": 80, "drift": False,
            "model_params": {"penalty": 1e-4, "lengthscale_multiplier": 1.0, "max_centres": 60}}


def _settings(ds, batch_max_events):
    return Settings.load(overrides={
        "models": ["capacity", "gpm", "linear-bt"], "feature_names": ds.feature_names,
        "model_params": {"capacity": {"scaler": "minmax", "decreasing": ds.feature_names, "constraints": ["monotone"]},
                         "gpm": FAST_GPM},
        "snapshot_every_events": 100, "explain_sample_rate": 0.0, "batch_max_events": batch_max_events})


def _write(ds, path, n):
    lines = [json.dumps(ev) for ev in ds.to_events(stop=n)]
    lines.insert(37, '{"schema_version": 1, "event_id": "bad"')          # malformed: a dead letter mid-batch
    lines.insert(150, lines[140])                                          # a re-sent copy: dropped as a duplicate
    path.write_text("\n".join(lines) + "\n")
    return [line.encode() for line in lines]


def _worker_path(settings, raws):
    """The learner worker's handling of one partition, without Kafka: batches, then publish when due."""
    register_all()
    core = LearnerCore(settings)
    st = core.new_source(settings.topic_preferences, 0, {})
    dead = 0
    size = int(settings.batch_max_events)
    for start in range(0, len(raws), size):
        dead += len(core.process_batch(st, [(off, raws[off], None, None) for off in range(start, min(start + size, len(raws)))]))
        if core.snapshot_due(st):
            _records, _acks, versions = core.build_snapshots(st)
            core.snapshot_done(st, versions, True)
    return core, st, dead


def _arrays_equal(a, b, path=""):
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for k in a:
            _arrays_equal(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b, err_msg=path)
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _arrays_equal(x, y, f"{path}[{i}]")
    else:
        assert a == b or (a != a and b != b), (path, a, b)


@pytest.mark.parametrize("batch_max_events", [1, 64])
def test_run_equals_the_workers_batch_path(tmp_path, batch_max_events):
    ds = load_dataset("train")
    inp = tmp_path / "train.jsonl"
    raws = _write(ds, inp, 330)
    s = _settings(ds, batch_max_events)
    res = run_batch(inp, tmp_path / "out.jsonl", settings=s, progress=False, inline_refits=True)
    core, st, dead = _worker_path(s, raws)
    assert res.records == len(raws) == 332
    assert res.dead_letters == dead == 1
    assert res.duplicates == 1
    assert res.learned == {m: slot.count for m, slot in st.slots.items()} == {"capacity": 330, "gpm": 330, "linear-bt": 330}
    assert res.tally == core.tally
    for m, slot in st.slots.items():
        assert res.final[m] == progressive_values(*core.progressive[m])
        _arrays_equal(res.learners[m].state_dict(), slot.learner.state_dict(), m)
    assert res.refits >= 2 and st.slots["gpm"].learner.model_version == res.learners["gpm"].model_version


def test_batch_size_changes_what_is_scored_before_learning(tmp_path):
    """The micro-batch is real: one batch of everything is scored by the untrained models, batches
    of one by models that learned every earlier event (the per-event path), so the metrics differ."""
    ds = load_dataset("train")
    inp = tmp_path / "train.jsonl"
    _write(ds, inp, 330)
    one = run_batch(inp, tmp_path / "a.jsonl", settings=_settings(ds, 1), progress=False, inline_refits=True)
    big = run_batch(inp, tmp_path / "b.jsonl", settings=_settings(ds, 500), progress=False, inline_refits=True)
    assert one.learned == big.learned
    assert one.final["linear-bt"]["log_loss"] != big.final["linear-bt"]["log_loss"]


def test_sampled_events_are_explained_in_bounded_batches():
    ev = [object() for _ in range(19)]
    jobs = [ExplainJob([e]) for e in ev] + [ExplainJob([1, 2], session=True, params={"session": {}})]
    out = list(_explain_jobs(jobs, 8))
    assert [len(j.examples) for j in out] == [8, 8, 2, 3]          # the session job is not merged
    assert out[2].session and [x for j in out if not j.session for x in j.examples] == ev


def test_a_model_whose_first_background_fit_lands_after_the_last_event_is_named(tmp_path, caplog):
    """Background refits (the default) let file mode run on while the GPM fits: on a short file the
    first fit lands after the last event, so the GPM scored nothing — said in one warning that names
    --inline-refits, instead of a silent n/a; with --inline-refits the GPM scores and nothing is said."""
    import logging

    ds = load_dataset("train")
    inp = tmp_path / "train.jsonl"
    inp.write_text("\n".join(json.dumps(ev) for ev in ds.to_events(stop=200)) + "\n")
    s = Settings.load(overrides={
        "models": ["capacity", "gpm"], "feature_names": ds.feature_names, "explain_sample_rate": 0.0,
        "model_params": {"capacity": {"scaler": "minmax"}, "gpm": {**FAST_GPM, "min_train": 120, "refit_every": 10_000}},
        "batch_max_events": 500})         # one batch: the first fit is triggered after every event was scored
    with caplog.at_level(logging.WARNING, logger="stream.batch"):
        res = run_batch(inp, tmp_path / "bg.jsonl", settings=s, progress=False)
    said = [r.getMessage() for r in caplog.records if "--inline-refits" in r.getMessage()]
    assert res.learned == {"capacity": 200, "gpm": 200} and res.final["gpm"]["accuracy"] is None
    assert len(said) == 1 and said[0].startswith("model 'gpm' scored and explained none of the 200 events")
    caplog.clear()
    s2 = Settings.load(overrides={**{k: getattr(s, k) for k in ("models", "feature_names", "explain_sample_rate",
                                                                 "model_params")}, "batch_max_events": 50})
    with caplog.at_level(logging.WARNING, logger="stream.batch"):
        res = run_batch(inp, tmp_path / "inline.jsonl", settings=s2, progress=False, inline_refits=True)
    assert res.final["gpm"]["accuracy"] is not None
    assert not [r for r in caplog.records if "--inline-refits" in r.getMessage()]
