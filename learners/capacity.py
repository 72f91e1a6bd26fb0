"""Online capacity learners: Choquet integral / multilinear model in Möbius coordinates.

Implements Herin, Perny & Sokolovska, *Online Learning of Capacity-Based Preference Models*,
IJCAI 2024 (paper 002):

* the model F(x) = Σ_S m(S) φ_S(x_S) (Section 2, Equation (1)) with φ_S = min (Choquet) or
  Π (multilinear), over all coalitions or a k-additive truncation;
* the hinge loss l_t with discrimination threshold δ (problem (2), Section 3.1);
* :class:`CapacityRDA` — Algorithm 1 (RDA, closed form (5)) and, with ``constraints``,
  Algorithm 2 (ADMM-RDA, Section 4.2) which reduces exactly to Algorithm 1 when B is empty;
* :class:`CapacityFOBOS` — the FOBOS baseline of Section 5 (Duchi & Singer 2009);
* an online min-max scaler for criteria on arbitrary scales and "less is better" criteria.

Merging (:meth:`CapacityRDA.__iadd__`): Algorithm 1's state is the subgradient sum G_t and the
round count t; ``a += b`` sets G = G_a + G_b, t = t_a + t_b (so ḡ is the count-weighted average
of the two ḡ's) and recomputes m by the closed form at t. This is *exactly* the RDA iterate of
the concatenated stream (in any order) whenever each subgradient g_τ is the same vector in the
partition run as in the union run — e.g. while every hinge is active (margins below δ, the usual
regime with γ = 10³), or for any fixed evaluation points. In general g_τ depends on the iterate
path, so the merge is an approximation of the union run (still a valid dual average of
subgradients of the union's losses, evaluated at other points). ADMM-RDA and FOBOS keep
path-dependent last iterates (µ_t, z_t, m_t) with no additive sufficient statistic, so merging
them raises :class:`~learners.exceptions.InvalidParameterError`.

Examples
--------
>>> import numpy as np
>>> model = CapacityRDA(criteria=["price", "quality"], decreasing=["price"])
>>> rng = np.random.default_rng(0)
>>> for _ in range(200):
...     a, b = rng.random(2), rng.random(2)
...     fa, fb = min(1 - a[0], a[1]), min(1 - b[0], b[1])
...     model.learn_one({"price": a[0], "quality": a[1]}, {"price": b[0], "quality": b[1]}, 1 if fa > fb else -1)
>>> model.predict_one({"price": 0.1, "quality": 0.9}, {"price": 0.9, "quality": 0.1})
1
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from learners._mobius import (
    AGGREGATIONS,
    CONSTRAINTS,
    MAX_FULL_N,
    ConstraintOperator,
    SubsetIndex,
    capacity_from_mobius,
    constraint_matrix,
    constraint_residuals,
    violation,
)
from learners.base import PreferenceLearner, check_outcome, dict_to_array
from learners.capacity_solvers import (
    ADMMState,
    clip_into,
    admm_rda_step,
    fobos_step,
    hinge_loss,
    hinge_subgradient_coef,
    rda_from_sum,
)
from learners.exceptions import (
    BudgetError,
    InvalidInputError,
    InvalidParameterError,
    NotFittedError,
    SnapshotError,
    check_param,
)

__all__ = ["CapacityFOBOS", "CapacityRDA", "MinMaxScaler", "choquet_from_capacity"]

_SCALERS = ("none", "minmax")
_WINDOW = 256          # recent examples kept for the regret proxy
_CHUNK = 1 << 21       # elements per feature block when scoring batches


class MinMaxScaler:
    """Online min-max scaler onto [0, 1], mergeable (min of mins, max of maxes).

    Parameters
    ----------
    n : int
        Number of criteria.

    Notes
    -----
    Before two distinct values of a criterion have been seen its scaled value is 0. Values
    outside the range seen so far are clipped to [0, 1] when transforming.
    """

    def __init__(self, n: int) -> None:
        self.lo = np.full(n, np.inf)
        self.hi = np.full(n, -np.inf)

    def learn(self, X: np.ndarray) -> None:
        """Widen the ranges with the rows of ``X`` (shape (b, n) or (n,))."""
        X = np.atleast_2d(X)
        np.minimum(self.lo, X.min(axis=0), out=self.lo)
        np.maximum(self.hi, X.max(axis=0), out=self.hi)

    def transform(self, X: np.ndarray) -> np.ndarray:
        """(x − lo) / (hi − lo) clipped to [0, 1]; 0 where hi ≤ lo."""
        span = self.hi - self.lo
        ok = np.isfinite(span) & (span > 0)
        out = np.where(ok, (X - np.where(ok, self.lo, 0.0)) / np.where(ok, span, 1.0), 0.0)
        return np.clip(out, 0.0, 1.0)

    def merge(self, other: "MinMaxScaler") -> None:
        np.minimum(self.lo, other.lo, out=self.lo)
        np.maximum(self.hi, other.hi, out=self.hi)


def choquet_from_capacity(X: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Choquet integral by its sorted definition (Section 2): C_v(x) = Σ_i (x_(i) − x_(i−1)) v(X_(i)).

    Parameters
    ----------
    X : ndarray of shape (b, n)
    v : ndarray of shape (2**n,)
        Full capacity in mask order.

    Returns
    -------
    ndarray of shape (b,)
        O(b n log n) once v is known — used to score large catalogs with a full Choquet model.
    """
    X = np.atleast_2d(np.asarray(X, dtype=np.float64))
    order = np.argsort(X, axis=1, kind="stable")
    xs = np.take_along_axis(X, order, axis=1)
    bits = np.left_shift(np.int64(1), order.astype(np.int64))
    upper = np.cumsum(bits[:, ::-1], axis=1)[:, ::-1]      # X_(i) = {(i), …, (n)}
    steps = np.diff(xs, axis=1, prepend=0.0)
    return (steps * v[upper]).sum(axis=1)


