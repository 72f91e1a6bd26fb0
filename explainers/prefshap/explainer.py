"""The :class:`PrefSHAP` explainer: construction, the item value function and Table 1, rows 1–2.

Hu, Chau, Ferrando Huertas & Sejdinovic (2022), *Explaining Preferences with Shapley Values*, Section 3,
Table 1, Algorithm 1, Appendix A. The class is assembled from one module per concept: contexts (Table 1,
rows 3–4, :mod:`explainers.prefshap.contexts`), the Section 4 baselines (:mod:`explainers.prefshap.baselines`)
and batches of duels explained one by one in one call (:mod:`explainers.prefshap.batch`).
"""

from __future__ import annotations

import math
import time
from typing import Mapping, Sequence

import numpy as np
import torch

from explainers._coalitions import CoalitionPlan, plan_coalitions
from explainers._players import _players
from explainers._result import Explanation
from explainers.prefshap.baselines import _Baselines
from explainers.prefshap.batch import _DuelBatch
from explainers.prefshap.contexts import _ContextTasks
from explainers.prefshap.exact import _ExactTasks
from explainers.prefshap.engine import _Engine, _masked_kernel, _pair_values_flat, _PairIndex, _Space, _unique_rows
from explainers.prefshap.model import _check_matrix, _orientation, _outcome_sign, _parts
from explainers.prefshap.product import _ProductModel, product_game_values
from learners.exceptions import InvalidInputError, check_param

__all__ = ["PrefSHAP"]

_VALUE_FUNCTIONS = ("observational", "interventional", "product-marginal")
_SOLVERS = ("cholesky", "cg")


