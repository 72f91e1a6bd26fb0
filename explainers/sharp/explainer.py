"""The ShaRP explainer bound to one scoring callable and one ranked catalog.

Pliatsika, Fonseca, Akhynko, Shevchenko & Stoyanovich (2024), *ShaRP: Explaining Rankings and
Preferences with Shapley Values*, Algorithm 1 (exact and approximate), Section 5 (pairwise).
"""

from __future__ import annotations

from functools import lru_cache

import time
from typing import Any, Callable, Sequence

import numpy as np

from explainers._coalitions import coalitions_from_integers
from explainers._players import _players
from explainers._result import Explanation
from explainers.exceptions import BudgetError, InvalidInputError, check_param
from explainers.sharp.coalitions import _coalition_masks, coalition_weights
from explainers.sharp.games import _GamesMixin
from explainers.sharp.inputs import _as_index_array, _as_matrix, _call_scores
from explainers._coalitions import shapley_of_game
from explainers.sharp.qoi import _QoIMixin
from explainers.sharp.ranks import TIE_RTOL, TIES, _RankCounter, catalog_ranks, snap_ties, tie_tolerance

__all__ = ["QOIS", "SharpExplainer"]

QOIS = ("score", "rank", "topk")
_METHOD = {"score": "sharp-score", "rank": "sharp-rank", "topk": "sharp-topk"}
_ALPHA = {"score": 1.0, "rank": -1.0, "topk": 1.0}
MAX_FEATURES = 20                  # most players ever enumerated exactly (2^20 coalitions)
MAX_SAMPLED_PLAYERS = 62           # coalition codes are int64
DEFAULT_MAX_ROWS = 1 << 16
DEFAULT_PERMUTATIONS = 64


