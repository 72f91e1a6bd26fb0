"""Open Bandit click logs (ZOZOTOWN, Saito et al. 2021) as click sessions with positions and propensities.

The six samples of the obp 0.4.1 wheel are bundled in ``stream/data/open_bandit_dataset_sample``
(``<policy>_<campaign>/<campaign>.csv.gz`` + ``item_context.csv``; policies ``random`` (uniform)
and ``bts`` (Bernoulli Thompson sampling), campaigns ``all``, ``men``, ``women``; 10,000
impressions each). A row is one impression: timestamp, item shown, ``position`` (1–3), click,
the logging policy's ``propensity_score`` of that item at that position, hashed user features.

Sessions. The log has no session id and its rows are independent sampled rounds, so prefstream
groups the impressions of one sample into *sessions*: consecutive impressions of the same
user-feature tuple with less than ``gap_s`` seconds between them, at most ``max_shown`` items
per session (our rule, documented here). An item shown twice in a session keeps one entry —
the clicked impression if any, else the first — with that impression's ``position`` and
``propensity``. Each session becomes a click-session record; :mod:`stream.clicks.log` turns it
into (weighted) pairs. Because a session's impressions come from different rounds, its positions
do not form one ranked list: ``click_pairs=all`` is the strategy that fits these logs
(``skipped_above`` / ``next`` compare positions across rounds).

Items are ``"<campaign>-<item_id>"`` (the campaigns have their own item sets; a campaign's items
are the same under both policies). Item features: ``item_feature_0`` (numeric) and a one-hot of
``item_feature_3`` (hashed category; levels united over the loaded samples). Context: one-hots
of ``user_feature_0`` and ``user_feature_1``.

:func:`read_obd_csv` reads one OBD CSV (plain or ``.gz``) as an :class:`Impressions` table, the
form the off-policy estimators of :mod:`stream.clicks.offpolicy` take; :func:`obd_session_records`
makes contract records from one file (``prefstream replay --kind click`` on an OBD CSV).

Licence: Apache-2.0 (obp).
"""

from __future__ import annotations

import csv
import gzip
import io
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Iterator

import numpy as np

from learners.exceptions import InvalidInputError, InvalidParameterError
from stream.adapters import ClickLog, resolve_data_dir

__all__ = ["OBD_SAMPLES", "Impressions", "OpenBanditLog", "is_obd_csv", "load_open_bandit", "obd_session_records",
           "read_obd_csv"]

#: The bundled samples, ``(policy, campaign)``.
OBD_SAMPLES = tuple((p, c) for p in ("random", "bts") for c in ("all", "men", "women"))
_OBD_COLUMNS = {"timestamp", "item_id", "position", "click", "propensity_score"}
_FOLDER = "open_bandit_dataset_sample"


@dataclass
class Impressions:
    """One Open Bandit sample, one row per impression.

    Attributes
    ----------
    name : str
        ``"<policy>_<campaign>"``.
    item_ids : list of str
        The campaign's items (``"<campaign>-<id>"``), the actions of the logging policy.
    item_rows : list of dict
        ``item_context.csv`` rows, same order as ``item_ids``.
    timestamp : ndarray of shape (n,), float (unix seconds)
    item : ndarray of shape (n,), int
        Index into ``item_ids``.
    position : ndarray of shape (n,), int (1-based)
    click : ndarray of shape (n,), int {0, 1}
    propensity : ndarray of shape (n,), float
        The logging policy's probability of that item at that position.
    users : list of tuple of str
        ``(user_feature_0, …, user_feature_3)`` per impression.
    """

    name: str
    item_ids: list
    item_rows: list
    timestamp: np.ndarray
    item: np.ndarray
    position: np.ndarray
    click: np.ndarray
    propensity: np.ndarray
    users: list

    def __len__(self) -> int:
        return len(self.item)


def _open_text(path: Path):
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return path.open(encoding="utf-8", newline="")


def is_obd_csv(path) -> bool:
    """True when ``path`` is a CSV (or ``.csv.gz``) whose header has the Open Bandit columns."""
    p = Path(path)
    if not p.is_file() or not (p.suffix == ".csv" or p.name.endswith(".csv.gz")):
        return False
    try:
        with _open_text(p) as fh:
            header = next(csv.reader(fh), [])
    except (OSError, UnicodeDecodeError):
        return False
    return _OBD_COLUMNS <= set(header)


