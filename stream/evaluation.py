"""Hold-out ranking evaluation per person: NDCG@k, HR@k and AUC per model beside a popularity baseline (``prefstream evaluate``).

Split: the *last visit or choice of each person* is held out — the pairs at that person's latest
timestamp (``holdout_last``) — and everything else is learned in stream order (a personal model
with its ``user_ids``). Each held-out person is one ranking: the candidates are the distinct items
of their held-out pairs, the relevant ones those that won a comparison and lost none (the bought
products of a basket, the chosen mode of a choice). A model ranks the candidates by its value for
that person (``score(X, user_id=…)`` of the personal models, ``score(X)`` of a capacity, otherwise
the margin against the first candidate, which orders the items of any utility-difference model).

Metrics, averaged over the held-out people (Järvelin & Kekäläinen 2002 for NDCG, binary relevance):

* NDCG@k = DCG@k / IDCG@k, DCG@k = Σ_{rank r ≤ k, relevant} 1 / log2(r + 1);
* HR@k = 1 when a relevant item is in the top k;
* AUC = ROC AUC of P(left preferred) over all held-out pairs (scores' difference for popularity).

``popularity`` ranks by how many learned comparisons the item's id won (ties broken at random, seed 0).

Examples
--------
>>> ndcg_at_k(np.array([3.0, 2.0, 1.0]), np.array([False, True, False]), k=10)   # relevant item ranked 2nd
0.6309297535714575
>>> hr_at_k(np.array([3.0, 2.0, 1.0]), np.array([False, False, True]), k=2)
0.0
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from learners.exceptions import InvalidInputError

__all__ = ["dataset_from_records", "evaluate_file", "evaluate_split", "format_table", "holdout_last", "hr_at_k",
           "ndcg_at_k"]


def _ranks(scores: np.ndarray) -> np.ndarray:
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    r = np.empty(len(order), dtype=np.int64)
    r[order] = np.arange(1, len(order) + 1)
    return r


def ndcg_at_k(scores: np.ndarray, relevant: np.ndarray, k: int = 10) -> float:
    """NDCG@k of one ranking (binary relevance); NaN without a relevant item."""
    relevant = np.asarray(relevant, dtype=bool)
    n_rel = int(relevant.sum())
    if n_rel == 0:
        return math.nan
    r = _ranks(scores)[relevant]
    dcg = float(np.sum(1.0 / np.log2(r[r <= k] + 1.0)))
    idcg = float(np.sum(1.0 / np.log2(np.arange(1, min(k, n_rel) + 1) + 1.0)))
    return dcg / idcg


def hr_at_k(scores: np.ndarray, relevant: np.ndarray, k: int = 10) -> float:
    """1.0 when a relevant item ranks in the top k, else 0.0; NaN without a relevant item."""
    relevant = np.asarray(relevant, dtype=bool)
    if not relevant.any():
        return math.nan
    return float((_ranks(scores)[relevant] <= k).any())


def holdout_last(users, timestamps) -> np.ndarray:
    """Bool mask of the pairs at each person's latest timestamp (pairs without a person are never held out)."""
    last: dict = {}
    for u, t in zip(users, timestamps):
        if u is not None and (u not in last or t > last[u]):
            last[u] = t
    return np.array([u is not None and t == last[u] for u, t in zip(users, timestamps)], dtype=bool)


def _scorer(model, personal: bool):
    if personal:
        return lambda X, u: np.asarray(model.score(X, user_id=u), dtype=np.float64)
    if callable(getattr(model, "score", None)):
        return lambda X, u: np.asarray(model.score(X), dtype=np.float64)
    return lambda X, u: np.asarray(model.margin_many(X, np.repeat(X[:1], len(X), axis=0)), dtype=np.float64)


