"""Off-policy value of a learned ranking on logged bandit feedback (IPS and SNIPS, with intervals).

A log of impressions i = 1..n records the item a_i shown at position p_i, the click r_i ∈ {0, 1}
and the logging policy's propensity π_b(a_i | x_i, p_i). The value (click rate) of another policy
π_e that fills the same positions is estimated by

* **IPS** (Horvitz & Thompson 1952; Dudík, Langford & Li 2011, eq. 1):
  V̂ = (1/n) Σ w_i r_i, w_i = π_e(a_i | x_i, p_i) / π_b(a_i | x_i, p_i); unbiased when π_b > 0
  wherever π_e > 0; interval V̂ ± z·sd(w r)/√n (central limit theorem);
* **SNIPS** (Swaminathan & Joachims 2015, eq. 2): V̂ = Σ w_i r_i / Σ w_i, biased but bounded
  by the largest reward and with a far smaller variance; interval by the delta method,
  se² = Σ w_i² (r_i − V̂)² / (Σ w_i)².

This is the per-position ("independent") estimator of Open Bandit (Saito et al. 2021, §4):
each position's click is a bandit reward of the item put there. The evaluated policies are
rankings of a campaign's items by learned scores (:func:`ranking_weights`): ``ranked`` puts the
j-th best item at position j; ``top_k_uniform`` shows the k best items in a uniformly random
order (a stochastic policy, k times more impressions match a uniform logger).

Examples
--------
>>> est = ips_estimate(np.array([1.0, 0.0, 0.0, 1.0]), np.array([2.0, 2.0, 0.0, 0.0]))
>>> est.value, est.matched
(0.5, 2)
>>> snips_estimate(np.array([1.0, 0.0, 0.0, 1.0]), np.array([2.0, 2.0, 0.0, 0.0])).value
0.5
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from learners.exceptions import InvalidInputError, InvalidParameterError

__all__ = ["Estimate", "ips_estimate", "on_policy_estimate", "ranking_weights", "snips_estimate"]


@dataclass(frozen=True)
class Estimate:
    """A policy-value estimate.

    Attributes
    ----------
    value : float
        Estimated click rate per impression.
    lo, hi : float
        Confidence interval (normal approximation at ``z``).
    se : float
        Standard error.
    n : int
        Impressions used.
    matched : int
        Impressions with a non-zero importance weight.
    ess : float
        Effective sample size (Σ w)² / Σ w² (Kong 1992); small means a wide interval.
    method : str
    """

    value: float
    lo: float
    hi: float
    se: float
    n: int
    matched: int
    ess: float
    method: str

    def as_dict(self) -> dict:
        """A JSON-ready dict."""
        return asdict(self)


def _check(reward, w) -> tuple[np.ndarray, np.ndarray]:
    r = np.asarray(reward, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    if r.shape != w.shape or r.ndim != 1 or len(r) == 0:
        raise InvalidInputError(f"reward and weights must be 1-d arrays of the same non-zero length; got {r.shape} and {w.shape}.")
    if not (np.isfinite(r).all() and np.isfinite(w).all()) or (w < 0).any():
        raise InvalidInputError("rewards must be finite and importance weights finite and ≥ 0.")
    return r, w


def _ess(w: np.ndarray) -> float:
    s2 = float((w * w).sum())
    return float(w.sum()) ** 2 / s2 if s2 > 0 else 0.0


def ips_estimate(reward, w, z: float = 1.96) -> Estimate:
    """Inverse-propensity-score estimate of the value with a CLT interval.

    Parameters
    ----------
    reward : ndarray of shape (n,)
    w : ndarray of shape (n,)
        Importance weights π_e / π_b.
    z : float, default 1.96
    """
    r, w = _check(reward, w)
    x = w * r
    v = float(x.mean())
    se = float(x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else float("inf")
    return Estimate(v, v - z * se, v + z * se, se, len(r), int((w > 0).sum()), _ess(w), "ips")


def snips_estimate(reward, w, z: float = 1.96) -> Estimate:
    """Self-normalised IPS estimate with a delta-method interval (NaN when no weight is positive)."""
    r, w = _check(reward, w)
    sw = float(w.sum())
    if sw <= 0:
        nan = float("nan")
        return Estimate(nan, nan, nan, nan, len(r), 0, 0.0, "snips")
    v = float((w * r).sum() / sw)
    se = float(math.sqrt(float((w * w * (r - v) ** 2).sum())) / sw)
    return Estimate(v, v - z * se, v + z * se, se, len(r), int((w > 0).sum()), _ess(w), "snips")


def on_policy_estimate(reward, z: float = 1.96) -> Estimate:
    """The logging policy's own click rate (all weights 1) with its CLT interval."""
    r = np.asarray(reward, dtype=np.float64)
    e = ips_estimate(r, np.ones_like(r), z)
    return Estimate(e.value, e.lo, e.hi, e.se, e.n, e.matched, e.ess, "on-policy")


def ranking_weights(item, position, propensity, scores, policy: str = "ranked", k: int | None = None) -> np.ndarray:
    """Importance weights π_e / π_b of a ranking by ``scores`` for logged impressions.

    Parameters
    ----------
    item : ndarray of shape (n,), int
        Logged item per impression (index into ``scores``).
    position : ndarray of shape (n,), int (1-based)
    propensity : ndarray of shape (n,)
        π_b of the logged item at the logged position.
    scores : ndarray of shape (n_items,)
        Learned scores of the items (higher = better).
    policy : {"ranked", "top_k_uniform"}
        ``ranked``: π_e(a | j) = 1 if a is the j-th best item; ``top_k_uniform``: π_e(a | j)
        = 1/k for the k best items (any order), k = the number of positions.
    k : int, optional
        Number of positions (default: the largest logged position).

    Returns
    -------
    ndarray of shape (n,)
    """
    item = np.asarray(item, dtype=np.int64)
    position = np.asarray(position, dtype=np.int64)
    prop = np.asarray(propensity, dtype=np.float64)
    scores = np.asarray(scores, dtype=np.float64)
    k = int(position.max()) if k is None else int(k)
    if policy not in ("ranked", "top_k_uniform"):
        raise InvalidParameterError(f"policy must be 'ranked' or 'top_k_uniform'; got {policy!r}.")
    if k > len(scores):
        raise InvalidInputError(f"{k} positions but only {len(scores)} items to rank.")
    order = np.argsort(-scores, kind="stable")[:k]
    if policy == "ranked":
        pe = (position <= k) & (item == order[np.clip(position, 1, k) - 1])
        pe = pe.astype(np.float64)
    else:
        pe = np.isin(item, order).astype(np.float64) / k
    return pe / prop
