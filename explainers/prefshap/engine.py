"""The conditional-mean-embedding engine of Pref-SHAP: Γ_S(c, x) for chunks of coalitions.

Hu, Chau, Ferrando Huertas & Sejdinovic (2022), *Explaining Preferences with Shapley Values*, Proposition 3.2 and Appendix A (batched Cholesky, batched preconditioned CG of
Algorithm 3, chunking by memory). Batched CG is :func:`learners.cg.conjugate_gradient`.
"""

from __future__ import annotations

import time
from typing import Sequence

import numpy as np
import torch

from explainers.prefshap.blocks import _BlockBank
from learners.cg import conjugate_gradient
from learners.exceptions import BudgetError, InvalidInputError

__all__: list[str] = []


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


class _Space:
    """One feature space (items or contexts) in kernel units: every array divided by ℓ.

    The centre sets (e.g. c^ℓ and c^r) are stored once as their distinct rows, since Γ_S(c, x)
    depends on the centre only through its coordinates (Nyström centres are catalog items, so
    c^ℓ ∪ c^r has far fewer distinct rows than 2M).

    With ``mass=True`` Γ gets one more column after the distinct centres, the CME's total weight
    Γ_S(1, x) = Σ_i β_i(x) (1 after normalisation): the conditional mean of the constant function 1,
    which a constant term of the item kernel needs (:meth:`split`).
    """

    def __init__(self, eng: "_Engine", ref: np.ndarray, items: np.ndarray, centre_sets: Sequence[np.ndarray],
                 ls: np.ndarray, mass: bool = False):
        self.mass = bool(mass)
        self.ref = eng.tensor(ref / ls)                      # (n, d) reference sample (catalog)
        self.items = eng.tensor(items / ls)                  # (T, d) distinct items explained
        uniq, maps = _unique_rows(*[np.asarray(c, dtype=np.float64) for c in centre_sets])
        self.centres = eng.tensor(uniq / ls)                 # (M_u, d)
        self.maps = [torch.as_tensor(m, device=eng.device) for m in maps]

    def split(self, G: torch.Tensor, constant: float = 0.0) -> list:
        """Γ over the distinct centres (cb, T, M_u) → one (cb, T, M) tensor per centre set.

        With ``constant = c`` each entry is the conditional mean of the item kernel (c + k)/√(1 + c)
        instead of k: (c·Σβ(x) + Γ_S(c_m, x))/√(1 + c) (docs/prefshap.md), with Σβ(x) the mass column
        of a space built with ``mass=True``, else 1 (normalised or marginal weights sum to one).
        """
        if constant:
            r = 1.0 / float(np.sqrt(1.0 + constant))
            if self.mass:
                return [G[..., m].add_(G[..., -1:], alpha=constant).mul_(r) for m in self.maps]
            return [G[..., m].add_(constant).mul_(r) for m in self.maps]
        return [G[..., m] for m in self.maps]          # advanced indexing: ~6x faster than index_select(2)

    def constant_term(self, G: torch.Tensor, constant: float = 0.0) -> torch.Tensor:
        """Γ with the item kernel's constant of :meth:`split` applied in place on the distinct centres
        (the same values, before any gather): (cb, T, M_u[+1])."""
        if constant:
            r = 1.0 / float(np.sqrt(1.0 + constant))
            if self.mass:
                G[..., :-1].add_(G[..., -1:], alpha=constant).mul_(r)
            else:
                G.add_(constant).mul_(r)
        return G

    def centre_kernel(self, eng: "_Engine", A: torch.Tensor, Zc: torch.Tensor) -> torch.Tensor:
        """k_·(A, centres) under the masks ``Zc``: (cb, n_A, M_u), plus the all-ones mass column if ``mass``."""
        K = _masked_kernel(A, self.centres, Zc)
        if self.mass:
            K = torch.cat([K, torch.ones(K.shape[:2] + (1,), dtype=K.dtype, device=K.device)], dim=2)
        return K


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
        n, T, Mu = space.ref.shape[0], space.items.shape[0], space.centres.shape[0] + int(space.mass)
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

    def _factor(self, K: torch.Tensor) -> torch.Tensor:
        """Cholesky factors of a chunk of CME matrices."""
        L, info = torch.linalg.cholesky_ex(K)
        if bool((info != 0).any()):
            raise InvalidInputError(
                f"CME kernel matrix is not positive definite; increase cme_reg (now {self.reg}) "
                "or remove duplicate reference items.")
        return L

    def gammas(self, space: _Space, masks: np.ndarray, extra_per_coalition: float = 0.0, key_space="items"):
        """Yield (slice, Γ) over chunks of ``masks``; Γ has shape (cb, T, M_u): Γ[c, t, u] = Γ_S(c_u, x_t)
        (M_u + 1 columns with ``space.mass``, the last one Σβ(x_t))."""
        n, T, Mu = space.ref.shape[0], space.items.shape[0], space.centres.shape[0] + int(space.mass)
        cb = self.chunk_size(space, extra_per_coalition)
        precond = None
        if self.solver == "cg" and self.value_function == "observational":
            full = torch.ones((1, space.ref.shape[1]), dtype=self.dtype, device=self.device)
            K_full = _masked_kernel(space.ref, space.ref, full)[0]
            K_full.diagonal().add_(n * self.reg)
            precond = torch.linalg.cholesky(K_full)
        route_items = T <= Mu
        bank = None
        if self.solver == "cholesky" and self.cache_bytes > 0:
            bank = self.cache.get(key_space)
            if bank is None:
                bank = self.cache[key_space] = _BlockBank(self.cache_bytes)
        for sl in _chunks(masks, cb, bank):
            zb = masks[sl]
            Zc = self.tensor(zb.astype(np.float64))
            empty = ~zb.any(axis=1)
            full = zb.all(axis=1)
            t0 = time.perf_counter()
            keys = [row.tobytes() for row in zb]
            got = None if bank is None else bank.get(keys)
            # k_{S^c}(X, c) (cb, n, M_u), unless the bank holds what it is needed for
            Kc = space.centre_kernel(self, space.ref, 1.0 - Zc) if got is None else got.get("Kc")
            Kcm = got["Kcm"] if got is not None and "Kcm" in got else None     # its mean over X (cb, 1, M_u)
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
                m = None
                if self.solver == "cholesky":
                    if got is None:
                        L = self._factor(make_K())
                        w = torch.cholesky_solve(ones, L)
                        if bank is not None and bank.room():
                            # keep (K_S + nλI)⁻¹ k_{S^c}(X, c) (n, M_u): later calls need one product per chunk
                            # (n²·M_u to form; without room the solve for the items alone, n²·T, is cheaper)
                            A = torch.cholesky_solve(Kc, L)
                            Kcm = Kc.mean(dim=1, keepdim=True)
                            bank.put(keys, {"A": A, "Kcm": Kcm, "w": w})
                            m = torch.matmul(Kx.transpose(1, 2), A)                     # (cb, T, M_u)
                            sol = A
                        else:
                            sol = torch.cholesky_solve(rhs, L)
                        del L
                    else:
                        w = got["w"]
                        sol = got["A"]
                        m = torch.matmul(Kx.transpose(1, 2), sol)
                else:
                    K = make_K()
                    pre = None if precond is None else (lambda R: torch.cholesky_solve(R, precond))
                    sol, its = conjugate_gradient(lambda P: torch.matmul(K, P), rhs, max_iter=500, tol=self.cg_tol,
                                                  precond=pre)
                    w, its2 = conjugate_gradient(lambda P: torch.matmul(K, P), ones, max_iter=500, tol=self.cg_tol,
                                                 precond=pre)
                    self.cg_iterations.append(max(its, its2))
                    del K
                if m is None:
                    # sol = β (cb, n, T): Kᵀ route; else sol = (K + nλI)⁻¹ k(X, c) (cb, n, M_u)
                    m = torch.matmul(sol.transpose(1, 2), Kc) if route_items else torch.matmul(Kx.transpose(1, 2), sol)
                if Kcm is None:
                    Kcm = Kc.mean(dim=1, keepdim=True)
                if self.normalize:
                    tot = torch.matmul(w.transpose(1, 2), Kx).transpose(1, 2)           # Σβ(x): (cb, T, 1)
                    bad = tot.abs() < 1e-8
                    m /= torch.where(bad, torch.ones_like(tot), tot)
                    if bool(bad.any()):
                        self.fallbacks += int(bad[torch.as_tensor(solve, device=self.device)].sum())
                        m = torch.where(bad, Kcm, m)
                keep = np.flatnonzero(~solve)
                if len(keep):
                    k_t = torch.as_tensor(keep, device=self.device)
                    m[k_t] = Kcm[k_t]
                del Kx, sol, w
            else:                                   # β_i = 1/n for every row
                if got is None and bank is not None and self.value_function != "observational":
                    bank.put(keys, {"Kc": Kc})
                m = (Kcm if Kcm is not None else Kc.mean(dim=1, keepdim=True)).expand(-1, T, -1).clone()
            self.solve_seconds += time.perf_counter() - t0
            if full.any() and self.normalize:
                # Ω: no feature left to integrate, Σ β̃ = 1 (the literal estimator keeps Σβ(x))
                m[torch.as_tensor(np.flatnonzero(full), device=self.device)] = 1.0
            del Kc
            m *= space.centre_kernel(self, space.items, Zc)         # k_S(x, c)
            yield sl, m