def evaluate_split(ds, models: Mapping[str, object], holdout: np.ndarray, k: int = 10, chunk: int = 4096,
                   seed: int = 0) -> dict:
    """Learn the pairs outside ``holdout`` in order, then rank each held-out person's candidates.

    Parameters
    ----------
    ds : PairwiseDataset
        With ``users``.
    models : dict of name to learner
        Fresh learners; personal ones (``learner.personal``) get the ``user_ids``.
    holdout : ndarray of bool, shape (n_pairs,)
    k : int, default 10

    Returns
    -------
    dict
        ``{name: {"ndcg", "hr", "auc", "people"}}`` for every model and ``"popularity"``.
    """
    if ds.users is None:
        raise InvalidInputError(f"{ds.name}: evaluation per person needs a person on every pair (user_id).")
    holdout = np.asarray(holdout, dtype=bool)
    train = np.flatnonzero(~holdout)
    test = np.flatnonzero(holdout)
    if not len(test):
        raise InvalidInputError(f"{ds.name}: nothing is held out (no person has a last visit apart from the rest).")
    users = np.asarray(ds.users, dtype=object)
    XL, XR, Y = ds.XL, ds.XR, ds.outcome
    for model in models.values():
        personal = getattr(model, "personal", False)
        for s in range(0, len(train), chunk):
            idx = train[s:s + chunk]
            kw = {"user_ids": users[idx].tolist()} if personal else {}
            model.learn_many(XL[idx], XR[idx], Y[idx], **kw)
    # popularity: wins of each item id among the learned pairs
    ids = np.asarray(ds.item_ids, dtype=object)
    winner = np.where(Y[train] > 0, ds.left[train], ds.right[train])
    wins: dict = {}
    for i in ids[winner[Y[train] != 0]].tolist():
        wins[i] = wins.get(i, 0) + 1
    rng = np.random.default_rng(seed)
    groups: dict = {}
    for j in test.tolist():
        groups.setdefault(users[j], []).append(j)
    out = {name: {"ndcg": [], "hr": [], "p": []} for name in (*models, "popularity")}
    scorers = {name: _scorer(m, getattr(m, "personal", False)) for name, m in models.items()}
    for u, rows in groups.items():
        rows = np.asarray(rows)
        win = np.where(Y[rows] > 0, ds.left[rows], ds.right[rows])
        lose = np.where(Y[rows] > 0, ds.right[rows], ds.left[rows])
        strict = Y[rows] != 0
        cand = np.unique(np.concatenate([ds.left[rows], ds.right[rows]]))
        rel = np.isin(cand, win[strict]) & ~np.isin(cand, lose[strict])
        X = ds.item_features[cand]
        for name, score in scorers.items():
            s = score(X, u)
            out[name]["ndcg"].append(ndcg_at_k(s, rel, k))
            out[name]["hr"].append(hr_at_k(s, rel, k))
        pop = np.array([wins.get(i, 0) for i in ids[cand].tolist()], dtype=np.float64) + 1e-3 * rng.random(len(cand))
        out["popularity"]["ndcg"].append(ndcg_at_k(pop, rel, k))
        out["popularity"]["hr"].append(hr_at_k(pop, rel, k))
    from sklearn.metrics import roc_auc_score

    strict = test[Y[test] != 0]
    y_true = Y[strict] == 1
    res = {}
    for name, model in models.items():
        kw = {"user_ids": users[strict].tolist()} if getattr(model, "personal", False) else {}
        p = model.predict_proba_many(XL[strict], XR[strict], **kw)
        res[name] = p
    popl = np.array([wins.get(i, 0) for i in ids[ds.left[strict]].tolist()], dtype=np.float64)
    popr = np.array([wins.get(i, 0) for i in ids[ds.right[strict]].tolist()], dtype=np.float64)
    res["popularity"] = popl - popr
    final = {}
    for name, acc in out.items():
        auc = float(roc_auc_score(y_true, res[name])) if 0 < y_true.sum() < len(y_true) else math.nan
        final[name] = {"ndcg": float(np.nanmean(acc["ndcg"])), "hr": float(np.nanmean(acc["hr"])), "auc": auc,
                       "people": int(np.sum(~np.isnan(acc["ndcg"])))}
    return final


