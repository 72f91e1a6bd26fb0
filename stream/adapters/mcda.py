"""Monotone multicriteria benchmark sets (ERA, ESL, LEV, SWD, CPU, CEV, BCC, DBS, MMG, MPG).

Read from ``monotone_mcda/tidy/<set>.csv`` in the data directory (GPLv3 repo / UCI data: not
shipped). Criteria are min-max normalised to [0, 1] upstream; directions come from
``metadata.json`` except for ``mpg``, whose c1–c4 (cylinders, displacement, horsepower, weight)
are *decreasing* although declared increasing (SOURCE.txt caveat) — they are flipped here.

:func:`load_mcda_pairs` turns the labelled alternatives into preference pairs: two alternatives
with different ``assignment_rank`` form a pair, the better-ranked (rank 1 = best) preferred.
"""

from __future__ import annotations

import csv
import json

import numpy as np

from learners.exceptions import InvalidParameterError
from stream.adapters import PairwiseDataset, resolve_data_dir

__all__ = ["MCDA_SETS", "load_mcda", "load_mcda_pairs"]

MCDA_SETS = ["bcc", "cev", "cpu", "dbs", "era", "esl", "lev", "mmg", "mpg", "swd"]


def load_mcda(name: str, data_dir=None) -> tuple[np.ndarray, np.ndarray, list[str], dict]:
    """One monotone set as arrays.

    Returns
    -------
    X : ndarray of shape (n, k), float64, in [0, 1] with *more is better* on every criterion
        (decreasing criteria are flipped x ↦ 1 − x).
    rank : ndarray of shape (n,), int64 — assignment rank, 1 = best class.
    criteria : list of str
    meta : dict — the set's entry in metadata.json (directions as read, before flipping).
    """
    if name not in MCDA_SETS:
        raise InvalidParameterError(f"Unknown monotone MCDA set {name!r}; choose one of {MCDA_SETS}.")
    d = resolve_data_dir(data_dir, "monotone_mcda") / "tidy"
    meta = json.loads((d / "metadata.json").read_text())[name]
    with (d / f"{name}.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    crit = list(meta["criteria"])
    X = np.array([[float(r[c]) for c in crit] for r in rows])
    directions = list(meta["directions"])
    if name == "mpg":
        directions[:4] = [-1, -1, -1, -1]
    lo, hi = X.min(axis=0), X.max(axis=0)
    X = (X - lo) / np.where(hi > lo, hi - lo, 1.0)  # SWD keeps raw 1-4 upstream
    for j, s in enumerate(directions):
        if s < 0:
            X[:, j] = 1.0 - X[:, j]
    rank = np.array([int(r["assignment_rank"]) for r in rows], dtype=np.int64)
    return X, rank, crit, meta


def load_mcda_pairs(name: str, data_dir=None, max_pairs: int | None = 20000, seed: int = 0) -> PairwiseDataset:
    """Preference pairs from a monotone set: alternatives of different classes, better class preferred.

    Sides are drawn at random (seeded) so both outcomes occur; at most ``max_pairs`` pairs are kept
    (uniform sample without replacement) to bound the stream.
    """
    X, rank, crit, _ = load_mcda(name, data_dir)
    i, j = np.triu_indices(len(X), k=1)
    keep = rank[i] != rank[j]
    i, j = i[keep], j[keep]
    rng = np.random.default_rng(seed)
    if max_pairs is not None and len(i) > max_pairs:
        sel = np.sort(rng.choice(len(i), size=max_pairs, replace=False))
        i, j = i[sel], j[sel]
    perm = rng.permutation(len(i))
    i, j = i[perm], j[perm]
    flip = rng.random(len(i)) < 0.5
    i, j = np.where(flip, j, i), np.where(flip, i, j)
    y = np.where(rank[i] < rank[j], 1, -1)
    return PairwiseDataset(name=f"mcda-{name}", item_ids=[f"{name}-a{k + 1}" for k in range(len(X))], item_features=X,
                           feature_names=crit, left=i, right=j, outcome=y, source="oso/pymcda datasets (tidy)",
                           licence="GPLv3 (pymcda) / UCI", criteria_directions={c: 1 for c in crit})
