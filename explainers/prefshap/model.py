"""The arrays of a fitted GPM / C-GPM / UPM as Pref-SHAP needs them, and input checks.

Hu, Chau, Ferrando Huertas & Sejdinovic (2022), *Explaining Preferences with Shapley Values*, Section 2.1 (the models explained).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from learners.exceptions import InvalidInputError, NotFittedError

__all__: list[str] = []


@dataclass
class _Parts:
    """Arrays of a fitted GPM / C-GPM / UPM, as the explainer needs them (scaled units)."""

    kind: str
    feature_names: list
    ls: np.ndarray
    cl: np.ndarray
    cr: np.ndarray
    alpha: np.ndarray
    transform: Callable
    context_names: list = field(default_factory=list)
    ls_u: np.ndarray | None = None
    cu: np.ndarray | None = None
    transform_context: Callable | None = None
    model_name: str = ""
    model_version: int = 0
    constant: float = 0.0          # c of the item kernel c + k_RBF (GPM / C-GPM; 0 = pure k_E)


def _model_kind(model) -> str:
    if getattr(model, "centres_context_", None) is not None:
        return "cgpm"
    names = {type(model).__name__.lower(), str(getattr(model, "model_name", "")).lower()}
    if any(n == "upm" or n.startswith("upm") or n.endswith("upm") for n in names) and not any(
            "gpm" in n for n in names):
        return "upm"
    return "gpm"


def _parts(model) -> _Parts:
    need = ["feature_names", "lengthscales_", "centres_left_", "centres_right_", "alpha_"]
    missing = [a for a in need if getattr(model, a, None) is None]
    if missing:
        raise NotFittedError(
            f"Pref-SHAP explains a fitted GPM/C-GPM/UPM; {type(model).__name__} lacks {missing}. "
            "Fit (or refit) the model before explaining it.")
    names = list(model.feature_names)
    ls = np.asarray(model.lengthscales_, dtype=np.float64).reshape(-1)
    cl = np.asarray(model.centres_left_, dtype=np.float64)
    cr = np.asarray(model.centres_right_, dtype=np.float64)
    alpha = np.asarray(model.alpha_, dtype=np.float64).reshape(-1)
    d = len(names)
    if ls.shape != (d,) or cl.shape != cr.shape or cl.ndim != 2 or cl.shape[1] != d or alpha.shape != (cl.shape[0],):
        raise InvalidInputError(
            f"Inconsistent model arrays: {d} features, lengthscales {ls.shape}, centres {cl.shape}/{cr.shape}, "
            f"alpha {alpha.shape}; expected (d,), (M, d), (M, d), (M,).")
    if not np.all(ls > 0):
        raise InvalidInputError(f"Model lengthscales must be positive; got {ls.tolist()}.")
    version = getattr(model, "model_version", None)
    if version is None:
        version = getattr(model, "version", getattr(model, "version_", 0))
    try:
        version = int(version)
    except (TypeError, ValueError):
        version = 0
    kind = _model_kind(model)
    constant = float(getattr(model, "item_constant_", 0.0) or 0.0)
    if not (np.isfinite(constant) and constant >= 0) or (kind == "upm" and constant != 0):
        raise InvalidInputError(f"Model item_constant_ must be a finite float >= 0 (0 for a UPM); got {constant!r}.")
    p = _Parts(kind=kind, feature_names=names, ls=ls, cl=cl, cr=cr, alpha=alpha,
               transform=model.transform, model_name=str(getattr(model, "model_name", type(model).__name__)),
               model_version=version, constant=constant)
    if p.kind == "cgpm":
        p.context_names = list(model.context_names)
        p.ls_u = np.asarray(model.context_lengthscales_, dtype=np.float64).reshape(-1)
        p.cu = np.asarray(model.centres_context_, dtype=np.float64)
        p.transform_context = model.transform_context
        if p.cu.shape != (cl.shape[0], len(p.context_names)) or p.ls_u.shape != (len(p.context_names),):
            raise InvalidInputError(
                f"Inconsistent context arrays: {len(p.context_names)} context features, lengthscales "
                f"{p.ls_u.shape}, context centres {p.cu.shape}; expected (p,), (M, p).")
    return p


def _check_matrix(name: str, X, width: int, owner: str = "Pref-SHAP") -> np.ndarray:
    try:
        A = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{owner}: {name} must be a numeric array; got {type(X).__name__}.") from None
    if A.ndim == 1:
        A = A[None, :]
    if A.ndim != 2 or A.shape[1] != width:
        raise InvalidInputError(
            f"{owner}: {name} must have shape (n, {width}) (one column per feature, in the model's "
            f"feature order); got shape {np.shape(X)}.")
    if A.shape[0] == 0:
        raise InvalidInputError(f"{owner}: {name} is empty; pass at least one row.")
    if not np.all(np.isfinite(A)):
        raise InvalidInputError(f"{owner}: {name} contains NaN or infinite values; impute or drop those rows.")
    return A


def _orientation(outcome, P: int):
    """``extra["oriented"]``: "winner-loser" (outcome ±1), "left-right" (no outcome, or a tie: a tie has
    no winner and is not flipped); a per-duel list when a batch mixes both."""
    if outcome is None:
        return "left-right"
    y = np.asarray(outcome).reshape(-1)
    kinds = ["winner-loser" if v != 0 else "left-right" for v in y]
    return kinds[0] if len(set(kinds)) == 1 else kinds


def _outcome_sign(outcome, P: int) -> np.ndarray:
    """Per-duel orientation sign: the outcome (±1), +1 for ties and without outcomes."""
    if outcome is None:
        return np.ones(P)
    y = np.asarray(outcome).reshape(-1)
    if y.shape[0] != P or not np.all(np.isin(y, (-1, 0, 1))):
        raise InvalidInputError(f"outcome must hold {P} values in {{+1, -1, 0}}; got {np.asarray(outcome)!r:.80}.")
    return np.where(y == 0, 1.0, y.astype(float))
