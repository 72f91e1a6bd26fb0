"""The demo's last step: ask the running ``prefstream serve`` for a live ranking and one explanation.

The server (started beside the workers, :meth:`stream.demo.workers.Workers.start_server`) follows
the run's model and item topics. Once it is ready, :func:`query_server` ranks a handful of the
data set's items with the live capacity model (or the first model) — by catalog id when the data
set has a catalog, else with their inline features — and explains the best against the runner-up.

Examples
--------
>>> recs = [("preference", {"left": {"id": "a", "features": {"x": 1.0}}, "right": {"id": "b", "features": {"x": 2.0}}}),
...         ("preference", {"left": {"id": "a", "features": {"x": 1.0}}, "right": {"id": "c", "features": {"x": 0.5}}})]
>>> [c["id"] for c in demo_candidates(recs, [], k=5)]
['a', 'b', 'c']
>>> print(format_serve({"model": "capacity", "version": 7, "aggregate": "utility", "url": "http://h:1",  # doctest: +NORMALIZE_WHITESPACE
...                     "top": [{"id": "a", "score": 1.5}], "explanation": None, "latency_ms": {"rank": 2.0}}))
served by            http://h:1 (prefstream serve): top 1 items by the live capacity model, v7 (utility; rank 2.0 ms)
   1. a                      1.500
"""

from __future__ import annotations

import time

from stream.demo.errors import DemoError

__all__ = ["demo_candidates", "demo_person", "format_serve", "person_view", "query_server", "serve_command"]

#: "How this person differs", per personal model: the Shapley values of δ_u alone (stream/plugins/personal.py).
DEVIATION_METHODS = {"capacity-personal": "capacity-shapley-deviation", "linear-bt-personal": "linear-shapley-deviation"}


def demo_person(records) -> str | None:
    """The person with the most preference events of the run (the demo's personalized view), or None.

    >>> demo_person([("preference", {"user_id": "a"}), ("preference", {"user_id": "b"}),
    ...              ("preference", {"user_id": "b"}), ("click", {"user_id": "a"})])
    'b'
    >>> demo_person([("preference", {})]) is None
    True
    """
    from collections import Counter

    n = Counter(rec.get("user_id") for kind, rec in records if kind == "preference" and rec.get("user_id"))
    return n.most_common(1)[0][0] if n else None


def person_view(client, model: str, user_id: str, body: dict) -> dict:
    """One person's ranking of the demo's candidates beside the population's, and what sets them apart.

    ``body`` is the population's rank body (candidates, ``top_k``). The person's ranking is the same
    body with ``user_id``; "what sets them apart" is the model's :data:`DEVIATION_METHODS` (the Shapley values of
    the person's deviation δ_u alone) of their #1 against their #2, when the model has it.

    Returns
    -------
    dict
        ``{"model", "user_id", "personalized", "person_version", "top": [{"id", "score"}],
        "population_top": [ids], "apart": {"method", "top_features"} or None}``.
    """
    pop = client.post("/v1/rank", json={**body, "model": model}).json()
    me = client.post("/v1/rank", json={**body, "model": model, "user_id": user_id}).json()
    out = {"model": model, "user_id": user_id, "personalized": bool(me.get("personalized")),
           "person_version": me.get("person_version", 0),
           "top": [{"id": it["id"], "score": it["score"]} for it in me.get("items", [])],
           "population_top": [it["id"] for it in pop.get("items", [])], "apart": None}
    methods = {m["model"]: m["methods"] for m in client.get("/v1/models").json().get("models", [])}.get(model, [])
    method = DEVIATION_METHODS.get(model)
    if out["personalized"] and method in methods and len(out["top"]) >= 2:
        by_id = {x["id"]: x for x in body.get("items", [])}
        a, b = ({"id": out["top"][i]["id"]} if out["top"][i]["id"] not in by_id else by_id[out["top"][i]["id"]]
                for i in (0, 1))
        r = client.post("/v1/explain", json={"model": model, "method": method, "left": a, "right": b,
                                             "user_id": user_id})
        if r.status_code == 200:
            rec = r.json()
            pairs = sorted(zip(rec["feature_names"], rec["values"]), key=lambda p: -abs(_num(p[1])))
            out["apart"] = {"method": rec["method"], "top_features": [[n, _num(v)] for n, v in pairs[:3]]}
    return out


