"""Duel data sets: Pokémon battles, chameleon and flat-lizard contests, ATP tennis, CEMS schools.

Each loader reads the files documented in the data set's ``SOURCE.txt`` and returns a
:class:`stream.adapters.PairwiseDataset`. For contests recorded as (winner, loser) the side on
which the winner appears is drawn from a seeded RNG (``seed``), so the stream carries both
outcomes; the data are unchanged otherwise.

Licences: Pokémon — unknown (research use); chameleons, flat lizards, CEMS — GPL ≥ 2
(R package BradleyTerry2); tennis — CC BY-NC-SA 4.0 (Jeff Sackmann). None is shipped in the
repository: they are read from the data directory (``--data-dir`` or ``$PREFSTREAM_DATA_DIR``).
"""

from __future__ import annotations

import csv
import math
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from learners.exceptions import InvalidInputError
from stream.adapters import PairwiseDataset, resolve_data_dir

__all__ = ["load_cems", "load_chameleons", "load_flatlizards", "load_pokemon", "load_tennis", "POKEMON_TYPES"]

POKEMON_TYPES = ["Bug", "Dark", "Dragon", "Electric", "Fairy", "Fighting", "Fire", "Flying", "Ghost", "Grass",
                 "Ground", "Ice", "Normal", "Poison", "Psychic", "Rock", "Steel", "Water"]


def _rows(path: Path) -> list[dict]:
    if not path.is_file():
        raise InvalidInputError(f"Missing data file {path}; see the data set's SOURCE.txt.")
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _num(v: str) -> float:
    return float("nan") if v in ("", "NA", None) else float(v)


