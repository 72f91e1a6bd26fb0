"""The served GPM on 1 and on 3 partitions: the same Pokémon duels, the served model's AUC on held-out duels.

Issue 30 item 2. One run, for ``P`` in (1, 3), on the real broker:

1. fresh topics, the preference topic with ``P`` partitions; the first ``--train`` (3,000) duels of
   ``--data-dir``/pokemon preloaded (key = event id, so the broker's partitioner spreads them);
2. one ``python -m stream worker learn --models gpm`` at the stream's GPM defaults (hold-out grid of
   :data:`learners.refit_jobs.DEFAULT_MODEL_PARAMS`, 5,000-pair windows), with ``min_train`` = the
   training duels and no count/drift trigger: exactly one refit, once every duel is stored — on one
   partition by one learner, on three by the worker's one group refit over the three windows
   (:mod:`learners.refit_group`);
3. the served model: the model topic read into :class:`stream.workers.live_models.LiveModels` (what
   ``prefstream serve`` holds), its AUC on the next ``--test`` (2,000) duels; then a real
   ``prefstream serve`` on the same topics: ``examples_seen`` of ``/v1/models``, and ``/v1/compare`` on 20
   held-out duels checked against the in-process probabilities (``max_compare_diff``).

For context (not a goal): ``auc_largest_part_alone_p3``, a GPM fitted in-process at the same settings on the
duels of the 3-partition run's largest partition only — what the served model was before the group refit
(the merge served the biggest part when the parts' length-scales differed).

The last line is exactly::

    auc_gpm_p1=… auc_gpm_p3=… examples_served_p3=…

Goal: ``auc_gpm_p3 ≥ auc_gpm_p1 − 0.005``. Reproduce: ``python bench/gpm_partitions.py`` (a broker on
``$PREFSTREAM_BOOTSTRAP`` or 127.0.0.1:9092; ``deploy/with-broker.sh`` starts one).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench.worker_run import create_run_topics, delete_topics, latest_snapshots, stop_worker  # noqa: E402
from stream.demo.workers import free_port  # noqa: E402


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def events(ds, lo: int, hi: int) -> list[tuple[bytes, bytes]]:
    import orjson

    base = list(ds.to_events())
    return [(e["event_id"].encode(), orjson.dumps(e)) for e in base[lo:hi]]


def preload(boot: str, topic: str, records) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": boot, "acks": "all", "enable.idempotence": True, "linger.ms": 20})
    for k, v in records:
        p.produce(topic, v, k)
    assert p.flush(120) == 0


def served_version(boot: str, topic: str):
    """The GPM as ``prefstream serve`` holds it: every latest snapshot of the model topic in a LiveModels."""
    from stream.models import register_all
    from stream.workers.live_models import LiveModels

    register_all()
    live = LiveModels()
    for k, v in latest_snapshots({"bootstrap_servers": boot}, topic).items():
        live.on_snapshot(k, v)
    return live.get("gpm")


def partitions_of(boot: str, topic: str) -> dict[int, list[bytes]]:
    """Event ids (keys) per partition of ``topic``."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(enable_auto_commit=False, group_id=None, consumer_timeout_ms=2000, bootstrap_servers=boot)
    tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic) or [])]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    out: dict[int, list[bytes]] = {}
    for m in c:
        out.setdefault(m.partition, []).append(m.key)
    c.close()
    return out