def read_obd_csv(path, items_path=None, campaign: str | None = None, name: str | None = None) -> Impressions:
    """Read one Open Bandit CSV (``all.csv``, ``men.csv``, … plain or gzipped).

    Parameters
    ----------
    path : path
    items_path : path, optional
        The sample's ``item_context.csv``; default: beside ``path``.
    campaign : str, optional
        Item-id prefix; default the file's stem (``all``, ``men``, ``women``).
    name : str, optional
        Sample name; default the folder name.

    Raises
    ------
    InvalidInputError
        If a file is missing or lacks the Open Bandit columns, or a position / propensity /
        click is invalid (the message names the line).
    """
    path = Path(path)
    items_path = Path(items_path) if items_path else path.parent / "item_context.csv"
    if not path.is_file():
        raise InvalidInputError(f"Open Bandit file {str(path)!r} not found.")
    if not items_path.is_file():
        raise InvalidInputError(f"{str(path)!r} needs its item_context.csv beside it (looked for {str(items_path)!r}).")
    stem = path.name.split(".")[0]
    campaign = campaign or stem
    with items_path.open(encoding="utf-8", newline="") as fh:
        item_rows = list(csv.DictReader(fh))
    local = {r["item_id"]: k for k, r in enumerate(item_rows)}
    ts, it, pos, clk, prop, users = [], [], [], [], [], []
    with _open_text(path) as fh:
        reader = csv.DictReader(fh)
        if not _OBD_COLUMNS <= set(reader.fieldnames or ()):
            raise InvalidInputError(f"{str(path)!r} is not an Open Bandit CSV: it lacks the columns "
                                    f"{sorted(_OBD_COLUMNS - set(reader.fieldnames or ()))}.")
        for line, r in enumerate(reader, start=2):
            try:
                p, c, q = int(r["position"]), int(r["click"]), float(r["propensity_score"])
                k = local[r["item_id"]]
                t = datetime.fromisoformat(r["timestamp"]).timestamp()
            except (KeyError, ValueError) as exc:
                raise InvalidInputError(f"{path.name} line {line}: cannot read the impression ({exc}).") from None
            if p < 1 or c not in (0, 1) or not 0.0 < q <= 1.0:
                raise InvalidInputError(f"{path.name} line {line}: position must be ≥ 1, click 0/1 and propensity_score "
                                        f"in (0, 1]; got {p}, {c}, {q}.")
            ts.append(t); it.append(k); pos.append(p); clk.append(c); prop.append(q)
            users.append(tuple(r.get(f"user_feature_{j}", "") for j in range(4)))
    return Impressions(name=name or path.parent.name, item_ids=[f"{campaign}-{r['item_id']}" for r in item_rows],
                       item_rows=item_rows, timestamp=np.array(ts), item=np.array(it, dtype=np.int64),
                       position=np.array(pos, dtype=np.int64), click=np.array(clk, dtype=np.int64),
                       propensity=np.array(prop), users=users)


def _sample_file(data_dir, policy: str, campaign: str) -> Path:
    d = resolve_data_dir(data_dir, f"{_FOLDER}/{policy}_{campaign}")
    for name in (f"{campaign}.csv", f"{campaign}.csv.gz"):
        if (d / name).is_file():
            return d / name
    raise InvalidInputError(f"{str(d)!r} holds neither {campaign}.csv nor {campaign}.csv.gz.")


def _sessions(imp: Impressions, gap_s: float, max_shown: int, context) -> list[dict]:
    """Group one sample's impressions into session dicts (ids, positions, propensities)."""
    open_s: dict[tuple, dict] = {}
    out: list[dict] = []
    for j in range(len(imp)):
        user, t = imp.users[j], float(imp.timestamp[j])
        s = open_s.get(user)
        iid = imp.item_ids[imp.item[j]]
        slot = {"id": iid, "position": int(imp.position[j]), "propensity": float(imp.propensity[j])}
        if s is None or t - s["_last"] > gap_s or (len(s["shown"]) >= max_shown and iid not in s["_index"]):
            s = {"session_id": f"obd-{imp.name}-{len(out)}", "timestamp": t, "shown": [], "clicked": [],
                 "context": context(user), "_last": t, "_index": {}}
            out.append(s)
            open_s[user] = s
        s["_last"] = t
        k = s["_index"].get(iid)
        if k is None:
            s["_index"][iid] = len(s["shown"])
            s["shown"].append(slot)
        elif imp.click[j] and iid not in s["clicked"]:
            s["shown"][k] = slot  # the clicked impression's position and propensity
        if imp.click[j] and iid not in s["clicked"]:
            s["clicked"].append(iid)
    for s in out:
        del s["_last"], s["_index"]
    return out


