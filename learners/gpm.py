"""Kernel preference models GPM, C-GPM and UPM (Hu, Chau et al. 2022, Section 2.1), fitted by FALKON.

* :class:`GPM` — generalised preference model ``p(y | x_l, x_r) = σ(y g(x_l, x_r))`` (Hu, Chau et al. 2022, eq. (2))
  with ``g ∈ H_{k_E}``, the RKHS of the generalised preferential kernel ``k_E`` (Chau et al. 2022):
  ``g(x_l, x_r) = Σ_m α_m k_E((x_l, x_r), (cl_m, cr_m))`` over ``M`` Nyström centres. With
  ``item_constant = c > 0`` the item kernel is ``(c + k)/√(1 + c)`` and ``k_E`` becomes
  ``(k_E + c·k_UPM)/(1 + c)``, which also contains UPM's ``f(a) − f(b)`` (issue 14 item 4; docs/gpm.md).
* :class:`CGPM` — context-specific GPM with kernel ``k_U(u, u_m) k_E(...)`` (Hu, Chau et al. 2022, Section 2.1,
  "Incorporating context variables").
* :class:`UPM` — utility model ``g(a, b) = f(a) − f(b)`` (Hu, Chau et al. 2022, eq. (1)), fitted with the pair kernel
  ``k(a,c) + k(b,d) − k(a,d) − k(b,c)`` so that ``f(x) = Σ_m α_m [k(x, cl_m) − k(x, cr_m)]``.

Fitting (all three): features are standardised with the mean/std of the *training* items
(``transform``); item kernels are product RBFs with per-feature length-scales
``ℓ_j = m · h_j · √d`` where ``h_j`` is the per-feature median heuristic
(:func:`learners.kernels.median_heuristic`) and ``m`` a global multiplier; the loss is kernel logistic
regression (default, as in the paper) or squared loss on ±1 labels, solved by
:class:`learners.falkon.Falkon`.

Hyper-parameters (issue 4 item 4): when ``penalty="auto"`` and/or ``lengthscale_multiplier="auto"``,
``(λ, m)`` are chosen by **hold-out validation** over ``penalty_grid × multiplier_grid`` (ROC AUC of
``g`` on the validation pairs, ties broken by log loss). The validation pairs are ``eval_set`` if
given, else a random ``validation_fraction`` of the training pairs. For each ``m`` the penalties are
visited from large to small with warm starts (the penalty path of LogisticFalkon). Selection runs on
at most ``selection_max_train`` training pairs; the final model is then fitted on all training
pairs (not the validation pairs) at the selected ``(λ, m)``. This differs from the paper, which tuned
kernel hyper-parameters by gradient descent (its ref. [43], Meanti et al. 2022).

On small data a 10 % hold-out holds a handful of pairs (≈ 10 contests for the chameleons of Hu, Chau et al. (2022),
Table 3), so its AUC is mostly noise. ``selection="cv"`` replaces it by **k-fold cross-validation**:
the training pairs (plus the ``eval_set`` pairs, if given) are cut into ``cv_folds`` folds by a
permutation drawn from ``np.random.default_rng(seed)``; for every fold and multiplier the penalty path
is fitted on the other folds and scored on the held-out fold; the grid point with the best **mean fold
ROC AUC** wins (ties: smaller mean log loss), and the final model is fitted on all training pairs
(``eval_set`` pairs are used for selection only). ``selection="auto"`` uses CV when fewer than
``cv_max_train`` (default 2,000) strict training pairs remain, else the hold-out. The default stays
``"holdout"`` (the stream refit of :mod:`learners.refit` reports its hold-out AUC and size); the
benchmark ``bench/gpm_paper.py`` uses ``"auto"``.

Pairs and outcomes: ``y = +1`` means the left item is preferred, ``−1`` the right one. Indifferent
outcomes ``y = 0`` are **dropped** (the likelihood (2) has no draws; Hu, Chau et al. (2022) footnote 1). With
``both_orders=True`` every pair is also added swapped with the opposite label. Because all three
kernels are skew-symmetric in the pair order, this changes neither the estimator nor the predictions
(the swapped kernel rows are the negated originals — see ``tests/test_gpm.py``); it only doubles the
work, which is why benchmarks on large data may switch it off. Skew-symmetry
``g(a, b) = −g(b, a)`` holds by construction for any coefficients.
"""

from __future__ import annotations

import math
import time
from typing import Sequence

import numpy as np
import torch

from learners.exceptions import InvalidInputError, NotFittedError, SnapshotError, check_param
from learners.falkon import Falkon, KnMOperator, default_block_size, default_n_centres, select_centres
from learners.kernels import PairKernel, kernel_matvec, median_heuristic, rbf
from learners.gpm_selection import select_cv
from learners.metrics import log_loss, roc_auc

