"""Quantities of interest of ShaRP (score, rank, top-k) evaluated against a sorted catalog.

Pliatsika, Fonseca, Akhynko, Shevchenko & Stoyanovich (2024), *ShaRP: Explaining Rankings and
Preferences with Shapley Values*, Section 4 (Eqs 2–5) and Algorithm 2. A mixin of
:class:`explainers.sharp.SharpExplainer`: it reads ``n``, ``ties``, ``scores`` and ``_counter``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__: list[str] = []


class _QoIMixin:
    """Rank / top-k / score of hybrid scores and exact reference means (see the package docstring)."""

    def _qoi(self, s: np.ndarray, s_excl: np.ndarray | None, qoi: str, k: int | None) -> np.ndarray:
        """QoI of hybrid scores ``s`` (shape (B, ...)); ``s_excl`` (B,) = score of the removed item."""
        if qoi == "score":
            return s
        n = self.n
        ex = None if s_excl is None else s_excl.reshape((-1,) + (1,) * (s.ndim - 1))
        tol = self.tol
        if self.ties in ("min", "average"):
            gt = n - self._counter.count_le(s + tol if tol else s)
            if ex is not None:
                gt = gt - (ex > s + tol)
        if self.ties in ("max", "average"):
            ge = n - self._counter.count_lt(s - tol if tol else s)
            if ex is not None:
                ge = ge - (ex >= s - tol)
        if self.ties == "min":
            r = 1.0 + gt
        elif self.ties == "max":
            r = 1.0 + ge
        else:
            r = 1.0 + (gt + ge) / 2.0
        if qoi == "rank":
            return r
        return (r <= k).astype(np.float64)

    def _ref_base(self, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Scores, ``#{catalog > s}`` and ``#{catalog ≥ s}`` of the reference rows (no item removed)."""
        s_ref = self.scores[ref]
        tol = self.tol
        return s_ref, self.n - self._counter.count_le(s_ref + tol), self.n - self._counter.count_lt(s_ref - tol)

    def _rank_from(self, gt: Any, ge: Any) -> Any:
        if self.ties == "min":
            return 1.0 + gt
        if self.ties == "max":
            return 1.0 + ge
        return 1.0 + (gt + ge) / 2.0

    def _ref_rows_qoi(self, s_ref: np.ndarray, gt: np.ndarray, ge: np.ndarray, s_excl: np.ndarray | None,
                      qoi: str, k: int | None) -> tuple[np.ndarray, np.ndarray]:
        """QoI and rank of given reference rows (arrays broadcastable to (B, m)), ``v`` removed."""
        if s_excl is not None:
            ex = s_excl.reshape((-1,) + (1,) * (np.ndim(s_ref) - 1 if np.ndim(s_ref) > 1 else 1))
            gt = gt - (ex > s_ref + self.tol)
            ge = ge - (ex >= s_ref - self.tol)
        r = self._rank_from(gt, ge)
        if qoi == "score":
            return np.broadcast_to(s_ref, np.shape(r)), r
        return (r if qoi == "rank" else (r <= k).astype(np.float64)), r

    def _ref_means(self, ref: np.ndarray, s_v: np.ndarray, exclude: bool, present: np.ndarray, pos: np.ndarray,
                   qoi: str, k: int | None) -> tuple[np.ndarray, np.ndarray]:
        """Exact mean QoI and mean rank over ``D' ∖ {v}`` for every explained item, shape (B,) each.

        Uses sums instead of a (B, |D'|) table: removing ``v`` from the catalog moves every reference
        row below it up by one place (``min``; ``≤`` for ``max``), counted by a binary search of
        ``f(v)`` in the sorted reference scores; top-k only needs the rows ranked just behind k.
        """
        s_ref, gt, ge = self._ref_base(ref)
        r0 = self._rank_from(gt, ge)
        B = s_v.size
        n_eff = ref.size - present
        if exclude:
            srt = np.sort(s_ref)
            below = np.searchsorted(srt, s_v - self.tol, side="left").astype(np.float64)     # #{u: f(u) < f(v)}
            below_eq = np.searchsorted(srt, s_v + self.tol, side="right").astype(np.float64)  # #{u: f(u) <= f(v)}
            shift = {"min": below, "max": below_eq, "average": (below + below_eq) / 2.0}[self.ties]
        else:
            shift = np.zeros(B)
        # rank of v itself as a reference row (only subtracted when v is in D' and removed from it)
        r_self = self._rank_from(gt[np.minimum(pos, ref.size - 1)], ge[np.minimum(pos, ref.size - 1)]) \
            - {"min": 0.0, "max": 1.0, "average": 0.5}[self.ties]
        self_on = present.astype(np.float64)
        sum_r = r0.sum() - shift - self_on * r_self
        mean_rank = sum_r / n_eff
        if qoi == "rank":
            return mean_rank, mean_rank
        if qoi == "score":
            return (s_ref.sum() - self_on * s_v) / n_eff, mean_rank
        # top-k: rows with r0 <= k stay in; rows with k < r0 <= k + 1 get in when v's removal lifts them
        q0 = (r0 <= k)
        cnt = np.full(B, float(q0.sum()))
        if exclude:
            cand = np.flatnonzero((r0 > k) & (r0 <= k + 1))
            if cand.size:
                q_c, _ = self._ref_rows_qoi(s_ref[cand][None, :], gt[cand][None, :], ge[cand][None, :], s_v, qoi, k)
                cnt += q_c.sum(axis=1)
        q_self, _ = self._ref_rows_qoi(s_v[:, None], gt[np.minimum(pos, ref.size - 1)][:, None],
                                       ge[np.minimum(pos, ref.size - 1)][:, None], s_v if exclude else None, qoi, k)
        cnt -= self_on * q_self[:, 0]
        return cnt / n_eff, mean_rank

