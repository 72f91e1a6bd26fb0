"""The coalition games of ShaRP: the QoI of hybrids of an item and reference rows, for many coalitions.

Pliatsika, Fonseca, Akhynko, Shevchenko & Stoyanovich (2024), *ShaRP: Explaining Rankings and
Preferences with Shapley Values*, Section 3 (marginal feature removal) and Algorithm 1 (lines 4–7).
A mixin of :class:`explainers.sharp.SharpExplainer`.
"""

from __future__ import annotations

import numpy as np

from explainers.exceptions import BudgetError
from explainers.sharp.inputs import _call_scores

__all__: list[str] = []

MAX_GAME_VALUES = 1 << 26          # items x coalition values held at once (512 MiB of float64)


def _runs(col: np.ndarray) -> list[tuple[int, int, bool]]:
    """Maximal runs ``(start, stop, value)`` of a boolean vector."""
    cuts = [0] + (np.flatnonzero(col[1:] != col[:-1]) + 1).tolist() + [int(col.size)]
    return [(a, b, bool(col[a])) for a, b in zip(cuts[:-1], cuts[1:])]


class _GamesMixin:
    """Q(S) for coalitions of removed features, scored in vectorised, memory-bounded blocks."""

    def _games(self, v: np.ndarray, s_v: np.ndarray, excl: np.ndarray | None, ref_rows: np.ndarray,
               inv_k: np.ndarray, zero_col: np.ndarray, q_full: np.ndarray, masks: np.ndarray, qoi: str,
               k: int | None, per_row: bool = False) -> np.ndarray:
        """Q(S) for the coalition codes ``masks``; shape (B, len(masks)), column ``c`` = ``masks[c]``.

        ``masks`` are codes over the explainer's players (bit ``p`` set = player ``p`` removed, i.e. its
        features taken from the reference row). ``v`` (B, d); ``ref_rows`` (m, d) shared or (B, m, d).
        Item ``b`` averages its reference rows with equal weight ``inv_k[b]``, leaving out row
        ``zero_col[b]`` (``m`` = none: the explained item's own row when it is removed from the
        reference). ``q_full`` (B,) is ``Q(A)``; ``Q(∅)`` is the QoI of ``v`` itself. With ``per_row``
        (sampled reference rows, none of them ``v``) the QoI of every hybrid is returned instead of the
        mean: shape (B, len(masks), m), ``Q(A)`` of row ``u`` being ``q_full[:, u]`` (B, m).
        """
        B, d = v.shape
        masks = np.asarray(masks, dtype=np.int64)
        full = (1 << self.p) - 1
        if B * masks.size > MAX_GAME_VALUES:
            raise BudgetError(f"{B} items x {masks.size} coalition values exceed the budget of {MAX_GAME_VALUES} "
                              f"game values per call; explain at most {max(1, MAX_GAME_VALUES // masks.size)} "
                              "items per call.")
        m_rows = ref_rows.shape[-2]
        Q = np.zeros((B, masks.size) + ((m_rows,) if per_row else ()))
        s_excl = s_v if excl is not None else None
        if per_row:
            Q[:, masks == 0] = self._qoi(s_v, s_excl, qoi, k)[:, None, None]
            Q[:, masks == full] = q_full[:, None, :]
        else:
            Q[:, masks == 0] = self._qoi(s_v, s_excl, qoi, k)[:, None]
            Q[:, masks == full] = q_full[:, None]
        pos = np.flatnonzero((masks != 0) & (masks != full))
        mid = masks[pos]
        if mid.size == 0:
            return Q
        tol = self.tol
        shared = ref_rows.ndim == 2
        m = ref_rows.shape[-2]
        drop = zero_col < m
        per_item = mid.size * m
        if per_item <= self.max_rows:
            blocks = [(b, min(B, b + max(1, self.max_rows // per_item)), 0, mid.size)
                      for b in range(0, B, max(1, self.max_rows // per_item))]
        else:
            step = max(1, self.max_rows // m)
            blocks = [(b, b + 1, c, min(mid.size, c + step)) for b in range(B) for c in range(0, mid.size, step)]
        buf = None
        # a model that is a form of pairs of features scores the hybrids without building them; its scores
        # differ from the rows' by rounding, within the tie tolerance (so not with tie_rtol = 0)
        hyb = getattr(self.score_fn, "hybrid", None) if tol > 0 else None
        runs: dict[tuple[int, int], list] = {}
        for b0, b1, c0, c1 in blocks:
            if (c0, c1) not in runs:
                M = self._feature_bits(mid[c0:c1])                       # (C, d)
                runs[(c0, c1)] = M if hyb is not None else [(M[:, j], _runs(M[:, j])) for j in range(d)]
            R = ref_rows[None] if shared else ref_rows[b0:b1]            # (B', m, d)
            if hyb is not None:
                s = hyb(v[b0:b1], R, runs[(c0, c1)])
            else:
                s, buf = self._hybrid_scores(v[b0:b1], R, runs[(c0, c1)], d, b1 - b0, c1 - c0, m, buf)
            s = s.reshape(b1 - b0, c1 - c0, m)
            rank_counts = qoi == "rank" and self.ties != "average" and not per_row
            if per_row:
                Q[b0:b1, pos[c0:c1]] = self._qoi(s, None if s_excl is None else s_excl[b0:b1], qoi, k)
                continue
            if rank_counts:
                # rank = 1 + n - #{catalog <= s + tol} (min) or 1 + n - #{catalog < s - tol} (max), minus the
                # removed item's own count; averaged as integer sums, no float ranks materialised
                # the needle s ± tol, computed once for the count and the removed item's comparison
                x = (s + tol if self.ties == "min" else s - tol) if tol else s
                q = self._counter.count_le(x) if self.ties == "min" else self._counter.count_lt(x)
                if s_excl is not None:
                    ex = s_excl[b0:b1, None, None]
                    q += (ex > x) if self.ties == "min" else (ex >= x)
                tot = q.sum(axis=-1, dtype=np.int64).astype(np.float64)
            else:
                q = self._qoi(s, None if s_excl is None else s_excl[b0:b1], qoi, k)
                tot = q.sum(axis=-1)
            dr = drop[b0:b1]
            if dr.any():                         # take out the explained item's own reference row
                zc = np.where(dr, zero_col[b0:b1], 0)
                own = q[np.arange(b1 - b0), :, zc]                       # (B', C): row zc[b] of item b
                tot -= own * dr[:, None]
            mean = tot * inv_k[b0:b1, None]
            Q[b0:b1, pos[c0:c1]] = (self.n + 1.0) - mean if rank_counts else mean
        return Q

    def _hybrid_scores(self, v, R, col_runs, d, nb, nc, m, buf):
        """Build the hybrid rows of items ``v`` (nb, d), reference rows ``R`` (B', m, d) and ``nc``
        coalitions (their per-feature runs) and score them: ``(scores (nb·nc·m,), buffer)``."""
        # feature-major buffer: every column is written once, in long contiguous runs; the scoring
        # callable gets its (N, d) transpose (a Fortran-ordered view, no copy)
        size = d * nb * nc * m
        if buf is None or buf.size < size:
            buf = np.empty(size)                 # reused by every chunk of this call
        H = buf[:size].reshape(d, nb, nc, m)
        for j in range(d):                       # Gray-code order: few runs of "from u" / "from v"
            Hj, Rj, vj = H[j], R[:, None, :, j], v[:, j, None, None]
            col, runs_j = col_runs[j]
            if len(runs_j) > 16:                 # sampled coalitions: one vectorised selection instead
                np.copyto(Hj, np.where(col[None, :, None], Rj, vj))
                continue
            for a, z, on in runs_j:
                Hj[:, a:z, :] = Rj if on else vj
        HT = H.reshape(d, -1).T
        step = self.score_rows
        s = (_call_scores(self.score_fn, HT) if HT.shape[0] <= step else
             np.concatenate([_call_scores(self.score_fn, HT[a:a + step]) for a in range(0, HT.shape[0], step)]))
        return s, buf
