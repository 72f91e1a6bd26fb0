"""Gumbel-max coupling of two categorical distributions in closed form, in log space.

Two categorical random variables ``X = argmax_j(α_j + ε_j)`` and ``Y = argmax_j(β_j + ε_j)``
driven by the *same* i.i.d. standard Gumbel noise ``ε`` (the "noise sharing" of Franceschi et al. 2024,
Definition 3.1 and Remark 3.6) have the joint table ``P[r, s] = P(X = r, Y = s)`` given by
Lemma 3.7 of Franceschi, Donini, Archambeau & Seeger (2024) (*Explaining probabilistic models with distributional
values*), derived in its Appendix B:

* sort the classes so that ``ν = α − β`` is non-increasing (``ν_1 ≥ … ≥ ν_d``, App. B.1);
* prefix log-sum-exps ``ᾱ_k = log Σ_{j≤k} e^{α_j}`` and suffix ones ``β̄_k = log Σ_{j>k} e^{β_j}``;
* ``c_k = e^{−β̄_k−ᾱ_k} (σ(γ̄_k + ν_k) − σ(γ̄_k + ν_{k+1}))`` with ``γ̄_k = β̄_k − ᾱ_k`` and
  ``C_t = Σ_{k<t} c_k`` (App. B.3);
* off-diagonal ``P_rs = e^{α_r+β_s} (C_s − C_r)`` for ``r < s`` and ``0`` for ``r > s`` (Eq. 15);
* diagonal ``P_rr = (e^{ᾱ_r−α_r} + e^{β̄_r−β_r})^{-1}`` (end of App. B.3).

Everything is evaluated in log space: ``log c_k = −β̄_k − ᾱ_k + log σ(a) + log σ(−b) +
log(1 − e^{b−a})`` (using ``σ(a) − σ(b) = σ(a) σ(−b) (1 − e^{b−a})``) and the differences
``C_s − C_r`` are never formed: ``log Σ_{k=r}^{s−1} c_k`` is a running log-sum-exp. Logits of
±1000 (or any finite magnitude) give no overflow and no NaN.

Cost per pair (α, β): ``O(d log d)`` for the sort and the sequences ``ᾱ, β̄, c`` (which already give
the mass of "no change" and every statistic that needs only the diagonal), plus ``O(d²)`` to write
out the full ``d × d`` table (its size). All functions are vectorised over leading batch axes.
"""

from __future__ import annotations

import numpy as np

from learners.exceptions import InvalidInputError, check_param

__all__ = [
    "gumbel_max_coupling",
    "log_gumbel_max_coupling",
    "log_gumbel_max_stay_probability",
    "monte_carlo_gumbel_max_coupling",
    "bernoulli_comonotone_coupling",
]


def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    """``log σ(x)`` without overflow (``−log(1 + e^{−x})``)."""
    return -np.logaddexp(0.0, -x)


def _log_softmax(x: np.ndarray) -> np.ndarray:
    m = np.max(x, axis=-1, keepdims=True)
    z = x - m
    return z - np.log(np.sum(np.exp(z), axis=-1, keepdims=True))


