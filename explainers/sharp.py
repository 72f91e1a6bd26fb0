"""ShaRP: Shapley values for rankings and preferences (Pliatsika et al., paper 001).

Explains a *score-based ranker* — any scoring callable ``score_fn(X) -> scores`` plus a catalog
of items ``X`` of shape ``(n, d)`` — with the quantities of interest (QoIs) of Section 4:

* **score** (Eq. 2): the item's score ``f(x)``;
* **rank** (Eq. 3): the item's 1-based position, with ``α = −1`` in the iota function (Eq. 5) so
  that a contribution that *improves* (lowers) the rank is positive;
* **top-k** (Eq. 4): the indicator ``rank(x) ≤ k``;

and with the **pairwise method** (Section 5, Eq. 7), which explains item ``v`` against the other
item ``u`` of a pair with ``u`` as the baseline, so that the contributions sum to the difference of
the two outcomes (for the rank QoI: ``rank(u) − rank(v)`` positions).

Feature removal is *marginal* (Section 3): for a coalition ``S`` of *removed* features the hybrid
``v_{A∖S} u_S`` takes the features in ``S`` from a reference row ``u`` and the rest from ``v``;
``Q(S) = E_u[q(v_{A∖S} u_S)]`` over the reference rows (Eqs 2–4). The Shapley value (Eq. 6 with
the weights of Algorithm 1, line 8) is::

    φ_i = α · Σ_{S ⊆ A∖{i}, |S| ≤ c}  (Q(S) − Q(S ∪ {i})) / (d · C(d−1, |S|))

so that with all coalitions (``c = d − 1``) efficiency holds exactly::

    Σ_i φ_i = α · (Q(∅) − Q(A)) = α · (q(v) − mean_u q(u)).

Fast by construction
--------------------
Algorithm 1 evaluates ``d · 2^(d−1)`` marginals, each scoring two fresh hybrid sets. Here the
QoI of every coalition is computed **once per explained item** (``2^d`` games; ``Q(∅) = q(v)`` and
``Q(A) = mean q(u)`` need no model call at all), the hybrids of all coalitions × reference rows
(× several items) are scored in **one vectorised call** of ``score_fn`` (chunked to ``max_rows``
rows for memory), ranks come from :func:`numpy.searchsorted` in the once-sorted catalog scores
(no re-sort), and the Shapley values are one matrix product ``Q @ Wᵀ`` with a precomputed
``(d, 2^d)`` weight matrix. Approximation (Algorithm 1's ``m`` and ``c``) draws *one* reference
sample per explained item and shares it between all coalitions — so the approximation is the
exact Shapley value of the sampled game (efficiency holds w.r.t. the sample mean); Algorithm 1
draws a fresh sample per (feature, coalition), which costs more and breaks efficiency.

Rank and tie rule
-----------------
A hybrid ``x`` of item ``v`` (index ``j`` in the catalog) is ranked in ``D' = D ∖ {v} ∪ {x}``
(Eq. 3; ``exclude_item=True``): it *replaces* ``v``. With ``ties="min"`` (default; standard
competition ranking, ties resolved in favour of the explained item)::

    rank(x) = 1 + #{w ∈ D ∖ {v} : f(w) > f(x)}

``ties="max"`` counts tied catalog items as ranked ahead (``1 + #{f(w) ≥ f(x)}``) and
``ties="average"`` is the mean of the two. ``rank(v)`` itself is v's competition rank in the
catalog; the mean rank over the reference ``D ∖ {v}`` is ``n/2`` without ties (the paper's
"position 94.5 out of 189", Section 6.1). The explained item is also left out of the reference
rows (Algorithm 1, line 4). With ``exclude_item=False`` the hybrid is ranked against the whole
catalog ``D`` (``v`` included) and ``v`` stays in the reference: this is what xai-sharp 0.1.1 does
(see ``docs/sharp.md`` for the exact mapping) and what the pairwise method uses by default, so that
its contributions sum to the true rank difference ``rank(u) − rank(v)``.

Result convention (``Explanation``)
-----------------------------------
``prediction = α·q(v)`` and ``base_values = α·mean_u q(u)`` so that
``base_values + Σφ = prediction`` (efficiency; :meth:`Explanation.additivity_error`). For
``"sharp-rank"`` this means ``prediction = −rank(v)`` and ``base_values = −mean rank``; the plain
positive ranks are in ``extra["rank"]`` and ``extra["mean_rank"]``. ``base_values`` is always the
*exact* reference mean (cheap: no hybrid needed), also under approximation, so the
``additivity_error`` of an approximate explanation is its fidelity gap (Eq. 8).

Notes
-----
The scoring callable must be *row-wise deterministic*: the score of a row must not depend on the
other rows of the batch (``(X * w).sum(1)`` is; some BLAS ``X @ w`` kernels may differ in the last
bit between batch sizes, which can flip exact ties). It must not keep a reference to its input,
whose buffer is reused between chunks. ``score_fn`` receives float64 arrays of shape
``(N, d)`` and must return ``N`` finite floats; higher score = better rank.
"""

from __future__ import annotations

import time
from math import comb
from typing import Any, Callable, Sequence

import numpy as np

from explainers._result import Explanation
from explainers.exceptions import BudgetError, InvalidInputError, check_param

__all__ = [
    "QOIS",
    "TIES",
    "SharpExplainer",
    "catalog_ranks",
    "coalition_weights",
    "explain",
    "explain_pairwise",
    "learner_score_fn",
    "rank_strata",
    "strata_summary",
]

QOIS = ("score", "rank", "topk")
TIES = ("min", "max", "average")
_METHOD = {"score": "sharp-score", "rank": "sharp-rank", "topk": "sharp-topk"}
_ALPHA = {"score": 1.0, "rank": -1.0, "topk": 1.0}
MAX_FEATURES = 20
MAX_GAME_VALUES = 1 << 26          # items x 2^d coalition values held at once (512 MiB of float64)
DEFAULT_MAX_ROWS = 1 << 16


# --------------------------------------------------------------------------- helpers
def _popcount(a: np.ndarray) -> np.ndarray:
    a = a.astype(np.int64)
    out = np.zeros_like(a)
    while np.any(a):
        out += a & 1
        a = a >> 1
    return out


def _coalition_masks(d: int, c: int) -> np.ndarray:
    """All coalition bit masks with at most ``c + 1`` removed features, in Gray-code order (one bit
    flips between neighbours, so each feature column of the hybrid buffer is a few long runs)."""
    i = np.arange(1 << d, dtype=np.int64)
    g = i ^ (i >> 1)
    return g[_popcount(g) <= c + 1] if c < d - 1 else g


