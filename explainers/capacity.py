"""Explanations native to capacities: Shapley importance, interaction indices, violations.

From the Möbius masses m of a capacity model (Herin, Perny & Sokolovska, IJCAI 2024, Section 2;
Grabisch 1997, *k-order additive discrete fuzzy measures*, Equations for the Shapley value and the
interaction index in Möbius form):

* Shapley importance of criterion i:   φ_i = Σ_{S ∋ i} m(S) / |S|.
* Shapley interaction index of {i, j}: I_ij = Σ_{S ⊇ {i,j}} m(S) / (|S| − 1).
* Monotonicity / supermodularity violation: ‖[B m]₊‖²₂ (Section 5, Fig. 1a) and the worst row.

Additivity statement ("capacity-shapley"): the Shapley value of the game v is efficient,
Σ_i φ_i = v(N) − v(∅) = Σ_{S≠∅} m(S). The returned :class:`~explainers._result.Explanation` has
``base_values = 0`` (= v(∅)) and ``prediction = v(N) = Σ_S m(S)``, which is also
F(1, …, 1) − F(0, …, 0) for the Choquet and multilinear models; so
``base_values + values.sum() == prediction`` holds (up to rounding) and
``additivity_error()`` checks it. With ``normalize=True`` masses are divided by v(N) first
(the normalised capacity, v(N) = 1), so Σ φ_i = 1.
"""

from __future__ import annotations

import time

import numpy as np

from explainers._result import Explanation
from learners._mobius import capacity_from_mobius
from learners._subsets import MAX_FULL_N, SubsetIndex
from learners.capacity_constraints import CONSTRAINTS, constraint_residuals
from learners.exceptions import BudgetError, InvalidInputError, NotFittedError

__all__ = [
    "capacity_interaction",
    "capacity_shapley",
    "interaction_indices",
    "shapley_importance",
    "violation_report",
]


def _index_and_masses(model_or_mobius, index: SubsetIndex | None, feature_names):
    if index is None:
        m = np.asarray(model_or_mobius.mobius, dtype=np.float64)
        index = model_or_mobius.index
        names = list(model_or_mobius.feature_names) if feature_names is None else list(feature_names)
        meta = dict(model_name=getattr(model_or_mobius, "model_name", ""),
                    model_version=int(getattr(model_or_mobius, "version", 0)))
    else:
        m = np.asarray(model_or_mobius, dtype=np.float64)
        names = [f"c{i}" for i in range(index.n)] if feature_names is None else list(feature_names)
        meta = {}
    if m.shape != (index.d,):
        raise InvalidInputError(f"Expected {index.d} Möbius masses for {index!r}; got shape {m.shape}.")
    if not np.isfinite(m).all():
        raise InvalidInputError("Möbius masses must be finite; got NaN or inf.")
    if len(names) != index.n:
        raise InvalidInputError(f"Got {len(names)} feature names for {index.n} criteria.")
    return m, index, names, meta


def shapley_importance(m: np.ndarray, index: SubsetIndex) -> np.ndarray:
    """φ_i = Σ_{S∋i} m(S)/|S| for every criterion; ndarray of shape (n,). O(n d), vectorised over coalitions.

    Examples
    --------
    >>> idx = SubsetIndex(2)               # columns {0}, {1}, {0,1}
    >>> shapley_importance(np.array([0.2, 0.3, 0.5]), idx).tolist()
    [0.45, 0.55]
    """
    w = np.asarray(m, dtype=np.float64) / index.sizes
    member = (index.masks[None, :] >> np.arange(index.n)[:, None]) & 1
    return member.astype(np.float64) @ w


def interaction_indices(m: np.ndarray, index: SubsetIndex) -> np.ndarray:
    """Shapley interaction indices I_ij = Σ_{S⊇{i,j}} m(S)/(|S|−1); symmetric ndarray (n, n), zero diagonal.

    Examples
    --------
    >>> idx = SubsetIndex(2)
    >>> interaction_indices(np.array([0.2, 0.3, 0.5]), idx).tolist()
    [[0.0, 0.5], [0.5, 0.0]]
    """
    m = np.asarray(m, dtype=np.float64)
    keep = index.sizes >= 2
    w = m[keep] / (index.sizes[keep] - 1)
    member = ((index.masks[keep][None, :] >> np.arange(index.n)[:, None]) & 1).astype(np.float64)
    out = (member * w) @ member.T
    np.fill_diagonal(out, 0.0)
    return out