__all__ = ["CGPM", "GPM", "UPM"]


def _as2d(name: str, a, width: int | None = None) -> np.ndarray:
    try:
        arr = np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{name} must be numeric; got an array of dtype {np.asarray(a).dtype}.") from None
    if arr.ndim == 1:
        arr = arr[None, :] if width is not None and arr.shape[0] == width else arr[:, None]
    if arr.ndim != 2:
        raise InvalidInputError(f"{name} must be 2-D of shape (n_pairs, n_features); got shape {arr.shape}.")
    if arr.shape[0] == 0:
        raise InvalidInputError(f"{name} is empty; need at least one pair.")
    if width is not None and arr.shape[1] != width:
        raise InvalidInputError(f"{name} has {arr.shape[1]} columns; the model expects {width}. Pass columns in feature_names order.")
    if not np.isfinite(arr).all():
        raise InvalidInputError(f"{name} contains NaN or infinite values; impute or drop those rows first.")
    return arr


class _PairModel:
    """Shared fitting/prediction of GPM, CGPM and UPM (see the module docstring)."""

    _kind = "gpm"
    model_name = "gpm"

    def __init__(self, feature_names: Sequence[str] | None = None, *, loss: str = "logistic",
                 penalty: float | str = "auto", lengthscale_multiplier: float | str = "auto",
                 penalty_grid: Sequence[float] = (1e-3, 1e-4, 1e-5, 1e-6, 1e-7),
                 multiplier_grid: Sequence[float] = (0.5, 1.0, 2.0),
                 item_constant: float | str | None = None, constant_grid: Sequence[float] = (0.0, 1.0, 10.0, 100.0),
                 n_centres: int | None = None, centre_factor: float = 10.0, max_centres: int = 2000,
                 validation_fraction: float = 0.1, selection_max_train: int = 10000, scoring: str = "auc",
                 selection: str = "holdout", cv_folds: int = 5, cv_max_train: int = 2000,
                 both_orders: bool = True, dtype: str = "float64", device: str | None = None, seed: int = 0,
                 max_iter: int = 25, tol: float = 1e-7, newton_final: int = 3, block_size: int | None = None,
                 cache_bytes: int = 512 * 2**20):
        self.feature_names_in = None if feature_names is None else list(feature_names)
        self.loss = loss
        self.penalty = penalty
        self.lengthscale_multiplier = lengthscale_multiplier
        self.penalty_grid = tuple(penalty_grid)
        self.multiplier_grid = tuple(multiplier_grid)
        self.item_constant = item_constant
        self.constant_grid = tuple(constant_grid)
        self.n_centres = n_centres
        self.centre_factor = centre_factor
        self.max_centres = max_centres
        self.validation_fraction = validation_fraction
        self.selection_max_train = selection_max_train
        self.scoring = scoring
        self.selection = selection
        self.cv_folds = cv_folds
        self.cv_max_train = cv_max_train
        self.both_orders = both_orders
        self.dtype = dtype
        self.device = device
        self.seed = seed
        self.max_iter = max_iter
        self.tol = tol
        self.newton_final = newton_final
        self.block_size = block_size
        self.cache_bytes = cache_bytes

    # ----------------------------------------------------------- validation
    def _check_params(self):
        o = type(self).__name__
        check_param(o, "loss", self.loss, self.loss in ("logistic", "squared"), "one of 'logistic', 'squared'")
        check_param(o, "penalty", self.penalty, self.penalty == "auto" or (isinstance(self.penalty, (int, float)) and self.penalty > 0), "'auto' or a float in (0, inf)")
        check_param(o, "lengthscale_multiplier", self.lengthscale_multiplier, self.lengthscale_multiplier == "auto" or (isinstance(self.lengthscale_multiplier, (int, float)) and self.lengthscale_multiplier > 0), "'auto' or a float in (0, inf)")
        check_param(o, "penalty_grid", self.penalty_grid, len(self.penalty_grid) > 0 and all(p > 0 for p in self.penalty_grid), "a non-empty sequence of positive floats")
        check_param(o, "multiplier_grid", self.multiplier_grid, len(self.multiplier_grid) > 0 and all(m > 0 for m in self.multiplier_grid), "a non-empty sequence of positive floats")
        ok_c = lambda c: isinstance(c, (int, float)) and not isinstance(c, bool) and math.isfinite(c) and c >= 0  # noqa: E731
        ic = self._item_constant
        check_param(o, "item_constant", self.item_constant, (ic == "auto" or ok_c(ic))
                    and (self._kind != "upm" or ic == 0), "None, 'auto' or a float in [0, inf) (0 or None for UPM)")
        check_param(o, "constant_grid", self.constant_grid, len(self.constant_grid) > 0 and all(ok_c(c) for c in self.constant_grid), "a non-empty sequence of floats in [0, inf)")
        check_param(o, "validation_fraction", self.validation_fraction, 0.0 <= self.validation_fraction < 1.0, "a float in the range [0, 1)")
        check_param(o, "scoring", self.scoring, self.scoring in ("auc", "log_loss"), "one of 'auc', 'log_loss'")
        check_param(o, "selection", self.selection, self.selection in ("auto", "holdout", "cv"), "one of 'auto', 'holdout', 'cv'")
        check_param(o, "cv_folds", self.cv_folds, isinstance(self.cv_folds, int) and not isinstance(self.cv_folds, bool) and self.cv_folds >= 2, "an int >= 2")
        check_param(o, "cv_max_train", self.cv_max_train, isinstance(self.cv_max_train, int) and self.cv_max_train >= 0, "an int >= 0")
        check_param(o, "dtype", self.dtype, self.dtype in ("float32", "float64"), "'float32' or 'float64'")
        check_param(o, "max_centres", self.max_centres, isinstance(self.max_centres, int) and self.max_centres >= 1, "an int >= 1")

    @property
    def _item_constant(self):
        """``item_constant`` with None resolved: "auto" for GPM / C-GPM, 0 for UPM."""
        if self.item_constant is None:
            return 0.0 if self._kind == "upm" else "auto"
        return self.item_constant

    @property
    def _torch_dtype(self):
        return torch.float64 if self.dtype == "float64" else torch.float32

    @property
    def _device(self):
        return torch.device(self.device) if self.device is not None else torch.device("cpu")

    def _check_fitted(self):
        if not hasattr(self, "alpha_"):
            raise NotFittedError(f"This {type(self).__name__} instance is not fitted yet; call fit(XL, XR, y) first.")

    def _check_pairs(self, XL, XR, U=None, y=None, fitting=False):
        d = None if fitting and self.feature_names_in is None else (len(self.feature_names_in) if fitting else self.n_features_)
        XL = _as2d("XL", XL, d)
        XR = _as2d("XR", XR, XL.shape[1])
        if XR.shape[0] != XL.shape[0]:
            raise InvalidInputError(f"XL has {XL.shape[0]} rows but XR has {XR.shape[0]}; pass one left and one right item per pair.")
        if self._kind == "cgpm":
            if U is None:
                raise InvalidInputError(f"{type(self).__name__} needs the context U of shape (n_pairs, n_context).")
            p = None if fitting and self.context_names_in is None else (len(self.context_names_in) if fitting else self.n_context_)
            U = _as2d("U", U, p)
            if U.shape[0] != XL.shape[0]:
                raise InvalidInputError(f"U has {U.shape[0]} rows but XL has {XL.shape[0]}.")
        elif U is not None:
            raise InvalidInputError(f"{type(self).__name__} takes no context; use CGPM for context-dependent preferences.")
        if y is not None:
            y = np.asarray(y).reshape(-1)
            if y.shape[0] != XL.shape[0]:
                raise InvalidInputError(f"y has {y.shape[0]} entries but there are {XL.shape[0]} pairs.")
            if not np.isin(y, (1, -1, 0)).all():
                raise InvalidInputError(f"y must contain outcomes in {{+1, -1, 0}}; got values {np.unique(y)[:5].tolist()}.")
        return XL, XR, U, y

    # ----------------------------------------------------------- scaling
    def transform(self, X) -> np.ndarray:
        """Scale items with the training mean/std: ``(X − mean_) / scale_``; (n, d) → (n, d) float64."""
        self._check_fitted()
        X = _as2d("X", X, self.n_features_)
        return (X - self.scaler_mean_) / self.scaler_scale_

    def _pack(self, XLs, XRs, Us=None) -> torch.Tensor:
        parts = [XLs, XRs] + ([Us] if Us is not None else [])
        return torch.as_tensor(np.concatenate(parts, 1)).to(self._torch_dtype).to(self._device)

    def _kernel(self, ls, lsu=None, constant: float = 0.0) -> PairKernel:
        dt, dev = self._torch_dtype, self._device
        return PairKernel(self._kind, torch.as_tensor(ls).to(dt).to(dev), None if lsu is None else torch.as_tensor(lsu).to(dt).to(dev),
                          float(constant))

    # ----------------------------------------------------------- fit
    def fit(self, XL, XR, y, U=None, eval_set=None):
        """Fit the preference function on pairs.

        Parameters
        ----------
        XL, XR : array of shape (n_pairs, d)
            Features of the left and right items (raw units; scaled internally).
        y : array of shape (n_pairs,)
            +1 (left preferred), −1 (right preferred) or 0 (indifferent: dropped).
        U : array of shape (n_pairs, p), optional
            Context (CGPM only).
        eval_set : tuple ``(XL_val, XR_val, y_val[, U_val])``, optional
            Validation pairs for the hyper-parameter search (else a random ``validation_fraction``).

        Returns
        -------
        self

        Raises
        ------
        InvalidInputError
            Mismatched widths or lengths, NaN/inf, empty data, labels outside {+1, −1, 0}, no
            non-tied pair, or only one outcome class.
        InvalidParameterError
            A constructor argument out of range.
        """
        self._check_params()
        t0 = time.perf_counter()
        XL, XR, U, y = self._check_pairs(XL, XR, U, y, fitting=True)
        keep = y != 0
        XL, XR, y = XL[keep], XR[keep], y[keep].astype(np.float64)
        U = U[keep] if U is not None else None
        if y.shape[0] == 0:
            raise InvalidInputError("No pair with a strict outcome (+1/-1) remains after dropping indifferences.")
        d = XL.shape[1]
        self.n_features_ = d
        self.feature_names = list(self.feature_names_in) if self.feature_names_in else [f"x{j}" for j in range(d)]
        # scaler on training items only
        items = np.concatenate([XL, XR], 0)
        self.scaler_mean_ = items.mean(0)
        sc = items.std(0)
        self.scaler_scale_ = np.where(sc > 1e-12, sc, 1.0)
        XLs, XRs = (XL - self.scaler_mean_) / self.scaler_scale_, (XR - self.scaler_mean_) / self.scaler_scale_
        self._base_ls = median_heuristic(np.concatenate([XLs, XRs], 0), seed=self.seed) * math.sqrt(d)
        Us, self._base_lsu = None, None
        if self._kind == "cgpm":
            self.n_context_ = U.shape[1]
            self.context_names = list(self.context_names_in) if self.context_names_in else [f"u{j}" for j in range(U.shape[1])]
            self.context_mean_ = U.mean(0)
            cs = U.std(0)
            self.context_scale_ = np.where(cs > 1e-12, cs, 1.0)
            Us = (U - self.context_mean_) / self.context_scale_
            self._base_lsu = median_heuristic(Us, seed=self.seed) * math.sqrt(U.shape[1])

        rng = np.random.default_rng(self.seed)
        auto = self.penalty == "auto" or self.lengthscale_multiplier == "auto" or self._item_constant == "auto"
        pens = sorted(self.penalty_grid, reverse=True) if self.penalty == "auto" else [float(self.penalty)]
        ms = list(self.multiplier_grid) if self.lengthscale_multiplier == "auto" else [float(self.lengthscale_multiplier)]
        cs = [float(c) for c in self.constant_grid] if self._item_constant == "auto" else [float(self._item_constant)]
        mults = [(m, c) for c in cs for m in ms]      # kernel grid points: (length-scale multiplier, item constant)
        searching = auto and (len(pens) > 1 or len(mults) > 1)
        n_strict = int(y.shape[0])
        use_cv = searching and (self.selection == "cv" or (self.selection == "auto" and n_strict < self.cv_max_train))
        use_cv = use_cv and n_strict >= 2 * self.cv_folds
        self.selection_ = "cv" if use_cv else ("holdout" if searching else "none")
        tr_idx = np.arange(y.shape[0])
        val = None
        if auto:
            if eval_set is not None:
                XLv, XRv = eval_set[0], eval_set[1]
                Uv = eval_set[3] if len(eval_set) > 3 else None
                XLv, XRv, Uv, yv = self._check_pairs(XLv, XRv, Uv, eval_set[2], fitting=False)
                kv = yv != 0
                val = ((XLv[kv] - self.scaler_mean_) / self.scaler_scale_, (XRv[kv] - self.scaler_mean_) / self.scaler_scale_,
                       None if Uv is None else (Uv[kv] - self.context_mean_) / self.context_scale_, yv[kv].astype(np.float64))
            elif self.validation_fraction > 0 and y.shape[0] >= 10 and not use_cv:
                perm = rng.permutation(y.shape[0])
                nv = max(1, int(round(self.validation_fraction * y.shape[0])))
                vi, tr_idx = np.sort(perm[:nv]), np.sort(perm[nv:])
                val = (XLs[vi], XRs[vi], None if Us is None else Us[vi], y[vi])
        self.cv_results_ = []
        best = (pens[-1], mults[0])
        cv_best_auc = float("nan")
        if use_cv:
            best, cv_best_auc = self._select_cv(XLs, XRs, Us, y, val, pens, mults, rng)
        elif val is not None and searching:
            sel = tr_idx
            if sel.shape[0] > self.selection_max_train:
                sel = np.sort(rng.choice(sel, self.selection_max_train, replace=False))
            best_key = None
            for m in mults:
                path = self._fit_path(XLs[sel], XRs[sel], None if Us is None else Us[sel], y[sel], pens, m, val)
                for lam, auc, ll in path:
                    self.cv_results_.append({"penalty": lam, "multiplier": m[0], "constant": m[1], "val_auc": auc, "val_log_loss": ll})
                    a_key = -(auc if np.isfinite(auc) else -1.0)
                    key = (a_key, ll) if self.scoring == "auc" else (ll, a_key)
                    if best_key is None or key < best_key:
                        best_key, best = key, (lam, m)
        self.penalty_, (self.multiplier_, self.item_constant_) = best[0], best[1]
        # final fit on all training pairs (minus the internal validation split)
        pens_final = [p for p in pens if p >= self.penalty_]
        path = self._fit_path(XLs[tr_idx], XRs[tr_idx], None if Us is None else Us[tr_idx], y[tr_idx], pens_final,
                              best[1], val, keep_model=True)
        self.val_auc_ = path[-1][1] if val is not None else float("nan")
        self.val_log_loss_ = path[-1][2] if val is not None else float("nan")
        if use_cv and val is None:  # no separate validation pairs: report the mean fold AUC of the selected point
            self.val_auc_ = cv_best_auc
            self.val_log_loss_ = next(r["val_log_loss"] for r in self.cv_results_
                                      if (r["penalty"], (r["multiplier"], r["constant"])) == best)
        self.n_train_ = int(tr_idx.shape[0])
        self.fit_time_ = time.perf_counter() - t0
        self.model_version = getattr(self, "model_version", 0) + 1
        return self

    def _select_cv(self, XLs, XRs, Us, y, val, pens, mults, rng):
        """K-fold cross-validated choice of the grid point (:func:`learners.gpm_selection.select_cv`)."""
        return select_cv(self, XLs, XRs, Us, y, val, pens, mults, rng)

    def _fit_path(self, XLs, XRs, Us, y, pens, mult, val, keep_model=False):
        """Fit along decreasing penalties ``pens`` (warm starts) at ``mult = (m, c)``; returns [(λ, val_auc, val_log_loss)]."""
        n0 = y.shape[0]
        mult, const = mult
        ls = self._base_ls * mult
        lsu = None if self._base_lsu is None else self._base_lsu * mult
        kern = self._kernel(ls, lsu, const)
        Z = self._pack(XLs, XRs, Us)
        yt = torch.as_tensor(y).to(self._torch_dtype).to(self._device)
        # centres: uniform among the original (not swapped) pairs with two distinct items
        distinct = np.flatnonzero(np.any(XLs != XRs, axis=1))
        cand = torch.as_tensor(distinct if distinct.size else np.arange(n0))
        M = self.n_centres if self.n_centres is not None else default_n_centres(n0 * (2 if self.both_orders else 1), self.centre_factor, self.max_centres)
        idx = select_centres(n0, M, torch.Generator().manual_seed(int(self.seed)), cand)
        if self.both_orders:
            Zsw = self._pack(XRs, XLs, Us)
            Z, yt = torch.cat([Z, Zsw], 0), torch.cat([yt, -yt], 0)
        solver = Falkon(kern, penalty=pens[0], loss=self.loss, max_iter=self.max_iter, tol=self.tol,
                        newton_final=self.newton_final, dtype=self._torch_dtype, device=self._device, seed=self.seed,
                        block_size=self.block_size, cache_bytes=self.cache_bytes)
        C = Z[idx.to(self._device)]
        op = KnMOperator(kern, Z, C, solver._block(C.shape[0], Z.element_size()), self.cache_bytes)
        Zv = None if val is None else self._pack(val[0], val[1], val[2])
        out, alpha = [], None
        for i, lam in enumerate(pens):
            solver.penalty = lam
            if self.loss == "logistic":
                solver.penalty_list = None if i == 0 else [lam] * self.newton_final
            solver.fit(Z, yt, centre_indices=idx, operator=op, alpha0=alpha)
            alpha = solver.alpha_
            if Zv is not None:
                g = solver.decision_function(Zv).cpu().numpy().astype(np.float64)
                out.append((lam, roc_auc(val[3], g), log_loss(val[3], g)))
            else:
                out.append((lam, float("nan"), float("nan")))
        if keep_model:
            Cn = C.cpu().numpy().astype(np.float64)
            d = self.n_features_
            self.centres_left_, self.centres_right_ = Cn[:, :d], Cn[:, d:2 * d]
            if self._kind == "cgpm":
                self.centres_context_ = Cn[:, 2 * d:]
                self.context_lengthscales_ = np.asarray(lsu, dtype=np.float64)
            self.alpha_ = alpha.cpu().numpy().astype(np.float64)
            self.lengthscales_ = np.asarray(ls, dtype=np.float64)
            self.n_iter_ = list(solver.n_iter_)
        return out

    # ----------------------------------------------------------- predict
    def _predictor(self):
        """``(kernel, C, α)`` on the model's device and dtype, built once per fitted state.

        Kept with the very arrays it was built from and rebuilt when any of them (or the device or
        dtype) changes, so a per-event ``margin_one`` does not re-pack and re-upload the centres:
        on CUDA that was four host-to-device copies a call (bench/results/falkon.md, 2026-12-04).
        """
        src = (self.alpha_, self.centres_left_, self.centres_right_, self.lengthscales_,
               getattr(self, "centres_context_", None), getattr(self, "context_lengthscales_", None),
               getattr(self, "item_constant_", 0.0), self.dtype, self.device)
        cached = getattr(self, "_predictor_cache", None)
        if cached is not None and len(cached[0]) == len(src) and all(a is b for a, b in zip(cached[0], src)):
            return cached[1]
        kern = self._kernel(self.lengthscales_, getattr(self, "context_lengthscales_", None) if self._kind == "cgpm" else None,
                            getattr(self, "item_constant_", 0.0))
        parts = [self.centres_left_, self.centres_right_] + ([self.centres_context_] if self._kind == "cgpm" else [])
        C = torch.as_tensor(np.concatenate(parts, 1)).to(self._torch_dtype).to(self._device)
        a = torch.as_tensor(self.alpha_).to(self._torch_dtype).to(self._device)
        self._predictor_cache = (src, (kern, C, a))
        return kern, C, a

    def _decision_scaled(self, XLs, XRs, Us=None) -> np.ndarray:
        kern, C, a = self._predictor()
        Z = self._pack(XLs, XRs, Us)
        return kernel_matvec(kern, Z, C, a, default_block_size(C.shape[0], Z.element_size(), self._device)).cpu().numpy().astype(np.float64)

    def predict_proba(self, XL, XR, U=None) -> np.ndarray:
        """P(left preferred) = σ(g), ndarray of shape (n_pairs,), float64 (Hu, Chau et al. 2022, eq. (2))."""
        g = self.decision_function(XL, XR, U) if self._kind == "cgpm" else self.decision_function(XL, XR)
        return 0.5 * (1.0 + np.tanh(0.5 * g))

    def predict(self, XL, XR, U=None) -> np.ndarray:
        """+1 / −1 (0 on exact ties) from the sign of g; ndarray of shape (n_pairs,), int64."""
        g = self.decision_function(XL, XR, U) if self._kind == "cgpm" else self.decision_function(XL, XR)
        return np.sign(g).astype(np.int64)

    # ----------------------------------------------------------- state
    def state_dict(self, float32: bool = False) -> dict:
        """``{"meta": ..., "arrays": ...}`` with everything needed to predict (see :mod:`learners.state`)."""
        self._check_fitted()
        dt = np.float32 if float32 else np.float64
        arrays = {"alpha": self.alpha_, "centres_left": self.centres_left_, "centres_right": self.centres_right_,
                  "lengthscales": self.lengthscales_, "scaler_mean": self.scaler_mean_, "scaler_scale": self.scaler_scale_}
        if self._kind == "cgpm":
            arrays.update(centres_context=self.centres_context_, context_lengthscales=self.context_lengthscales_,
                          context_mean=self.context_mean_, context_scale=self.context_scale_)
        meta = {"model_name": self.model_name, "kind": self._kind, "feature_names": list(self.feature_names),
                "context_names": list(getattr(self, "context_names", []) or []), "model_version": int(self.model_version),
                "n_train": int(self.n_train_), "penalty": float(self.penalty_), "multiplier": float(self.multiplier_),
                "item_constant": float(getattr(self, "item_constant_", 0.0)),
                "loss": self.loss, "val_auc": None if not np.isfinite(self.val_auc_) else float(self.val_auc_)}
        if getattr(self, "fit_id", None):
            meta["fit_id"] = str(self.fit_id)   # one fit shared by several learners (learners.refit_group)
        return {"meta": meta, "arrays": {k: np.asarray(v, dtype=dt) for k, v in arrays.items()}}

    @classmethod
    def from_state(cls, state: dict, device: str | None = None):
        """Rebuild a fitted model from :meth:`state_dict` output (predictions in float64)."""
        try:
            meta, arr = state["meta"], state["arrays"]
            kind = meta["kind"]
            target = {"gpm": GPM, "cgpm": CGPM, "upm": UPM}[kind]
            if cls is not _PairModel and not issubclass(target, cls):
                raise SnapshotError(f"State holds a {kind!r} model; load it with {target.__name__}.from_state.")
            kw = {"context_names": meta["context_names"]} if kind == "cgpm" else {}
            m = target(meta["feature_names"], device=device, **kw)
            m.feature_names = list(meta["feature_names"])
            f64 = lambda k: np.asarray(arr[k], dtype=np.float64)  # noqa: E731
            m.alpha_, m.centres_left_, m.centres_right_ = f64("alpha"), f64("centres_left"), f64("centres_right")
            m.lengthscales_, m.scaler_mean_, m.scaler_scale_ = f64("lengthscales"), f64("scaler_mean"), f64("scaler_scale")
            m.n_features_ = m.lengthscales_.shape[0]
            if kind == "cgpm":
                m.centres_context_, m.context_lengthscales_ = f64("centres_context"), f64("context_lengthscales")
                m.context_mean_, m.context_scale_ = f64("context_mean"), f64("context_scale")
                m.context_names = list(meta["context_names"])
                m.n_context_ = m.context_lengthscales_.shape[0]
            m.model_version, m.n_train_ = int(meta["model_version"]), int(meta["n_train"])
            m.penalty_, m.multiplier_ = float(meta["penalty"]), float(meta["multiplier"])
            m.item_constant_ = c = float(meta.get("item_constant", 0.0))    # older snapshots: pure k_E
            if not (math.isfinite(c) and c >= 0) or (kind == "upm" and c):
                raise SnapshotError(f"Bad item_constant {c!r} in a {kind!r} state.")
            m.loss = meta.get("loss", "logistic")
            m.val_auc_ = float("nan") if meta.get("val_auc") is None else float(meta["val_auc"])
            if meta.get("fit_id"):
                m.fit_id = str(meta["fit_id"])
        except SnapshotError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise SnapshotError(f"Not a GPM/CGPM/UPM state dict: missing or malformed entry {exc}.") from None
        return m


