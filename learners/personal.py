"""What the personal learners share: a population model, a deviation δ_u per person, and the per-person state.

A personal model scores a pair for person u with the population's margin plus the person's own
linear term,

    g_u(x_l, x_r) = g(x_l, x_r) + ⟨δ_u, z(x_l, x_r)⟩,

where g is the population learner's margin and z the features the population's margin is linear
in, in the population's scaled units: the φ-differences φ(x_l) − φ(x_r) of a capacity (F is linear
in the Möbius masses, Herin, Perny & Sokolovska 2024, Section 2, Equation (1)) divided by their
running RMS, or the scaled difference x_l − x_r of the linear Bradley–Terry model. Because g_u is
linear in δ_u with the same features as in the masses, the gradient of the person's loss in δ_u is
the population's gradient for that event, ℓ'(g_u) z.

**The deviation is learned by regularised dual averaging** (RDA; Xiao 2010, *Dual averaging methods
for regularized stochastic learning and online optimization*, JMLR 11, Section 3, Algorithm 1 and
the ℓ1 closed form of Section 3.1; the capacity paper's Algorithm 1 / Equation (5) on the masses).
Each person keeps only the sum of their gradients G_u = Σ_τ w_τ ℓ'(g_u,τ) z_τ and their weight
T_u = Σ_τ w_τ; the deviation is the closed form

    δ_u = argmin_δ ⟨G_u, δ⟩ + T_u (λ ‖δ‖₁ + (μ/2) ‖δ‖²) + (γ √T_u / 2) ‖δ‖²
        = − soft(G_u, λ T_u) / (γ √T_u + μ T_u),       soft(a, θ) = sign(a) [|a| − θ]₊,

δ_u = 0 at T_u = 0. The ℓ1 term (λ, ``person_l1``) keeps δ_u sparse — a coordinate moves only
when the person's average gradient on it exceeds λ — and the ℓ2 term (μ, ``person_l2``) shrinks
δ_u towards 0, i.e. the person towards the population; γ (``person_gamma``) is RDA's
strong-convexity schedule. A person with no events, or whose average gradient stays below λ, is
scored exactly as the population.

**The population** learns every event on its own (its own margins and loss), the person's term is
fitted to what the population leaves (a two-level model: the population is the same learner as the
non-personal model, so a person never seen or forgotten gets exactly the population's prediction).
Forgetting a person removes their δ_u; their share in the population's parameters stays
(docs/personal.md).

**Batches.** :meth:`learn_many` takes rows in blocks of ``block``: the population's margins and
the features z of a block are computed at the block's start, the people's deviations advance row
by row within it (each row sees its person's previous rows), then the population learns the block
with its own ``learn_many``. ``block=1`` with the population's exact batch parameters is exactly
the :meth:`learn_one` loop (tests/checks).

**Per-person state** (the API the learner worker's store and the server use):
:meth:`person_state` / :meth:`load_person` (``{"meta": …, "arrays": {"G": …}}``, encodable with
:func:`learners.state.dump_state`), :meth:`forget_person`, :meth:`evict_person`,
:meth:`drain_touched`, :meth:`people_held`, :meth:`person_info` and the optional
:attr:`person_loader` consulted on a miss. People live in one table of rows
(:class:`learners.people_table.PeopleTable`: a float64 matrix of G's, weights and counts; a dict
from id to row), not in Python objects per person: about 8 k + 16 bytes of arrays plus the dict
entry per person (k = 36 masses for a 2-additive capacity on 8 criteria).
"""

from __future__ import annotations

import logging
import math
from typing import Callable, Mapping

import numpy as np

from learners.base import PreferenceLearner, check_outcome, dict_to_array
from learners.exceptions import InvalidInputError, InvalidParameterError, PrefstreamError, SnapshotError, check_param
from learners.people_table import PeopleTable

#: ``PeopleTable`` is re-exported from :mod:`learners.people_table`, where it lives
__all__ = ["MAX_USER_ID", "PeopleTable", "PersonalLearner", "rda_deviation"]

log = logging.getLogger(__name__)

#: Longest person id (characters), as the event contract's ``user_id``.
MAX_USER_ID = 512
#: :meth:`PersonalLearner._learn_people` steps a round of people together down to this many rows
_MIN_ROUND = 8


