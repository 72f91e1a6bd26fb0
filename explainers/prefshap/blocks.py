"""Per-coalition kernel blocks of Pref-SHAP kept across calls on one model snapshot.

For a coalition S the CME of Hu, Chau, Ferrando Huertas & Sejdinovic (2022, *Explaining
Preferences with Shapley Values*, Proposition 3.2) needs, besides the explained items, blocks that
depend only on S, the reference catalog X and the model's centres c: A_S = (K_S + nλI)⁻¹ k_{S^c}(X, c)
(n × M_u), so that E[k_{S^c}(X, c) | x_S] = k_S(X, x)ᵀ A_S is one product per explained item; the mean
of k_{S^c}(X, c) over X (the rows ∅ and Ω); and (K_S + nλI)⁻¹ 1 (the normaliser of the CME weights).
Under a marginal value function only k_{S^c}(X, c) is stored. They are computed on first use (the
explainer worker fills them once per fitted snapshot) and stored here in slots of one preallocated
tensor per block, so a later call on the same coalitions reads them as views (no copy when the
coalitions come in the same order, one gather otherwise) instead of recomputing them.
"""

from __future__ import annotations

import torch

__all__: list[str] = []


class _BlockBank:
    """Blocks of one feature space, by coalition key, within ``budget_bytes``.

    Parameters
    ----------
    budget_bytes : float
        Memory for all blocks; coalitions beyond it are recomputed on every call.
    """

    def __init__(self, budget_bytes: float):
        self.budget = float(budget_bytes)
        self.slot: dict = {}
        self.store: dict[str, torch.Tensor] = {}
        self.capacity: int | None = None
        self.hits = 0
        self.misses = 0

    @property
    def nbytes(self) -> int:
        """Bytes of the blocks stored so far."""
        per = sum(t[0].numel() * t.element_size() for t in self.store.values())
        return per * len(self.slot)

    def room(self) -> bool:
        """Whether a block could still be stored (True before the first :meth:`put` sizes the bank)."""
        return self.capacity is None or len(self.slot) < self.capacity

    def get(self, keys: list) -> dict[str, torch.Tensor] | None:
        """The blocks of ``keys`` stacked as (len(keys), ...) tensors, or None if any is missing."""
        if not keys or any(k not in self.slot for k in keys):
            self.misses += len(keys)
            return None
        self.hits += len(keys)
        idx = [self.slot[k] for k in keys]
        if idx == list(range(idx[0], idx[0] + len(idx))):
            return {name: t[idx[0]:idx[0] + len(idx)] for name, t in self.store.items()}
        it = torch.as_tensor(idx, device=next(iter(self.store.values())).device)
        return {name: t.index_select(0, it) for name, t in self.store.items()}

    def put(self, keys: list, blocks: dict[str, torch.Tensor]) -> None:
        """Store the blocks (each of shape (len(keys), ...)) of the keys not stored yet, while room is left."""
        if self.capacity is None:
            per = sum(b[0].numel() * b.element_size() for b in blocks.values())
            self.capacity = int(self.budget // per) if per else 0
            if self.capacity == 0:
                return
            self.store = {name: torch.empty((self.capacity,) + tuple(b.shape[1:]), dtype=b.dtype, device=b.device)
                          for name, b in blocks.items()}
        if set(blocks) != set(self.store):
            return
        for i, k in enumerate(keys):
            if k in self.slot:
                continue
            if len(self.slot) >= self.capacity:
                return
            s = len(self.slot)
            for name, b in blocks.items():
                self.store[name][s].copy_(b[i])
            self.slot[k] = s