class GPM(_PairModel):
    """Generalised Preference Model (Hu, Chau et al. 2022, Section 2.1, eq. (2); Chau et al. 2022).

    ``g(x_l, x_r) = Σ_m α_m k_E((x̃_l, x̃_r), (cl_m, cr_m))`` on scaled items ``x̃ = transform(x)``,
    with ``k_E`` the generalised preferential kernel (:func:`learners.kernels.pref_kernel`) over
    product RBF item kernels; fitted by kernel logistic regression with FALKON. See the module
    docstring for scaling, hyper-parameter selection, ties and the ``both_orders`` option.

    Parameters
    ----------
    feature_names : sequence of str, optional
        Item feature names (column order); default ``x0, x1, ...``.
    loss : {"logistic", "squared"}, default="logistic"
    penalty : float or "auto", default="auto"
        λ of the FALKON objective; "auto" → search over ``penalty_grid`` (see ``selection``).
    lengthscale_multiplier : float or "auto", default="auto"
        ``m`` in ``ℓ_j = m · median_j · √d``; "auto" → search over ``multiplier_grid``.
    item_constant : float >= 0, "auto" or None, default=None (= "auto"; 0 for UPM)
        ``c`` of the item kernel ``(c + k)/√(1 + c)``, pair kernel ``(k_E + c·k_UPM)/(1 + c)`` ⊇ UPM;
        0 is the paper's pure k_E; "auto" → searched over ``constant_grid`` (0, 1, 10, 100) with λ
        and m. Pref-SHAP stays exact for any c (docs/prefshap.md, docs/gpm.md).
    n_centres : int, optional
        Nyström centres M (default ``min(max_centres, ceil(centre_factor · √n))``).
    validation_fraction : float, default=0.1
        Hold-out share when no ``eval_set`` is passed to :meth:`fit`.
    selection_max_train : int, default=10000
        Training pairs used during the grid search (final fit uses all).
    selection : {"holdout", "cv", "auto"}, default="holdout"
        How ``(λ, m)`` are chosen: hold-out AUC, mean ``cv_folds``-fold AUC, or CV below
        ``cv_max_train`` strict training pairs and hold-out above (see the module docstring).
    cv_folds : int, default=5;  cv_max_train : int, default=2000
    both_orders : bool, default=True
        Also train on every pair swapped with the opposite label.
    dtype : {"float64", "float32"};  device : torch device string, e.g. "cuda";  seed : int

    Attributes
    ----------
    feature_names : list[str]
    lengthscales_ : ndarray (d,)
    centres_left_, centres_right_ : ndarray (M, d), scaled space
    alpha_ : ndarray (M,)
    penalty_, multiplier_, item_constant_ : selected hyper-parameters;  selection_ : "holdout", "cv" or "none"
    cv_results_ : list of dicts, one per grid point (``penalty``, ``multiplier``, ``constant``, ``val_auc``, ``val_log_loss``; with CV their
        means over folds plus ``fold_auc`` / ``fold_log_loss`` lists)
    val_auc_ : float (hold-out/eval_set AUC; with CV and no eval_set the mean fold AUC);  n_train_ : int;  model_version : int;  fit_time_ : float (s)

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> A, B = rng.normal(size=(200, 2)), rng.normal(size=(200, 2))
    >>> y = np.where(A[:, 0] > B[:, 0], 1, -1)
    >>> m = GPM(["a", "b"], penalty=1e-4, lengthscale_multiplier=1.0).fit(A, B, y)
    >>> bool(np.allclose(m.decision_function(A, B), -m.decision_function(B, A)))
    True
    """

    _kind = "gpm"
    model_name = "gpm"

    def decision_function(self, XL, XR) -> np.ndarray:
        """g(x_l, x_r) for each pair, ndarray (n_pairs,) float64; > 0 means left preferred."""
        self._check_fitted()
        XL, XR, _, _ = self._check_pairs(XL, XR)
        return self._decision_scaled(self.transform(XL), self.transform(XR))


