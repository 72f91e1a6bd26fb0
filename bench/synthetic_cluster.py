"""The unrankable synthetic cluster duel data set of Hu, Chau et al. 2022 (Pref-SHAP), Section 4 "Synthetic data".

Generator (Hu, Chau et al. 2022, Section 4, first paragraph of "Synthetic data" and Fig. 1):

* 1,000 items; covariates ``p_i = [x0, xAB, xAC, xBC] ~ N(0, I_4)``;
* cluster ``c_i ∈ {A, B, C}`` drawn uniformly; item features ``x_i = [p_i, one_hot(c_i)]`` (d = 7);
* 40,000 matches between uniformly chosen pairs of distinct items; the outcome is deterministic:
  - different clusters {A, B}: the item with the larger ``xAB`` wins (``i ⪯ j`` iff ``x_j^AB ≥ x_i^AB``);
    likewise ``xAC`` for {A, C} and ``xBC`` for {B, C};
  - same cluster: the item with the larger within-cluster variable ``x0`` wins ("dictated by the
    maximum among the within-cluster variable, i.e. max(x0_i, x0_j)").

With uniform pairs, one third of the matches are within a cluster (decided by ``x0``) and 2/9 each
are decided by ``xAB``, ``xAC``, ``xBC`` — which is why the paper finds ``x0`` the most important feature
(Fig. 2). No cluster dominates another, so the data are not rankable.

Run ``python bench/synthetic_cluster.py`` to print a summary.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FEATURE_NAMES = ["x0", "xAB", "xAC", "xBC", "cluster_A", "cluster_B", "cluster_C"]

__all__ = ["FEATURE_NAMES", "SyntheticClusterData", "make_synthetic_cluster", "cluster_outcome"]


@dataclass
class SyntheticClusterData:
    """Items and matches of the synthetic cluster data set.

    Attributes
    ----------
    item_features : ndarray (n_items, 7) float64 — ``[x0, xAB, xAC, xBC, one_hot(cluster)]``
    feature_names : list[str]
    cluster : ndarray (n_items,) int64 — 0 = A, 1 = B, 2 = C
    left, right : ndarray (n_matches,) int64 — item indices
    outcome : ndarray (n_matches,) int64 — +1 if the left item wins, −1 otherwise
    deciding_feature : ndarray (n_matches,) int64 — column of the covariate that decided the match
    """

    item_features: np.ndarray
    feature_names: list
    cluster: np.ndarray
    left: np.ndarray
    right: np.ndarray
    outcome: np.ndarray
    deciding_feature: np.ndarray

    @property
    def XL(self) -> np.ndarray:
        return self.item_features[self.left]

    @property
    def XR(self) -> np.ndarray:
        return self.item_features[self.right]


# deciding covariate column for (cluster_i, cluster_j): same cluster → x0 (col 0); AB → 1, AC → 2, BC → 3
_DECIDER = np.array([[0, 1, 2], [1, 0, 3], [2, 3, 0]])


def cluster_outcome(item_features: np.ndarray, cluster: np.ndarray, left: np.ndarray, right: np.ndarray):
    """Deterministic outcomes of the paper's match rule; returns ``(outcome ±1, deciding column)``.

    Ties (equal deciding covariate, probability 0 for continuous covariates) go to the left item,
    following ``i ⪯ j iff x_j ≥ x_i`` read as "left wins when x_left ≥ x_right"."""
    col = _DECIDER[cluster[left], cluster[right]]
    vl = item_features[left, col]
    vr = item_features[right, col]
    return np.where(vl >= vr, 1, -1).astype(np.int64), col.astype(np.int64)


def make_synthetic_cluster(n_items: int = 1000, n_matches: int = 40000, seed: int = 0) -> SyntheticClusterData:
    """Generate the data set (Hu, Chau et al. 2022, Section 4).

    Parameters
    ----------
    n_items : int, default=1000
    n_matches : int, default=40000
    seed : int, default=0
        Seed of a private ``np.random.default_rng``.

    Returns
    -------
    SyntheticClusterData

    Examples
    --------
    >>> data = make_synthetic_cluster(n_items=50, n_matches=100, seed=1)
    >>> data.item_features.shape, data.outcome.shape
    ((50, 7), (100,))
    >>> bool((data.item_features[:, 4:].sum(1) == 1).all())
    True
    """
    rng = np.random.default_rng(seed)
    P = rng.standard_normal((n_items, 4))
    cluster = rng.integers(0, 3, size=n_items)
    X = np.concatenate([P, np.eye(3)[cluster]], 1)
    left = rng.integers(0, n_items, size=n_matches)
    offset = rng.integers(1, n_items, size=n_matches)  # distinct opponent, uniform over the others
    right = (left + offset) % n_items
    outcome, col = cluster_outcome(X, cluster, left, right)
    return SyntheticClusterData(X, list(FEATURE_NAMES), cluster.astype(np.int64), left.astype(np.int64),
                                right.astype(np.int64), outcome, col)


if __name__ == "__main__":
    data = make_synthetic_cluster()
    share = np.bincount(data.deciding_feature, minlength=4) / data.outcome.shape[0]
    print("items", data.item_features.shape, "matches", data.outcome.shape[0],
          "left-win rate %.3f" % (data.outcome == 1).mean(),
          "deciding share " + " ".join(f"{FEATURE_NAMES[j]}={share[j]:.3f}" for j in range(4)))