def _chunks(masks: np.ndarray, cb: int, bank) -> list[slice]:
    """Slices of at most ``cb`` coalitions; with stored kernel blocks, cut where their slots stop being
    consecutive, so that every chunk reads its blocks as one view (no gather)."""
    K = masks.shape[0]
    if bank is None or not bank.slot:
        return [slice(a, min(a + cb, K)) for a in range(0, K, cb)]
    slots = np.array([bank.slot.get(row.tobytes(), -1) for row in masks])
    cut = np.flatnonzero((slots[1:] != slots[:-1] + 1) | (slots[1:] < 0) | (slots[:-1] < 0)) + 1
    out = []
    for a, b in zip(np.concatenate([[0], cut]), np.concatenate([cut, [K]])):
        out += [slice(int(s), int(min(s + cb, b))) for s in range(int(a), int(b), cb)]
    return out


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


class _PairIndex:
    """Flat indices into Γ (cb, T, M_u) of the four factors of :func:`_pair_values_flat` for blocks of duels
    (``a``, ``b``: (P,) item indices of each duel; ``maps``: the centre sets' columns among the distinct
    centres), so that each factor is one gather from Γ instead of a gather per centre set and then per duel."""

    def __init__(self, maps, a: torch.Tensor, b: torch.Tensor, width: int, step: int):
        L, R = maps
        self.M = L.shape[0]
        self.blocks = []
        for s in range(0, a.shape[0], step):
            ia, ib = (a[s:s + step] * width).unsqueeze(1), (b[s:s + step] * width).unsqueeze(1)
            self.blocks.append((s, ia.shape[0], (ia + L).reshape(-1), (ib + R).reshape(-1),
                                (ia + R).reshape(-1), (ib + L).reshape(-1)))


