"""Distributional values: explanations of probabilistic outputs (paper 003).

A preference outcome is a random variable — "left wins" with probability σ(g) — and a click among
``k`` shown items is a categorical one. Standard Shapley values explain one scalar of such an output
(a probability); the *distributional values* of paper 003 (Franceschi et al., *Explaining
probabilistic models with distributional values*) explain the random outcome itself: with what
probability does feature ``i`` flip the outcome, and from which class to which.

Building blocks (section / equation of paper 003):

* **Cooperative stochastic game** (Definition 3.1): ``v(S, ε) = g(x_S, ε)`` with *one* noise ``ε``
  shared by all coalitions (Remark 3.6: without the coupling a null player would look important).
  :class:`StochasticGame` holds the payoff's natural parameters per coalition and a
  :class:`PayoffFamily` (Bernoulli, categorical, Gaussian) that knows the reparameterisation.
* **Coalition structures / value operators** (Eq. 2, App. C): :class:`Shapley`, :class:`Banzhaf`,
  :class:`Semivalue` (weights by coalition size), :class:`RandomOrderValue` (distributions over
  permutations, e.g. ordered groups = asymmetric Shapley), :class:`ExplicitCoalitionStructure`.
* **Distributional value** (Definition 3.3, Eq. 4–5, Eq. 7): :func:`distributional_value` — exact
  enumeration for small ``n`` or Monte Carlo over permutations / coalitions with samples shared
  across players, with standard errors. Marginal contributions are analytic (Section 3.1):
  Bernoulli (comonotone coupling), categorical (Gumbel-max closed form, Lemma 3.7 / App. B, see
  :mod:`explainers._gumbel`; two classes reduce to Bernoulli), Gaussian (mixture of Gaussians with
  the variance-direction tracker). :func:`sampled_value` is the generic shared-noise Monte Carlo
  estimator used when only samples of ``v(S, ε)`` are available.
* **Statistics** (Eq. 6, Sec. 3.1, Prop. 3.9): overall importance ``ι_i = 1 − q_i(0)``, transition
  probabilities ``q_i(e_r − e_s)``, most likely change ``ℓ_mc`` and its classes, entropy, mean
  (= the standard value of the expectation game, Prop. 3.9(i)) and variance.
* **Games from prefstream's models** through plain callables (no import of any learner module):
  :func:`bernoulli_preference_game` from a coalition value function ``ν`` (the Pref-SHAP value
  function of a GPM, or :func:`pairwise_margin_value_function` around any margin ``g``),
  :func:`categorical_choice_game` for a choice among ``k`` shown items (click session),
  :func:`gaussian_utility_game` for a utility with predictive variance, :func:`reference_game` for
  any callable returning probabilities or logits with baseline/reference removal.
* **Result**: :func:`to_explanation` → :class:`explainers._result.Explanation` with method
  ``"distributional-bernoulli" | "distributional-categorical" | "distributional-gaussian"``;
  ``values`` is the mean of the distributional value, ``extra`` the per-player distributions.
  :func:`explain_preference`, :func:`explain_choice` and :func:`explain_gaussian_utility` are the
  one-call entry points for the explainer worker.

Conventions
-----------
Players are indexed ``0..n-1``; a coalition is a boolean row of length ``n``. Discrete values are
stored as a *transition table* ``T[i, s, r] = P(v(S) = s, v(S ∪ i) = r)`` averaged over
``S ~ p^i`` — rows are the *from* class (without ``i``), columns the *to* class (with ``i``). Its
off-diagonal entries are the transition probabilities ``q_i(e_r − e_s)`` of Eq. 7 and its trace is
``q_i(0)``. For Bernoulli games the classes are ``[0, 1]`` and ``ξ_i ∈ {−1, 0, +1}``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from explainers._gumbel import bernoulli_comonotone_coupling, gumbel_max_coupling
from explainers._result import Explanation
from learners.exceptions import BudgetError, InvalidInputError, InvalidParameterError, check_param

__all__ = [
    # coalition structures (value operators)
    "CoalitionStructure", "Shapley", "Banzhaf", "Semivalue", "RandomOrderValue",
    "ExplicitCoalitionStructure", "get_structure", "all_coalitions",
    # payoff families and games
    "PayoffFamily", "BernoulliFamily", "CategoricalFamily", "GaussianFamily",
    "StochasticGame", "table_game",
    # values and statistics
    "DiscreteDistributionalValue", "GaussianDistributionalValue", "distributional_value",
    "sampled_value", "standard_value",
    # games from models
    "masked_inputs", "pairwise_margin_value_function", "learner_margin_value_function",
    "bernoulli_preference_game", "categorical_choice_game", "gaussian_utility_game", "reference_game",
    # results
    "to_explanation", "explain_game", "explain_preference", "explain_choice", "explain_gaussian_utility",
]

_TINY = np.finfo(np.float64).tiny


# ============================================================================ coalitions
def all_coalitions(n: int) -> np.ndarray:
    """Every coalition of ``n`` players as boolean rows; row ``m`` is the bit pattern of ``m``.

    Parameters
    ----------
    n : int in [0, 30]

    Returns
    -------
    ndarray of shape (2**n, n), bool
        ``out[m, j] = (m >> j) & 1``.

    Examples
    --------
    >>> all_coalitions(2).astype(int).tolist()
    [[0, 0], [1, 0], [0, 1], [1, 1]]
    """
    check_param("all_coalitions", "n", n, isinstance(n, (int, np.integer)) and 0 <= n <= 30, "an int in [0, 30]")
    m = np.arange(2 ** n, dtype=np.int64)
    return ((m[:, None] >> np.arange(n)[None, :]) & 1).astype(bool)


def _sizes(n: int) -> np.ndarray:
    return all_coalitions(n).sum(axis=1)


def _check_n(owner: str, n) -> int:
    check_param(owner, "n_players", n, isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 1,
                "an int >= 1")
    return int(n)


class CoalitionStructure:
    """A coalition structure ``p = {p^i}``: one distribution over ``2^{[n] \\ i}`` per player (Eq. 2).

    Subclasses give the exact weights (:meth:`player_weights`) and a sampler that shares samples
    across players (:meth:`sample_coalitions`). ``efficient`` / ``symmetric`` flag the properties of
    Definition 3.8 (which make the value efficient, Prop. 3.9(iv), or symmetric, Prop. 3.9(v)).
    """

    name = "generic"
    efficient = False
    symmetric = False

    def player_weights(self, n: int) -> np.ndarray:  # pragma: no cover - abstract
        """Exact weights ``W[i, m] = p^i(S_m)`` over the coalitions of :func:`all_coalitions`.

        Returns
        -------
        ndarray of shape (n, 2**n), float64
            Zero wherever ``i ∈ S_m``; each row sums to one.
        """
        raise NotImplementedError

    def sample_coalitions(self, n: int, n_samples: int, rng: np.random.Generator) -> np.ndarray:
        """Draw ``S_{t,i} ~ p^i`` for every player from shared randomness.

        Returns
        -------
        ndarray of shape (n_samples, n, n), bool
            ``out[t, i]`` is the coalition (without ``i``) of player ``i`` in sample ``t``.
        """
        W = self.player_weights(n)
        masks = all_coalitions(n)
        out = np.empty((n_samples, n, n), dtype=bool)
        u = rng.random(n_samples)  # common random numbers across players
        for i in range(n):
            cdf = np.cumsum(W[i])
            idx = np.minimum(np.searchsorted(cdf, u * cdf[-1], side="right"), W.shape[1] - 1)
            out[:, i] = masks[idx]
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Semivalue(CoalitionStructure):
    """Semivalue: ``p^i(S) = p̄(|S|) / C(n−1, |S|)`` — the same size distribution for every player.

    Parameters
    ----------
    size_distribution : array_like of shape (n,) or callable ``n -> array``
        ``p̄(k) = P(|S| = k)`` for ``k = 0..n−1`` (non-negative, sums to one). Paper 003, Eq. 9 /
        Eq. 18 (symmetric coalition structures; Dubey et al. 1981).

    Notes
    -----
    Monte Carlo (:meth:`sample_coalitions`) draws a size ``k ~ p̄`` and one random permutation per
    sample; player ``i`` gets the first ``k`` players of the permutation other than ``i``. Every
    sample thus costs ``n + 1`` distinct coalitions shared by all players, instead of ``2n``.

    Examples
    --------
    >>> Semivalue([0.5, 0.5]).player_weights(2).tolist()
    [[0.5, 0.0, 0.5, 0.0], [0.5, 0.5, 0.0, 0.0]]
    """

    name = "semivalue"
    symmetric = True

    def __init__(self, size_distribution):
        self._size = size_distribution

    @classmethod
    def from_coalition_weights(cls, weights) -> "Semivalue":
        """Semivalue from per-coalition weights ``w_k`` with ``Σ_k C(n−1,k) w_k = 1``."""
        w = np.asarray(weights, dtype=np.float64)
        n = w.shape[0]
        return cls(w * np.array([math.comb(n - 1, k) for k in range(n)], dtype=np.float64))

    def size_distribution(self, n: int) -> np.ndarray:
        """``p̄(k)``, ``k = 0..n−1``; ndarray of shape (n,).

        Raises
        ------
        InvalidParameterError
            If it has the wrong length, negative entries, or does not sum to one.
        """
        p = self._size(n) if callable(self._size) else self._size
        p = np.asarray(p, dtype=np.float64)
        check_param(type(self).__name__, "size_distribution", p,
                    p.shape == (n,) and np.all(np.isfinite(p)) and np.all(p >= 0) and abs(p.sum() - 1) < 1e-9,
                    f"a probability vector of length n_players={n} (P(|S| = k), k = 0..n-1)")
        return p

    def player_weights(self, n: int) -> np.ndarray:
        n = _check_n(type(self).__name__, n)
        p = self.size_distribution(n)
        size = _sizes(n)
        per = p / np.array([math.comb(n - 1, k) for k in range(n)], dtype=np.float64)
        masks = all_coalitions(n)
        W = np.empty((n, 2 ** n))
        for i in range(n):
            W[i] = np.where(masks[:, i], 0.0, per[np.minimum(size, n - 1)])
        return W

    def sample_coalitions(self, n: int, n_samples: int, rng: np.random.Generator) -> np.ndarray:
        p = self.size_distribution(n)
        k = rng.choice(n, size=n_samples, p=p)
        pos = np.argsort(rng.random((n_samples, n)), axis=1)  # pos[t, j]: position of player j
        # rank of j in the order with i removed: pos_j − [pos_i < pos_j]
        rank = pos[:, None, :] - (pos[:, :, None] < pos[:, None, :])
        out = rank < k[:, None, None]
        idx = np.arange(n)
        out[:, idx, idx] = False
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._size!r})"


class Shapley(Semivalue):
    """Shapley value: ``p^i(S) = 1 / (n C(n−1, |S|))`` (Eq. 2); efficient and symmetric.

    Monte Carlo samples uniform random permutations; every player's coalition is its set of
    predecessors, so each sample costs ``n + 1`` coalitions shared by all players.
    """

    name = "shapley"
    efficient = True
    symmetric = True

    def __init__(self):
        super().__init__(lambda n: np.full(n, 1.0 / n))

    def sample_coalitions(self, n: int, n_samples: int, rng: np.random.Generator) -> np.ndarray:
        pos = np.argsort(rng.random((n_samples, n)), axis=1)
        return pos[:, None, :] < pos[:, :, None]  # out[t, i, j] = j precedes i

    def __repr__(self) -> str:
        return "Shapley()"


class Banzhaf(Semivalue):
    """Banzhaf value: ``p^i(S) = 2^{−(n−1)}`` (size distribution Binomial(n−1, 1/2)); symmetric."""

    name = "banzhaf"

    def __init__(self):
        super().__init__(lambda n: np.array([math.comb(n - 1, k) for k in range(n)], dtype=np.float64) / 2.0 ** (n - 1))

    def __repr__(self) -> str:
        return "Banzhaf()"


class RandomOrderValue(CoalitionStructure):
    """Random-order (group) value: a distribution over permutations; ``S`` = predecessors of ``i``.

    Paper 003, App. C (Weber 1988; asymmetric Shapley values of Frye et al. 2020). Efficient
    (Definition 3.8), so the distributional value is efficient too (Prop. 3.9(iv)).

    Parameters
    ----------
    groups : sequence of sequences of int, optional
        Ordered groups partitioning the players (e.g. causal tiers): every earlier group precedes
        every later one, uniformly at random within a group. One group = the Shapley value.
    permutations : array_like of shape (m, n), int, optional
        Explicit orders (``permutations[k, t]`` = player at position ``t``), with ``weights``.
    weights : array_like of shape (m,), optional
        Probabilities of the explicit orders (default uniform).

    Raises
    ------
    InvalidParameterError
        If both ``groups`` and ``permutations`` are given, or they do not cover the players.
    """

    name = "random-order"
    efficient = True

    def __init__(self, groups=None, permutations=None, weights=None):
        if groups is not None and permutations is not None:
            raise InvalidParameterError("RandomOrderValue takes either 'groups' or 'permutations', not both.")
        self.groups = None if groups is None else [list(map(int, g)) for g in groups]
        self.permutations = None if permutations is None else np.asarray(permutations, dtype=np.int64)
        self.weights = None if weights is None else np.asarray(weights, dtype=np.float64)
        if self.permutations is not None:
            check_param("RandomOrderValue", "permutations", f"array of shape {self.permutations.shape}",
                        self.permutations.ndim == 2 and self.permutations.shape[0] >= 1,
                        "an int array of shape (m, n) with m >= 1 orders")
            m = self.permutations.shape[0]
            w = np.full(m, 1.0 / m) if self.weights is None else self.weights
            check_param("RandomOrderValue", "weights", weights,
                        w.shape == (m,) and np.all(w >= 0) and abs(w.sum() - 1) < 1e-9,
                        "a probability vector with one entry per permutation")
            self.weights = w
        self.symmetric = groups is None and permutations is None

    def _check(self, n: int) -> None:
        if self.groups is not None:
            flat = sorted(j for g in self.groups for j in g)
            check_param("RandomOrderValue", "groups", self.groups, flat == list(range(n)),
                        f"ordered groups that partition the players 0..{n - 1}")
        if self.permutations is not None:
            P = self.permutations
            check_param("RandomOrderValue", "permutations", "array of shape " + str(P.shape),
                        P.ndim == 2 and P.shape[1] == n and np.all(np.sort(P, axis=1) == np.arange(n)),
                        f"an int array of shape (m, {n}) whose rows are permutations of 0..{n - 1}")

    def player_weights(self, n: int) -> np.ndarray:
        n = _check_n("RandomOrderValue", n)
        self._check(n)
        if self.permutations is None:
            groups = self.groups if self.groups is not None else [list(range(n))]
            masks = all_coalitions(n)
            W = np.zeros((n, 2 ** n))
            before = np.zeros(n, dtype=bool)
            for g in groups:
                gm = np.zeros(n, dtype=bool)
                gm[g] = True
                for i in g:
                    inside = masks & gm
                    ok = (~masks[:, i]) & np.all(masks[:, before] == True, axis=1) \
                        & ~np.any(masks[:, ~(before | gm)], axis=1)  # noqa: E712
                    t = inside.sum(axis=1)
                    gsz = len(g)
                    w = np.array([1.0 / (gsz * math.comb(gsz - 1, k)) for k in range(gsz)])
                    W[i] = np.where(ok, w[np.minimum(t, gsz - 1)], 0.0)
                before |= gm
            return W
        W = np.zeros((n, 2 ** n))
        bits = 1 << np.arange(n)
        for perm, w in zip(self.permutations, self.weights):
            m = 0
            for j in perm:
                W[j, m] += w
                m |= int(bits[j])
        return W

    def sample_coalitions(self, n: int, n_samples: int, rng: np.random.Generator) -> np.ndarray:
        self._check(n)
        if self.permutations is not None:
            order = self.permutations[rng.choice(len(self.weights), size=n_samples, p=self.weights)]
            pos = np.argsort(order, axis=1)
        else:
            groups = self.groups if self.groups is not None else [list(range(n))]
            pos = np.empty((n_samples, n), dtype=np.int64)
            start = 0
            for g in groups:
                g = np.asarray(g)
                pos[:, g] = start + np.argsort(rng.random((n_samples, len(g))), axis=1)
                start += len(g)
        return pos[:, None, :] < pos[:, :, None]

    def __repr__(self) -> str:
        if self.groups is not None:
            return f"RandomOrderValue(groups={self.groups})"
        if self.permutations is not None:
            return f"RandomOrderValue(permutations=<{len(self.permutations)} orders>)"
        return "RandomOrderValue()"


class ExplicitCoalitionStructure(CoalitionStructure):
    """Any coalition structure given as a table ``W[i, m] = p^i(S_m)`` (Eq. 2).

    Parameters
    ----------
    weights : array_like of shape (n, 2**n)
        Rows are distributions over :func:`all_coalitions` ``(n)`` with zero mass on coalitions
        containing the player. E.g. leave-one-out: ``W[i, full ^ (1 << i)] = 1``.

    Attributes
    ----------
    efficient, symmetric : bool
        The properties of Definition 3.8 (Eq. 8 and Eq. 9), checked on the table.

    Raises
    ------
    InvalidParameterError
        If the rows are not distributions or put mass on coalitions that contain their player.
    """

    name = "explicit"

    def __init__(self, weights):
        self.weights = np.asarray(weights, dtype=np.float64)
        n = self.weights.shape[0] if self.weights.ndim == 2 else 0
        ok = (self.weights.ndim == 2 and n >= 1 and self.weights.shape[1] == 2 ** n
              and np.all(np.isfinite(self.weights)) and np.all(self.weights >= 0)
              and np.allclose(self.weights.sum(axis=1), 1.0))
        check_param("ExplicitCoalitionStructure", "weights", f"array of shape {self.weights.shape}", ok,
                    "an array of shape (n, 2**n) of non-negative rows summing to one")
        masks = all_coalitions(n)
        if np.any(self.weights[masks.T]):
            raise InvalidParameterError(
                "ExplicitCoalitionStructure: p^i must put zero mass on coalitions that contain player i.")
        self.efficient = _is_efficient(self.weights)
        self.symmetric = _is_symmetric(self.weights)

    def player_weights(self, n: int) -> np.ndarray:
        check_param("ExplicitCoalitionStructure", "n_players", n, n == self.weights.shape[0],
                    f"{self.weights.shape[0]} (the size of the weight table)")
        return self.weights


def _is_efficient(W: np.ndarray, tol: float = 1e-9) -> bool:
    """Definition 3.8, Eq. 8."""
    n = W.shape[0]
    masks = all_coalitions(n)
    full = 2 ** n - 1
    if abs(sum(W[i, full ^ (1 << i)] for i in range(n)) - 1.0) > tol:
        return False
    for m in range(1, full):
        lhs = sum(W[i, m ^ (1 << i)] for i in range(n) if masks[m, i])
        rhs = sum(W[j, m] for j in range(n) if not masks[m, j])
        if abs(lhs - rhs) > tol:
            return False
    return True


def _is_symmetric(W: np.ndarray, tol: float = 1e-12) -> bool:
    """Definition 3.8, Eq. 9: weights depend only on |S|."""
    n = W.shape[0]
    masks = all_coalitions(n)
    size = masks.sum(axis=1)
    for k in range(n):
        vals = np.concatenate([W[i, (size == k) & ~masks[:, i]] for i in range(n)])
        if vals.size and np.ptp(vals) > tol:
            return False
    return True


def get_structure(structure) -> CoalitionStructure:
    """A :class:`CoalitionStructure` from a name (``"shapley"``, ``"banzhaf"``) or an instance.

    Raises
    ------
    InvalidParameterError
        For an unknown name or type.
    """
    if isinstance(structure, CoalitionStructure):
        return structure
    if isinstance(structure, str):
        key = structure.lower().replace("_", "-")
        table = {"shapley": Shapley, "banzhaf": Banzhaf, "random-order": RandomOrderValue}
        if key in table:
            return table[key]()
    raise InvalidParameterError(
        "The 'structure' parameter must be 'shapley', 'banzhaf', 'random-order' or a CoalitionStructure "
        f"(Semivalue, RandomOrderValue, ExplicitCoalitionStructure). Got {structure!r} instead.")


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


# ============================================================================ games
class StochasticGame:
    """An ``n``-player cooperative stochastic game with shared noise (paper 003, Definition 3.1).

    Parameters
    ----------
    payoff : callable
        ``payoff(coalitions)`` with ``coalitions`` a bool ndarray of shape (K, n) returns the natural
        parameters of the K payoffs, as the ``family`` expects: probabilities (K,) for Bernoulli,
        logits (K, d) for categorical, (mean, sd) rows (K, 2) for Gaussian.
    n_players : int >= 1
    family : PayoffFamily
    feature_names : sequence of str, optional
        One name per player (default ``"x0", "x1", …``).
    classes : sequence of str, optional
        Class names of a categorical game (default ``"0", "1", …``).

    Raises
    ------
    InvalidParameterError
        On a bad ``n_players``, ``family`` or name list.
    """

    def __init__(self, payoff: Callable[[np.ndarray], Any], n_players: int, family: PayoffFamily, *,
                 feature_names: Sequence[str] | None = None, classes: Sequence[str] | None = None):
        self.n_players = _check_n("StochasticGame", n_players)
        check_param("StochasticGame", "family", family, isinstance(family, PayoffFamily),
                    "a PayoffFamily (BernoulliFamily(), CategoricalFamily(d), GaussianFamily())")
        check_param("StochasticGame", "payoff", payoff, callable(payoff), "a callable coalitions -> parameters")
        self.payoff = payoff
        self.family = family
        names = [f"x{j}" for j in range(self.n_players)] if feature_names is None else [str(f) for f in feature_names]
        check_param("StochasticGame", "feature_names", feature_names, len(names) == self.n_players,
                    f"a sequence of {self.n_players} names (one per player)")
        self.feature_names = names
        if isinstance(family, CategoricalFamily):
            cl = [str(c) for c in range(family.n_classes)] if classes is None else [str(c) for c in classes]
            check_param("StochasticGame", "classes", classes, len(cl) == family.n_classes,
                        f"a sequence of {family.n_classes} class names")
        elif isinstance(family, BernoulliFamily):
            cl = ["0", "1"] if classes is None else [str(c) for c in classes]
            check_param("StochasticGame", "classes", classes, len(cl) == 2, "two class names (failure, success)")
        else:
            cl = []
        self.classes = cl

    def params(self, coalitions) -> np.ndarray:
        """Validated natural parameters of the payoffs of ``coalitions`` (bool, shape (K, n)).

        Raises
        ------
        InvalidInputError
            If ``coalitions`` is not a (K, n) boolean array or the payoff returns bad parameters.
        """
        c = np.asarray(coalitions)
        if c.ndim != 2 or c.shape[1] != self.n_players or not (c.dtype == bool or np.isin(c, (0, 1)).all()):
            raise InvalidInputError(
                f"Coalitions must be a boolean array of shape (K, {self.n_players}); got shape {c.shape}, dtype {c.dtype}.")
        c = c.astype(bool)
        return self.family.check_params(self.payoff(c), c.shape[0])

    def expectation(self, coalitions) -> np.ndarray:
        """The expectation game ``u(S) = E_ε[v(S, ε)]`` (Prop. 3.9(i))."""
        return self.family.expectation(self.params(coalitions))

    def sample(self, coalitions, noise) -> np.ndarray:
        """``v(S, ε)`` for every coalition and every shared noise draw; shape (K, n_draws)."""
        return self.family.realise(self.params(coalitions), noise)

    def __repr__(self) -> str:
        return f"StochasticGame(n_players={self.n_players}, family={self.family.name})"


def table_game(payoffs, family: PayoffFamily | str, n_players: int | None = None, **kwargs) -> StochasticGame:
    """A game given by a table of payoff parameters, one per coalition.

    Parameters
    ----------
    payoffs : mapping or array_like
        Either a mapping ``{coalition: params}`` with coalitions as iterables of player indices
        (every coalition must appear), or an array whose first axis runs over the ``2**n``
        coalitions of :func:`all_coalitions` (bit ``j`` of the row index = player ``j``).
    family : PayoffFamily or {"bernoulli", "gaussian"} or "categorical"
    n_players : int, optional
        Required with a mapping unless inferable from the largest coalition.
    **kwargs
        Passed to :class:`StochasticGame` (``feature_names``, ``classes``).

    Examples
    --------
    The XOR game of Example 3.5:

    >>> g = table_game({(): 0.0, (0,): 1.0, (1,): 1.0, (0, 1): 0.0}, "bernoulli")
    >>> distributional_value(g).pmf().tolist()
    [[0.5, 0.0, 0.5], [0.5, 0.0, 0.5]]
    """
    if isinstance(payoffs, Mapping):
        keys = [tuple(sorted(int(j) for j in k)) for k in payoffs]
        if n_players is None:
            n_players = 1 + max((max(k) for k in keys if k), default=0)
        n = _check_n("table_game", n_players)
        table: list[Any] = [None] * (2 ** n)
        for k, v in zip(keys, payoffs.values()):
            if any(j < 0 or j >= n for j in k):
                raise InvalidInputError(f"table_game: coalition {k} has players outside 0..{n - 1}.")
            table[sum(1 << j for j in set(k))] = v
        missing = [m for m, v in enumerate(table) if v is None]
        if missing:
            raise InvalidInputError(
                f"table_game: {len(missing)} coalitions have no payoff (e.g. bit mask {missing[0]}); give all 2**n.")
        arr = np.asarray(table, dtype=np.float64)
    else:
        arr = np.asarray(payoffs, dtype=np.float64)
        n = int(round(math.log2(arr.shape[0]))) if arr.ndim >= 1 and arr.shape[0] > 0 else -1
        if n < 0 or 2 ** n != arr.shape[0] or (n_players is not None and n != n_players):
            raise InvalidInputError(f"table_game: the first axis must have 2**n_players rows; got shape {arr.shape}.")
    if isinstance(family, str):
        fam = {"bernoulli": BernoulliFamily, "gaussian": GaussianFamily}.get(family)
        if family == "categorical":
            fam = lambda: CategoricalFamily(arr.shape[1])  # noqa: E731
        if fam is None:
            raise InvalidParameterError(f"table_game: unknown family {family!r}; use 'bernoulli', 'categorical', 'gaussian'.")
        family = fam()
    bits = 1 << np.arange(n)

    def payoff(c):
        return arr[(c.astype(np.int64) * bits).sum(axis=1)]

    return StochasticGame(payoff, n, family, **kwargs)


# ============================================================================ values
@dataclass
class DiscreteDistributionalValue:
    """Distributional value of a Bernoulli or categorical game (paper 003, Eq. 5 and Eq. 7).

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


