"""One-hot feature groups explained as one player each.

Wide data sets (Pokémon: 26 features, 18 of them the indicators ``type_Bug … type_Water``) are
explained with one player per one-hot group, as Hu, Chau et al. (2022, Fig. 4) sum the type
indicators' values; features without such a shared prefix stay single players.

Examples
--------
>>> names = ["hp", "type_Bug", "type_Fire", "type_Water"]
>>> feature_groups(names)
{'type': ['type_Bug', 'type_Fire', 'type_Water']}
>>> players, member = players_of(names, grouped=True)
>>> players
['hp', 'type']
>>> member.astype(int).tolist()
[[1, 0, 0, 0], [0, 1, 1, 1]]
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable, Sequence

import numpy as np

from stream.plugins.budgets import EXACT_MAX_PLAYERS

__all__ = ["feature_groups", "groups_of", "on_features", "players", "players_of"]


def feature_groups(names: Sequence[str]) -> dict[str, list[str]]:
    """One-hot groups by naming convention: ``<group>=<level>`` or ``<group>_<level>`` shared by ≥ 3 features.

    Examples
    --------
    >>> feature_groups(["a=1", "a=2", "a=3", "b"])
    {'a': ['a=1', 'a=2', 'a=3']}
    >>> feature_groups(["x_1", "x_2", "y"])
    {}
    """
    by: dict[str, list[str]] = {}
    for n in names:
        key = n.split("=", 1)[0] if "=" in n else (n.split("_", 1)[0] if "_" in n else None)
        if key:
            by.setdefault(key, []).append(n)
    return {g: fs for g, fs in by.items() if len(fs) >= 3}


def players_of(names: Sequence[str], grouped: bool) -> tuple[list[str], np.ndarray]:
    """Players (the groups of :func:`feature_groups` when ``grouped``, else the features) and
    their membership matrix, a read-only bool ndarray of shape (n_players, len(names)) (cached per
    feature list: every explainer call of a model asks for the same players).

    Examples
    --------
    >>> players_of(["c=1", "c=2", "c=3", "x"], grouped=False)[0]
    ['c=1', 'c=2', 'c=3', 'x']
    >>> players_of(["c=1", "c=2", "c=3", "x"], grouped=True)[1].sum(axis=1).tolist()
    [3, 1]
    """
    return _players_of(tuple(str(n) for n in names), bool(grouped))


def _players_of(names: tuple, grouped: bool) -> tuple[list, np.ndarray]:
    from explainers._players import _players

    return _players(names, feature_groups(list(names)) if grouped else None)


def players(names: Sequence[str], exact_players: int = EXACT_MAX_PLAYERS) -> tuple[list[str], np.ndarray]:
    """Players of the stream's explainers: groups only when there are more than
    ``exact_players`` features (the ``explain_exact_players`` budget).

    Examples
    --------
    >>> players(["type_a", "type_b", "type_c"])[0]
    ['type_a', 'type_b', 'type_c']
    >>> players(["type_a", "type_b", "type_c"], exact_players=2)[0]
    ['type']
    """
    return players_of(names, grouped=len(names) > exact_players)


def groups_of(names: Sequence[str], exact_players: int = EXACT_MAX_PLAYERS) -> dict[str, list[str]]:
    """``{player: [features]}`` of the grouped players of wide data (empty when the features are the players).

    Examples
    --------
    >>> groups_of(["hp", "t_a", "t_b", "t_c"], exact_players=2)
    {'t': ['t_a', 't_b', 't_c']}
    """
    return {p: list(fs) for p, fs in _groups_of(tuple(str(n) for n in names), int(exact_players))}


@lru_cache(maxsize=256)
def _groups_of(names: tuple, exact_players: int) -> tuple:
    pl, member = players(names, exact_players)
    return tuple((p, tuple(n for n, m in zip(names, row) if m)) for p, row in zip(pl, member) if row.sum() > 1)


def on_features(nu: Callable, member: np.ndarray) -> Callable:
    """A value function of player coalitions (K, n_players) from ``nu`` of feature coalitions (K, d).

    Examples
    --------
    >>> member = np.array([[True, False, False], [False, True, True]])
    >>> on_features(lambda C: C.sum(axis=1), member)(np.array([[0, 1], [1, 1]]))
    array([2, 3])
    """
    return lambda C: nu((np.asarray(C, dtype=np.int64) @ member.astype(np.int64)) > 0)
