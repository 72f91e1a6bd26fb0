"""Per-source state of the learner worker: one :class:`ModelSlot` per model in a :class:`SourceState`.

A *source* is one partition of one input topic (``"<topic>:<partition>"``); each has its own
learner per model, its offsets, and the messages waiting for a snapshot before their ack
(:mod:`stream.workers.learner_core` explains the guarantee these serve).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from stream.workers._snapshot import source_name

__all__ = ["ModelSlot", "SourceState"]


@dataclass
class ModelSlot:
    """One model's state on one source."""

    learner: Any
    version: int = 0
    count: int = 0
    next_offset: int = 0
    digest: int = 0
    window: deque = field(default_factory=deque)
    window_set: set = field(default_factory=set)
    refit_running: bool = False
    restored: bool = False
    guard: Any = None  # stream.workers.guard.FiniteGuard of this model, made on the first update

    def remember(self, h: int, size: int) -> None:
        if size <= 0:
            return
        self.window.append(h)
        self.window_set.add(h)
        while len(self.window) > size:
            self.window_set.discard(self.window.popleft())

    def remember_many(self, hs: list, size: int) -> None:
        """:meth:`remember` of each of ``hs`` in order (distinct hashes not in the window: the
        learned events of a batch), in one step."""
        if size <= 0 or not hs:
            return
        self.window.extend(hs)
        self.window_set.update(hs)
        window, drop = self.window, self.window_set.discard
        for _ in range(len(window) - size):
            drop(window.popleft())


@dataclass
class SourceState:
    """All model slots of one source plus the messages waiting for a snapshot before their ack."""

    topic: str
    partition: int
    kind: str
    slots: dict = field(default_factory=dict)
    next_offset: int = 0
    published_next: int = 0
    pending: list = field(default_factory=list)
    since_snapshot: int = 0
    last_snapshot: float = field(default_factory=time.monotonic)
    force: bool = False
    publishing: bool = False
    generation: int = 0
    #: the changelog records of the snapshot round being published (stream.workers.people), and
    #: what PersonSlot.done needs per personal model
    people_round: tuple = field(default_factory=lambda: ([], {}))

    @property
    def source(self) -> str:
        return source_name(self.topic, self.partition)