def _pack_unique(masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Deduplicate boolean rows; returns (unique rows, inverse index)."""
    packed = np.packbits(masks, axis=1)
    _, first, inv = np.unique(packed, axis=0, return_index=True, return_inverse=True)
    return masks[first], inv.reshape(-1)


def distributional_value(game: StochasticGame, structure="shapley", *, method: str = "auto",
                         n_samples: int = 2000, random_state=None, max_exact_players: int = 16,
                         chunk: int = 65536):
    """Distributional value of every player (paper 003, Definition 3.3, Eq. 5 and Eq. 7).

    Marginal contributions are analytic given the shared noise (Sec. 3.1); the remaining average
    over coalitions ``S ~ p^i`` is exact or Monte Carlo.

    Parameters
    ----------
    game : StochasticGame
    structure : str or CoalitionStructure
        ``"shapley"`` (default), ``"banzhaf"``, ``"random-order"`` or an instance of
        :class:`Semivalue`, :class:`RandomOrderValue`, :class:`ExplicitCoalitionStructure`.
    method : {"auto", "exact", "monte-carlo"}
        ``"exact"`` enumerates all ``2^n`` coalitions (one payoff evaluation each); ``"monte-carlo"``
        draws ``n_samples`` coalition samples shared across players (permutations for random-order
        values, size + permutation for semivalues: ``n + 1`` evaluations per sample) and reports
        standard errors. ``"auto"`` = exact if ``n <= 12``.
    n_samples : int >= 2
        Monte Carlo samples.
    random_state : None, int or numpy.random.Generator
    max_exact_players : int
        Refuse exact enumeration above this many players.
    chunk : int
        Coalition pairs per vectorised block of the closed-form tables (memory ``chunk · d²``,
        capped at 2^22 table entries).

    Returns
    -------
    DiscreteDistributionalValue or GaussianDistributionalValue

    Raises
    ------
    InvalidParameterError
        On an unknown ``method`` / ``structure`` or bad ``n_samples``.
    BudgetError
        If exact enumeration is asked for more than ``max_exact_players`` players.
    InvalidInputError
        If the game returns bad payoff parameters.

    Examples
    --------
    >>> g = table_game({(): 0.2, (0,): 0.2, (1,): 0.7, (0, 1): 0.7}, "bernoulli")  # player 0 null
    >>> v = distributional_value(g)
    >>> v.pmf().round(3).tolist()
    [[0.0, 1.0, 0.0], [0.0, 0.5, 0.5]]
    """
    check_param("distributional_value", "game", game, isinstance(game, StochasticGame), "a StochasticGame")
    struct = get_structure(structure)
    check_param("distributional_value", "method", method, method in ("auto", "exact", "monte-carlo"),
                "one of 'auto', 'exact', 'monte-carlo'")
    n = game.n_players
    if method == "auto":
        method = "exact" if n <= 12 else "monte-carlo"
    rng = np.random.default_rng(random_state)
    fam = game.family
    if method == "exact":
        if n > max_exact_players:
            raise BudgetError(
                f"Exact distributional values enumerate 2**{n} coalitions; the limit is max_exact_players="
                f"{max_exact_players}. Use method='monte-carlo' with n_samples, or raise the limit.")
        masks = all_coalitions(n)
        W = struct.player_weights(n)
        if W.shape != (n, 2 ** n):
            raise InvalidParameterError(f"{struct!r} returned weights of shape {W.shape}; expected {(n, 2 ** n)}.")
        params = game.params(masks)
        players, without, with_, weight = [], [], [], []
        for i in range(n):
            m = np.flatnonzero(W[i] > 0)
            players.append(np.full(m.size, i))
            without.append(m)
            with_.append(m | (1 << i))
            weight.append(W[i, m])
        player = np.concatenate(players)
        wo = np.concatenate(without)
        wi = np.concatenate(with_)
        wt = np.concatenate(weight)
        sample = None
        T = None
        empty_idx, full_idx = 0, 2 ** n - 1
        estimator = "exact"
    else:
        check_param("distributional_value", "n_samples", n_samples,
                    isinstance(n_samples, (int, np.integer)) and n_samples >= 2, "an int >= 2")
        T = int(n_samples)
        S = struct.sample_coalitions(n, T, rng)
        Sw = S.copy()
        idx = np.arange(n)
        Sw[:, idx, idx] = True
        extra = np.stack([np.zeros(n, bool), np.ones(n, bool)])
        allm = np.concatenate([S.reshape(-1, n), Sw.reshape(-1, n), extra])
        uniq, inv = _pack_unique(allm)
        params = game.params(uniq)
        wo = inv[: T * n]
        wi = inv[T * n: 2 * T * n]
        empty_idx, full_idx = inv[-2], inv[-1]
        player = np.tile(idx, T)
        sample = np.repeat(np.arange(T), n)
        wt = np.full(T * n, 1.0 / T)
        estimator = "monte-carlo"
    base = fam.expectation(params[[empty_idx]])[0]
    pred = fam.expectation(params[[full_idx]])[0]
    common = dict(structure=struct.name, estimator=estimator, n_samples=T, efficient=bool(struct.efficient))
    if fam.discrete:
        return _aggregate_discrete(game, params, wo, wi, player, wt, sample, T, n, chunk, base, pred, common)
    return _aggregate_gaussian(game, params, wo, wi, player, wt, T, n, base, pred, common)


_TABLE_BUDGET = 2 ** 22  # table entries per vectorised block (32 MiB of float64)


def _aggregate_discrete(game, params, wo, wi, player, wt, sample, T, n, chunk, base, pred, common):
    """Stream the closed-form tables of the distinct coalition pairs into per-player sums.

    Each distinct pair (S, S ∪ i) determines its player; its weight is ``p^i(S)`` (exact) or its
    multiplicity / T (Monte Carlo, one pair per player per sample), so first and second moments
    over samples are weighted sums of the tables and of their squares. Memory stays bounded by
    ``_TABLE_BUDGET`` whatever the number of pairs or classes.
    """
    fam = game.family
    d = fam.n_classes
    U = params.shape[0]
    key = wo.astype(np.int64) * U + wi.astype(np.int64)
    ukey, first, counts = np.unique(key, return_index=True, return_counts=True)
    uo, uw = ukey // U, ukey % U
    uplayer = player[first]
    uweight = wt[first] * counts
    step = max(1, min(int(chunk), _TABLE_BUDGET // (d * d)))
    s1 = np.zeros((n, d * d))
    s2 = np.zeros((n, d * d)) if T is not None else None
    m2 = np.zeros((n, d)) if T is not None else None
    for a in range(0, ukey.size, step):
        b = min(a + step, ukey.size)
        tabs = fam.pair_joint(params[uw[a:b]], params[uo[a:b]]).reshape(b - a, d * d)
        onehot = np.zeros((n, b - a))
        onehot[uplayer[a:b], np.arange(b - a)] = uweight[a:b]
        s1 += onehot @ tabs
        if T is not None:
            s2 += onehot @ tabs ** 2
            t3 = tabs.reshape(-1, d, d)
            m2 += onehot @ (t3.sum(axis=1) - t3.sum(axis=2)) ** 2
    trans = s1.reshape(n, d, d)
    stderr = mean_se = None
    if T is not None:
        var = np.maximum(s2 - s1 ** 2, 0.0) * T / (T - 1)
        stderr = np.sqrt(var / T).reshape(n, d, d)
        mv = trans.sum(axis=1) - trans.sum(axis=2)
        mean_se = np.sqrt(np.maximum(m2 - mv ** 2, 0.0) * T / (T - 1) / T)
    if fam.name == "bernoulli":
        base_d = np.array([1 - base, base])
        pred_d = np.array([1 - pred, pred])
    else:
        base_d, pred_d = base, pred
    return DiscreteDistributionalValue(
        transition=trans, family=fam.name, classes=list(game.classes), feature_names=list(game.feature_names),
        stderr=stderr, mean_stderr=mean_se, base=base_d, prediction=pred_d, **common)


def _aggregate_gaussian(game, params, wo, wi, player, wt, T, n, base, pred, common):
    dmu = params[wi, 0] - params[wo, 0]
    dsd = params[wi, 1] - params[wo, 1]
    counts = np.bincount(player, minlength=n)
    M = int(counts.max())
    W = np.zeros((n, M))
    L = np.zeros((n, M))
    Sc = np.zeros((n, M))
    Sg = np.zeros((n, M), dtype=np.int8)
    for i in range(n):
        sel = np.flatnonzero(player == i)
        k = sel.size
        W[i, :k] = wt[sel]
        L[i, :k] = dmu[sel]
        Sc[i, :k] = np.abs(dsd[sel])
        Sg[i, :k] = np.sign(dsd[sel]).astype(np.int8)
    return GaussianDistributionalValue(
        weights=W, loc=L, scale=Sc, sign=Sg, feature_names=list(game.feature_names),
        base=np.array([base, _sd_of(game, False)]), prediction=np.array([pred, _sd_of(game, True)]), **common)


def _sd_of(game: StochasticGame, full: bool) -> float:
    c = np.full((1, game.n_players), full, dtype=bool)
    return float(game.params(c)[0, 1])


def standard_value(game_fn: Callable[[np.ndarray], np.ndarray], n_players: int, structure="shapley") -> np.ndarray:
    """Standard value ``φ_i(u) = Σ_S p^i(S) [u(S ∪ i) − u(S)]`` by enumeration (Eq. 2).

    The scalar (or vector) oracle the distributional values are checked against (Prop. 3.9(i)).

    Parameters
    ----------
    game_fn : callable
        ``u(coalitions (K, n) bool) -> (K,)`` or ``(K, d)``.
    n_players : int
    structure : str or CoalitionStructure

    Returns
    -------
    ndarray of shape (n,) or (n, d)
    """
    n = _check_n("standard_value", n_players)
    W = get_structure(structure).player_weights(n)
    masks = all_coalitions(n)
    u = np.asarray(game_fn(masks), dtype=np.float64)
    if u.shape[0] != 2 ** n:
        raise InvalidInputError(f"standard_value: the game returned {u.shape[0]} payoffs for {2 ** n} coalitions.")
    out = []
    for i in range(n):
        m = np.arange(2 ** n)
        diff = u[m | (1 << i)] - u[m]
        out.append(np.tensordot(W[i], diff, axes=1))
    return np.array(out)


def sampled_value(game: StochasticGame, structure="shapley", *, n_draws: int = 10000, random_state=None,
                  independent_noise: bool = False, chunk: int = 4096) -> DiscreteDistributionalValue:
    """Distributional value estimated from samples of ``v(S, ε)`` with shared noise (Def. 3.1).

    The generic estimator when only a sampler is available (Sec. 3.1, first paragraph: "set the
    same random seed"): ``n_draws`` noise draws, each applied to *every* coalition, exact average
    over the coalition structure. With ``independent_noise=True`` each coalition gets its own
    noise — the uncoupled construction Remark 3.6 warns against (kept to demonstrate it).

    Parameters
    ----------
    game : StochasticGame
        Bernoulli or categorical.
    structure : str or CoalitionStructure
    n_draws : int >= 2
    random_state : None, int or numpy.random.Generator
    independent_noise : bool
    chunk : int
        Noise draws per vectorised block (capped so a block holds at most 2^22 outcomes/table entries).

    Returns
    -------
    DiscreteDistributionalValue
        ``estimator="shared-noise-sampling"`` (or ``"independent-noise-sampling"``), ``stderr`` from
        the spread over noise draws.

    Raises
    ------
    InvalidParameterError
        For a Gaussian game or bad ``n_draws``.
    """
    check_param("sampled_value", "game", game, isinstance(game, StochasticGame) and game.family.discrete,
                "a Bernoulli or categorical StochasticGame")
    check_param("sampled_value", "n_draws", n_draws, isinstance(n_draws, (int, np.integer)) and n_draws >= 2,
                "an int >= 2")
    struct = get_structure(structure)
    rng = np.random.default_rng(random_state)
    n = game.n_players
    if n > 16:
        raise BudgetError(f"sampled_value enumerates 2**{n} coalitions; use at most 16 players.")
    masks = all_coalitions(n)
    W = struct.player_weights(n)
    params = game.params(masks)
    fam = game.family
    d = fam.n_classes
    pairs = []
    for i in range(n):
        m = np.flatnonzero(W[i] > 0)
        pairs.append((m, m | (1 << i), W[i, m]))
    s1 = np.zeros((n, d * d))
    s2 = np.zeros((n, d * d))
    s_mean = np.zeros((n, d))
    s_mean2 = np.zeros((n, d))
    done = 0
    step = max(1, min(int(chunk), _TABLE_BUDGET // max(d * d, (2 ** n) * d)))  # bounded memory per block
    while done < n_draws:
        b = min(step, n_draws - done)
        if independent_noise:
            O = np.stack([fam.realise(params[[m]], fam.draw_noise(rng, b))[0] for m in range(2 ** n)])
        else:
            O = fam.realise(params, fam.draw_noise(rng, b))  # (2^n, b)
        for i, (mo, mw, w) in enumerate(pairs):
            code = O[mo] * d + O[mw]  # (M, b): from * d + to
            rows = code + (np.arange(b) * d * d)[None, :]
            Y = np.bincount(rows.ravel(), weights=np.repeat(w, b), minlength=b * d * d).reshape(b, d * d)
            s1[i] += Y.sum(axis=0)
            s2[i] += (Y ** 2).sum(axis=0)
            Yt = Y.reshape(b, d, d)
            mv = Yt.sum(axis=1) - Yt.sum(axis=2)
            s_mean[i] += mv.sum(axis=0)
            s_mean2[i] += (mv ** 2).sum(axis=0)
        done += b
    N = float(n_draws)
    trans = (s1 / N).reshape(n, d, d)
    var = np.maximum(s2 / N - (s1 / N) ** 2, 0.0) * N / (N - 1)
    mvar = np.maximum(s_mean2 / N - (s_mean / N) ** 2, 0.0) * N / (N - 1)
    base = fam.expectation(params[[0]])[0]
    pred = fam.expectation(params[[2 ** n - 1]])[0]
    if fam.name == "bernoulli":
        base, pred = np.array([1 - base, base]), np.array([1 - pred, pred])
    return DiscreteDistributionalValue(
        transition=trans, family=fam.name, classes=list(game.classes), feature_names=list(game.feature_names),
        structure=struct.name, estimator="independent-noise-sampling" if independent_noise else "shared-noise-sampling",
        n_samples=int(n_draws), stderr=np.sqrt(var / N).reshape(n, d, d), mean_stderr=np.sqrt(mvar / N),
        base=base, prediction=pred, efficient=bool(struct.efficient))


# ============================================================================ games from models
def _as_vector(x, name: str, owner: str, d: int | None = None) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{owner}: {name} must be a numeric array.") from None
    if a.ndim != 1 or (d is not None and a.shape[0] != d):
        raise InvalidInputError(f"{owner}: {name} must have shape ({d if d is not None else 'd'},); got {a.shape}.")
    if not np.all(np.isfinite(a)):
        raise InvalidInputError(f"{owner}: {name} contains NaN or inf.")
    return a


def masked_inputs(x, reference, coalitions) -> np.ndarray:
    """Baseline/reference removal: features outside the coalition take the reference value.

    ``[x_S]_j = x_j`` if ``j ∈ S`` else ``reference_j`` (paper 003, Eq. 1 with a reference instead
    of 0; the "reference (background) strategy" of the paper's experiments).

    Parameters
    ----------
    x : array_like of shape (d,) or (k, d)
        The explained input (one item, or the ``k`` items of a choice set).
    reference : array_like broadcastable to ``x``
        Reference values (zeros, a mean, a baseline item).
    coalitions : bool ndarray of shape (K, d)

    Returns
    -------
    ndarray of shape (K, d) or (K, k, d)

    Examples
    --------
    >>> masked_inputs([1.0, 2.0], [0.0, 0.0], np.array([[True, False]])).tolist()
    [[1.0, 0.0]]
    """
    x = np.asarray(x, dtype=np.float64)
    ref = np.broadcast_to(np.asarray(reference, dtype=np.float64), x.shape)
    c = np.asarray(coalitions, dtype=bool)
    if c.ndim != 2 or c.shape[1] != x.shape[-1]:
        raise InvalidInputError(f"masked_inputs: coalitions must have shape (K, {x.shape[-1]}); got {c.shape}.")
    if x.ndim == 1:
        return np.where(c, x[None, :], ref[None, :])
    return np.where(c[:, None, :], x[None], ref[None])


def pairwise_margin_value_function(margin: Callable[[np.ndarray, np.ndarray], np.ndarray], x_left, x_right,
                                   reference=None) -> Callable[[np.ndarray], np.ndarray]:
    """Coalition value function ``ν(S) = g(x_left,S, x_right,S)`` from any batched margin.

    Removed features take the *same* reference value in both items, so they cannot discriminate
    between them. Use it for capacity/UPM/linear margins; feed the result to
    :func:`bernoulli_preference_game` (``P(left preferred | S) = σ(ν(S))``).

    Parameters
    ----------
    margin : callable
        ``margin(X_left (K, d), X_right (K, d)) -> (K,)`` — the preference margin ``g`` (> 0 means
        the left item is preferred).
    x_left, x_right : array_like of shape (d,)
    reference : array_like of shape (d,), optional
        Default: the midpoint ``(x_left + x_right) / 2``.

    Returns
    -------
    callable
        ``nu(coalitions (K, d) bool) -> ndarray (K,)``.

    Examples
    --------
    >>> w = np.array([1.0, -2.0])
    >>> nu = pairwise_margin_value_function(lambda L, R: (L - R) @ w, [1.0, 1.0], [0.0, 0.0])
    >>> nu(all_coalitions(2)).tolist()
    [0.0, 1.0, -2.0, -1.0]
    """
    xl = _as_vector(x_left, "x_left", "pairwise_margin_value_function")
    xr = _as_vector(x_right, "x_right", "pairwise_margin_value_function", xl.shape[0])
    ref = (xl + xr) / 2 if reference is None else _as_vector(reference, "reference",
                                                             "pairwise_margin_value_function", xl.shape[0])
    check_param("pairwise_margin_value_function", "margin", margin, callable(margin), "a callable")

    def nu(coalitions):
        return np.asarray(margin(masked_inputs(xl, ref, coalitions), masked_inputs(xr, ref, coalitions)),
                          dtype=np.float64).reshape(-1)

    return nu


def learner_margin_value_function(learner, x_left: Mapping[str, float], x_right: Mapping[str, float],
                                  reference: Mapping[str, float] | None = None, context=None):
    """:func:`pairwise_margin_value_function` for a :class:`learners.base.PreferenceLearner`.

    Uses only the learner contract (``feature_names``, ``margin_one``), one call per coalition.

    Parameters
    ----------
    learner : object with ``feature_names`` and ``margin_one(x_left, x_right, context)``
    x_left, x_right : dict
        Feature name → value.
    reference : dict, optional
        Default: the midpoint of the two items.
    context : dict, optional
        Passed through to ``margin_one``.

    Returns
    -------
    callable ``nu(coalitions (K, d) bool) -> (K,)``
    """
    names = list(learner.feature_names)

    def vec(x, what):
        try:
            return np.array([float(x[f]) for f in names])
        except KeyError as exc:
            raise InvalidInputError(f"learner_margin_value_function: {what} lacks feature {exc.args[0]!r}.") from None

    xl, xr = vec(x_left, "x_left"), vec(x_right, "x_right")
    ref = (xl + xr) / 2 if reference is None else vec(reference, "reference")

    def margin(L, R):
        return np.array([learner.margin_one(dict(zip(names, map(float, a))), dict(zip(names, map(float, b))),
                                            context) for a, b in zip(L, R)])

    return pairwise_margin_value_function(margin, xl, xr, ref)


def _expit(x):
    from scipy.special import expit

    return expit(x)


def bernoulli_preference_game(nu: Callable[[np.ndarray], np.ndarray], n_players: int, *, output: str = "margin",
                              feature_names: Sequence[str] | None = None,
                              classes: Sequence[str] = ("right preferred", "left preferred")) -> StochasticGame:
    """Bernoulli preference game ``v(S) = Ber(σ(ν_S))`` (paper 003 Sec. 3.1 on a preference model).

    ``ν`` is any coalition value function of a preference margin: the Pref-SHAP value function of a
    GPM / C-GPM (paper 000), or :func:`pairwise_margin_value_function` around a capacity/UPM margin.
    The distributional value then says with what probability feature ``i`` flips who is preferred.

    Parameters
    ----------
    nu : callable
        ``nu(coalitions (K, d) bool) -> (K,)``: margins (``output="margin"``, any real) or
        probabilities that the left item is preferred (``output="probability"``).
    n_players : int
    output : {"margin", "probability"}
    feature_names : sequence of str, optional
    classes : pair of str
        Names of outcome 0 and outcome 1 (1 = left preferred).

    Returns
    -------
    StochasticGame
        Bernoulli family; ``params`` are ``σ(ν_S)``.

    Raises
    ------
    InvalidParameterError
        For an unknown ``output``.
    InvalidInputError
        (at evaluation) if ``nu`` returns the wrong shape or non-finite margins.
    """
    check_param("bernoulli_preference_game", "output", output, output in ("margin", "probability"),
                "'margin' or 'probability'")
    check_param("bernoulli_preference_game", "nu", nu, callable(nu), "a callable coalitions -> (K,) values")

    def payoff(c):
        v = np.asarray(nu(c), dtype=np.float64)
        if v.shape not in ((c.shape[0],), (c.shape[0], 1)):
            raise InvalidInputError(
                f"The coalition value function must return shape ({c.shape[0]},) for {c.shape[0]} coalitions; "
                f"got {v.shape}.")
        v = v.reshape(-1)
        if output == "margin":
            if np.any(np.isnan(v)):
                raise InvalidInputError("The coalition value function returned NaN margins.")
            return _expit(v)
        return v

    return StochasticGame(payoff, n_players, BernoulliFamily(), feature_names=feature_names, classes=classes)


def categorical_choice_game(utilities: Callable[[np.ndarray], np.ndarray], items, reference=None, *,
                            feature_names: Sequence[str] | None = None, item_names: Sequence[str] | None = None,
                            temperature: float = 1.0, batched: bool = False) -> StochasticGame:
    """Categorical game of a choice among ``k`` shown items (e.g. a click session).

    ``v(S) = Cat(softmax(u(X_S) / τ))`` where ``X_S`` keeps the features in ``S`` of every shown
    item and sets the others to the reference (:func:`masked_inputs`). The players are the ``d``
    features; the classes are the ``k`` items (paper 003, Sec. 3.1, categorical games).

    Parameters
    ----------
    utilities : callable
        ``utilities(X (k, d)) -> (k,)`` utilities (logits) of the shown items; with
        ``batched=True``, ``utilities(X (K, k, d)) -> (K, k)``.
    items : array_like of shape (k, d)
        Features of the shown items, ``k >= 2``.
    reference : array_like of shape (d,) or (k, d), optional
        Default: the mean of the shown items (a removed feature no longer tells them apart).
    feature_names, item_names : sequence of str, optional
    temperature : float > 0
    batched : bool

    Returns
    -------
    StochasticGame
        Categorical family with ``k`` classes (Bernoulli-equivalent when ``k = 2``).

    Raises
    ------
    InvalidInputError
        If ``items`` is not a finite (k, d) array with ``k >= 2``.
    """
    X = np.asarray(items, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] < 2 or not np.all(np.isfinite(X)):
        raise InvalidInputError(
            f"categorical_choice_game: items must be a finite array of shape (k, d) with k >= 2 shown items; got {X.shape}.")
    k, d = X.shape
    ref = X.mean(axis=0) if reference is None else np.asarray(reference, dtype=np.float64)
    try:
        ref = np.broadcast_to(ref, X.shape)
    except ValueError:
        raise InvalidInputError(f"categorical_choice_game: reference must have shape ({d},) or ({k}, {d}); "
                                f"got {np.shape(reference)}.") from None
    if not np.all(np.isfinite(ref)):
        raise InvalidInputError("categorical_choice_game: reference contains NaN or inf.")
    check_param("categorical_choice_game", "temperature", temperature,
                isinstance(temperature, (int, float)) and temperature > 0 and math.isfinite(temperature), "a float > 0")
    check_param("categorical_choice_game", "utilities", utilities, callable(utilities), "a callable")

    def payoff(c):
        Xs = masked_inputs(X, ref, c)  # (K, k, d)
        if batched:
            u = np.asarray(utilities(Xs), dtype=np.float64)
        else:
            u = np.stack([np.asarray(utilities(xs), dtype=np.float64).reshape(-1) for xs in Xs])
        if u.shape != (c.shape[0], k):
            raise InvalidInputError(f"utilities must return one utility per shown item ({k}); got shape {u.shape}.")
        return u / temperature

    names = item_names if item_names is not None else [f"item{j}" for j in range(k)]
    return StochasticGame(payoff, d, CategoricalFamily(k), feature_names=feature_names, classes=names)


def gaussian_utility_game(predict: Callable[[np.ndarray], tuple], x, reference, *,
                          feature_names: Sequence[str] | None = None) -> StochasticGame:
    """Gaussian game ``v(S) = N(μ(x_S), s²(x_S))`` for a utility with predictive variance.

    Parameters
    ----------
    predict : callable
        ``predict(X (K, d)) -> (mean (K,), variance (K,))``, e.g. a GP / Bayesian linear utility.
    x, reference : array_like of shape (d,)
        Explained input and reference (:func:`masked_inputs`).
    feature_names : sequence of str, optional

    Returns
    -------
    StochasticGame
        Gaussian family with parameters ``(μ, sqrt(variance))``.
    """
    xv = _as_vector(x, "x", "gaussian_utility_game")
    rv = _as_vector(reference, "reference", "gaussian_utility_game", xv.shape[0])
    check_param("gaussian_utility_game", "predict", predict, callable(predict), "a callable X -> (mean, variance)")

    def payoff(c):
        out = predict(masked_inputs(xv, rv, c))
        try:
            mu, var = (np.asarray(a, dtype=np.float64).reshape(-1) for a in out)
        except (TypeError, ValueError):
            raise InvalidInputError("predict must return a pair (mean (K,), variance (K,)).") from None
        if mu.shape != (c.shape[0],) or var.shape != (c.shape[0],):
            raise InvalidInputError(f"predict must return mean and variance of shape ({c.shape[0]},).")
        if np.any(var < 0):
            raise InvalidInputError("predict returned a negative variance.")
        return np.stack([mu, np.sqrt(var)], axis=1)

    return StochasticGame(payoff, xv.shape[0], GaussianFamily(), feature_names=feature_names)


def reference_game(model: Callable[[np.ndarray], np.ndarray], x, reference, *, family: str = "categorical",
                   output: str = "probability", feature_names: Sequence[str] | None = None,
                   classes: Sequence[str] | None = None) -> StochasticGame:
    """Stochastic game of any probabilistic model with baseline/reference removal.

    ``v(S)`` is the model's output distribution at ``x_S`` (:func:`masked_inputs`). With a
    background set as reference (shape (m, d)), the payoff is the model's distribution averaged
    over the background (probabilities averaged, the interventional expectation), which is itself
    a Bernoulli/categorical distribution.

    Parameters
    ----------
    model : callable
        ``model(X (K, d)) -> (K,)`` (binary: probability or logit of class 1) or ``(K, c)``
        (class probabilities or logits).
    x : array_like of shape (d,)
    reference : array_like of shape (d,) or (m, d)
    family : {"categorical", "bernoulli"}
    output : {"probability", "logits"}
    feature_names, classes : sequence of str, optional

    Returns
    -------
    StochasticGame

    Raises
    ------
    InvalidParameterError
        For an unknown ``family`` / ``output``.
    InvalidInputError
        For inputs of the wrong shape or model outputs that are not distributions.
    """
    check_param("reference_game", "family", family, family in ("categorical", "bernoulli"), "'categorical' or 'bernoulli'")
    check_param("reference_game", "output", output, output in ("probability", "logits"), "'probability' or 'logits'")
    xv = _as_vector(x, "x", "reference_game")
    R = np.asarray(reference, dtype=np.float64)
    if R.ndim == 1:
        R = R[None, :]
    if R.ndim != 2 or R.shape[1] != xv.shape[0] or not np.all(np.isfinite(R)):
        raise InvalidInputError(f"reference_game: reference must be finite with shape ({xv.shape[0]},) or (m, {xv.shape[0]}); "
                                f"got {np.shape(reference)}.")
    m, d = R.shape

    def probs(c):
        K = c.shape[0]
        Xs = np.where(c[:, None, :], xv[None, None, :], R[None, :, :]).reshape(K * m, d)
        out = np.asarray(model(Xs), dtype=np.float64)
        if out.ndim == 1 or (out.ndim == 2 and out.shape[1] == 1 and family == "bernoulli"):
            out = out.reshape(-1)
            if out.shape != (K * m,):
                raise InvalidInputError(f"model returned shape {out.shape} for {K * m} inputs.")
            p1 = _expit(out) if output == "logits" else out
            P = np.stack([1 - p1, p1], axis=1)
        else:
            if out.ndim != 2 or out.shape[0] != K * m:
                raise InvalidInputError(f"model returned shape {out.shape} for {K * m} inputs; expected ({K * m}, c).")
            if output == "logits":
                z = np.exp(out - out.max(axis=1, keepdims=True))
                P = z / z.sum(axis=1, keepdims=True)
            else:
                P = out
        if not np.all(np.isfinite(P)) or np.any(P < -1e-12) or not np.allclose(P.sum(axis=1), 1.0, atol=1e-6):
            raise InvalidInputError("reference_game: the model output is not a probability distribution per row "
                                    "(use output='logits' for unnormalised scores).")
        return np.clip(P, 0.0, 1.0).reshape(K, m, -1).mean(axis=1)

    if family == "bernoulli":
        def payoff(c):
            P = probs(c)
            if P.shape[1] != 2:
                raise InvalidInputError(f"A Bernoulli reference game needs 2 classes; the model returned {P.shape[1]}.")
            return P[:, 1]

        return StochasticGame(payoff, d, BernoulliFamily(), feature_names=feature_names, classes=classes)

    n_cls = probs(np.zeros((1, d), dtype=bool)).shape[1]
    if n_cls < 2:
        raise InvalidInputError(f"reference_game: the model returned {n_cls} class; a categorical game needs >= 2.")

    def payoff(c):
        return np.log(np.maximum(probs(c), _TINY))

    return StochasticGame(payoff, d, CategoricalFamily(n_cls),
                          feature_names=feature_names, classes=classes)


# ============================================================================ results
_METHOD = {"bernoulli": "distributional-bernoulli", "categorical": "distributional-categorical",
           "gaussian": "distributional-gaussian"}


def to_explanation(value, *, target=None, model_name: str = "", model_version: int = 0, data=None,
                   instance_id: str | None = None, compute_time: float = 0.0, include_transitions: bool = True,
                   include_components: bool = False) -> Explanation:
    """Wrap a distributional value in the common :class:`~explainers._result.Explanation`.

    ``values`` is the mean of the distributional value — the standard value of the expectation
    game (Prop. 3.9(i)) — so ``base + Σ values = prediction`` holds whenever the coalition
    structure is efficient (Shapley, random-order values; Prop. 3.9(iv) and Definition 3.8), not
    for Banzhaf or other non-efficient semivalues. Per-player distributions go to ``extra``
    (plain lists, JSON-serialisable).

    * Bernoulli: ``values[i] = q_i⁺ − q_i⁻``; base/prediction = success probability of ``∅`` / ``[n]``.
    * Categorical: ``values[i]`` is the mean for the ``target`` class (default: the class most
      probable for the grand coalition, e.g. pass the clicked item); ``extra["mean"]`` has all
      classes, ``extra["transition"][i][s][r]`` the from-``s``-to-``r`` table.
    * Gaussian: ``values[i]`` = mean of the mixture; base/prediction = ``μ_∅`` / ``μ_[n]``.

    Parameters
    ----------
    value : DiscreteDistributionalValue or GaussianDistributionalValue
    target : int or str, optional
        Class whose mean is put in ``values`` (categorical only).
    model_name, model_version, data, instance_id, compute_time :
        Passed to :class:`Explanation`.
    include_transitions : bool
        Put the full (n, k, k) tables in ``extra`` (categorical).
    include_components : bool
        Put the Gaussian mixture components in ``extra``.

    Returns
    -------
    Explanation
    """
    ids = None if instance_id is None else [str(instance_id)]
    if isinstance(value, GaussianDistributionalValue):
        extra = value.to_dict(include_components=include_components)
        return Explanation(values=value.mean(), base_values=float(value.base[0]), prediction=float(value.prediction[0]),
                           feature_names=value.feature_names, method=_METHOD["gaussian"], model_name=model_name,
                           model_version=model_version, data=data, instance_ids=ids, compute_time=compute_time,
                           extra=extra)
    if not isinstance(value, DiscreteDistributionalValue):
        raise InvalidInputError(f"to_explanation expects a distributional value; got {type(value).__name__}.")
    extra = value.to_dict()
    if value.family == "bernoulli":
        pmf = value.pmf()
        extra.update({"support": [-1, 0, 1], "pmf": pmf.tolist(), "q_minus": pmf[:, 0].tolist(),
                      "q_plus": pmf[:, 2].tolist()})
        if not include_transitions:
            extra.pop("transition")
        return Explanation(values=value.mean(), base_values=float(value.base[1]), prediction=float(value.prediction[1]),
                           feature_names=value.feature_names, method=_METHOD["bernoulli"], model_name=model_name,
                           model_version=model_version, data=data, instance_ids=ids, compute_time=compute_time,
                           extra=extra)
    c = int(np.argmax(value.prediction)) if target is None else value._class(target)
    extra.update({"target": c, "target_class": value.classes[c],
                  "leave_probability": value.leave_probability().tolist()})
    if not include_transitions:
        extra.pop("transition")
        extra.pop("transition_stderr", None)
    return Explanation(values=value.mean_vector()[:, c], base_values=float(value.base[c]),
                       prediction=float(value.prediction[c]), feature_names=value.feature_names,
                       method=_METHOD["categorical"], model_name=model_name, model_version=model_version, data=data,
                       instance_ids=ids, compute_time=compute_time, extra=extra)


def explain_game(game: StochasticGame, structure="shapley", *, method: str = "auto", n_samples: int = 2000,
                 random_state=None, target=None, model_name: str = "", model_version: int = 0, data=None,
                 instance_id: str | None = None, include_transitions: bool = True) -> Explanation:
    """:func:`distributional_value` + :func:`to_explanation`, timed (``compute_time``)."""
    t0 = time.perf_counter()
    val = distributional_value(game, structure, method=method, n_samples=n_samples, random_state=random_state)
    return to_explanation(val, target=target, model_name=model_name, model_version=model_version, data=data,
                          instance_id=instance_id, compute_time=time.perf_counter() - t0,
                          include_transitions=include_transitions)


def explain_preference(nu: Callable[[np.ndarray], np.ndarray], feature_names: Sequence[str], *,
                       output: str = "margin", structure="shapley", method: str = "auto", n_samples: int = 2000,
                       random_state=None, model_name: str = "", model_version: int = 0, data=None,
                       instance_id: str | None = None) -> Explanation:
    """Bernoulli distributional explanation of one preference event (worker entry point).

    Parameters
    ----------
    nu : callable
        Coalition value function ``nu(coalitions (K, d) bool) -> (K,)`` — a Pref-SHAP value
        function, or :func:`pairwise_margin_value_function` / :func:`learner_margin_value_function`.
    feature_names : sequence of str, length d
    output : {"margin", "probability"}
        What ``nu`` returns (margins are squashed with σ).
    structure, method, n_samples, random_state :
        See :func:`distributional_value`.
    model_name, model_version, data, instance_id :
        Stored in the :class:`Explanation`.

    Returns
    -------
    Explanation
        ``method="distributional-bernoulli"``; ``values`` = Shapley values of ``P(left preferred)``,
        ``extra["q_plus"]``/``["q_minus"]`` = probability that the feature flips the outcome towards
        left/right preferred, ``extra["importance"]`` = ι (Eq. 6).

    Examples
    --------
    >>> w = np.array([2.0, 0.0])
    >>> nu = pairwise_margin_value_function(lambda L, R: (L - R) @ w, [1.0, 3.0], [0.0, 3.0])
    >>> e = explain_preference(nu, ["price", "stars"])
    >>> [round(float(v), 4) for v in e.values], round(float(e.additivity_error()[0]), 12)
    ([0.3808, 0.0], 0.0)
    """
    game = bernoulli_preference_game(nu, len(feature_names), output=output, feature_names=feature_names)
    return explain_game(game, structure, method=method, n_samples=n_samples, random_state=random_state,
                        model_name=model_name, model_version=model_version, data=data, instance_id=instance_id)


def explain_choice(utilities: Callable[[np.ndarray], np.ndarray], items, reference=None, *,
                   feature_names: Sequence[str] | None = None, item_names: Sequence[str] | None = None,
                   target=None, temperature: float = 1.0, batched: bool = False, structure="shapley",
                   method: str = "auto", n_samples: int = 2000, random_state=None, model_name: str = "",
                   model_version: int = 0, instance_id: str | None = None,
                   include_transitions: bool = True) -> Explanation:
    """Categorical distributional explanation of a choice among ``k`` shown items (worker entry point).

    See :func:`categorical_choice_game` for ``utilities``, ``items``, ``reference``; ``target`` is the
    item whose mean goes into ``values`` (default the most probable item, pass the clicked one).

    Returns
    -------
    Explanation
        ``method="distributional-categorical"``; ``extra["transition"][i][s][r]`` = probability
        that feature ``i`` moves the choice from item ``s`` to item ``r``.
    """
    game = categorical_choice_game(utilities, items, reference, feature_names=feature_names, item_names=item_names,
                                   temperature=temperature, batched=batched)
    return explain_game(game, structure, method=method, n_samples=n_samples, random_state=random_state,
                        target=target, model_name=model_name, model_version=model_version, instance_id=instance_id,
                        include_transitions=include_transitions)


def explain_gaussian_utility(predict: Callable[[np.ndarray], tuple], x, reference, *,
                             feature_names: Sequence[str] | None = None, structure="shapley", method: str = "auto",
                             n_samples: int = 2000, random_state=None, model_name: str = "", model_version: int = 0,
                             instance_id: str | None = None) -> Explanation:
    """Gaussian distributional explanation of a utility with predictive variance.

    See :func:`gaussian_utility_game`. ``extra["sigma_tracker"]`` gives per feature the probability
    of decreasing / keeping / increasing the predictive standard deviation.
    """
    game = gaussian_utility_game(predict, x, reference, feature_names=feature_names)
    return explain_game(game, structure, method=method, n_samples=n_samples, random_state=random_state,
                        model_name=model_name, model_version=model_version, data=np.asarray(x, dtype=np.float64),
                        instance_id=instance_id)
