"""Semi-synthetic click logs with a known truth: the protocol of counterfactual learning to rank.

The standard evaluation of learning from biased clicks (Joachims, Swaminathan & Schnabel 2017,
§6; Wang et al. 2018, §5) takes a real catalog and *simulates* the users so that the truth is
known:

1. **Truth.** A utility u(x) of every catalog item (e.g. Times Higher Education's published
   overall score, a fixed linear combination of its five pillars) and a click relevance
   r(x) = r_max · exp(β (u(x) − max u)) ∈ (0, r_max] (log-linear in u, so that a pairwise
   logistic model of the IPS-weighted clicks is consistent for u; Joachims et al. 2017, eq. 6).
2. **Logging policy.** Each session draws ``n_candidates`` items uniformly from the catalog and
   shows ``k`` of them, ranked by a Plackett–Luce sample of a *different* linear scorer
   (``logging_weights``, the production ranker): the ranker's bias is what naive learning
   picks up.
3. **Position-based click model.** The item at position j is examined with probability θ_j
   = (1/j)^η and clicked, if examined, with probability ε + (1 − ε) r(x) (ε = click noise).
   Each shown item carries its ``position`` and its ``propensity`` θ_j — the probability that
   a click on it, there, could be observed (Joachims et al. 2017, §4).

From one simulated log the benchmark trains the same learner three times: on naive pairs
(unweighted), on IPS-weighted pairs (``click_weighting = ips`` / ``snips``), and on the
*oracle*: the same item pairs labelled by the truth (:meth:`ClickSimulation.oracle_events`).
:func:`kendall_tau` and :func:`ndcg_at_k` compare the learned catalog ranking with the truth.

References
----------
T. Joachims, A. Swaminathan, T. Schnabel. Unbiased learning-to-rank with biased feedback. WSDM 2017.
X. Wang, N. Golbandi, M. Bendersky, D. Metzler, M. Najork. Position bias estimation for unbiased
learning to rank in personal search. WSDM 2018.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from learners.exceptions import InvalidParameterError
from stream.clicks.log import ClickPairing, SessionExpander

__all__ = ["ClickSimulation", "catalog_scores", "kendall_tau", "ndcg_at_k"]


@dataclass
class ClickSimulation:
    """A catalog, a truth, a logging policy and a position-based click model.

    Parameters
    ----------
    X : ndarray of shape (n_items, d)
        Item features as sent to the learner (standardise them first).
    feature_names : list of str
    utility : ndarray of shape (n_items,)
        The true utility u.
    logging_weights : ndarray of shape (d,)
        The logging ranker's linear scorer (on ``X``).
    k : int, default 5
        Items shown per session (positions 1..k).
    n_candidates : int, default 20
        Items drawn uniformly per session before the logging ranker orders them.
    eta : float, default 1.0
        Position bias: θ_j = (1/j)^η.
    r_max, beta : float
        Relevance r = r_max · exp(β (u − max u)), with u standardised.
    noise : float, default 0.02
        Click probability of an examined item on top of its relevance (ε).
    logging_temperature : float, default 0.5
        Plackett–Luce temperature of the logging ranker (on its standardised scores).
    item_ids : list of str, optional
    """

    X: np.ndarray
    feature_names: list
    utility: np.ndarray
    logging_weights: np.ndarray
    k: int = 5
    n_candidates: int = 20
    eta: float = 1.0
    r_max: float = 0.5
    beta: float = 1.5
    noise: float = 0.02
    logging_temperature: float = 0.5
    item_ids: list | None = None

    def __post_init__(self) -> None:
        self.X = np.asarray(self.X, dtype=np.float64)
        n = len(self.X)
        if not 2 <= self.k <= self.n_candidates <= n:
            raise InvalidParameterError(f"ClickSimulation needs 2 ≤ k ≤ n_candidates ≤ n_items; got k={self.k}, "
                                        f"n_candidates={self.n_candidates}, n_items={n}.")
        self.utility = np.asarray(self.utility, dtype=np.float64)
        if self.item_ids is None:
            self.item_ids = [f"i{j}" for j in range(n)]
        u = (self.utility - self.utility.mean()) / (self.utility.std() or 1.0)
        self.relevance = self.r_max * np.exp(self.beta * (u - u.max()))
        s = self.X @ np.asarray(self.logging_weights, dtype=np.float64)
        self._log_score = (s - s.mean()) / (s.std() or 1.0) / self.logging_temperature
        self.theta = (1.0 / np.arange(1, self.k + 1)) ** self.eta

    def item_records(self):
        """Item-catalog records (``item.v1``) of the catalog."""
        for j, iid in enumerate(self.item_ids):
            yield {"schema_version": 1, "item_id": iid,
                   "features": {f: float(v) for f, v in zip(self.feature_names, self.X[j])}}

    def simulate(self, n_sessions: int, seed: int = 0, inline: bool = False) -> list[dict]:
        """``n_sessions`` click-session records (``click_session.v1``) with positions and propensities.

        Parameters
        ----------
        n_sessions : int
        seed : int
            Seed of this call's generator (the simulation object holds no random state).
        inline : bool
            Shown items carry their features (else ids, resolved from :meth:`item_records`).
        """
        rng = np.random.default_rng(seed)
        n = len(self.X)
        out = []
        for t in range(n_sessions):
            cand = rng.choice(n, size=self.n_candidates, replace=False)
            g = self._log_score[cand] + rng.gumbel(size=self.n_candidates)  # Plackett–Luce sample
            shown = cand[np.argsort(-g)[: self.k]]
            examined = rng.random(self.k) < self.theta
            clicked = examined & (rng.random(self.k) < self.noise + (1 - self.noise) * self.relevance[shown])
            slots = []
            for j, i in enumerate(shown):
                slot = {"id": self.item_ids[i], "position": j + 1, "propensity": float(self.theta[j])}
                if inline:
                    slot["features"] = {f: float(v) for f, v in zip(self.feature_names, self.X[i])}
                slots.append(slot)
            out.append({"schema_version": 1, "session_id": f"sim-{seed}-{t}", "timestamp": 1_700_000_000 + t,
                        "shown": slots, "clicked": [self.item_ids[i] for i, c in zip(shown, clicked) if c]})
        return out

    def oracle_events(self, sessions: list[dict], strategy: str = "all") -> list[dict]:
        """The oracle: the pairs ``strategy`` makes of each session, labelled by the true utility.

        Returns preference events (``preference.v1``, items by id) with outcome sign(u_a − u_b)
        and weight 1 — the same item pairs as the click pairs, with unbiased labels.
        """
        index = {iid: j for j, iid in enumerate(self.item_ids)}
        ex = SessionExpander(ClickPairing(strategy=strategy))
        out = []
        for s in sessions:
            for a, b, _w, _swap in ex.plan(s["session_id"], s["shown"], set(s["clicked"])):
                ia, ib = s["shown"][a]["id"], s["shown"][b]["id"]
                d = self.utility[index[ia]] - self.utility[index[ib]]
                out.append({"schema_version": 1, "event_id": f"{s['session_id']}:{ia}>{ib}", "timestamp": s["timestamp"],
                            "left": {"id": ia}, "right": {"id": ib}, "outcome": int(np.sign(d))})
        return out


def catalog_scores(learner, X: np.ndarray, feature_names=None, n_reference: int = 64, seed: int = 0) -> np.ndarray:
    """Scores of every catalog item under a pairwise learner: mean margin against reference items.

    For a utility model (linear BT, capacity) the margin is u(x) − u(x_ref) and the ranking is
    that of u; for a general GPM it is the Borda-type average preference over ``n_reference``
    items drawn from the catalog.

    Parameters
    ----------
    learner : PreferenceLearner
    X : ndarray of shape (n_items, d)
    feature_names : list of str, optional
        Column names of ``X``; the columns are reordered to the learner's ``feature_names``
        (learners that take their names from the first example sort them).

    Returns
    -------
    ndarray of shape (n_items,)
    """
    X = np.asarray(X, dtype=np.float64)
    if feature_names is not None:
        col = {f: j for j, f in enumerate(feature_names)}
        X = X[:, [col[f] for f in learner.feature_names]]
    rng = np.random.default_rng(seed)
    ref = X[rng.choice(len(X), size=min(n_reference, len(X)), replace=False)]
    total = np.zeros(len(X))
    for r in ref:
        total += learner.margin_many(X, np.broadcast_to(r, X.shape).copy())
    return total / len(ref)


def kendall_tau(scores: np.ndarray, truth: np.ndarray) -> float:
    """Kendall τ-b between two score vectors over the same items (1 = same ranking)."""
    from scipy.stats import kendalltau

    return float(kendalltau(scores, truth).statistic)


def ndcg_at_k(scores: np.ndarray, gains: np.ndarray, k: int = 3) -> float:
    """nDCG@k of the ranking by ``scores`` with graded ``gains`` ≥ 0 (Järvelin & Kekäläinen 2002).

    Examples
    --------
    >>> ndcg_at_k(np.array([3.0, 2.0, 1.0]), np.array([1.0, 0.5, 0.0]), k=2)
    1.0
    """
    scores, gains = np.asarray(scores, dtype=float), np.asarray(gains, dtype=float)
    disc = 1.0 / np.log2(np.arange(2, k + 2))
    dcg = float(gains[np.argsort(-scores, kind="stable")[:k]] @ disc[: min(k, len(gains))])
    ideal = float(np.sort(gains)[::-1][:k] @ disc[: min(k, len(gains))])
    return dcg / ideal if ideal > 0 else 0.0