class SharpExplainer(_QoIMixin, _GamesMixin):
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
    feature_groups : mapping of str to list of str, optional
        Groups of features explained as one player (their features are taken from the reference
        row together), e.g. one-hot indicators; the other features are players of their own.
        Values are then per player (``Explanation.feature_names`` = the player names) and ``data``
        sums each group's features.
    max_exact_players : int, default 20
        Up to this many players every coalition is enumerated (exact ShaRP); above, the values are
        estimated from ``max_coalitions`` coalitions of removed players: the smallest and largest
        sizes enumerated, complementary pairs drawn among the middle sizes, and Kernel SHAP with
        the efficiency constraint (:func:`explainers._coalitions.shapley_of_game`;
        ``extra["estimator"] = "kernel-shap-paired"`` with per-player standard errors in
        ``extra["stderr"]``).
    n_permutations : int, default 64
        Sets the default budget ``max_coalitions = n_permutations · players`` (what as many
        sampled orders of the players would evaluate).
    max_coalitions : int, optional
        Coalition evaluations per call above ``max_exact_players`` (∅ and A included).
    score_rows : int, optional
        Hybrid rows per call of ``score_fn``. ``None`` (default): the ``score_rows`` attribute of
        ``score_fn`` if it has one (:func:`explainers.sharp.learner_score_fn` sets 512: a 26-feature
        capacity model scores in cache-sized blocks ~4× faster than in one call of 65,536 rows), else
        one call per block of ``max_rows`` rows (a cheap vectorised scorer pays its per-call overhead
        once per block, not once per 1,024 rows).
    tie_rtol : float, default 1e-9
        Scores within ``tie_rtol · (max − min)`` of the catalog's scores (plus a few ulps) are ties
        (:func:`explainers.sharp.ranks.tie_tolerance`): ranks are then the same after adding a
        constant to the scorer or rescaling it, instead of depending on rounding noise.
    scores : array-like of shape (n,), optional
        ``score_fn(X)`` when the caller already has it (e.g. one explainer per event over a shared
        reference sample, scored once for all): checked like ``score_fn``'s output, not recomputed.

    Raises
    ------
    InvalidInputError
        Non-finite or mis-shaped ``X``; ``score_fn`` returning the wrong number of or non-finite
        scores; wrong number of names/ids.
    InvalidParameterError
        Bad ``ties``/``max_rows``.
    BudgetError
        More than 62 players.

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
                 max_rows: int = DEFAULT_MAX_ROWS, model_name: str = "", model_version: int = 0,
                 feature_groups=None, max_exact_players: int = MAX_FEATURES,
                 n_permutations: int = DEFAULT_PERMUTATIONS, tie_rtol: float = TIE_RTOL,
                 score_rows: int | None = None, max_coalitions: int | None = None, scores: Any = None):
        if not callable(score_fn):
            raise InvalidInputError(f"score_fn must be a callable X -> scores; got {type(score_fn).__name__}.")
        self.X = _as_matrix(X)
        n, d = self.X.shape
        check_param("SharpExplainer", "max_exact_players", max_exact_players,
                    isinstance(max_exact_players, (int, np.integer)) and 1 <= max_exact_players <= MAX_FEATURES,
                    f"an int in [1, {MAX_FEATURES}]")
        check_param("SharpExplainer", "n_permutations", n_permutations,
                    isinstance(n_permutations, (int, np.integer)) and n_permutations >= 4, "an int >= 4")
        check_param("SharpExplainer", "tie_rtol", tie_rtol,
                    isinstance(tie_rtol, (int, float)) and 0 <= tie_rtol < 1e-3, "a float in [0, 1e-3)")
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
        self.player_names, self.member = _players(self.feature_names, feature_groups)
        self.p = len(self.player_names)
        self.grouped = self.p != d
        if self.p > MAX_SAMPLED_PLAYERS:
            raise BudgetError(f"ShaRP supports at most {MAX_SAMPLED_PLAYERS} players; got {self.p}. "
                              "Group features (feature_groups) or explain a projection.")
        if score_rows is None:
            score_rows = getattr(score_fn, "score_rows", None) or self.max_rows
        check_param("SharpExplainer", "score_rows", score_rows,
                    isinstance(score_rows, (int, np.integer)) and score_rows >= 1, "None or an int >= 1")
        self.score_rows = int(score_rows)
        self.max_exact_players = int(max_exact_players)
        self.n_permutations = int(n_permutations)
        check_param("SharpExplainer", "max_coalitions", max_coalitions, max_coalitions is None or (
            isinstance(max_coalitions, (int, np.integer)) and max_coalitions >= 4), "None or an int >= 4")
        self.max_coalitions = int(max_coalitions) if max_coalitions is not None else self.n_permutations * self.p
        raw = _call_scores(score_fn, self.X) if scores is None else _call_scores(lambda _X: scores, self.X)
        self.tie_rtol = float(tie_rtol)
        self.tol = tie_tolerance(raw, self.tie_rtol) if self.tie_rtol > 0 else 0.0
        self.scores = snap_ties(raw, self.tol)
        self.sorted_scores = np.sort(self.scores)
        self.ranks = catalog_ranks(self.scores, ties, self.tol)
        self._counter = _RankCounter(self.sorted_scores)
        self._W: dict[int, np.ndarray] = {}

    @property
    def sampled(self) -> bool:
        """Whether explanations sample orders of the players (more than ``max_exact_players``)."""
        return self.p > self.max_exact_players

    def _feature_bits(self, codes: np.ndarray) -> np.ndarray:
        """Feature-level removal masks (C, d) of player coalition codes (C,) (read-only, cached)."""
        codes = np.ascontiguousarray(codes, dtype=np.int64)
        return _feature_bits(codes.tobytes(), self.p, self.member.tobytes() if self.grouped else None,
                             self.member.shape)

    def _groups(self) -> dict:
        """``{player: [features]}`` of the grouped players (for the record)."""
        return {n: [f for f, m in zip(self.feature_names, row) if m]
                for n, row in zip(self.player_names, self.member) if row.sum() > 1}

    def _data(self, A: np.ndarray) -> np.ndarray:
        """Per-player data: the features, or each group's sum."""
        return A.copy() if not self.grouped else A @ self.member.T.astype(np.float64)

    @classmethod
    def from_catalog(cls, catalog: Any, **kwargs: Any) -> "SharpExplainer":
        """Build from an object with ``X``, ``score_fn``, ``feature_names``, ``item_ids``
        (e.g. :class:`stream.adapters.rankings.RankedCatalog`)."""
        return cls(catalog.score_fn, catalog.X, feature_names=catalog.feature_names,
                   item_ids=getattr(catalog, "item_ids", None), **kwargs)

    # ------------------------------------------------------------------ QoIs
    def _weights(self, c: int) -> np.ndarray:
        if c not in self._W:
            self._W[c] = coalition_weights(self.p, c)
        return self._W[c]


    def _check_common(self, owner: str, qoi: str, k: Any, max_coalition_size: Any) -> tuple[int | None, int]:
        check_param(owner, "qoi", qoi, qoi in QOIS, f"one of {QOIS}")
        if qoi == "topk":
            check_param(owner, "k", k, isinstance(k, (int, np.integer)) and not isinstance(k, bool)
                        and 1 <= k <= self.n, f"an int in [1, {self.n}] (the top-k cut-off) for qoi='topk'")
            k = int(k)
        c = self.p - 1 if max_coalition_size is None else max_coalition_size
        check_param(owner, "max_coalition_size", max_coalition_size,
                    isinstance(c, (int, np.integer)) and not isinstance(c, bool) and 0 <= c <= self.p - 1
                    and (max_coalition_size is None or not self.sampled),
                    f"None (exact) or an int in [0, {self.p - 1}] (None above max_exact_players)")
        return k, int(c)

    def _shapley(self, v, s_v, excl, ref_rows, inv_k, zero_col, q_full, c, qoi, k, anchor_q, seed, q_rows=None):
        """Shapley values of the removal games of items ``v`` (without the QoI's sign α).

        Exact weights over every coalition of at most ``c + 1`` removed players up to
        ``max_exact_players`` players; sampled orders above. ``anchor_q`` (B,) replaces Q(A) when given.

        ``q_rows`` (B, m): the QoI of each sampled reference row (a sample of reference rows, one per
        column of ``ref_rows``): then φ is the mean of the m single-row Shapley values and its standard
        error their spread / √m.

        Returns ``(phi (B, p), stderr (B, p) or None, Q(A) of the rows used (B,), info dict)``.
        """
        full = (1 << self.p) - 1
        if not self.sampled and q_rows is not None:
            masks = _coalition_masks(self.p, c)
            Qr = np.zeros((v.shape[0], 1 << self.p, q_rows.shape[1]))
            Qr[:, masks] = self._games(v, s_v, excl, ref_rows, inv_k, zero_col, q_rows, masks, qoi, k, per_row=True)
            W = self._weights(c)
            sample_base = Qr[:, full].mean(axis=1)
            if anchor_q is not None:                 # each row's game anchored at the exact mean: a control variate
                Qr[:, full] = anchor_q[:, None]
            per = np.einsum("bkm,pk->bmp", Qr, W)                              # one Shapley value per row
            m = q_rows.shape[1]
            se = per.std(axis=1, ddof=1) / np.sqrt(m) if m > 1 else np.zeros((v.shape[0], self.p))
            return per.mean(axis=1), se, sample_base, {"estimator": "reference-sample", "n_coalitions": int(masks.size)}
        if not self.sampled:
            masks = _coalition_masks(self.p, c)
            Q = np.zeros((v.shape[0], 1 << self.p))
            Q[:, masks] = self._games(v, s_v, excl, ref_rows, inv_k, zero_col, q_full, masks, qoi, k)
            sample_base = Q[:, full].copy()
            if anchor_q is not None:
                Q[:, full] = anchor_q
            return Q @ self._weights(c).T, None, sample_base, {"estimator": "exact", "n_coalitions": int(masks.size)}

        def game(codes):
            Q = self._games(v, s_v, excl, ref_rows, inv_k, zero_col, q_full, codes, qoi, k)
            if anchor_q is not None:
                Q[:, codes == full] = anchor_q[:, None]
            return Q

        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        # φ = Shapley value of the game ν(T) = −Q(T removed): Σφ = Q(∅) − Q(A) exactly
        phi, se, plan = shapley_of_game(lambda codes: -game(codes), self.p, self.max_coalitions, rng)
        est = "exact" if plan.exact else "kernel-shap-paired"
        return phi, se, q_full.copy(), {"estimator": est, "n_coalitions": plan.n_coalitions,
                                        "n_enumerated": plan.n_fixed + 2}

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
            ``sample_base_value`` (α·mean over the rows actually used), ``estimator``
            (``"exact"``, ``"reference-sample"`` or ``"kernel-shap-paired"``), ``n_coalitions``,
            ``n_enumerated`` and ``stderr`` (B, players) for sampled estimators, ``players``,
            ``feature_groups`` and ``tie_tolerance``. ``values`` and ``feature_names`` are per player.

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
        B, alpha = idx.size, _ALPHA[qoi]
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
            ref_rows = self.X if reference is None else self.X[ref]     # the whole catalog: no copy
            inv_k = 1.0 / n_eff
            zero_col = np.where(present, pos, ref.size)            # ref.size = "no column to drop"
            q_full = mean_q
            m_used = n_eff
        else:
            rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
            m = int(sample_size)
            pick = np.empty((B, m), dtype=np.int64)
            for b in range(B):
                cand = np.arange(ref.size) if not present[b] else np.delete(np.arange(ref.size), pos[b])
                pick[b] = rng.choice(cand, size=m, replace=bool(replace))
            ref_rows = self.X[ref[pick]]
            s_ref, gt, ge = self._ref_base(ref)
            q_pick, _ = self._ref_rows_qoi(s_ref[pick], gt[pick], ge[pick], None if excl is None else s_v, qoi, k)
            q_full = q_pick.mean(axis=1)
            q_rows = np.asarray(q_pick, dtype=np.float64)
            inv_k = np.full(B, 1.0 / m)
            zero_col = np.full(B, m)
            m_used = np.full(B, m)
        phi, se, sample_base, info = self._shapley(self.X[idx], s_v, excl, ref_rows, inv_k, zero_col, q_full, c, qoi,
                                                    k, mean_q if anchor else None, rng if not exact_sample else seed,
                                                    None if exact_sample else q_rows)
        phi = alpha * phi
        q_v = self._qoi(s_v, s_v if excl is not None else None, qoi, k)
        extra = {
            "qoi": qoi, "alpha": alpha, "k": k, "ties": self.ties, "tie_tolerance": self.tol,
            "exclude_item": bool(exclude_item),
            "exact": bool(exact_sample and c == self.p - 1 and info["estimator"] == "exact"), "anchor": bool(anchor),
            "sample_size": int(np.max(m_used)), "max_coalition_size": c, "n_catalog": self.n,
            "normalizer": self.normalizer(qoi), "item_index": idx.copy(), "rank": self.ranks[idx].copy(),
            "qoi_value": q_v.copy(), "mean_qoi": mean_q.copy(), "sample_base_value": alpha * sample_base,
            "players": self.p, **info,
        }
        if se is not None:
            extra["stderr"] = abs(alpha) * se
        if self.grouped:
            extra["feature_groups"] = self._groups()
        extra["mean_rank"] = mean_rank
        return Explanation(values=phi, base_values=alpha * mean_q, prediction=alpha * q_v,
                           feature_names=self.player_names, method=_METHOD[qoi], model_name=self.model_name,
                           model_version=self.model_version, data=self._data(self.X[idx]),
                           instance_ids=self._ids(idx), compute_time=time.perf_counter() - t0, extra=extra)

    def explain_pairwise(self, pairs: Any, qoi: str = "rank", *, k: int | None = None,
                         max_coalition_size: int | None = None, exclude_item: bool = False,
                         halve: bool = False, seed: Any = None) -> Explanation:
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
        seed : int or numpy Generator, optional
            Randomness of the sampled orders (only above ``max_exact_players`` players).

        Returns
        -------
        Explanation
            ``method="sharp-pairwise"``, ``values`` (P, d), ``prediction`` = α·q(v),
            ``base_values`` = α·q(u) (or the pair mean with ``halve``), ``data`` = ``v − u``
            features difference, ``extra`` with ``qoi``, ``alpha``, ``pair_index`` (P, 2),
            ``rank`` (P,) and ``rank_other`` (P,) catalog ranks, ``qoi_value``, ``qoi_other``,
            ``outcome_difference`` = α·(q(v) − q(u)); ``estimator``, ``stderr`` (sampled orders above
            ``max_exact_players``), ``players``, ``feature_groups``, ``tie_tolerance`` as in :meth:`explain`.

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
        B, alpha = P.shape[0], _ALPHA[qoi]
        s_v, s_u = self.scores[vi], self.scores[ui]
        excl = vi if exclude_item else None
        q_u = self._qoi(s_u[:, None], None if excl is None else s_v, qoi, k)      # (B, 1)
        phi, se, _, info = self._shapley(self.X[vi], s_v, excl, self.X[ui][:, None, :], np.ones(B), np.full(B, 1),
                                         q_u[:, 0], c, qoi, k, None, seed)
        phi = alpha * phi
        q_v, q_o = self._qoi(s_v, s_v if excl is not None else None, qoi, k), q_u[:, 0]
        base = alpha * q_o
        if halve:
            phi = phi / 2.0
            se = None if se is None else se / 2.0
            base = alpha * (q_v + q_o) / 2.0
        extra = {
            "qoi": qoi, "alpha": alpha, "k": k, "ties": self.ties, "tie_tolerance": self.tol,
            "exclude_item": bool(exclude_item), "halve": bool(halve), "max_coalition_size": c,
            "exact": bool(c == self.p - 1 and info["estimator"] == "exact"), "n_catalog": self.n,
            "pair_index": P.copy(), "item_index": vi.copy(), "rank": self.ranks[vi].copy(),
            "rank_other": self.ranks[ui].copy(), "qoi_value": q_v.copy(), "qoi_other": q_o.copy(),
            "outcome_difference": alpha * (q_v - q_o) + 0.0, "other_ids": self._ids(ui), "players": self.p, **info,
        }
        if se is not None:
            extra["stderr"] = abs(alpha) * se
        if self.grouped:
            extra["feature_groups"] = self._groups()
        ids = [f"{a}>{b}" for a, b in zip(self._ids(vi), self._ids(ui))]
        return Explanation(values=phi, base_values=base, prediction=alpha * q_v, feature_names=self.player_names,
                           method="sharp-pairwise", model_name=self.model_name, model_version=self.model_version,
                           data=self._data(self.X[vi] - self.X[ui]), instance_ids=ids,
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


@lru_cache(maxsize=64)
def _feature_bits(codes: bytes, p: int, member: bytes | None, shape: tuple) -> np.ndarray:
    """Feature-level removal masks of player coalition codes; ``member`` (players × features, bool bytes) maps
    players to features (None: one feature each). Cached: the stream explains every event with the same
    coalitions, in an explainer of its own."""
    bits = coalitions_from_integers(np.frombuffer(codes, dtype=np.int64), p)
    if member is not None:
        bits = (bits.astype(np.int64) @ np.frombuffer(member, dtype=bool).reshape(shape).astype(np.int64)) > 0
    bits.flags.writeable = False
    return bits