def _runs(col: np.ndarray) -> list[tuple[int, int, bool]]:
    """Maximal runs ``(start, stop, value)`` of a boolean vector."""
    cuts = [0] + (np.flatnonzero(col[1:] != col[:-1]) + 1).tolist() + [int(col.size)]
    return [(a, b, bool(col[a])) for a, b in zip(cuts[:-1], cuts[1:])]


def coalition_weights(d: int, max_coalition_size: int | None = None) -> np.ndarray:
    """Shapley weight matrix ``W`` of shape ``(d, 2**d)`` with ``φ = α · W @ Q``.

    Column ``S`` is the bit mask of a coalition of *removed* features (bit ``j`` set = feature
    ``j`` taken from the reference row). ``W[i, S] = +1/(d·C(d−1,|S|))`` and
    ``W[i, S ∪ {i}] = −1/(d·C(d−1,|S|))`` for every ``S ∌ i`` with ``|S| ≤ c`` (Algorithm 1,
    line 8; Eq. 6).

    Parameters
    ----------
    d : int
        Number of features, ``1 ≤ d ≤ 20``.
    max_coalition_size : int, optional
        ``c`` of Algorithm 1 in ``[0, d−1]``; ``None`` = ``d − 1`` (exact).

    Returns
    -------
    ndarray of shape (d, 2**d), float64

    Examples
    --------
    >>> W = coalition_weights(2)
    >>> W.tolist()
    [[0.5, -0.5, 0.5, -0.5], [0.5, 0.5, -0.5, -0.5]]
    """
    c = d - 1 if max_coalition_size is None else int(max_coalition_size)
    masks = np.arange(1 << d, dtype=np.int64)
    sizes = _popcount(masks)
    W = np.zeros((d, 1 << d))
    for i in range(d):
        bit = 1 << i
        S = masks[((masks & bit) == 0) & (sizes <= c)]
        w = np.array([1.0 / (d * comb(d - 1, int(s))) for s in sizes[S]])
        W[i, S] += w
        W[i, S | bit] -= w
    return W


def catalog_ranks(scores: Any, ties: str = "min") -> np.ndarray:
    """1-based ranks of catalog items from their scores (higher score = better = smaller rank).

    Parameters
    ----------
    scores : array-like of shape (n,), float
    ties : {"min", "max", "average"}
        ``"min"``: ``1 + #{strictly higher}`` (standard competition ranking, "1224");
        ``"max"``: ``#{higher or equal}`` (ties ranked behind); ``"average"``: their mean.

    Returns
    -------
    ndarray of shape (n,), float64

    Examples
    --------
    >>> catalog_ranks([3.0, 5.0, 3.0, 1.0]).tolist()
    [2.0, 1.0, 2.0, 4.0]
    >>> catalog_ranks([3.0, 5.0, 3.0, 1.0], ties="max").tolist()
    [3.0, 1.0, 3.0, 4.0]
    """
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    check_param("catalog_ranks", "ties", ties, ties in TIES, f"one of {TIES}")
    srt = np.sort(s)
    n = s.size
    gt = n - np.searchsorted(srt, s, side="right")
    ge = n - np.searchsorted(srt, s, side="left")
    if ties == "min":
        return (1 + gt).astype(np.float64)
    if ties == "max":
        return ge.astype(np.float64)
    return 1 + (gt + ge - 1) / 2.0


def rank_strata(ranks: Any, n: int, n_strata: int = 10) -> np.ndarray:
    """Stratum index of 1-based ranks in a catalog of ``n`` items (0 = best ``100/n_strata`` %).

    Section 7.2: box plots aggregate local contributions "across ranking strata, each covering
    10 % of the range". Item of rank ``r`` goes to stratum ``⌈r·n_strata / n⌉ − 1``, so stratum 0
    holds the ranks ``r ≤ n/10`` (the top 10 %).

    Examples
    --------
    >>> rank_strata([1, 10, 11, 100], n=100).tolist()
    [0, 0, 1, 9]
    >>> rank_strata([18, 19], n=189).tolist()
    [0, 1]
    """
    r = np.asarray(ranks, dtype=np.float64)
    check_param("rank_strata", "n", n, isinstance(n, (int, np.integer)) and n >= 1, "an int >= 1")
    check_param("rank_strata", "n_strata", n_strata,
                isinstance(n_strata, (int, np.integer)) and n_strata >= 1, "an int >= 1")
    return np.clip(np.ceil(r * n_strata / n - 1e-9) - 1, 0, n_strata - 1).astype(np.int64)


def _as_matrix(X: Any, name: str = "X") -> np.ndarray:
    try:
        A = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"{name} must be a numeric array of shape (n_items, n_features); "
                                f"conversion to float64 failed: {exc}") from None
    if A.ndim != 2 or A.shape[0] < 1 or A.shape[1] < 1:
        raise InvalidInputError(f"{name} must have shape (n_items, n_features) with both >= 1; "
                                f"got shape {A.shape}. Reshape a single item with x.reshape(1, -1).")
    if not np.all(np.isfinite(A)):
        bad = np.argwhere(~np.isfinite(A))[0]
        raise InvalidInputError(f"{name} contains NaN or inf (first at row {bad[0]}, column {bad[1]}); "
                                "impute or drop those items first.")
    return A


