"""Keep Python's cyclic garbage collector off a worker's long-lived objects — no Kafka.

A worker holds hundreds of thousands of long-lived objects (the item catalog, the background
reservoir, model snapshots, dedupe keys: 341,000 tracked objects in the in-process explainer bench).
CPython's collector traverses the surviving ones again whenever enough young objects survive, and
the cost lands on whatever allocation triggered it: in ``bench/explainer_rate.py`` ``ndarray.tolist``
of a distributional record took ~0.1 ms per call for that reason, and the capacity's
distributional-bernoulli ran at 822 events/CPU-s beside 2,570 with the heap frozen (issue 29).

:class:`HeapSettler` collects once and moves every surviving object into the permanent generation
(:func:`gc.freeze`), so later collections look only at what was allocated since. Frozen objects are
still freed by reference counting; only cycles among them wait for the next settle, which first
unfreezes and collects everything (:func:`gc.unfreeze`, :func:`gc.collect`). Settles come at growing
intervals from start-up (5 s, 10 s, … up to ``max_interval_s``): the heap changes most while the
worker loads its models and catalog.
"""

from __future__ import annotations

import gc
import time
from typing import Callable

__all__ = ["HeapSettler", "settle_heap"]


def settle_heap() -> int:
    """Collect every generation, then freeze what survives; returns the objects collected.

    Examples
    --------
    >>> n = settle_heap()
    >>> gc.get_freeze_count() > 0
    True
    >>> gc.unfreeze()
    """
    gc.unfreeze()
    n = gc.collect()
    gc.freeze()
    return n


class HeapSettler:
    """Calls :func:`settle_heap` at growing intervals: ``first_s``, then doubling up to ``max_interval_s``.

    Parameters
    ----------
    first_s : float
        Seconds after construction of the first settle.
    max_interval_s : float
        Longest interval between two settles.
    clock : callable
        Monotonic seconds (tests pass a fake one).

    Examples
    --------
    >>> t = [0.0]
    >>> h = HeapSettler(first_s=2, max_interval_s=5, clock=lambda: t[0])
    >>> done = []
    >>> for t[0] in (1.0, 2.0, 3.0, 6.0, 10.0, 11.0, 15.0):
    ...     done.append(h.maybe_settle())
    >>> done, h.settles
    ([False, True, False, True, False, True, False], 3)
    >>> gc.unfreeze()
    """

    def __init__(self, first_s: float = 5.0, max_interval_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.interval = float(first_s)
        self.max_interval_s = float(max_interval_s)
        self.next_at = clock() + self.interval
        self.settles = 0

    def maybe_settle(self) -> bool:
        """Settle the heap if its time has come; whether it did."""
        now = self.clock()
        if now < self.next_at:
            return False
        settle_heap()
        self.settles += 1
        self.interval = min(2 * self.interval, self.max_interval_s)
        self.next_at = now + self.interval
        return True