def serve_command(bootstrap: str, topics: dict, models: list) -> str:
    """The exact ``prefstream serve`` command for a kept demo run's topics (``prefstream demo --keep``).

    ``topics`` maps the demo's topic kinds (``"models"``, ``"items"``, ``"people"``, ...) to the run's topic
    names; the people changelog is named too, so a personal model is served per person.

    Examples
    --------
    >>> serve_command("127.0.0.1:9092", {"models": "prefstream.models.r1", "items": "prefstream.items.r1"}, ["gpm"])
    'prefstream serve --bootstrap 127.0.0.1:9092 --models gpm --set topic_models=prefstream.models.r1 --set topic_items=prefstream.items.r1'
    """
    import shlex

    parts = ["prefstream", "serve", "--bootstrap", bootstrap, "--models", ",".join(models)]
    for kind, setting in (("models", "topic_models"), ("items", "topic_items"), ("people", "topic_people")):
        if kind in topics:
            parts += ["--set", f"{setting}={topics[kind]}"]
    return " ".join(shlex.quote(p) for p in parts)


def demo_candidates(records, item_records, k: int = 8) -> list[dict]:
    """Up to ``k`` distinct items: ``{"id"}`` from the catalog, else ``{"id", "features"}`` from the events."""
    if item_records:
        return [{"id": str(r["item_id"])} for r in item_records[:k]]
    seen: dict[str, dict] = {}
    for kind, rec in records:
        sides = [rec.get("left"), rec.get("right")] if kind == "preference" else list(rec.get("shown") or [])
        for it in sides:
            if isinstance(it, dict) and it.get("id") is not None and isinstance(it.get("features"), dict):
                seen.setdefault(str(it["id"]), {"id": str(it["id"]), "features": it["features"]})
        if len(seen) >= k:
            break
    return list(seen.values())[:k]


def query_server(port: int, models: list[str], candidates: list[dict], check_alive=None, timeout_s: float = 90.0,
                 top_k: int = 5, person: str | None = None) -> dict:
    """Wait until the server is ready, rank ``candidates`` and explain #1 against #2; with ``person`` and a
    personal model among ``models``, also that person's view (:func:`person_view`, under ``"person"``).

    Returns
    -------
    dict
        ``{"url", "model", "version", "aggregate", "top": [{"id", "score"}], "explanation": {...} or None,
        "latency_ms": {"rank", "explain"}}``.

    Raises
    ------
    DemoError
        When the server does not become ready within ``timeout_s`` or refuses the ranking.
    """
    import httpx

    url = f"http://127.0.0.1:{port}"
    model = "capacity" if "capacity" in models else models[0]
    with httpx.Client(base_url=url, timeout=30) as c:
        deadline = time.monotonic() + timeout_s
        last = None
        while True:
            try:
                r = c.get("/readyz")
                last = r.text
                if r.status_code == 200:
                    break
            except httpx.TransportError as exc:
                last = repr(exc)
            if check_alive is not None:
                check_alive()
            if time.monotonic() > deadline:
                raise DemoError(f"prefstream serve was not ready within {timeout_s:g} s (last answer: {last}).")
            time.sleep(0.5)
        ids_only = all(set(cand) == {"id"} for cand in candidates)
        body = {"model": model, "top_k": top_k, **({"ids": [x["id"] for x in candidates]} if ids_only
                                                    else {"items": candidates})}
        t0 = time.perf_counter()
        r = c.post("/v1/rank", json=body)
        rank_ms = 1e3 * (time.perf_counter() - t0)
        if r.status_code != 200:
            raise DemoError(f"prefstream serve refused the demo ranking ({r.status_code}): {r.text[:300]}")
        ranked = r.json()
        out = {"url": url, "model": model, "version": ranked["version"], "aggregate": ranked["aggregate"],
               "source_versions": ranked["source_versions"],
               "top": [{"id": it["id"], "score": it["score"]} for it in ranked["items"]],
               "explanation": None, "latency_ms": {"rank": round(rank_ms, 2)}}
        if len(ranked["items"]) >= 2:
            by_id = {x["id"]: x for x in candidates}
            a, b = (by_id[ranked["items"][i]["id"]] for i in (0, 1))
            t0 = time.perf_counter()
            r = c.post("/v1/explain", json={"model": model, "left": a, "right": b})
            out["latency_ms"]["explain"] = round(1e3 * (time.perf_counter() - t0), 2)
            if r.status_code == 200:
                rec = r.json()
                pairs = sorted(zip(rec["feature_names"], rec["values"]), key=lambda p: -abs(_num(p[1])))
                out["explanation"] = {"method": rec["method"], "left": a["id"], "right": b["id"],
                                      "model_version": rec["model_version"], "prediction": rec["prediction"],
                                      "top_features": [[n, _num(v)] for n, v in pairs[:3]]}
            else:
                out["explanation"] = {"error": r.json().get("error"), "detail": r.json().get("detail")}
        personal = [m for m in models if m.endswith("-personal")]
        if person is not None and personal:
            out["person"] = person_view(c, personal[0], person, {k: v for k, v in body.items() if k != "model"})
    return out


