"""Stochastic games built from prefstream's models through plain callables.

Bernoulli preference games from a coalition value function, categorical choice games of click
sessions, Gaussian utility games and reference games of any probabilistic model (Franceschi, Donini,
Archambeau & Seeger 2024, *Explaining probabilistic models with distributional values*, Sec. 3.1).
No learner module is imported.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence

import numpy as np

from explainers.distributional.families import BernoulliFamily, CategoricalFamily, GaussianFamily
from explainers.distributional.games import StochasticGame
from explainers.distributional.structures import all_coalitions  # noqa: F401  (doctests)
from learners.exceptions import InvalidInputError, check_param

__all__ = ["bernoulli_preference_game", "categorical_choice_game", "gaussian_utility_game",
           "learner_margin_value_function", "masked_inputs", "pairwise_margin_value_function", "product_value_function",
           "reference_game", "table_value_function"]

_TINY = np.finfo(np.float64).tiny


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

    ``[x_S]_j = x_j`` if ``j ∈ S`` else ``reference_j`` (Franceschi et al. 2024, Eq. 1 with a reference instead
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
    >>> from explainers.distributional import all_coalitions
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


def table_value_function(values) -> Callable[[np.ndarray], np.ndarray]:
    """Coalition value function looked up in a table over all ``2^n`` coalitions.

    Row ``m`` of ``values`` is the value of the coalition whose bit ``j`` is player ``j`` (the order of
    :func:`~explainers.distributional.all_coalitions`), e.g. a batch of Pref-SHAP value functions
    evaluated once for many events on shared coalitions.

    Examples
    --------
    >>> nu = table_value_function([0.0, 1.0, 2.0, 4.0])
    >>> nu(np.array([[True, True], [False, True]])).tolist()
    [4.0, 2.0]
    """
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    n = int(round(math.log2(v.size))) if v.size else -1
    if n < 0 or 2 ** n != v.size:
        raise InvalidInputError(f"table_value_function needs 2^n values (one per coalition); got {v.size}.")
    bits = np.left_shift(1, np.arange(n), dtype=np.int64)

    def nu(coalitions):
        c = np.asarray(coalitions, dtype=bool).reshape(-1, n)
        return v[(c.astype(np.int64) * bits).sum(axis=1)]

    return nu


def product_value_function(A, B, W) -> Callable[[np.ndarray], np.ndarray]:
    """Coalition value function of a sum of product games, ``ν(S) = Σ_t W_t Π_{j∈S} A_tj Π_{j∉S} B_tj``.

    The product-marginal Pref-SHAP value function of a GPM / C-GPM / UPM duel is one
    (:meth:`explainers.prefshap.PrefSHAP.product_terms`; Hu et al. 2022 Sec. 3.1 with the marginal
    reference); each coalition costs O(T·d) (:func:`explainers.prefshap.product.product_game_values`).

    Parameters
    ----------
    A, B : array_like of shape (T, d)
        Factors of player j present / absent in term t (≥ 0, e.g. kernel values and their marginal means).
    W : array_like of shape (T,)

    Examples
    --------
    >>> nu = product_value_function([[2.0, 3.0]], [[1.0, 1.0]], [1.0])
    >>> nu(all_coalitions(2)).round(12).tolist()
    [1.0, 2.0, 3.0, 6.0]
    """
    from explainers.prefshap.product import product_game_values

    A, B = np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64)
    W = np.asarray(W, dtype=np.float64).reshape(-1)
    if A.ndim != 2 or A.shape != B.shape or W.shape != (A.shape[0],):
        raise InvalidInputError(f"product_value_function: A and B must have shape (T, d) and W (T,); got {A.shape}, "
                                f"{B.shape}, {W.shape}.")
    d = A.shape[1]

    def nu(coalitions):
        return product_game_values(A, B, W, np.asarray(coalitions, dtype=bool).reshape(-1, d))

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


def preference_probabilities(v: np.ndarray, output: str) -> np.ndarray:
    """P(left preferred) from coalition values: σ(ν) for margins (NaN refused), ``v`` itself for probabilities."""
    if output == "margin":
        if np.any(np.isnan(v)):
            raise InvalidInputError("The coalition value function returned NaN margins.")
        return _expit(v)
    return v


#: Outcome names of a preference game: class 0, class 1 (1 = left preferred).
PREFERENCE_CLASSES = ("right preferred", "left preferred")


def bernoulli_preference_game(nu: Callable[[np.ndarray], np.ndarray], n_players: int, *, output: str = "margin",
                              feature_names: Sequence[str] | None = None,
                              classes: Sequence[str] = PREFERENCE_CLASSES) -> StochasticGame:
    """Bernoulli preference game ``v(S) = Ber(σ(ν_S))`` (Franceschi et al. 2024 Sec. 3.1 on a preference model).

    ``ν`` is any coalition value function of a preference margin: the Pref-SHAP value function of a
    GPM / C-GPM (Hu et al. 2022), or :func:`pairwise_margin_value_function` around a capacity/UPM margin.
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
        return preference_probabilities(v.reshape(-1), output)

    return StochasticGame(payoff, n_players, BernoulliFamily(), feature_names=feature_names, classes=classes)


def categorical_choice_game(utilities: Callable[[np.ndarray], np.ndarray], items, reference=None, *,
                            feature_names: Sequence[str] | None = None, item_names: Sequence[str] | None = None,
                            temperature: float = 1.0, batched: bool = False) -> StochasticGame:
    """Categorical game of a choice among ``k`` shown items (e.g. a click session).

    ``v(S) = Cat(softmax(u(X_S) / τ))`` where ``X_S`` keeps the features in ``S`` of every shown
    item and sets the others to the reference (:func:`masked_inputs`). The players are the ``d``
    features; the classes are the ``k`` items (Franceschi et al. 2024, Sec. 3.1, categorical games).

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