class _CapacityLearner(PreferenceLearner):
    """Shared parts of the capacity learners (model, inputs, scoring, state)."""

    model_name = "capacity"
    _algorithm = "base"

    def __init__(self, criteria: Sequence[str], aggregation: str = "choquet", k_additive: int | None = None,
                 l1: float = 0.01, gamma: float = 1e3, delta: float = 0.01, scaler: str = "none",
                 decreasing: Sequence[str] = ()) -> None:
        owner = type(self).__name__
        check_param(owner, "criteria", criteria,
                    not isinstance(criteria, str) and len(list(criteria)) >= 1
                    and len(set(map(str, criteria))) == len(list(criteria)),
                    "a non-empty sequence of distinct criterion names")
        check_param(owner, "aggregation", aggregation, aggregation in AGGREGATIONS, f"one of {AGGREGATIONS}")
        check_param(owner, "l1", l1, _is_real(l1) and 0 <= l1 < math.inf, "a float in the range [0, inf)")
        check_param(owner, "gamma", gamma, _is_real(gamma) and 0 < gamma < math.inf, "a float in the range (0, inf)")
        check_param(owner, "delta", delta, _is_real(delta) and 0 < delta < math.inf, "a float in the range (0, inf)")
        check_param(owner, "scaler", scaler, scaler in _SCALERS, f"one of {_SCALERS}")
        check_param(owner, "decreasing", decreasing,
                    not isinstance(decreasing, str) and set(map(str, decreasing)) <= set(map(str, criteria)),
                    f"a sequence of names among the criteria {list(criteria)}")
        self.criteria = list(map(str, criteria))
        self.aggregation = aggregation
        self.k_additive = k_additive
        self.l1 = float(l1)
        self.gamma = float(gamma)
        self.delta = float(delta)
        self.scaler = scaler
        self.decreasing = [str(c) for c in decreasing]
        try:
            self._index = SubsetIndex(len(self.criteria), k_additive)
        except InvalidParameterError as exc:
            raise InvalidParameterError(f"{owner}: {exc}") from None
        self._flip = np.array([c in self.decreasing for c in self.criteria])
        self._scaler = MinMaxScaler(len(self.criteria)) if scaler == "minmax" else None
        d = self._index.d
        self._m = np.zeros(d)
        self._t = 0.0
        self._n_updates = 0
        self._version = 0
        self._fbuf = np.empty(self._index.feature_buffer_shape(2))
        self._d0 = np.empty(d)
        # regret proxy window: scaled pairs, outcomes, online (prequential) hinge losses
        n = len(self.criteria)
        self._win_l = np.zeros((_WINDOW, n))
        self._win_r = np.zeros((_WINDOW, n))
        self._win_y = np.zeros(_WINDOW, dtype=np.int64)
        self._win_loss = np.zeros(_WINDOW)
        self._win_n = 0
        self._loss_sum = 0.0
        self._cache: dict = {}

    # ------------------------------------------------------------ properties
    @property
    def feature_names(self) -> list[str]:
        """Criterion names, in array column order."""
        return list(self.criteria)

    @property
    def index(self) -> SubsetIndex:
        """The kept coalitions (columns of :attr:`mobius`)."""
        return self._index

    @property
    def mobius(self) -> np.ndarray:
        """Current Möbius vector m_{t+1}, ndarray of shape (d,) (copy), columns ``index.masks``."""
        return self._m.copy()

    @property
    def n_seen(self) -> float:
        """Rounds t so far (sum of example weights)."""
        return self._t

    @property
    def version(self) -> int:
        """Number of updates applied (changes whenever the model does)."""
        return self._version

    def capacity(self, normalize: bool = False) -> np.ndarray:
        """Full capacity v (length 2**n, mask order) of the current masses; ``normalize`` divides by v(N).

        Raises
        ------
        BudgetError
            If n exceeds the full set-function budget.
        NotFittedError
            If ``normalize`` and v(N) ≤ 0.
        """
        v = capacity_from_mobius(self._m, self._index)
        if normalize:
            vN = v[-1]
            if not vN > 0:
                raise NotFittedError(f"v(N) = {vN} ≤ 0: the capacity cannot be normalised; learn more examples first.")
            v = v / vN
        return v

    def mobius_dict(self, top: int | None = None, tol: float = 0.0) -> dict[tuple[str, ...], float]:
        """Non-zero Möbius masses as ``{(criterion names…): m(S)}``, largest |m(S)| first."""
        nz = np.flatnonzero(np.abs(self._m) > tol)
        nz = nz[np.argsort(-np.abs(self._m[nz]), kind="stable")][:top]
        masks = self._index.masks[nz]
        return {tuple(self.criteria[i] for i in range(self._index.n) if (int(s) >> i) & 1): float(self._m[c])
                for s, c in zip(masks, nz)}

    # --------------------------------------------------------------- inputs
    def _prep(self, X: np.ndarray, learn: bool) -> np.ndarray:
        """Scale (if configured), check [0, 1], flip decreasing criteria; X of shape (b, n)."""
        if self._scaler is not None:
            if learn:
                self._scaler.learn(X)
            U = self._scaler.transform(X)
        else:
            bad = (X < 0.0) | (X > 1.0)
            if bad.any():
                r, c = np.argwhere(bad)[0]
                raise InvalidInputError(
                    f"{type(self).__name__} expects criteria values in [0, 1] (paper Section 2); criterion "
                    f"{self.criteria[c]!r} is {X[r, c]!r}. Rescale the data or pass scaler='minmax'.")
            U = X.copy()
        if self._flip.any():
            U[:, self._flip] = 1.0 - U[:, self._flip]
        return U

    def _pair(self, x_left, x_right, learn: bool) -> np.ndarray:
        owner = type(self).__name__
        X = np.stack([dict_to_array(x_left, self.criteria, owner), dict_to_array(x_right, self.criteria, owner)])
        return self._prep(X, learn)

    def _check_array(self, X) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim == 1:
            X = X[None, :]
        if X.ndim != 2 or X.shape[1] != len(self.criteria):
            raise InvalidInputError(
                f"{type(self).__name__} expects an array of shape (n_items, {len(self.criteria)}) with columns "
                f"{self.criteria}; got shape {X.shape}.")
        if not np.isfinite(X).all():
            raise InvalidInputError(f"{type(self).__name__}: criteria values must be finite; got NaN or inf.")
        return X

    # --------------------------------------------------------------- scoring
    def _values(self, U: np.ndarray, m: np.ndarray | None = None) -> np.ndarray:
        """F(u) = ⟨m, φ(u)⟩ for scaled rows U (b, n), chunked; Choquet with a full index uses v."""
        m = self._m if m is None else m
        if self.aggregation == "choquet" and self._index.full and self._index.n >= 12 and m is self._m:
            v = self._cache.get(("v", self._version))
            if v is None:
                v = capacity_from_mobius(m, self._index)
                self._cache = {("v", self._version): v}
            return choquet_from_capacity(U, v)
        width = self._index.feature_buffer_shape(1)[1]
        step = max(1, _CHUNK // width)
        out = np.empty(U.shape[0])
        buf = None
        for s in range(0, U.shape[0], step):
            blk = U[s:s + step]
            if buf is None or buf.shape[0] != blk.shape[0]:
                buf = np.empty(self._index.feature_buffer_shape(blk.shape[0]))
            out[s:s + step] = self._index.features(blk, self.aggregation, out=buf) @ m
        return out

    def score_one(self, x: Mapping[str, float]) -> float:
        """Overall value F(x) = Σ_S m(S) φ_S(x) of one item (to rank a catalog; higher is better)."""
        X = dict_to_array(x, self.criteria, type(self).__name__)[None, :]
        return float(self._values(self._prep(X, learn=False))[0])

    def score(self, X) -> np.ndarray:
        """Overall values of a batch, ndarray of shape (n_items,).

        Parameters
        ----------
        X : array_like of shape (n_items, n_criteria)
            Raw criteria values, columns in :attr:`feature_names` order.

        Raises
        ------
        InvalidInputError
            Wrong width, NaN/inf, or values outside [0, 1] without a scaler.
        """
        return self._values(self._prep(self._check_array(X), learn=False))

    def margin_one(self, x_left, x_right, context=None) -> float:
        """g = F(x_left) − F(x_right); positive means left preferred."""
        U = self._pair(x_left, x_right, learn=False)
        v = self._values(U)
        return float(v[0] - v[1])

    def margins(self, X_left, X_right) -> np.ndarray:
        """Batch margins F(x_left) − F(x_right), shape (n_pairs,)."""
        L = self._prep(self._check_array(X_left), learn=False)
        R = self._prep(self._check_array(X_right), learn=False)
        return self._values(L) - self._values(R)

    def margin_many(self, X_left, X_right, context=None) -> np.ndarray:
        """The batch contract's name for :meth:`margins` (context ignored), shape (n_pairs,)."""
        return self.margins(X_left, X_right)

    # ---------------------------------------------------------------- learning
    def _check_weight(self, weight) -> float:
        check_param(type(self).__name__, "weight", weight, _is_real(weight) and 0 < weight < math.inf,
                    "a float in the range (0, inf)")
        return float(weight)

    def learn_one(self, x_left, x_right, y, context=None, weight: float = 1.0) -> None:
        """One round of the online algorithm on the example (x_left, x_right, y).

        Parameters
        ----------
        x_left, x_right : dict
            ``{criterion: value}`` (extra keys are ignored).
        y : {+1, −1, 0}
            +1 left preferred, −1 right preferred, 0 indifferent.
        context : ignored
        weight : float, default 1.0
            Example weight w > 0: the subgradient enters the sums as w·g_t and the round count as w.

        Raises
        ------
        InvalidInputError
            Missing criterion, NaN/inf, value outside [0, 1] without a scaler, or a bad outcome.
        """
        y = check_outcome(y, type(self).__name__)
        w = self._check_weight(weight)
        U = self._pair(x_left, x_right, learn=True)
        F = self._index.features(U, self.aggregation, out=self._fbuf)
        np.subtract(F[0], F[1], out=self._d0)
        loss = self._step(self._d0, y, w)
        self._record(U[:1], U[1:], np.array([y]), np.array([loss]), np.array([w]))

    def _step(self, d: np.ndarray, y: int, w: float) -> float:
        """One round of the algorithm on the feature difference ``d``; returns the online loss l_t(m_t)."""
        margin = float(d @ self._m)
        loss = hinge_loss(margin, y, self.delta)
        self._update(hinge_subgradient_coef(margin, y, self.delta) * w, w, d)
        return loss

    def _record(self, UL: np.ndarray, UR: np.ndarray, Y: np.ndarray, losses: np.ndarray, W: np.ndarray) -> None:
        """Book-keeping after rounds: regret window (last ≤ 256 examples), loss sum, counters."""
        b = Y.shape[0]
        k = min(b, _WINDOW)
        pos = (self._n_updates + b - k + np.arange(k)) % _WINDOW
        self._win_l[pos], self._win_r[pos], self._win_y[pos], self._win_loss[pos] = UL[-k:], UR[-k:], Y[-k:], losses[-k:]
        self._win_n = min(self._win_n + b, _WINDOW)
        self._loss_sum += float(np.dot(W, losses))
        self._n_updates += b
        self._version += b

    def learn_many(self, X_left, X_right, y, context=None, weight=None) -> None:
        """Rounds on a batch of examples, in row order; identical to calling :meth:`learn_one` per row.

        Faster than a Python loop of :meth:`learn_one`: inputs are validated and scaled at once
        (the online min-max ranges are cumulative minima/maxima, so row t sees the ranges after
        rows ≤ t exactly as the one-by-one run does) and the features φ are computed by blocks.
        The algorithm itself stays sequential (each subgradient is taken at the current iterate).

        Parameters
        ----------
        X_left, X_right : array_like of shape (T, n_criteria)
            Raw criteria values, columns in :attr:`feature_names` order.
        y : array_like of shape (T,)
            Outcomes in {+1, −1, 0}.
        context : ignored (capacities have no context); accepted for the batch contract.
        weight : array_like of shape (T,), optional
            Example weights (> 0), default 1.

        Raises
        ------
        InvalidInputError
            Shapes, NaN/inf, out-of-range values or outcomes.
        """
        L = self._check_array(X_left)
        R = self._check_array(X_right)
        Y = np.asarray(y)
        if L.shape != R.shape or Y.shape != (L.shape[0],):
            raise InvalidInputError(f"learn_many expects X_left, X_right of shape (T, {len(self.criteria)}) and y of "
                                    f"shape (T,); got {L.shape}, {R.shape} and {Y.shape}.")
        if not np.isin(Y, (-1, 0, 1)).all() or Y.dtype.kind not in "iuf" or Y.dtype == bool:
            raise InvalidInputError(f"{type(self).__name__}: outcomes must be +1, -1 or 0; got {np.unique(Y)[:5]}.")
        Y = Y.astype(np.int64)
        W = np.ones(L.shape[0]) if weight is None else np.asarray(weight, dtype=np.float64)
        if W.shape != Y.shape or not (np.isfinite(W).all() and (W > 0).all()):
            raise InvalidInputError("learn_many: weights must be finite and > 0, one per example.")
        T = L.shape[0]
        if T == 0:
            return
        if self._scaler is not None:
            # cumulative ranges: row t is scaled with the ranges after seeing rows ≤ t (as learn_one does)
            both_lo = np.minimum(L, R)
            both_hi = np.maximum(L, R)
            lo = np.minimum(np.minimum.accumulate(both_lo, axis=0), self._scaler.lo)
            hi = np.maximum(np.maximum.accumulate(both_hi, axis=0), self._scaler.hi)
            span = hi - lo
            ok = span > 0
            UL = np.clip(np.where(ok, (L - lo) / np.where(ok, span, 1.0), 0.0), 0.0, 1.0)
            UR = np.clip(np.where(ok, (R - lo) / np.where(ok, span, 1.0), 0.0), 0.0, 1.0)
            self._scaler.lo[:] = lo[-1]
            self._scaler.hi[:] = hi[-1]
            if self._flip.any():
                UL[:, self._flip] = 1.0 - UL[:, self._flip]
                UR[:, self._flip] = 1.0 - UR[:, self._flip]
        else:
            UL = self._prep(L, learn=False)
            UR = self._prep(R, learn=False)
        losses = self._run(UL, UR, Y.tolist(), W.tolist())
        self._record(UL, UR, Y, losses, W)

    def _diff_blocks(self, UL: np.ndarray, UR: np.ndarray):
        """Yield ``(start, D)`` with D = φ(UL[start:start+b]) − φ(UR[start:start+b]), blocks of ≈ 2**16 values."""
        width = self._index.feature_buffer_shape(1)[1]
        blk = max(1, (1 << 16) // width)
        F = np.empty(self._index.feature_buffer_shape(2 * blk))
        D = np.empty((blk, self._index.d))
        T = UL.shape[0]
        for s in range(0, T, blk):
            b = min(blk, T - s)
            Fb = self._index.features(np.concatenate([UL[s:s + b], UR[s:s + b]]), self.aggregation, out=F[:2 * b])
            np.subtract(Fb[:b], Fb[b:], out=D[:b])
            yield s, D[:b]

    def _run(self, UL: np.ndarray, UR: np.ndarray, Y: list, W: list) -> np.ndarray:
        """Rounds on the scaled pairs in order; returns the online losses l_t(m_t), shape (T,)."""
        losses = np.empty(len(Y))
        for s, D in self._diff_blocks(UL, UR):
            for r in range(D.shape[0]):
                losses[s + r] = self._step(D[r], Y[s + r], W[s + r])
        return losses

    def _update(self, c: float, w: float, d: np.ndarray) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    # ---------------------------------------------------------------- metrics
    def constraint_violation(self, constraints: Sequence[str] = ("monotone",)) -> float:
        """‖[B m]₊‖²₂ of the current masses for the given constraint blocks (Fig. 1a), via v: O(n² 2**n).

        Returns NaN when n exceeds the full set-function budget.
        """
        if self._index.n > MAX_FULL_N:
            return math.nan
        return violation(constraint_residuals(capacity_from_mobius(self._m, self._index), tuple(constraints)))

    def metrics(self) -> dict:
        """Gauges for the learner worker.

        Returns
        -------
        dict
            ``nonzero_masses`` (int, count of m(S) ≠ 0), ``constraint_violation`` (float,
            monotonicity ‖[B m]₊‖²), ``regret_proxy`` (float; mean prequential hinge loss
            l_τ(m_τ) over the last ≤256 examples minus the mean hinge loss of the current
            iterate on the same examples — a lower bound of the windowed regret against the best
            fixed model, since the current iterate is one candidate; NaN before any example),
            ``avg_online_loss`` (float, Σ w l_τ(m_τ) / t), ``n_seen`` (float) and ``version`` (int).
        """
        key = ("metrics", self._version)
        if key in self._cache:
            return dict(self._cache[key])
        out = {
            "nonzero_masses": int(np.count_nonzero(self._m)),
            "constraint_violation": self.constraint_violation(("monotone",)),
            "regret_proxy": math.nan,
            "avg_online_loss": self._loss_sum / self._t if self._t else math.nan,
            "n_seen": float(self._t),
            "version": int(self._version),
        }
        k = self._win_n
        if k:
            L, R, Y = self._win_l[:k], self._win_r[:k], self._win_y[:k]
            marg = self._values(L) - self._values(R)
            now = np.array([hinge_loss(g, int(yy), self.delta) for g, yy in zip(marg, Y)])
            out["regret_proxy"] = float(self._win_loss[:k].mean() - now.mean())
        self._cache[key] = out
        return dict(out)

    # ------------------------------------------------------------------ state
    def _params(self) -> dict:
        import inspect

        return {k: getattr(self, k) for k in inspect.signature(type(self).__init__).parameters if k != "self"}

    def state_dict(self) -> dict:
        """``{"meta": JSON-able params and counters, "arrays": {...}}`` for :func:`learners.state.dump_state`."""
        arrays = {"mobius": self._m.copy(), "win_l": self._win_l.copy(), "win_r": self._win_r.copy(),
                  "win_y": self._win_y.copy(), "win_loss": self._win_loss.copy()}
        if self._scaler is not None:
            arrays["scaler_lo"] = self._scaler.lo.copy()
            arrays["scaler_hi"] = self._scaler.hi.copy()
        arrays.update(self._extra_arrays())
        params = self._params()
        params = {k: (list(v) if isinstance(v, tuple) else v) for k, v in params.items()}
        meta = {"model_name": self.model_name, "class": type(self).__name__, "algorithm": self._algorithm,
                "params": params, "t": self._t, "n_updates": self._n_updates, "version": self._version,
                "win_n": self._win_n, "loss_sum": self._loss_sum}
        return {"meta": meta, "arrays": arrays}

    def _extra_arrays(self) -> dict:
        return {}

    def _load_extra(self, arrays: dict) -> None:
        pass

    @classmethod
    def from_state(cls, state: dict) -> "_CapacityLearner":
        """Rebuild a learner from :meth:`state_dict` output.

        Raises
        ------
        SnapshotError
            If the state was written by another class or lacks arrays.
        """
        try:
            meta, arrays = state["meta"], state["arrays"]
            if meta.get("class") != cls.__name__:
                raise SnapshotError(f"State of a {meta.get('class')!r} cannot be loaded by {cls.__name__}.")
            obj = cls(**meta["params"])
            if arrays["mobius"].shape != obj._m.shape:
                raise SnapshotError(f"State Möbius vector has shape {arrays['mobius'].shape}; expected {obj._m.shape}.")
            obj._m = np.array(arrays["mobius"], dtype=np.float64)
            obj._t = float(meta["t"])
            obj._n_updates = int(meta["n_updates"])
            obj._version = int(meta["version"])
            obj._win_n = int(meta["win_n"])
            obj._loss_sum = float(meta["loss_sum"])
            obj._win_l[:] = arrays["win_l"]
            obj._win_r[:] = arrays["win_r"]
            obj._win_y[:] = arrays["win_y"]
            obj._win_loss[:] = arrays["win_loss"]
            if obj._scaler is not None:
                obj._scaler.lo[:] = arrays["scaler_lo"]
                obj._scaler.hi[:] = arrays["scaler_hi"]
            obj._load_extra(arrays)
        except SnapshotError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise SnapshotError(f"Not a {cls.__name__} state: {type(exc).__name__}: {exc}") from None
        return obj


_clip = clip_into


#: Largest number of criteria for the matrix-free constraint operator (vectors of 2**n entries).
MAX_IMPLICIT_N = 20


def _is_real(x) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) and math.isfinite(float(x))


class CapacityRDA(_CapacityLearner):
    """Online capacity learning by RDA (Algorithm 1) or, with ``constraints``, ADMM-RDA (Algorithm 2).

    Model: F(x) = Σ_{S ⊆ N, S ≠ ∅} m(S) φ_S(x_S) (Equation (1)), φ_S = min (``"choquet"``) or Π
    (``"multilinear"``), x ∈ [0, 1]^n. Each :meth:`learn_one` is one round t of the algorithm:

    1. d_t = φ(x_left) − φ(x_right); margin ⟨m_t, d_t⟩;
    2. subgradient g_t of the hinge loss l_t exactly as Section 3.2 states it
       (:func:`~learners.capacity_solvers.hinge_subgradient_coef`);
    3. G_t = G_{t−1} + g_t (so ḡ_t = G_t / t);
    4. Algorithm 1: m_{t+1} = −(√t/γ)[|ḡ_t| − λ]₊ sign(ḡ_t) (Equation (5));
       Algorithm 2: lines 6–9 with the sparse constraint matrix B and penalty ρ.

    No normalisation v(N) = 1 is imposed (the paper learns on M = R^d; only the direction of m
    matters for preferences). Use :meth:`capacity` with ``normalize=True`` to read the normalised
    capacity.

    Parameters
    ----------
    criteria : sequence of str
        Criterion names (keys of the item dicts), n = len(criteria).
    aggregation : {"choquet", "multilinear"}, default "choquet"
    k_additive : int or None, default None
        Keep only coalitions of size ≤ k (None: all 2**n − 1).
    l1 : float, default 0.01
        ℓ1 strength λ ≥ 0.
    gamma : float, default 1e3
        γ > 0 of the strongly convex term η_t‖m‖² with η_t = γ/(2√t).
    delta : float, default 0.01
        Discrimination threshold δ > 0 of problem (2).
    scaler : {"none", "minmax"}, default "none"
        "none" requires inputs in [0, 1]; "minmax" rescales online by the ranges seen so far.
    decreasing : sequence of str, default ()
        Criteria where less is better: x ↦ 1 − x after scaling.
    constraints : sequence of {"monotone", "supermodular"}, default ()
        Rows of B m ≤ 0 (Section 4). Empty: Algorithm 1; otherwise Algorithm 2.
    rho : float, default 1.0
        ADMM penalty ρ > 0 (Algorithm 2).
    max_nnz : int, default 30_000_000
        Budget on non-zeros of the sparse B (n·3**(n−1) for monotonicity).
    constraint_backend : {"auto", "sparse", "implicit"}, default "auto"
        B as a scipy.sparse CSR matrix, or matrix-free through fast Möbius transforms
        (:class:`~learners._mobius.ConstraintOperator`, O(n 2**n) per product, no storage);
        "auto" uses the sparse matrix when it fits ``max_nnz``.

    Raises
    ------
    InvalidParameterError
        Any parameter outside its domain.
    BudgetError
        If the coalition index or B exceeds its budget.

    References
    ----------
    Herin, Perny, Sokolovska (2024), IJCAI, Sections 3.2 (Algorithm 1, Equation (5)) and 4.2
    (Algorithm 2); Xiao (2009), *Dual averaging methods for regularized stochastic learning*.
    """

    _algorithm = "rda"

    def __init__(self, criteria: Sequence[str], aggregation: str = "choquet", k_additive: int | None = None,
                 l1: float = 0.01, gamma: float = 1e3, delta: float = 0.01, scaler: str = "none",
                 decreasing: Sequence[str] = (), constraints: Sequence[str] = (), rho: float = 1.0,
                 max_nnz: int = 30_000_000, constraint_backend: str = "auto") -> None:
        super().__init__(criteria, aggregation, k_additive, l1, gamma, delta, scaler, decreasing)
        check_param("CapacityRDA", "constraint_backend", constraint_backend,
                    constraint_backend in ("auto", "sparse", "implicit"), "one of ('auto', 'sparse', 'implicit')")
        check_param("CapacityRDA", "constraints", constraints,
                    not isinstance(constraints, str) and set(constraints) <= set(CONSTRAINTS),
                    f"a sequence of names among {CONSTRAINTS}")
        check_param("CapacityRDA", "rho", rho, _is_real(rho) and 0 < rho < math.inf, "a float in the range (0, inf)")
        self.constraints = [c for c in CONSTRAINTS if c in constraints]
        self.rho = float(rho)
        self.max_nnz = int(max_nnz)
        self.constraint_backend = constraint_backend
        self._G = np.zeros(self._index.d)
        if self.constraints:
            self._algorithm = "admm-rda"
            B = None
            if constraint_backend in ("auto", "sparse"):
                try:
                    B = constraint_matrix(self._index, self.constraints, max_nnz=self.max_nnz)
                    BT = B.T.tocsr()
                except BudgetError:
                    if constraint_backend == "sparse":
                        raise
            if B is None:
                if self._index.n > MAX_IMPLICIT_N:
                    raise BudgetError(
                        f"ADMM-RDA constraints on n={self._index.n} criteria need O(n·2**n) = "
                        f"{self._index.n * 2 ** self._index.n:.2e} operations per step and 2**n-long vectors; the limit "
                        f"is n <= {MAX_IMPLICIT_N}. Drop the constraints (Algorithm 1) or use fewer criteria.")
                B = ConstraintOperator(self._index, self.constraints)
                BT = B.T
            self._B, self._BT = B, BT
            self._admm = ADMMState.zeros(self._B.shape[0])
        else:
            self._B = self._BT = self._admm = None

    def _run(self, UL: np.ndarray, UR: np.ndarray, Y: list, W: list) -> np.ndarray:
        """Algorithm 1 with the per-round work inlined (same rule as :meth:`_step`).

        Inside the loop the iterate is kept unscaled, s_t = clip(G, ±λt) − G, so that
        m_{t+1} = s_t/(γ√t) costs no pass over the d masses: the margin is ⟨d, s⟩/(γ√t)
        (equal to ⟨d, m⟩ up to rounding). m is materialised once at the end.
        """
        if self._B is not None:
            return super()._run(UL, UR, Y, W)
        G = self._G
        s_vec = np.empty_like(G)
        delta, lam, gamma = self.delta, self.l1, self.gamma
        t = self._t
        if t > 0:
            _clip(G, -lam * t, lam * t, s_vec)
            s_vec -= G
            k = 1.0 / (gamma * math.sqrt(t))
        else:
            s_vec[:] = 0.0
            k = 0.0
        losses = np.empty(len(Y))
        dot, sqrt = np.dot, math.sqrt
        for start, D in self._diff_blocks(UL, UR):
            for r in range(D.shape[0]):
                d = D[r]
                j = start + r
                y, w = Y[j], W[j]
                margin = k * float(dot(d, s_vec))
                if y:
                    ym = y * margin
                    if ym < delta:
                        losses[j], c = delta - ym, -y * w          # g_t = −Δ (Section 3.2)
                    else:
                        losses[j], c = 0.0, 0.0
                else:
                    losses[j] = max(0.0, margin - delta) + max(0.0, -delta - margin)
                    c = -w if margin < -delta else (w if margin > delta else 0.0)
                if c == 1.0:
                    G += d
                elif c == -1.0:
                    G -= d
                elif c != 0.0:
                    G += c * d
                t += w
                th = lam * t
                _clip(G, -th, th, s_vec)                          # m_{t+1} = (clip(G, ±λt) − G)/(γ√t)
                s_vec -= G
                k = 1.0 / (gamma * sqrt(t))
        self._t = t
        np.multiply(s_vec, k, out=self._m)
        return losses

    @property
    def gradient_sum(self) -> np.ndarray:
        """G_t = Σ_{τ≤t} w_τ g_τ, ndarray of shape (d,) (copy)."""
        return self._G.copy()

    @property
    def constraint_matrix(self):
        """B (scipy.sparse CSR or ConstraintOperator, shape (b, d)) of Algorithm 2, or None for Algorithm 1."""
        return self._B

    def _update(self, c: float, w: float, d: np.ndarray) -> None:
        if c == 1.0:
            self._G += d
        elif c == -1.0:
            self._G -= d
        elif c != 0.0:
            self._G += c * d
        self._t += w
        if self._B is None:
            rda_from_sum(self._G, self._t, self.gamma, self.l1, out=self._m)
        else:
            self._m, _ = admm_rda_step(self._G, self._t, self._admm, self._B, self._BT, self.gamma, self.l1,
                                       self.rho, weight=w, out=self._m)

    # ---------------------------------------------------------------- merge
    def _check_mergeable(self, other) -> None:
        if not isinstance(other, CapacityRDA) or type(other) is not type(self):
            raise InvalidParameterError(f"Cannot merge a {type(other).__name__} into a {type(self).__name__}.")
        if self.constraints or other.constraints:
            raise InvalidParameterError(
                "Merging is defined for Algorithm 1 (RDA) only: ADMM-RDA's state holds the last multiplier µ_t and "
                "splitting variable z_t, which depend on the order of the stream and have no additive sufficient "
                "statistic. Train one ADMM-RDA learner per model, or merge unconstrained RDA learners.")
        mine, theirs = self._params(), other._params()
        if mine != theirs:
            diff = {k: (mine[k], theirs[k]) for k in mine if mine[k] != theirs[k]}
            raise InvalidParameterError(f"Cannot merge capacity learners with different parameters: {diff}.")

    def __iadd__(self, other: "CapacityRDA") -> "CapacityRDA":
        """Merge ``other`` (trained on a disjoint part of the stream) into ``self``.

        G ← G + G', t ← t + t', m ← −(1/(γ√t))[|G| − λt]₊ sign(G); ḡ of the result is the
        count-weighted average (t ḡ + t' ḡ')/(t + t'). Scaler ranges are united (min of mins,
        max of maxes); the regret window keeps the most recent examples of both. See the module
        docstring for when this equals the RDA iterate of the union stream.

        Raises
        ------
        InvalidParameterError
            Different classes or parameters, or ADMM-RDA learners (not mergeable).
        """
        self._check_mergeable(other)
        if other._t == 0:
            return self
        self._G += other._G
        self._t += other._t
        rda_from_sum(self._G, self._t, self.gamma, self.l1, out=self._m)
        if self._scaler is not None:
            self._scaler.merge(other._scaler)
        L = np.concatenate([self._window()[0], other._window()[0]])[-_WINDOW:]
        R = np.concatenate([self._window()[1], other._window()[1]])[-_WINDOW:]
        Y = np.concatenate([self._window()[2], other._window()[2]])[-_WINDOW:]
        Ls = np.concatenate([self._window()[3], other._window()[3]])[-_WINDOW:]
        k = L.shape[0]
        self._win_l[:k], self._win_r[:k], self._win_y[:k], self._win_loss[:k] = L, R, Y, Ls
        self._win_n = k
        self._n_updates = k  # ring position restarts after the merged window
        self._loss_sum += other._loss_sum
        self._version += other._version + 1
        self._cache = {}
        return self

    def _window(self):
        """Window rows in chronological order."""
        k = self._win_n
        if k < _WINDOW:
            idx = np.arange(k)
        else:
            start = self._n_updates % _WINDOW
            idx = (np.arange(_WINDOW) + start) % _WINDOW
        return self._win_l[idx], self._win_r[idx], self._win_y[idx], self._win_loss[idx]

    def __add__(self, other: "CapacityRDA") -> "CapacityRDA":
        """A new learner equal to ``copy(self) += other``."""
        out = type(self).from_state(self.state_dict())
        out += other
        return out

    def merge(self, other: "CapacityRDA") -> "CapacityRDA":
        """In-place merge (same as ``self += other``); returns ``self``."""
        self += other
        return self

    # ---------------------------------------------------------------- state
    def _extra_arrays(self) -> dict:
        out = {"gradient_sum": self._G.copy()}
        if self._admm is not None:
            out.update({k: v.copy() for k, v in self._admm.arrays().items()})
        return out

    def _load_extra(self, arrays: dict) -> None:
        self._G[:] = arrays["gradient_sum"]
        if self._admm is not None:
            self._admm = ADMMState(*(np.array(arrays[k], dtype=np.float64) for k in
                                     ("admm_z", "admm_mu", "admm_sum_z", "admm_sum_mu", "admm_sum_Bm")))


class CapacityFOBOS(_CapacityLearner):
    """FOBOS baseline of Section 5 (Duchi & Singer 2009) on the same model and loss.

    m_{t+1} = [|m_t − η_t g_t| − η_t λ]₊ sign(m_t − η_t g_t) with η_t = η₁/√t.

    Parameters
    ----------
    eta1 : float or None, default None
        η₁ > 0. The paper uses "the recommended value in [Duchi and Singer, 2009]" without
        printing it; FOBOS's regret bound for η_t = c/√t is minimised by c ∝ D/G (D: radius of the
        comparator, G: subgradient-norm bound). With D = 1 (normalised capacity) and
        G = √d (‖φ(x) − φ(y)‖₂ ≤ √d on [0, 1]^n), ``None`` means η₁ = 1/√d.
    Other parameters as :class:`CapacityRDA` (``gamma`` is unused by FOBOS).
    """

    _algorithm = "fobos"

    def __init__(self, criteria: Sequence[str], aggregation: str = "choquet", k_additive: int | None = None,
                 l1: float = 0.01, gamma: float = 1e3, delta: float = 0.01, scaler: str = "none",
                 decreasing: Sequence[str] = (), eta1: float | None = None) -> None:
        super().__init__(criteria, aggregation, k_additive, l1, gamma, delta, scaler, decreasing)
        check_param("CapacityFOBOS", "eta1", eta1, eta1 is None or (_is_real(eta1) and eta1 > 0),
                    "None or a float in the range (0, inf)")
        self.eta1 = eta1
        self._eta1 = 1.0 / math.sqrt(self._index.d) if eta1 is None else float(eta1)

    def _update(self, c: float, w: float, d: np.ndarray) -> None:
        self._t += w
        eta = self._eta1 / math.sqrt(self._t)
        fobos_step(self._m, c * d, eta, self.l1)

    def __iadd__(self, other):
        raise InvalidParameterError("FOBOS keeps only its last iterate m_t, which is path-dependent: it has no "
                                    "mergeable sufficient statistic. Use CapacityRDA to merge partition learners.")