class PrefSHAP(_DuelBatch, _ContextTasks, _Baselines, _ExactTasks):
    """Pref-SHAP explainer for a fitted GPM / C-GPM / UPM (Hu et al. 2022, Section 3, Algorithm 1).

    Parameters
    ----------
    model : fitted GPM, CGPM or UPM
        Exposes ``feature_names``, ``lengthscales_`` (d,), ``centres_left_``/``centres_right_``
        (M, d) in scaled units, ``alpha_`` (M,), ``transform(X)``; a C-GPM also
        ``context_names``, ``context_lengthscales_`` (p,), ``centres_context_`` (M, p),
        ``transform_context(U)``.
    reference_items : array-like of shape (n, d), optional
        The item catalog X (raw units) used as the observational reference sample of the CMEs
        (Section 3.1). Default: the distinct Nyström centre items of the model.
    reference_contexts : array-like of shape (n_u, p), optional
        Reference contexts (raw units) for a C-GPM (Prop. 3.3 and ḡ = E_U g_U). Default: the
        distinct context centres.
    max_coalitions : int, default 2048
        Exact enumeration when 2^d ≤ max_coalitions, else that many sampled coalitions
        (Algorithm 2, ∅ and Ω included).
    cme_reg : float, default 1e-3
        λ of the CME, (K_S + nλI)⁻¹ (Prop. 3.2; λ' of Prop. 3.3).
    max_reference : int, default 512
        Largest reference sample; a larger catalog is subsampled (``random_state``).
    value_function : {"observational", "interventional", "product-marginal"}
        Conditional (CME, the paper's choice, kept for the paper's tables), joint marginal (β_i = 1/n), or
        the product of the per-feature marginals of the reference catalog (k_j → μ_j, Sec. 3.1's marginal
        reference): every term of g is then a product game, and the Shapley values are computed exactly
        at any width in O(T·d²) per duel, with no coalitions enumerated or sampled
        (:mod:`explainers.prefshap.product`; the stream's default). ``max_coalitions``, ``solver``,
        ``cme_reg``, ``target_se`` and ``device`` do not apply to it (NumPy, float64).
    solver : {"cholesky", "cg"}
        Batched Cholesky or batched preconditioned CG (Algorithm 3) for the CME systems.
    feature_groups : mapping of str to list of str, optional
        Treat each group of features as one player (e.g. the one-hot type indicators).
    device : str or torch.device, default "cpu"
    dtype : torch.dtype, default torch.float64
    max_memory_mb : float, default 512
        Bound on the working memory of one chunk of coalitions.
    normalize_cme : bool, default True
        Rescale the CME weights to sum to one, β̃ = β / Σ_i β_i (uniform 1/n if |Σβ| < 1e-8).
        The regularised CME shrinks E[1 | X_S] = Σβ below 1; normalising makes the estimated
        game consistent at its ends (ν(Ω) = g and ν(∅) = marginal mean by the same formula), so
        efficiency holds with respect to the model output, a feature the kernel ignores is an
        exact null player, and Pref-SHAP of a UPM equals the difference of utility SHAP values.
        ``False`` is Proposition 3.2 verbatim for every S, ∅ and Ω included (then
        ν(Ω) = Σ_m α_m [k(c^ℓ_m, x^ℓ)k(c^r_m, x^r)·Σβ(x^ℓ)Σβ(x^r) − …] ≠ g in general).
    cache_mb : float, default 256
        Memory for Cholesky factors of the CME matrices kept across calls on this instance
        (they depend only on the coalition and the reference sample). Reuse one
        :class:`PrefSHAP` per model snapshot to benefit; 0 disables the cache.
    random_state : int, optional
        Seed of the per-instance RNG (coalition sampling, reference subsampling).
    target_se : float, optional
        Sampled coalitions stop on a target standard error: plans of growing size (from
        :func:`explainers._target_se.first_round` up to ``max_coalitions``) until every explained
        game has max_j se_j ≤ ``target_se`` · max_j |φ_j| (:func:`explainers._target_se.solve_to_target`).
        ``None``: one plan of ``max_coalitions`` coalitions. Recorded in ``extra``.

    Raises
    ------
    NotFittedError
        If the model has not been fitted.
    InvalidParameterError
        For out-of-domain parameters.
    """

    def __init__(self, model, reference_items=None, reference_contexts=None, *, max_coalitions: int = 2048,
                 cme_reg: float = 1e-3, max_reference: int = 512, value_function: str = "observational",
                 solver: str = "cholesky", feature_groups: Mapping[str, Sequence[str]] | None = None,
                 device="cpu", dtype: torch.dtype = torch.float64, max_memory_mb: float = 512.0,
                 normalize_cme: bool = True, cache_mb: float = 256.0, random_state: int | None = 0,
                 target_se: float | None = None):
        own = "PrefSHAP"
        check_param(own, "max_coalitions", max_coalitions, isinstance(max_coalitions, (int, np.integer))
                    and max_coalitions >= 4, "an int >= 4")
        check_param(own, "cme_reg", cme_reg, isinstance(cme_reg, (int, float)) and cme_reg > 0 and
                    math.isfinite(cme_reg), "a float in the range (0, inf)")
        check_param(own, "max_reference", max_reference, isinstance(max_reference, (int, np.integer))
                    and max_reference >= 2, "an int >= 2")
        check_param(own, "value_function", value_function, value_function in _VALUE_FUNCTIONS,
                    f"one of {_VALUE_FUNCTIONS}")
        check_param(own, "solver", solver, solver in _SOLVERS, f"one of {_SOLVERS}")
        check_param(own, "max_memory_mb", max_memory_mb, isinstance(max_memory_mb, (int, float))
                    and max_memory_mb > 0, "a float in the range (0, inf)")
        check_param(own, "dtype", dtype, dtype in (torch.float32, torch.float64), "torch.float32 or torch.float64")
        self.model = model
        self.max_coalitions = int(max_coalitions)
        self.cme_reg = float(cme_reg)
        self.max_reference = int(max_reference)
        self.value_function = value_function
        self.solver = solver
        self.feature_groups = feature_groups
        self.device = device
        self.dtype = dtype
        self.max_memory_mb = float(max_memory_mb)
        self.normalize_cme = bool(normalize_cme)
        check_param(own, "cache_mb", cache_mb, isinstance(cache_mb, (int, float)) and cache_mb >= 0,
                    "a float in the range [0, inf)")
        self.cache_mb = float(cache_mb)
        check_param(own, "target_se", target_se, target_se is None or (isinstance(target_se, (int, float))
                    and 0 < target_se < 1), "None or a float in (0, 1)")
        self.target_se = None if target_se is None else float(target_se)
        self._cache: dict = {}
        self.random_state = random_state
        self._rng = np.random.default_rng(random_state)
        self._p = _parts(model)
        d = len(self._p.feature_names)
        if reference_items is None:
            ref = np.unique(np.concatenate([self._p.cl, self._p.cr]), axis=0)
        else:
            ref = np.asarray(self._p.transform(_check_matrix("reference_items", reference_items, d)), dtype=np.float64)
            ref = np.unique(ref, axis=0)
        self._ref = self._subsample(ref)
        self._ref_u = None
        if self._p.kind == "cgpm":
            if reference_contexts is None:
                refu = np.unique(self._p.cu, axis=0)
            else:
                refu = np.asarray(self._p.transform_context(
                    _check_matrix("reference_contexts", reference_contexts, len(self._p.context_names))), dtype=np.float64)
                refu = np.unique(refu, axis=0)
            self._ref_u = self._subsample(refu)
        elif reference_contexts is not None:
            raise InvalidInputError("reference_contexts given but the model has no context features (not a C-GPM).")
        self.last_stats: dict = {}
        self._product_model = None

    # ------------------------------------------------------------------ helpers
    @property
    def exact_product(self) -> bool:
        """Whether this explainer uses the product-marginal value function (exact at any width)."""
        return self.value_function == "product-marginal"

    def _product(self) -> _ProductModel:
        if self._product_model is None:
            self._product_model = _ProductModel(self._p, self._ref, self._ref_u)
        return self._product_model

    def product_terms(self, xl, xr, u=None, member=None):
        """The product-game terms (A (T, n), B (T, n), W (T,)) of ν_S(x^ℓ, x^r[, u]) for one duel (raw units):
        ν_S = Σ_t W_t Π_{j∈S} A_tj Π_{j∉S} B_tj (:mod:`explainers.prefshap.product`), on the features, or on the
        players of ``member`` (n, d) bool (groups of features: products of their factors). A C-GPM without ``u``
        is explained through ḡ = E_U g_U, as :meth:`explain_duels`."""
        d = len(self._p.feature_names)
        XL = _check_matrix("XL", xl, d); XR = _check_matrix("XR", xr, d)
        U = None if u is None else _check_matrix("U", u, len(self._p.context_names))
        W = self._context_weights(self._engine(), U).cpu().numpy()
        xls = np.asarray(self._p.transform(XL), float)[0]
        xrs = np.asarray(self._p.transform(XR), float)[0]
        if member is not None and member.shape[0] == d and np.all(member == np.eye(d, dtype=bool)):
            member = None
        return self._product().item_terms(xls, xrs, W.reshape(-1), member)

    def _subsample(self, R: np.ndarray) -> np.ndarray:
        if R.shape[0] > self.max_reference:
            R = R[np.sort(self._rng.choice(R.shape[0], self.max_reference, replace=False))]
        return R

    def _engine(self) -> _Engine:
        return _Engine(self.cme_reg, self.value_function, self.solver, self.device, self.dtype, self.max_memory_mb,
                       normalize=self.normalize_cme, cache=self._cache, cache_mb=self.cache_mb)

    def _item_space(self, eng: _Engine, items_scaled: np.ndarray, centres: list | None = None) -> _Space:
        ls = self._p.ls
        cs = centres if centres is not None else [self._p.cl, self._p.cr]
        # Σβ(x) is needed only by the literal (unnormalised) observational CME; otherwise it is exactly 1
        mass = self._p.constant > 0 and not self.normalize_cme and self.value_function == "observational"
        return _Space(eng, self._ref, items_scaled, cs, ls, mass=mass)

    @staticmethod
    def _signed_weights(space: _Space, W: torch.Tensor) -> torch.Tensor:
        """Weights on the distinct centres of Σ_m W_m [G(c_m^+) − G(c_m^−)] (utility-type sums)."""
        w = torch.zeros(space.centres.shape[0], dtype=W.dtype, device=W.device)
        w.index_add_(0, space.maps[0], W)
        w.index_add_(0, space.maps[1], -W)
        return w

    def _context_weights(self, eng: _Engine, U: np.ndarray | None) -> torch.Tensor:
        """α (GPM/UPM), α ⊙ k_U(u_p, u_m) per duel (C-GPM with U), α ⊙ mean_i k_U(U_i, u_m) (ḡ)."""
        p = self._p
        alpha = eng.tensor(p.alpha)
        if p.kind != "cgpm":
            if U is not None:
                raise InvalidInputError(f"U (contexts) given but the {p.model_name} model has no context features.")
            return alpha
        ls_u = p.ls_u
        cu = eng.tensor(p.cu / ls_u)
        ones = torch.ones((1, cu.shape[1]), dtype=eng.dtype, device=eng.device)
        if U is None:
            kU = _masked_kernel(eng.tensor(self._ref_u / ls_u), cu, ones)[0]   # (n_u, M)
            return alpha * kU.mean(dim=0)
        Us = np.asarray(p.transform_context(U), dtype=np.float64)
        kU = _masked_kernel(eng.tensor(Us / ls_u), cu, ones)[0]                 # (P, M)
        return kU * alpha.unsqueeze(0)

    def _players_for(self, names, groups, data_rows: np.ndarray, plan_seed_rng):
        """Players, the dropped (zero-variance) ones, and the coalition plan on the active ones."""
        pnames, member = _players(names, groups)
        const_feat = np.all(data_rows == data_rows[:1], axis=0)                     # (d,)
        dropped = np.array([bool(const_feat[row].all()) for row in member])
        active = np.flatnonzero(~dropped)
        dropped_feat = member[dropped].any(axis=0) if dropped.any() else np.zeros(len(names), bool)
        if len(active) == 0:
            plan = None
            masks_full = np.ones((1, len(names)), dtype=bool)
        else:
            plan = plan_coalitions(len(active), self.max_coalitions, plan_seed_rng)
            masks_full = (plan.masks.astype(np.int64) @ member[active].astype(np.int64)).astype(bool) | dropped_feat
        return pnames, member, dropped, active, plan, masks_full

    @staticmethod
    def _shapley(plan: CoalitionPlan | None, values: np.ndarray, n_players: int, active: np.ndarray):
        n = values.shape[1]
        phi = np.zeros((n, n_players))
        if plan is None:                                          # every player constant
            return phi, values[0].copy(), values[0].copy()
        phi[:, active] = plan.solve(values)
        if not plan.exact:                                        # Kernel SHAP: sandwich standard errors
            plan.last_stderr = np.zeros_like(phi)
            plan.last_stderr[:, active] = plan.stderr(values)
        return phi, values[plan.empty_index].copy(), values[plan.full_index].copy()

    def _finish(self, method, phi, base, pred, names, data, t0, plan, dropped, pnames, extra=None) -> Explanation:
        info = {
            "coalitions": 0 if plan is None else plan.n_coalitions,
            "exact": True if plan is None else bool(plan.exact),
            "dropped_players": [pnames[i] for i in np.flatnonzero(dropped)],
            "reference_size": int(self._ref.shape[0]),
            "cme_reg": self.cme_reg,
            "value_function": self.value_function,
            "solver": self.solver,
        }
        info.update(extra or {})
        if plan is not None and getattr(plan, "last_stderr", None) is not None:
            info["stderr"], info["estimator"] = plan.last_stderr, "kernel-shap"
        self.last_stats = dict(info)
        return Explanation(values=phi, base_values=base, prediction=pred, feature_names=names, method=method,
                           model_name=self._p.model_name, model_version=self._p.model_version, data=data,
                           compute_time=time.perf_counter() - t0, extra=info)

    # ------------------------------------------------------------------ item value function
    def _item_values(self, masks_full: np.ndarray, XLs: np.ndarray, XRs: np.ndarray, W,
                     eng: _Engine) -> np.ndarray:
        """ν̂_S(x^ℓ_p, x^r_p) for every coalition row and duel: ndarray (n_coalitions, P).

        Large batches are split into blocks of duels so that a chunk of at least
        min(16, n_coalitions) coalitions fits in ``max_memory_mb`` (with the factor cache the
        CME factorisations are shared between blocks).
        """
        P = XLs.shape[0]
        if self.exact_product:
            Wn = W.cpu().numpy()
            prod = self._product()
            out = np.empty((masks_full.shape[0], P))
            for p in range(P):
                A, B, Wt = prod.item_terms(XLs[p], XRs[p], Wn if Wn.ndim == 1 else Wn[p])
                out[:, p] = product_game_values(A, B, Wt, masks_full)
            return out
        n = self._ref.shape[0]
        Mu = len(np.unique(np.concatenate([self._p.cl, self._p.cr]), axis=0))
        M2 = 2 * self._p.cl.shape[0]
        cb_target = min(16, masks_full.shape[0])
        per_item = 2 * n + 4 * Mu + 2 * M2
        fixed = 2 * n * n + 3 * Mu * n
        t_max = int((eng.mem / torch.finfo(eng.dtype).bits * 8 / cb_target - fixed) // per_item)
        block = max(1, t_max // 2)
        out = np.empty((masks_full.shape[0], P))
        for s in range(0, P, block):
            sl_p = slice(s, min(P, s + block))
            Wb = W if W.ndim == 1 else W[sl_p]
            out[:, sl_p] = self._item_values_block(masks_full, XLs[sl_p], XRs[sl_p], Wb, eng)
        return out

    def _item_values_block(self, masks_full, XLs, XRs, W, eng) -> np.ndarray:
        bank = self._cache.get("items")
        if bank is not None and bank.slot:
            # visit coalitions in the order their kernel blocks are stored: contiguous views, no gather
            far = len(bank.slot) + np.arange(masks_full.shape[0])
            order = np.argsort([bank.slot.get(r.tobytes(), f) for r, f in zip(masks_full, far)], kind="stable")
            if np.any(order != np.arange(order.size)):
                out = np.empty((masks_full.shape[0], XLs.shape[0]))
                out[order] = self._item_values_block_ordered(masks_full[order], XLs, XRs, W, eng)
                return out
        return self._item_values_block_ordered(masks_full, XLs, XRs, W, eng)

    def _item_values_block_ordered(self, masks_full, XLs, XRs, W, eng) -> np.ndarray:
        uniq, (a, b) = _unique_rows(XLs, XRs)
        space = self._item_space(eng, uniq)
        a_t = torch.as_tensor(a, device=eng.device)
        b_t = torch.as_tensor(b, device=eng.device)
        out = np.empty((masks_full.shape[0], XLs.shape[0]))
        if self._p.kind == "upm":
            w = self._signed_weights(space, W)
            for sl, G in eng.gammas(space, masks_full):
                f = torch.matmul(G, w)                                   # (cb, T)
                out[sl] = (f[:, a_t] - f[:, b_t]).cpu().numpy()
            return out
        index = None
        for sl, G in eng.gammas(space, masks_full):
            if index is None:        # duels in blocks of ≤ mem/4 bytes for their five (p, M, cb) factors
                step = max(1, int(eng.mem / 4 // (5 * G.shape[0] * space.maps[0].shape[0] * G.element_size())))
                index = _PairIndex(space.maps, a_t, b_t, G.shape[2], step)
            out[sl] = _pair_values_flat(space.constant_term(G, self._p.constant), index, W).cpu().numpy()
        return out

    def coalition_values(self, coalitions, XL, XR, U=None) -> np.ndarray:
        """The preferential value function ν̂_S(x^ℓ, x^r) (Prop. 3.2) for given coalitions.

        Parameters
        ----------
        coalitions : array-like of shape (n_coalitions, d), bool
            Feature coalitions S (column j set when feature j is in S).
        XL, XR : array-like of shape (P, d)
            Left and right items (raw units).
        U : array-like of shape (P, p), optional
            Contexts of a C-GPM (ḡ = E_U g_U when omitted).

        Returns
        -------
        ndarray of shape (n_coalitions, P), float64
        """
        d = len(self._p.feature_names)
        XL = _check_matrix("XL", XL, d); XR = _check_matrix("XR", XR, d)
        Z = np.asarray(coalitions, dtype=bool).reshape(-1, d)
        eng = self._engine()
        U = None if U is None else _check_matrix("U", U, len(self._p.context_names))
        W = self._context_weights(eng, U)
        return self._item_values(Z, np.asarray(self._p.transform(XL), float), np.asarray(self._p.transform(XR), float), W, eng)

    # ------------------------------------------------------------------ Table 1, row 1
    def explain_duels(self, XL, XR, U=None, outcome=None) -> Explanation:
        """Pref-SHAP values of duels (Table 1, row 1; method ``"pref-shap"``).

        Parameters
        ----------
        XL, XR : array-like of shape (P, d) or (d,)
            Left and right items, raw units, columns in ``model.feature_names`` order.
        U : array-like of shape (P, p), optional
            Contexts (C-GPM only): explains g_u = g_U(u, ·, ·); without it a C-GPM is explained
            through ḡ = E_U[g_U(U, ·, ·)] over the reference contexts (Sec. 3.1).
        outcome : array-like of shape (P,) in {+1, −1, 0}, optional
            If given, each duel is oriented winner-vs-loser: values and prediction are multiplied
            by the outcome (skew-symmetry) and ``data`` is x_winner − x_loser (Figs 2–4).

        Returns
        -------
        Explanation
            ``values`` (P, n_players); ``base_values`` = ν(∅) (0 up to rounding);
            ``prediction`` = ν(Ω) = g(x^ℓ, x^r); ``data`` = x^ℓ − x^r (or x_winner − x_loser),
            summed within feature groups. ``extra`` records per duel the coalitions evaluated,
            exactness and dropped players (arrays of shape (P,)), and the reference size and solver;
            sampled games also ``stderr`` (P, n_players), ``target_se`` and ``target_met``.

        Notes
        -----
        Each duel is explained as if alone: its own constant players are dropped
        (:mod:`explainers.prefshap.batch`). With exact enumeration a batch equals one call per duel
        to rounding; sampled duels with the same dropped players share their coalitions.

        Raises
        ------
        InvalidInputError
            On shape mismatch, NaN/inf, a bad outcome, or contexts for a model without them.
        """
        t0 = time.perf_counter()
        p = self._p
        d = len(p.feature_names)
        XL = _check_matrix("XL", XL, d); XR = _check_matrix("XR", XR, d)
        if XL.shape != XR.shape:
            raise InvalidInputError(f"XL and XR must have the same shape; got {XL.shape} and {XR.shape}.")
        if U is not None:
            if p.kind != "cgpm":
                raise InvalidInputError(f"U (contexts) given but the {p.model_name} model has no context features.")
            U = _check_matrix("U", U, len(p.context_names))
            if U.shape[0] != XL.shape[0]:
                raise InvalidInputError(f"U has {U.shape[0]} rows for {XL.shape[0]} duels; pass one context per duel.")
        sign = _outcome_sign(outcome, XL.shape[0])
        eng = self._engine()
        W = self._context_weights(eng, U)
        per_duel = self._per_duel_product if self.exact_product else self._per_duel
        pnames, member, phi, base, pred, info = per_duel(XL, XR, U, W, eng)
        data = (XL - XR) @ member.T.astype(float)
        phi, pred, base, data = phi * sign[:, None], pred * sign, base * sign, data * sign[:, None]
        info.update({"reference_size": int(self._ref.shape[0]), "cme_reg": self.cme_reg,
                     "value_function": self.value_function, "solver": self.solver,
                     "oriented": _orientation(outcome, XL.shape[0]),
                     "context": "given" if U is not None else ("averaged" if p.kind == "cgpm" else "none")})
        self.last_stats = dict(info)
        return Explanation(values=phi, base_values=base, prediction=pred, feature_names=pnames, method="pref-shap",
                           model_name=p.model_name, model_version=p.model_version, data=data,
                           compute_time=time.perf_counter() - t0, extra=info)

    # ------------------------------------------------------------------ Table 1, row 2
    def explain_items(self, X, opponents=None) -> Explanation:
        """Which features made each item win or lose its duels (Table 1, row 2).

        Value function (1/n_o) Σ_o ν̂_S(x, x_o), averaged over the opponents; by linearity the
        Shapley values are the average of the per-duel Pref-SHAP values.

        Parameters
        ----------
        X : array-like of shape (n_items, d)
            Items explained (raw units).
        opponents : array-like of shape (n_o, d), optional
            Opponents; default: the reference catalog.

        Returns
        -------
        Explanation
            method ``"pref-shap"``; ``prediction`` = mean_o g(x, x_o); ``data`` = x − mean_o x_o.
        """
        t0 = time.perf_counter()
        p = self._p
        d = len(p.feature_names)
        X = _check_matrix("X", X, d)
        Xs = np.asarray(p.transform(X), float)
        if opponents is None:
            Os = self._ref
            O_raw = None
        else:
            O_raw = _check_matrix("opponents", opponents, d)
            Os = np.asarray(p.transform(O_raw), float)
        eng = self._engine()
        W = self._context_weights(eng, None)
        pnames, member, dropped, active, plan, masks = self._players_for(
            p.feature_names, self.feature_groups, np.concatenate([Xs, Os]), self._rng)
        if self.exact_product:
            phi, base, pred = self._items_product(Xs, Os, W.cpu().numpy(), member, dropped)
            return self._finish("pref-shap", phi, base, pred, pnames, None if O_raw is None else
                                (X - O_raw.mean(axis=0)[None, :]) @ member.T.astype(float), t0, None, dropped, pnames,
                                {"task": "item-vs-opponents", "n_opponents": int(Os.shape[0]), "coalitions": 0,
                                 "exact": True, "estimator": "product-exact"})
        uniq, (ia, io) = _unique_rows(Xs, Os)
        space = self._item_space(eng, uniq)
        ia_t = torch.as_tensor(ia, device=eng.device)
        io_t = torch.as_tensor(io, device=eng.device)
        v = np.empty((masks.shape[0], X.shape[0]))
        for sl, G in eng.gammas(space, masks):
            if p.kind == "upm":
                f = torch.matmul(G, self._signed_weights(space, W))
                v[sl] = (f[:, ia_t] - f[:, io_t].mean(dim=1, keepdim=True)).cpu().numpy()
            else:
                GL, GR = space.split(G, self._p.constant)
                mGL = GL[:, io_t].mean(dim=1, keepdim=True)                # (cb, 1, M)
                mGR = GR[:, io_t].mean(dim=1, keepdim=True)
                v[sl] = torch.matmul(GL[:, ia_t] * mGR - GR[:, ia_t] * mGL, W).cpu().numpy()
        phi, base, pred = self._shapley(plan, v, len(pnames), active)
        O_mean = (O_raw.mean(axis=0) if O_raw is not None else None)
        if O_mean is None:
            data = None
        else:
            data = (X - O_mean[None, :]) @ member.T.astype(float)
        return self._finish("pref-shap", phi, base, pred, pnames, data, t0, plan, dropped, pnames,
                            {"task": "item-vs-opponents", "n_opponents": int(Os.shape[0])})