def rda_deviation(G: np.ndarray, T, l1, l2, gamma, Q: np.ndarray | None = None) -> np.ndarray:
    """δ = −soft(G, λT) / (γ√T + μT) row-wise (see the module docstring); 0 where T = 0.

    Parameters
    ----------
    G : ndarray of shape (k,) or (n, k)
        Gradient sums.
    T : float or ndarray of shape (n,)
        Weight sums (≥ 0).
    l1, l2, gamma : float or ndarray of shape (k,)
        λ, μ, γ (per coordinate when arrays).
    Q : ndarray like G, optional
        Sums of squared gradients: the AdaGrad form (Duchi, Hazan & Singer 2011, JMLR 12, Section 3,
        Equation (18), diagonal): the proximal term γ√T becomes γ√Q per coordinate, so a coordinate
        moves with the evidence on it, not with the person's event count.

    Examples
    --------
    >>> rda_deviation(np.array([3.0, -0.5, 0.0]), 4.0, l1=0.25, l2=0.5, gamma=1.0).tolist()
    [-0.5, 0.0, 0.0]
    >>> rda_deviation(np.ones(2), 0.0, 0.1, 0.1, 1.0).tolist()
    [0.0, 0.0]
    """
    G = np.asarray(G, dtype=np.float64)
    T = np.asarray(T, dtype=np.float64)
    Tc = T[..., None] if G.ndim == 2 else T
    thr = l1 * Tc
    shrunk = G - np.clip(G, -thr, thr)
    den = (gamma * np.sqrt(Tc) if Q is None else gamma * np.sqrt(np.asarray(Q, dtype=np.float64))) + l2 * Tc
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(den > 0, -shrunk / np.where(den > 0, den, 1.0), 0.0)
    return out + 0.0                                                       # no −0.0


def _check_user_id(user_id, owner: str) -> str | None:
    if user_id is None:
        return None
    if type(user_id) is not str or not 0 < len(user_id) <= MAX_USER_ID:
        raise InvalidInputError(f"{owner}: user_id must be a non-empty string of at most {MAX_USER_ID} characters "
                                f"or None; got {user_id!r:.80}.")
    return user_id


def _is_real(x) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) and math.isfinite(float(x))


