"""Linear Bradley–Terry preference model learned online (logistic regression on x_left − x_right).

The utility of an item is linear, u(x) = w·x, and the Bradley–Terry probability that the left
item is preferred is

    P(y = +1 | x_l, x_r) = σ(g),   g(x_l, x_r) = u(x_l) − u(x_r) = w·(x_l − x_r),

i.e. logistic regression without intercept on the difference d = x_l − x_r. Without an
intercept the margin is skew-symmetric, g(x_l, x_r) = −g(x_r, x_l), which is the UPM special
case of the generalised preference model: the utility-based preference model (UPM) of Hu et al.,
*Explaining Preferences with Shapley Values*, NeurIPS 2022, Sec. 2.1, Eq. (1), with a linear
utility, which is the GPM likelihood Eq. (2) with g(x⁽ˡ⁾, x⁽ʳ⁾) = f(x⁽ˡ⁾) − f(x⁽ʳ⁾).

Online training (one example at a time, :meth:`LinearBT.learn_one`):

* **Loss.** Weighted logistic loss with target t = (1 + y)/2: ℓ = −t log σ(g) − (1−t) log σ(−g),
  gradient (σ(g) − t)·weight·d. With ``indifference="split"`` (default) an indifferent example
  (y = 0, t = ½) counts as half a win and half a loss and pulls g towards 0; with ``"skip"`` it
  is ignored.
* **Scaling.** With ``scale=True`` (default) each difference coordinate is divided by its running
  root-mean-square s_j = (E[d_j²])^{1/2} (weighted by the example weights). Only scaling, no
  centring: centring would add an intercept-like term and break skew-symmetry. The model
  learns ŵ on d/s; :attr:`LinearBT.weights` returns w = ŵ/s in the units of the raw features, so
  g = w·d always holds. Because s moves while learning (as in river's
  ``StandardScaler | LogisticRegression``), early weights are re-interpreted as s settles.
* **Optimiser.** AdaGrad (Duchi, Hazan & Singer, JMLR 2011) with step ``learning_rate`` and
  optional L2 penalty ``l2``·‖ŵ‖²/2.
* **Batches.** :meth:`LinearBT.learn_many` runs the same recursion with gradients delayed by at
  most ``max_delay − 1`` rows (vectorised per chunk; exact for ``max_delay=1``).

Merging (:meth:`LinearBT.__iadd__`): partition-parallel learners (one per Kafka partition) are
combined by averaging their raw-unit weights with weights proportional to their training
counts (parameter mixing, Mann et al. 2009; Zinkevich et al. 2010), pooling the scaler
statistics and summing the AdaGrad accumulators. This is an *approximation*: the average of SGD
solutions is not the solution on the pooled data (it is exact only for the quadratic limit), but
it converges to the same optimum for convex losses when each shard sees i.i.d. data.

Context features are ignored: in a utility-difference model a context term c shared by both
items cancels in u(x_l, c) − u(x_r, c) unless it interacts with item features, which this
linear model does not represent (the GPM / capacity learners do).
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from learners.base import PreferenceLearner, check_outcome, dict_to_array
from learners.exceptions import InvalidInputError, NotFittedError, SnapshotError, check_param

__all__ = ["LinearBT"]

_EPS = 1e-12


class LinearBT(PreferenceLearner):
    """Online linear Bradley–Terry model (no-intercept logistic regression on x_left − x_right).

    Parameters
    ----------
    feature_names : sequence of str, optional
        Item feature names (column order of the batch methods). ``None`` or empty: taken
        (sorted) from the first example learned. Stored as ``feature_names_in``;
        :attr:`feature_names` gives the names in use.
    learning_rate : float, default 0.1
        AdaGrad step size, in (0, inf).
    l2 : float, default 0.0
        L2 penalty on the (scaled) weights, in [0, inf).
    scale : bool, default True
        Divide each difference coordinate by its running RMS (see module docstring).
    indifference : {"split", "skip"}, default "split"
        How y = 0 examples are learned.
    max_delay : int, default 32
        :meth:`learn_many` takes AdaGrad steps with gradients delayed by at most
        ``max_delay − 1`` rows (see there); 1 makes it exactly the :meth:`learn_one` loop.

    Attributes
    ----------
    weights : ndarray of shape (n_features,), float64
        Utility weights w in raw feature units; g = w·(x_l − x_r).
    n_learned : int
        Number of examples learned (skipped indifferent examples not counted).

    Raises
    ------
    InvalidParameterError
        For a parameter outside its domain.

    Examples
    --------
    >>> m = LinearBT(feature_names=["price", "rating"])
    >>> for _ in range(200):
    ...     m.learn_one({"price": 1.0, "rating": 4.0}, {"price": 2.0, "rating": 3.0}, 1)
    >>> m.predict_one({"price": 1.0, "rating": 4.0}, {"price": 2.0, "rating": 3.0})
    1
    >>> m.margin_one({"price": 1.0, "rating": 4.0}, {"price": 2.0, "rating": 3.0}) == -m.margin_one(
    ...     {"price": 2.0, "rating": 3.0}, {"price": 1.0, "rating": 4.0})
    True
    """

    model_name = "linear-bt"
    #: :meth:`learn_many` delays AdaGrad gradients by up to ``max_delay − 1`` rows (a documented
    #: mini-batch variant); with ``max_delay=1`` it is exactly the :meth:`learn_one` loop (tests/checks).
    learn_many_matches_loop = False
    exact_learn_many_params = {"max_delay": 1}

    def __init__(self, feature_names: Sequence[str] | None = None, learning_rate: float = 0.1, l2: float = 0.0,
                 scale: bool = True, indifference: str = "split", max_delay: int = 32) -> None:
        owner = type(self).__name__
        if feature_names is not None and not isinstance(feature_names, str) and len(feature_names) == 0:
            feature_names = None  # [] (what ``feature_names`` returns before learning) means "learn them"
        check_param(owner, "feature_names", feature_names,
                    feature_names is None or (not isinstance(feature_names, str)
                                              and all(isinstance(f, str) for f in feature_names)
                                              and len(set(feature_names)) == len(feature_names)),
                    "None or a sequence of distinct str")
        check_param(owner, "learning_rate", learning_rate, _is_real(learning_rate) and learning_rate > 0,
                    "a float in the range (0, inf)")
        check_param(owner, "l2", l2, _is_real(l2) and l2 >= 0, "a float in the range [0, inf)")
        check_param(owner, "scale", scale, isinstance(scale, bool), "a bool")
        check_param(owner, "indifference", indifference, indifference in ("split", "skip"), "'split' or 'skip'")
        check_param(owner, "max_delay", max_delay, isinstance(max_delay, (int, np.integer)) and not isinstance(max_delay, bool)
                    and max_delay >= 1, "an int >= 1")
        self.feature_names_in = None if feature_names is None else list(feature_names)
        self.learning_rate = float(learning_rate)
        self.l2 = float(l2)
        self.scale = scale
        self.indifference = indifference
        self.max_delay = int(max_delay)
        self._names: list[str] | None = None
        self._w = self._G = self._sq = None  # scaled weights, AdaGrad Σg², weighted Σd²
        self._sw = 0.0  # Σ weights seen by the scaler
        self._n = 0
        if feature_names is not None:
            self._init(list(feature_names))

    # parameters by their constructor names (for clone/repr)
    @property
    def feature_names(self) -> list[str]:
        """Item feature names in array column order (empty until known)."""
        return list(self._names) if self._names is not None else []

    def _init(self, names: list[str]) -> None:
        if not names:
            raise InvalidInputError("LinearBT needs at least one item feature; the example has none.")
        d = len(names)
        self._names = names
        self._w = np.zeros(d)
        self._G = np.zeros(d)
        self._sq = np.zeros(d)

    # ------------------------------------------------------------------ helpers
    def _scale_vec(self) -> np.ndarray:
        if not self.scale or self._sw <= 0:
            return np.ones(len(self._names))
        s = np.sqrt(self._sq / self._sw)
        return np.where(s > _EPS, s, 1.0)

    @property
    def weights(self) -> np.ndarray:
        """Utility weights w (n_features,) in raw feature units; g = w·(x_l − x_r).

        Raises
        ------
        NotFittedError
            If the feature names are not known yet (no ``feature_names`` and nothing learned).
        """
        if self._names is None:
            raise NotFittedError("LinearBT has no feature names yet; learn an example or pass feature_names.")
        return self._w / self._scale_vec()

    @property
    def n_learned(self) -> int:
        """Number of examples learned so far."""
        return self._n

    # --------------------------------------------------------------- learning
    def learn_one(self, x_left: Mapping[str, float], x_right: Mapping[str, float], y: int,
                  context: Mapping[str, float] | None = None, weight: float = 1.0) -> None:
        """One AdaGrad step on the weighted logistic loss of g = w·(x_l − x_r).

        Parameters
        ----------
        x_left, x_right : dict of str to float
            Item features (at least ``feature_names``; extra keys ignored).
        y : int
            +1 left preferred, −1 right preferred, 0 indifferent.
        context : dict, optional
            Ignored (see module docstring).
        weight : float, default 1.0
            Example weight, finite and > 0.

        Raises
        ------
        InvalidInputError
            Bad outcome, weight, missing/NaN/inf feature.
        """
        y = check_outcome(y, "LinearBT")
        if not (_is_real(weight) and math.isfinite(weight) and weight > 0):
            raise InvalidInputError(f"LinearBT: weight must be a finite float > 0; got {weight!r}.")
        names = self._names if self._names is not None else sorted(x_left)
        if not names:
            raise InvalidInputError("LinearBT needs at least one item feature; the example has none.")
        d = dict_to_array(x_left, names, "LinearBT") - dict_to_array(x_right, names, "LinearBT")
        if self._names is None:
            self._init(names)
        if y == 0 and self.indifference == "skip":
            return
        if self.scale:
            self._sq += weight * d * d
            self._sw += weight
        z = d / self._scale_vec()
        g = float(self._w @ z)
        t = 0.5 * (1.0 + y)
        p = 0.5 * (1.0 + math.tanh(0.5 * g))  # σ(g)
        grad = weight * (p - t) * z + self.l2 * self._w
        self._G += grad * grad
        self._w -= self.learning_rate * grad / (np.sqrt(self._G) + 1e-8)
        self._n += 1

    def learn_many(self, X_left: np.ndarray, X_right: np.ndarray, y: np.ndarray, context=None,
                   weight: np.ndarray | None = None) -> None:
        """Learn a batch with *delayed* AdaGrad steps (a documented mini-batch variant).

        Rows are taken in chunks of at most ``max_delay``. Inside a chunk every row's gradient
        is taken at the weights ŵ₀ from before the chunk, while everything else follows the
        one-by-one recursion exactly: the running scale s_k after rows ≤ k (cumulative sums),
        the AdaGrad accumulator G_k = G₀ + Σ_{j≤k} g_j² and the step −η g_k/(√G_k + 1e-8) of each
        row. So the chunk's update is

            ŵ ← ŵ₀ − η Σ_k g_k / (√G_k + 1e-8),   g_k = weight_k (σ(ŵ₀·z_k) − t_k) z_k + l2 ŵ₀,

        one row's learn_one being the case of a chunk of one. This is AdaGrad with gradients
        delayed by at most ``max_delay − 1`` steps, which keeps AdaGrad's regret bound up to a term
        linear in the delay (McMahan & Streeter, *Delay-tolerant algorithms for asynchronous
        distributed online learning*, NeurIPS 2014, Sec. 3). ``max_delay=1`` is exactly the loop of
        :meth:`learn_one` (tested). The measured gap to the loop at the default
        ``max_delay=32`` is in ``bench/results/learner_rates.md``.

        Parameters
        ----------
        X_left, X_right : ndarray of shape (n_pairs, n_features)
            Columns in ``feature_names`` order (which must be known).
        y : ndarray of shape (n_pairs,)
            Outcomes in {+1, −1, 0}.
        context : ignored (LinearBT has no context); accepted for the batch contract.
        weight : ndarray of shape (n_pairs,), optional
            Finite weights > 0 (default 1).

        Raises
        ------
        InvalidInputError
            Shapes, NaN/inf, outcomes or weights; nothing is learned then.
        NotFittedError
            Feature names unknown (learn one example with :meth:`learn_one` first).
        """
        XL, XR = self._check_batch(X_left, X_right)
        n = XL.shape[0]
        Y = np.asarray(y)
        if Y.shape != (n,) or Y.dtype == bool or Y.dtype.kind not in "iuf" or not np.isin(Y, (-1, 0, 1)).all():
            raise InvalidInputError(f"LinearBT: y must have shape ({n},) with values in {{+1, -1, 0}}; got "
                                    f"shape {Y.shape} and values {np.unique(Y)[:5]}.")
        W = np.ones(n) if weight is None else np.asarray(weight, dtype=np.float64)
        if W.shape != (n,) or not (np.isfinite(W).all() and (W > 0).all()):
            raise InvalidInputError(f"LinearBT: weight must be {n} finite floats > 0.")
        D = XL - XR
        if self.indifference == "skip":
            keep = Y != 0
            D, Y, W = D[keep], Y[keep], W[keep]
        T = 0.5 * (1.0 + Y.astype(np.float64))
        step = self.max_delay
        for s in range(0, D.shape[0], step):
            self._delayed_chunk(D[s:s + step], T[s:s + step], W[s:s + step])

    def _delayed_chunk(self, D: np.ndarray, T: np.ndarray, W: np.ndarray) -> None:
        """One chunk of :meth:`learn_many` (see there); D (b, d), targets T, weights W."""
        if self.scale:
            SQ = self._sq + np.cumsum(W[:, None] * D * D, axis=0)
            SW = self._sw + np.cumsum(W)
            S = np.sqrt(SQ / SW[:, None])
            S = np.where(S > _EPS, S, 1.0)
            self._sq, self._sw = SQ[-1].copy(), float(SW[-1])
        else:
            S = 1.0
        Z = D / S
        g = Z @ self._w
        P = 0.5 * (1.0 + np.tanh(0.5 * g))
        grads = (W * (P - T))[:, None] * Z + self.l2 * self._w
        G = self._G + np.cumsum(grads * grads, axis=0)
        self._w = self._w - self.learning_rate * (grads / (np.sqrt(G) + 1e-8)).sum(axis=0)
        self._G = G[-1].copy()
        self._n += D.shape[0]

    # -------------------------------------------------------------- prediction
    def margin_one(self, x_left: Mapping[str, float], x_right: Mapping[str, float],
                   context: Mapping[str, float] | None = None) -> float:
        """g(x_l, x_r) = w·(x_l − x_r); 0.0 before the feature names are known (the zero model).

        Raises
        ------
        InvalidInputError
            Missing, NaN or infinite feature.
        """
        if self._names is None:
            return 0.0
        d = dict_to_array(x_left, self._names, "LinearBT") - dict_to_array(x_right, self._names, "LinearBT")
        return float(self.weights @ d)

    def _check_batch(self, XL, XR) -> tuple[np.ndarray, np.ndarray]:
        if self._names is None:
            raise NotFittedError("LinearBT has no feature names yet; learn an example or pass feature_names.")
        XL = np.asarray(XL, dtype=np.float64)
        XR = np.asarray(XR, dtype=np.float64)
        d = len(self._names)
        if XL.ndim == 1:
            XL = XL[None, :]
        if XR.ndim == 1:
            XR = XR[None, :]
        if XL.ndim != 2 or XL.shape != XR.shape or XL.shape[1] != d:
            raise InvalidInputError(
                f"LinearBT expects XL and XR of the same shape (n_pairs, {d}); got {XL.shape} and {XR.shape}.")
        if not (np.isfinite(XL).all() and np.isfinite(XR).all()):
            raise InvalidInputError("LinearBT: XL and XR must be finite (no NaN or inf).")
        return XL, XR

    def margin(self, XL: np.ndarray, XR: np.ndarray) -> np.ndarray:
        """Batch margins g = (XL − XR) w.

        Parameters
        ----------
        XL, XR : ndarray of shape (n_pairs, n_features) or (n_features,)

        Returns
        -------
        ndarray of shape (n_pairs,), float64

        Raises
        ------
        InvalidInputError
            Shapes disagree or contain NaN/inf.
        NotFittedError
            Feature names unknown.
        """
        XL, XR = self._check_batch(XL, XR)
        return (XL - XR) @ self.weights

    def margin_many(self, X_left, X_right, context=None) -> np.ndarray:
        """Batch margins (the contract's name for :meth:`margin`); zeros before the feature names
        are known, as :meth:`margin_one`. Context is ignored."""
        if self._names is None:
            return np.zeros(np.asarray(X_left).shape[0])
        return self.margin(X_left, X_right)

    def predict_proba(self, XL: np.ndarray, XR: np.ndarray) -> np.ndarray:
        """P(left preferred) = σ(g), ndarray of shape (n_pairs,)."""
        return 0.5 * (1.0 + np.tanh(0.5 * self.margin(XL, XR)))

    # ----------------------------------------------------------------- merging
    def __iadd__(self, other: "LinearBT") -> "LinearBT":
        """Merge ``other`` into ``self``: training-count-weighted average of the raw-unit weights.

        An approximation for SGD (see module docstring). Feature names must agree.

        Raises
        ------
        InvalidInputError
            If ``other`` is not a LinearBT or has other feature names.
        """
        if not isinstance(other, LinearBT):
            raise InvalidInputError(f"Can only merge a LinearBT into a LinearBT; got {type(other).__name__}.")
        if other._names is None or other._n == 0:
            return self
        if self._names is None or self._n == 0:
            self._init(list(other._names))
            self._w, self._G, self._sq = other._w.copy(), other._G.copy(), other._sq.copy()
            self._sw, self._n = other._sw, other._n
            return self
        if self._names != other._names:
            raise InvalidInputError(f"Cannot merge LinearBT models with different feature names: "
                                    f"{self._names} vs {other._names}.")
        n1, n2 = self._n, other._n
        w = (n1 * self.weights + n2 * other.weights) / (n1 + n2)
        self._sq = self._sq + other._sq
        self._sw = self._sw + other._sw
        self._G = self._G + other._G
        self._w = w * self._scale_vec()
        self._n = n1 + n2
        return self

    # ------------------------------------------------------------------- state
    def state_dict(self) -> dict:
        """``{"meta": {...}, "arrays": {"w", "G", "sq"}}`` (JSON meta + float64 arrays)."""
        meta = {
            "model_name": self.model_name,
            "params": {"feature_names": self.feature_names_in, "learning_rate": self.learning_rate, "l2": self.l2,
                       "scale": self.scale, "indifference": self.indifference,
                       "max_delay": self.max_delay},
            "feature_names": self._names,
            "n_learned": self._n,
            "scaler_weight": self._sw,
        }
        arrays = {} if self._names is None else {"w": self._w.copy(), "G": self._G.copy(), "sq": self._sq.copy()}
        return {"meta": meta, "arrays": arrays}

    @classmethod
    def from_state(cls, state: dict) -> "LinearBT":
        """Rebuild from :meth:`state_dict` output.

        Raises
        ------
        SnapshotError
            If the state is not a LinearBT state or arrays have the wrong shapes.
        """
        try:
            meta, arrays = state["meta"], state["arrays"]
            if meta.get("model_name") != cls.model_name:
                raise SnapshotError(f"Not a {cls.model_name} state: model_name={meta.get('model_name')!r}.")
            m = cls(**meta["params"])
            names = meta["feature_names"]
            if names is not None:
                m._init(list(names))
                for k in ("w", "G", "sq"):
                    a = np.asarray(arrays[k], dtype=np.float64)
                    if a.shape != (len(names),):
                        raise SnapshotError(f"LinearBT state array {k!r} has shape {a.shape}; expected ({len(names)},).")
                    if not np.isfinite(a).all():
                        raise SnapshotError(f"LinearBT state array {k!r} holds {int((~np.isfinite(a)).sum())} "
                                            "non-finite values (NaN or inf); the state was poisoned before it was saved.")
                    setattr(m, f"_{k}", a.copy())
            m._n = int(meta["n_learned"])
            m._sw = float(meta["scaler_weight"])
        except SnapshotError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise SnapshotError(f"Not a valid LinearBT state: {type(exc).__name__}: {exc}.") from None
        return m

    def clone(self) -> "LinearBT":
        """A fresh, unfitted LinearBT with the same parameters."""
        return LinearBT(self.feature_names_in, self.learning_rate, self.l2, self.scale, self.indifference, self.max_delay)

    def __repr__(self) -> str:
        return (f"LinearBT(feature_names={self.feature_names_in!r}, learning_rate={self.learning_rate!r}, "
                f"l2={self.l2!r}, scale={self.scale!r}, indifference={self.indifference!r}, max_delay={self.max_delay!r})")


def _is_real(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and math.isfinite(v)
