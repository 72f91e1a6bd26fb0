"""Payoff families of cooperative stochastic games (Bernoulli, categorical, Gaussian).

Franceschi, Donini, Archambeau & Seeger (2024), *Explaining probabilistic models with distributional
values*, Definition 3.1 and Sec. 3.1: a likelihood with a reparameterisation ``v(S, ε) = g(θ_S, ε)``
whose noise ``ε`` is shared by all coalitions; the marginal-contribution tables are analytic.
"""

from __future__ import annotations

import numpy as np

from explainers._gumbel import bernoulli_comonotone_coupling, gumbel_max_coupling
from learners.exceptions import InvalidInputError, check_param

__all__ = ["BernoulliFamily", "CategoricalFamily", "GaussianFamily", "PayoffFamily"]


# ============================================================================ payoff families
class PayoffFamily:
    """A likelihood with a reparameterisation ``v(S, ε) = g(θ_S, ε)`` (Definition 3.1, Sec. 3.1)."""

    name = "generic"
    discrete = True

    def check_params(self, params, n_coalitions: int) -> np.ndarray:  # pragma: no cover - abstract
        """Validate and return the natural parameters of ``n_coalitions`` payoffs."""
        raise NotImplementedError

    def expectation(self, params: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        """``u(S) = E_ε[v(S)]`` (the expectation game of Prop. 3.9(i))."""
        raise NotImplementedError

    def draw_noise(self, rng: np.random.Generator, n_draws: int) -> np.ndarray:  # pragma: no cover
        """``n_draws`` draws of the shared noise ``ε ~ ρ``."""
        raise NotImplementedError

    def realise(self, params: np.ndarray, noise: np.ndarray) -> np.ndarray:  # pragma: no cover
        """Outcomes ``v(S, ε)``; shape (n_coalitions, n_draws)."""
        raise NotImplementedError


class BernoulliFamily(PayoffFamily):
    """``v(S) ~ Ber(π_S)`` with ``v(S, ε) = 1{ε ≤ π_S}``, ``ε ~ U(0, 1)`` (Sec. 3.1, Bernoulli games).

    Parameters are success probabilities ``π_S`` in [0, 1], shape (K,). The marginal contribution
    has the comonotone joint table of :func:`explainers._gumbel.bernoulli_comonotone_coupling`.
    """

    name = "bernoulli"
    n_classes = 2

    def check_params(self, params, n_coalitions: int) -> np.ndarray:
        p = np.asarray(params, dtype=np.float64)
        if p.ndim == 2 and p.shape[1] == 1:
            p = p[:, 0]
        if p.shape != (n_coalitions,):
            raise InvalidInputError(
                f"A Bernoulli game must return one success probability per coalition, shape ({n_coalitions},); "
                f"got shape {p.shape}.")
        if not np.all((p >= 0) & (p <= 1)):
            raise InvalidInputError(
                "A Bernoulli game must return probabilities in [0, 1] (no NaN); got values in "
                f"[{np.nanmin(p)}, {np.nanmax(p)}]. Pass output='margin' to squash margins with σ.")
        return p

    def expectation(self, params):
        return np.asarray(params, dtype=np.float64)

    def pair_joint(self, p_with: np.ndarray, p_without: np.ndarray) -> np.ndarray:
        """``out[k, s, r] = P(v(S) = s, v(S ∪ i) = r)``, shape (K, 2, 2)."""
        return bernoulli_comonotone_coupling(p_without, p_with)

    def draw_noise(self, rng, n_draws):
        return rng.random(n_draws)

    def realise(self, params, noise):
        return (np.asarray(noise)[None, :] <= np.asarray(params)[:, None]).astype(np.int64)


class CategoricalFamily(PayoffFamily):
    """``v(S) ~ Cat(softmax(θ_S))`` with the Gumbel-max reparameterisation (Sec. 3.1, Lemma 3.7).

    Parameters are finite logits ``θ_S``, shape (K, d). Marginal contributions use the closed form
    of Lemma 3.7 / App. B (:func:`explainers._gumbel.gumbel_max_coupling`) in log space; for
    ``d = 2`` they reduce to the comonotone Bernoulli coupling.

    Parameters
    ----------
    n_classes : int >= 2
    """

    name = "categorical"

    def __init__(self, n_classes: int):
        check_param("CategoricalFamily", "n_classes", n_classes,
                    isinstance(n_classes, (int, np.integer)) and n_classes >= 2, "an int >= 2")
        self.n_classes = int(n_classes)

    def check_params(self, params, n_coalitions: int) -> np.ndarray:
        t = np.asarray(params, dtype=np.float64)
        if t.shape != (n_coalitions, self.n_classes):
            raise InvalidInputError(
                f"A categorical game with {self.n_classes} classes must return logits of shape "
                f"({n_coalitions}, {self.n_classes}); got shape {t.shape}.")
        if not np.all(np.isfinite(t)):
            raise InvalidInputError(
                "A categorical game must return finite logits; got NaN/inf. For probabilities use "
                "np.log(np.maximum(p, np.finfo(float).tiny)).")
        return t

    def expectation(self, params):
        t = np.asarray(params, dtype=np.float64)
        z = np.exp(t - t.max(axis=-1, keepdims=True))
        return z / z.sum(axis=-1, keepdims=True)

    def pair_joint(self, p_with, p_without):
        """``out[k, s, r] = P(v(S) = s, v(S ∪ i) = r)``, shape (K, d, d)."""
        if self.n_classes == 2:  # two classes: the Gumbel-max coupling is the comonotone one
            pw = self.expectation(p_with)[:, 1]
            po = self.expectation(p_without)[:, 1]
            return bernoulli_comonotone_coupling(po, pw)
        return gumbel_max_coupling(p_without, p_with)

    def draw_noise(self, rng, n_draws):
        return rng.gumbel(size=(n_draws, self.n_classes))

    def realise(self, params, noise):
        t = np.asarray(params)
        return np.argmax(t[:, None, :] + np.asarray(noise)[None, :, :], axis=2)


class GaussianFamily(PayoffFamily):
    """``v(S) ~ N(μ_S, σ_S²)`` with ``v(S, ε) = μ_S + σ_S ε`` (Sec. 3.1, Gaussian games).

    Parameters are ``(μ_S, σ_S)`` pairs, shape (K, 2), ``σ_S >= 0`` (a standard deviation).
    The marginal contribution is ``N(μ_{S∪i} − μ_S, (σ_{S∪i} − σ_S)²)`` plus the variance-direction
    tracker ``sign(σ_{S∪i} − σ_S)``.
    """

    name = "gaussian"
    discrete = False

    def check_params(self, params, n_coalitions: int) -> np.ndarray:
        p = np.asarray(params, dtype=np.float64)
        if p.shape != (n_coalitions, 2):
            raise InvalidInputError(
                f"A Gaussian game must return (mean, standard deviation) per coalition, shape ({n_coalitions}, 2); "
                f"got shape {p.shape}.")
        if not np.all(np.isfinite(p)) or np.any(p[:, 1] < 0):
            raise InvalidInputError("A Gaussian game needs finite means and finite standard deviations >= 0.")
        return p

    def expectation(self, params):
        return np.asarray(params)[:, 0]

    def draw_noise(self, rng, n_draws):
        return rng.standard_normal(n_draws)

    def realise(self, params, noise):
        p = np.asarray(params)
        return p[:, :1] + p[:, 1:2] * np.asarray(noise)[None, :]