def _call_scores(score_fn: Callable, H: np.ndarray) -> np.ndarray:
    s = score_fn(H)
    try:
        s = np.asarray(s, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise InvalidInputError("score_fn must return a 1-D array of float scores; got "
                                f"{type(s).__name__}.") from None
    if s.size != H.shape[0]:
        raise InvalidInputError(f"score_fn returned {s.size} scores for {H.shape[0]} rows; it must "
                                "return one score per row of its (N, d) input.")
    # one reduction instead of an isfinite pass: a NaN/inf makes the sum non-finite (a finite sum that
    # overflows is re-checked element-wise)
    if not np.isfinite(np.add.reduce(s)) and not np.all(np.isfinite(s)):
        raise InvalidInputError("score_fn returned NaN or inf scores; the scoring model must give a "
                                "finite score to every row (check hybrids of extreme feature values).")
    return s


def _as_index_array(items: Any, n: int, name: str) -> np.ndarray:
    a = np.asarray(items)
    if a.ndim == 0:
        a = a.reshape(1)
    if a.dtype.kind not in "iu":
        if a.dtype.kind == "f" and a.size and np.all(a == np.round(a)):
            a = a.astype(np.int64)
        elif a.size == 0:
            a = a.astype(np.int64)
        else:
            raise InvalidInputError(f"{name} must be integer indices into the catalog (0..{n - 1}); "
                                    f"got dtype {a.dtype}.")
    a = a.astype(np.int64)
    if a.size and (a.min() < 0 or a.max() >= n):
        raise InvalidInputError(f"{name} must be indices in [0, {n - 1}] of the catalog; got values in "
                                f"[{a.min()}, {a.max()}].")
    return a


class _RankCounter:
    """Exact ``#{catalog scores ≤ s}`` / ``< s`` for many needles, faster than a binary search.

    The catalog's distinct scores are put into ``G`` equal-width buckets. The bucket of a needle
    is a monotone arithmetic function of it, so every catalog value in a lower bucket is smaller
    and every value in a higher bucket is larger; only the (at most one) value in the needle's own
    bucket is compared explicitly: one table lookup and one comparison per needle. ``G`` doubles
    (up to ``min(2^15, 64·#distinct)``, small enough to stay in cache) until at most 1 % of the
    distinct values share a bucket; needles that land in a bucket holding several distinct values
    or a tied value (multiplicity > 1) are resolved with :func:`numpy.searchsorted`. The result is
    always identical to ``np.searchsorted(sorted_scores, s, side="right"/"left")`` (tested).
    """

    def __init__(self, sorted_scores: np.ndarray, max_g: int = 1 << 15):
        self.srt = sorted_scores
        self.ok = False
        u, cnt = np.unique(sorted_scores, return_counts=True)
        if u.size < 32 or sorted_scores.size >= 2**31 - 1:   # tiny catalog: a binary search is cheap
            return
        max_g = min(max_g, 1 << int(np.ceil(np.log2(64 * u.size))))
        lo, hi = float(u[0]), float(u[-1])
        G = 1 << int(np.ceil(np.log2(max(16, 4 * u.size))))
        while True:
            scale = G / (hi - lo)
            if not np.isfinite(scale) or scale <= 0:
                return
            b = self._bucket(u, lo, scale, G)
            occ = np.bincount(b, minlength=G)
            shared = occ[b] > 1
            if shared.mean() <= 0.01 or 2 * G > max_g:
                break
            G *= 2
        self.lo, self.scale, self.G = lo, scale, G
        first = np.zeros(G + 1, np.int64)
        np.add.at(first, b + 1, cnt)
        first = np.cumsum(first)[:G]
        val = np.full(G, np.inf)
        single = ~shared & (cnt == 1)
        val[b[single]] = u[single]
        first[occ > 1] = -1                      # sentinels: resolve these needles by binary search
        first[b[cnt > 1]] = -1
        self.first = first.astype(np.int32)
        self.val = val
        self.has_shared = bool(np.any(first < 0))
        self.ok = True

    @staticmethod
    def _bucket(s: np.ndarray, lo: float, scale: float, G: int) -> np.ndarray:
        t = np.subtract(s, lo, dtype=np.float64)
        t *= scale
        np.clip(t, 0, G - 1, out=t)
        return t.astype(np.intp)

    def _count(self, s: np.ndarray, side: str) -> np.ndarray:
        if not self.ok:
            return np.searchsorted(self.srt, s, side=side)
        g = self._bucket(s, self.lo, self.scale, self.G)
        c = self.first.take(g, mode="clip")
        bad = np.flatnonzero(c < 0) if self.has_shared and c.min() < 0 else None
        v = self.val.take(g, mode="clip")
        c += (v <= s) if side == "right" else (v < s)
        if bad is not None and bad.size:
            c.flat[bad] = np.searchsorted(self.srt, np.asarray(s).flat[bad], side=side)
        return c

    def count_le(self, s: np.ndarray) -> np.ndarray:
        """``#{catalog ≤ s}`` elementwise (int32 or int64, shape of ``s``)."""
        return self._count(s, "right")

    def count_lt(self, s: np.ndarray) -> np.ndarray:
        """``#{catalog < s}`` elementwise."""
        return self._count(s, "left")


# --------------------------------------------------------------------------- explainer
class SharpExplainer:
    """ShaRP explainer bound to one scoring callable and one ranked catalog.

    Scores the catalog once and keeps them sorted, so that every later explanation computes ranks
    with a binary search (Section 7.1, Algorithm 2, without re-sorting per hybrid).

    Parameters
    ----------
    score_fn : callable
        ``score_fn(X: ndarray (N, d) float64) -> ndarray (N,)`` scores; higher = better.
        Must be row-wise deterministic (see module notes).
    X : array-like of shape (n, d), float
        The catalog ``D`` (finite values).
    feature_names : sequence of str, optional
        ``d`` names; default ``x0 … x{d−1}``.
    item_ids : sequence of str, optional
        ``n`` ids for ``Explanation.instance_ids``; default the catalog indices.
    ties : {"min", "max", "average"}
        Tie rule of the rank (module notes).
    max_rows : int
        At most this many hybrid rows per call of ``score_fn`` (memory bound;
        ``max_rows · d · 8`` bytes).
    model_name, model_version : str, int
        Copied into every :class:`~explainers._result.Explanation`.

    Raises
    ------
    InvalidInputError
        Non-finite or mis-shaped ``X``; ``score_fn`` returning the wrong number of or non-finite
        scores; wrong number of names/ids.
    InvalidParameterError
        Bad ``ties``/``max_rows``.
    BudgetError
        ``d > 20`` (``2^d`` coalitions).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[4, 5, 5], [4, 5, 5], [5, 4, 4], [4, 5, 3], [5, 4, 3], [5, 4, 2],
    ...               [4, 4, 3], [3, 3, 3]], dtype=float)
    >>> f = lambda A: (A * np.array([0.4, 0.4, 0.2])).sum(axis=1)
    >>> ex = SharpExplainer(f, X, feature_names=["gpa", "sat", "essay"])
    >>> e = ex.explain([2], qoi="rank")
    >>> float(e.extra["rank"][0]), round(float(e.extra["mean_rank"][0]), 4)  # Dia: rank 3
    (3.0, 3.7143)
    >>> round(float(e.values.sum()), 4)  # efficiency: mean rank − rank (α = −1)
    0.7143
    """

    def __init__(self, score_fn: Callable, X: Any, feature_names: Sequence[str] | None = None,
                 item_ids: Sequence[Any] | None = None, ties: str = "min",
                 max_rows: int = DEFAULT_MAX_ROWS, model_name: str = "", model_version: int = 0):
        if not callable(score_fn):
            raise InvalidInputError(f"score_fn must be a callable X -> scores; got {type(score_fn).__name__}.")
        self.X = _as_matrix(X)
        n, d = self.X.shape
        if d > MAX_FEATURES:
            raise BudgetError(f"ShaRP enumerates 2^d coalitions; d={d} features exceeds the budget of "
                              f"{MAX_FEATURES}. Group features or explain a projection.")
        check_param("SharpExplainer", "ties", ties, ties in TIES, f"one of {TIES}")
        check_param("SharpExplainer", "max_rows", max_rows,
                    isinstance(max_rows, (int, np.integer)) and max_rows >= 1, "an int >= 1")
        if feature_names is None:
            feature_names = [f"x{j}" for j in range(d)]
        if len(feature_names) != d:
            raise InvalidInputError(f"Got {len(feature_names)} feature names for {d} features; pass one per column.")
        if item_ids is not None and len(item_ids) != n:
            raise InvalidInputError(f"Got {len(item_ids)} item ids for {n} catalog items; pass one per row.")
        self.score_fn = score_fn
        self.feature_names = [str(f) for f in feature_names]
        self.item_ids = None if item_ids is None else [str(i) for i in item_ids]
        self.ties = ties
        self.max_rows = int(max_rows)
        self.model_name = model_name
        self.model_version = int(model_version)
        self.n, self.d = n, d
        self.scores = _call_scores(score_fn, self.X)
        self.sorted_scores = np.sort(self.scores)
        self.ranks = catalog_ranks(self.scores, ties)
        self._counter = _RankCounter(self.sorted_scores)
        self._W: dict[int, np.ndarray] = {}
        self._bits = ((np.arange(1 << d)[:, None] >> np.arange(d)[None, :]) & 1).astype(bool)

    @classmethod
    def from_catalog(cls, catalog: Any, **kwargs: Any) -> "SharpExplainer":
        """Build from an object with ``X``, ``score_fn``, ``feature_names``, ``item_ids``
        (e.g. :class:`stream.adapters.rankings.RankedCatalog`)."""
        return cls(catalog.score_fn, catalog.X, feature_names=catalog.feature_names,
                   item_ids=getattr(catalog, "item_ids", None), **kwargs)

    # ------------------------------------------------------------------ QoIs
    def _weights(self, c: int) -> np.ndarray:
        if c not in self._W:
            self._W[c] = coalition_weights(self.d, c)
        return self._W[c]

    def _qoi(self, s: np.ndarray, s_excl: np.ndarray | None, qoi: str, k: int | None) -> np.ndarray:
        """QoI of hybrid scores ``s`` (shape (B, ...)); ``s_excl`` (B,) = score of the removed item."""
        if qoi == "score":
            return s
        n = self.n
        ex = None if s_excl is None else s_excl.reshape((-1,) + (1,) * (s.ndim - 1))
        if self.ties in ("min", "average"):
            gt = n - self._counter.count_le(s)
            if ex is not None:
                gt = gt - (ex > s)
        if self.ties in ("max", "average"):
            ge = n - self._counter.count_lt(s)
            if ex is not None:
                ge = ge - (ex >= s)
        if self.ties == "min":
            r = 1.0 + gt
        elif self.ties == "max":
            r = 1.0 + ge
        else:
            r = 1.0 + (gt + ge) / 2.0
        if qoi == "rank":
            return r
        return (r <= k).astype(np.float64)

    def _ref_base(self, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Scores, ``#{catalog > s}`` and ``#{catalog ≥ s}`` of the reference rows (no item removed)."""
        s_ref = self.scores[ref]
        return s_ref, self.n - self._counter.count_le(s_ref), self.n - self._counter.count_lt(s_ref)

    def _rank_from(self, gt: Any, ge: Any) -> Any:
        if self.ties == "min":
            return 1.0 + gt
        if self.ties == "max":
            return 1.0 + ge
        return 1.0 + (gt + ge) / 2.0

    def _ref_rows_qoi(self, s_ref: np.ndarray, gt: np.ndarray, ge: np.ndarray, s_excl: np.ndarray | None,
                      qoi: str, k: int | None) -> tuple[np.ndarray, np.ndarray]:
        """QoI and rank of given reference rows (arrays broadcastable to (B, m)), ``v`` removed."""
        if s_excl is not None:
            ex = s_excl.reshape((-1,) + (1,) * (np.ndim(s_ref) - 1 if np.ndim(s_ref) > 1 else 1))
            gt = gt - (ex > s_ref)
            ge = ge - (ex >= s_ref)
        r = self._rank_from(gt, ge)
        if qoi == "score":
            return np.broadcast_to(s_ref, np.shape(r)), r
        return (r if qoi == "rank" else (r <= k).astype(np.float64)), r

    def _ref_means(self, ref: np.ndarray, s_v: np.ndarray, exclude: bool, present: np.ndarray, pos: np.ndarray,
                   qoi: str, k: int | None) -> tuple[np.ndarray, np.ndarray]:
        """Exact mean QoI and mean rank over ``D' ∖ {v}`` for every explained item, shape (B,) each.

        Uses sums instead of a (B, |D'|) table: removing ``v`` from the catalog moves every reference
        row below it up by one place (``min``; ``≤`` for ``max``), counted by a binary search of
        ``f(v)`` in the sorted reference scores; top-k only needs the rows ranked just behind k.
        """
        s_ref, gt, ge = self._ref_base(ref)
        r0 = self._rank_from(gt, ge)
        B = s_v.size
        n_eff = ref.size - present
        if exclude:
            srt = np.sort(s_ref)
            below = np.searchsorted(srt, s_v, side="left").astype(np.float64)     # #{u: f(u) < f(v)}
            below_eq = np.searchsorted(srt, s_v, side="right").astype(np.float64)  # #{u: f(u) <= f(v)}
            shift = {"min": below, "max": below_eq, "average": (below + below_eq) / 2.0}[self.ties]
        else:
            shift = np.zeros(B)
        # rank of v itself as a reference row (only subtracted when v is in D' and removed from it)
        r_self = self._rank_from(gt[np.minimum(pos, ref.size - 1)], ge[np.minimum(pos, ref.size - 1)]) \
            - {"min": 0.0, "max": 1.0, "average": 0.5}[self.ties]
        self_on = present.astype(np.float64)
        sum_r = r0.sum() - shift - self_on * r_self
        mean_rank = sum_r / n_eff
        if qoi == "rank":
            return mean_rank, mean_rank
        if qoi == "score":
            return (s_ref.sum() - self_on * s_v) / n_eff, mean_rank
        # top-k: rows with r0 <= k stay in; rows with k < r0 <= k + 1 get in when v's removal lifts them
        q0 = (r0 <= k)
        cnt = np.full(B, float(q0.sum()))
        if exclude:
            cand = np.flatnonzero((r0 > k) & (r0 <= k + 1))
            if cand.size:
                q_c, _ = self._ref_rows_qoi(s_ref[cand][None, :], gt[cand][None, :], ge[cand][None, :], s_v, qoi, k)
                cnt += q_c.sum(axis=1)
        q_self, _ = self._ref_rows_qoi(s_v[:, None], gt[np.minimum(pos, ref.size - 1)][:, None],
                                       ge[np.minimum(pos, ref.size - 1)][:, None], s_v if exclude else None, qoi, k)
        cnt -= self_on * q_self[:, 0]
        return cnt / n_eff, mean_rank

    # ------------------------------------------------------------------ core
    def _games(self, v: np.ndarray, s_v: np.ndarray, excl: np.ndarray | None, ref_rows: np.ndarray,
               inv_k: np.ndarray, zero_col: np.ndarray, q_full: np.ndarray, masks: np.ndarray, qoi: str,
               k: int | None) -> np.ndarray:
        """Q(S) for all coalition masks; shape (B, 2^d) (columns not in ``masks`` stay 0).

        ``v`` (B, d); ``ref_rows`` (m, d) shared or (B, m, d). Item ``b`` averages its reference rows
        with equal weight ``inv_k[b]``, leaving out row ``zero_col[b]`` (``m`` = none: the explained
        item's own row when it is removed from the reference). ``q_full`` (B,) is ``Q(A)``.
        """
        B, d = v.shape
        full = (1 << d) - 1
        if B * (1 << d) > MAX_GAME_VALUES:
            raise BudgetError(f"{B} items x 2^{d} coalition values exceed the budget of {MAX_GAME_VALUES} "
                              f"game values per call; explain at most {max(1, MAX_GAME_VALUES >> d)} items per call.")
        Q = np.zeros((B, 1 << d))
        s_excl = s_v if excl is not None else None
        Q[:, 0] = self._qoi(s_v, s_excl, qoi, k)
        Q[:, full] = q_full
        mid = masks[(masks != 0) & (masks != full)]
        if mid.size == 0:
            return Q
        shared = ref_rows.ndim == 2
        m = ref_rows.shape[-2]
        drop = zero_col < m
        per_item = mid.size * m
        if per_item <= self.max_rows:
            blocks = [(b, min(B, b + max(1, self.max_rows // per_item)), 0, mid.size)
                      for b in range(0, B, max(1, self.max_rows // per_item))]
        else:
            step = max(1, self.max_rows // m)
            blocks = [(b, b + 1, c, min(mid.size, c + step)) for b in range(B) for c in range(0, mid.size, step)]
        buf = None
        runs: dict[tuple[int, int], list] = {}
        for b0, b1, c0, c1 in blocks:
            if (c0, c1) not in runs:
                M = self._bits[mid[c0:c1]]                               # (C, d)
                runs[(c0, c1)] = [_runs(M[:, j]) for j in range(d)]
            R = ref_rows[None] if shared else ref_rows[b0:b1]            # (B', m, d)
            # feature-major buffer: every column is written once, in long contiguous runs; the scoring
            # callable gets its (N, d) transpose (a Fortran-ordered view, no copy)
            size = d * (b1 - b0) * (c1 - c0) * m
            if buf is None or buf.size < size:
                buf = np.empty(size)             # reused by every chunk of this call
            H = buf[:size].reshape(d, b1 - b0, c1 - c0, m)
            for j in range(d):                   # Gray-code order: few runs of "from u" / "from v"
                Hj, Rj, vj = H[j], R[:, None, :, j], v[b0:b1, j, None, None]
                for a, z, on in runs[(c0, c1)][j]:
                    Hj[:, a:z, :] = Rj if on else vj
            s = _call_scores(self.score_fn, H.reshape(d, -1).T).reshape(b1 - b0, c1 - c0, m)
            rank_counts = qoi == "rank" and self.ties != "average"
            if rank_counts:
                # rank = 1 + n - #{catalog <= s} (min) or 1 + n - #{catalog < s} (max), minus the removed
                # item's own count; averaged as integer sums, no float ranks materialised
                q = self._counter.count_le(s) if self.ties == "min" else self._counter.count_lt(s)
                if s_excl is not None:
                    ex = s_excl[b0:b1, None, None]
                    q += (ex > s) if self.ties == "min" else (ex >= s)
                tot = q.sum(axis=-1, dtype=np.int64).astype(np.float64)
            else:
                q = self._qoi(s, None if s_excl is None else s_excl[b0:b1], qoi, k)
                tot = q.sum(axis=-1)
            dr = drop[b0:b1]
            if dr.any():                         # take out the explained item's own reference row
                zc = np.where(dr, zero_col[b0:b1], 0)
                own = np.take_along_axis(q, np.broadcast_to(zc[:, None, None], (b1 - b0, c1 - c0, 1)), axis=2)[..., 0]
                tot -= own * dr[:, None]
            mean = tot * inv_k[b0:b1, None]
            Q[b0:b1, mid[c0:c1]] = (self.n + 1.0) - mean if rank_counts else mean
        return Q

    def _check_common(self, owner: str, qoi: str, k: Any, max_coalition_size: Any) -> tuple[int | None, int]:
        check_param(owner, "qoi", qoi, qoi in QOIS, f"one of {QOIS}")
        if qoi == "topk":
            check_param(owner, "k", k, isinstance(k, (int, np.integer)) and not isinstance(k, bool)
                        and 1 <= k <= self.n, f"an int in [1, {self.n}] (the top-k cut-off) for qoi='topk'")
            k = int(k)
        c = self.d - 1 if max_coalition_size is None else max_coalition_size
        check_param(owner, "max_coalition_size", max_coalition_size,
                    isinstance(c, (int, np.integer)) and not isinstance(c, bool) and 0 <= c <= self.d - 1,
                    f"None (exact) or an int in [0, {self.d - 1}]")
        return k, int(c)

    def _ids(self, idx: np.ndarray) -> list[str]:
        return [self.item_ids[i] if self.item_ids is not None else str(i) for i in idx]

    # ------------------------------------------------------------------ public
    def explain(self, items: Any, qoi: str = "rank", *, k: int | None = None, reference: Any = None,
                sample_size: int | None = None, max_coalition_size: int | None = None,
                replace: bool = False, exclude_item: bool = True, anchor: bool = True,
                seed: Any = None) -> Explanation:
        """ShaRP values of catalog items for one QoI (Algorithm 1; exact or approximate).

        Parameters
        ----------
        items : int or array-like of int, shape (B,)
            Catalog indices of the items ``v`` to explain.
        qoi : {"score", "rank", "topk"}
            Eq. 2, Eq. 3 (``α = −1``) or Eq. 4.
        k : int, optional
            Top-k cut-off in ``[1, n]``; required for ``qoi="topk"``.
        reference : array-like of int, optional
            Catalog indices of the reference set ``D'`` (default: the whole catalog).
        sample_size : int, optional
            ``m`` of Algorithm 1: reference rows drawn per explained item (without replacement
            unless ``replace``). ``None`` or ``≥ |D' ∖ {v}|`` (without replacement) = every
            reference row (exact).
        max_coalition_size : int, optional
            ``c`` of Algorithm 1 in ``[0, d−1]``; ``None`` = ``d − 1`` (exact, efficient).
        replace : bool
            Draw the ``m`` rows with replacement.
        exclude_item : bool
            ``True`` (Eq. 3, Alg. 1 line 4): ``v`` is removed from the reference and from the
            catalog its hybrids are ranked in. ``False``: xai-sharp's convention (docs/sharp.md).
        anchor : bool
            Use the exact reference mean ``Q(A) = mean_u q(u)`` (known without any hybrid) for the
            full coalition also when the other ``Q(S)`` are estimated from a sample. Then
            ``Σφ = α(q(v) − mean q)`` exactly for every ``m`` (the sampling error is spread over
            the features); ``False`` uses the sample's own mean (efficiency only w.r.t. the sample).
            No effect on exact computation.
        seed : int or numpy Generator, optional
            Randomness of the sampling (per call, ``np.random.default_rng(seed)``).

        Returns
        -------
        Explanation
            ``values`` (B, d) float64 contributions, ``base_values`` (B,) = α·(exact mean QoI over
            the reference), ``prediction`` (B,) = α·QoI(v), ``data`` = the items' features,
            ``method`` ``"sharp-score" | "sharp-rank" | "sharp-topk"``, ``extra`` with ``qoi``,
            ``alpha``, ``k``, ``ties``, ``exact``, ``sample_size``, ``max_coalition_size``,
            ``n_catalog``, ``normalizer`` (Z of Eq. 8), per-item ``item_index``, ``rank`` (catalog
            rank of v), ``mean_rank``, ``qoi_value`` (plain QoI(v)), ``mean_qoi`` and
            ``sample_base_value`` (α·mean over the rows actually used).

        Raises
        ------
        InvalidInputError
            Bad item/reference indices, empty reference after removing ``v``.
        InvalidParameterError
            Bad ``qoi``, ``k``, ``sample_size``, ``max_coalition_size``.
        """
        t0 = time.perf_counter()
        owner = "SharpExplainer.explain"
        k, c = self._check_common(owner, qoi, k, max_coalition_size)
        idx = _as_index_array(items, self.n, "items")
        if idx.size == 0:
            raise InvalidInputError("items is empty; pass at least one catalog index to explain.")
        ref = np.arange(self.n) if reference is None else np.unique(_as_index_array(reference, self.n, "reference"))
        if ref.size == 0:
            raise InvalidInputError("reference is empty; pass catalog indices of the reference set D'.")
        if sample_size is not None:
            check_param(owner, "sample_size", sample_size,
                        isinstance(sample_size, (int, np.integer)) and not isinstance(sample_size, bool)
                        and sample_size >= 1, "None (exact) or an int >= 1")
        B, d, alpha = idx.size, self.d, _ALPHA[qoi]
        s_v = self.scores[idx]
        excl = idx if exclude_item else None
        # D' minus v: position of v in the (sorted, unique) reference, if it is there and removed
        pos = np.minimum(np.searchsorted(ref, idx), ref.size - 1)
        present = (ref[pos] == idx) if exclude_item else np.zeros(B, bool)
        n_eff = ref.size - present.astype(np.int64)
        if np.any(n_eff == 0):
            raise InvalidInputError("The reference set holds only the explained item; with exclude_item=True "
                                    "it must contain at least one other item.")
        mean_q, mean_rank = self._ref_means(ref, s_v, bool(exclude_item), present, pos, qoi, k)
        exact_sample = sample_size is None or (not replace and sample_size >= n_eff.min())
        if exact_sample:
            ref_rows = self.X[ref]
            inv_k = 1.0 / n_eff
            zero_col = np.where(present, pos, ref.size)            # ref.size = "no column to drop"
            q_full = mean_q
            m_used = n_eff
        else:
            rng = np.random.default_rng(seed)
            m = int(sample_size)
            pick = np.empty((B, m), dtype=np.int64)
            for b in range(B):
                cand = np.arange(ref.size) if not present[b] else np.delete(np.arange(ref.size), pos[b])
                pick[b] = rng.choice(cand, size=m, replace=bool(replace))
            ref_rows = self.X[ref[pick]]
            s_ref, gt, ge = self._ref_base(ref)
            q_pick, _ = self._ref_rows_qoi(s_ref[pick], gt[pick], ge[pick], None if excl is None else s_v, qoi, k)
            q_full = q_pick.mean(axis=1)
            inv_k = np.full(B, 1.0 / m)
            zero_col = np.full(B, m)
            m_used = np.full(B, m)
        masks = _coalition_masks(d, c)
        Q = self._games(self.X[idx], s_v, excl, ref_rows, inv_k, zero_col, q_full, masks, qoi, k)
        full = (1 << d) - 1
        sample_base = Q[:, full].copy()
        if anchor:
            Q[:, full] = mean_q
        phi = alpha * Q @ self._weights(c).T
        q_v = Q[:, 0]
        extra = {
            "qoi": qoi, "alpha": alpha, "k": k, "ties": self.ties, "exclude_item": bool(exclude_item),
            "exact": bool(exact_sample and c == d - 1), "anchor": bool(anchor), "sample_size": int(np.max(m_used)),
            "max_coalition_size": c, "n_catalog": self.n, "normalizer": self.normalizer(qoi),
            "item_index": idx.copy(), "rank": self.ranks[idx].copy(),
            "qoi_value": q_v.copy(), "mean_qoi": mean_q.copy(), "sample_base_value": alpha * sample_base,
        }
        extra["mean_rank"] = mean_rank
        return Explanation(values=phi, base_values=alpha * mean_q, prediction=alpha * q_v,
                           feature_names=self.feature_names, method=_METHOD[qoi], model_name=self.model_name,
                           model_version=self.model_version, data=self.X[idx].copy(),
                           instance_ids=self._ids(idx), compute_time=time.perf_counter() - t0, extra=extra)

    def explain_pairwise(self, pairs: Any, qoi: str = "rank", *, k: int | None = None,
                         max_coalition_size: int | None = None, exclude_item: bool = False,
                         halve: bool = False) -> Explanation:
        """Pairwise ShaRP (Section 5, Eq. 7): explain ``v`` against ``u`` with ``u`` as baseline.

        For coalition ``S`` the hybrid is ``v_{A∖S} u_S`` (reference set ``D' = {u}``, ``m = 1``);
        the QoI of the hybrid is computed against the catalog (rank/top-k) or directly (score).
        Efficiency gives ``Σφ = α·(q(v) − q(u))``: for the rank QoI the contributions sum to
        ``rank(u) − rank(v)``, the number of positions ``v`` is ahead of ``u`` (positive: ``v ≻ u``).

        Parameters
        ----------
        pairs : array-like of int, shape (P, 2) or (2,)
            Rows ``(v, u)`` of catalog indices; the explanation is from ``v``'s point of view.
        qoi : {"rank", "score", "topk"}
            The paper uses rank (Section 5).
        k : int, optional
            Top-k cut-off for ``qoi="topk"``.
        max_coalition_size : int, optional
            ``c`` of Algorithm 1; ``None`` = exact.
        exclude_item : bool
            ``False`` (default): hybrids are ranked in the full catalog, so ``q(v)`` and ``q(u)``
            are the true catalog ranks. ``True``: ranked in ``D ∖ {v}`` (Eq. 3 literally); then
            ``q(u)`` is ``u``'s rank with ``v`` removed (one better when ``v`` is ahead of ``u``).
        halve : bool
            Divide the contributions by 2 and set ``base = α·(q(u)+q(v))/2``: the reference
            distribution uniform on ``{u, v}`` of Section 5's efficiency statement ("sum to half
            the rank difference").

        Returns
        -------
        Explanation
            ``method="sharp-pairwise"``, ``values`` (P, d), ``prediction`` = α·q(v),
            ``base_values`` = α·q(u) (or the pair mean with ``halve``), ``data`` = ``v − u``
            features difference, ``extra`` with ``qoi``, ``alpha``, ``pair_index`` (P, 2),
            ``rank`` (P,) and ``rank_other`` (P,) catalog ranks, ``qoi_value``, ``qoi_other``,
            ``outcome_difference`` = α·(q(v) − q(u)).

        Raises
        ------
        InvalidInputError
            Bad pair shape or indices, or a pair of an item with itself.
        InvalidParameterError
            Bad ``qoi``, ``k``, ``max_coalition_size``.
        """
        t0 = time.perf_counter()
        owner = "SharpExplainer.explain_pairwise"
        k, c = self._check_common(owner, qoi, k, max_coalition_size)
        P = _as_index_array(pairs, self.n, "pairs")
        if P.ndim == 1 and P.size == 2:
            P = P.reshape(1, 2)
        if P.ndim != 2 or P.shape[1] != 2 or P.shape[0] == 0:
            raise InvalidInputError(f"pairs must have shape (n_pairs, 2) of catalog indices (v, u); got {P.shape}.")
        if np.any(P[:, 0] == P[:, 1]):
            raise InvalidInputError("A pair compares an item with itself; pass two different catalog indices.")
        vi, ui = P[:, 0], P[:, 1]
        B, d, alpha = P.shape[0], self.d, _ALPHA[qoi]
        s_v, s_u = self.scores[vi], self.scores[ui]
        excl = vi if exclude_item else None
        q_u = self._qoi(s_u[:, None], None if excl is None else s_v, qoi, k)      # (B, 1)
        masks = _coalition_masks(d, c)
        Q = self._games(self.X[vi], s_v, excl, self.X[ui][:, None, :], np.ones(B), np.full(B, 1), q_u[:, 0],
                        masks, qoi, k)
        phi = alpha * Q @ self._weights(c).T
        q_v, q_o = Q[:, 0], q_u[:, 0]
        base = alpha * q_o
        if halve:
            phi = phi / 2.0
            base = alpha * (q_v + q_o) / 2.0
        extra = {
            "qoi": qoi, "alpha": alpha, "k": k, "ties": self.ties, "exclude_item": bool(exclude_item),
            "halve": bool(halve), "max_coalition_size": c, "exact": c == d - 1, "n_catalog": self.n,
            "pair_index": P.copy(), "item_index": vi.copy(), "rank": self.ranks[vi].copy(),
            "rank_other": self.ranks[ui].copy(), "qoi_value": q_v.copy(), "qoi_other": q_o.copy(),
            "outcome_difference": alpha * (q_v - q_o) + 0.0, "other_ids": self._ids(ui),
        }
        ids = [f"{a}>{b}" for a, b in zip(self._ids(vi), self._ids(ui))]
        return Explanation(values=phi, base_values=base, prediction=alpha * q_v, feature_names=self.feature_names,
                           method="sharp-pairwise", model_name=self.model_name, model_version=self.model_version,
                           data=self.X[vi] - self.X[ui], instance_ids=ids,
                           compute_time=time.perf_counter() - t0, extra=extra)

    def normalizer(self, qoi: str) -> float:
        """``Z`` of Eq. 8: the largest distance between two outcomes of the QoI on this catalog.

        rank: ``n`` (the paper's Z = 189 for CSRankings); top-k: 1; score: ``max f − min f`` over
        the catalog (1.0 if all scores are equal).
        """
        if qoi == "rank":
            return float(self.n)
        if qoi == "topk":
            return 1.0
        z = float(self.sorted_scores[-1] - self.sorted_scores[0])
        return z if z > 0 else 1.0


# --------------------------------------------------------------------------- functions
def learner_score_fn(learner: Any, baseline: Any = None) -> Callable[[np.ndarray], np.ndarray]:
    """A scoring callable for :class:`SharpExplainer` from a prefstream preference learner.

    In order of preference: the learner's vectorised ``score(X)`` (capacity models: the overall
    value F(x)); else its batch margin against a fixed ``baseline`` item, ``margins(X, B)`` or
    ``margin(X, B)`` (``g(x, b) = u(x) − u(b)`` for a utility model, which ranks exactly like
    ``u``); else ``margin_one`` row by row (slow: a Python call per hybrid).

    A ranking needs a transitive model. For non-transitive models (e.g. GPM) the margin against a
    baseline is *a* score, but the ranking it induces depends on the baseline; use the pairwise
    explainers of those models instead.

    Parameters
    ----------
    learner : object
        With ``score`` or ``margins``/``margin`` or ``margin_one`` and ``feature_names``.
    baseline : array-like of shape (d,), optional
        The fixed right-hand item of the margin (default: zeros).

    Returns
    -------
    callable
        ``f(X (N, d)) -> (N,)`` float64 scores.

    Raises
    ------
    InvalidInputError
        If the learner offers none of these methods.
    """
    score = getattr(learner, "score", None)
    if callable(score):
        return lambda X: np.asarray(score(np.ascontiguousarray(X)), dtype=np.float64).reshape(-1)
    names = list(getattr(learner, "feature_names", []) or [])
    d = len(names) if baseline is None else np.size(baseline)
    b = np.zeros(d) if baseline is None else np.asarray(baseline, dtype=np.float64).reshape(-1)
    for meth in ("margins", "margin"):
        f = getattr(learner, meth, None)
        if callable(f):
            return lambda X, f=f: np.asarray(
                f(np.ascontiguousarray(X), np.repeat(b[None, :], np.shape(X)[0], axis=0)), dtype=np.float64).reshape(-1)
    one = getattr(learner, "margin_one", None)
    if callable(one) and names:
        right = dict(zip(names, b.tolist()))
        return lambda X: np.array([one(dict(zip(names, row)), right) for row in np.asarray(X, dtype=np.float64).tolist()],
                                  dtype=np.float64)
    raise InvalidInputError(f"{type(learner).__name__} has no score(X), margins/margin(XL, XR) or margin_one with "
                            "feature_names; pass a scoring callable X -> scores instead.")


def explain(score_fn: Callable, X: Any, items: Any, qoi: str = "rank", *, feature_names: Sequence[str] | None = None,
            item_ids: Sequence[Any] | None = None, ties: str = "min", max_rows: int = DEFAULT_MAX_ROWS,
            model_name: str = "", model_version: int = 0, **kwargs: Any) -> Explanation:
    """One-shot :meth:`SharpExplainer.explain` (scores and sorts the catalog, then explains).

    For repeated requests on the same catalog and model build one :class:`SharpExplainer` and reuse
    it (the catalog is scored and sorted once).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    >>> e = explain(lambda A: A.sum(axis=1), X, [0], qoi="score")
    >>> e.values.round(6).tolist(), float(e.base_values[0]), float(e.prediction[0])
    ([[1.0, -0.5]], 0.5, 1.0)
    """
    ex = SharpExplainer(score_fn, X, feature_names=feature_names, item_ids=item_ids, ties=ties,
                        max_rows=max_rows, model_name=model_name, model_version=model_version)
    return ex.explain(items, qoi, **kwargs)


def explain_pairwise(score_fn: Callable, X: Any, pairs: Any, qoi: str = "rank", *,
                     feature_names: Sequence[str] | None = None, item_ids: Sequence[Any] | None = None,
                     ties: str = "min", max_rows: int = DEFAULT_MAX_ROWS, model_name: str = "",
                     model_version: int = 0, **kwargs: Any) -> Explanation:
    """One-shot :meth:`SharpExplainer.explain_pairwise`."""
    ex = SharpExplainer(score_fn, X, feature_names=feature_names, item_ids=item_ids, ties=ties,
                        max_rows=max_rows, model_name=model_name, model_version=model_version)
    return ex.explain_pairwise(pairs, qoi, **kwargs)


def strata_summary(expl: Explanation, n_strata: int = 10, n_catalog: int | None = None) -> list[dict]:
    """Per-stratum summaries of contributions (Section 7.2, "10 % strata").

    Items are grouped by their catalog rank (``extra["rank"]``) into ``n_strata`` strata of equal
    rank range (:func:`rank_strata`); per stratum and feature the count, mean, median, quartiles,
    min and max of the contributions are returned (the numbers behind the box plots).

    Parameters
    ----------
    expl : Explanation
        A batch ShaRP explanation (``extra`` holds ``rank`` and ``n_catalog``).
    n_strata : int
        Number of strata (10 = deciles).
    n_catalog : int, optional
        Catalog size; default ``expl.extra["n_catalog"]``.

    Returns
    -------
    list of dict
        One dict per non-empty stratum: ``stratum`` (0 = top), ``label`` (e.g. ``"0-10%"``),
        ``count``, and ``mean``/``median``/``q1``/``q3``/``min``/``max`` each a dict
        feature → float.

    Raises
    ------
    InvalidInputError
        If the explanation lacks the ranks or the catalog size.
    """
    ranks = np.asarray(expl.extra.get("rank", []), dtype=np.float64).reshape(-1)
    n = n_catalog if n_catalog is not None else expl.extra.get("n_catalog")
    V = expl.values.reshape(expl.n_instances, -1)
    if n is None or ranks.size != V.shape[0]:
        raise InvalidInputError("strata_summary needs extra['rank'] (one per instance) and the catalog size; "
                                "pass an Explanation from SharpExplainer.explain or give n_catalog.")
    st = rank_strata(ranks, int(n), n_strata)
    out = []
    width = 100.0 / n_strata
    for s in range(n_strata):
        sel = V[st == s]
        if sel.shape[0] == 0:
            continue
        stats = {
            "mean": sel.mean(axis=0), "median": np.median(sel, axis=0),
            "q1": np.percentile(sel, 25, axis=0), "q3": np.percentile(sel, 75, axis=0),
            "min": sel.min(axis=0), "max": sel.max(axis=0),
        }
        row = {"stratum": s, "label": f"{s * width:g}-{(s + 1) * width:g}%", "count": int(sel.shape[0])}
        for key, val in stats.items():
            row[key] = {f: float(x) for f, x in zip(expl.feature_names, val)}
        out.append(row)
    return out
