"""Pref-SHAP: Shapley explanations of kernel preference models (GPM, C-GPM, UPM).

Paper 000 (Hu, Chau, Ferrando Huertas, Sejdinovic, *Explaining Preferences with Shapley Values*),
Section 3 and Appendix A, with the baselines of Section 4 and Appendix B.

The model explained
-------------------
A generalised preference model (GPM, Section 2.1) with product RBF kernel
k(x, y) = Π_j k_j(x_j, y_j), k_j(a, b) = exp(−(a − b)² / (2 ℓ_j²)) on scaled features and
Nyström centre pairs (c^ℓ_m, c^r_m)::

    g(x^ℓ, x^r) = Σ_m α_m [k(x^ℓ, c^ℓ_m) k(x^r, c^r_m) − k(x^ℓ, c^r_m) k(x^r, c^ℓ_m)]     (k_E, Sec. 2.1)

a C-GPM multiplies each term by k_U(u, u_m), and a UPM is g(a, b) = f(a) − f(b) with
f(x) = Σ_m α_m [k(x, c^ℓ_m) − k(x, c^r_m)].

Preferential value function for items (Definition 3.1, Propositions 3.1–3.2)
---------------------------------------------------------------------------
ν_S(x^ℓ, x^r) = E[g(X^ℓ, X^r) | X^ℓ_S = x^ℓ_S, X^r_S = x^r_S] with the observational reference
p(X^ℓ | X^ℓ_S = x^ℓ_S) p(X^r | X^r_S = x^r_S): the two items are independent draws from the
item distribution conditioned on their own S-features. Because the kernel is a product and the
two items are independent, each kernel factor of k_E is integrated separately::

    E[k(X, c) | X_S = x_S] = k_S(x_S, c_S) · ⟨k_{S^c}(·, c_{S^c}), μ_{X_{S^c} | X_S = x_S}⟩
                           ≈ k_S(x_S, c_S) · Σ_i β_i^S(x) k_{S^c}(X_{i,S^c}, c_{S^c}) =: Γ_S(c, x)

with the conditional-mean-embedding (CME) weights of the item catalog X = {X_i}_{i=1}^n
(the reference sample), β^S(x) = (K_S^{XX} + nλ I)⁻¹ k_S^X(x) (Appendix C, proof of Prop. 3.2).
Then, keeping each of the four cross terms of k_E with its own centre (left item against
left centre, right item against right centre, and the swapped pair)::

    ν̂_S(x^ℓ, x^r) = Σ_m α_m [Γ_S(c^ℓ_m, x^ℓ) Γ_S(c^r_m, x^r) − Γ_S(c^r_m, x^ℓ) Γ_S(c^ℓ_m, x^r)]   (Prop. 3.2)

For S = Ω no embedding is needed (Γ = k(c, x), so ν(Ω) = g exactly); for S = ∅ the CME is the
marginal mean embedding (β_i = 1/n), which makes ν(∅) = 0 by skew-symmetry. Both items share
the same Γ_S(·, x), so ν̂ is skew-symmetric and vanishes on a duel of two identical items.
With ``value_function="interventional"`` (Janzing et al., mentioned in Sec. 3.1) β_i = 1/n
for every S.

Preferential value function for contexts (Proposition 3.3)
-----------------------------------------------------------
ν_{S'}(u, x^ℓ, x^r) = Σ_m α_m Γ^U_{S'}(u_m, u) Ξ_m(x^ℓ, x^r), Ξ_m = k(x^ℓ, c^ℓ_m) k(x^r, c^r_m) −
k(x^ℓ, c^r_m) k(x^r, c^ℓ_m), with Γ^U the same CME construction on the context space with a
reference sample of contexts (λ' = ``cme_reg``).

The four tasks of Table 1
-------------------------
:func:`explain_duels` (one duel; ``U`` gives g_u, no ``U`` gives ḡ = E_U g_U for a C-GPM),
:func:`explain_items` (an item against all opponents, value function averaged over opponents),
:func:`explain_duel_contexts` (the context of one duel) and :func:`explain_contexts`
(a context averaged over duels). Baselines: :func:`explain_upm_duels` (SHAP of a UPM's utility,
φ(x^ℓ) − φ(x^r), Section 4) and :func:`explain_concat_duels` (naive concatenation, 2d players,
Section 3.1 and Appendix B).

Shapley values
--------------
Exact enumeration when 2^d ≤ ``max_coalitions``, else unique coalition sampling (Algorithm 2) with
Kernel SHAP weights and Cholesky-solved WLS with the efficiency constraint; players with zero
variance in the explained data are removed (held at their common value in every coalition;
φ = 0), as in Appendix A. See :mod:`explainers._coalitions`.

Linear algebra (Appendix A)
---------------------------
Coalitions are processed in chunks sized to ``max_memory_mb``; for a chunk the masked squared
distances are one batched matmul, the CME systems of all coalitions are solved together
(batched Cholesky, default, or batched preconditioned CG, Algorithm 3) for all unique items at
once, and the values of every explained duel follow from Γ by gathers. Runs on CPU or GPU
(``device``). ``docs/prefshap.md`` records the CG-vs-Cholesky measurement behind the default.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np
import torch

from explainers._coalitions import CoalitionPlan, plan_coalitions
from explainers._result import Explanation
from learners.exceptions import BudgetError, InvalidInputError, NotFittedError, check_param

__all__ = [
    "PrefSHAP",
    "explain_concat_duels",
    "explain_contexts",
    "explain_duel_contexts",
    "explain_duels",
    "explain_items",
    "explain_upm_duels",
    "preferential_value_function",
]

_VALUE_FUNCTIONS = ("observational", "interventional")
_SOLVERS = ("cholesky", "cg")


# --------------------------------------------------------------------------- model access
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
    p = _Parts(kind=_model_kind(model), feature_names=names, ls=ls, cl=cl, cr=cr, alpha=alpha,
               transform=model.transform, model_name=str(getattr(model, "model_name", type(model).__name__)),
               model_version=version)
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


# --------------------------------------------------------------------------- CME engine
def _masked_kernel(A: torch.Tensor, B: torch.Tensor, Zc: torch.Tensor) -> torch.Tensor:
    """k_S(a, b) = exp(−½ Σ_{j∈S} (a_j − b_j)²) for each coalition row of ``Zc``: (cb, na, nb).

    A, B are in kernel units (divided by the length-scales); one batched matmul plus in-place
    updates: log k_S = a_Sᵀb_S − ½‖a_S‖² − ½‖b_S‖², clamped at 0 against rounding.
    """
    half_a2 = 0.5 * ((A * A) @ Zc.T)                           # (na, cb)
    half_b2 = 0.5 * ((B * B) @ Zc.T)                           # (nb, cb)
    out = torch.matmul(A.unsqueeze(0) * Zc.unsqueeze(1), B.T)  # (cb, na, nb)
    out.sub_(half_a2.T.unsqueeze(2)).sub_(half_b2.T.unsqueeze(1))
    return out.clamp_max_(0.0).exp_()


def _batched_pcg(K: torch.Tensor, B: torch.Tensor, precond_chol: torch.Tensor | None,
                 tol: float = 1e-8, max_iter: int = 500) -> tuple[torch.Tensor, int]:
    """Batched preconditioned conjugate gradient (paper 000, Appendix A, Algorithm 3).

    Solves K[c] X[c] = B[c] for every coalition c and right-hand side column, with the shared
    preconditioner P = (K_Ω + nλI)⁻¹ given by its Cholesky factor (or none). Returns the
    solution and the number of iterations.
    """
    X = torch.zeros_like(B)
    R = B.clone()
    Zr = torch.cholesky_solve(R, precond_chol) if precond_chol is not None else R.clone()
    P = Zr.clone()
    rz = (R * Zr).sum(dim=1)                 # (cb, T)
    bnorm = B.norm(dim=1).clamp_min(1e-300)
    it = 0
    for it in range(1, max_iter + 1):
        KP = torch.matmul(K, P)
        a = rz / (P * KP).sum(dim=1).clamp_min(1e-300)
        X += a.unsqueeze(1) * P
        R -= a.unsqueeze(1) * KP
        if float((R.norm(dim=1) / bnorm).max()) < tol:
            break
        Zr = torch.cholesky_solve(R, precond_chol) if precond_chol is not None else R
        rz_new = (R * Zr).sum(dim=1)
        P = Zr + (rz_new / rz.clamp_min(1e-300)).unsqueeze(1) * P
        rz = rz_new
    return X, it


class _Space:
    """One feature space (items or contexts) in kernel units: every array divided by ℓ.

    The centre sets (e.g. c^ℓ and c^r) are stored once as their distinct rows, since Γ_S(c, x)
    depends on the centre only through its coordinates (Nyström centres are catalog items, so
    c^ℓ ∪ c^r has far fewer distinct rows than 2M).
    """

    def __init__(self, eng: "_Engine", ref: np.ndarray, items: np.ndarray, centre_sets: Sequence[np.ndarray],
                 ls: np.ndarray):
        self.ref = eng.tensor(ref / ls)                      # (n, d) reference sample (catalog)
        self.items = eng.tensor(items / ls)                  # (T, d) distinct items explained
        uniq, maps = _unique_rows(*[np.asarray(c, dtype=np.float64) for c in centre_sets])
        self.centres = eng.tensor(uniq / ls)                 # (M_u, d)
        self.maps = [torch.as_tensor(m, device=eng.device) for m in maps]

    def split(self, G: torch.Tensor) -> list:
        """Γ over the distinct centres (cb, T, M_u) → one (cb, T, M) tensor per centre set."""
        return [G[..., m] for m in self.maps]          # advanced indexing: ~6x faster than index_select(2)


class _Engine:
    """Γ_S(c, x) for chunks of coalitions (see the module docstring).

    For a chunk of coalitions the CME systems (K_S + nλI) are factorised together (batched
    Cholesky, cached per coalition up to ``cache_mb``) or solved by batched PCG (Algorithm 3).
    The right-hand side is chosen by size: with T items and M_u distinct centres,
    E[k_{S^c}(X, c) | x_S] = k_{S^c}(c, X)ᵀ (K_S + nλI)⁻¹ k_S(X, x) is computed as
    K_{S^c}^{CX} · solve(K_S, K_S^{XT}) when T ≤ M_u, else solve(K_S, K_{S^c}^{XC})ᵀ · K_S^{XT};
    the normaliser Σβ = 1ᵀ(K_S + nλI)⁻¹ k_S(X, x) rides along as one extra column.
    """

    def __init__(self, cme_reg: float, value_function: str, solver: str, device, dtype,
                 max_memory_mb: float, normalize: bool = True, cg_tol: float = 1e-8,
                 cache: dict | None = None, cache_mb: float = 0.0):
        self.reg = cme_reg
        self.normalize = normalize
        self.fallbacks = 0
        self.value_function = value_function
        self.solver = solver
        self.device = torch.device(device)
        self.dtype = dtype
        self.mem = max_memory_mb * 2 ** 20
        self.cg_tol = cg_tol
        self.cg_iterations: list[int] = []
        self.solve_seconds = 0.0
        self.cache = cache if cache is not None else {}
        self.cache_bytes = cache_mb * 2 ** 20

    def tensor(self, a) -> torch.Tensor:
        return torch.as_tensor(np.ascontiguousarray(a), dtype=self.dtype, device=self.device)

    def chunk_size(self, space: _Space, extra_per_coalition: float = 0.0) -> int:
        n, T, Mu = space.ref.shape[0], space.items.shape[0], space.centres.shape[0]
        M = sum(m.shape[0] for m in space.maps)
        floats = 2 * n * n + 2 * n * T + 3 * Mu * n + 4 * Mu * T + 2 * M * T + extra_per_coalition
        per = floats * torch.finfo(self.dtype).bits / 8
        cb = int(self.mem // per)
        if cb < 1:
            raise BudgetError(
                f"One coalition needs {per / 2 ** 20:.0f} MiB (reference n={n}, items T={T}, centres M={M}) "
                f"but max_memory_mb={self.mem / 2 ** 20:.0f}; raise max_memory_mb, lower max_reference, "
                "or explain fewer duels per call.")
        return cb

    def _factor(self, make_K: Callable[[], torch.Tensor], zb: np.ndarray, key_space) -> torch.Tensor:
        """Cholesky factors of a chunk of CME matrices, from the cache when all are there."""
        keys = [(key_space, row.tobytes()) for row in zb]
        if keys and all(k in self.cache for k in keys):
            return torch.stack([self.cache[k] for k in keys])
        L, info = torch.linalg.cholesky_ex(make_K())
        if bool((info != 0).any()):
            raise InvalidInputError(
                f"CME kernel matrix is not positive definite; increase cme_reg (now {self.reg}) "
                "or remove duplicate reference items.")
        used = sum(v.numel() * v.element_size() for v in self.cache.values())
        for k, Lk in zip(keys, L):
            if used + Lk.numel() * Lk.element_size() > self.cache_bytes:
                break
            self.cache[k] = Lk.clone()
            used += Lk.numel() * Lk.element_size()
        return L

    def gammas(self, space: _Space, masks: np.ndarray, extra_per_coalition: float = 0.0, key_space="items"):
        """Yield (slice, Γ) over chunks of ``masks``; Γ has shape (cb, T, M_u): Γ[c, t, u] = Γ_S(c_u, x_t)."""
        n, T, Mu = space.ref.shape[0], space.items.shape[0], space.centres.shape[0]
        cb = self.chunk_size(space, extra_per_coalition)
        precond = None
        if self.solver == "cg" and self.value_function == "observational":
            full = torch.ones((1, space.ref.shape[1]), dtype=self.dtype, device=self.device)
            K_full = _masked_kernel(space.ref, space.ref, full)[0]
            K_full.diagonal().add_(n * self.reg)
            precond = torch.linalg.cholesky(K_full)
        route_items = T <= Mu
        for start in range(0, masks.shape[0], cb):
            sl = slice(start, min(start + cb, masks.shape[0]))
            zb = masks[sl]
            Zc = self.tensor(zb.astype(np.float64))
            empty = ~zb.any(axis=1)
            full = zb.all(axis=1)
            t0 = time.perf_counter()
            Kc = _masked_kernel(space.ref, space.centres, 1.0 - Zc)   # (cb, n, M_u): k_{S^c}(X, c)
            if self.value_function != "observational":
                solve = np.zeros_like(empty)
            elif self.normalize:
                solve = ~empty & ~full          # shortcuts: normalised β is exactly 1/n at ∅; Σβ = 1 at Ω
            else:
                solve = np.ones_like(empty)     # the paper's estimator, literally, for every S
            if solve.any():
                # every row of the chunk is solved (∅/Ω rows are cheap and overwritten below)
                Kx = _masked_kernel(space.ref, space.items, Zc)      # (cb, n, T): k_S(X, x)

                def make_K():
                    K = _masked_kernel(space.ref, space.ref, Zc)     # (cb, n, n)
                    K.diagonal(dim1=1, dim2=2).add_(n * self.reg)
                    return K

                ones = torch.ones((Zc.shape[0], n, 1), dtype=self.dtype, device=self.device)
                rhs = Kx if route_items else Kc
                if self.solver == "cholesky":
                    L = self._factor(make_K, zb, key_space)
                    sol, w = torch.cholesky_solve(rhs, L), torch.cholesky_solve(ones, L)
                else:
                    K = make_K()
                    sol, its = _batched_pcg(K, rhs, precond, tol=self.cg_tol)
                    w, its2 = _batched_pcg(K, ones, precond, tol=self.cg_tol)
                    self.cg_iterations.append(max(its, its2))
                    del K
                if route_items:                                                         # sol = β (cb, n, T)
                    m = torch.matmul(sol.transpose(1, 2), Kc)                           # (cb, T, M_u)
                else:                                                                   # sol = (K+nλI)⁻¹ k(X, c)
                    m = torch.matmul(Kx.transpose(1, 2), sol)
                if self.normalize:
                    tot = torch.matmul(w.transpose(1, 2), Kx).transpose(1, 2)           # Σβ(x): (cb, T, 1)
                    bad = tot.abs() < 1e-8
                    m /= torch.where(bad, torch.ones_like(tot), tot)
                    if bool(bad.any()):
                        self.fallbacks += int(bad[torch.as_tensor(solve, device=self.device)].sum())
                        m = torch.where(bad, Kc.mean(dim=1, keepdim=True), m)
                keep = np.flatnonzero(~solve)
                if len(keep):
                    k_t = torch.as_tensor(keep, device=self.device)
                    m[k_t] = Kc[k_t].mean(dim=1, keepdim=True)
                del Kx, sol, w
            else:                                   # β_i = 1/n for every row
                m = Kc.mean(dim=1, keepdim=True).expand(-1, T, -1).clone()
            self.solve_seconds += time.perf_counter() - t0
            if full.any() and self.normalize:
                # Ω: no feature left to integrate, Σ β̃ = 1 (the literal estimator keeps Σβ(x))
                m[torch.as_tensor(np.flatnonzero(full), device=self.device)] = 1.0
            del Kc
            m *= _masked_kernel(space.items, space.centres, Zc)     # k_S(x, c)
            yield sl, m


def _unique_rows(*arrays: np.ndarray) -> tuple[np.ndarray, list]:
    """Unique rows of the stacked arrays and, per array, the index of each row among them."""
    stacked = np.concatenate(arrays, axis=0)
    uniq, inv = np.unique(stacked, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    out, start = [], 0
    for a in arrays:
        out.append(inv[start:start + a.shape[0]])
        start += a.shape[0]
    return uniq, out


def _pair_values(GL, GR, a, b, W, mem) -> torch.Tensor:
    """ν[c, p] = Σ_m W[(p,) m] (GL[c,a_p,m] GR[c,b_p,m] − GR[c,a_p,m] GL[c,b_p,m]).

    GL, GR : (cb, T, M) Γ at the left / right centres; a, b : (P,) item indices of each duel;
    W : (M,) or (P, M) weights. Duels are processed in blocks bounded by ``mem`` bytes.
    """
    cb, _, M = GL.shape
    P = a.shape[0]
    out = torch.empty((cb, P), dtype=GL.dtype, device=GL.device)
    step = max(1, int(mem // (5 * cb * M * GL.element_size())))
    for s in range(0, P, step):
        ia, ib = a[s:s + step], b[s:s + step]
        t = GL[:, ia] * GR[:, ib]
        t -= GR[:, ia] * GL[:, ib]                                                    # (cb, p, M)
        if W.ndim == 1:
            out[:, s:s + step] = torch.matmul(t, W)
        else:
            out[:, s:s + step] = (t * W[s:s + step].unsqueeze(0)).sum(dim=2)
    return out


# --------------------------------------------------------------------------- players
def _players(names: Sequence[str], groups: Mapping[str, Sequence[str]] | None):
    """Player names and membership matrix (n_players, d) from optional feature groups."""
    d = len(names)
    if not groups:
        return list(names), np.eye(d, dtype=bool)
    pos = {n: i for i, n in enumerate(names)}
    member, pnames, used = [], [], set()
    for g, feats in groups.items():
        row = np.zeros(d, dtype=bool)
        for f in feats:
            if f not in pos:
                raise InvalidInputError(f"feature_groups[{g!r}] names unknown feature {f!r}; features are {list(names)}.")
            if f in used:
                raise InvalidInputError(f"Feature {f!r} appears in more than one group of feature_groups.")
            used.add(f)
            row[pos[f]] = True
        if row.any():
            member.append(row)
            pnames.append(str(g))
    groups_first = {int(np.flatnonzero(r)[0]): (n, r) for n, r in zip(pnames, member)}
    out_names, out_rows = [], []
    for i, n in enumerate(names):          # keep the model's feature order
        if i in groups_first:
            out_names.append(groups_first[i][0]); out_rows.append(groups_first[i][1])
        elif n not in used:
            r = np.zeros(d, dtype=bool); r[i] = True
            out_names.append(n); out_rows.append(r)
    return out_names, np.array(out_rows)


# --------------------------------------------------------------------------- the explainer
class PrefSHAP:
    """Pref-SHAP explainer for a fitted GPM / C-GPM / UPM (paper 000, Section 3, Algorithm 1).

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
    value_function : {"observational", "interventional"}
        Conditional (CME, the paper's choice) or marginal reference distribution.
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
                 normalize_cme: bool = True, cache_mb: float = 256.0, random_state: int | None = 0):
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

    # ------------------------------------------------------------------ helpers
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
        return _Space(eng, self._ref, items_scaled, cs, ls)

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
        for sl, G in eng.gammas(space, masks_full):
            GL, GR = space.split(G)
            out[sl] = _pair_values(GL, GR, a_t, b_t, W, eng.mem / 4).cpu().numpy()
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
            summed within feature groups. ``extra`` records coalitions, exactness, dropped
            players, reference size and solver.

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
        sign = self._outcome_sign(outcome, XL.shape[0])
        eng = self._engine()
        W = self._context_weights(eng, U)
        pnames, member, dropped, active, plan, masks = self._players_for(
            p.feature_names, self.feature_groups, np.concatenate([XL, XR]), self._rng)
        v = self._item_values(masks, np.asarray(p.transform(XL), float), np.asarray(p.transform(XR), float), W, eng)
        phi, base, pred = self._shapley(plan, v, len(pnames), active)
        data = (XL - XR) @ member.T.astype(float)
        phi, pred, base, data = phi * sign[:, None], pred * sign, base * sign, data * sign[:, None]
        return self._finish("pref-shap", phi, base, pred, pnames, data, t0, plan, dropped, pnames,
                            {"oriented": "winner-loser" if outcome is not None else "left-right",
                             "context": "given" if U is not None else ("averaged" if p.kind == "cgpm" else "none")})

    @staticmethod
    def _outcome_sign(outcome, P: int) -> np.ndarray:
        if outcome is None:
            return np.ones(P)
        y = np.asarray(outcome).reshape(-1)
        if y.shape[0] != P or not np.all(np.isin(y, (-1, 0, 1))):
            raise InvalidInputError(f"outcome must hold {P} values in {{+1, -1, 0}}; got {np.asarray(outcome)!r:.80}.")
        return np.where(y == 0, 1.0, y.astype(float))

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
                GL, GR = space.split(G)
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

    # ------------------------------------------------------------------ Table 1, rows 3–4
    def _context_values(self, masks_u: np.ndarray, U: np.ndarray, Xi: torch.Tensor, eng: _Engine,
                        pair_u: np.ndarray | None) -> np.ndarray:
        """ν̂_{S'} (Prop. 3.3): Σ_m α_m Γ^U_{S'}(u_m, u) Ξ_m for every coalition (rows) and column of Ξ."""
        p = self._p
        Us = np.asarray(p.transform_context(U), float)
        uniq, (iu,) = _unique_rows(Us)
        space = _Space(eng, self._ref_u, uniq, [p.cu], p.ls_u)
        alpha = eng.tensor(p.alpha)
        cols = torch.as_tensor(iu if pair_u is None else iu[pair_u], device=eng.device)
        out = np.empty((masks_u.shape[0], Xi.shape[1]))
        for sl, Gu in eng.gammas(space, masks_u, key_space="contexts"):
            (G,) = space.split(Gu)
            out[sl] = torch.matmul(G[:, cols] * Xi.T.unsqueeze(0), alpha).cpu().numpy()
        return out

    def _xi(self, eng: _Engine, XL: np.ndarray, XR: np.ndarray) -> torch.Tensor:
        """Ξ_m(x^ℓ_p, x^r_p) = k(x^ℓ,c^ℓ_m)k(x^r,c^r_m) − k(x^ℓ,c^r_m)k(x^r,c^ℓ_m): (M, P)."""
        p = self._p
        ls = p.ls
        L = eng.tensor(np.asarray(p.transform(XL), float) / ls)
        R = eng.tensor(np.asarray(p.transform(XR), float) / ls)
        cl, cr = eng.tensor(p.cl / ls), eng.tensor(p.cr / ls)
        ones = torch.ones((1, len(ls)), dtype=eng.dtype, device=eng.device)
        k = lambda A, C: _masked_kernel(C, A, ones)[0]    # (M, P)
        return k(L, cl) * k(R, cr) - k(L, cr) * k(R, cl)

    def _require_cgpm(self):
        if self._p.kind != "cgpm":
            raise InvalidInputError(
                f"Context explanations need a C-GPM (a model with context features); got a {self._p.kind.upper()}.")

    def explain_duel_contexts(self, U, XL, XR, outcome=None) -> Explanation:
        """Which context features drove each duel (Table 1, row 3; Prop. 3.3).

        Parameters
        ----------
        U : array-like of shape (P, p)
            Contexts (raw units).
        XL, XR : array-like of shape (P, d)
        outcome : array-like of shape (P,), optional
            Orient winner-vs-loser as in :meth:`explain_duels`.

        Returns
        -------
        Explanation
            method ``"pref-shap-context"``; players are the context features;
            ``base_values`` = ν(∅') = ḡ(x^ℓ, x^r); ``prediction`` = g_U(u, x^ℓ, x^r); ``data`` = u.
        """
        t0 = time.perf_counter()
        self._require_cgpm()
        p = self._p
        d, q = len(p.feature_names), len(p.context_names)
        U = _check_matrix("U", U, q)
        XL = _check_matrix("XL", XL, d); XR = _check_matrix("XR", XR, d)
        if not (U.shape[0] == XL.shape[0] == XR.shape[0]):
            raise InvalidInputError(f"U, XL, XR must have the same number of rows; got {U.shape[0]}, {XL.shape[0]}, {XR.shape[0]}.")
        sign = self._outcome_sign(outcome, XL.shape[0])
        eng = self._engine()
        Xi = self._xi(eng, XL, XR)
        pnames, member, dropped, active, plan, masks = self._players_for(
            p.context_names, None, np.concatenate([np.asarray(p.transform_context(U), float), self._ref_u]), self._rng)
        v = self._context_values(masks, U, Xi, eng, np.arange(U.shape[0]))
        phi, base, pred = self._shapley(plan, v, len(pnames), active)
        return self._finish("pref-shap-context", phi * sign[:, None], base * sign, pred * sign, pnames, U, t0,
                            plan, dropped, pnames, {"task": "duel-context",
                                                    "reference_contexts": int(self._ref_u.shape[0])})

    def explain_contexts(self, U, XL_duels, XR_duels) -> Explanation:
        """Which context features matter on average (Table 1, row 4).

        Value function (1/m) Σ_j ν̂_{S'}(u, x^ℓ_j, x^r_j) over the given duels, for each context u.

        Parameters
        ----------
        U : array-like of shape (n_u, p)
            Contexts explained (raw units).
        XL_duels, XR_duels : array-like of shape (m, d)
            The duels averaged over.

        Returns
        -------
        Explanation
            method ``"pref-shap-context"``, one row per context; ``data`` = u.
        """
        t0 = time.perf_counter()
        self._require_cgpm()
        p = self._p
        d, q = len(p.feature_names), len(p.context_names)
        U = _check_matrix("U", U, q)
        XL = _check_matrix("XL_duels", XL_duels, d); XR = _check_matrix("XR_duels", XR_duels, d)
        if XL.shape != XR.shape:
            raise InvalidInputError(f"XL_duels and XR_duels must have the same shape; got {XL.shape} and {XR.shape}.")
        eng = self._engine()
        Xi_mean = self._xi(eng, XL, XR).mean(dim=1, keepdim=True)          # (M, 1)
        pnames, member, dropped, active, plan, masks = self._players_for(
            p.context_names, None, np.concatenate([np.asarray(p.transform_context(U), float), self._ref_u]), self._rng)
        Xi_rep = Xi_mean.expand(-1, U.shape[0])
        v = self._context_values(masks, U, Xi_rep, eng, np.arange(U.shape[0]))
        phi, base, pred = self._shapley(plan, v, len(pnames), active)
        return self._finish("pref-shap-context", phi, base, pred, pnames, U, t0, plan, dropped, pnames,
                            {"task": "context-average", "n_duels": int(XL.shape[0]),
                             "reference_contexts": int(self._ref_u.shape[0])})

    # ------------------------------------------------------------------ baselines
    def explain_upm_duels(self, XL, XR, outcome=None) -> Explanation:
        """SHAP of a UPM's utility, differenced: φ(x^ℓ) − φ(x^r) (Section 4 baseline, "upm-shap").

        The utility f(x) = Σ_m α_m [k(x, c^ℓ_m) − k(x, c^r_m)] is explained with the RKHS-SHAP
        value function ν_S(x) = E[f(X) | X_S = x_S] (Eqs. 5–6) on the same reference catalog.
        ``prediction`` = f(x^ℓ) − f(x^r).
        """
        if self._p.kind != "upm":
            raise InvalidInputError(
                f"upm-shap explains a utility model (UPM); got a {self._p.kind.upper()}. Fit a UPM for the baseline.")
        e = self.explain_duels(XL, XR, outcome=outcome)
        e.method = "upm-shap"
        return e

    def explain_concat_duels(self, XL, XR, reference_duels=None, outcome=None) -> Explanation:
        """Naive concatenation z = (x^ℓ, x^r) with 2d players (Section 3.1, Appendix B; "concat-shap").

        g(z) = Σ_m α_m [k₂(z, (c^ℓ_m, c^r_m)) − k₂(z, (c^r_m, c^ℓ_m))] is a function of 2d features
        with a product kernel, explained with the standard value function E[g(Z) | Z_S = z_S]
        (observational CME on the reference duels, or marginal with ``value_function=
        "interventional"``). Feature names are ``"<name>(l)"`` and ``"<name>(r)"``.

        Parameters
        ----------
        reference_duels : tuple (XL_ref, XR_ref), optional
            Reference sample of duels (raw units); default: the model's centre pairs.
        """
        t0 = time.perf_counter()
        p = self._p
        if p.kind == "cgpm":
            W = self._context_weights(self._engine(), None)
        elif p.kind == "gpm":
            W = None
        else:
            raise InvalidInputError("concat-shap explains a GPM or C-GPM preference function g.")
        d = len(p.feature_names)
        XL = _check_matrix("XL", XL, d); XR = _check_matrix("XR", XR, d)
        if XL.shape != XR.shape:
            raise InvalidInputError(f"XL and XR must have the same shape; got {XL.shape} and {XR.shape}.")
        sign = self._outcome_sign(outcome, XL.shape[0])
        if reference_duels is None:
            Zref = np.concatenate([p.cl, p.cr], axis=1)
        else:
            RL = _check_matrix("reference_duels[0]", reference_duels[0], d)
            RR = _check_matrix("reference_duels[1]", reference_duels[1], d)
            Zref = np.concatenate([np.asarray(p.transform(RL), float), np.asarray(p.transform(RR), float)], axis=1)
        Zref = self._subsample(np.unique(Zref, axis=0))
        Z = np.concatenate([np.asarray(p.transform(XL), float), np.asarray(p.transform(XR), float)], axis=1)
        names = [f"{n}(l)" for n in p.feature_names] + [f"{n}(r)" for n in p.feature_names]
        eng = self._engine()
        alpha = eng.tensor(p.alpha) if W is None else W
        ls2 = np.concatenate([p.ls, p.ls])
        pnames, member, dropped, active, plan, masks = self._players_for(names, None, Z, self._rng)
        uniq, (iz,) = _unique_rows(Z)
        space = _Space(eng, Zref, uniq, [np.concatenate([p.cl, p.cr], 1), np.concatenate([p.cr, p.cl], 1)], ls2)
        w = self._signed_weights(space, alpha)
        cols = torch.as_tensor(iz, device=eng.device)
        v = np.empty((masks.shape[0], Z.shape[0]))
        for sl, G in eng.gammas(space, masks, key_space="concat"):
            v[sl] = torch.matmul(G, w)[:, cols].cpu().numpy()
        phi, base, pred = self._shapley(plan, v, len(pnames), active)
        data = np.concatenate([XL, XR], axis=1)
        phi, base, pred = phi * sign[:, None], base * sign, pred * sign
        return self._finish("concat-shap", phi, base, pred, pnames, data, t0, plan, dropped, pnames,
                            {"reference_size": int(Zref.shape[0])})


# --------------------------------------------------------------------------- functional API
def _split(kwargs: dict, call: Sequence[str]) -> tuple[dict, dict]:
    return {k: v for k, v in kwargs.items() if k not in call}, {k: v for k, v in kwargs.items() if k in call}


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
    >>> round(float(e.additivity_error()[0]), 12), e.top_features(1), e.extra["dropped_players"]
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
