"""A count said in the log at most once per period: the events accumulated since the last line.

Used where a worker skips events one by one but a line per event would flood the log (duplicates
the learner drops, sampled events the explainer meets before any model snapshot).

Examples
--------
>>> import logging
>>> t = [0.0]
>>> said = []
>>> class Log:
...     def log(self, level, msg, n): said.append(msg % n)
>>> c = ThrottledCount(Log(), logging.INFO, "%d skipped", every_s=10.0, clock=lambda: t[0])
>>> c.add(1); c.add(4); t[0] = 10.0; c.add(2)
>>> said
['1 skipped', '6 skipped']
"""

from __future__ import annotations

import math
import time
from typing import Callable

__all__ = ["ThrottledCount"]


class ThrottledCount:
    """Add counts; log ``message % accumulated`` at most once per ``every_s`` seconds.

    Parameters
    ----------
    logger : logging.Logger
    level : int
    message : str
        A ``%d`` format for the count accumulated since the previous line.
    every_s : float, default 10
    clock : callable, default time.monotonic
    """

    def __init__(self, logger, level: int, message: str, every_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger, self.level, self.message, self.every_s, self.clock = logger, level, message, every_s, clock
        self.pending, self.last = 0, -math.inf

    def add(self, n: int = 1) -> None:
        """Count ``n`` more; say the accumulated count if the last line is ``every_s`` old."""
        self.pending += n
        now = self.clock()
        if now - self.last >= self.every_s:
            self.logger.log(self.level, self.message, self.pending)
            self.pending, self.last = 0, now
