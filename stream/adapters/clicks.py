"""Open Bandit click logs (ZOZOTOWN, Saito et al. 2021) as click sessions.

The shipped sample (``random_all``: 10,000 impressions, 38 clicks, 80 items) logs one row per
impression: timestamp, item shown, position, click, hashed user features. prefstream groups
impressions into *sessions*: consecutive impressions of the same user-feature tuple with less
than ``gap_s`` seconds between them (the log has no session id; this rule is ours and documented).
A session becomes a click-session record (shown items, clicked items, user context), which the
learner worker expands into pairs clicked ≻ shown-but-not-clicked (paper 000, App. B).

Item features: ``item_feature_0`` (numeric) and a one-hot of ``item_feature_3`` (7 hashed levels).
Context: one-hots of ``user_feature_0`` (3 levels) and ``user_feature_1`` (5 levels).
Licence: Apache-2.0 (obp); the sample is bundled in ``stream/data/open_bandit_dataset_sample``.
"""

from __future__ import annotations

import csv
from datetime import datetime

import numpy as np

from stream.adapters import ClickLog, resolve_data_dir

__all__ = ["load_open_bandit"]


def load_open_bandit(data_dir=None, policy: str = "random", gap_s: float = 300.0) -> ClickLog:
    """Load the Open Bandit sample as sessions.

    Parameters
    ----------
    policy : {"random", "bts"}
        Which logging policy's sample (``random_all`` or ``bts_all``).
    gap_s : float
        Session gap in seconds.
    """
    d = resolve_data_dir(data_dir, "open_bandit_dataset_sample") / f"{policy}_all"
    with (d / "item_context.csv").open(newline="") as fh:
        items = list(csv.DictReader(fh))
    lv3 = sorted({r["item_feature_3"] for r in items})
    names = ["item_feature_0"] + [f"item_feature_3={v[:6]}" for v in lv3]
    ids = [r["item_id"] for r in items]
    X = np.array([[float(r["item_feature_0"])] + [1.0 if r["item_feature_3"] == v else 0.0 for v in lv3] for r in items])
    with (d / "all.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    u0 = sorted({r["user_feature_0"] for r in rows}); u1 = sorted({r["user_feature_1"] for r in rows})
    cnames = [f"user_feature_0={v[:6]}" for v in u0] + [f"user_feature_1={v[:6]}" for v in u1]
    open_sessions: dict[tuple, dict] = {}
    sessions: list[dict] = []
    for r in rows:
        t = datetime.fromisoformat(r["timestamp"]).timestamp()
        user = (r["user_feature_0"], r["user_feature_1"], r["user_feature_2"], r["user_feature_3"])
        s = open_sessions.get(user)
        if s is None or t - s["_last"] > gap_s:
            s = {"session_id": f"obd-{policy}-{len(sessions)}", "timestamp": t, "shown": [], "clicked": [],
                 "context": {**{f"user_feature_0={v[:6]}": float(user[0] == v) for v in u0},
                             **{f"user_feature_1={v[:6]}": float(user[1] == v) for v in u1}}, "_last": t}
            sessions.append(s); open_sessions[user] = s
        s["_last"] = t
        if r["item_id"] not in s["shown"]:
            s["shown"].append(r["item_id"])
        if r["click"] == "1" and r["item_id"] not in s["clicked"]:
            s["clicked"].append(r["item_id"])
    for s in sessions:
        del s["_last"]
    return ClickLog(name="open_bandit", sessions=sessions, item_ids=ids, item_features=X, feature_names=names,
                    context_names=cnames, source="PyPI obp 0.4.1 sample (Saito et al. 2021)", licence="Apache-2.0")