class CGPM(_PairModel):
    """Context-specific GPM (Hu, Chau et al. 2022, Section 2.1): kernel ``k_U(u, u_m) · k_E((x_l, x_r), (cl_m, cr_m))``.

    Same parameters as :class:`GPM` plus ``context_names``; the context is standardised on the
    training pairs (``transform_context``) and gets per-feature length-scales ``m · median_j · √p``.

    Attributes (in addition to GPM's)
    ---------------------------------
    context_names : list[str];  context_lengthscales_ : ndarray (p,);  centres_context_ : ndarray (M, p)
    """

    _kind = "cgpm"
    model_name = "cgpm"

    def __init__(self, feature_names: Sequence[str] | None = None, context_names: Sequence[str] | None = None, **kwargs):
        super().__init__(feature_names, **kwargs)
        self.context_names_in = None if context_names is None else list(context_names)

    def transform_context(self, U) -> np.ndarray:
        """Scale contexts with the training mean/std; (n, p) → (n, p) float64."""
        self._check_fitted()
        U = _as2d("U", U, self.n_context_)
        return (U - self.context_mean_) / self.context_scale_

    def decision_function(self, XL, XR, U) -> np.ndarray:
        """g(x_l, x_r, u) for each pair, ndarray (n_pairs,) float64."""
        self._check_fitted()
        XL, XR, U, _ = self._check_pairs(XL, XR, U)
        return self._decision_scaled(self.transform(XL), self.transform(XR), self.transform_context(U))


