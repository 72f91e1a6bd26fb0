"""K-fold cross-validated hyper-parameter selection of the GPM family (:class:`learners.gpm.GPM`).

Used by ``GPM.fit`` with ``selection="cv"`` (or ``"auto"`` on small data): the grid is the penalty
path λ × the length-scale multiplier m × the item-kernel constant c, each fold fitted along the
decreasing penalties with warm starts (``GPM._fit_path``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["select_cv"]


def select_cv(model, XLs, XRs, Us, y, val, pens, mults, rng):
    """K-fold cross-validated choice of ``(λ, (m, c))`` for the GPM ``model`` on small data; returns
    ``((λ, (m, c)), mean fold AUC)``.

    The pool is the (scaled, strict) training pairs plus, if given, the ``eval_set`` pairs ``val``;
    it is cut into ``cv_folds`` folds by a permutation from ``rng`` (deterministic given ``seed``).
    For every fold and multiplier the penalty path is fitted on the other folds and scored on the
    held-out fold; the grid point with the best mean fold ROC AUC wins (ties: smaller mean log
    loss; with ``scoring="log_loss"`` the order of the two keys is swapped). Fills ``cv_results_``
    with one dict per grid point (mean and per-fold ``val_auc`` / ``val_log_loss``).
    """
    PL, PR, PU, Py = XLs, XRs, Us, y
    if val is not None:
        PL, PR, Py = np.concatenate([XLs, val[0]]), np.concatenate([XRs, val[1]]), np.concatenate([y, val[3]])
        PU = None if Us is None else np.concatenate([Us, val[2]])
    n = Py.shape[0]
    perm = rng.permutation(n)
    if n > model.selection_max_train:
        perm = perm[:model.selection_max_train]
    folds = np.array_split(perm, model.cv_folds)
    scores = {(lam, m): ([], []) for m in mults for lam in pens}
    for f in range(model.cv_folds):
        vi = np.sort(folds[f])
        ti = np.sort(np.concatenate([folds[j] for j in range(model.cv_folds) if j != f]))
        fval = (PL[vi], PR[vi], None if PU is None else PU[vi], Py[vi])
        for m in mults:
            for lam, auc, ll in model._fit_path(PL[ti], PR[ti], None if PU is None else PU[ti], Py[ti], pens, m, fval):
                scores[(lam, m)][0].append(auc)
                scores[(lam, m)][1].append(ll)
    best_key, best, best_auc = None, (pens[-1], mults[0]), float("nan")
    for m in mults:
        for lam in pens:
            aucs, lls = scores[(lam, m)]
            fin = [a for a in aucs if np.isfinite(a)]
            auc = float(np.mean(fin)) if fin else float("nan")
            ll = float(np.mean(lls))
            model.cv_results_.append({"penalty": lam, "multiplier": m[0], "constant": m[1], "val_auc": auc, "val_log_loss": ll,
                                     "fold_auc": list(aucs), "fold_log_loss": list(lls)})
            a_key = -(auc if np.isfinite(auc) else -1.0)
            key = (a_key, ll) if model.scoring == "auc" else (ll, a_key)
            if best_key is None or key < best_key:
                best_key, best, best_auc = key, (lam, m), auc
    return best, best_auc
