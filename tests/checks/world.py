"""A small synthetic preference world the contract suites learn and explain.

Three item features in [0, 1] and two context features; the left item is preferred when its
utility 2a − b + 0.5c + u·a is larger. Every pair belongs to one of five people (``user(i)``);
personal models (``learner.personal``) are given them, the others are not. Deterministic (one seed).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field

import numpy as np

FEATURES = ["a", "b", "c"]
CONTEXT = ["u", "v"]

#: Constructor parameters that keep the suite fast (refits only when asked, small windows).
FAST_PARAMS = {
    "gpm": {"refit_every": None, "min_train": 20, "window_size": 400, "drift": False},
    "cgpm": {"refit_every": None, "min_train": 20, "window_size": 400, "drift": False},
}


def _utility(x: np.ndarray, u: np.ndarray) -> np.ndarray:
    return 2.0 * x[..., 0] - x[..., 1] + 0.5 * x[..., 2] + u[..., 0] * x[..., 0]


@dataclass
class World:
    """``n`` pairs: arrays (XL, XR, U, y) and the same pairs as contract examples."""

    n: int = 120
    seed: int = 7
    XL: np.ndarray = field(init=False)
    XR: np.ndarray = field(init=False)
    U: np.ndarray = field(init=False)
    y: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.seed)
        self.XL, self.XR = rng.random((self.n, 3)), rng.random((self.n, 3))
        self.U = rng.random((self.n, 2))
        self.y = np.where(_utility(self.XL, self.U) > _utility(self.XR, self.U), 1, -1)

    def user(self, i: int) -> str:
        """The person of pair ``i`` (five people, interleaved)."""
        return f"p{i % 5}"

    def users(self, idx) -> list[str]:
        return [self.user(int(i)) for i in idx]

    def row(self, i: int) -> tuple[dict, dict, dict]:
        """Pair ``i`` as (left, right, context) dicts."""
        return (dict(zip(FEATURES, self.XL[i].tolist())), dict(zip(FEATURES, self.XR[i].tolist())),
                dict(zip(CONTEXT, self.U[i].tolist())))

    def event(self, i: int) -> dict:
        left, right, ctx = self.row(i)
        return {"schema_version": 1, "event_id": f"e{i}", "timestamp": 1_700_000_000 + i,
                "left": {"id": f"l{i}", "features": left}, "right": {"id": f"r{i}", "features": right},
                "outcome": int(self.y[i]), "context": ctx}

    def examples(self, idx) -> list:
        from stream.contract import parse_preference

        return [parse_preference(json.dumps(self.event(int(i))).encode()) for i in idx]

    def session(self, k: int = 3) -> dict:
        """A click session over the first ``k`` left items, the best one clicked."""
        items = [{"id": f"i{j}", "features": dict(zip(FEATURES, self.XL[j].tolist()))} for j in range(k)]
        best = int(np.argmax(_utility(self.XL[:k], np.zeros((k, 2)))))
        return {"schema_version": 1, "session_id": "s1", "timestamp": 1_700_000_000, "shown": items,
                "clicked": [f"i{best}"]}


def settings():
    from stream.settings import Settings

    return Settings.load(None, {"feature_names": FEATURES, "context_names": CONTEXT})


def fresh(name: str, extra: dict | None = None):
    """A fresh learner of registered model ``name`` built by its factory (``extra`` overrides parameters)."""
    from stream import registry

    params = copy.deepcopy(FAST_PARAMS.get(name, {}))
    params.update(extra or {})
    return registry.get_model(name).factory(settings(), params)


def person_kw(learner, world: World, i: int) -> dict:
    """``{"user_id": world.user(i)}`` for a personal learner, else ``{}``."""
    return {"user_id": world.user(i)} if getattr(learner, "personal", False) else {}


def people_kw(learner, world: World, idx) -> dict:
    """``{"user_ids": [...]}`` of the pairs ``idx`` for a personal learner, else ``{}``."""
    return {"user_ids": world.users(idx)} if getattr(learner, "personal", False) else {}


def train(learner, world: World, idx=None):
    """Learn the pairs ``idx`` (default all) one by one, then refit if the learner refits."""
    for i in (range(world.n) if idx is None else idx):
        left, right, ctx = world.row(i)
        learner.learn_one(left, right, int(world.y[i]), ctx, **person_kw(learner, world, i))
    if hasattr(learner, "refit"):
        learner.refit()
    return learner


def uses_context(learner) -> bool:
    return bool(getattr(learner, "context_names", None))
