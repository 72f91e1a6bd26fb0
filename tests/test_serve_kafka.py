"""``prefstream serve`` end to end: real broker, a real learner worker writing the snapshots, the server
as a real process, httpx as the client.

Oracles:
* rank and compare equal the in-process models rebuilt from the same snapshots (utility
  ``learner.score`` / ``X @ w``; for the GPM the mean of ``predict_proba_many`` over every ordered
  pair), to 1e-9, in all three candidate forms;
* explain equals the record the explainer worker's own code (:class:`ExplainerCore`) makes for
  the same pair, model version and seed;
* hot swap: a client loop during new snapshots sees 0 failed requests, source versions never
  going backwards, and never a source whose snapshot failed to load.
"""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from stream.serving.datamodels import ExplanationRecord
from tests.test_serve import Server, item_records
from tests.test_workers_kafka import Stack, metric_value, pref_event

pytestmark = pytest.mark.kafka

MODELS = ["linear-bt", "capacity", "gpm"]
GPM_PARAMS = {"gpm": {"min_train": 60, "refit_every": 100000}}
N_ITEMS = 30


def in_process(stack):
    """The live models rebuilt in this process from the snapshots on the model topic."""
    from stream.workers.live_models import LiveModels

    live = LiveModels()
    for k, v in stack.read("models", timeout=1.0):
        live.on_snapshot(k, v)
    return live


def catalog_matrix(ids):
    feats = {k: json.loads(v)["features"] for k, v in item_records(N_ITEMS)}
    return np.array([[feats[i][f] for f in "abc"] for i in ids])


