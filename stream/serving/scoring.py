"""The model behind the server: a small scoring interface over every registered learner.

A :class:`Scorer` wraps one live model version and answers two questions, on ndarrays:

* :meth:`Scorer.rank_scores` — one score per candidate, higher is better;
* :meth:`Scorer.proba` — P(left ≻ right) per pair, the learner's own ``predict_proba_many``
  (so ``/v1/compare`` equals the in-process prediction exactly);
* :meth:`Scorer.person_scores` — a personal model's utilities for one person (``learner.score(X,
  user_id)``: the population's plus the person's deviation).

Rank aggregates (the ``aggregate`` field of a rank response):

``utility``
    Utility models, g(a, b) = f(a) − f(b): the capacity models (Choquet / multilinear value
    F(x), Herin, Perny & Sokolovska 2024, Eq. (1); ``learner.score``) and ``linear-bt``
    (f(x) = w·x). Sorting by f is sorting by every pairwise probability at once.
``mean_pairwise_probability``
    Pairwise models (GPM, C-GPM; Hu, Chau et al. 2022, Sec. 2.1) have no utility: g(a, b) is not
    f(a) − f(b), and "a ≻ b ≻ c ≻ a" can be learned. Each candidate i gets its Borda score
    normalised to [0, 1], the mean probability that it beats another candidate of the request::

        s_i = 1/(n − 1) · Σ_{j ≠ i} σ(g(x_i, x_j)).

    The generalised preferential kernel factorises over items (Hu, Chau et al. 2022, Sec. 2.1;
    :func:`learners.kernels.pref_kernel`): with the item-to-centre kernel matrices
    ``A = k_c(X, CL)`` and ``B = k_c(X, CR)`` (n × M, item kernel k_c = (c + k)/√(1 + c)) and the
    coefficients w = α (C-GPM: α ⊙ k_U(u, CU) for the request's context u), every pairwise margin
    is ``G = H − Hᵀ`` with ``H = (A ⊙ w) Bᵀ``. It is computed in the stable form
    ``G = (H₀ − H₀ᵀ + c (f 1ᵀ − 1 fᵀ)) / (1 + c)``, ``H₀ = (K_L ⊙ w) K_Rᵀ``, ``f = (K_L − K_R) w`` on the
    plain RBF blocks (no c² cancellation): two kernel blocks and one n × n product per
    request, no loop over pairs.

Candidates by catalog id reuse per-row work: :meth:`Scorer.prepare_catalog` computes, once per
model version and catalog version, every item's utility (utility models) or its two RBF blocks
(GPM), and :meth:`Scorer.rank_catalog` gathers the request's rows from it.

Any other registered learner gets the same mean pairwise probability from one
``margin_many`` call on the n² pairs (built with ``np.repeat`` / ``np.tile``, still no Python loop).
"""

from __future__ import annotations

import abc

import numpy as np

from learners.exceptions import NotFittedError

__all__ = ["GPMScorer", "MarginScorer", "Scorer", "UtilityScorer", "scorer_for"]

UTILITY = "utility"
MEAN_PAIRWISE = "mean_pairwise_probability"


def _sigmoid(g: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * g))


