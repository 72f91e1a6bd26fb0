"""The capacity learner's stream default: logistic loss, per-coordinate AdaGrad, interactions earned.

:class:`CapacityLogistic` learns the same model as the paper's learners — a Choquet integral
(or multilinear model) in Möbius coordinates, F(x) = Σ_S m(S) φ_S(x_S) (Herin, Perny &
Sokolovska 2024, Section 2, Equation (1)), by default 2-additive — with what the online-learning
literature offers for real, noisy streams:

* **Loss.** The logistic loss of the margin g = F(x_left) − F(x_right), target (1 + y)/2 (a tie
  counts as half a win): P(left preferred) = σ(g) is the Bradley–Terry probability, so the
  learner's probabilities are calibrated by the loss itself and ``predict_proba_one`` needs no
  separate link. (The paper's hinge loss of problem (2) only orders; its margins are scale-free
  and σ(margin) means nothing — see :mod:`learners.capacity` for the reproduction mode.)
* **Inputs.** Criteria are standardised online (running mean / standard deviation, merged
  exactly); criteria with ``decreasing`` are flipped. The φ-differences d are then divided
  coordinate-wise by their running root-mean-square (scaling only, no centring: the margin stays
  skew-symmetric), exactly as :class:`learners.linear.LinearBT` scales x_left − x_right.
* **Steps.** Diagonal AdaGrad composite mirror descent (Duchi, Hazan & Singer 2011, JMLR,
  Section 3, Equation (19) with the ℓ1 closed form of Section 5.1):
  u = w − η g/H, H = √(Σ g²), w ← sign(u)[|u| − η λ_t(S)/H]₊.
* **Regularisation scaled to the stream.** Singletons (the additive part) are unpenalised;
  a coalition S with |S| ≥ 2 pays λ_t(S) = c·(|S| − 1)/√t at round t (c = ``interaction_l1``).
  Summed over the rounds the penalty grows like 2c√t ‖m_S‖₁ while the loss grows like t, so its
  weight relative to the data decays as 2c/√t: strong on short streams (the model stays close to
  the additive, linear Bradley–Terry one), vanishing on long ones (interactions are learned).
  ``interaction_l1 = 0`` learns them freely.

Measured choice (bench/quality_real.py, docs/capacity.md): AdaGrad mirror descent beat AdaGrad
dual averaging (Xiao 2010; Duchi et al. 2011, RDA form) on Pokémon by 0.003–0.005 AUC at equal
features; min-max scaling lost 0.005–0.013 AUC against standardisation on Train and tennis;
a fixed interaction penalty could not serve both the 106-event chameleons stream and the 20,000-event
MCDA streams, the 1/√t penalty does.

Merging (:meth:`CapacityLogistic.__iadd__`) — what is exact and what is not:

* exact: the scaler statistics (count, Σx, Σx²), the RMS statistics of the φ-differences, the
  AdaGrad accumulators Σg² and the example counts are sums, so the merged values are those of the
  pooled data (the gradients in Σg² are each partition's own);
* approximate: the iterate. Mirror descent has no additive sufficient statistic for m (its
  iterate is path-dependent), so the merged masses are the count-weighted average of the
  partitions' masses (parameter mixing; Mann et al. 2009, Zinkevich et al. 2010 — the rule
  :class:`~learners.linear.LinearBT` uses). For convex losses and i.i.d. partitions the average
  converges to the same optimum; bench/quality_real.py measures the hold-out gap (P = 1, 4, 12).

``learn_many`` processes rows in consecutive blocks of ``minibatch`` rows: the scalers and RMS
statistics advance row by row exactly as in ``learn_one``; the gradients of one block are taken at
the block's starting iterate and applied as one AdaGrad step whose accumulator has every row's
squared gradient (mini-batch mirror descent; Dekel, Gilad-Bachrach, Shamir & Xiao 2012).
``minibatch=1`` equals the ``learn_one`` loop exactly (tested); the default's gap is measured on
the paper's Table 1 protocol in docs/capacity.md.

Examples
--------
>>> import numpy as np
>>> model = CapacityLogistic(criteria=["price", "quality"], decreasing=["price"])
>>> rng = np.random.default_rng(0)
>>> for _ in range(300):
...     a, b = rng.random(2), rng.random(2)
...     fa, fb = (1 - a[0]) + a[1], (1 - b[0]) + b[1]
...     model.learn_one({"price": a[0], "quality": a[1]}, {"price": b[0], "quality": b[1]}, 1 if fa > fb else -1)
>>> model.predict_one({"price": 0.1, "quality": 0.9}, {"price": 0.9, "quality": 0.1})
1
>>> model.predict_proba_one({"price": 0.1, "quality": 0.9}, {"price": 0.9, "quality": 0.1})[1] > 0.9
True
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from learners.capacity_base import _CapacityLearner, _clip, _is_real
from learners.exceptions import InvalidParameterError, check_param

__all__ = ["PAPER_ONLY_PARAMS", "CapacityLogistic"]

_EPS = 1e-12

#: Parameters of the paper's learners (:mod:`learners.capacity`) that the stream default does not take.
PAPER_ONLY_PARAMS = frozenset({"constraints", "gamma", "delta", "rho", "l1", "max_nnz", "constraint_backend", "eta1"})


def _sigmoid(g):
    return 0.5 * (1.0 + np.tanh(0.5 * g))


class CapacityLogistic(_CapacityLearner):
    """Capacity model learned online with the logistic loss and per-coordinate AdaGrad (stream default).

    Parameters
    ----------
    criteria : sequence of str
        Criterion names (keys of the item dicts), n = len(criteria).
    aggregation : {"choquet", "multilinear"}, default "choquet"
    k_additive : int or None, default 2
        Keep coalitions of size ≤ k (None: all 2**n − 1). k ≥ n means the full model.
    eta : float, default 0.1
        AdaGrad step η > 0 (on RMS-scaled φ-differences, as LinearBT's ``learning_rate``).
    interaction_l1 : float, default 4.0
        c ≥ 0 of the interaction penalty λ_t(S) = c (|S| − 1)/√t (singletons are unpenalised).
    scaler : {"standard", "minmax", "none"}, default "standard"
        Online standardisation, online min-max onto [0, 1], or none (inputs must lie in [0, 1]).
    decreasing : sequence of str, default ()
        Criteria where less is better (flipped after scaling).
    minibatch : int, default 16
        Block size of :meth:`learn_many` (1: exactly the ``learn_one`` loop).
    optimizer : {"adagrad", "adagrad-rda"}, default "adagrad"
        AdaGrad composite mirror descent, or AdaGrad regularised dual averaging (Duchi et al. 2011,
        Eq. (18); Xiao 2010): w = −η soft(G_t, Λ_t(S))/H_t with G_t = Σ g, Λ_t(S) = Σ_τ λ_τ(S)
        ≈ 2c(|S| − 1)√t. Its state (G, Σg², counts) merges by pooled sums and the closed form.

    Raises
    ------
    InvalidParameterError
        Any parameter outside its domain.

    References
    ----------
    Herin, Perny & Sokolovska (2024), IJCAI, Section 2 (model); Duchi, Hazan & Singer (2011), JMLR
    12, Section 3 Eq. (19) and Section 5.1 (AdaGrad composite mirror descent with ℓ1); Dekel,
    Gilad-Bachrach, Shamir & Xiao (2012), JMLR 13 (mini-batches); Mann et al. (2009) NeurIPS and
    Zinkevich et al. (2010) NeurIPS (parameter mixing).
    """

    _algorithm = "logistic-adagrad"
    #: :meth:`learn_many` is a mini-batch variant (gradients of a block at the block's first
    #: iterate); with ``minibatch=1`` it is exactly the :meth:`learn_one` loop (tests/checks).
    learn_many_matches_loop = False
    exact_learn_many_params = {"minibatch": 1}

    def __init__(self, criteria: Sequence[str], aggregation: str = "choquet", k_additive: int | None = 2,
                 eta: float = 0.1, interaction_l1: float = 4.0, scaler: str = "standard",
                 decreasing: Sequence[str] = (), minibatch: int = 16, optimizer: str = "adagrad") -> None:
        owner = type(self).__name__
        n = len(list(criteria)) if not isinstance(criteria, str) else 0
        check_param(owner, "k_additive", k_additive,
                    k_additive is None or (isinstance(k_additive, (int, np.integer)) and not isinstance(k_additive, bool)
                                           and k_additive >= 1), "None or an int >= 1")
        check_param(owner, "eta", eta, _is_real(eta) and eta > 0, "a float in the range (0, inf)")
        check_param(owner, "interaction_l1", interaction_l1, _is_real(interaction_l1) and interaction_l1 >= 0,
                    "a float in the range [0, inf)")
        check_param(owner, "minibatch", minibatch,
                    isinstance(minibatch, (int, np.integer)) and not isinstance(minibatch, bool) and minibatch >= 1,
                    "an int >= 1")
        check_param(owner, "optimizer", optimizer, optimizer in ("adagrad", "adagrad-rda"),
                    "one of ('adagrad', 'adagrad-rda')")
        k_eff = None if k_additive is None or (n and k_additive >= n) else int(k_additive)
        super().__init__(criteria, aggregation, k_eff, scaler=scaler, decreasing=decreasing)
        self.k_additive = k_additive
        self.eta = float(eta)
        self.interaction_l1 = float(interaction_l1)
        self.minibatch = int(minibatch)
        self.optimizer = optimizer
        d = self._index.d
        self._w = np.zeros(d)        # weights on RMS-scaled differences z = d / s
        self._Q = np.zeros(d)        # AdaGrad Σ g²
        self._G = np.zeros(d)        # Σ g (dual averaging only)
        self._S2 = np.zeros(d)       # Σ w d² (RMS statistics of the φ-differences)
        self._pen = self.interaction_l1 * (self._index.sizes.astype(np.float64) - 1.0)

    # ------------------------------------------------------------------ helpers
    def _rms(self, S2: np.ndarray, t) -> np.ndarray:
        s = np.sqrt(S2 / np.maximum(t, _EPS))
        return np.where(s > _EPS, s, 1.0)

    def _losses(self, margins: np.ndarray, Y: np.ndarray) -> np.ndarray:
        """Cross-entropy of σ(margin) against the target (1 + y)/2."""
        tgt = 0.5 * (1.0 + np.asarray(Y, dtype=np.float64))
        return tgt * np.logaddexp(0.0, -margins) + (1.0 - tgt) * np.logaddexp(0.0, margins)

    def _step(self, d: np.ndarray, y: int, w: float) -> float:
        """``learn_one``'s round: a chunk of one row (so ``learn_many`` with ``minibatch=1`` is identical)."""
        return float(self._chunk(d[None, :], np.array([float(y)]), np.array([float(w)]))[0])

    def _chunk(self, D: np.ndarray, Y: np.ndarray, W: np.ndarray) -> np.ndarray:
        """Rows ``D`` (T, d) in blocks of ``minibatch``; returns the online losses (T,) at each block's start iterate.

        The RMS statistics advance row by row (cumulative sums started from the current state, so the
        additions happen in the same order as in the row-by-row loop); the iterate advances per block.
        """
        S2 = np.cumsum(np.concatenate([self._S2[None, :], W[:, None] * D * D]), axis=0)[1:]
        t = np.cumsum(np.concatenate([[self._t], W]))[1:]
        Z = D / self._rms(S2, t[:, None])
        Z2 = Z * Z
        tgt = 0.5 * (1.0 + Y)
        G_all = np.empty(len(Y))                                            # margins at each block's start
        rowthr = W / np.sqrt(t)                                             # per-row prox weights w_τ/√t_τ
        w, Q, G, eta, pen = self._w, self._Q, self._G, self.eta, self._pen
        rda = self.optimizer == "adagrad-rda"
        tmp = np.empty_like(w)
        for r in range(0, len(Y), self.minibatch):
            e = min(r + self.minibatch, len(Y))
            Zb = Z[r:e]
            g = G_all[r:e] = Zb @ w
            c = W[r:e] * (_sigmoid(g) - tgt[r:e])                        # ∂ℓ/∂g, weighted
            Q += (c * c) @ Z2[r:e]
            H = np.sqrt(Q)
            H += 1e-8
            if rda:
                G += c @ Zb
                thr = 2.0 * math.sqrt(t[e - 1]) * pen                   # Σ_τ≤t c(|S|−1)/√τ ≈ 2c(|S|−1)√t
                np.multiply(np.subtract(G, _clip(G, -thr, thr, tmp)), -eta / H, out=w)
            else:
                u = w - eta * (c @ Zb) / H
                thr = (eta * float(np.sum(rowthr[r:e]))) * pen / H        # Σ of the rows' prox thresholds
                np.subtract(u, _clip(u, -thr, thr, tmp), out=w)
        losses = self._losses(G_all, Y)
        self._S2[:] = S2[-1]
        self._t = float(t[-1])
        np.divide(w, self._rms(self._S2, self._t), out=self._m)           # masses in φ units
        return losses

    def _run(self, UL: np.ndarray, UR: np.ndarray, Y: list, W: list) -> np.ndarray:
        """All rows through :meth:`_chunk` (see the module docstring); returns the online losses, shape (T,)."""
        Y = np.asarray(Y, dtype=np.float64)
        W = np.asarray(W, dtype=np.float64)
        losses = np.empty(len(Y))
        rows = self.minibatch * max(1, (1 << 20) // (self.minibatch * self._index.d))
        for s in range(0, len(Y), rows):
            e = min(s + rows, len(Y))
            F = self._index.features(np.concatenate([UL[s:e], UR[s:e]]), self.aggregation)
            losses[s:e] = self._chunk(F[:e - s] - F[e - s:], Y[s:e], W[s:e])
        return losses

    # ---------------------------------------------------------------- merge
    def __iadd__(self, other: "CapacityLogistic") -> "CapacityLogistic":
        """Merge ``other`` (trained on a disjoint part of the stream) into ``self``.

        Sums (scaler statistics, RMS statistics, AdaGrad Σg², counts) are pooled exactly; the masses
        become the count-weighted average (t m + t' m')/(t + t') (parameter mixing). See the module
        docstring.

        Raises
        ------
        InvalidParameterError
            Other class or other parameters.
        """
        if type(other) is not type(self):
            raise InvalidParameterError(f"Cannot merge a {type(other).__name__} into a {type(self).__name__}.")
        mine, theirs = self._params(), other._params()
        if mine != theirs:
            diff = {k: (mine[k], theirs[k]) for k in mine if mine[k] != theirs[k]}
            raise InvalidParameterError(f"Cannot merge capacity learners with different parameters: {diff}.")
        if other._t == 0:
            return self
        t1, t2 = self._t, other._t
        if self.optimizer == "adagrad-rda":                 # pooled dual sums, closed form
            self._G += other._G
            self._Q += other._Q
            self._S2 += other._S2
            self._t = t1 + t2
            if self._scaler is not None:
                self._scaler.merge(other._scaler)
            H = np.sqrt(self._Q) + 1e-8
            thr = 2.0 * math.sqrt(self._t) * self._pen
            np.multiply(np.subtract(self._G, np.clip(self._G, -thr, thr)), -self.eta / H, out=self._w)
            np.divide(self._w, self._rms(self._S2, self._t), out=self._m)
            self._merge_window(other)
            return self
        m = (t1 * self._m + t2 * other._m) / (t1 + t2)
        self._S2 += other._S2
        self._Q += other._Q
        self._t = t1 + t2
        if self._scaler is not None:
            self._scaler.merge(other._scaler)
        self._m[:] = m
        np.multiply(m, self._rms(self._S2, self._t), out=self._w)
        self._merge_window(other)
        return self

    def __add__(self, other: "CapacityLogistic") -> "CapacityLogistic":
        """A new learner equal to ``copy(self) += other``."""
        out = type(self).from_state(self.state_dict())
        out += other
        return out

    def merge(self, other: "CapacityLogistic") -> "CapacityLogistic":
        """In-place merge (same as ``self += other``); returns ``self``."""
        self += other
        return self

    # ---------------------------------------------------------------- state
    def _extra_arrays(self) -> dict:
        return {"w": self._w.copy(), "adagrad_sq": self._Q.copy(), "rms_sq": self._S2.copy(), "grad_sum": self._G.copy()}

    def _load_extra(self, arrays: dict) -> None:
        self._w[:] = arrays["w"]
        self._Q[:] = arrays["adagrad_sq"]
        self._G[:] = arrays["grad_sum"]
        self._S2[:] = arrays["rms_sq"]