def _check_logits(alpha, beta, owner: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        a = np.asarray(alpha, dtype=np.float64)
        b = np.asarray(beta, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{owner}: alpha and beta must be arrays of real logits.") from None
    if a.ndim == 0 or a.shape != b.shape:
        raise InvalidInputError(
            f"{owner}: alpha and beta must be logit arrays of the same shape (..., d) with d >= 1; "
            f"got shapes {a.shape} and {b.shape}."
        )
    if a.shape[-1] < 1:
        raise InvalidInputError(f"{owner}: need at least one class; got shape {a.shape}.")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise InvalidInputError(
            f"{owner}: logits must be finite (NaN/inf found). Clip log-probabilities of impossible "
            "classes to a large negative number, e.g. np.log(np.maximum(p, np.finfo(float).tiny))."
        )
    return a, b


def _sorted_sequences(a: np.ndarray, b: np.ndarray):
    """Normalise, sort by ν (non-increasing) and compute ᾱ, β̄ (App. B.3) for a batch ``(K, d)``."""
    a = _log_softmax(a)  # shift invariance of the argmax: keep magnitudes small (a, b <= 0)
    b = _log_softmax(b)
    nu = a - b
    order = np.argsort(-nu, axis=1, kind="stable")
    a_s = np.take_along_axis(a, order, axis=1)
    b_s = np.take_along_axis(b, order, axis=1)
    nu_s = a_s - b_s
    abar = np.logaddexp.accumulate(a_s, axis=1)  # abar[k] = log Σ_{j<=k} e^{a_j}   (0-based)
    rev = np.logaddexp.accumulate(b_s[:, ::-1], axis=1)[:, ::-1]  # rev[k] = log Σ_{j>=k} e^{b_j}
    bbar = np.concatenate([rev[:, 1:], np.full((a.shape[0], 1), -np.inf)], axis=1)  # Σ_{j>k}
    return a, b, order, a_s, b_s, nu_s, abar, bbar


def _log_diag(a_s, b_s, abar, bbar) -> np.ndarray:
    """``log P_rr = −log(e^{ᾱ_r−α_r} + e^{β̄_r−β_r})`` (App. B.3; β̄_d = −inf gives P_dd)."""
    return -np.logaddexp(abar - a_s, bbar - b_s)


def _log_c(nu_s, abar, bbar) -> np.ndarray:
    """``log c_k``, k = 1..d−1 (App. B.3), shape (K, d−1); ``-inf`` where ``ν_k = ν_{k+1}``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        g = bbar[:, :-1] - abar[:, :-1]  # γ̄_k
        gap = nu_s[:, 1:] - nu_s[:, :-1]  # ν_{k+1} − ν_k <= 0
        # σ(g+ν_k) − σ(g+ν_{k+1}) = σ(g+ν_k) σ(−g−ν_{k+1}) (1 − e^{ν_{k+1}−ν_k})
        log_c = (-bbar[:, :-1] - abar[:, :-1] + _log_sigmoid(g + nu_s[:, :-1]) + _log_sigmoid(-(g + nu_s[:, 1:]))
                 + np.log(-np.expm1(gap)))
    return np.where(gap < 0, log_c, -np.inf)


def _to_original(X: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Re-index a batch of sorted-order tables ``(K, d, d)`` back to the original class order."""
    K, d = order.shape
    rank = np.argsort(order, axis=1)
    flat = rank[:, :, None] * d + (rank + (np.arange(K) * (d * d))[:, None])[:, None, :]
    return X.reshape(-1)[flat]


def _prepare(alpha, beta, owner):
    a, b = _check_logits(alpha, beta, owner)
    batch = a.shape[:-1]
    d = a.shape[-1]
    return a.reshape(-1, d), b.reshape(-1, d), batch, d


def _upper_mask(d: int) -> np.ndarray:
    """``tri[r, k] = r <= k`` for r in 0..d−1, k in 0..d−2 (terms of Σ_{k=r}^{s−1} c_k)."""
    return np.arange(d)[:, None] <= np.arange(d - 1)[None, :]


def _log_table(a, b, order, a_s, b_s, nu_s, abar, bbar) -> np.ndarray:
    K, d = a.shape
    log_c = _log_c(nu_s, abar, bbar)
    # running log-sum-exp, never a difference: acc[r, k] = log Σ_{k'=r}^{k} c_{k'}  (r <= k)
    m = np.where(_upper_mask(d)[None], log_c[:, None, :], -np.inf)
    acc = np.logaddexp.accumulate(m, axis=2)
    log_sum = np.concatenate([np.full((K, d, 1), -np.inf), acc], axis=2)  # [r, s] = acc[r, s−1]; −inf if s <= r
    logP = a[:, :, None] + b[:, None, :] + _to_original(log_sum, order)  # P_rs = e^{α_r+β_s}(C_s − C_r)
    diag = np.empty((K, d))
    np.put_along_axis(diag, order, _log_diag(a_s, b_s, abar, bbar), axis=1)
    idx = np.arange(d)
    logP[:, idx, idx] = diag
    return logP


def log_gumbel_max_coupling(alpha, beta) -> np.ndarray:
    """Log joint table of two categorical variables coupled by shared Gumbel noise.

    ``out[..., r, s] = log P(argmax_j(α_j + ε_j) = r, argmax_j(β_j + ε_j) = s)`` with
    ``ε ~ Gumbel(0, 1)^d`` shared, from the closed form of Franceschi et al. 2024, Lemma 3.7 / Appendix B
    (Eq. 15 and the diagonal of App. B.3), computed entirely in log space.

    Parameters
    ----------
    alpha, beta : array_like of shape (..., d), float
        Finite logits (natural parameters) of the two categorical distributions; only their
        differences within a row matter (softmax shift invariance). ``d >= 1``.

    Returns
    -------
    ndarray of shape (..., d, d), float64
        Log-probabilities; ``-inf`` marks impossible transitions (after sorting by ν = α − β,
        every entry below the diagonal is exactly zero, Lemma 3.7).

    Raises
    ------
    InvalidInputError
        If shapes differ or logits are not finite.

    Notes
    -----
    ``logsumexp`` over axis ``-1`` gives ``log_softmax(alpha)`` and over axis ``-2`` gives
    ``log_softmax(beta)`` (the marginals). Cost ``O(d log d)`` for the sequences plus ``O(d²)``
    for the table per pair.

    Examples
    --------
    >>> P = np.exp(log_gumbel_max_coupling([1000.0, -1000.0, 0.0], [0.0, 0.0, 0.0]))
    >>> bool(np.isfinite(P).all()), np.round(P.sum(axis=1), 6).tolist()
    (True, [1.0, 0.0, 0.0])
    """
    a, b, batch, d = _prepare(alpha, beta, "log_gumbel_max_coupling")
    if d == 1:
        return np.zeros(batch + (1, 1))
    return _log_table(*_sorted_sequences(a, b)).reshape(batch + (d, d))


_FAST_MAX_LOG_C = 600.0


def gumbel_max_coupling(alpha, beta) -> np.ndarray:
    """Joint table ``P[..., r, s] = P(X = r, Y = s)`` of the Gumbel-max coupling (probabilities).

    Same closed form as :func:`log_gumbel_max_coupling` (Franceschi et al. 2024, Lemma 3.7, Appendix B; see
    there for parameters and errors). Rows sum to ``softmax(alpha)``, columns to ``softmax(beta)``.

    Notes
    -----
    The sums ``Σ_{k=r}^{s−1} c_k`` are formed as running sums of non-negative terms (never as
    differences ``C_s − C_r`` of prefix sums, which cancel catastrophically), after scaling every
    ``c_k`` by ``e^{−M}``, ``M = max_k log c_k``. When ``M <= 600`` this linear-domain evaluation
    is exact to rounding (terms below ``e^{M−745}`` contribute less than ``e^{−145}``); pairs with
    larger ``M`` fall back to the log-space table (a guard: with softmax-normalised logits we
    observed ``M <= 0`` even for logit gaps of 10^5).

    Examples
    --------
    >>> P = gumbel_max_coupling([2.0, 0.0, -1.0], [0.0, 1.0, 0.0])
    >>> bool(np.allclose(P.sum(axis=0), np.exp([0.0, 1.0, 0.0]) / np.exp([0.0, 1.0, 0.0]).sum()))
    True
    """
    a0, b0, batch, d = _prepare(alpha, beta, "gumbel_max_coupling")
    if d == 1:
        return np.ones(batch + (1, 1))
    a, b, order, a_s, b_s, nu_s, abar, bbar = _sorted_sequences(a0, b0)
    K = a.shape[0]
    log_c = _log_c(nu_s, abar, bbar)
    M = np.max(log_c, axis=1)
    M = np.where(np.isfinite(M), M, 0.0)  # all c_k = 0: no off-diagonal mass
    fast = M <= _FAST_MAX_LOG_C
    out = np.empty((K, d, d))
    if np.any(fast):
        f = np.flatnonzero(fast) if not np.all(fast) else slice(None)
        Mf = M[f]
        c = np.exp(log_c[f] - Mf[:, None])
        Kf = c.shape[0]
        # P_sorted[r, s] = e^{α_r + M} e^{β_s} Σ_{k=r}^{s−1} c̃_k   (running sums, zero for s <= r)
        P = np.zeros((Kf, d, d))
        np.cumsum(c[:, None, :] * _upper_mask(d)[None], axis=2, out=P[:, :, 1:])
        P *= np.exp(a_s[f] + Mf[:, None])[:, :, None]  # <= e^600
        P *= np.exp(b_s[f])[:, None, :]
        idx = np.arange(d)
        P[:, idx, idx] = np.exp(_log_diag(a_s[f], b_s[f], abar[f], bbar[f]))
        out[f] = _to_original(P, order[f])
    if not np.all(fast):
        s = np.flatnonzero(~fast)
        out[s] = np.exp(_log_table(a[s], b[s], order[s], a_s[s], b_s[s], nu_s[s], abar[s], bbar[s]))
    return out.reshape(batch + (d, d))


def log_gumbel_max_stay_probability(alpha, beta) -> np.ndarray:
    """``log P(X = Y)`` under the Gumbel-max coupling in ``O(d log d)`` per pair (no table).

    The sum of the diagonal of Lemma 3.7 (App. B.3); ``1 − exp`` of it is the probability that
    the marginal contribution is non-zero (the summand of the overall importance, Eq. 6).

    Parameters
    ----------
    alpha, beta : array_like of shape (..., d)
        Finite logits.

    Returns
    -------
    ndarray of shape (...,), float64
    """
    a, b = _check_logits(alpha, beta, "log_gumbel_max_stay_probability")
    batch = a.shape[:-1]
    d = a.shape[-1]
    if d == 1:
        return np.zeros(batch)
    _, _, _, a_s, b_s, _, abar, bbar = _sorted_sequences(a.reshape(-1, d), b.reshape(-1, d))
    ld = _log_diag(a_s, b_s, abar, bbar)
    mx = ld.max(axis=1, keepdims=True)
    out = mx[:, 0] + np.log(np.exp(ld - mx).sum(axis=1))
    return out.reshape(batch)


def bernoulli_comonotone_coupling(p_x, p_y) -> np.ndarray:
    """Joint table of two Bernoulli variables coupled comonotonically (Franceschi et al. 2024, Sec. 3.1).

    ``X = 1{U ≤ p_x}``, ``Y = 1{U ≤ p_y}`` with one shared ``U ~ U(0, 1)``; this is also the
    Gumbel-max coupling of two 2-class categoricals (the logistic difference of two Gumbels), so
    two classes reduce to the Bernoulli case.

    Parameters
    ----------
    p_x, p_y : array_like of shape (...,), float in [0, 1]
        Success probabilities.

    Returns
    -------
    ndarray of shape (..., 2, 2), float64
        ``out[..., a, b] = P(X = a, Y = b)`` for ``a, b ∈ {0, 1}``.

    Raises
    ------
    InvalidInputError
        If a probability is outside [0, 1] or not finite.
    """
    px = np.asarray(p_x, dtype=np.float64)
    py = np.asarray(p_y, dtype=np.float64)
    if px.shape != py.shape:
        raise InvalidInputError(f"bernoulli_comonotone_coupling: shapes differ: {px.shape} vs {py.shape}.")
    for name, p in (("p_x", px), ("p_y", py)):
        if not np.all((p >= 0.0) & (p <= 1.0)):
            raise InvalidInputError(
                f"bernoulli_comonotone_coupling: {name} must hold probabilities in [0, 1]; "
                f"got values in [{np.nanmin(p)}, {np.nanmax(p)}] (or NaN)."
            )
    m = np.minimum(px, py)
    M = np.maximum(px, py)
    out = np.empty(px.shape + (2, 2))
    out[..., 1, 1] = m
    out[..., 1, 0] = px - m
    out[..., 0, 1] = py - m
    out[..., 0, 0] = 1.0 - M
    return out


def monte_carlo_gumbel_max_coupling(alpha, beta, n_draws: int, random_state=None,
                                    chunk: int = 262_144) -> tuple[np.ndarray, np.ndarray]:
    """Monte Carlo estimate of the Gumbel-max joint table by sampling shared Gumbel noise.

    The reference the closed form is tested against: draw ``ε ~ Gumbel(0,1)^d`` ``n_draws``
    times, count ``(argmax(α+ε), argmax(β+ε))``.

    Parameters
    ----------
    alpha, beta : array_like of shape (d,)
        Finite logits.
    n_draws : int >= 1
        Number of Gumbel vectors.
    random_state : None, int or numpy.random.Generator
    chunk : int
        Draws per vectorised block (memory ``chunk × d`` floats).

    Returns
    -------
    estimate : ndarray of shape (d, d)
        Empirical joint frequencies.
    stderr : ndarray of shape (d, d)
        Binomial standard errors ``sqrt(p̂(1 − p̂)/n_draws)``.
    """
    a, b = _check_logits(alpha, beta, "monte_carlo_gumbel_max_coupling")
    if a.ndim != 1:
        raise InvalidInputError(f"monte_carlo_gumbel_max_coupling: expects 1-D logits; got shape {a.shape}.")
    check_param("monte_carlo_gumbel_max_coupling", "n_draws", n_draws,
                isinstance(n_draws, (int, np.integer)) and n_draws >= 1, "an int >= 1")
    rng = np.random.default_rng(random_state)
    d = a.shape[0]
    counts = np.zeros(d * d, dtype=np.int64)
    done = 0
    while done < n_draws:
        m = min(chunk, n_draws - done)
        eps = rng.gumbel(size=(m, d))
        x = np.argmax(a + eps, axis=1)
        y = np.argmax(b + eps, axis=1)
        counts += np.bincount(x * d + y, minlength=d * d)
        done += m
    p = counts.reshape(d, d) / n_draws
    return p, np.sqrt(p * (1.0 - p) / n_draws)