class Scorer(abc.ABC):
    """What the endpoints need from a model: feature order, rank scores and pair probabilities.

    Attributes
    ----------
    learner : PreferenceLearner
    feature_names : list of str
        Column order of every ``X``.
    context_names : list of str
        Context columns (empty for context-free models).
    aggregate : str
        ``"utility"`` or ``"mean_pairwise_probability"`` (see the module docstring).
    """

    aggregate: str = MEAN_PAIRWISE

    def __init__(self, learner) -> None:
        from stream.serving.people import is_personal

        self.learner = learner
        self.feature_names = list(learner.feature_names or [])
        self.context_names = list(getattr(learner, "context_names", None) or [])
        #: a personal model (population + a deviation per person; :mod:`learners.personal`)
        self.personal = is_personal(learner)

    @abc.abstractmethod
    def rank_scores(self, X: np.ndarray, u: np.ndarray | None = None) -> np.ndarray:
        """Scores of the candidates.

        Parameters
        ----------
        X : ndarray of shape (n, n_features)
            Raw item features in :attr:`feature_names` order.
        u : ndarray of shape (n_context,), optional
            The request's context (context models).

        Returns
        -------
        ndarray of shape (n,)
            Higher is better.
        """

    def prepare_catalog(self, X: np.ndarray, ok: np.ndarray):
        """Per-row work on the whole catalog matrix, reused by every request by id (None: nothing to reuse).

        Parameters
        ----------
        X : ndarray of shape (n_rows, n_features)
            The catalog view in :attr:`feature_names` order.
        ok : ndarray of bool, shape (n_rows,)
            Rows holding a whole item (the others are never gathered).
        """
        return None

    def rank_catalog(self, prep, rows: np.ndarray, u: np.ndarray | None = None) -> np.ndarray:
        """:meth:`rank_scores` of the catalog rows ``rows`` from :meth:`prepare_catalog`'s result."""
        raise NotImplementedError

    def proba(self, XL: np.ndarray, XR: np.ndarray, U: np.ndarray | None = None, user_ids=None) -> np.ndarray:
        """P(left ≻ right) per pair, shape (n,): the learner's ``predict_proba_many`` (a personal learner's
        for ``user_ids``, one per pair)."""
        U = U if self.context_names else None
        if user_ids is not None and self.personal:
            return np.asarray(self.learner.predict_proba_many(XL, XR, U, user_ids=user_ids), dtype=np.float64)
        return np.asarray(self.learner.predict_proba_many(XL, XR, U), dtype=np.float64)

    def person_scores(self, X: np.ndarray, user_id: str) -> np.ndarray:
        """:meth:`rank_scores` for one person of a personal model (``learner.score(X, user_id)``)."""
        raise NotImplementedError(f"{type(self.learner).__name__} holds no people.")


class UtilityScorer(Scorer):
    """Utility models: ``learner.score(X)`` (capacity) or ``X @ learner.weights`` (linear-bt)."""

    aggregate = UTILITY

    def rank_scores(self, X, u=None):
        fn = getattr(self.learner, "score", None)
        if fn is not None:
            return np.asarray(fn(X), dtype=np.float64)
        return X @ np.asarray(self.learner.weights, dtype=np.float64)

    def person_scores(self, X, user_id):
        """F_u(x) = F(x) + ⟨δ_u, φ(x)⟩ (capacity-personal) or (w + δ_u)·x (linear-bt-personal)."""
        return np.asarray(self.learner.score(X, user_id), dtype=np.float64)

    def prepare_catalog(self, X, ok):
        """Every catalog item's utility (a rank by id is then a gather)."""
        out = np.full(X.shape[0], np.nan)
        if ok.any():
            out[ok] = self.rank_scores(X[ok])
        return out

    def rank_catalog(self, prep, rows, u=None):
        return prep[rows]