def _num(v) -> float:
    """A record value as one number (interaction matrices and intervals: the first entry)."""
    while isinstance(v, list):
        v = v[0] if v else 0.0
    return float(v) if v is not None else 0.0


def format_serve(s: dict) -> list[str] | str:
    """Summary lines of :func:`query_server`'s result (a string; see the module example)."""
    lines = [f"served by            {s['url']} (prefstream serve): top {len(s['top'])} items by the live {s['model']} "
             f"model, v{s['version']} ({s['aggregate']}; rank {s['latency_ms']['rank']:.1f} ms)"]
    for k, it in enumerate(s["top"], 1):
        lines.append(f"  {k:2d}. {it['id']:22s} {it['score']:6.3f}")
    e = s.get("explanation")
    if e and "error" not in e:
        feats = ", ".join(f"{n} {v:+.3g}" for n, v in e["top_features"])
        lines.append(f"  why {e['left']} over {e['right']} ({e['method']}, v{e['model_version']}, "
                     f"{s['latency_ms'].get('explain', 0):.0f} ms; prediction {e['prediction']:.3g}): {feats}")
    elif e:
        lines.append(f"  explanation refused: {e['error']}: {e['detail']}")
    p = s.get("person")
    if p:
        lines.extend(format_person(p))
    return "\n".join(lines)


def format_person(p: dict) -> list[str]:
    r"""Lines of :func:`person_view`'s result.

    >>> print("\n".join(format_person({"model": "capacity-personal", "user_id": "42", "personalized": True,
    ...     "person_version": 12, "top": [{"id": "b", "score": 0.9}, {"id": "a", "score": 0.5}],
    ...     "population_top": ["a", "b"], "apart": {"method": "capacity-shapley-deviation",
    ...     "top_features": [["price", -0.31], ["time", 0.12]]}})))   # doctest: +NORMALIZE_WHITESPACE
    for person 42         capacity-personal, their state v12 (12 events learned): top 2 (population's order: a, b)
       1. b                       0.900  (population #2)
       2. a                       0.500  (population #1)
      what sets 42 apart (capacity-shapley-deviation, δ_u alone): price -0.31, time +0.12
    """
    if not p["personalized"]:
        return [f"for person {p['user_id']:14s} not personalized by {p['model']} (no learned state): the population's ranking"]
    pop = {i: k for k, i in enumerate(p["population_top"], 1)}
    lines = [f"for person {p['user_id']:14s} {p['model']}, their state v{p['person_version']} ({p['person_version']} "
             f"events learned): top {len(p['top'])} (population's order: {', '.join(p['population_top'])})"]
    for k, it in enumerate(p["top"], 1):
        where = f"population #{pop[it['id']]}" if it["id"] in pop else "not in the population's top"
        lines.append(f"  {k:2d}. {it['id']:22s} {it['score']:6.3f}  ({where})")
    a = p.get("apart")
    if a:
        feats = ", ".join(f"{n} {v:+.3g}" for n, v in a["top_features"])
        lines.append(f"  what sets {p['user_id']} apart ({a['method']}, δ_u alone): {feats}")
    return lines
