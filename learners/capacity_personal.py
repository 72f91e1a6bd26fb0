"""``capacity-personal``: the population's Möbius capacity plus a sparse deviation δ_u per person.

Person u's overall value is the capacity model with masses m + δ_u,

    F_u(x) = Σ_{S ≠ ∅} (m(S) + δ_u(S)) φ_S(x_S),

(Herin, Perny & Sokolovska 2024, IJCAI, Section 2, Equation (1)); F is linear in the masses, so the
subgradient of the person's loss in δ_u is the population's subgradient for that event,
ℓ'(g_u) (φ(x_l) − φ(x_r)). δ_u is learned by RDA with ℓ1 and ℓ2 terms (the paper's Algorithm 1 /
Equation (5) with an ℓ2 term added; :mod:`learners.personal`). The population is the ``capacity``
model's learner: :class:`~learners.capacity_stream.CapacityLogistic` (the stream default; the person
then learns the logistic loss on the population's RMS-scaled φ-differences) or, with
``population={"algorithm": "rda", ...}``, :class:`~learners.capacity.CapacityRDA` (the paper's
hinge loss; with ``constraints=["monotone"]`` ADMM-RDA, Algorithm 2).

Examples
--------
>>> import numpy as np
>>> m = CapacityPersonal(["price", "quality"], population={"decreasing": ["price"]})
>>> rng = np.random.default_rng(0)
>>> for t in range(400):
...     a, b = rng.random(2), rng.random(2)
...     u = "quality-lover" if t % 2 else "bargain-hunter"
...     w = (0.1, 1.0) if t % 2 else (1.0, 0.1)           # weight on (1 − price, quality)
...     fa, fb = w[0] * (1 - a[0]) + w[1] * a[1], w[0] * (1 - b[0]) + w[1] * b[1]
...     m.learn_one({"price": a[0], "quality": a[1]}, {"price": b[0], "quality": b[1]}, 1 if fa > fb else -1, user_id=u)
>>> cheap, good = {"price": 0.1, "quality": 0.3}, {"price": 0.8, "quality": 0.9}
>>> m.predict_one(cheap, good, user_id="bargain-hunter"), m.predict_one(cheap, good, user_id="quality-lover")
(1, -1)
>>> m.person_info("quality-lover"), m.person_info("stranger")
({'personalized': True, 'version': 200}, {'personalized': False, 'version': 0})
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from learners.exceptions import InvalidParameterError, check_param
from learners.personal import PersonalLearner, _check_user_id

__all__ = ["CapacityPersonal"]

_ALGORITHMS = ("logistic", "rda")


def _population_class(algorithm: str):
    from learners.capacity import CapacityRDA
    from learners.capacity_stream import CapacityLogistic

    return {"logistic": CapacityLogistic, "rda": CapacityRDA}[algorithm]


class CapacityPersonal(PersonalLearner):
    """Capacity model per person: population masses m plus a per-person RDA deviation δ_u.

    Parameters
    ----------
    criteria : sequence of str
        Criterion names.
    population : dict, optional
        Parameters of the population learner; ``"algorithm"`` picks it: ``"logistic"`` (default,
        :class:`~learners.capacity_stream.CapacityLogistic`) or ``"rda"``
        (:class:`~learners.capacity.CapacityRDA`, min-max scaler by default).
    person_l1 : float, default 0.002
        λ ≥ 0: ℓ1 weight per unit of the person's event weight (sparsity of δ_u).
    person_l2 : float, default 0.05
        μ ≥ 0: ℓ2 weight per unit of event weight (shrinks δ_u towards 0, the person towards the population).
    person_gamma : float, default 1.0
        γ > 0 of RDA's γ√T_u.
    block : int, default 256
        Rows per block of :meth:`learn_many` (1: with ``population={"minibatch": 1}``, the ``learn_one`` loop).

    References
    ----------
    Herin, Perny & Sokolovska (2024), IJCAI, Sections 2 (model) and 3.2 (Algorithm 1, Equation (5));
    Xiao (2010), JMLR 11, Section 3 (RDA, ℓ1 closed form).
    """

    model_name = "capacity-personal"
    exact_learn_many_params = {"block": 1, "population": {"minibatch": 1}}

    def __init__(self, criteria: Sequence[str], population: dict | None = None, person_l1: float = 0.002,
                 person_l2: float = 0.05, person_gamma: float = 1.0, block: int = 256) -> None:
        check_param("CapacityPersonal", "population", population, population is None or isinstance(population, dict),
                    "None or a dict of the population learner's parameters")
        self._init_personal(person_l1, person_l2, person_gamma, block)
        self.criteria = list(map(str, criteria)) if not isinstance(criteria, str) else criteria
        self.population = None if population is None else dict(population)
        p = dict(population or {})
        algo = p.pop("algorithm", "logistic")
        check_param("CapacityPersonal", "population.algorithm", algo, algo in _ALGORITHMS, f"one of {_ALGORITHMS}")
        if algo != "logistic":
            p.setdefault("scaler", "minmax")
        try:
            self._pop = _population_class(algo)(criteria, **p)
        except TypeError as exc:
            raise InvalidParameterError(f"CapacityPersonal: bad population parameter ({exc}).") from None
        self._logistic = algo == "logistic"
        self._init_people(self._pop.index.d)

    # ------------------------------------------------------------- population hooks
    def _arrays(self, XL, XR):
        return self._pop._check_array(XL), self._pop._check_array(XR)

    def _phi_diff(self, XL: np.ndarray, XR: np.ndarray) -> np.ndarray:
        pop = self._pop
        F = pop.index.features(np.concatenate([pop._prep(XL, learn=False), pop._prep(XR, learn=False)]),
                               pop.aggregation)
        b = XL.shape[0]
        return F[:b] - F[b:]

    def _z_scale(self) -> np.ndarray:
        pop = self._pop
        if self._logistic:
            return pop._rms(pop._S2, pop._t)
        return np.ones(pop.index.d)

    def _z(self, XL, XR) -> np.ndarray:
        return self._phi_diff(XL, XR) / self._z_scale()

    def _coef(self, g: np.ndarray, y: np.ndarray) -> np.ndarray:
        if self._logistic:
            return 0.5 * (1.0 + np.tanh(0.5 * g)) - 0.5 * (1.0 + y)
        from learners.capacity_solvers import hinge_subgradient_coef

        return np.array([hinge_subgradient_coef(float(a), int(b), self._pop.delta) for a, b in zip(g, y)])

    @classmethod
    def _load_population(cls, state: dict):
        from learners.capacity import CapacityFOBOS, CapacityRDA
        from learners.capacity_stream import CapacityLogistic

        klass = {"CapacityRDA": CapacityRDA, "CapacityFOBOS": CapacityFOBOS,
                 "CapacityLogistic": CapacityLogistic}.get(state["meta"].get("class"), CapacityLogistic)
        return klass.from_state(state)

    def _merge_population(self, other) -> None:
        try:
            self._pop += other._pop
        except InvalidParameterError:  # ADMM-RDA keeps path-dependent iterates: keep the larger population
            if other._pop.n_seen > self._pop.n_seen:
                self._pop = type(other._pop).from_state(other._pop.state_dict())

    # ------------------------------------------------------------------ reading
    @property
    def index(self):
        """The kept coalitions (columns of the masses)."""
        return self._pop.index

    @property
    def mobius(self) -> np.ndarray:
        """The population's masses m (copy)."""
        return self._pop.mobius

    def person_mobius(self, user_id: str | None) -> np.ndarray:
        """m + δ_u, ndarray of shape (d,) (the population's m when the person is not held)."""
        m = self._pop.mobius
        if user_id is None:
            return m
        return m + self.deviation(user_id)

    def score(self, X, user_id: str | None = None) -> np.ndarray:
        """Overall values F_u of a batch of items (the population's F without a held person), shape (n_items,)."""
        pop = self._pop
        base = pop.score(X)
        if user_id is None or self._row(_check_user_id(user_id, "CapacityPersonal")) is None:
            return base
        U = pop._prep(pop._check_array(X), learn=False)
        return base + pop.index.features(U, pop.aggregation) @ self.deviation(user_id)

    def metrics(self) -> dict:
        """The population's gauges plus ``people_held``."""
        out = dict(self._pop.metrics())
        out["people_held"] = self.people_held()
        return out
