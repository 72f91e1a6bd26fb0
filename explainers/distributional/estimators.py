"""Estimators of distributional values: exact enumeration, Monte Carlo, shared-noise sampling.

Franceschi, Donini, Archambeau & Seeger (2024), *Explaining probabilistic models with distributional
values*, Definition 3.3, Eq. 5 and Eq. 7; Prop. 3.9(i) for the standard-value oracle.
"""

from __future__ import annotations

from typing import Callable


import numpy as np

from explainers.distributional.games import StochasticGame
from explainers.distributional.structures import _check_n, all_coalitions, get_structure
from explainers.distributional.values import DiscreteDistributionalValue, GaussianDistributionalValue
from learners.exceptions import BudgetError, InvalidInputError, InvalidParameterError, check_param

__all__ = ["bernoulli_values_of_tables", "distributional_value", "sampled_value", "standard_value"]


def _pack_unique(masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Deduplicate boolean rows; returns (unique rows, inverse index)."""
    packed = np.packbits(masks, axis=1)
    _, first, inv = np.unique(packed, axis=0, return_index=True, return_inverse=True)
    return masks[first], inv.reshape(-1)


def distributional_value(game: StochasticGame, structure="shapley", *, method: str = "auto",
                         n_samples: int = 2000, random_state=None, max_exact_players: int = 16,
                         chunk: int = 65536, max_coalitions: int = 2048, target_se: float | None = None):
    """Distributional value of every player (Franceschi et al. 2024, Definition 3.3, Eq. 5 and Eq. 7).

    Marginal contributions are analytic given the shared noise (Sec. 3.1); the remaining average
    over coalitions ``S ~ p^i`` is exact or Monte Carlo.

    Parameters
    ----------
    game : StochasticGame
    structure : str or CoalitionStructure
        ``"shapley"`` (default), ``"banzhaf"``, ``"random-order"`` or an instance of
        :class:`Semivalue`, :class:`RandomOrderValue`, :class:`ExplicitCoalitionStructure`.
    method : {"auto", "exact", "monte-carlo", "stratified"}
        ``"exact"`` enumerates all ``2^n`` coalitions (one payoff evaluation each); ``"monte-carlo"``
        draws ``n_samples`` coalition samples shared across players (permutations for random-order
        values, size + permutation for semivalues: ``n + 1`` evaluations per sample) and reports
        standard errors. ``"stratified"`` (semivalues of discrete games; others fall back to
        ``"monte-carlo"``) — Shapley values of Bernoulli games: Kernel SHAP of the expectation game
        for the means, size-stratified permutation chains for the change probabilities, within
        ``max_coalitions`` evaluations, exactly efficient (:mod:`explainers.distributional.stratified`).
        ``"auto"`` = exact if ``n <= 12``.
    n_samples : int >= 2
        Monte Carlo samples.
    max_coalitions : int >= 4
        Coalition evaluations of ``"stratified"`` (its cap when ``target_se`` is given).
    target_se : float, optional
        ``"stratified"`` only: stop the means' Kernel SHAP on this relative standard error
        (:func:`explainers._target_se.solve_to_target`) and give the chains the same share of the
        evaluations; ``None``: the whole ``max_coalitions``.
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
    >>> from explainers.distributional import table_game
    >>> g = table_game({(): 0.2, (0,): 0.2, (1,): 0.7, (0, 1): 0.7}, "bernoulli")  # player 0 null
    >>> v = distributional_value(g)
    >>> v.pmf().round(3).tolist()
    [[0.0, 1.0, 0.0], [0.0, 0.5, 0.5]]
    """
    check_param("distributional_value", "game", game, isinstance(game, StochasticGame), "a StochasticGame")
    struct = get_structure(structure)
    check_param("distributional_value", "method", method, method in ("auto", "exact", "monte-carlo", "stratified"),
                "one of 'auto', 'exact', 'monte-carlo', 'stratified'")
    n = game.n_players
    if method == "auto":
        method = "exact" if n <= 12 else "monte-carlo"
    rng = np.random.default_rng(random_state)
    fam = game.family
    if method == "stratified":
        check_param("distributional_value", "max_coalitions", max_coalitions,
                    isinstance(max_coalitions, (int, np.integer)) and max_coalitions >= 4, "an int >= 4")
        if 2 ** n <= max_coalitions and n <= max_exact_players:
            method = "exact"
        elif struct.name == "shapley" and fam.name == "bernoulli" and n <= 62:
            return _stratified(game, struct, int(max_coalitions), rng, target_se)
        else:
            method = "monte-carlo"
            n_samples = max(16, int(max_coalitions) // (n + 1))
    if method == "exact":
        if n > max_exact_players:
            raise BudgetError(
                f"Exact distributional values enumerate 2**{n} coalitions; the limit is max_exact_players="
                f"{max_exact_players}. Use method='monte-carlo' with n_samples, or raise the limit.")
        masks = all_coalitions(n)
        player, wo, wi, wt = _exact_pairs(n, struct)
        params = game.params(masks)
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


def _exact_pairs(n: int, struct) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The pairs ``(S, S ∪ i)`` of exact enumeration: ``(player i, code of S, code of S ∪ i, weight p^i(S))``,
    each of shape (P,), for every S with a positive weight under ``struct``."""
    W = struct.player_weights(n)
    if W.shape != (n, 2 ** n):
        raise InvalidParameterError(f"{struct!r} returned weights of shape {W.shape}; expected {(n, 2 ** n)}.")
    player, wo, wi, wt = [], [], [], []
    for i in range(n):
        m = np.flatnonzero(W[i] > 0)
        player.append(np.full(m.size, i))
        wo.append(m)
        wi.append(m | (1 << i))
        wt.append(W[i, m])
    return tuple(np.concatenate(a) for a in (player, wo, wi, wt))


def bernoulli_values_of_tables(probabilities, structure="shapley", *, feature_names=None,
                               classes=("0", "1")) -> list[DiscreteDistributionalValue]:
    """Exact distributional values of many Bernoulli games at once, from their tables of success probabilities.

    The batch form of :func:`distributional_value` with ``method="exact"`` on a Bernoulli game
    (Franceschi et al. 2024, Eq. 5 and Eq. 7 with the comonotone coupling of Sec. 3.1): for every pair
    ``(S, S ∪ i)`` the joint table of ``(v(S), v(S ∪ i))`` is ``[[1 − max, π_{S∪i} − min], [π_S − min, min]]``
    (``min``/``max`` of ``π_S, π_{S∪i}``), and the transition table of player ``i`` is its ``p^i(S)``-weighted
    sum — for all games in one matrix product per table entry instead of one enumeration per game. Equal to
    one :func:`distributional_value` per game up to the order of floating-point sums
    (tests/test_distributional_batch.py).

    Parameters
    ----------
    probabilities : array_like of shape (2**n, G)
        Column ``g`` is game ``g``'s ``π_S`` for every coalition code ``S`` (bit ``i`` = player ``i``,
        :func:`~explainers.distributional.structures.all_coalitions`' order), in [0, 1].
    structure : str or CoalitionStructure
    feature_names, classes : as in :class:`DiscreteDistributionalValue`

    Returns
    -------
    list of DiscreteDistributionalValue
        One per game (``estimator="exact"``).

    Raises
    ------
    InvalidInputError
        If the table is not (2**n, G) for some n ≥ 1, or holds a value outside [0, 1] (or NaN).

    Examples
    --------
    >>> from explainers.distributional import table_game
    >>> P = np.array([[0.2, 0.5], [0.2, 0.1], [0.7, 0.5], [0.7, 0.9]])     # two games of two players
    >>> one = distributional_value(table_game({(): 0.2, (0,): 0.2, (1,): 0.7, (0, 1): 0.7}, "bernoulli"))
    >>> bool(np.allclose(bernoulli_values_of_tables(P)[0].transition, one.transition, atol=1e-15))
    True
    """
    P = np.asarray(probabilities, dtype=np.float64)
    if P.ndim != 2 or P.shape[0] < 2 or P.shape[0] & (P.shape[0] - 1):
        raise InvalidInputError(f"bernoulli_values_of_tables expects a (2**n, games) table; got shape {P.shape}.")
    if not np.all((P >= 0) & (P <= 1)):
        raise InvalidInputError("A Bernoulli game must return probabilities in [0, 1] (no NaN); got values in "
                                f"[{np.nanmin(P)}, {np.nanmax(P)}].")
    n = P.shape[0].bit_length() - 1
    struct = get_structure(structure)
    player, wo, wi, wt = _exact_pairs(n, struct)
    weights = np.zeros((wo.size, n))                      # row j: p^i(S) of pair j in its player's column
    weights[np.arange(wo.size), player] = wt
    A, B = P[wo], P[wi]                                   # (pairs, G): π_S and π_{S∪i}
    lo, hi = np.minimum(A, B), np.maximum(A, B)
    trans = np.empty((P.shape[1], n, 2, 2))
    for (a, b), tab in (((1, 1), lo), ((1, 0), A - lo), ((0, 1), B - lo), ((0, 0), 1.0 - hi)):
        trans[:, :, a, b] = tab.T @ weights
    names = list(feature_names) if feature_names is not None else [f"x{i}" for i in range(n)]
    common = dict(family="bernoulli", classes=list(classes), feature_names=names, structure=struct.name,
                  estimator="exact", efficient=bool(struct.efficient))
    base, pred = P[0], P[-1]
    return [DiscreteDistributionalValue(transition=trans[g], base=np.array([1 - base[g], base[g]]),
                                        prediction=np.array([1 - pred[g], pred[g]]), **common)
            for g in range(P.shape[1])]


def _stratified(game, struct, max_coalitions, rng, target_se=None):
    """:func:`explainers.distributional.stratified.bernoulli_stratified` wrapped as a value object."""
    from explainers.distributional.stratified import bernoulli_stratified

    r = bernoulli_stratified(game, max_coalitions, rng, target_se=target_se)
    return DiscreteDistributionalValue(
        transition=r["transition"], family=game.family.name, classes=list(game.classes),
        feature_names=list(game.feature_names), stderr=r["stderr"], mean_stderr=r["mean_stderr"],
        base=r["base"], prediction=r["prediction"], structure=struct.name, estimator="stratified",
        n_samples=r["n_chains"], efficient=True)


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


