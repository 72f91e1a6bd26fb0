"""Metrics for ranking explanations (Pliatsika et al. 2024, Section 6): fidelity, agreement, sensitivity.

* **Fidelity** (Eq. 8): ``F(g, v) = 1 − |QoI(v) − (E[QoI] + Σ_i g(i, v))| / Z`` — how well the
  explanation reconstructs the outcome from the mean outcome (efficiency); ``Z`` is the largest
  distance between two outcomes (rank: ``n``; top-k: 1; score: the score range). Method fidelity
  (Eq. 9) is its mean over items. Pairwise fidelity is 1 when the sign of ``Σφ`` predicts the
  relative order of the pair, 0 otherwise, averaged over pairs.
* **Agreement** (Eq. 10/11) between two explanation vectors, each normalised to ``[0, 1]`` with 1 =
  full agreement: Kendall's tau distance between the feature orders, Jaccard index of the top-2
  features, Euclidean distance between the unit-normalised vectors.
* **Sensitivity** (Eq. 12): mean agreement between the explanations of each item and its
  neighbours.

The functions take plain arrays (so that they also compare ShaRP with other methods) and have
``explanation_*`` conveniences that read an :class:`~explainers._result.Explanation`.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from explainers._result import Explanation
from explainers.exceptions import InvalidInputError, check_param

__all__ = [
    "SIMILARITIES",
    "euclidean_agreement",
    "explanation_agreement",
    "explanation_fidelity",
    "feature_neighbours",
    "fidelity",
    "jaccard_topk_agreement",
    "kendall_tau_agreement",
    "method_agreement",
    "method_fidelity",
    "pairwise_fidelity",
    "rank_neighbours",
    "sensitivity",
]


def _vec(a: Any, name: str) -> np.ndarray:
    v = np.asarray(a, dtype=np.float64)
    if v.ndim != 1 or v.size == 0 or not np.all(np.isfinite(v)):
        raise InvalidInputError(f"{name} must be a finite 1-D explanation vector (one value per feature); "
                                f"got shape {v.shape}.")
    return v


def _pair(a: Any, b: Any) -> tuple[np.ndarray, np.ndarray]:
    a, b = _vec(a, "a"), _vec(b, "b")
    if a.size != b.size:
        raise InvalidInputError(f"Explanations to compare must have the same number of features; got {a.size} and {b.size}.")
    return a, b


# --------------------------------------------------------------------------- fidelity
def fidelity(values: Any, base_values: Any, prediction: Any, normalizer: float) -> np.ndarray:
    """Per-item explanation fidelity, Eq. 8 of Pliatsika et al. 2024.

    ``F = 1 − |prediction − (base_values + Σ_i values_i)| / normalizer``: the outcome
    reconstructed from the mean outcome and the contributions (efficiency), compared with the
    actual outcome. Use the same sign convention for all three (ShaRP's ``Explanation`` stores
    ``α·QoI``, e.g. ``−rank``; with positive ranks and ``α = −1`` contributions pass
    ``prediction=rank, base_values=mean_rank, values=−φ``).

    Parameters
    ----------
    values : array-like of shape (d,) or (n, d)
    base_values, prediction : float or array-like of shape (n,)
        Mean outcome over the reference and the item's outcome.
    normalizer : float
        ``Z > 0``, the largest distance between two outcomes (rank: number of items).

    Returns
    -------
    ndarray of shape (n,)

    Examples
    --------
    Texas A&M in CS Rankings (Section 6.1): contributions −20.78, −19.52, −18.71, −1.95 to a
    rank of 34 from the middle position 94.5 of 189:

    >>> float(fidelity([-20.78, -19.52, -18.71, -1.95], 94.5, 34, 189)[0].round(3))
    0.998
    """
    V = np.asarray(values, dtype=np.float64)
    V = V.reshape(1, -1) if V.ndim == 1 else V
    if V.ndim != 2:
        raise InvalidInputError(f"values must have shape (d,) or (n, d); got {np.shape(values)}.")
    check_param("fidelity", "normalizer", normalizer, np.isscalar(normalizer) and float(normalizer) > 0,
                "a float > 0 (the largest distance between two outcomes)")
    base = np.broadcast_to(np.asarray(base_values, dtype=np.float64).reshape(-1), (V.shape[0],))
    pred = np.broadcast_to(np.asarray(prediction, dtype=np.float64).reshape(-1), (V.shape[0],))
    return 1.0 - np.abs(pred - (base + V.sum(axis=1))) / float(normalizer)


def explanation_fidelity(expl: Explanation, normalizer: float | None = None) -> np.ndarray:
    """Eq. 8 for every instance of a ShaRP :class:`Explanation` (``normalizer`` default:
    ``expl.extra["normalizer"]``). For ``"sharp-pairwise"`` returns :func:`pairwise_fidelity`."""
    if expl.method == "sharp-pairwise":
        return pairwise_fidelity(expl.values, expl.extra["outcome_difference"])
    if expl.prediction is None:
        raise InvalidInputError(f"The {expl.method!r} explanation has no prediction; fidelity needs the outcome.")
    z = normalizer if normalizer is not None else expl.extra.get("normalizer")
    if z is None:
        raise InvalidInputError("Pass normalizer= (the largest distance between two outcomes); the explanation has none.")
    return fidelity(expl.values, expl.base_values, expl.prediction, float(z))


def method_fidelity(expl: Explanation, normalizer: float | None = None) -> float:
    """Eq. 9: mean fidelity over the explained items (or pairs for ``"sharp-pairwise"``)."""
    return float(np.mean(explanation_fidelity(expl, normalizer)))


def pairwise_fidelity(values: Any, outcome_difference: Any, tol: float = 1e-9) -> np.ndarray:
    """Pairwise fidelity (Section 6.1): 1 if ``sign(Σφ)`` equals the sign of the actual outcome
    difference of the pair (``α·(q(v) − q(u))``; > 0 when ``v`` is ahead), else 0.

    ``|x| ≤ tol`` counts as 0 (a tie must be predicted as a tie).

    Examples
    --------
    >>> pairwise_fidelity([[2.0, -1.0], [0.5, -1.0]], [1.0, 1.0]).tolist()
    [1.0, 0.0]
    """
    V = np.asarray(values, dtype=np.float64)
    V = V.reshape(1, -1) if V.ndim == 1 else V
    diff = np.asarray(outcome_difference, dtype=np.float64).reshape(-1)
    if diff.size != V.shape[0]:
        raise InvalidInputError(f"Got {diff.size} outcome differences for {V.shape[0]} pairwise explanations.")
    sg = lambda x: np.where(np.abs(x) <= tol, 0.0, np.sign(x))
    return (sg(V.sum(axis=1)) == sg(diff)).astype(np.float64)


# --------------------------------------------------------------------------- agreement
def _key(v: np.ndarray, by: str) -> np.ndarray:
    check_param("agreement", "by", by, by in ("abs", "value"), "'abs' (importance = |φ|) or 'value' (signed φ)")
    return np.abs(v) if by == "abs" else v


def kendall_tau_agreement(a: Any, b: Any, by: str = "abs") -> float:
    """``1 −`` normalised Kendall tau distance between the feature orders of two explanations.

    Features are ordered by ``|φ|`` (``by="abs"``, default) or by the signed ``φ``. A feature pair
    ordered oppositely counts 1, a pair tied in exactly one explanation counts ½, and the sum is
    divided by ``d(d−1)/2``. One feature: 1.0.

    Examples
    --------
    Section 6.2: the rank explanation orders Texas A&M's features ⟨Systems, AI, Inter, Theory⟩,
    the score explanation ⟨Inter, AI, Systems, Theory⟩ — 3 of 6 pairs disagree:

    >>> kendall_tau_agreement([3.0, 4.0, 1.0, 2.0], [3.0, 2.0, 1.0, 4.0])
    0.5
    """
    a, b = _pair(a, b)
    d = a.size
    if d == 1:
        return 1.0
    ka, kb = _key(a, by), _key(b, by)
    da = np.sign(ka[:, None] - ka[None, :])
    db = np.sign(kb[:, None] - kb[None, :])
    iu = np.triu_indices(d, 1)
    da, db = da[iu], db[iu]
    disc = (da * db < 0).sum() + 0.5 * ((da == 0) != (db == 0)).sum()
    return float(1.0 - disc / (d * (d - 1) / 2))


def jaccard_topk_agreement(a: Any, b: Any, k: int = 2, by: str = "abs") -> float:
    """Jaccard index of the ``k`` most important features of two explanations (paper: top-2).

    The top-k set takes the ``k`` largest ``|φ|`` (or signed φ), ties broken by feature index.

    Examples
    --------
    >>> jaccard_topk_agreement([5.0, 4.0, 0.1], [5.0, 0.2, 3.0])
    0.3333333333333333
    """
    a, b = _pair(a, b)
    check_param("jaccard_topk_agreement", "k", k, isinstance(k, (int, np.integer)) and 1 <= k <= a.size,
                f"an int in [1, {a.size}]")
    ta = set(np.argsort(-_key(a, by), kind="stable")[:k].tolist())
    tb = set(np.argsort(-_key(b, by), kind="stable")[:k].tolist())
    return len(ta & tb) / len(ta | tb)


def euclidean_agreement(a: Any, b: Any) -> float:
    """``1 − ‖a/‖a‖ − b/‖b‖‖ / 2``: Euclidean distance of the unit-normalised explanations,
    mapped to ``[0, 1]`` (Appendix D.4: "converted to unit vectors"; the distance of two unit
    vectors is at most 2). A zero vector stays zero, so zero vs. non-zero gives 0.5 and two zero
    vectors 1.0.

    Examples
    --------
    >>> euclidean_agreement([1.0, 0.0], [2.0, 0.0]), euclidean_agreement([1.0, 0.0], [-3.0, 0.0])
    (1.0, 0.0)
    """
    a, b = _pair(a, b)
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    ua = a / na if na > 0 else a
    ub = b / nb if nb > 0 else b
    return float(1.0 - np.linalg.norm(ua - ub) / 2.0)


SIMILARITIES: dict[str, Callable[..., float]] = {
    "kendall": kendall_tau_agreement,
    "jaccard": jaccard_topk_agreement,
    "euclidean": euclidean_agreement,
}


def _sim(sim: str | Callable) -> Callable:
    if callable(sim):
        return sim
    check_param("agreement", "sim", sim, sim in SIMILARITIES, f"one of {sorted(SIMILARITIES)} or a callable")
    return SIMILARITIES[sim]


def explanation_agreement(a: Any, b: Any, sim: str | Callable = "kendall") -> float:
    """Eq. 10: ``A(g, q, u, v, sim) = sim(g(u), q(v))`` for two explanation vectors."""
    return float(_sim(sim)(a, b))


def _matrix(G: Any, name: str) -> np.ndarray:
    M = G.values if isinstance(G, Explanation) else G
    M = np.asarray(M, dtype=np.float64)
    M = M.reshape(1, -1) if M.ndim == 1 else M
    if M.ndim != 2:
        raise InvalidInputError(f"{name} must be explanations of shape (n_items, n_features); got {M.shape}.")
    return M


def method_agreement(G: Any, Q: Any, sim: str | Callable = "kendall") -> float:
    """Eq. 11: mean over items of the agreement between methods ``g`` and ``q`` on the same item.

    Parameters
    ----------
    G, Q : Explanation or array-like of shape (n, d)
        Explanations of the same ``n`` items, in the same order.
    sim : {"kendall", "jaccard", "euclidean"} or callable
    """
    A, B = _matrix(G, "G"), _matrix(Q, "Q")
    if A.shape != B.shape:
        raise InvalidInputError(f"Both methods must explain the same items and features; got {A.shape} and {B.shape}.")
    f = _sim(sim)
    return float(np.mean([f(A[i], B[i]) for i in range(A.shape[0])]))


def sensitivity(G: Any, neighbours: Any, sim: str | Callable = "kendall") -> float:
    """Eq. 12: mean agreement between each item's explanation and its neighbours' (same method).

    Parameters
    ----------
    G : Explanation or array-like of shape (n, d)
    neighbours : sequence of n index sequences, or int array of shape (n, k)
        ``neighbours[v]`` are the rows of ``G`` similar to ``v`` (see :func:`rank_neighbours`,
        :func:`feature_neighbours`).
    sim : {"kendall", "jaccard", "euclidean"} or callable

    Raises
    ------
    InvalidInputError
        Wrong number of neighbour lists, out-of-range indices, or no neighbour at all.
    """
    A = _matrix(G, "G")
    f = _sim(sim)
    if len(neighbours) != A.shape[0]:
        raise InvalidInputError(f"Got {len(neighbours)} neighbour lists for {A.shape[0]} explanations.")
    vals = []
    for v, nb in enumerate(neighbours):
        for u in np.asarray(nb, dtype=np.int64).reshape(-1):
            if u < 0 or u >= A.shape[0]:
                raise InvalidInputError(f"Neighbour index {u} of item {v} outside [0, {A.shape[0] - 1}].")
            vals.append(f(A[v], A[u]))
    if not vals:
        raise InvalidInputError("No neighbour pairs given; sensitivity is undefined.")
    return float(np.mean(vals))


def rank_neighbours(ranks: Any, k: int = 2) -> np.ndarray:
    """For every item the ``k`` other items closest in rank (ties broken by index), shape (n, k).

    Examples
    --------
    >>> rank_neighbours([1, 2, 3, 10], k=1).ravel().tolist()
    [1, 0, 1, 2]
    """
    r = np.asarray(ranks, dtype=np.float64).reshape(-1)
    check_param("rank_neighbours", "k", k, isinstance(k, (int, np.integer)) and 1 <= k < r.size,
                f"an int in [1, {r.size - 1}]")
    D = np.abs(r[:, None] - r[None, :])
    np.fill_diagonal(D, np.inf)
    return np.argsort(D, axis=1, kind="stable")[:, :k]


def feature_neighbours(X: Any, k: int = 2) -> np.ndarray:
    """For every item the ``k`` nearest other items in Euclidean feature distance, shape (n, k)."""
    A = np.asarray(X, dtype=np.float64)
    if A.ndim != 2:
        raise InvalidInputError(f"X must have shape (n, d); got {A.shape}.")
    check_param("feature_neighbours", "k", k, isinstance(k, (int, np.integer)) and 1 <= k < A.shape[0],
                f"an int in [1, {A.shape[0] - 1}]")
    D = ((A[:, None, :] - A[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(D, np.inf)
    return np.argsort(D, axis=1, kind="stable")[:, :k]
