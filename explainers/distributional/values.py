"""Distributional values as result objects, with their statistics.

Franceschi, Donini, Archambeau & Seeger (2024), *Explaining probabilistic models with distributional
values*, Eq. 5–7 and Sec. 3.1: transition tables of discrete values (importance, most likely change,
entropy, mean, variance) and Gaussian mixtures with the variance-direction tracker.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from learners.exceptions import InvalidInputError

__all__ = ["DiscreteDistributionalValue", "GaussianDistributionalValue"]


@dataclass
class DiscreteDistributionalValue:
    """Distributional value of a Bernoulli or categorical game (Franceschi et al. 2024, Eq. 5 and Eq. 7).

    Attributes
    ----------
    transition : ndarray of shape (n, d, d), float64
        ``transition[i, s, r] = E_{S~p^i} P(v(S) = s, v(S ∪ i) = r)``: off-diagonal entries are the
        transition probabilities ``q_i(e_r − e_s)`` (from ``s`` to ``r``), the trace is ``q_i(0)``.
    family : {"bernoulli", "categorical"}
    classes, feature_names : list of str
    structure : str
        Name of the coalition structure.
    estimator : {"exact", "monte-carlo", "shared-noise-sampling"}
    n_samples : int or None
        Coalition samples (Monte Carlo) or noise draws (sampling); None when exact.
    stderr : ndarray of shape (n, d, d) or None
        Standard errors of ``transition`` (Monte Carlo only).
    mean_stderr : ndarray of shape (n, d) or None
        Standard errors of the mean vector (Monte Carlo only).
    base, prediction : ndarray of shape (d,)
        Class probabilities of the empty and the grand coalition, ``u(∅)`` and ``u([n])``.
    efficient : bool
        Whether the coalition structure is efficient (then ``base + Σ_i mean_i = prediction``).
    """

    transition: np.ndarray
    family: str
    classes: list
    feature_names: list
    structure: str
    estimator: str
    n_samples: int | None = None
    stderr: np.ndarray | None = None
    mean_stderr: np.ndarray | None = None
    base: np.ndarray | None = None
    prediction: np.ndarray | None = None
    efficient: bool = False

    @property
    def n_players(self) -> int:
        return self.transition.shape[0]

    @property
    def n_classes(self) -> int:
        return self.transition.shape[1]

    def _class(self, c) -> int:
        if isinstance(c, str):
            if c not in self.classes:
                raise InvalidInputError(f"Unknown class {c!r}; classes are {self.classes}.")
            return self.classes.index(c)
        c = int(c)
        if not 0 <= c < self.n_classes:
            raise InvalidInputError(f"Class index {c} out of range 0..{self.n_classes - 1}.")
        return c

    # ---- statistics
    def stay_probability(self) -> np.ndarray:
        """``q_i(0)``: probability that player ``i`` changes nothing; shape (n,)."""
        return np.trace(self.transition, axis1=1, axis2=2)

    def importance(self) -> np.ndarray:
        """Overall importance ``ι_i = 1 − q_i(0)`` (Eq. 6); shape (n,), in [0, 1]."""
        return np.clip(1.0 - self.stay_probability(), 0.0, 1.0)

    def transition_probability(self, frm, to) -> np.ndarray:
        """``q_i(e_to − e_from)`` for every player; shape (n,). Classes by index or name."""
        return self.transition[:, self._class(frm), self._class(to)]

    def most_likely_change(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``ℓ_mc``: the mode of ``ξ_i`` disregarding 0 (Sec. 3.1), with its classes.

        Returns
        -------
        probability : ndarray of shape (n,)
            ``max_{r≠s} q_i(e_r − e_s)``.
        from_class, to_class : ndarray of shape (n,), int
            The maximising ``s`` (before) and ``r`` (after); first in row-major order on ties.
        """
        d = self.n_classes
        off = self.transition.copy()
        off[:, np.arange(d), np.arange(d)] = -np.inf
        flat = off.reshape(self.n_players, -1)
        k = np.argmax(flat, axis=1)
        return flat[np.arange(self.n_players), k], k // d, k % d

    def leave_probability(self) -> np.ndarray:
        """``Q_i(s) − Q_i(s, s)``: probability of starting in ``s`` and being moved away; (n, d).

        The paper's "more efficient" expression in Sec. 3.1; its maximum over ``s`` bounds ``ℓ_mc``
        from above (it aggregates all destinations), so it is reported separately.
        """
        d = self.n_classes
        return self.transition.sum(axis=2) - self.transition[:, np.arange(d), np.arange(d)]

    def pmf(self) -> np.ndarray:
        """Probability mass of ``ξ_i``.

        Returns
        -------
        ndarray
            Bernoulli: shape (n, 3) over ``[−1, 0, +1]``. Categorical: shape (n, 1 + d(d−1)) over
            ``[0] + [e_r − e_s for s, r in support()[1:]]`` (row-major ``(from, to)`` pairs).
        """
        if self.family == "bernoulli":
            T = self.transition
            return np.stack([T[:, 1, 0], self.stay_probability(), T[:, 0, 1]], axis=1)
        d = self.n_classes
        off = ~np.eye(d, dtype=bool)
        return np.concatenate([self.stay_probability()[:, None], self.transition[:, off]], axis=1)

    def support(self) -> list:
        """Labels of :meth:`pmf` columns: ``[-1, 0, 1]`` or ``[0, (from, to), …]``."""
        if self.family == "bernoulli":
            return [-1, 0, 1]
        d = self.n_classes
        return [0] + [(s, r) for s in range(d) for r in range(d) if s != r]

    def entropy(self) -> np.ndarray:
        """Shannon entropy of ``ξ_i`` over the difference set ``T`` in nats; shape (n,)."""
        p = np.clip(self.pmf(), 0.0, 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            return -np.sum(np.where(p > 0, p * np.log(p), 0.0), axis=1)

    def mean_vector(self) -> np.ndarray:
        """``E[ξ_i] ∈ R^d`` = class-wise standard value of the probability game (Prop. 3.9(i)); (n, d)."""
        return self.transition.sum(axis=1) - self.transition.sum(axis=2)

    def covariance(self) -> np.ndarray:
        """Covariance matrix of the vector ``ξ_i = e_r − e_s``; shape (n, d, d)."""
        T = self.transition
        d = self.n_classes
        idx = np.arange(d)
        second = -(T + np.swapaxes(T, 1, 2))
        diag = T.sum(axis=1) + T.sum(axis=2) - 2 * T[:, idx, idx]
        second[:, idx, idx] = diag
        mu = self.mean_vector()
        return second - mu[:, :, None] * mu[:, None, :]

    def mean(self) -> np.ndarray:
        """Mean of ``ξ_i``: Bernoulli (n,) = ``q⁺ − q⁻``; categorical (n, d) (:meth:`mean_vector`)."""
        mv = self.mean_vector()
        return mv[:, 1] if self.family == "bernoulli" else mv

    def variance(self) -> np.ndarray:
        """Variance of ``ξ_i``: Bernoulli (n,); categorical per class component, (n, d)."""
        d = self.n_classes
        v = self.covariance()[:, np.arange(d), np.arange(d)]
        v = np.maximum(v, 0.0)
        return v[:, 1] if self.family == "bernoulli" else v

    def to_dict(self) -> dict:
        """JSON-serialisable summary (lists, floats)."""
        prob, frm, to = self.most_likely_change()
        out = {
            "family": self.family, "structure": self.structure, "estimator": self.estimator,
            "n_samples": self.n_samples, "classes": list(self.classes), "efficient": bool(self.efficient),
            "transition": self.transition.tolist(), "importance": self.importance().tolist(),
            "entropy": self.entropy().tolist(), "mean": self.mean().tolist(), "variance": self.variance().tolist(),
            "most_likely_change": {"probability": prob.tolist(), "from": [self.classes[j] for j in frm],
                                   "to": [self.classes[j] for j in to]},
            "base_distribution": None if self.base is None else np.asarray(self.base).tolist(),
            "prediction_distribution": None if self.prediction is None else np.asarray(self.prediction).tolist(),
        }
        if self.stderr is not None:
            out["transition_stderr"] = self.stderr.tolist()
        if self.mean_stderr is not None:
            ms = self.mean_stderr[:, 1] if self.family == "bernoulli" else self.mean_stderr
            out["mean_stderr"] = ms.tolist()
        return out


@dataclass
class GaussianDistributionalValue:
    """Distributional value of a Gaussian game: a mixture of Gaussians per player (Sec. 3.1).

    ``q_i = Σ_S p^i(S) N(μ_{S∪i} − μ_S, (σ_{S∪i} − σ_S)²)`` plus the tracker
    ``δ_{sign(σ_{S∪i} − σ_S)}`` of the direction in which ``i`` moves the standard deviation.

    Attributes
    ----------
    weights, loc, scale : ndarray of shape (n, M), float64
        Mixture weights (rows sum to one; padding has weight 0), component means and standard
        deviations ``|σ_{S∪i} − σ_S|`` (0 = a point mass).
    sign : ndarray of shape (n, M), int8
        ``sign(σ_{S∪i} − σ_S)`` per component.
    feature_names : list of str
    structure, estimator : str
    n_samples : int or None
    base, prediction : ndarray of shape (2,)
        ``(μ, σ)`` of the empty and the grand coalition.
    efficient : bool
    """

    weights: np.ndarray
    loc: np.ndarray
    scale: np.ndarray
    sign: np.ndarray
    feature_names: list
    structure: str
    estimator: str
    n_samples: int | None = None
    base: np.ndarray | None = None
    prediction: np.ndarray | None = None
    efficient: bool = False
    family: str = "gaussian"

    @property
    def n_players(self) -> int:
        return self.weights.shape[0]

    def mean(self) -> np.ndarray:
        """``E[ξ_i]`` = standard value of the mean game ``u(S) = μ_S`` (Prop. 3.9(i)); shape (n,)."""
        return np.sum(self.weights * self.loc, axis=1)

    def variance(self) -> np.ndarray:
        """Mixture variance ``Σ w (s² + m²) − (Σ w m)²``; shape (n,)."""
        m = self.mean()
        return np.maximum(np.sum(self.weights * (self.scale ** 2 + self.loc ** 2), axis=1) - m ** 2, 0.0)

    def importance(self) -> np.ndarray:
        """``ι_i = 1 − P(ξ_i = 0)`` (Eq. 6): the atoms at zero are components with mean 0, sd 0."""
        atom = (self.loc == 0) & (self.scale == 0)
        return np.clip(1.0 - np.sum(self.weights * atom, axis=1), 0.0, 1.0)

    def tracker(self) -> np.ndarray:
        """Variance-direction tracker: P(sign(σ_{S∪i} − σ_S) = −1, 0, +1); shape (n, 3)."""
        return np.stack([np.sum(self.weights * (self.sign == k), axis=1) for k in (-1, 0, 1)], axis=1)

    def stderr_of_mean(self) -> np.ndarray | None:
        """Monte Carlo standard error of :meth:`mean` (None when exact)."""
        if self.estimator == "exact" or not self.n_samples or self.n_samples < 2:
            return None
        return np.std(self.loc, axis=1, ddof=1) / math.sqrt(self.n_samples)

    def cdf(self, x) -> np.ndarray:
        """CDF of ``ξ_i`` at points ``x`` (point masses included); shape (n, len(x))."""
        from scipy.special import ndtr

        x = np.atleast_1d(np.asarray(x, dtype=np.float64))
        z = (x[None, None, :] - self.loc[:, :, None])
        with np.errstate(divide="ignore", invalid="ignore"):
            c = np.where(self.scale[:, :, None] > 0, ndtr(z / np.where(self.scale > 0, self.scale, 1.0)[:, :, None]),
                         (z >= 0).astype(np.float64))
        return np.sum(self.weights[:, :, None] * c, axis=1)

    def to_dict(self, include_components: bool = False) -> dict:
        """JSON-serialisable summary; mixture components only on request (``n · 2^{n−1}`` when exact)."""
        out = {"family": "gaussian", "structure": self.structure, "estimator": self.estimator,
               "n_samples": self.n_samples, "efficient": bool(self.efficient),
               "mean": self.mean().tolist(), "variance": self.variance().tolist(),
               "importance": self.importance().tolist(), "sigma_tracker_support": [-1, 0, 1],
               "sigma_tracker": self.tracker().tolist(),
               "base_mean_sd": None if self.base is None else np.asarray(self.base).tolist(),
               "prediction_mean_sd": None if self.prediction is None else np.asarray(self.prediction).tolist()}
        se = self.stderr_of_mean()
        if se is not None:
            out["mean_stderr"] = se.tolist()
        if include_components:
            out["components"] = {"weights": self.weights.tolist(), "loc": self.loc.tolist(),
                                 "scale": self.scale.tolist(), "sign": self.sign.tolist()}
        return out