def capacity_shapley(model_or_mobius, index: SubsetIndex | None = None, feature_names=None,
                     normalize: bool = False) -> Explanation:
    """Shapley importance of each criterion as an :class:`Explanation` (method ``"capacity-shapley"``).

    Parameters
    ----------
    model_or_mobius : CapacityRDA-like or ndarray of shape (d,)
        A fitted capacity learner (anything with ``mobius``, ``index``, ``feature_names``) or a
        Möbius vector, then ``index`` is required.
    index : SubsetIndex, optional
    feature_names : sequence of str, optional
    normalize : bool, default False
        Divide the masses by v(N) = Σ m(S) first (requires v(N) > 0).

    Returns
    -------
    Explanation
        ``values`` (n,) = φ; ``base_values`` = 0 = v(∅); ``prediction`` = v(N) = Σ_S m(S)
        (= F(1…1) − F(0…0)); ``extra`` = {"v_N", "normalized", "nonzero_masses"}.

    Raises
    ------
    NotFittedError
        If ``normalize`` and v(N) ≤ 0.
    InvalidInputError
        Masses of the wrong shape or not finite.
    """
    t0 = time.perf_counter()
    m, index, names, meta = _index_and_masses(model_or_mobius, index, feature_names)
    vN = float(m.sum())
    if normalize:
        if not vN > 0:
            raise NotFittedError(f"v(N) = {vN} ≤ 0: cannot normalise the capacity; learn more examples first.")
        m = m / vN
    phi = shapley_importance(m, index)
    return Explanation(values=phi, base_values=0.0, feature_names=names, method="capacity-shapley",
                       prediction=float(m.sum()), compute_time=time.perf_counter() - t0,
                       extra={"v_N": vN, "normalized": bool(normalize),
                              "nonzero_masses": int(np.count_nonzero(m))}, **meta)


def capacity_interaction(model_or_mobius, index: SubsetIndex | None = None, feature_names=None,
                         normalize: bool = False) -> Explanation:
    """Pairwise Shapley interaction indices as an :class:`Explanation` (method ``"capacity-interaction"``).

    ``values`` are the Shapley importances φ (so the efficiency statement of
    :func:`capacity_shapley` still holds); ``extra["interactions"]`` is the (n, n) matrix I_ij
    (positive: complementary criteria / synergy, negative: redundancy) and
    ``extra["pairs"]`` lists ``[name_i, name_j, I_ij]`` sorted by |I_ij| descending.
    """
    t0 = time.perf_counter()
    exp = capacity_shapley(model_or_mobius, index, feature_names, normalize)
    m, index, names, meta = _index_and_masses(model_or_mobius, index, feature_names)
    if normalize:
        m = m / m.sum()
    I = interaction_indices(m, index)
    iu = np.triu_indices(index.n, 1)
    order = np.argsort(-np.abs(I[iu]), kind="stable")
    pairs = [[names[iu[0][k]], names[iu[1][k]], float(I[iu][k])] for k in order]
    exp.method = "capacity-interaction"
    exp.extra = dict(exp.extra, interactions=I, pairs=pairs)
    exp.compute_time = time.perf_counter() - t0
    return exp


def violation_report(model_or_mobius, index: SubsetIndex | None = None,
                     constraints=CONSTRAINTS) -> dict:
    """Monotonicity / supermodularity violation of the capacity (Section 5, Fig. 1a).

    Returns
    -------
    dict
        For each constraint block: ``{"violation": ‖[B m]₊‖²₂, "max": max_row (B m)_r (≤ 0 iff
        satisfied), "n_violated": rows with (B m)_r > 1e-12, "n_rows": rows}``.

    Raises
    ------
    BudgetError
        If n exceeds the full set-function budget (2**24).
    """
    if index is None:
        m, index = np.asarray(model_or_mobius.mobius, dtype=np.float64), model_or_mobius.index
    else:
        m = np.asarray(model_or_mobius, dtype=np.float64)
    if index.n > MAX_FULL_N:
        raise BudgetError(f"Violation needs the full capacity (2**{index.n} values), above 2**{MAX_FULL_N}.")
    v = capacity_from_mobius(m, index)
    out = {}
    for c in constraints:
        r = constraint_residuals(v, (c,))
        out[c] = {"violation": float(np.square(np.maximum(r, 0)).sum()), "max": float(r.max()) if r.size else 0.0,
                  "n_violated": int((r > 1e-12).sum()), "n_rows": int(r.size)}
    return out
