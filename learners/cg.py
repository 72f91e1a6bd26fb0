"""Conjugate gradient, preconditioned and batched over right-hand sides.

One implementation for every symmetric positive (semi-)definite solve of the project: Falkon's
preconditioned system (:mod:`learners.falkon`, one vector) and the batched CME systems of Pref-SHAP
(Hu, Chau, Ferrando Huertas & Sejdinovic 2022, *Explaining Preferences with Shapley Values*,
Appendix A, Algorithm 3: one matrix per coalition, many right-hand sides, a shared preconditioner).

Each column of ``b`` runs its own CG recursion (its own step sizes); a column stops when
``‖r‖ ≤ tol · ‖b‖`` or when it meets a direction with ``pᵀAp ≤ 0`` (a null direction of a
semi-definite operator: nothing more to gain).
"""

from __future__ import annotations

from typing import Callable

import torch

__all__ = ["conjugate_gradient"]


def conjugate_gradient(op: Callable[[torch.Tensor], torch.Tensor], b: torch.Tensor, x0: torch.Tensor | None = None,
                       max_iter: int = 100, tol: float = 1e-10,
                       precond: Callable[[torch.Tensor], torch.Tensor] | None = None) -> tuple[torch.Tensor, int]:
    """Solve ``A x = b`` for a symmetric positive (semi-)definite operator ``A``.

    Parameters
    ----------
    op : callable
        ``op(P)`` = ``A P``, for ``P`` of the shape of ``b``.
    b : Tensor of shape (n,) or (..., n, k)
        One right-hand side, or ``k`` columns per batch entry (each column solved separately).
    x0 : Tensor, optional
        Starting point (default zeros).
    max_iter : int
        Largest number of iterations (operator applications after the first residual).
    tol : float
        Relative residual at which a column stops.
    precond : callable, optional
        ``precond(R)`` ≈ ``A⁻¹ R`` (e.g. a Cholesky solve with a nearby matrix).

    Returns
    -------
    x : Tensor, shape of ``b``
    iterations : int
        Iterations done by the slowest column.

    Examples
    --------
    >>> A = torch.tensor([[4.0, 1.0], [1.0, 3.0]], dtype=torch.float64)
    >>> x, it = conjugate_gradient(lambda p: A @ p, torch.tensor([1.0, 2.0], dtype=torch.float64))
    >>> [round(float(v), 6) for v in x], it
    ([0.090909, 0.636364], 2)
    """
    vec = b.ndim == 1
    B = b.unsqueeze(-1) if vec else b
    apply = (lambda M: op(M.squeeze(-1)).unsqueeze(-1)) if vec else op
    if x0 is None:
        X = torch.zeros_like(B)
        R = B.clone()
    else:
        X = (x0.unsqueeze(-1) if vec else x0).clone()
        R = B - apply(X)
    bnorm = torch.linalg.vector_norm(B, dim=-2)
    active = bnorm > 0
    if not bool(active.any()):
        return torch.zeros_like(b), 0
    Z = precond(R) if precond is not None else R
    P = Z.clone()
    rz = (R * Z).sum(dim=-2)
    it = 0
    for it in range(1, max_iter + 1):
        active = active & (torch.linalg.vector_norm(R, dim=-2) > tol * bnorm)
        if not bool(active.any()):
            it -= 1
            break
        AP = apply(P)
        pAp = (P * AP).sum(dim=-2)
        active = active & (pAp > 0)
        a = torch.where(active, rz / torch.where(active, pAp, torch.ones_like(pAp)), torch.zeros_like(pAp))
        X += a.unsqueeze(-2) * P
        R -= a.unsqueeze(-2) * AP
        if not bool(active.any()):
            break
        Z = precond(R) if precond is not None else R
        rz_new = (R * Z).sum(dim=-2)
        beta = torch.where(active & (rz != 0), rz_new / torch.where(rz != 0, rz, torch.ones_like(rz)),
                           torch.zeros_like(rz))
        P = Z + beta.unsqueeze(-2) * P
        rz = rz_new
    return (X.squeeze(-1) if vec else X), it