class GPMScorer(Scorer):
    """GPM / C-GPM (fitted :class:`learners.gpm.GPM` inside a refitting learner): mean pairwise probability."""

    def __init__(self, learner) -> None:
        super().__init__(learner)
        m = learner.model
        ls = np.asarray(m.lengthscales_, dtype=np.float64)
        self._mean, self._scale, self._ls = np.asarray(m.scaler_mean_), np.asarray(m.scaler_scale_), ls
        self._CL = np.asarray(m.centres_left_, dtype=np.float64) / ls
        self._CR = np.asarray(m.centres_right_, dtype=np.float64) / ls
        self._cl2 = (self._CL * self._CL).sum(1)
        self._cr2 = (self._CR * self._CR).sum(1)
        self._alpha = np.asarray(m.alpha_, dtype=np.float64)
        self._c = float(getattr(m, "item_constant_", 0.0))
        self._ctx = getattr(m, "centres_context_", None) is not None and bool(self.context_names)
        if self._ctx:
            lsu = np.asarray(m.context_lengthscales_, dtype=np.float64)
            self._umean, self._uscale, self._lsu = np.asarray(m.context_mean_), np.asarray(m.context_scale_), lsu
            self._CU = np.asarray(m.centres_context_, dtype=np.float64) / lsu

    @staticmethod
    def _rbf(Xs: np.ndarray, x2: np.ndarray, C: np.ndarray, c2: np.ndarray) -> np.ndarray:
        d2 = x2[:, None] + c2[None, :] - 2.0 * (Xs @ C.T)
        np.maximum(d2, 0.0, out=d2)
        return np.exp(-0.5 * d2)

    def weights(self, u: np.ndarray | None) -> np.ndarray:
        """α, or α ⊙ k_U(u, CU) for a C-GPM and the request's context ``u`` of shape (p,)."""
        if not self._ctx:
            return self._alpha
        if u is None:
            raise NotFittedError("This C-GPM needs the request's context.")   # caught as a 422 by the route
        us = ((np.asarray(u, dtype=np.float64) - self._umean) / self._uscale) / self._lsu
        d2 = ((self._CU - us[None, :]) ** 2).sum(1)
        return self._alpha * np.exp(-0.5 * d2)

    def blocks(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The item-to-centre RBF blocks ``(K_L, K_R)`` of raw items X, each of shape (n, M)."""
        Xs = ((X - self._mean) / self._scale) / self._ls
        x2 = (Xs * Xs).sum(1)
        return self._rbf(Xs, x2, self._CL, self._cl2), self._rbf(Xs, x2, self._CR, self._cr2)

    def margins_from_blocks(self, KL: np.ndarray, KR: np.ndarray, u: np.ndarray | None = None,
                            KLw: np.ndarray | None = None) -> np.ndarray:
        """G with G[i, j] = g(x_i, x_j), shape (n, n), skew-symmetric (see the module docstring).

        ``KLw`` = ``KL * w`` when already at hand (a context-free GPM's catalog rows)."""
        w = self.weights(u)
        H = (KL * w if KLw is None else KLw) @ KR.T
        G = H - H.T
        if self._c:
            f = (KL - KR) @ w
            G = (G + self._c * (f[:, None] - f[None, :])) / (1.0 + self._c)
        return G

    def margins_matrix(self, X: np.ndarray, u: np.ndarray | None = None) -> np.ndarray:
        """G with G[i, j] = g(x_i, x_j) for raw items X of shape (n, d)."""
        return self.margins_from_blocks(*self.blocks(X), u)

    @staticmethod
    def _mean_proba(G: np.ndarray) -> np.ndarray:
        n = G.shape[0]
        if n == 1:
            return np.full(1, 0.5)
        return (_sigmoid(G).sum(1) - 0.5) / (n - 1)   # σ(g_ii) = σ(0) = 1/2 leaves the sum

    def rank_scores(self, X, u=None):
        return self._mean_proba(self.margins_matrix(X, u))

    def prepare_catalog(self, X, ok):
        """The RBF blocks of every catalog item, and K_L ⊙ α for a context-free GPM (a rank by id gathers
        rows and multiplies once)."""
        KL, KR = self.blocks(X)
        return KL, KR, (None if self._ctx else KL * self._alpha)

    def rank_catalog(self, prep, rows, u=None):
        KL, KR, KLw = prep
        return self._mean_proba(self.margins_from_blocks(KL[rows], KR[rows], u, None if KLw is None else KLw[rows]))


class MarginScorer(Scorer):
    """Any other learner: the mean pairwise probability from one ``margin_many`` call over the n² pairs."""

    def rank_scores(self, X, u=None):
        n = X.shape[0]
        if n == 1:
            return np.full(1, 0.5)
        XL, XR = np.repeat(X, n, axis=0), np.tile(X, (n, 1))
        U = None if not self.context_names else np.tile(np.asarray(u, dtype=np.float64)[None, :], (n * n, 1))
        P = _sigmoid(np.asarray(self.learner.margin_many(XL, XR, U), dtype=np.float64).reshape(n, n))
        np.fill_diagonal(P, 0.0)
        return P.sum(1) / (n - 1)


def scorer_for(learner) -> Scorer:
    """The :class:`Scorer` of a learner.

    Raises
    ------
    NotFittedError
        If the learner cannot predict yet (a GPM before its first refit, a linear-bt without
        feature names).
    """
    if hasattr(learner, "model") and hasattr(learner, "refit"):   # refitting GPM / C-GPM
        if learner.model is None:
            raise NotFittedError(f"The {type(learner).__name__} has not been refitted yet; no model to serve.")
        return GPMScorer(learner)
    if not list(getattr(learner, "feature_names", None) or []):
        raise NotFittedError(f"The {type(learner).__name__} has no feature names yet; it has learned nothing.")
    if hasattr(learner, "score") or hasattr(learner, "weights"):
        return UtilityScorer(learner)
    return MarginScorer(learner)
