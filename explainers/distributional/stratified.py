"""Bernoulli distributional values within a coalition budget: Kernel SHAP for the mean, size-
stratified chains for the probability of a change.

Franceschi, Donini, Archambeau & Seeger (2024), *Explaining probabilistic models with distributional
values*: a semivalue's distributional value of player ``i`` is ``Σ_s p̄(s) E_{|S|=s, S∌i}[J(S, S∪i)]``
(Definition 3.3, Eq. 5 and Eq. 9), ``J`` the closed-form joint table of ``(v(S), v(S∪i))``
(Sec. 3.1). For a Bernoulli game (the comonotone coupling) the player's law on {−1, 0, +1} is fixed
by two numbers: its mean ``φ_i = q⁺ − q⁻``, the Shapley value of the expectation game
``u(S) = P(v(S) = 1)`` (Prop. 3.9(i)), and its probability of a change ``c_i = q⁺ + q⁻``. So

* ``φ`` is the paired, size-stratified Kernel SHAP of ``u`` (:func:`explainers._coalitions.shapley_of_game`:
  exact efficiency ``Σφ = u(Ω) − u(∅)``, honest standard errors), on ``MEAN_SHARE`` of the budget;
* the tables ``J`` — hence ``c`` and the stay probabilities — come from :func:`stratified_tables`:
  the strata whose coalitions (sizes ``s`` and ``s + 1``) are all enumerated exactly (the smallest
  and largest sizes; the Kernel SHAP plan enumerates them too, so they cost nothing more), the
  middle strata from *blocks* of permutation chains — a random order π, its ``n`` cyclic shifts
  and their reverses. In a block every player sits once at every position of the shifted orders
  and once of the reversed ones, so each block gives each player one pair in every middle stratum
  from each half (position-stratified permutations; Mitchell, Cooper, Frank & Holmes 2022,
  *Sampling permutations for Shapley value estimation*, Sec. 4). Blocks are i.i.d.: the standard
  error of a table entry is the spread of its per-block estimate / √blocks.
* ``q^± = (c ± φ)/2`` with ``c`` raised to ``|φ|`` where the two estimates disagree (then the stay
  probabilities shrink in proportion), so the law is a probability, its mean is exactly ``φ`` and
  efficiency holds exactly.
"""


from __future__ import annotations

import itertools
import math

import numpy as np

from explainers._coalitions import coalitions_from_integers

__all__ = ["bernoulli_stratified", "plan_strata", "stratified_tables"]

#: Share of the budget the enumerated sizes may take (the rest goes to the middle strata).
ENUMERATE_SHARE = 0.5
#: Share of the budget for the Kernel SHAP means (the rest for the chains of the change probabilities).
MEAN_SHARE = 0.875
#: Fewest i.i.d. blocks (one block = 2n chains) for standard errors and the control variate.
MIN_BLOCKS = 4


def _codes_of_size(n: int, s: int) -> np.ndarray:
    return np.array([sum(1 << j for j in c) for c in itertools.combinations(range(n), s)], dtype=np.int64)