class PersonalLearner(PreferenceLearner):
    """Population learner + per-person RDA deviation (see the module docstring); subclasses bind a population.

    Subclasses set :attr:`_pop` (the population learner) in ``__init__`` after calling
    :meth:`_init_personal`, and implement :meth:`_z` (features z of pairs, in the deviation's
    units), :meth:`_z_scale` (s such that the deviation in the population's units is δ / s),
    :meth:`_coef` (the loss derivative ℓ'(g) for outcomes y) and :meth:`_arrays` (checked pair arrays).

    Parameters (common to every personal model)
    ----------------------------------------------
    person_l1 : float ≥ 0
        λ, the ℓ1 weight per unit of the person's event weight (sparsity of δ_u).
    person_l2 : float ≥ 0
        μ, the ℓ2 weight per unit of event weight (shrinkage towards the population).
    person_gamma : float > 0
        γ of RDA's schedule γ√T.
    block : int ≥ 1
        Rows per block of :meth:`learn_many`.
    """

    #: marks a learner that takes ``user_id`` / ``user_ids`` (the worker and the server look for it)
    personal = True
    learn_many_matches_loop = False
    _pop: PreferenceLearner

    def _init_personal(self, person_l1, person_l2, person_gamma, block, person_adaptive=True) -> None:
        owner = type(self).__name__
        check_param(owner, "person_l1", person_l1, _is_real(person_l1) and person_l1 >= 0, "a float in the range [0, inf)")
        check_param(owner, "person_l2", person_l2, _is_real(person_l2) and person_l2 >= 0, "a float in the range [0, inf)")
        check_param(owner, "person_gamma", person_gamma, _is_real(person_gamma) and person_gamma > 0,
                    "a float in the range (0, inf)")
        check_param(owner, "block", block, isinstance(block, (int, np.integer)) and not isinstance(block, bool)
                    and block >= 1, "an int >= 1")
        self.person_l1 = float(person_l1)
        self.person_l2 = float(person_l2)
        self.person_gamma = float(person_gamma)
        self.block = int(block)
        check_param(owner, "person_adaptive", person_adaptive, isinstance(person_adaptive, bool), "a bool")
        self.person_adaptive = person_adaptive
        self._touched: set[str] = set()
        #: optional ``callable(user_id) -> state dict | None`` consulted when a person is not in memory
        self.person_loader: Callable[[str], dict | None] | None = None

    def _init_people(self, k: int, strength: np.ndarray | None = None) -> None:
        """The people's table, and the per-coordinate λ, μ, γ: the parameters times ``strength`` (k,)."""
        self._k = int(k)
        self._people = PeopleTable(2 * k if self.person_adaptive else k)
        w = np.ones(k) if strength is None else np.asarray(strength, dtype=np.float64)
        self._l1v, self._l2v, self._gv = self.person_l1 * w, self.person_l2 * w, self.person_gamma * w

    def _delta(self, G, T) -> np.ndarray:
        """δ (deviation units) from a row (or rows) of the table: [G] or [G | Q] (adaptive), as scored
        (:meth:`_effective`)."""
        k = self._k
        if self.person_adaptive:
            d = rda_deviation(G[..., :k], T, self._l1v, self._l2v, self._gv, Q=G[..., k:])
        else:
            d = rda_deviation(G, T, self._l1v, self._l2v, self._gv)
        return self._effective(d)

    def _effective(self, delta: np.ndarray) -> np.ndarray:
        """The deviation a person is scored with, from the dual-averaging closed form (rows or one row);
        subclasses that constrain the model (a monotone capacity) override it."""
        return delta

    # ------------------------------------------------------------------ hooks
    def _z(self, XL: np.ndarray, XR: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _z_scale(self) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _coef(self, g: np.ndarray, y: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _arrays(self, XL, XR) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - abstract
        raise NotImplementedError

    # ------------------------------------------------------------------ basics
    @property
    def population_learner(self) -> PreferenceLearner:
        """The population learner (the live object: do not train it apart)."""
        return self._pop

    @property
    def feature_names(self) -> list[str]:
        return list(self._pop.feature_names)

    @property
    def n_seen(self) -> float:
        """Examples (weights) the population has learned."""
        return float(getattr(self._pop, "n_seen", getattr(self._pop, "n_learned", 0)))

    @property
    def version(self) -> int:
        return int(getattr(self._pop, "version", getattr(self._pop, "n_learned", 0)))

    def _params(self) -> dict:
        import inspect

        return {k: getattr(self, k) for k in inspect.signature(type(self).__init__).parameters if k != "self"}

    # ------------------------------------------------------------- the people
    def _row(self, user_id: str | None, load: bool = True) -> int | None:
        """The person's row, loading them through :attr:`person_loader` on a miss."""
        if user_id is None:
            return None
        r = self._people.row(user_id)
        if r is None and load and self.person_loader is not None:
            try:
                state = self.person_loader(user_id)
            except PrefstreamError as exc:
                log.warning("person_loader failed for a person (%s); scored as the population", exc)
                state = None
            if state is not None:
                self.load_person(user_id, state)
                r = self._people.row(user_id)
        return r

    def deviation(self, user_id: str) -> np.ndarray:
        """δ_u in the population's parameter units (Möbius masses, raw-unit weights), ndarray (k,); zeros if not held."""
        return self.deviations([user_id])[0][0]

    def deviations(self, user_ids) -> tuple[np.ndarray, np.ndarray]:
        """``(δ, versions)`` of a batch's people, one read-out for all: δ_u per entry in the population's parameter
        units, ndarray (n, k), zeros where the person is None or not held; the learned-event count of each, (n,)
        int, 0 there (the ``version`` of :meth:`person_info`; personalized where > 0).

        Examples
        --------
        >>> from learners.linear_personal import LinearBTPersonal
        >>> m = LinearBTPersonal(["x"])
        >>> m.learn_one({"x": 1.0}, {"x": 0.0}, -1, user_id="ann")
        >>> d, v = m.deviations(["ann", None, "zoe", "ann"])
        >>> bool(d[0, 0] < 0), d[1:3].tolist(), v.tolist(), bool(d[3, 0] == d[0, 0] == m.deviation("ann")[0])
        (True, [[0.0], [0.0]], [1, 0, 0, 1], True)
        """
        n = len(user_ids)
        rows = self._user_rows(user_ids, n)
        delta, versions = np.zeros((n, self._k)), np.zeros(n, dtype=np.int64)
        sel = np.flatnonzero(rows >= 0)
        if sel.size:
            p, r = self._people, rows[sel]
            delta[sel] = self._delta(p.G[r], p.T[r]) / self._z_scale()
            versions[sel] = p.N[r]
        return delta, versions

    def person_state(self, user_id: str) -> dict | None:
        """``{"meta": {...}, "arrays": {"G": (k,), "Q": (k,)}}`` of a person held in memory, or None.

        ``meta`` holds ``model_name``, ``user_id``, ``t`` (their event weight T_u), ``version``
        (events learned) and ``k``; ``G`` is their gradient sum, ``Q`` (``person_adaptive``) their
        sum of squared gradients.
        """
        r = self._people.row(user_id)
        if r is None:
            return None
        p, k = self._people, self._k
        arrays = {"G": p.G[r, :k].copy()}
        if self.person_adaptive:
            arrays["Q"] = p.G[r, k:].copy()
        return {"meta": {"model_name": self.model_name, "user_id": user_id, "t": float(p.T[r]),
                         "version": int(p.N[r]), "k": k}, "arrays": arrays}

    def load_person(self, user_id: str, state: dict) -> None:
        """Hold a person from :meth:`person_state` output (replaces what was held; not marked touched).

        Raises
        ------
        SnapshotError
            If the state is not a person state of this model's shape, or not finite.
        """
        user_id = _check_user_id(user_id, type(self).__name__)
        try:
            meta, G = state["meta"], np.asarray(state["arrays"]["G"], dtype=np.float64)
            t, n = float(meta["t"]), int(meta["version"])
            if self.person_adaptive:
                G = np.concatenate([G, np.asarray(state["arrays"]["Q"], dtype=np.float64)])
        except (KeyError, TypeError, ValueError) as exc:
            raise SnapshotError(f"Not a person state of {self.model_name}: {type(exc).__name__}: {exc}") from None
        if G.shape != (self._people.k,):
            raise SnapshotError(f"Person state G (and Q) has shape {G.shape}; {self.model_name} expects "
                                f"({self._people.k},).")
        if not (np.isfinite(G).all() and math.isfinite(t) and t >= 0 and n >= 0):
            raise SnapshotError("Person state holds non-finite or negative values; it was not loaded.")
        r = self._people.row(user_id, create=True)
        self._people.G[r] = G
        self._people.T[r] = t
        self._people.N[r] = n

    def forget_person(self, user_id: str) -> bool:
        """Drop a person's state (memory and the touched set); True if they were held.

        Their share in the population's parameters stays (docs/personal.md).
        """
        self._touched.discard(user_id)
        return self._people.remove(user_id)

    def evict_person(self, user_id: str) -> bool:
        """Drop a person from memory only (the store keeps them; :attr:`person_loader` brings them back)."""
        return self._people.remove(user_id)

    def drain_touched(self) -> set[str]:
        """People whose state changed since the last call (and are still held); the set is emptied."""
        out, self._touched = self._touched, set()
        return {u for u in out if u in self._people}

    def people_held(self) -> int:
        """People in memory."""
        return len(self._people)

    def people(self) -> list[str]:
        """Ids of the people in memory."""
        return self._people.ids()

    def person_info(self, user_id: str | None) -> dict:
        """``{"personalized": bool, "version": int}``: whether ``user_id`` is scored with a deviation, and
        how many events that person's state has learned (0 and False for None, unknown or forgotten)."""
        r = self._row(user_id) if user_id is not None else None
        if r is None:
            return {"personalized": False, "version": 0}
        n = int(self._people.N[r])
        return {"personalized": n > 0, "version": n}

    # -------------------------------------------------------------- predicting
    def _user_rows(self, user_ids, n: int) -> np.ndarray:
        """Row per example (−1: population), from ``user_ids`` (None or a sequence of n ids / None)."""
        if user_ids is None:
            return np.full(n, -1, dtype=np.int64)
        if len(user_ids) != n:
            raise InvalidInputError(f"{type(self).__name__}: user_ids must have one entry per pair ({n}); "
                                    f"got {len(user_ids)}.")
        owner = type(self).__name__
        rows = np.empty(n, dtype=np.int64)
        cache: dict = {}
        for i, u in enumerate(user_ids):
            if u is None:
                rows[i] = -1
                continue
            r = cache.get(u, -2)
            if r == -2:
                r = self._row(_check_user_id(u, owner))
                r = -1 if r is None else r
                cache[u] = r
            rows[i] = r
        return rows

    def margin_many(self, X_left, X_right, context=None, user_ids=None) -> np.ndarray:
        """Margins g_u of a batch, ndarray (n,): the population's, plus ⟨δ_u, z⟩ on rows whose person is held.

        Parameters
        ----------
        X_left, X_right : ndarray of shape (n, n_features)
        context : ignored
        user_ids : sequence of (str or None), length n, optional
        """
        XL, XR = self._arrays(X_left, X_right)
        g = np.array(self._pop.margin_many(XL, XR), dtype=np.float64)
        rows = self._user_rows(user_ids, XL.shape[0])
        sel = np.flatnonzero(rows >= 0)
        if sel.size:
            p = self._people
            r = rows[sel]
            delta = self._delta(p.G[r], p.T[r])
            g[sel] += np.einsum("ij,ij->i", self._z(XL[sel], XR[sel]), delta)
        return g

    def predict_proba_many(self, X_left, X_right, context=None, user_ids=None) -> np.ndarray:
        """σ(g_u) of a batch, ndarray (n,)."""
        return 0.5 * (1.0 + np.tanh(0.5 * self.margin_many(X_left, X_right, context, user_ids)))

    def _pair_arrays(self, x_left, x_right) -> tuple[np.ndarray, np.ndarray]:
        names = self.feature_names
        owner = type(self).__name__
        return dict_to_array(x_left, names, owner)[None, :], dict_to_array(x_right, names, owner)[None, :]

    def margin_one(self, x_left, x_right, context=None, user_id=None) -> float:
        """g_u of one pair (the population's margin when ``user_id`` is None or not held)."""
        if user_id is None:
            return float(self._pop.margin_one(x_left, x_right, context))
        XL, XR = self._pair_arrays(x_left, x_right)
        return float(self.margin_many(XL, XR, None, [user_id])[0])

    def predict_proba_one(self, x_left, x_right, context=None, user_id=None) -> dict[int, float]:
        g = self.margin_one(x_left, x_right, context, user_id)
        p = 0.5 * (1.0 + math.tanh(0.5 * g))
        return {1: p, -1: 1.0 - p}

    def predict_one(self, x_left, x_right, context=None, user_id=None) -> int:
        g = self.margin_one(x_left, x_right, context, user_id)
        return 1 if g > 0 else (-1 if g < 0 else 0)

    # ---------------------------------------------------------------- learning
    def learn_one(self, x_left: Mapping[str, float], x_right: Mapping[str, float], y: int,
                  context: Mapping[str, float] | None = None, weight: float = 1.0, user_id: str | None = None) -> None:
        """Learn one event: the person's deviation at the pre-event population, then the population.

        Raises
        ------
        InvalidInputError
            As the population learner; a bad ``user_id``. Nothing is learned then.
        """
        owner = type(self).__name__
        user_id = _check_user_id(user_id, owner)
        if user_id is not None:
            y = check_outcome(y, owner)
            if not (_is_real(weight) and weight > 0):
                raise InvalidInputError(f"{owner}: weight must be a finite float > 0; got {weight!r}.")
            XL, XR = self._pair_arrays(x_left, x_right)
            self._learn_people(XL, XR, np.array([y]), np.array([float(weight)]), [user_id])
        self._pop.learn_one(x_left, x_right, y, context, weight)

    def _learn_people(self, XL, XR, Y, W, user_ids) -> None:
        """The people's RDA steps for one block, at the population's current state.

        Each person's rows are taken in their order; people are independent, so the k-th row of every
        person in the block is stepped together (one vectorised round per occurrence).
        """
        sel = [i for i, u in enumerate(user_ids) if u is not None]
        if not sel:
            return
        sel_a = np.asarray(sel)
        Z = self._z(XL[sel_a], XR[sel_a])                                # raises on bad input before any change
        g0 = np.asarray(self._pop.margin_many(XL[sel_a], XR[sel_a]), dtype=np.float64)
        p, k = self._people, self._k
        rows = np.empty(len(sel), dtype=np.int64)
        occ = np.empty(len(sel), dtype=np.int64)
        seen: dict = {}
        for j, i in enumerate(sel):
            u = user_ids[i]
            slot = seen.get(u)
            if slot is None:
                r = p.row(u)
                if r is None:
                    r = self._row(u)
                    if r is None:
                        r = p.row(u, create=True)
                slot = seen[u] = [r, 0]
            rows[j] = slot[0]
            occ[j] = slot[1]
            slot[1] += 1
        Yf = np.asarray(Y, dtype=np.float64)[sel_a]
        Wf = np.asarray(W, dtype=np.float64)[sel_a]
        for o in range(int(occ.max()) + 1):
            js = np.flatnonzero(occ == o)
            if len(js) < _MIN_ROUND:  # few people left with more rows: the rest row by row, in order
                self._step_rows(np.flatnonzero(occ >= o), rows, Z, g0, Yf, Wf)
                break
            r = rows[js]
            Zj = Z[js]
            delta = self._delta(p.G[r], p.T[r])
            g = g0[js] + np.einsum("ij,ij->i", Zj, delta)
            gz = (self._coef(g, Yf[js]) * Wf[js])[:, None] * Zj
            if self.person_adaptive:
                p.G[r, :k] += gz
                p.G[r, k:] += gz * gz
            else:
                p.G[r] += gz
            p.T[r] += Wf[js]
            p.N[r] += 1
        self._touched.update(seen)

    def _step_rows(self, js, rows, Z, g0, Yf, Wf) -> None:
        """:meth:`_learn_people`'s rounds one row at a time (the same arithmetic, fewer numpy calls)."""
        from learners.capacity_solvers import clip_into

        p, k = self._people, self._k
        l1v, l2v, gv, adaptive = self._l1v, self._l2v, self._gv, self.person_adaptive
        buf = np.empty(k)
        for j in js.tolist():
            r = int(rows[j])
            t = float(p.T[r])
            z = Z[j]
            if t > 0:
                G = p.G[r, :k]
                thr = l1v * t
                np.subtract(G, clip_into(G, -thr, thr, buf), out=buf)
                den = (gv * np.sqrt(p.G[r, k:]) if adaptive else gv * math.sqrt(t)) + l2v * t
                d = np.divide(-buf, den, out=np.zeros(k), where=den > 0) + 0.0
                d = self._effective(d)
                g = g0[j] + float(z @ d)
            else:
                g = g0[j]
            c = float(self._coef(np.array([g]), Yf[j:j + 1])[0]) * Wf[j]
            gz = c * z
            if adaptive:
                p.G[r, :k] += gz
                p.G[r, k:] += gz * gz
            else:
                p.G[r] += gz
            p.T[r] += Wf[j]
            p.N[r] += 1

    def learn_many(self, X_left, X_right, y, context=None, weight=None, user_ids=None) -> None:
        """Learn a batch in blocks of ``block`` rows (see the module docstring).

        Parameters
        ----------
        X_left, X_right : ndarray of shape (n, n_features)
        y : ndarray of shape (n,)
        context : ignored
        weight : ndarray of shape (n,), optional
        user_ids : sequence of (str or None), length n, optional
            None: the population alone learns the batch.

        Raises
        ------
        InvalidInputError
            Shapes, outcomes, weights, ids; inputs are checked before anything is learned.
        """
        XL, XR = self._arrays(X_left, X_right)
        n = XL.shape[0]
        Y = np.asarray(y)
        if Y.shape != (n,) or Y.dtype == bool or Y.dtype.kind not in "iuf" or not np.isin(Y, (-1, 0, 1)).all():
            raise InvalidInputError(f"{type(self).__name__}: y must have shape ({n},) with values in {{+1, -1, 0}}.")
        Y = Y.astype(np.int64)
        W = np.ones(n) if weight is None else np.asarray(weight, dtype=np.float64)
        if W.shape != (n,) or not (np.isfinite(W).all() and (W > 0).all()):
            raise InvalidInputError(f"{type(self).__name__}: weight must be {n} finite floats > 0.")
        if user_ids is None:
            self._pop.learn_many(XL, XR, Y, None, W)
            return
        if len(user_ids) != n:
            raise InvalidInputError(f"{type(self).__name__}: user_ids must have one entry per pair ({n}); got {len(user_ids)}.")
        owner = type(self).__name__
        users = [_check_user_id(u, owner) for u in user_ids]
        for s in range(0, n, self.block):
            e = min(n, s + self.block)
            self._learn_people(XL[s:e], XR[s:e], Y[s:e], W[s:e], users[s:e])
            self._pop.learn_many(XL[s:e], XR[s:e], Y[s:e], None, W[s:e])

    # ------------------------------------------------------------------ merging
    def _check_mergeable(self, other) -> None:
        if type(other) is not type(self):
            raise InvalidParameterError(f"Cannot merge a {type(other).__name__} into a {type(self).__name__}.")
        mine, theirs = self._params(), other._params()
        if mine != theirs:
            diff = {k: (mine[k], theirs[k]) for k in mine if mine[k] != theirs[k]}
            raise InvalidParameterError(f"Cannot merge personal learners with different parameters: {diff}.")

    def _merge_population(self, other) -> None:
        """``self._pop += other._pop``; subclasses override where the population needs a rule."""
        self._pop += other._pop

    def __iadd__(self, other):
        """Merge ``other`` (another partition) into ``self``: the populations by their own merge rule, plus the
        union of the people. People are disjoint across partitions when events are keyed by person; a person
        held by both gets the sums of their gradient sums, weights and counts (the pooled dual average)."""
        self._check_mergeable(other)
        self._merge_population(other)
        self._touched.update(self._people.add(other._people))
        return self

    def __add__(self, other):
        out = type(self).from_state(self.state_dict())
        out += other
        return out

    def merge(self, other):
        self += other
        return self

    # ------------------------------------------------------------------- state
    def state_dict(self, people: bool = True) -> dict:
        """``{"meta", "arrays"}``: the population (arrays prefixed ``population/``) and, unless ``people=False``,
        the people held in memory (:meth:`learners.people_table.PeopleTable.snapshot`: ``people_G`` (n, k),
        ``people_T``, ``people_N``, ids as UTF-8 bytes ``people_ids`` with end offsets ``people_id_ends``)."""
        pop = self._pop.state_dict()
        params = {k: (list(v) if isinstance(v, tuple) else v) for k, v in self._params().items()}
        meta = {"model_name": self.model_name, "class": type(self).__name__, "params": params,
                "population": pop["meta"], "people": bool(people)}
        arrays = {f"population/{k}": v for k, v in pop["arrays"].items()}
        if people:
            arrays.update(self._people.snapshot())
        return {"meta": meta, "arrays": arrays}

    @classmethod
    def _load_population(cls, state: dict) -> PreferenceLearner:  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def from_state(cls, state: dict):
        """Rebuild from :meth:`state_dict` output (with or without people).

        Raises
        ------
        SnapshotError
            Another class's state, missing or misshapen arrays.
        """
        try:
            meta, arrays = state["meta"], state["arrays"]
            if meta.get("class") != cls.__name__:
                raise SnapshotError(f"State of a {meta.get('class')!r} cannot be loaded by {cls.__name__}.")
            obj = cls(**meta["params"])
            pre = "population/"
            obj._pop = cls._load_population({"meta": meta["population"],
                                             "arrays": {k[len(pre):]: v for k, v in arrays.items() if k.startswith(pre)}})
            if "people_G" in arrays:
                obj._people.restore(arrays)
        except SnapshotError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise SnapshotError(f"Not a {cls.__name__} state: {type(exc).__name__}: {exc}") from None
        return obj