class UPM(_PairModel):
    """Utility-based preference model ``g(a, b) = f(a) − f(b)`` (Hu, Chau et al. 2022, eq. (1)).

    Fitted with the pair kernel ``k(a,c) + k(b,d) − k(a,d) − k(b,c)``
    (:func:`learners.kernels.utility_pair_kernel`), so ``f(x) = Σ_m α_m [k(x̃, cl_m) − k(x̃, cr_m)]``.
    Same parameters and attributes as :class:`GPM`, plus :meth:`utility`.
    """

    _kind = "upm"
    model_name = "upm"

    def utility(self, X) -> np.ndarray:
        """Latent utility f(x), ndarray (n,) float64 (defined up to an additive constant)."""
        self._check_fitted()
        Xs = self.transform(X)
        dt = torch.float64
        Xt = torch.as_tensor(Xs, dtype=dt)
        ls = torch.as_tensor(self.lengthscales_, dtype=dt)
        a = torch.as_tensor(self.alpha_, dtype=dt)
        f = rbf(Xt, torch.as_tensor(self.centres_left_, dtype=dt), ls) @ a - rbf(Xt, torch.as_tensor(self.centres_right_, dtype=dt), ls) @ a
        return f.numpy()

    def decision_function(self, XL, XR) -> np.ndarray:
        """g(a, b) = f(a) − f(b) for each pair, ndarray (n_pairs,) float64."""
        self._check_fitted()
        XL, XR, _, _ = self._check_pairs(XL, XR)
        return self._decision_scaled(self.transform(XL), self.transform(XR))