def plan_strata(n: int, max_coalitions: int) -> tuple[int, int]:
    """``(k, blocks)``: sizes ``0..k`` and ``n−k..n`` enumerated, ``blocks`` chain blocks for the rest.

    Examples
    --------
    >>> plan_strata(12, 2048)
    (3, 12)
    """
    best = (0, MIN_BLOCKS)
    for k in range(0, n // 2):
        if n - 2 * k < 2:
            break
        exact = 2 * sum(math.comb(n, t) for t in range(k + 1))
        cost = 2 * n * (n - 2 * k - 1)
        blocks = (max_coalitions - exact) // max(cost, 1)
        if exact <= ENUMERATE_SHARE * max_coalitions and blocks >= MIN_BLOCKS:
            best = (k, int(blocks))
    return best


def stratified_tables(game, q: np.ndarray, max_coalitions: int, rng: np.random.Generator,
                      k: int | None = None, blocks: int | None = None, cyclic: bool = True):
    """Transition tables of a discrete game, size-stratified (module notes), with standard errors.

    Parameters
    ----------
    game : StochasticGame
        Discrete family (Bernoulli or categorical), ``n ≤ 62`` players.
    q : ndarray of shape (n,)
        ``p̄(s)``, the semivalue's size distribution.
    max_coalitions : int
        Coalition evaluation budget (used by :func:`plan_strata` when ``k`` / ``blocks`` are not given).
    rng : numpy.random.Generator
    k, blocks : int, optional
        Sizes ``0..k`` and ``n−k..n`` enumerated, and the number of chain blocks.
    cyclic : bool
        A block is an order's ``n`` cyclic shifts and their reverses (every player at every position
        once per half); ``False``: an order and its reverse, each middle pair weighted by ``n`` (its
        inverse probability of falling in a given position) — cheaper blocks for small budgets.

    Returns
    -------
    dict with ``transition`` (n, d, d), ``stderr`` (n, d, d), ``base`` and
    ``prediction`` (expectations of ∅ and Ω), ``n_chains``, ``n_coalitions``, ``k``.
    """
    n = game.n_players
    fam = game.family
    k0, B0 = plan_strata(n, int(max_coalitions))
    k = k0 if k is None else int(k)
    B = B0 if blocks is None else int(blocks)
    full = (1 << n) - 1
    # ---- exact strata: s ≤ k − 1 and s ≥ n − k (sizes s and s + 1 enumerated)
    sizes = sorted(set(range(k + 1)) | set(range(n - k, n + 1)))
    by_size = {s: _codes_of_size(n, s) for s in sizes}
    ex_wo, ex_wi, ex_pl, ex_wt = [], [], [], []
    for s in [s for s in range(n) if s <= k - 1 or s >= n - k]:
        S = by_size[s]
        w = q[s] / math.comb(n - 1, s)
        for i in range(n):
            Si = S[(S >> i) & 1 == 0]
            ex_wo.append(Si), ex_wi.append(Si | (1 << i)), ex_pl.append(np.full(Si.size, i)), ex_wt.append(np.full(Si.size, w))
    # ---- chain blocks for the middle strata s = k .. n − k − 1
    shifts = n if cyclic else 1
    idx = (np.arange(n)[None, :] + np.arange(shifts)[:, None]) % n             # cyclic shifts
    perms = []
    for _ in range(B):
        pi = rng.permutation(n)
        fwd = pi[idx]
        perms.append(np.concatenate([fwd, fwd[:, ::-1]]))
    P = np.concatenate(perms) if B else np.zeros((0, n), np.int64)           # (B·2·shifts, n)
    chains = np.concatenate([np.zeros((P.shape[0], 1), np.int64),
                             np.cumsum(np.left_shift(1, P, dtype=np.int64), axis=1)], axis=1)
    pos = np.arange(k + 1, n - k + 1)                                          # positions t (1-based)
    mid_wo, mid_wi = chains[:, pos - 1], chains[:, pos]
    mid_pl = P[:, pos - 1]
    mid_s = np.broadcast_to(pos - 1, mid_pl.shape)
    mid_blk = np.repeat(np.arange(B), 2 * shifts)[:, None] * np.ones_like(mid_pl)
    codes = np.concatenate([np.concatenate(list(by_size.values())), chains[:, k + 1:n - k].reshape(-1)])
    uniq, inv = np.unique(codes, return_inverse=True)
    params = game.params(coalitions_from_integers(uniq, n))
    where = dict(zip(uniq.tolist(), range(uniq.size)))
    look = np.vectorize(where.__getitem__, otypes=[np.int64])
    expect = np.asarray(fam.expectation(params), dtype=np.float64)
    if expect.ndim == 1:                                                        # Bernoulli: P(v = 1)
        expect = np.stack([1.0 - expect, expect], axis=1)                      # (U, d)
    d = expect.shape[1]
    # ---- exact part
    trans = np.zeros((n, d * d))
    if ex_wo:
        wo, wi = look(np.concatenate(ex_wo)), look(np.concatenate(ex_wi))
        pl, wt = np.concatenate(ex_pl), np.concatenate(ex_wt)
        step = max(1, 2 ** 20 // (d * d))
        for a in range(0, wo.size, step):
            tabs = fam.pair_joint(params[wi[a:a + step]], params[wo[a:a + step]]).reshape(-1, d * d)
            np.add.at(trans, pl[a:a + step], wt[a:a + step, None] * tabs)
    base, pred = expect[where[0]], expect[where[full]]
    if B == 0 or pos.size == 0:
        z = np.zeros((n, d, d))
        return dict(transition=trans.reshape(n, d, d), stderr=z, base=base,
                    prediction=pred, n_chains=0, n_coalitions=int(uniq.size), k=k)
    # ---- middle part: per block and player, Σ_s p̄(s) · (forward + reverse) / 2
    wo, wi = look(mid_wo.reshape(-1)), look(mid_wi.reshape(-1))
    tabs = fam.pair_joint(params[wi], params[wo]).reshape(-1, d * d)
    Y = np.zeros((B, n, d * d))
    wmid = q[mid_s.reshape(-1)] * (n / shifts) / 2.0
    np.add.at(Y, (mid_blk.reshape(-1), mid_pl.reshape(-1)), wmid[:, None] * tabs)

    Ym = Y.mean(axis=0)
    R = Y - Ym
    se = np.sqrt((R ** 2).sum(axis=0) / max(B - 1, 1) / B)
    return dict(transition=(trans + Ym).reshape(n, d, d), stderr=se.reshape(n, d, d), base=base,
                prediction=pred, n_chains=int(P.shape[0]), n_coalitions=int(uniq.size), k=k)


def bernoulli_stratified(game, max_coalitions: int, rng: np.random.Generator, target_se: float | None = None) -> dict:
    """Shapley distributional value of a Bernoulli game within ``max_coalitions`` evaluations.

    With ``target_se`` the means stop on that relative standard error
    (:func:`explainers._target_se.solve_to_target`, ``MEAN_SHARE`` of the budget as its cap) and the
    chains get the budget in the same proportion (evaluations of the means / ``MEAN_SHARE``).

    Returns
    -------
    dict with ``transition`` (n, 2, 2), ``stderr`` (n, 2, 2), ``mean_stderr`` (n, 2), ``base`` and
    ``prediction`` (laws of v(∅), v(Ω)), ``n_chains`` and ``n_coalitions`` (distinct evaluations),
    ``target_met``.
    """
    from explainers._target_se import solve_to_target

    n = game.n_players
    cache: dict = {}

    def params_of(codes):
        new = np.array([c for c in np.unique(codes).tolist() if c not in cache], dtype=np.int64)
        if new.size:
            cache.update(zip(new.tolist(), np.asarray(game.params(coalitions_from_integers(new, n)))))
        return np.array([cache[c] for c in codes.tolist()])

    class Cached:                                    # the game with memoised coalition parameters
        n_players, family = n, game.family

        @staticmethod
        def params(masks):
            return params_of(masks.astype(np.int64) @ (np.int64(1) << np.arange(n, dtype=np.int64)))

    budget_mean = max(4, int(MEAN_SHARE * int(max_coalitions)))
    bits = np.int64(1) << np.arange(n, dtype=np.int64)
    r = solve_to_target(n, budget_mean, rng, lambda masks: params_of(masks.astype(np.int64) @ bits)[:, None].astype(np.float64),
                        target_se)
    phi, se_phi, plan = r.phi[0], r.stderr[0], r.plan
    if target_se is not None:
        max_coalitions = min(int(max_coalitions), max(int(r.plan.n_coalitions / MEAN_SHARE), len(cache) + 4 * n))
    sizes = plan.masks[2:2 + plan.n_fixed].sum(axis=1)
    small = sizes[2 * sizes <= n]
    k = int(small.max()) if small.size else 0                      # sizes 0..k and n−k..n are in the cache
    k = min(k, (n - 2) // 2)
    left = int(max_coalitions) - len(cache)
    pair_cost = 2 * max(n - 2 * k - 1, 1)                         # new evaluations of an order and its reverse
    cyclic = left >= MIN_BLOCKS * n * pair_cost
    blocks = max(2, left // (pair_cost * (n if cyclic else 1)))
    met = r.target_met
    tab = stratified_tables(Cached, np.full(n, 1.0 / n), int(max_coalitions), rng, k=k, blocks=blocks, cyclic=cyclic)
    T, Tse = tab["transition"], tab["stderr"]
    c = np.clip(np.maximum(T[:, 0, 1] + T[:, 1, 0], np.abs(phi)), 0.0, 1.0)
    stay = T[:, 0, 0] + T[:, 1, 1]
    shrink = np.where(stay > 0, (1.0 - c) / np.where(stay > 0, stay, 1.0), 0.0)
    out = np.empty_like(T)
    out[:, 0, 1], out[:, 1, 0] = (c + phi) / 2.0, (c - phi) / 2.0
    out[:, 0, 0], out[:, 1, 1] = T[:, 0, 0] * shrink, T[:, 1, 1] * shrink
    se = Tse.copy()
    se_c = np.sqrt(Tse[:, 0, 1] ** 2 + Tse[:, 1, 0] ** 2)
    se[:, 0, 1] = se[:, 1, 0] = np.sqrt(se_c ** 2 + se_phi ** 2) / 2.0
    return dict(transition=out, stderr=se, mean_stderr=np.stack([se_phi, se_phi], axis=1), base=tab["base"],
                prediction=tab["prediction"], n_chains=tab["n_chains"], n_coalitions=len(cache), target_met=met)
