"""Shared parts of the online capacity learners: the model, its inputs (scalers), scoring and state.

The model is the capacity-based value F(x) = Σ_{S ⊆ N, S ≠ ∅} m(S) φ_S(x_S) of Herin, Perny &
Sokolovska (2024), *Online Learning of Capacity-Based Preference Models*, IJCAI, Section 2,
Equation (1), with φ_S = min (Choquet integral) or Π (multilinear model), over all coalitions or a
k-additive truncation. :class:`_CapacityLearner` holds what every learner of this family shares —
criteria, scaling, the coalition index, batch scoring, the regret window, metrics and the state
dict; the learning rules live in :mod:`learners.capacity` (the paper's Algorithms 1 and 2 and the
FOBOS baseline) and :mod:`learners.capacity_stream` (the logistic AdaGrad stream default).

Scalers (all mergeable) live in :mod:`learners.capacity_scalers`.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from learners._mobius import capacity_from_mobius
from learners._subsets import AGGREGATIONS, MAX_FULL_N, SubsetIndex
from learners.capacity_constraints import constraint_residuals, violation
from learners.base import PreferenceLearner, check_outcome, dict_to_array
from learners.capacity_solvers import clip_into, hinge_loss, hinge_subgradient_coef
from learners.capacity_scalers import MinMaxScaler, StandardScaler
from learners.exceptions import (
    InvalidInputError,
    InvalidParameterError,
    NotFittedError,
    SnapshotError,
    check_param,
)

__all__ = ["MinMaxScaler", "StandardScaler", "choquet_from_capacity"]  # scalers re-exported from capacity_scalers

_SCALERS = ("none", "minmax", "standard")
_WINDOW = 256          # recent examples kept for the regret proxy
_CHUNK = 1 << 21       # elements per feature block when scoring batches


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
        self._scaler = {"minmax": MinMaxScaler, "standard": StandardScaler}.get(scaler, lambda n: None)(len(self.criteria))
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

    def pairwise_form(self):
        """The overall value as a form of pairs of criteria, when it is one (at most 2-additive), else None.

        F(u) = Σ_i w_i u_i + ½ Σ_{i≠j} W_ij op(u_i, u_j) with u the scaled, flipped row (``prep``) and
        op = min (Choquet) or × (multilinear) — Grabisch (1997), a 2-additive capacity in Möbius form.
        Its use: the scores of hybrids of two rows (criteria from one row or the other) are sums of
        terms of the two rows and of their cross terms (:mod:`explainers.sharp.hybrids`).

        Returns
        -------
        tuple ``(prep, w, W, op)`` or None
            ``prep(X (N, n)) -> U (N, n)`` (checked, scaled), ``w`` (n,), ``W`` (n, n) symmetric with a
            zero diagonal, ``op`` a numpy ufunc.
        """
        sizes = self._index.sizes
        if sizes.max() > 2:
            return None
        n = len(self.criteria)
        bits = (self._index.masks[:, None] >> np.arange(n)[None, :]) & 1             # (d, n)
        w = np.zeros(n)
        W = np.zeros((n, n))
        one, two = np.flatnonzero(sizes == 1), np.flatnonzero(sizes == 2)
        w[np.argmax(bits[one], axis=1)] = self._m[one]
        ij = np.sort(np.argsort(-bits[two], axis=1, kind="stable")[:, :2], axis=1)
        W[ij[:, 0], ij[:, 1]] = self._m[two]
        W[ij[:, 1], ij[:, 0]] = self._m[two]
        op = np.minimum if self.aggregation == "choquet" else np.multiply
        return (lambda X: self._prep(self._check_array(X), learn=False)), w, W, op

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
        """Batch contract: margins F(x_left) − F(x_right), ndarray of shape (n,) (context ignored); equals
        the ``margin_one`` loop."""
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

    def _window(self):
        """Window rows in chronological order."""
        k = self._win_n
        if k < _WINDOW:
            idx = np.arange(k)
        else:
            start = self._n_updates % _WINDOW
            idx = (np.arange(_WINDOW) + start) % _WINDOW
        return self._win_l[idx], self._win_r[idx], self._win_y[idx], self._win_loss[idx]

    def _merge_window(self, other) -> None:
        """Merge book-keeping: the most recent window rows of both, loss sums, versions."""
        L = np.concatenate([self._window()[0], other._window()[0]])[-_WINDOW:]
        R = np.concatenate([self._window()[1], other._window()[1]])[-_WINDOW:]
        Y = np.concatenate([self._window()[2], other._window()[2]])[-_WINDOW:]
        Ls = np.concatenate([self._window()[3], other._window()[3]])[-_WINDOW:]
        k = L.shape[0]
        self._win_l[:k], self._win_r[:k], self._win_y[:k], self._win_loss[:k] = L, R, Y, Ls
        self._win_n = k
        self._n_updates = k
        self._loss_sum += other._loss_sum
        self._version += other._version + 1
        self._cache = {}

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
            # cumulative statistics: row t is scaled after seeing rows ≤ t (as learn_one does)
            UL, UR = self._scaler.learn_transform_pairs(L, R)
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

    def _losses(self, margins: np.ndarray, Y: np.ndarray) -> np.ndarray:
        """Per-example losses of the learner's objective at ``margins`` (the hinge loss of problem (2))."""
        return np.array([hinge_loss(g, int(yy), self.delta) for g, yy in zip(margins, Y)])

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
            now = self._losses(marg, Y)
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
            arrays.update(self._scaler.arrays())
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
                obj._scaler.load(arrays)
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