def run(boot: str, ds, partitions: int, n_train: int, XLt, XRt, yt, tmp: Path, timeout: float) -> dict:
    import httpx

    from learners.metrics import roc_auc
    from stream.demo import write_settings_toml

    topics, opts, u = create_run_topics("bench.gpmparts", boot, partitions=partitions)
    cfg = write_settings_toml(tmp / f"p{partitions}-{u}.toml", {
        "bootstrap_servers": boot, **{f"topic_{k}": v for k, v in topics.items()},
        "consumer_group": f"bench-gpmparts-{u}", "models": ["gpm"], "feature_names": list(ds.feature_names),
        "model_params": {"gpm": {"min_train": n_train, "refit_every": None, "drift": False}},
        "snapshot_every_seconds": 1.0, "state_dir": str(tmp / f"state-{u}"), "log_level": "WARNING"})
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PREFSTREAM_CONFIG=str(cfg))
    env = {k: v for k, v in env.items() if not k.startswith("PREFSTREAM_") or k in ("PREFSTREAM_CONFIG",)}
    worker = srv = None
    try:
        preload(boot, topics["preferences"], events(ds, 0, n_train))
        worker = subprocess.Popen([sys.executable, "-m", "stream", "worker", "learn", "--config", str(cfg)], cwd=REPO,
                                  env=env, stdout=open(tmp / f"learn-p{partitions}.log", "w"), stderr=subprocess.STDOUT)
        t0 = time.perf_counter()
        mv = None
        while time.perf_counter() - t0 < timeout:
            mv = served_version(boot, topics["models"])
            if mv is not None and sum(p.training_count for p in mv.sources.values()) >= n_train:
                fits = {getattr(p.learner.model, "fit_id", id(p)) if p.learner.model is not None else None
                        for p in mv.sources.values() if p.training_count}
                if len(fits) == 1 and None not in fits:   # every partition's latest snapshot holds the fit
                    break
            if worker.poll() is not None:
                raise SystemExit(f"the learner exited with {worker.returncode}; see {tmp}/learn-p{partitions}.log")
            time.sleep(2.0)
        else:
            raise SystemExit(f"no fitted GPM on {partitions} partitions after {timeout:g} s")
        fit_s = time.perf_counter() - t0
        p = mv.learner.predict_proba_many(XLt, XRt)
        auc = roc_auc(yt, p)
        port = free_port()
        srv = subprocess.Popen([sys.executable, "-m", "stream", "serve", "--config", str(cfg), "--port", str(port),
                                "--models", "gpm"], cwd=REPO, env=env, stdout=open(tmp / f"serve-p{partitions}.log", "w"),
                               stderr=subprocess.STDOUT)
        client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if client.get("/readyz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        model = {}
        while time.monotonic() < deadline:   # the server read every snapshot the in-process copy holds
            model = next((m for m in client.get("/v1/models").json()["models"] if m["model"] == "gpm"), {})
            if model.get("version") == mv.version:
                break
            time.sleep(0.5)
        names = list(ds.feature_names)
        diff = 0.0
        for i in range(20):
            body = {"model": "gpm", "left": {"features": dict(zip(names, map(float, XLt[i])))},
                    "right": {"features": dict(zip(names, map(float, XRt[i])))}}
            diff = max(diff, abs(client.post("/v1/compare", json=body).json()["probability"] - float(p[i])))
        client.close()
        parts = {s: part.training_count for s, part in sorted(mv.sources.items()) if part.training_count}
        fits = {getattr(part.learner.model, "fit_id", None) for part in mv.sources.values() if part.learner.model}
        return {"auc": auc, "examples_seen": int(model["examples_seen"]), "n_train_fit": int(mv.learner.model.n_train_),
                "parts": parts, "fits": len(fits), "max_compare_diff": diff, "fit_wait_s": fit_s,
                "by_partition": partitions_of(boot, topics["preferences"]) if partitions > 1 else None}
    finally:
        for proc in (srv, worker):
            if proc is not None:
                stop_worker(proc, 30)
        delete_topics(opts, topics.values())


def largest_part_alone(ds, by_partition: dict, XLt, XRt, yt) -> tuple[float, int]:
    """AUC of a GPM fitted in-process on the largest partition's duels alone (the old merge's choice)."""
    from learners.metrics import roc_auc
    from learners.refit import RefittingGPM

    keys = {k.decode() for k in max(by_partition.values(), key=len)}
    idx = np.array([i for i, e in enumerate(ds.to_events()) if e["event_id"] in keys])
    lr = RefittingGPM(list(ds.feature_names), refit_every=None, drift=False, min_train=len(idx))
    lr.learn_many(ds.XL[idx], ds.XR[idx], ds.outcome[idx])
    lr.refit()
    return roc_auc(yt, lr.predict_proba_many(XLt, XRt)), len(idx)


def main(argv=None) -> int:
    import tempfile

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=os.environ.get("PREFSTREAM_DATA_DIR", str(REPO.parent / "shared" / "data")))
    ap.add_argument("--train", type=int, default=3000)
    ap.add_argument("--test", type=int, default=2000)
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--bootstrap", default=os.environ.get("PREFSTREAM_BOOTSTRAP", "127.0.0.1:9092"))
    ap.add_argument("--no-baseline", action="store_true", help="Skip the largest-partition-alone context fit.")
    a = ap.parse_args(argv)
    from stream.adapters import load_dataset

    ds = load_dataset("pokemon", data_dir=a.data_dir)
    lo, hi = a.train, a.train + a.test
    XLt, XRt, yt = ds.XL[lo:hi], ds.XR[lo:hi], ds.outcome[lo:hi]
    print(f"# bench/gpm_partitions.py --train {a.train} --test {a.test}: Pokémon duels 0..{a.train - 1} streamed, "
          f"{lo}..{hi - 1} held out; load average {load()}", flush=True)
    res = {}
    with tempfile.TemporaryDirectory(prefix="prefstream-gpmparts-") as tmp:
        for P in (1, 3):
            r = res[P] = run(a.bootstrap, ds, P, a.train, XLt, XRt, yt, Path(tmp), a.timeout)
            print(f"p{P}: served AUC {r['auc']:.4f}; /v1/models examples_seen {r['examples_seen']}; fit on "
                  f"{r['n_train_fit']} pairs (90 % of the window, 10 % hold-out); {r['fits']} fit(s) over partitions "
                  f"{r['parts']}; /v1/compare − in-process ≤ {r['max_compare_diff']:.1e}; first snapshot of the fit "
                  f"after {r['fit_wait_s']:.1f} s; load average {load()}", flush=True)
    if not a.no_baseline and res[3]["by_partition"]:
        auc0, n0 = largest_part_alone(ds, res[3]["by_partition"], XLt, XRt, yt)
        print(f"context: auc_largest_part_alone_p3={auc0:.4f} (a GPM on the largest partition's {n0} duels alone, "
              f"what the merge served before); load average {load()}", flush=True)
    print(json.dumps({P: {k: v for k, v in r.items() if k != "by_partition"} for P, r in res.items()}, default=str))
    print(f"auc_gpm_p1={res[1]['auc']:.4f} auc_gpm_p3={res[3]['auc']:.4f} examples_served_p3={res[3]['examples_seen']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
