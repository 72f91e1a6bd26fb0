"""Merging per-partition GPMs into one: the count-weighted ensemble g = Σ_k w_k g_k.

With equal length-scales, scalers and item-kernel constants the ensemble is again a GPM of Hu, Chau et al. (2022),
*Explaining Preferences with Shapley Values* (Sec. 2): its Nyström centres are the union of the
parts' centres and its coefficients are w_k α_k with w_k = n_k / Σ n, so Pref-SHAP explains it
exactly. Parts with different length-scales, scalers or constants cannot be pooled that way: the part
with the most examples is used (logged). Unfitted parts are left out.
"""

from __future__ import annotations

import copy
import logging

import numpy as np

from learners.exceptions import InvalidInputError

__all__ = ["merge_gpm"]

log = logging.getLogger(__name__)


def merge_gpm(parts: list):
    """Combine ``[(refitting GPM learner, training_count), ...]`` into one learner (see the module docstring).

    The parts are not modified (the merged learner and model are shallow copies).
    """
    fitted = [(lr, n) for lr, n in parts if getattr(lr, "model", None) is not None]
    if not fitted:
        return max(parts, key=lambda p: p[1])[0]
    if len(fitted) == 1:
        return fitted[0][0]
    models = [lr.model for lr, _ in fitted]
    ls0 = np.asarray(models[0].lengthscales_)
    same = all(np.allclose(np.asarray(m.lengthscales_), ls0) for m in models)
    same = same and all(np.allclose(_scaler_params(m), _scaler_params(models[0])) for m in models)
    c0 = float(getattr(models[0], "item_constant_", 0.0))
    same = same and all(float(getattr(m, "item_constant_", 0.0)) == c0 for m in models)   # same item kernel c + k
    ctx = getattr(models[0], "centres_context_", None) is not None
    if ctx:
        same = same and all(np.allclose(np.asarray(m.context_lengthscales_), np.asarray(models[0].context_lengthscales_))
                            for m in models)
    if not same:
        log.info("GPM parts have different length-scales or scalers; using the part with the most examples")
        return max(fitted, key=lambda p: p[1])[0]
    total = float(sum(n for _, n in fitted)) or 1.0
    base_lr = max(fitted, key=lambda p: p[1])[0]
    merged_lr = copy.copy(base_lr)
    merged = copy.copy(base_lr.model)
    merged.centres_left_ = np.concatenate([m.centres_left_ for m in models])
    merged.centres_right_ = np.concatenate([m.centres_right_ for m in models])
    merged.alpha_ = np.concatenate([np.asarray(m.alpha_) * (n / total) for m, (_, n) in zip(models, fitted)])
    if ctx:
        merged.centres_context_ = np.concatenate([m.centres_context_ for m in models])
    _set_model(merged_lr, merged)
    return merged_lr


def _scaler_params(model) -> np.ndarray:
    probe = np.linspace(-1.0, 1.0, 3)[:, None] * np.ones((1, len(model.feature_names)))
    return np.asarray(model.transform(probe), dtype=np.float64)


def _set_model(refitting, model) -> None:
    for attr in ("_model", "model_"):
        if hasattr(refitting, attr):
            setattr(refitting, attr, model)
            return
    raise InvalidInputError("Cannot install a merged GPM into this learner (no _model attribute).")