def dataset_from_records(records, name: str = "file", feature_names=None):
    """A :class:`~stream.adapters.PairwiseDataset` from preference records with inline features (two item rows per event).

    Raises
    ------
    InvalidInputError
        A record whose item has no inline features, or items with other feature names than the first record's.
    """
    from stream.adapters import PairwiseDataset
    from stream.contract import decoding

    feats, ids, users, ts, y = [], [], [], [], []
    names = None
    for k, rec in enumerate(records):
        row = []
        for side in ("left", "right"):
            f = rec[side].get("features")
            if not f:
                raise InvalidInputError(f"{name}: event {rec.get('event_id')!r} has no inline features on its {side} "
                                        "item; evaluate needs them (the features of every item).")
            if names is None:
                names = list(feature_names) if feature_names else sorted(f)
            missing = [c for c in names if c not in f]
            if missing:
                raise InvalidInputError(f"{name}: event {rec.get('event_id')!r} lacks the features {missing[:8]} on its "
                                        f"{side} item (it has {sorted(f)[:8]}).")
            row.append([float(f[c]) for c in names])
            ids.append(rec[side].get("id") or f"{rec['event_id']}/{side}")
        feats.extend(row)
        users.append(rec.get("user_id"))
        ts.append(decoding._timestamp(rec["timestamp"]))
        y.append(int(rec["outcome"]))
    n = len(y)
    if not n:
        raise InvalidInputError(f"{name}: no preference events.")
    return PairwiseDataset(name=name, item_ids=ids, item_features=np.array(feats), feature_names=names,
                           left=np.arange(0, 2 * n, 2), right=np.arange(1, 2 * n, 2), outcome=np.array(y),
                           timestamps=np.array(ts), inline=True,
                           users=users if any(u is not None for u in users) else None)


def evaluate_file(path, settings, models, k: int = 10) -> tuple[dict, dict]:
    """``prefstream evaluate``: read a preference file (CSV or JSONL, the replay layout, with ``user_id``),
    hold out each person's last visit or choice, learn the rest with fresh ``models`` built from ``settings``,
    and score them.

    Returns
    -------
    (results, info)
        ``results`` as :func:`evaluate_split`; ``info`` = {"pairs", "held_out", "people", "skipped"}.

    Raises
    ------
    InvalidInputError
        No person in the file, items without inline features, an unknown model.
    """
    from pathlib import Path

    from stream import registry
    from stream.event_files import iter_records

    import stream

    stream.load_builtins()
    recs, skipped = [], 0
    for _line, rec in iter_records(path, "preference", on_error="skip"):
        recs.append(rec)
    ds = dataset_from_records(recs, Path(path).name, settings.feature_names or None)
    if ds.users is None:
        raise InvalidInputError(f"{Path(path).name} has no user_id: evaluate ranks per person (add a user_id column).")
    if not settings.feature_names:
        import dataclasses

        settings = dataclasses.replace(settings, feature_names=list(ds.feature_names))
    built = {}
    for name in models:
        spec = registry.get_model(name)
        built[name] = spec.factory(settings, settings.params_for(name))
    holdout = holdout_last(ds.users, ds.timestamps)
    res = evaluate_split(ds, built, holdout, k=k)
    info = {"pairs": len(ds), "held_out": int(holdout.sum()), "people": len({u for u in ds.users if u is not None})}
    return res, info


def format_table(results: dict, k: int) -> str:
    """One line per model: ``model  NDCG@k  HR@k  AUC  people``."""
    lines = [f"{'model':<24} {'NDCG@' + str(k):>9} {'HR@' + str(k):>8} {'AUC':>7} {'people':>7}"]
    for name, r in results.items():
        lines.append(f"{name:<24} {r['ndcg']:>9.4f} {r['hr']:>8.4f} {r['auc']:>7.4f} {r['people']:>7d}")
    return "\n".join(lines)
