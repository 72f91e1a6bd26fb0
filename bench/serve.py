"""``prefstream serve`` under a compiled load generator (wrk), on Pokémon (d = 26), 100 candidates per request.

What it does, in one run:

1. creates fresh topics on the broker at ``--bootstrap``; sends the 800 Pokémon items to the item
   topic and ``--events`` preference events (by catalog id) to the preference topic;
2. starts a learner worker (``capacity`` and ``gpm``, the demo's parameters for Pokémon; the GPM
   refitted once, in a thread, at fixed hyper-parameters: λ = 1e-3, length-scale multiplier 1,
   item-kernel constant 1) and ``prefstream serve`` with one worker process; waits until the server
   serves both models and no new snapshot arrives;
3. drives the server with ``wrk -t1 -c<--connections> -d<--seconds>`` (never a Python load loop):

   * ``empty``: ``GET /healthz``, the same stack (uvicorn, uvloop, httptools, the middleware)
     answering a trivial endpoint — its ceiling on this machine, measured in the same run;
   * ``rank_ids_{capacity,gpm}``: ``POST /v1/rank`` with 100 catalog ids;
   * ``rank_inline_capacity``: the same 100 candidates inline, in the columnar form
     (``feature_names`` once, 100 rows of 26 numbers; the fastest inline form);
   * ``rank_p99_ms_{capacity,gpm}``: p99 latency by id at about half of the sustained rate
     (``--p99-connections`` connections, each pausing between requests so that the offered rate
     is half of the rate measured above; wrk's ``delay()``);
   * ``explain_p99_ms_prefshap``: ``POST /v1/explain`` (gpm, pref-shap, default budgets) from one
     connection;
   * ``rank_explain_p99_ms_{capacity,gpm}``: ``POST /v1/rank`` with 100 ids, ``top_k`` 5 and ``explain``
     (``capacity-shapley``, the GPM's ``pref-shap``) from one connection, beside the plain top-5 rank
     from one connection in the same run (the ratio is printed); ``rank_explain_errors`` counts their
     non-2xx answers and socket errors (an explanation past ``serve_rank_explain_deadline_s`` is marked
     missing in a 200, and one sampled answer's missing count is printed);
   * ``rank_p99_ms_personal``: ``POST /v1/rank`` with the same 100 ids for a person with state
     (``capacity-personal``, learned in-process on the same events given 40 synthetic people and
     published as a learner worker does: the snapshot without people, one ``prefstream.people``
     record per person) and ``recommend_p99_ms``: ``POST /v1/recommend``, the person's top 10 of
     the whole 800-item catalog; both at half their sustained rate, as ``rank_p99_ms_*``;
   * ``swap_errors``: non-2xx answers and socket errors of a ``--swap-seconds`` rank run while
     events keep flowing, so that the learner publishes a new snapshot about every second
     (the swaps counted from the server's ``prefstream_model_swaps_total``).

   Beside each run: wrk's CPU seconds (its rusage) and the server's (``/proc/<pid>/stat``).
4. prints one ``key=value`` line (below) and, with ``--out``, writes the figures as JSON.

Last line::

    empty_rps=… rank_ids_rps_capacity=… rank_ids_rps_gpm=… rank_inline_rps_capacity=… ids_over_empty_capacity=…
    ids_over_empty_gpm=… inline_over_empty_capacity=… rank_p99_ms_capacity=… rank_p99_ms_gpm=…
    explain_p99_ms_prefshap=… swap_errors=… rank_explain_p99_ms_capacity=… rank_explain_p99_ms_gpm=… rank_explain_errors=…
    rank_p99_ms_personal=… recommend_p99_ms=…

Reproduce: ``PREFSTREAM_DATA_DIR=../shared/data python bench/serve.py --out /tmp/serve.json`` (wrk from
Debian's ``wrk`` package; the broker of ``make broker-start``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench.worker_run import RUN_TOPIC_KINDS, create_run_topics, delete_topics, stop_worker  # noqa: E402
from stream.demo.workers import free_port  # noqa: E402

KEYS = ("empty_rps", "rank_ids_rps_capacity", "rank_ids_rps_gpm", "rank_inline_rps_capacity", "ids_over_empty_capacity",
        "ids_over_empty_gpm", "inline_over_empty_capacity", "rank_p99_ms_capacity", "rank_p99_ms_gpm",
        "explain_p99_ms_prefshap", "swap_errors", "rank_explain_p99_ms_capacity", "rank_explain_p99_ms_gpm",
        "rank_explain_errors", "rank_p99_ms_personal", "recommend_p99_ms")

#: The person whose requests are measured (one of the synthetic people of the personal model's stream).
PERSON = "u7"
N_PEOPLE = 40


# ----------------------------------------------------------------------------- wrk
def _lua(path: Path, method: str, body: bytes | None, delay_ms: int | None) -> Path:
    lines = [f'wrk.method = "{method}"', 'wrk.headers["Content-Type"] = "application/json"']
    if body is not None:
        bp = path.with_suffix(".json")
        bp.write_bytes(body)
        lines.append(f'local f = io.open("{bp}", "rb"); wrk.body = f:read("*a"); f:close()')
    if delay_ms:
        lines.append(f"function delay() return {int(delay_ms)} end")
    path.write_text("\n".join(lines) + "\n")
    return path


def _cpu_s(pid: int) -> float:
    """utime + stime of a process (seconds)."""
    parts = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def _latency_ms(text: str, label: str) -> float | None:
    m = re.search(rf"^\s*{label}\s+([\d.]+)(us|ms|s)\b", text, flags=re.M)
    if not m:
        return None
    return float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]


def wrk(url: str, tmp: Path, name: str, method: str = "GET", body: bytes | None = None, connections: int = 16,
        seconds: float = 10.0, delay_ms: int | None = None, server_pid: int | None = None) -> dict:
    """One wrk run: requests/s, latency percentiles (ms), errors, wrk's and the server's CPU seconds."""
    script = _lua(tmp / f"{name}.lua", method, body, delay_ms)
    cmd = ["wrk", "-t1", f"-c{connections}", f"-d{max(1, int(round(seconds)))}s", "--latency", "--timeout", "10s",
           "-s", str(script), url]
    cpu0 = _cpu_s(server_pid) if server_pid else 0.0
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = p.stdout.read().decode()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    cpu1 = _cpu_s(server_pid) if server_pid else 0.0
    if p.returncode != 0:
        raise RuntimeError(f"wrk failed ({p.returncode}): {out}")
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    total = re.search(r"(\d+) requests in", out)
    return {"name": name, "rps": rps, "requests": int(total.group(1)) if total else None,
            "p50_ms": _latency_ms(out, "50%"), "p90_ms": _latency_ms(out, "90%"), "p99_ms": _latency_ms(out, "99%"),
            "non_2xx": int(non2xx.group(1)) if non2xx else 0,
            "socket_errors": sum(int(x) for x in sock.groups()) if sock else 0,
            "wrk_cpu_s": round(ru.ru_utime + ru.ru_stime, 3), "server_cpu_s": round(cpu1 - cpu0, 3),
            "seconds": seconds, "connections": connections, "delay_ms": delay_ms}


# ----------------------------------------------------------------------------- the run
def _env(topics: dict, bootstrap: str, ds, extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env.update({f"PREFSTREAM_TOPIC_{k.upper()}": v for k, v in topics.items()})
    env.update({"PREFSTREAM_BOOTSTRAP_SERVERS": bootstrap, "PREFSTREAM_METRICS_PORT": "0",
                "PREFSTREAM_FEATURE_NAMES": ",".join(ds.feature_names), "OMP_NUM_THREADS": "1",
                "MKL_NUM_THREADS": "1", "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"})
    env.update(extra or {})
    return env


def _get(url: str, timeout: float = 5.0):
    import httpx

    try:
        return httpx.get(url, timeout=timeout)
    except httpx.TransportError:
        return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", default=os.environ.get("PREFSTREAM_BOOTSTRAP", "127.0.0.1:9092"))
    ap.add_argument("--events", type=int, default=1000, help="Preference events learned before the measurements.")
    ap.add_argument("--candidates", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=10.0, help="Seconds of each throughput run.")
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--p99-connections", type=int, default=4)
    ap.add_argument("--explain-seconds", type=float, default=15.0)
    ap.add_argument("--swap-seconds", type=float, default=60.0)
    ap.add_argument("--out", default=None, help="Write the figures as JSON here (default: print only).")
    args = ap.parse_args(argv)

    import httpx
    from kafka import KafkaProducer

    from stream.adapters import load_dataset
    from stream.demo.config import default_model_params

    ds = load_dataset("pokemon")
    params = default_model_params(ds, ["capacity", "gpm"])
    # one refit, at fixed hyper-parameters (the grid search would take minutes on a loaded machine; the
    # serving cost depends on the number of Nyström centres, not on λ or the length-scales)
    params["gpm"].update({"refit_every": 10**9, "drift": False,
                          "model_params": {"penalty": 1e-3, "lengthscale_multiplier": 1.0, "item_constant": 1.0}})
    topics, opts, run_id = create_run_topics("bench-serve", args.bootstrap, kinds=tuple(RUN_TOPIC_KINDS) + ("people",))
    tmp = Path(tempfile.mkdtemp(prefix="prefstream-bench-serve-"))
    procs: list[subprocess.Popen] = []
    load0 = os.getloadavg()
    try:
        producer = KafkaProducer(acks="all", linger_ms=20, **opts)
        for rec in ds.item_records():
            producer.send(topics["items"], key=str(rec["item_id"]).encode(), value=json.dumps(rec).encode())
        events = list(ds.to_events(0, None, by_id=True))
        for ev in events[: args.events]:
            producer.send(topics["preferences"], key=ev["event_id"].encode(), value=json.dumps(ev).encode())
        producer.flush(60)
        personal_state = _personal(producer, topics, ds, params["capacity"], events[: args.events])
        env = _env(topics, args.bootstrap, ds, {"PREFSTREAM_MODEL_PARAMS": json.dumps(params),
                                                 "PREFSTREAM_SNAPSHOT_EVERY_SECONDS": "1",
                                                 "PREFSTREAM_SNAPSHOT_EVERY_EVENTS": "100000",
                                                 "PREFSTREAM_CONSUMER_GROUP": f"bench-serve-{run_id}",
                                                 "PREFSTREAM_REFIT_EXECUTOR": "THREAD",
                                                 "PREFSTREAM_STATE_DIR": str(tmp / "state")})
        learner = subprocess.Popen([sys.executable, "-m", "stream", "worker", "learn", "--models", "capacity,gpm"],
                                   cwd=REPO, env=env, stdout=open(tmp / "learn.log", "w"), stderr=subprocess.STDOUT)
        procs.append(learner)
        port = free_port()
        server = subprocess.Popen([sys.executable, "-m", "stream", "serve", "--port", str(port), "--models",
                                   "capacity,gpm,capacity-personal"],
                                  cwd=REPO, env=env, stdout=open(tmp / "serve.log", "w"), stderr=subprocess.STDOUT)
        procs.append(server)
        base = f"http://127.0.0.1:{port}"

        def settled() -> dict | None:
            r = _get(base + "/v1/models")
            if r is None or r.status_code != 200:
                return None
            ms = {m["model"]: m for m in r.json()["models"]}
            if all(ms.get(k, {}).get("ready") and ms[k]["examples_seen"] >= args.events for k in ("capacity", "gpm")):
                return ms
            return None

        deadline = time.monotonic() + 900
        last = None
        extra = args.events
        while True:   # wait for both models with every event, then for a quiet second (no new version)
            ms = settled()
            if ms is None:   # the learner refits when it learns (e.g. after a rebalance restored an unrefitted GPM)
                for ev in events[extra:extra + 5]:
                    producer.send(topics["preferences"], key=ev["event_id"].encode(), value=json.dumps(ev).encode())
                producer.flush(30)
                extra += 5
            if ms is not None and last is not None and {k: v["version"] for k, v in ms.items()} == last:
                break
            last = None if ms is None else {k: v["version"] for k, v in ms.items()}
            for p in procs:
                if p.poll() is not None:
                    raise RuntimeError(f"a process exited early; logs in {tmp}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the models were not served within 900 s; logs in {tmp}")
            time.sleep(2.0)
        versions = last
        ids = [str(r["item_id"]) for r in ds.item_records()][: args.candidates]
        feats = {str(r["item_id"]): r["features"] for r in ds.item_records()}
        names = list(ds.feature_names)
        body_ids = {m: json.dumps({"model": m, "ids": ids}).encode() for m in ("capacity", "gpm")}
        body_top5 = {m: json.dumps({"model": m, "ids": ids, "top_k": 5}).encode() for m in ("capacity", "gpm")}
        body_cols = json.dumps({"model": "capacity", "columns": {"feature_names": names, "ids": ids,
                                                                 "rows": [[feats[i][f] for f in names] for i in ids]}}).encode()
        body_explain = json.dumps({"model": "gpm", "method": "pref-shap", "left": {"id": ids[0]},
                                   "right": {"id": ids[1]}}).encode()
        for b in list(body_ids.values()) + [body_cols]:   # every body answers 200 before it is measured
            r = httpx.post(base + "/v1/rank", content=b, headers={"Content-Type": "application/json"}, timeout=60)
            assert r.status_code == 200, r.text
        for _ in range(30):   # the first call builds the snapshot's Pref-SHAP kernel blocks (may pass the deadline)
            r = httpx.post(base + "/v1/explain", content=body_explain, headers={"Content-Type": "application/json"},
                           timeout=60)
            if r.status_code != 504:
                break
            time.sleep(1.0)
        assert r.status_code == 200, r.text

        body_person = json.dumps({"model": "capacity-personal", "ids": ids, "user_id": PERSON}).encode()
        body_recommend = json.dumps({"model": "capacity-personal", "user_id": PERSON, "top_k": 10}).encode()
        for path, b in (("/v1/rank", body_person), ("/v1/recommend", body_recommend)):   # a person with state
            for _ in range(60):
                r = httpx.post(base + path, content=b, headers={"Content-Type": "application/json"}, timeout=60)
                if r.status_code == 200 and r.json()["personalized"]:
                    break
                time.sleep(1.0)
            assert r.status_code == 200 and r.json()["personalized"], r.text
            assert r.json()["person_version"] == personal_state["version"], (r.json(), personal_state)

        res: dict = {"versions": versions, "load_before": load0, "person": {"user_id": PERSON, **personal_state}}
        spid = server.pid
        c, s = args.connections, args.seconds
        res["empty"] = wrk(base + "/healthz", tmp, "empty", connections=c, seconds=s, server_pid=spid)
        res["rank_ids_capacity"] = wrk(base + "/v1/rank", tmp, "ids_cap", "POST", body_ids["capacity"], c, s, server_pid=spid)
        res["rank_ids_gpm"] = wrk(base + "/v1/rank", tmp, "ids_gpm", "POST", body_ids["gpm"], c, s, server_pid=spid)
        res["rank_inline_capacity"] = wrk(base + "/v1/rank", tmp, "cols_cap", "POST", body_cols, c, s, server_pid=spid)
        pc = args.p99_connections
        for m in ("capacity", "gpm"):   # half the sustained rate: each connection pauses pc / (rate / 2) s
            rate = res[f"rank_ids_{m}"]["rps"]
            d = max(1, int(round(1e3 * pc / (rate / 2.0))))
            res[f"rank_half_{m}"] = wrk(base + "/v1/rank", tmp, f"half_{m}", "POST", body_ids[m], pc, s, d, spid)
        res["explain_prefshap"] = wrk(base + "/v1/explain", tmp, "explain", "POST", body_explain, 1, args.explain_seconds,
                                      server_pid=spid)
        # explanations inside the ranking (issue 29 item 4): one connection, the same 100 ids, top 5 explained each
        # against the next, beside the plain rank from one connection in the same run (the anchor of the ratio)
        for m, method in (("capacity", "capacity-shapley"), ("gpm", "pref-shap")):
            res[f"rank_one_{m}"] = wrk(base + "/v1/rank", tmp, f"one_{m}", "POST", body_top5[m], 1, args.explain_seconds,
                                       server_pid=spid)
            b = json.dumps({"model": m, "ids": ids, "top_k": 5, "explain": method}).encode()
            res[f"rank_explain_{m}"] = wrk(base + "/v1/rank", tmp, f"rank_explain_{m}", "POST", b, 1,
                                           args.explain_seconds, server_pid=spid)
            res[f"rank_explain_{m}"]["missing"] = _missing(base, b)
        # per person (issue 28): 100 candidates by id for a person with state, and the top 10 of the whole catalog
        res["rank_ids_personal"] = wrk(base + "/v1/rank", tmp, "ids_personal", "POST", body_person, c, s, server_pid=spid)
        res["recommend"] = wrk(base + "/v1/recommend", tmp, "recommend", "POST", body_recommend, c, s, server_pid=spid)
        for key, path, b in (("rank_ids_personal", "/v1/rank", body_person), ("recommend", "/v1/recommend", body_recommend)):
            d = max(1, int(round(1e3 * pc / (res[key]["rps"] / 2.0))))
            res[f"{key}_half"] = wrk(base + path, tmp, f"{key}_half", "POST", b, pc, s, d, spid)
        # hot swap: events keep flowing (a snapshot about every second) while wrk ranks
        swaps0 = _swaps(base)
        stop = threading.Event()

        def feed():
            k = extra
            while not stop.is_set() and k < len(events):
                for ev in events[k:k + 20]:
                    producer.send(topics["preferences"], key=ev["event_id"].encode(), value=json.dumps(ev).encode())
                producer.flush(30)
                k += 20
                stop.wait(0.5)

        t = threading.Thread(target=feed, daemon=True)
        t.start()
        try:
            res["swap_run"] = wrk(base + "/v1/rank", tmp, "swap", "POST", body_ids["capacity"], c, args.swap_seconds,
                                  server_pid=spid)
        finally:
            stop.set()
            t.join(30)
        res["swaps_during_swap_run"] = _swaps(base) - swaps0
        producer.close()
        res["load_after"] = os.getloadavg()
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                stop_worker(p)
        delete_topics(opts, topics.values())

    e = res["empty"]["rps"]
    fig = {"empty_rps": e, "rank_ids_rps_capacity": res["rank_ids_capacity"]["rps"],
           "rank_ids_rps_gpm": res["rank_ids_gpm"]["rps"], "rank_inline_rps_capacity": res["rank_inline_capacity"]["rps"]}
    fig["ids_over_empty_capacity"] = round(fig["rank_ids_rps_capacity"] / e, 3)
    fig["ids_over_empty_gpm"] = round(fig["rank_ids_rps_gpm"] / e, 3)
    fig["inline_over_empty_capacity"] = round(fig["rank_inline_rps_capacity"] / e, 3)
    fig["rank_p99_ms_capacity"] = res["rank_half_capacity"]["p99_ms"]
    fig["rank_p99_ms_gpm"] = res["rank_half_gpm"]["p99_ms"]
    fig["explain_p99_ms_prefshap"] = res["explain_prefshap"]["p99_ms"]
    fig["swap_errors"] = res["swap_run"]["non_2xx"] + res["swap_run"]["socket_errors"]
    fig["rank_explain_p99_ms_capacity"] = res["rank_explain_capacity"]["p99_ms"]
    fig["rank_explain_p99_ms_gpm"] = res["rank_explain_gpm"]["p99_ms"]
    fig["rank_explain_errors"] = sum(res[f"rank_explain_{m}"]["non_2xx"] + res[f"rank_explain_{m}"]["socket_errors"]
                                     for m in ("capacity", "gpm"))
    fig["rank_p99_ms_personal"] = res["rank_ids_personal_half"]["p99_ms"]
    fig["recommend_p99_ms"] = res["recommend_half"]["p99_ms"]
    res["figures"] = fig
    for k in ("empty", "rank_ids_capacity", "rank_ids_gpm", "rank_inline_capacity", "rank_half_capacity", "rank_half_gpm",
              "explain_prefshap", "rank_one_capacity", "rank_explain_capacity", "rank_one_gpm", "rank_explain_gpm",
              "rank_ids_personal", "rank_ids_personal_half", "recommend", "recommend_half", "swap_run"):
        r = res[k]
        print(f"{k:22s} {r['rps']:9.1f} req/s  p50 {r['p50_ms']} ms  p99 {r['p99_ms']} ms  c={r['connections']}"
              f"{' delay ' + str(r['delay_ms']) + ' ms' if r['delay_ms'] else ''}  non2xx {r['non_2xx']}  "
              f"wrk cpu {r['wrk_cpu_s']} s  server cpu {r['server_cpu_s']} s")
    for m in ("capacity", "gpm"):
        one, ex = res[f"rank_one_{m}"], res[f"rank_explain_{m}"]
        print(f"rank + explain top 5 ({m}): p99 {ex['p99_ms']} ms = {ex['p99_ms'] / one['p99_ms']:.2f} x the plain rank's "
              f"p99 {one['p99_ms']} ms (one connection, same run); explanations marked missing in a sampled answer: "
              f"{ex['missing']}")
    print(f"per person ({PERSON}, {res['person']['version']} events in their state): rank p99 "
          f"{fig['rank_p99_ms_personal']} ms vs the population's {fig['rank_p99_ms_capacity']} ms "
          f"({fig['rank_p99_ms_personal'] / fig['rank_p99_ms_capacity']:.2f} x); recommend (top 10 of "
          f"{ds.n_items} items) p99 {fig['recommend_p99_ms']} ms")
    print(f"swaps during the swap run: {res['swaps_during_swap_run']}; load average before {load0}, after {res['load_after']}")
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1))
    print(" ".join(f"{k}={fig[k]}" for k in KEYS))
    return 0


def _personal(producer, topics: dict, ds, cap_params: dict, events: list) -> dict:
    """Publish a ``capacity-personal`` learned in-process on the same events, each given one of
    :data:`N_PEOPLE` synthetic people (event k → person ``u<k mod N>``), as a learner worker publishes it:
    the snapshot without people on the model topic, one changelog record per person on the people
    topic. Returns the measured person's ``person_info``."""
    import numpy as np

    from stream import registry
    from stream.contract import encode_snapshot
    from stream.contract.people import encode_person, person_key
    from stream.models import register_all
    from stream.settings import Settings

    register_all()
    m = registry.get_model("capacity-personal").factory(Settings.load(None, {"feature_names": list(ds.feature_names)},
                                                                       environ={}), dict(cap_params))
    n = len(events)
    XL, XR = ds.XL[:n], ds.XR[:n]
    m.learn_many(XL, XR, np.asarray(ds.outcome[:n]), user_ids=[f"u{k % N_PEOPLE}" for k in range(n)])
    producer.send(topics["models"], key=b"capacity-personal@bench:0",
                  value=encode_snapshot("capacity-personal", 1, n, m.state_dict(people=False)))
    for user in m.people():
        producer.send(topics["people"], key=person_key("capacity-personal", user),
                      value=encode_person(m.person_state(user), source="bench:0", offset=n))
    producer.flush(60)
    return m.person_info(PERSON)


def _missing(base: str, body: bytes) -> int:
    """How many explanations one rank-with-explain answer marks missing (deadline passed)."""
    import httpx

    r = httpx.post(base + "/v1/rank", content=body, headers={"Content-Type": "application/json"}, timeout=60)
    return sum(1 for e in r.json().get("explanations") or [] if e.get("missing")) if r.status_code == 200 else -1


def _swaps(base: str) -> float:
    r = _get(base + "/metrics")
    total = 0.0
    for line in (r.text if r is not None else "").splitlines():
        if line.startswith("prefstream_model_swaps_total{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


if __name__ == "__main__":
    sys.exit(main())
