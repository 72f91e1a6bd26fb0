"""Players of a Shapley game: single features or groups of features (e.g. one-hot types).

Shared by Pref-SHAP (Hu, Chau, Ferrando Huertas & Sejdinovic 2022, *Explaining Preferences with
Shapley Values*, Fig. 4: the Pokémon types as one group) and ShaRP (a group's features are removed
together).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Mapping, Sequence

import numpy as np

from learners.exceptions import InvalidInputError

__all__: list[str] = []


def _players(names: Sequence[str], groups: Mapping[str, Sequence[str]] | None):
    """Player names and a read-only membership matrix (n_players, d) from optional feature groups (cached: an
    explainer built per event asks for the same players each time)."""
    key = None if not groups else tuple((str(g), tuple(feats)) for g, feats in groups.items())
    out, member = _players_cached(tuple(names), key)
    return list(out), member


@lru_cache(maxsize=256)
def _players_cached(names: tuple, groups: tuple | None):
    out, member = _players_of_groups(names, None if groups is None else dict(groups))
    member.setflags(write=False)
    return tuple(out), member


def _players_of_groups(names: Sequence[str], groups: Mapping[str, Sequence[str]] | None):
    d = len(names)
    if not groups:
        return list(names), np.eye(d, dtype=bool)
    pos = {n: i for i, n in enumerate(names)}
    member, pnames, used = [], [], set()
    for g, feats in groups.items():
        row = np.zeros(d, dtype=bool)
        for f in feats:
            if f not in pos:
                raise InvalidInputError(f"feature_groups[{g!r}] names unknown feature {f!r}; features are {list(names)}.")
            if f in used:
                raise InvalidInputError(f"Feature {f!r} appears in more than one group of feature_groups.")
            used.add(f)
            row[pos[f]] = True
        if row.any():
            member.append(row)
            pnames.append(str(g))
    groups_first = {int(np.flatnonzero(r)[0]): (n, r) for n, r in zip(pnames, member)}
    out_names, out_rows = [], []
    for i, n in enumerate(names):          # keep the model's feature order
        if i in groups_first:
            out_names.append(groups_first[i][0]); out_rows.append(groups_first[i][1])
        elif n not in used:
            r = np.zeros(d, dtype=bool); r[i] = True
            out_names.append(n); out_rows.append(r)
    return out_names, np.array(out_rows)