@pytest.fixture(scope="module")
def live(kafka_bootstrap, kafka_options, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("serve-kafka")
    stack = Stack(kafka_bootstrap, kafka_options, tmp, partitions=2)
    srv = None
    try:
        srv = Server(stack.env(PREFSTREAM_SERVE_MODELS=",".join(MODELS)), tmp)
        r = srv.client.get("/readyz")
        assert r.status_code == 503 and sorted(r.json()["missing"]) == sorted(MODELS)
        stack.send("items", item_records(N_ITEMS))
        stack.start("learn", "--models", ",".join(MODELS), PREFSTREAM_MODEL_PARAMS=json.dumps(GPM_PARAMS),
                    PREFSTREAM_FEATURE_NAMES="a,b,c")
        rng = np.random.default_rng(1)
        stack.send("preferences", [pref_event(i, rng) for i in range(300)])
        ready = stack.wait(lambda: srv.client.get("/readyz").status_code == 200, 120, "/readyz 200")
        assert ready

        more = iter(range(300, 10**6))

        def settled():   # the server holds exactly what is on the topic, and the GPM is refitted on both sources
            mine = in_process(stack)
            if mine.get("gpm") is None or not all(p.learner.model is not None for p in mine.get("gpm").sources.values()):
                # the learner refits when it learns: after a rebalance restored an unrefitted GPM from its
                # snapshot, only new events make it refit
                stack.send("preferences", [pref_event(next(more), rng) for _ in range(4)])
            models = {m["model"]: m for m in srv.client.get("/v1/models").json()["models"]}
            gpm = mine.get("gpm")
            return (gpm is not None and len(gpm.sources) == 2 and all(p.learner.model is not None for p in gpm.sources.values())
                    and all(m in models and models[m]["version"] == mine.model_version(m) and models[m]["ready"]
                            for m in MODELS) and mine)

        mine = stack.wait(settled, 180, "the server to load every final snapshot", poll=1.0)
        yield stack, srv, mine
    finally:
        if srv is not None:
            srv.close()
        stack.close()


def test_rank_and_compare_agree_with_the_in_process_models(live):
    stack, srv, mine = live
    ids = [f"i{i}" for i in range(0, N_ITEMS, 2)] + ["i1", "i3"]
    X = catalog_matrix(ids)
    for name in MODELS:
        mv = mine.get(name)
        lr = mv.learner
        if name == "capacity":
            want = lr.score(X)
        elif name == "linear-bt":
            want = X @ lr.weights
        else:   # mean P(i ≻ j) over the other candidates, from the learner's own batch probabilities
            n = len(ids)
            P = lr.predict_proba_many(np.repeat(X, n, 0), np.tile(X, (n, 1))).reshape(n, n)
            want = (P.sum(1) - np.diag(P)) / (n - 1)
        forms = {"ids": {"ids": ids},
                 "columns": {"columns": {"feature_names": ["c", "a", "b"], "rows": X[:, [2, 0, 1]].tolist(), "ids": ids}},
                 "items": {"items": [{"id": i, "features": dict(zip("abc", x))} for i, x in zip(ids, X.tolist())]}}
        # by id three times: computed on the candidates, then from the catalog rows prepared for this version
        for form, body in [("ids", forms["ids"]), *forms.items(), ("ids (catalog cache)", forms["ids"])]:
            r = srv.client.post("/v1/rank", json={"model": name, **body})
            assert r.status_code == 200, r.text
            out = r.json()
            assert out["version"] == mv.version and out["source_versions"] == mv.source_versions
            assert out["aggregate"] == ("mean_pairwise_probability" if name == "gpm" else "utility")
            got = {it["id"]: it["score"] for it in out["items"]}
            assert len(got) == len(ids)
            np.testing.assert_allclose([got[i] for i in ids], want, rtol=0, atol=1e-9, err_msg=f"{name} {form}")
            scores = [it["score"] for it in out["items"]]
            assert scores == sorted(scores, reverse=True) and [it["rank"] for it in out["items"]] == list(range(1, len(ids) + 1))
        # compare: P(left ≻ right) of the learner itself
        pairs = [(ids[k], ids[-1 - k]) for k in range(6)]
        XL, XR = catalog_matrix([a for a, _ in pairs]), catalog_matrix([b for _, b in pairs])
        want_p = lr.predict_proba_many(XL, XR)
        for (a, b), p in zip(pairs, want_p):
            out = srv.client.post("/v1/compare", json={"model": name, "left": {"id": a}, "right": {"id": b}}).json()
            assert out["version"] == mv.version and abs(out["probability"] - p) <= 1e-9, (name, a, b)


@pytest.mark.parametrize("name,method", [("capacity", "capacity-shapley"), ("capacity", "sharp-pairwise"),
                                         ("gpm", "pref-shap")])
def test_explain_equals_the_explainer_workers_record(live, name, method):
    from stream.contract import ItemCatalog, parse_item
    from stream.settings import Settings
    from stream.workers.explainer import ExplainerCore, ExplainJob

    stack, srv, mine = live
    seed = 1234
    r = srv.client.post("/v1/explain", json={"model": name, "method": method, "left": {"id": "i4"},
                                             "right": {"id": "i7"}, "request_id": "q-1", "seed": seed})
    assert r.status_code == 200, r.text
    got = ExplanationRecord.model_validate(r.json()).model_dump()
    # the explainer worker's code on the same snapshots, items, pair and seed (no preference reservoir)
    core = ExplainerCore(Settings.load(None, {}, environ={}))
    for k, v in stack.read("models", timeout=1.0):
        core.on_snapshot(k, v)
    core.catalog = ItemCatalog()
    for k, v in item_records(N_ITEMS):
        core.catalog.upsert(parse_item(v, key=k))
    feats = dict(core.catalog.items())
    from stream.contract import PreferenceExample

    ex = PreferenceExample(event_id="q-1", timestamp=0.0, left=feats["i4"], right=feats["i7"], outcome=0, context=None,
                           weight=1.0, left_id="i4", right_id="i7")
    job = ExplainJob([ex], models=[name], methods=[method], origin="serve")
    plan = [(n, m, lr, v, fn, seed) for n, m, lr, v, fn, _ in core.plan(job)]
    (want,) = core.explain(job, plan)
    assert got["model_version"] == want["model_version"] == mine.model_version(name)
    for key in ("request_id", "model_name", "method", "feature_names", "values", "base_value", "prediction", "data"):
        if isinstance(want[key], list) and want[key] and isinstance(want[key][0], float):
            np.testing.assert_allclose(got[key], want[key], rtol=0, atol=1e-9, err_msg=key)
        else:
            assert got[key] == want[key], key
    assert got["extra"]["origin"] == "serve"


@pytest.mark.parametrize("name", MODELS)
def test_the_default_explanation_is_of_the_pair_asked(live, name):
    """"Why A over B" without a method explains that pair: swapping the sides negates every value
    (skew-symmetry), another pair gets other values, and the record's prediction is what
    /v1/compare says about the pair (its own scale: P(A ≻ B) or the margin whose σ it is)."""
    _, srv, _ = live
    default = srv.client.get("/v1/models").json()
    default = {m["model"]: m["default_method"] for m in default["models"]}[name]

    def explain(a, b):
        r = srv.client.post("/v1/explain", json={"model": name, "left": {"id": a}, "right": {"id": b}, "seed": 5})
        assert r.status_code == 200, r.text
        rec = r.json()
        assert rec["method"] == default
        return np.asarray(rec["values"]), rec["prediction"], rec["base_value"]

    def probability(a, b):
        return srv.client.post("/v1/compare", json={"model": name, "left": {"id": a}, "right": {"id": b}}).json()["probability"]

    ab, pred_ab, base_ab = explain("i4", "i7")
    ba, pred_ba, base_ba = explain("i7", "i4")
    other, _, _ = explain("i4", "i12")
    assert np.abs(ab).max() > 1e-6
    np.testing.assert_allclose(ba, -ab, rtol=0, atol=1e-9)                       # skew-symmetry
    assert np.abs(other - ab).max() > 1e-6                                      # the pair, not the model
    p = probability("i4", "i7")
    assert abs(base_ab + ab.sum() - pred_ab) <= 1e-9                            # efficiency
    if 0.0 <= pred_ab <= 1.0 and abs(base_ab - 0.5) <= 1e-9:                    # a probability game
        assert abs(pred_ab - p) <= 1e-6 and abs(pred_ba - (1 - p)) <= 1e-6
    else:                                                                       # a margin game
        assert abs(1 / (1 + np.exp(-pred_ab)) - p) <= 1e-6 and abs(pred_ba + pred_ab) <= 1e-9


def test_rank_with_explanations_of_the_top_k(live):
    _, srv, mine = live
    ids = [f"i{i}" for i in range(10)]
    out = srv.client.post("/v1/rank", json={"model": "capacity", "ids": ids, "top_k": 3,
                                            "explain": "capacity-shapley"}).json()
    assert len(out["items"]) == 3 and len(out["explanations"]) == 3
    order = [it["id"] for it in out["items"]]
    for k, rec in enumerate(out["explanations"]):   # item k against the next one in the ranking
        assert f":{order[k]}>" in rec["request_id"]
        if k + 1 < 3:
            assert rec["request_id"].endswith(f">{order[k + 1]}")
        assert rec["model_version"] == out["version"] and rec["method"] == "capacity-shapley"


def test_hot_swap_under_a_request_loop(live, kafka_options):
    from kafka import KafkaProducer

    stack, srv, mine = live
    start = {m: mine.model_version(m) for m in MODELS}
    stop = threading.Event()
    seen: dict[str, dict[str, list[int]]] = {m: {} for m in MODELS}
    failures: list = []
    count = [0]

    def loop():
        import httpx

        with httpx.Client(base_url=srv.client.base_url, timeout=30) as c:
            k = 0
            while not stop.is_set():
                name = MODELS[k % len(MODELS)]
                k += 1
                r = c.post("/v1/rank", json={"model": name, "ids": ["i1", "i2", "i3", "i4"]})
                count[0] += 1
                if r.status_code != 200:
                    failures.append((name, r.status_code, r.text))
                    continue
                for src, v in r.json()["source_versions"].items():
                    seen[name].setdefault(src, []).append(v)

    t = threading.Thread(target=loop)
    t.start()
    try:
        rng = np.random.default_rng(7)
        for chunk in range(4):   # new snapshots land while the loop runs
            stack.send("preferences", [pref_event(i, rng, prefix=f"hs{chunk}-") for i in range(150)])
            if chunk == 1:   # a snapshot that cannot load: counted, never served
                p = KafkaProducer(acks="all", **kafka_options)
                p.send(stack.topics["models"], key=b"capacity@bogus:0", value=b"not a snapshot")
                p.flush(30)
                p.close()
        srv.wait(lambda: all(m["version"] > start[m["model"]] for m in srv.client.get("/v1/models").json()["models"]
                             if m["model"] != "gpm"), 120, "new versions of linear-bt and capacity", poll=0.5)
        srv.wait(lambda: metric_value(srv.client.get("/metrics").text, "prefstream_model_load_failures_total",
                                      model="capacity") == 1, 60, "the bad snapshot to be counted")
    finally:
        stop.set()
        t.join(60)
    assert not failures, failures[:3]
    assert count[0] > 20
    for name in MODELS:
        for src, vs in seen[name].items():
            assert vs == sorted(vs), (name, src)        # never backwards within a source
            assert src != "bogus:0"
    assert any(len(set(vs)) > 1 for vs in seen["capacity"].values())   # the loop saw a swap
