"""Exact Shapley values of a linear preference margin g = w·(x_left − x_right).

Players are the item features j = 1..d; feature j of a pair is the couple (x_l,j, x_r,j), so both
items' values of a feature enter or leave a coalition together — the player set of Pref-SHAP's
preferential value function for items (Hu et al., *Explaining Preferences with Shapley Values*,
NeurIPS 2022, Sec. 3.1, Def. 3.1, Eq. (8)); the naive alternative of 2d players (one per item
and feature) gives inconsistent explanations (their Sec. 3 and App. B).

Value function: Eq. (8) with the marginal (interventional) reference, i.e. the expectation over a
background distribution of pairs, v(S) = E_b[g((x_l,S, b_l,S̄), (x_r,S, b_r,S̄))]. For the
utility-based model g = f(x_l) − f(x_r) with linear f (UPM, their Eq. (1)), g = w·(x_l − x_r) and

    v(S) = Σ_{j∈S} w_j D_j + Σ_{j∉S} w_j μ_j,   D = x_l − x_r,  μ = E_b[b_l − b_r],

an additive game, whose Shapley values (their Eq. (3); Lundberg & Lee 2017, "Linear SHAP" with
independent features) are exact and closed-form:

    φ_j = w_j (D_j − μ_j),     base value v(∅) = w·μ,     Σ_j φ_j + w·μ = g(x_l, x_r)  (efficiency).

Properties (tested): efficiency; null player (w_j = 0 ⇒ φ_j = 0); skew-symmetry — swapping
the items of the explained pair *and* of the background (μ → −μ) negates every φ_j. When left and
right items are i.i.d. draws from one item distribution, as the paper assumes for its reference
(Sec. 3.1), μ = E[X_l] − E[X_r] = 0 and φ_j = w_j D_j; that is the default here.
"""

from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from explainers._result import Explanation
from explainers.exceptions import InvalidInputError

__all__ = ["explain_linear"]


