"""``linear-bt-personal``: the population's linear Bradley–Terry weights plus a deviation per person.

Person u's margin is g_u = (w + δ_u)·(x_l − x_r): the population :class:`~learners.linear.LinearBT`
(AdaGrad on the RMS-scaled difference) plus δ_u learned by RDA on the same scaled difference with an
ℓ2 term that shrinks it towards the population (and an optional ℓ1 term) — :mod:`learners.personal`.
A person never seen, or forgotten, is scored with w alone.

Examples
--------
>>> m = LinearBTPersonal(["price", "quality"])
>>> for t in range(200):
...     u, y = ("ann", 1) if t % 2 else ("bob", -1)   # ann prefers the cheap item, bob the good one
...     m.learn_one({"price": 1.0, "quality": 2.0}, {"price": 3.0, "quality": 4.0}, y, user_id=u)
>>> m.predict_one({"price": 1.0, "quality": 2.0}, {"price": 3.0, "quality": 4.0}, user_id="ann")
1
>>> m.predict_one({"price": 1.0, "quality": 2.0}, {"price": 3.0, "quality": 4.0}, user_id="bob")
-1
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from learners.exceptions import InvalidParameterError, check_param
from learners.linear import LinearBT
from learners.personal import PersonalLearner, _check_user_id

__all__ = ["LinearBTPersonal"]


class LinearBTPersonal(PersonalLearner):
    """Linear Bradley–Terry per person: population weights w plus a per-person RDA deviation δ_u.

    Parameters
    ----------
    feature_names : sequence of str
        Item feature names (required: the people's rows need their width).
    population : dict, optional
        Parameters of the population :class:`~learners.linear.LinearBT` (``learning_rate``, ``l2``, ...).
    person_l1 : float, default 0.0
    person_l2 : float, default 0.05
    person_gamma : float, default 1.0
    block : int, default 256
        As :class:`~learners.capacity_personal.CapacityPersonal`.
    """

    model_name = "linear-bt-personal"
    exact_learn_many_params = {"block": 1, "population": {"max_delay": 1}}

    def __init__(self, feature_names: Sequence[str], population: dict | None = None, person_l1: float = 0.0,
                 person_l2: float = 0.05, person_gamma: float = 1.0, block: int = 256) -> None:
        check_param("LinearBTPersonal", "feature_names", feature_names,
                    feature_names is not None and not isinstance(feature_names, str) and len(feature_names) > 0,
                    "a non-empty sequence of feature names")
        check_param("LinearBTPersonal", "population", population, population is None or isinstance(population, dict),
                    "None or a dict of the population LinearBT's parameters")
        self._init_personal(person_l1, person_l2, person_gamma, block)
        self.feature_names_in = list(feature_names)
        self.population = None if population is None else dict(population)
        try:
            self._pop = LinearBT(list(feature_names), **(population or {}))
        except TypeError as exc:
            raise InvalidParameterError(f"LinearBTPersonal: bad population parameter ({exc}).") from None
        self._init_people(len(self.feature_names_in))

    def _params(self) -> dict:
        return {"feature_names": self.feature_names_in, "population": self.population, "person_l1": self.person_l1,
                "person_l2": self.person_l2, "person_gamma": self.person_gamma, "block": self.block}

    def clone(self) -> "LinearBTPersonal":
        return LinearBTPersonal(**self._params())

    def __repr__(self) -> str:
        return "LinearBTPersonal(" + ", ".join(f"{k}={v!r}" for k, v in self._params().items()) + ")"

    # ------------------------------------------------------------- population hooks
    def _arrays(self, XL, XR):
        return self._pop._check_batch(XL, XR)

    def _z_scale(self) -> np.ndarray:
        return self._pop._scale_vec()

    def _z(self, XL, XR) -> np.ndarray:
        return (XL - XR) / self._z_scale()

    def _coef(self, g: np.ndarray, y: np.ndarray) -> np.ndarray:
        return 0.5 * (1.0 + np.tanh(0.5 * g)) - 0.5 * (1.0 + y)

    @classmethod
    def _load_population(cls, state: dict):
        return LinearBT.from_state(state)

    # ------------------------------------------------------------------ reading
    @property
    def n_seen(self) -> float:
        return float(self._pop.n_learned)

    @property
    def version(self) -> int:
        return int(self._pop.n_learned)

    @property
    def weights(self) -> np.ndarray:
        """The population's weights w (raw units)."""
        return self._pop.weights

    def person_weights(self, user_id: str | None) -> np.ndarray:
        """w + δ_u in raw feature units (w when the person is not held)."""
        w = self._pop.weights
        return w if user_id is None else w + self.deviation(user_id)

    def score(self, X, user_id: str | None = None) -> np.ndarray:
        """Utilities (w + δ_u)·x of a batch of items, shape (n_items,)."""
        X = np.atleast_2d(np.asarray(X, dtype=np.float64))
        uid = _check_user_id(user_id, "LinearBTPersonal")
        return X @ self.person_weights(uid)
