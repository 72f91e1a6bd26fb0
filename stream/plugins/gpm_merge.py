"""Merging per-partition GPMs into one: the count-weighted ensemble g = Σ_k w_k g_k.

Parts that hold the same fit (one ``fit_id``: a learner worker refits all its partitions as one,
:mod:`learners.refit_group`) are that fit, counted once with the sum of their training counts. With equal length-scales, scalers and item-kernel constants the ensemble is again a GPM of Hu, Chau et al. (2022),
*Explaining Preferences with Shapley Values* (Sec. 2): its Nyström centres are the union of the
parts' centres and its coefficients are w_k α_k with w_k = n_k / Σ n, so Pref-SHAP explains it
exactly. Parts with different length-scales, scalers or constants cannot be pooled that way: the fit
with the most examples is used (logged). Unfitted parts are left out.

The merged learner carries ``examples_served``: the training count of the parts it is made of (the
dropped fits' examples are not in it), which :class:`stream.workers.live_models.LiveModels` reports as
the served model's examples (``/v1/models`` ``examples_seen``).
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
    fitted = _one_per_fit(fitted)
    if len(fitted) == 1:
        return _serving(fitted[0][0], fitted[0][1])
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
        lr, n = max(fitted, key=lambda p: p[1])
        log.info("GPM fits have different length-scales or scalers; serving the fit with the most examples "
                 "(%d of %d)", n, sum(k for _, k in fitted))
        return _serving(lr, n)
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
    merged_lr.examples_served = int(sum(n for _, n in fitted))
    return merged_lr


def _one_per_fit(fitted: list) -> list:
    """Parts holding one fit (same ``fit_id``) as one part with their summed training count, in first-seen order."""
    groups: dict = {}
    for lr, n in fitted:
        key = getattr(lr.model, "fit_id", None) or ("part", id(lr))
        if key in groups:
            groups[key][1] += n
        else:
            groups[key] = [lr, n]
    return [(lr, n) for lr, n in groups.values()]


def _serving(learner, n: int):
    """A shallow copy of ``learner`` carrying ``examples_served = n`` (the cached part itself is not modified)."""
    out = copy.copy(learner)
    out.examples_served = int(n)
    return out


def _scaler_params(model) -> np.ndarray:
    probe = np.linspace(-1.0, 1.0, 3)[:, None] * np.ones((1, len(model.feature_names)))
    return np.asarray(model.transform(probe), dtype=np.float64)


def _set_model(refitting, model) -> None:
    for attr in ("_model", "model_"):
        if hasattr(refitting, attr):
            setattr(refitting, attr, model)
            return
    raise InvalidInputError("Cannot install a merged GPM into this learner (no _model attribute).")
