"""The HTML report opened in headless Chromium: every plot must load.

The report is built from a small offline run on real data (the first 500 Train choices):
the same learners (capacity — ADMM-RDA, monotone — and a refitted GPM) and the same registry
explainers the explainer worker runs, called in-process on real examples, plus one Train choice
explained as a click session. The page sets ``data-images-total`` / ``data-images-loaded`` on
``<body>`` once loaded; Chromium's ``--dump-dom`` shows them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from tests.conftest import skip_or_fail

pytestmark = [pytest.mark.chromium, pytest.mark.timeout(300)]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
N = 500


def _example(ev):
    from stream.contract import parse_preference

    return parse_preference(json.dumps(ev).encode())


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory):
    """(summary, records) of an in-process run on the first N Train choices."""
    from stream import models as builtin
    from stream import registry
    from stream.adapters import load_dataset
    from stream.demo import _train_session, default_model_params
    from stream.settings import Settings

    builtin.register_all()
    ds = load_dataset("train")
    models = ["capacity", "gpm"]
    params = default_model_params(ds, models, {"refit_every": 10_000, "min_train": 150})
    s = Settings.load(None, {"models": models, "feature_names": list(ds.feature_names), "model_params": params})
    learners = {m: registry.get_model(m).factory(s, s.params_for(m)) for m in models}
    events = list(ds.to_events(0, N))
    examples = [_example(e) for e in events]
    from sklearn.metrics import roc_auc_score

    progress, hits = [], {m: [] for m in models}
    for k, ex in enumerate(examples):
        for m, lr in learners.items():
            try:
                p = lr.predict_proba_one(ex.left, ex.right)[1]
                hits[m].append((ex.outcome == 1, p))
            except Exception:  # noqa: BLE001 - the GPM predicts only once fitted
                pass
            lr.learn_one(ex.left, ex.right, ex.outcome)
            if k == 200 and hasattr(lr, "refit"):
                lr.refit()
        if k % 50 == 49:
            for m in models:
                y = np.array([h[0] for h in hits[m]], dtype=bool)
                p = np.array([h[1] for h in hits[m]], dtype=float)
                if 0 < y.sum() < len(y):
                    progress.append({"events": k + 1, "model": m, "accuracy": float(np.mean(y == (p > 0.5))),
                                     "roc_auc": float(roc_auc_score(y, p))})
    records = []
    rng = np.random.default_rng(0)
    explained = [examples[i] for i in range(300, N, 25)]
    for m, lr in learners.items():
        for method, fn in sorted(registry.explainers_for(m).items()):
            if getattr(fn, "session_only", False):
                ev = events[310]
                ctx = registry.ExplainContext(model_name=m, model_version=3, background=examples[:256], rng=rng,
                                              params={"session": _train_session(ev)})
                jobs = [[examples[310]]]
            else:
                ctx = registry.ExplainContext(model_name=m, model_version=3, background=examples[:256], rng=rng)
                jobs = [[ex] for ex in explained]
            for job in jobs:
                e = fn(lr, job, ctx)
                e.model_name, e.model_version = m, 3
                records += e.to_records(instance_ids=[x.event_id for x in job])
    summary = {"dataset": "train", "events_sent": N, "progress": progress,
               "explanations_total": len(records)}
    return summary, records


def test_offline_run_covers_every_method(offline_run):
    _, records = offline_run
    methods = {r["method"] for r in records}
    assert {"capacity-shapley", "capacity-interaction", "sharp-rank", "sharp-pairwise", "distributional-bernoulli",
            "distributional-categorical", "pref-shap"} <= methods


def test_every_image_of_the_report_loads_in_headless_chromium(offline_run, tmp_path):
    if not os.path.exists(CHROMIUM):
        skip_or_fail("Debian's chromium is not installed (apt-get install -y chromium; .ci/run does it)")
    from stream.report import write_report

    summary, records = offline_run
    index = write_report(tmp_path / "report", summary, records)
    pngs = sorted(p.name for p in index.parent.glob("*.png"))
    assert "progress.png" in pngs and len(pngs) >= 8
    html = index.read_text()
    srcs = re.findall(r'<img src="([^"]+)"', html)
    assert sorted(set(srcs)) == sorted(set(srcs) & set(pngs)), "an <img> points at a file that was not written"
    profile = tmp_path / "chromium-profile"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
           "--virtual-time-budget=5000", "--dump-dom", index.resolve().as_uri()]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    body = re.search(r"<body[^>]*>", res.stdout)
    assert body, res.stdout[:2000]
    total = re.search(r'data-images-total="(\d+)"', body.group(0))
    loaded = re.search(r'data-images-loaded="(\d+)"', body.group(0))
    assert total and loaded, f"the page's load handler did not run: {body.group(0)}"
    assert int(total.group(1)) == len(srcs) > 0
    assert int(loaded.group(1)) == int(total.group(1))


def test_report_rebuilds_from_a_run_folder(offline_run, tmp_path):
    from stream.demo import rebuild_report
    from stream.report import write_report

    summary, records = offline_run
    run = tmp_path / "run"
    write_report(run, summary, records)
    with (run / "records.jsonl").open("w") as fh:
        for r in records:
            fh.write(json.dumps(r) + "\n")
    for p in run.glob("*.png"):
        p.unlink()
    path = rebuild_report(run, tmp_path / "again")
    assert path.is_file() and (tmp_path / "again" / "progress.png").is_file()
    assert len(list((tmp_path / "again").glob("*.png"))) >= 8