def _orient(winners: np.ndarray, losers: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random sides for (winner, loser) records: returns left, right, outcome (+1 if left won)."""
    flip = np.random.default_rng(seed).random(len(winners)) < 0.5
    left = np.where(flip, losers, winners)
    right = np.where(flip, winners, losers)
    return left, right, np.where(flip, -1, 1).astype(np.int64)


def _impute(X: np.ndarray) -> np.ndarray:
    X = X.copy()
    mu = np.nanmean(X, axis=0)
    r, c = np.where(np.isnan(X))
    X[r, c] = mu[c]
    return X


def load_pokemon(data_dir=None) -> PairwiseDataset:
    """Pokémon battles (Kaggle "Pokemon- Weedle's Cave"): 800 items, 50,000 duels.

    Item features (d = 26): HP, Attack, Defense, Sp. Atk, Sp. Def, Speed, Generation, Legendary
    (0/1), and one indicator per type (Type 1 or Type 2), as Hu, Chau et al. 2022 Section 4 uses them.
    Outcome +1 when ``First_pokemon`` (left) wins. Licence: unknown — read from the data dir.
    """
    d = resolve_data_dir(data_dir, "pokemon")
    poke = _rows(d / "pokemon.csv")
    stats = ["HP", "Attack", "Defense", "Sp. Atk", "Sp. Def", "Speed", "Generation"]
    names = stats + ["Legendary"] + [f"type_{t}" for t in POKEMON_TYPES]
    ids, X = [], []
    for r in poke:
        row = [float(r[s]) for s in stats] + [1.0 if r["Legendary"].upper() == "TRUE" else 0.0]
        types = {r["Type 1"], r["Type 2"]}
        row += [1.0 if t in types else 0.0 for t in POKEMON_TYPES]
        ids.append(r["#"]); X.append(row)
    index = {iid: i for i, iid in enumerate(ids)}
    L, R, Y = [], [], []
    for r in _rows(d / "combats.csv"):
        a, b, w = r["First_pokemon"], r["Second_pokemon"], r["Winner"]
        L.append(index[a]); R.append(index[b]); Y.append(1 if w == a else -1)
    return PairwiseDataset(
        name="pokemon", item_ids=ids, item_features=np.array(X), feature_names=names,
        left=np.array(L), right=np.array(R), outcome=np.array(Y),
        source="Kaggle terminus7/pokemon-challenge via GitHub mirror (see SOURCE.txt)", licence="unknown (research use)",
    )


def load_chameleons(data_dir=None, seed: int = 0) -> PairwiseDataset:
    """Male Cape dwarf chameleon contests (Stuart-Fox et al. 2006): 35 males, 106 contests.

    Item features: ch.res, jl.res, tl.res, mass.res, SVL, prop.main, prop.patch. Licence GPL ≥ 2.
    """
    d = resolve_data_dir(data_dir, "chameleons")
    pred = _rows(d / "chameleons_predictors.csv")
    names = ["ch.res", "jl.res", "tl.res", "mass.res", "SVL", "prop.main", "prop.patch"]
    ids = [r["ID"] for r in pred]
    X = np.array([[float(r[n]) for n in names] for r in pred])
    index = {iid: i for i, iid in enumerate(ids)}
    con = _rows(d / "chameleons_contests.csv")
    w = np.array([index[r["winner"]] for r in con]); l = np.array([index[r["loser"]] for r in con])
    left, right, y = _orient(w, l, seed)
    return PairwiseDataset(name="chameleons", item_ids=ids, item_features=X, feature_names=names, left=left, right=right,
                           outcome=y, source="R BradleyTerry2::chameleons", licence="GPL (>= 2)")


def load_flatlizards(data_dir=None, seed: int = 0) -> PairwiseDataset:
    """Augrabies flat lizard contests (Whiting et al. 2006): 77 lizards, 100 contests.

    Item features: the 17 numeric predictors (NAs imputed by the column mean, as documented in
    SOURCE.txt: throat/badge PCs, testosterone) and ``resident`` (1 if repro.tactic is resident).
    Licence GPL ≥ 2.
    """
    d = resolve_data_dir(data_dir, "bradleyterry2_extra")
    pred = _rows(d / "flatlizards_predictors.csv")
    names = [c for c in pred[0] if c not in ("ID", "id", "repro.tactic")]
    ids = [r["ID"] for r in pred]
    X = np.array([[_num(r[n]) for n in names] + [1.0 if r["repro.tactic"] == "resident" else 0.0] for r in pred])
    index = {iid: i for i, iid in enumerate(ids)}
    con = _rows(d / "flatlizards_contests.csv")
    w = np.array([index[r["winner"]] for r in con]); l = np.array([index[r["loser"]] for r in con])
    left, right, y = _orient(w, l, seed)
    return PairwiseDataset(name="flatlizards", item_ids=ids, item_features=_impute(X), feature_names=names + ["resident"],
                           left=left, right=right, outcome=y, source="R BradleyTerry2::flatlizards", licence="GPL (>= 2)")


_SURFACES = ["Hard", "Clay", "Grass", "Carpet"]
_LEVELS = ["A", "M", "G", "D", "F"]


def load_tennis(data_dir=None, years=range(2015, 2020), seed: int = 0) -> PairwiseDataset:
    """ATP tour-level singles 2015–2019 (Jeff Sackmann): players as items, surface and level as context.

    Item features: height (cm; from match rows, else the player file, else the mean), right-handed
    (0/1), birth year (from ``dob``). Context (one-hot): surface (Hard, Clay, Grass, Carpet), tourney
    level (A, M, G, D, F), and ``best_of_5``. Timestamps: tourney date. Licence CC BY-NC-SA 4.0.
    """
    d = resolve_data_dir(data_dir, "tennis_atp")
    matches = []
    for y in years:
        matches += _rows(d / f"atp_matches_{y}.csv")
    players = {r["player_id"]: r for r in _rows(d / "atp_players.csv")}
    ht: dict[str, float] = {}
    for m in matches:
        for side in ("winner", "loser"):
            if m[f"{side}_ht"] not in ("", "NA"):
                ht[m[f"{side}_id"]] = float(m[f"{side}_ht"])
    ids = sorted({m["winner_id"] for m in matches} | {m["loser_id"] for m in matches})
    X = []
    for pid in ids:
        p = players.get(pid, {})
        h = ht.get(pid, _num(p.get("height", "")))
        dob = p.get("dob", "")
        by = float(dob[:4]) if dob[:4].isdigit() else float("nan")
        X.append([h, 1.0 if p.get("hand") == "R" else 0.0, by])
    index = {pid: i for i, pid in enumerate(ids)}
    w = np.array([index[m["winner_id"]] for m in matches]); l = np.array([index[m["loser_id"]] for m in matches])
    left, right, y = _orient(w, l, seed)
    ctx = np.array([[1.0 if m["surface"] == s else 0.0 for s in _SURFACES]
                    + [1.0 if m["tourney_level"] == v else 0.0 for v in _LEVELS]
                    + [1.0 if m["best_of"] == "5" else 0.0] for m in matches])
    ts = np.array([datetime.strptime(m["tourney_date"], "%Y%m%d").replace(tzinfo=timezone.utc).timestamp() for m in matches])
    order = np.argsort(ts, kind="stable")
    return PairwiseDataset(
        name="tennis", item_ids=ids, item_features=_impute(np.array(X)), feature_names=["height", "right_handed", "birth_year"],
        left=left[order], right=right[order], outcome=y[order], context=ctx[order],
        context_names=[f"surface_{s}" for s in _SURFACES] + [f"level_{v}" for v in _LEVELS] + ["best_of_5"],
        timestamps=ts[order], source="JeffSackmann/tennis_atp 2015-2019", licence="CC BY-NC-SA 4.0",
    )


def load_cems(data_dir=None) -> PairwiseDataset:
    """CEMS student preferences between 6 European management schools (Dittrich et al. 1998).

    Items: schools, features = school indicators + LAT (Latin-country school). Context: the
    student's covariates as 0/1 (STUD commerce, ENG/FRA/SPA/ITA good, WOR yes, DEG yes, SEX
    female). Outcome from win1/win2/tied (+1/−1/0). The 91 comparisons recorded as NA (missing in
    the survey, see SOURCE.txt) are dropped. Licence GPL ≥ 2.
    """
    d = resolve_data_dir(data_dir, "bradleyterry2_extra")
    schools = _rows(d / "CEMS_schools.csv")
    names = [c for c in schools[0] if c != "school"]
    ids = [r["school"] for r in schools]
    X = np.array([[float(r[c]) for c in names] for r in schools])
    index = {s: i for i, s in enumerate(ids)}
    studs = _rows(d / "CEMS_students.csv")
    cnames = ["commerce", "ENG_good", "FRA_good", "SPA_good", "ITA_good", "WOR_yes", "DEG_yes", "female"]
    sctx = [[1.0 if s["STUD"] == "commerce" else 0.0] + [1.0 if s[k] == "good" else 0.0 for k in ("ENG", "FRA", "SPA", "ITA")]
            + [1.0 if s["WOR"] == "yes" else 0.0, 1.0 if s["DEG"] == "yes" else 0.0, 1.0 if s["SEX"] == "female" else 0.0]
            for s in studs]
    L, R, Y, C = [], [], [], []
    for r in _rows(d / "CEMS_preferences.csv"):
        if r["win1"] == "NA":
            continue
        L.append(index[r["school1"]]); R.append(index[r["school2"]])
        Y.append(1 if r["win1"] == "1" else (-1 if r["win2"] == "1" else 0))
        C.append(sctx[int(r["student"]) - 1])
    return PairwiseDataset(name="cems", item_ids=ids, item_features=X, feature_names=names, left=np.array(L), right=np.array(R),
                           outcome=np.array(Y), context=np.array(C), context_names=cnames,
                           source="R BradleyTerry2::CEMS", licence="GPL (>= 2)")