def _pair_values_flat(G: torch.Tensor, index: _PairIndex, W: torch.Tensor) -> torch.Tensor:
    """ν[c, p] = Σ_m W[(p,) m] (Γ[c,a_p,L_m] Γ[c,b_p,R_m] − Γ[c,a_p,R_m] Γ[c,b_p,L_m]): (cb, P).

    Γ (cb, T, M_u) at the distinct centres (the item kernel's constant applied, :meth:`_Space.constant_term`);
    W : (M,) or (P, M) weights. Duels in the blocks of ``index``.

    Γ is laid out once as (T·M_u, cb), coalitions last, so that every factor is a gather of whole rows
    (contiguous copies; a gather along the last axis of (cb, T·M_u) is ~5x slower)."""
    cb = G.shape[0]
    rows = G.permute(1, 2, 0).reshape(-1, cb)                                          # (T·M_u, cb)
    out = torch.empty((sum(blk[1] for blk in index.blocks), cb), dtype=G.dtype, device=G.device)
    for s, p, aL, bR, aR, bL in index.blocks:
        t = torch.index_select(rows, 0, aL).mul_(torch.index_select(rows, 0, bR))
        t.sub_(torch.index_select(rows, 0, aR).mul_(torch.index_select(rows, 0, bL)))
        t = t.view(p, index.M, cb)                                                      # (p, M, cb)
        if W.ndim == 1:
            out[s:s + p] = torch.matmul(W, t)
        else:
            out[s:s + p] = (t * W[s:s + p].unsqueeze(2)).sum(dim=1)
    return out.T
