"""Cooperative stochastic games with shared noise, and games given by a table of payoffs.

Franceschi, Donini, Archambeau & Seeger (2024), *Explaining probabilistic models with distributional
values*, Definition 3.1 and Remark 3.6.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from explainers.distributional.families import BernoulliFamily, CategoricalFamily, GaussianFamily, PayoffFamily
from explainers.distributional.structures import _check_n
from learners.exceptions import InvalidInputError, InvalidParameterError, check_param

__all__ = ["StochasticGame", "table_game"]


# ============================================================================ games
class StochasticGame:
    """An ``n``-player cooperative stochastic game with shared noise (Franceschi et al. 2024, Definition 3.1).

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

    >>> from explainers.distributional import distributional_value
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


