"""One-call Pref-SHAP functions (the worker's entry points), one per task of Table 1.

Hu, Chau, Ferrando Huertas & Sejdinovic (2022), *Explaining Preferences with Shapley Values*, Table 1 and Section 4 (baselines).
"""

from __future__ import annotations

import numpy as np

from explainers._result import Explanation
from explainers.prefshap.explainer import PrefSHAP

__all__ = ["explain_concat_duels", "explain_contexts", "explain_duel_contexts", "explain_duels", "explain_items",
           "explain_upm_duels", "preferential_value_function"]


def explain_duels(model, XL, XR, U=None, reference_items=None, *, outcome=None, reference_contexts=None,
                  **options) -> Explanation:
    """Pref-SHAP values of duels: the function the explainer worker calls (Table 1, row 1).

    Parameters
    ----------
    model : fitted GPM, CGPM or UPM (see :class:`PrefSHAP`)
    XL, XR : array-like of shape (P, d) or (d,)
        Left and right items, raw units, columns in ``model.feature_names`` order.
    U : array-like of shape (P, p), optional
        Contexts of a C-GPM (explains g_u; ḡ = E_U g_U when omitted).
    reference_items : array-like of shape (n, d), optional
        Item catalog used as the CME reference sample (default: the model's centre items).
    outcome : array-like of shape (P,), optional
        Orient each duel winner-vs-loser (values × y, data = x_winner − x_loser).
    reference_contexts : array-like, optional
    **options
        Any :class:`PrefSHAP` parameter (``max_coalitions``, ``cme_reg``, ``max_reference``,
        ``value_function``, ``solver``, ``feature_groups``, ``device``, ``dtype``,
        ``max_memory_mb``, ``random_state``).

    Returns
    -------
    Explanation
        method ``"pref-shap"``; ``base_values`` = ν(∅) (= 0), ``prediction`` = ν(Ω) = g(x^ℓ, x^r),
        and base + Σφ = prediction to rounding error.

    Raises
    ------
    NotFittedError, InvalidInputError, InvalidParameterError, BudgetError

    Examples
    --------
    >>> import numpy as np
    >>> class Tiny:                       # a GPM with one centre pair, identity scaling
    ...     feature_names = ["a", "b"]; lengthscales_ = np.array([1.0, 1.0])
    ...     centres_left_ = np.array([[1.0, 0.0]]); centres_right_ = np.array([[0.0, 0.0]])
    ...     alpha_ = np.array([2.0])
    ...     def transform(self, X): return np.asarray(X, float)
    >>> e = explain_duels(Tiny(), [[1.0, 0.0]], [[0.0, 0.0]], reference_items=[[0, 0], [1, 0], [0, 1], [1, 1]])
    >>> round(float(e.additivity_error()[0]), 12), e.top_features(1), e.extra["dropped_players"][0]   # per duel
    (0.0, ['a'], ['b'])
    """
    return PrefSHAP(model, reference_items, reference_contexts, **options).explain_duels(XL, XR, U, outcome)


def explain_items(model, X, opponents=None, reference_items=None, *, reference_contexts=None,
                  **options) -> Explanation:
    """An item's duels on average (Table 1, row 2); see :meth:`PrefSHAP.explain_items`."""
    return PrefSHAP(model, reference_items, reference_contexts, **options).explain_items(X, opponents)


def explain_duel_contexts(model, U, XL, XR, reference_items=None, *, reference_contexts=None, outcome=None,
                          **options) -> Explanation:
    """The context of each duel (Table 1, row 3); see :meth:`PrefSHAP.explain_duel_contexts`."""
    return PrefSHAP(model, reference_items, reference_contexts, **options).explain_duel_contexts(U, XL, XR, outcome)


def explain_contexts(model, U, XL_duels, XR_duels, reference_items=None, *, reference_contexts=None,
                     **options) -> Explanation:
    """Contexts on average over duels (Table 1, row 4); see :meth:`PrefSHAP.explain_contexts`."""
    return PrefSHAP(model, reference_items, reference_contexts, **options).explain_contexts(U, XL_duels, XR_duels)


def explain_upm_duels(upm, XL, XR, reference_items=None, *, outcome=None, **options) -> Explanation:
    """Baseline "upm-shap": SHAP of a UPM's utilities, φ(x^ℓ) − φ(x^r) (Section 4)."""
    return PrefSHAP(upm, reference_items, **options).explain_upm_duels(XL, XR, outcome)


def explain_concat_duels(model, XL, XR, reference_duels=None, *, outcome=None, **options) -> Explanation:
    """Baseline "concat-shap": naive concatenation with 2d players (Appendix B)."""
    return PrefSHAP(model, None, **options).explain_concat_duels(XL, XR, reference_duels, outcome)


def preferential_value_function(model, coalitions, XL, XR, U=None, reference_items=None, **options) -> np.ndarray:
    """ν̂_S(x^ℓ, x^r) of Proposition 3.2 for given coalitions: ndarray (n_coalitions, P)."""
    return PrefSHAP(model, reference_items, **options).coalition_values(coalitions, XL, XR, U)
