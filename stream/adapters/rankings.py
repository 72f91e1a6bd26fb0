"""Ranked catalogs for ShaRP (Pliatsika et al. 2024, Appendix A): items, features and a scoring callable.

Each loader returns a :class:`RankedCatalog` — ``X`` of shape ``(n, d)`` float64, the feature
names, a row-wise deterministic scoring callable (higher = better rank) and item ids — ready for
:class:`explainers.sharp.SharpExplainer`.

=============  ===============================  ======  ===  ===============================================
name           loader                           n       d    scorer
=============  ===============================  ======  ===  ===============================================
the2020        :func:`load_the2020`             1,397   5    0.3·TEA + 0.3·RES + 0.3·CIT + 0.025·INC + 0.075·INT
csrankings     :func:`load_csrankings`          118 US  4    geometric mean over the areas of (adjusted count + 1)
moving         :func:`load_moving_company`      2,000   3    linear ranker learned on the train split
atp            :func:`load_atp`                 84      6    ATP serve rating (sum of serve percentages + aces − DF)
synthetic      :func:`make_synthetic`           2,000   2–3  f1–f4 of Appendix A/B
=============  ===============================  ======  ===  ===============================================

Data directory: the ``data_dir`` argument, then ``$PREFSTREAM_DATA_DIR``, then ``../shared/data``
beside the repository. Licences: THE (no licence; research/fair use), CSRankings CC BY-NC-ND 4.0 —
the department table is **computed at load time and never written to disk** (NoDerivatives),
moving company MIT, ATP CC BY-NC-SA 4.0.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from learners.exceptions import InvalidInputError, InvalidParameterError
from stream.adapters import resolve_data_dir

__all__ = [
    "CSR_AREA_GROUPS",
    "GeometricMeanScorer",
    "LinearScorer",
    "RankedCatalog",
    "load_atp",
    "load_csrankings",
    "load_moving_company",
    "load_ranked_catalog",
    "load_the2020",
    "make_synthetic",
    "ranked_catalog_names",
]


# --------------------------------------------------------------------------- scorers
class LinearScorer:
    """``f(X) = X @ w`` computed column by column (row-wise deterministic, any memory order).

    Parameters
    ----------
    weights : array-like of shape (d,)
    intercept : float

    Examples
    --------
    >>> LinearScorer([0.4, 0.4, 0.2])([[4.0, 5.0, 5.0]]).round(6).tolist()
    [4.6]
    """

    def __init__(self, weights: Sequence[float], intercept: float = 0.0):
        self.weights = np.asarray(weights, dtype=np.float64).reshape(-1)
        self.intercept = float(intercept)

    def __call__(self, X: Any) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.weights.size:
            raise InvalidInputError(f"LinearScorer expects shape (n, {self.weights.size}); got {X.shape}.")
        s = X[:, 0] * self.weights[0]
        tmp = np.empty_like(s)
        for j in range(1, self.weights.size):
            s += np.multiply(X[:, j], self.weights[j], out=tmp)
        if self.intercept:
            s += self.intercept
        return s

    def __repr__(self) -> str:
        return f"LinearScorer(weights={self.weights.tolist()}, intercept={self.intercept})"


class GeometricMeanScorer:
    """``f(X) = (Π_g (X_g + 1)^{e_g})^{1/Σe}`` — the CSRankings score over area groups.

    With ``X_g = (Π_{a∈g} (c_a + 1))^{1/e_g} − 1`` (the group's geometric mean of adjusted count + 1,
    minus 1) and ``e_g`` the number of areas in group ``g``, this equals CSRankings' geometric
    mean over all areas of (adjusted count + 1) exactly (Pliatsika et al. 2024, Appendix A).

    Examples
    --------
    >>> float(GeometricMeanScorer([1, 1])([[3.0, 0.0]])[0])
    2.0
    """

    def __init__(self, exponents: Sequence[float]):
        self.exponents = np.asarray(exponents, dtype=np.float64).reshape(-1)

    def __call__(self, X: Any) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.exponents.size:
            raise InvalidInputError(f"GeometricMeanScorer expects shape (n, {self.exponents.size}); got {X.shape}.")
        s = np.log1p(X[:, 0]) * self.exponents[0]
        for j in range(1, self.exponents.size):
            s += np.log1p(X[:, j]) * self.exponents[j]
        return np.exp(s / self.exponents.sum())

    def __repr__(self) -> str:
        return f"GeometricMeanScorer(exponents={self.exponents.tolist()})"


# --------------------------------------------------------------------------- catalog
@dataclass
class RankedCatalog:
    """A catalog of items ranked by a scoring callable.

    Parameters
    ----------
    name : str
    X : ndarray of shape (n, d), float64
        Item features (finite).
    feature_names : list of str, length d
    score_fn : callable
        ``score_fn(X (N, d)) -> (N,)`` float scores, higher = better.
    item_ids : list of str, length n
    meta : dict
        Provenance: source files, licence, scorer formula.
    """

    name: str
    X: np.ndarray
    feature_names: list
    score_fn: Callable
    item_ids: list
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.X = np.asarray(self.X, dtype=np.float64)
        if self.X.ndim != 2 or not np.all(np.isfinite(self.X)):
            raise InvalidInputError(f"RankedCatalog {self.name!r}: X must be a finite (n, d) array; got {self.X.shape}.")
        self.feature_names = [str(f) for f in self.feature_names]
        self.item_ids = [str(i) for i in self.item_ids]
        if len(self.feature_names) != self.X.shape[1] or len(self.item_ids) != self.X.shape[0]:
            raise InvalidInputError(f"RankedCatalog {self.name!r}: {len(self.feature_names)} names / "
                                    f"{len(self.item_ids)} ids for X of shape {self.X.shape}.")

    @property
    def n(self) -> int:
        return self.X.shape[0]

    @property
    def d(self) -> int:
        return self.X.shape[1]

    def scores(self) -> np.ndarray:
        """Scores of all items, shape (n,)."""
        return np.asarray(self.score_fn(self.X), dtype=np.float64)

    def ranks(self) -> np.ndarray:
        """1-based competition ranks (ties share the best rank), shape (n,)."""
        s = self.scores()
        srt = np.sort(s)
        return 1.0 + (s.size - np.searchsorted(srt, s, side="right"))

    def order(self) -> np.ndarray:
        """Item indices from best to worst (stable)."""
        return np.argsort(-self.scores(), kind="stable")

    def index_of(self, item_id: str) -> int:
        """Catalog index of an item id (raises InvalidInputError if absent)."""
        try:
            return self.item_ids.index(str(item_id))
        except ValueError:
            raise InvalidInputError(f"Item {item_id!r} is not in catalog {self.name!r}.") from None


# --------------------------------------------------------------------------- THE 2020
THE_COLUMNS = ["scores_teaching", "scores_research", "scores_citations", "scores_industry_income",
               "scores_international_outlook"]
THE_WEIGHTS = [0.3, 0.3, 0.3, 0.025, 0.075]


def load_the2020(data_dir: str | os.PathLike | None = None) -> RankedCatalog:
    """Times Higher Education World University Rankings 2020 (1,397 universities, 5 pillars).

    Scorer (Pliatsika et al. 2024, Appendix A; reproduces THE's overall score up to rounding, see SOURCE.txt):
    ``0.3·teaching + 0.3·research + 0.3·citations + 0.025·income + 0.075·international``.

    Raises
    ------
    InvalidInputError
        If the data folder ``the_2020`` is missing or a pillar score is not numeric.
    """
    import pandas as pd

    path = resolve_data_dir(data_dir, "the_2020") / "THE_WUR_2020_rankings.csv"
    df = pd.read_csv(path)
    try:
        X = df[THE_COLUMNS].astype(float).to_numpy()
    except (KeyError, ValueError) as exc:
        raise InvalidInputError(f"{path}: pillar score columns {THE_COLUMNS} missing or not numeric ({exc}).") from None
    return RankedCatalog(
        name="the2020", X=X, feature_names=["teaching", "research", "citations", "income", "international"],
        score_fn=LinearScorer(THE_WEIGHTS), item_ids=df["name"].astype(str).tolist(),
        meta={"source": str(path), "licence": "none stated (THE); research/fair use",
              "scorer": "0.3*teaching+0.3*research+0.3*citations+0.025*income+0.075*international",
              "published_rank": df["rank"].astype(str).tolist()},
    )


# --------------------------------------------------------------------------- CSRankings
CSR_AREA_GROUPS = {
    "AI": ["ai", "vision", "mlmining", "nlp", "ir"],
    "Systems": ["arch", "comm", "sec", "mod", "da", "bed", "hpc", "mobile", "metrics", "ops", "plan", "soft"],
    "Theory": ["act", "crypt", "log"],
    "Interdisciplinary": ["bio", "graph", "chi", "robotics", "vis"],
}


def csrankings_area_table(data_dir: str | os.PathLike | None = None, years: tuple[int, int] = (2007, 2017),
                          us_only: bool = True):
    """Adjusted publication counts per department × area, built in memory (never saved).

    Recipe of ``csrankings_2017/SOURCE.txt``: sum ``adjustedcount`` per (dept, area) over the years
    ``years[0]..years[1]`` inclusive; departments absent from ``country-info.csv`` are US.

    Returns
    -------
    pandas.DataFrame
        Index dept, one column per area of :data:`CSR_AREA_GROUPS` (25), zeros where no paper.
    """
    import pandas as pd

    root = resolve_data_dir(data_dir, "csrankings_2017")
    a = pd.read_csv(root / "generated-author-info.csv")
    a = a[(a["year"] >= years[0]) & (a["year"] <= years[1])]
    if us_only:
        non_us = set(pd.read_csv(root / "country-info.csv")["institution"].astype(str))
        a = a[~a["dept"].astype(str).isin(non_us)]
    areas = [x for g in CSR_AREA_GROUPS.values() for x in g]
    tab = a.groupby(["dept", "area"])["adjustedcount"].sum().unstack(fill_value=0.0)
    return tab.reindex(columns=areas, fill_value=0.0).astype(float)


def load_csrankings(data_dir: str | os.PathLike | None = None, years: tuple[int, int] = (2007, 2017),
                    us_only: bool = True) -> RankedCatalog:
    """CSRankings departments (2017 snapshot) with the 4 area-group features of Pliatsika et al. 2024.

    Feature ``g`` is the group's geometric mean of (adjusted count + 1) over its areas, minus 1;
    the scorer :class:`GeometricMeanScorer` with exponents = areas per group (5, 12, 3, 5) then
    equals CSRankings' geometric mean over all 25 areas of (adjusted count + 1) (Appendix A; the
    paper's 2023 data has 7 interdisciplinary areas, hence its 27th root). The table is computed
    from the raw per-author counts at load time — its CC BY-NC-ND licence forbids shipping it.

    Parameters
    ----------
    years : (int, int)
        Inclusive publication-year window (SOURCE.txt recipe: 2007–2017).
    us_only : bool
        Keep US departments only (as the paper; 118 in this snapshot) or all 231.
    """
    tab = csrankings_area_table(data_dir, years, us_only)
    cols = []
    for areas in CSR_AREA_GROUPS.values():
        cols.append(np.exp(np.log1p(tab[areas].to_numpy()).mean(axis=1)) - 1.0)
    X = np.column_stack(cols)
    return RankedCatalog(
        name="csrankings", X=X, feature_names=list(CSR_AREA_GROUPS),
        score_fn=GeometricMeanScorer([len(v) for v in CSR_AREA_GROUPS.values()]),
        item_ids=tab.index.astype(str).tolist(),
        meta={"licence": "CC BY-NC-ND 4.0 (CSRankings): computed at load time, do not redistribute",
              "years": list(years), "us_only": us_only,
              "scorer": "geometric mean over 25 areas of (adjusted count + 1)"},
    )


# --------------------------------------------------------------------------- moving company
def load_moving_company(data_dir: str | os.PathLike | None = None, variant: str = "biased") -> RankedCatalog:
    """Moving-company applicants (Yang et al. 2021; Pliatsika et al. 2024 Section 8.1.2), test split, 2,000 rows.

    Features gender (0 male, 1 female), race (0 white, 1 black) and weight-lifting ability. The
    ranker is *learned*: an ordinary-least-squares linear model of the qualification score fitted on
    the train split (a stand-in for the paper's XGB/LGB learning-to-rank models, which need
    packages prefstream does not depend on). Only ``variant="biased"`` has CSV files here.
    """
    import pandas as pd

    if variant != "biased":
        raise InvalidParameterError(f"The 'variant' parameter of load_moving_company must be 'biased'. Got {variant!r} instead.")
    root = resolve_data_dir(data_dir, "moving_company")
    tr = pd.read_csv(root / "movers_biased_R10_train.csv")
    te = pd.read_csv(root / "movers_biased_R10_test.csv")
    cols = ["gender", "race", "X_weight_lifting"]
    A = np.column_stack([np.ones(len(tr)), tr[cols].to_numpy(float)])
    coef, *_ = np.linalg.lstsq(A, tr["Y_qualification"].to_numpy(float), rcond=None)
    return RankedCatalog(
        name="moving", X=te[cols].to_numpy(float), feature_names=["gender", "race", "weight_lifting"],
        score_fn=LinearScorer(coef[1:], intercept=coef[0]), item_ids=te["docid"].astype(str).tolist(),
        meta={"licence": "MIT (xAI-Ranking-Benchmark)", "scorer": "OLS of Y_qualification on train split",
              "coef": coef.tolist(), "qualification": te["Y_qualification"].to_numpy(float).tolist()},
    )


# --------------------------------------------------------------------------- ATP
ATP_FEATURES = ["first_serve_pct", "first_serve_won_pct", "second_serve_won_pct", "service_points_won_pct",
                "aces_per_match", "double_faults_per_match"]


def load_atp(data_dir: str | os.PathLike | None = None, year: int = 2019, min_matches: int = 30) -> RankedCatalog:
    """ATP players of one season ranked by the ATP serve rating (Pliatsika et al. 2024, Appendix A, "Tennis").

    Per player, over the season's tour-level matches with serve statistics: % first serves in,
    % first-serve points won, % second-serve points won, % service points won (all in 0–100),
    aces per match and double faults per match. Score = the four percentages + aces/match −
    DF/match (the paper's "100 × fraction" weights; aces and DF enter with weight ±1 as in ATP's
    serve rating). The paper used 2022 data (86 players); this snapshot ends in 2019.

    Parameters
    ----------
    year : int
        2015–2019.
    min_matches : int
        Keep players with at least this many matches with serve statistics.
    """
    import pandas as pd

    root = resolve_data_dir(data_dir, "tennis_atp")
    path = root / f"atp_matches_{year}.csv"
    if not path.is_file():
        raise InvalidInputError(f"{path} not found; tennis_atp holds the seasons 2015-2019.")
    m = pd.read_csv(path)
    parts = []
    for side, other in (("w", "winner"), ("l", "loser")):
        p = m[[f"{other}_id", f"{other}_name", f"{side}_ace", f"{side}_df", f"{side}_svpt", f"{side}_1stIn",
               f"{side}_1stWon", f"{side}_2ndWon"]].copy()
        p.columns = ["id", "name", "ace", "df", "svpt", "first_in", "first_won", "second_won"]
        parts.append(p)
    p = pd.concat(parts).dropna()
    p = p[p["svpt"] > 0]
    g = p.groupby(["id", "name"]).agg(matches=("svpt", "size"), ace=("ace", "sum"), df=("df", "sum"),
                                       svpt=("svpt", "sum"), first_in=("first_in", "sum"),
                                       first_won=("first_won", "sum"), second_won=("second_won", "sum"))
    g = g[g["matches"] >= min_matches].reset_index()
    if len(g) < 2:
        raise InvalidInputError(f"Only {len(g)} players with >= {min_matches} matches in {year}; lower min_matches.")
    X = np.column_stack([
        100 * g["first_in"] / g["svpt"],
        100 * g["first_won"] / g["first_in"],
        100 * g["second_won"] / (g["svpt"] - g["first_in"]),
        100 * (g["first_won"] + g["second_won"]) / g["svpt"],
        g["ace"] / g["matches"],
        g["df"] / g["matches"],
    ]).astype(float)
    return RankedCatalog(
        name="atp", X=X, feature_names=ATP_FEATURES, score_fn=LinearScorer([1, 1, 1, 1, 1, -1]),
        item_ids=g["name"].astype(str).tolist(),
        meta={"licence": "CC BY-NC-SA 4.0 (Jeff Sackmann / Tennis Abstract)", "year": year,
              "min_matches": min_matches, "scorer": "sum of 4 serve % + aces/match - DF/match"},
    )


# --------------------------------------------------------------------------- synthetic
_SCORERS = {"f1": [0.8, 0.2], "f2": [0.5, 0.5], "f3": [0.2, 0.8], "f4": [0.33, 0.33, 0.34]}


def make_synthetic(kind: str = "D3", n: int = 2000, scorer: str | None = None, seed: Any = 0) -> RankedCatalog:
    """Synthetic ranked catalogs of Pliatsika et al. 2024, Appendix A/B.

    Two features (default scorer ``f2 = 0.5·x1 + 0.5·x2``): ``D1`` x1 ~ N(0.5, 0.1), x2 ~ Bern(0.5);
    ``D2`` x1 ~ U[0,1], x2 ~ N(0.5, 0.1); ``D3`` x1, x2 ~ U[0,1]; ``D4`` x1 ~ N(0.5, 0.05),
    x2 ~ N(0.75, 0.016) with correlation −0.8; ``D5`` x1 ~ N(0.5, 0.1), x2 ~ N(0.5, 0.05).
    Three standard-normal features (scorer ``f4 = 0.33·x1 + 0.33·x2 + 0.34·x3``): ``S0``
    independent; ``S1`` corr(x1, x2) = −0.8, x3 independent; ``S2`` corr(x1,x2) = −0.8,
    corr(x1,x3) = 0.6, corr(x2,x3) = −0.2. (Second arguments of N are standard deviations; the
    paper does not give the 3-feature means/scales, standard normal is used.)

    Parameters
    ----------
    kind : {"D1", "D2", "D3", "D4", "D5", "S0", "S1", "S2"}
    n : int
        Number of items (paper: 2,000).
    scorer : {"f1", "f2", "f3", "f4"}, optional
        Default ``f2`` for D*, ``f4`` for S*.
    seed : int or Generator
    """
    rng = np.random.default_rng(seed)
    if not isinstance(n, (int, np.integer)) or n < 2:
        raise InvalidParameterError(f"The 'n' parameter of make_synthetic must be an int >= 2. Got {n!r} instead.")
    if kind == "D1":
        X = np.column_stack([rng.normal(0.5, 0.1, n), rng.binomial(1, 0.5, n)])
    elif kind == "D2":
        X = np.column_stack([rng.uniform(0, 1, n), rng.normal(0.5, 0.1, n)])
    elif kind == "D3":
        X = rng.uniform(0, 1, (n, 2))
    elif kind == "D4":
        sd = np.array([0.05, 0.016])
        cov = np.outer(sd, sd) * np.array([[1, -0.8], [-0.8, 1]])
        X = rng.multivariate_normal([0.5, 0.75], cov, n)
    elif kind == "D5":
        X = np.column_stack([rng.normal(0.5, 0.1, n), rng.normal(0.5, 0.05, n)])
    elif kind in ("S0", "S1", "S2"):
        C = np.eye(3)
        if kind in ("S1", "S2"):
            C[0, 1] = C[1, 0] = -0.8
        if kind == "S2":
            C[0, 2] = C[2, 0] = 0.6
            C[1, 2] = C[2, 1] = -0.2
        X = rng.multivariate_normal(np.zeros(3), C, n)
    else:
        raise InvalidParameterError(f"The 'kind' parameter of make_synthetic must be one of D1-D5, S0-S2. Got {kind!r} instead.")
    d = X.shape[1]
    scorer = scorer or ("f2" if d == 2 else "f4")
    w = _SCORERS.get(scorer)
    if w is None or len(w) != d:
        raise InvalidParameterError(f"The 'scorer' parameter of make_synthetic must be one of "
                                    f"{[k for k, v in _SCORERS.items() if len(v) == d]} for {kind}. Got {scorer!r} instead.")
    return RankedCatalog(name=f"synthetic-{kind}", X=X.astype(float), feature_names=[f"x{j + 1}" for j in range(d)],
                         score_fn=LinearScorer(w), item_ids=[str(i) for i in range(n)],
                         meta={"kind": kind, "scorer": scorer, "weights": w})


_LOADERS = {"the2020": load_the2020, "csrankings": load_csrankings, "moving": load_moving_company, "atp": load_atp}


def ranked_catalog_names() -> list[str]:
    """Names accepted by :func:`load_ranked_catalog`."""
    return sorted(_LOADERS) + ["synthetic"]


def load_ranked_catalog(name: str, data_dir: str | os.PathLike | None = None, **kwargs: Any) -> RankedCatalog:
    """Load a ranked catalog by name (``the2020``, ``csrankings``, ``moving``, ``atp``, ``synthetic``)."""
    if name == "synthetic":
        return make_synthetic(**kwargs)
    if name not in _LOADERS:
        raise InvalidParameterError(f"The 'name' parameter of load_ranked_catalog must be one of "
                                    f"{ranked_catalog_names()}. Got {name!r} instead.")
    return _LOADERS[name](data_dir, **kwargs)
