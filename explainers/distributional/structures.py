"""Coalition structures (value operators) of distributional values.

Franceschi, Donini, Archambeau & Seeger (2024), *Explaining probabilistic models with distributional
values*, Eq. 2, Definition 3.8 and App. C: one distribution ``p^i`` over coalitions without player
``i`` per player — Shapley, Banzhaf, semivalues, random-order values, or an explicit table.
"""

from __future__ import annotations

import math

import numpy as np

from explainers._coalitions import coalitions_from_integers, shapley_size_weights
from learners.exceptions import InvalidParameterError, check_param

__all__ = ["Banzhaf", "CoalitionStructure", "ExplicitCoalitionStructure", "RandomOrderValue", "Semivalue",
           "Shapley", "all_coalitions", "get_structure"]


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
    return coalitions_from_integers(np.arange(2 ** n, dtype=np.int64), n)


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
        ``p̄(k) = P(|S| = k)`` for ``k = 0..n−1`` (non-negative, sums to one). Franceschi et al. (2024), Eq. 9 /
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

    Monte Carlo samples uniform random permutations in antithetic pairs (an order and its reverse);
    every player's coalition is its set of predecessors, so each sample costs ``n + 1`` coalitions
    shared by all players.
    """

    name = "shapley"
    efficient = True
    symmetric = True

    def __init__(self):
        super().__init__(lambda n: np.full(n, 1.0 / n))

    def player_weights(self, n: int) -> np.ndarray:
        n = _check_n("Shapley", n)
        masks = all_coalitions(n)
        w = shapley_size_weights(n)[np.minimum(masks.sum(axis=1), n - 1)]
        return np.where(masks.T, 0.0, w[None, :])

    def sample_coalitions(self, n: int, n_samples: int, rng: np.random.Generator) -> np.ndarray:
        # antithetic orders: every drawn order is followed by its reverse (each still uniform), which
        # cancels most of the variance of near-additive games; the i.i.d. standard errors reported by
        # the Monte Carlo estimator are then conservative
        half = np.argsort(rng.random(((n_samples + 1) // 2, n)), axis=1)
        pos = np.concatenate([half, n - 1 - half])[:n_samples]
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

    Franceschi et al. (2024), App. C (Weber 1988; asymmetric Shapley values of Frye et al. 2020). Efficient
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
                    w = shapley_size_weights(gsz)
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