def explain_linear(model, XL, XR, background_mean_diff=None, feature_names: Sequence[str] | None = None,
                   model_version: int = 0, instance_ids: Sequence[str] | None = None) -> Explanation:
    """Exact Shapley values of the margin w·(x_l − x_r) of a linear preference model.

    Parameters
    ----------
    model : LinearBT or array_like of shape (n_features,) or (n_pairs, n_features)
        A model exposing ``weights`` (and ``feature_names``, ``model_name``), or the weight
        vector w itself, or one weight vector per pair (row i explains pair i with w_i: a
        personal model's w + δ_u for each pair's person).
    XL, XR : array_like of shape (n_pairs, n_features) or (n_features,)
        Left and right items of the explained pairs, columns in ``feature_names`` order.
    background_mean_diff : array_like of shape (n_features,) or (n_background, n_features), optional
        μ = E[b_l − b_r] over the background pairs, or the background differences b_l − b_r
        themselves (their mean is taken). Default zeros: left and right items i.i.d. from one
        item distribution (Hu et al. 2022, Sec. 3.1), so E[b_l − b_r] = 0.
    feature_names : sequence of str, optional
        Defaults to ``model.feature_names``; required when ``model`` is a bare weight vector.
    model_version : int, default 0
        Snapshot version recorded in the explanation.
    instance_ids : sequence of str, optional
        Event or request ids, one per pair.

    Returns
    -------
    Explanation
        ``method="linear-shapley"``; ``values`` (n_pairs, n_features) (1-D for 1-D input)
        with φ_j = w_j (D_j − μ_j); ``base_values`` = w·μ; ``prediction`` = w·D;
        ``data`` = D = x_l − x_r; ``extra["background_mean_diff"]`` = μ (a tuple: one μ shared by
        every record, never read as one entry per record when n_pairs = n_features).

    Raises
    ------
    InvalidInputError
        Shapes disagree with the number of weights, or inputs contain NaN/inf.
    NotFittedError
        ``model.weights`` is not available yet (a LinearBT that knows no feature names).

    Examples
    --------
    >>> e = explain_linear([2.0, 0.0, -1.0], [1.0, 5.0, 2.0], [0.0, 1.0, 1.0], feature_names=["a", "b", "c"])
    >>> e.values.tolist(), float(e.base_values), float(e.prediction)
    ([2.0, 0.0, -1.0], 0.0, 1.0)
    >>> float(e.additivity_error()[0])
    0.0
    >>> explain_linear([[1.0, 0.0], [0.0, 3.0]], [[1.0, 1.0], [1.0, 1.0]], [[0.0, 0.0], [0.0, 2.0]],
    ...                feature_names=["a", "b"]).values.tolist()   # one weight vector per pair
    [[1.0, 0.0], [0.0, -3.0]]
    """
    t0 = time.perf_counter()
    if hasattr(model, "weights"):
        w = np.asarray(model.weights, dtype=np.float64)
        names = list(feature_names) if feature_names is not None else list(getattr(model, "feature_names", []))
        model_name = getattr(model, "model_name", "")
    else:
        w = np.asarray(model, dtype=np.float64)
        if feature_names is None:
            raise InvalidInputError("explain_linear got a bare weight vector; pass feature_names too.")
        names = list(feature_names)
        model_name = ""
    if w.ndim not in (1, 2) or not np.isfinite(w).all():
        raise InvalidInputError("explain_linear needs finite weights of shape (n_features,) or (n_pairs, n_features); "
                                f"got shape {w.shape}.")
    d = w.shape[-1]
    if len(names) != d:
        raise InvalidInputError(f"explain_linear: {len(names)} feature names for {d} weights; pass one name per weight.")
    XL = np.asarray(XL, dtype=np.float64)
    XR = np.asarray(XR, dtype=np.float64)
    one = XL.ndim == 1
    if XL.shape != XR.shape or XL.ndim not in (1, 2) or XL.shape[-1] != d:
        raise InvalidInputError(
            f"explain_linear expects XL and XR of the same shape (n_pairs, {d}) or ({d},); got {XL.shape} and {XR.shape}.")
    if w.ndim == 2 and (one or w.shape[0] != XL.shape[0]):
        raise InvalidInputError(f"explain_linear: {w.shape[0]} weight rows for {1 if one else XL.shape[0]} pairs; pass one "
                                "row per pair of a 2-D XL.")
    D = XL - XR
    if not np.isfinite(D).all():
        raise InvalidInputError("explain_linear: XL and XR must be finite (no NaN or inf); x_left − x_right must not overflow.")
    if background_mean_diff is None:
        mu = np.zeros(d)
    else:
        B = np.asarray(background_mean_diff, dtype=np.float64)
        if B.ndim == 2 and B.shape[1] == d and B.shape[0] >= 1:
            mu = B.mean(axis=0)
        elif B.shape == (d,):
            mu = B
        else:
            raise InvalidInputError(f"background_mean_diff must have shape ({d},) or (n_background, {d}); got {B.shape}.")
        if not np.isfinite(mu).all():
            raise InvalidInputError("background_mean_diff must be finite (no NaN or inf).")
    phi = w * (D - mu)
    base = w @ mu
    pred = D @ w if w.ndim == 1 else np.einsum("ij,ij->i", D, w)
    n = 1 if one else D.shape[0]
    return Explanation(
        values=phi,
        base_values=float(base) if one else (base if w.ndim == 2 else np.full(n, float(base))),
        feature_names=names,
        method="linear-shapley",
        prediction=float(pred) if one else pred,
        model_name=model_name,
        model_version=int(model_version),
        data=D,
        instance_ids=None if instance_ids is None else [str(i) for i in instance_ids],
        compute_time=time.perf_counter() - t0,
        extra={"background_mean_diff": tuple(mu.tolist())},
    )
