"""What the demo replays: a data set's events, with some Train choices sent as click sessions.

Examples
--------
>>> ev = {"event_id": "e1", "timestamp": 0, "outcome": -1,
...       "left": {"id": "a", "features": {"price": 1}}, "right": {"id": "b", "features": {"price": 2}}}
>>> s = train_session(ev)
>>> s["clicked"], session_pairs(s)
(['b'], 1)
"""

from __future__ import annotations

from typing import Iterator

__all__ = ["demo_stream", "interleave_people", "session_pairs", "train_session"]


def interleave_people(events: list[dict], seed: int = 0) -> list[dict]:
    """The events with their people interleaved at random, each person's events kept in their order.

    A panel's file lists one respondent after another; a recommender's stream interleaves its
    people. Shuffling the *people's turns* (a seeded draw of whose event comes next, in proportion
    to the events each has left) keeps every person's own order, as bench/personal.py does. The
    timestamps are reassigned in the new order (the sorted original ones), so the stream stays in
    time order. Events without a ``user_id`` count as one person each.

    Examples
    --------
    >>> evs = [{"event_id": str(k), "timestamp": k, "user_id": u} for k, u in enumerate("aaabbbccc")]
    >>> out = interleave_people(evs)
    >>> [e["event_id"] for e in out if e["user_id"] == "b"], [e["timestamp"] for e in out] == list(range(9))
    (['3', '4', '5'], True)
    >>> "".join(e["user_id"] for e in out) != "aaabbbccc"
    True
    """
    import random
    from collections import deque

    queues: dict[str, deque] = {}
    for k, ev in enumerate(events):
        queues.setdefault(ev.get("user_id") or f"\0{k}", deque()).append(ev)
    turns = [u for u, q in queues.items() for _ in range(len(q))]
    random.Random(seed).shuffle(turns)
    stamps = sorted(ev["timestamp"] for ev in events)
    out = []
    for u, t in zip(turns, stamps):
        ev = dict(queues[u].popleft())
        ev["timestamp"] = t
        out.append(ev)
    return out


def train_session(ev: dict) -> dict:
    """A Train choice as a click session: both trips shown, the chosen one clicked."""
    chosen = ev["left"] if ev["outcome"] == 1 else ev["right"]
    return {"schema_version": 1, "session_id": ev["event_id"], "timestamp": ev["timestamp"],
            "shown": [ev["left"], ev["right"]], "clicked": [chosen["id"]]}


def session_pairs(s: dict) -> int:
    ids = [x["id"] for x in s["shown"]]
    k = len(set(s.get("clicked") or []) & set(ids))
    return k * (len(ids) - k) if 0 < k < len(ids) else 0


def demo_stream(ds, max_events: int | None = None, click_every: int | None = 10) -> Iterator[tuple[str, dict]]:
    """``(kind, record)`` pairs to replay: kind ``"preference"`` or ``"click"``.

    A :class:`PairwiseDataset` gives its preference events (its people interleaved, each in their
    own order: :func:`interleave_people`), with every ``click_every``-th one
    (when given and the data set has inline items, as Train) sent as a two-item click session
    instead; a :class:`ClickLog` gives its click sessions.

    Examples
    --------
    >>> from stream.adapters import load_dataset
    >>> kinds = [kind for kind, _ in demo_stream(load_dataset("train"), max_events=20)]
    >>> kinds.count("preference"), kinds.count("click")
    (18, 2)
    """
    from stream.adapters import ClickLog

    if isinstance(ds, ClickLog):
        for k, s in enumerate(ds.click_sessions(inline=True)):
            if max_events is not None and k >= max_events:
                return
            yield "click", s
        return
    events = list(ds.to_events(0, max_events))
    if any(ev.get("user_id") for ev in events):
        events = interleave_people(events)   # a panel's respondents one after another → a stream of people
    for k, ev in enumerate(events):
        if click_every and getattr(ds, "inline", False) and k % click_every == click_every - 1 and ev["outcome"] != 0:
            yield "click", train_session(ev)
        else:
            yield "preference", ev