@dataclass
class OpenBanditLog(ClickLog):
    """A :class:`ClickLog` of Open Bandit sessions that also keeps the raw impressions per sample.

    ``sessions[k]["shown"]`` are dicts ``{"id", "position", "propensity"}``;
    ``impressions`` maps ``"<policy>_<campaign>"`` to its :class:`Impressions`.
    """

    impressions: dict = field(default_factory=dict)

    def click_sessions(self, inline: bool = True) -> Iterator[dict]:
        """Click-session records (``click_session.v1``) with ``position`` and ``propensity`` per shown item."""
        index = {iid: i for i, iid in enumerate(self.item_ids)}
        for s in self.sessions:
            shown = [{**slot, **({"features": {f: float(v) for f, v in zip(self.feature_names, self.item_features[index[slot["id"]]])}}
                                 if inline else {})} for slot in s["shown"]]
            yield {"schema_version": 1, **s, "shown": shown}

    def to_pairs(self):
        """Pairs clicked ≻ shown-but-not-clicked (the ``all`` strategy, unweighted)."""
        plain = [{**s, "shown": [slot["id"] for slot in s["shown"]]} for s in self.sessions]
        return ClickLog(name=self.name, sessions=plain, item_ids=self.item_ids, item_features=self.item_features,
                        feature_names=self.feature_names, context_names=self.context_names, source=self.source,
                        licence=self.licence).to_pairs()


def _build(imps: list[Impressions], gap_s: float, max_shown: int, name: str) -> OpenBanditLog:
    rows = {}
    for imp in imps:
        for iid, r in zip(imp.item_ids, imp.item_rows):
            rows.setdefault(iid, r)
    ids = list(rows)
    lv3 = sorted({r["item_feature_3"] for r in rows.values()})
    names = ["item_feature_0"] + [f"item_feature_3={v[:6]}" for v in lv3]
    X = np.array([[float(r["item_feature_0"])] + [1.0 if r["item_feature_3"] == v else 0.0 for v in lv3]
                  for r in rows.values()]).reshape(len(ids), len(names))
    u0 = sorted({u[0] for imp in imps for u in imp.users})
    u1 = sorted({u[1] for imp in imps for u in imp.users})
    cnames = [f"user_feature_0={v[:6]}" for v in u0] + [f"user_feature_1={v[:6]}" for v in u1]

    def context(user):
        return {**{f"user_feature_0={v[:6]}": float(user[0] == v) for v in u0},
                **{f"user_feature_1={v[:6]}": float(user[1] == v) for v in u1}}

    sessions = [s for imp in imps for s in _sessions(imp, gap_s, max_shown, context)]
    return OpenBanditLog(name=name, sessions=sessions, item_ids=ids, item_features=X, feature_names=names,
                         context_names=cnames, source="PyPI obp 0.4.1 samples (Saito et al. 2021)", licence="Apache-2.0",
                         impressions={imp.name: imp for imp in imps})


def load_open_bandit(data_dir=None, samples="all", gap_s: float = 3600.0, max_shown: int = 10) -> OpenBanditLog:
    """Load Open Bandit samples as click sessions with positions and propensities.

    Parameters
    ----------
    data_dir : path, optional
        A data directory holding ``open_bandit_dataset_sample/<policy>_<campaign>/``; the
        bundled copy is used for samples it lacks.
    samples : "all", str or list of str, default "all"
        ``"all"`` = the six samples; else names ``"<policy>_<campaign>"`` (``"random_all"``, …)
        or a policy (``"random"``, ``"bts"``) for its three campaigns.
    gap_s : float, default 3600
        A user's impressions more than ``gap_s`` seconds apart start a new session.
    max_shown : int, default 10
        Items per session at most (a result page); a further new item starts a new session.

    Raises
    ------
    InvalidParameterError
        For an unknown sample name or a non-positive ``gap_s`` / ``max_shown``.
    """
    valid = [f"{p}_{c}" for p, c in OBD_SAMPLES]
    if samples == "all":
        names = valid
    elif isinstance(samples, str) and samples in ("random", "bts"):
        names = [f"{samples}_{c}" for c in ("all", "men", "women")]
    else:
        names = [samples] if isinstance(samples, str) else list(samples)
    bad = [n for n in names if n not in valid]
    if bad or not names:
        raise InvalidParameterError(f"Unknown Open Bandit samples {bad or names}; choose from {valid}, 'random', 'bts' or 'all'.")
    if not gap_s > 0 or int(max_shown) < 2:
        raise InvalidParameterError(f"load_open_bandit needs gap_s > 0 and max_shown ≥ 2; got {gap_s!r}, {max_shown!r}.")
    imps = []
    for n in names:
        policy, campaign = n.split("_")
        imps.append(read_obd_csv(_sample_file(data_dir, policy, campaign), name=n))
    return _build(imps, gap_s, int(max_shown), "open_bandit")


def obd_session_records(path, gap_s: float = 3600.0, max_shown: int = 10, inline: bool = True) -> Iterator[dict]:
    """Click-session records from one Open Bandit CSV (its ``item_context.csv`` beside it).

    Used by ``prefstream replay --kind click FILE`` when ``FILE`` has the OBD columns.
    """
    imp = read_obd_csv(path)
    yield from _build([imp], gap_s, int(max_shown), "open_bandit").click_sessions(inline=inline)
