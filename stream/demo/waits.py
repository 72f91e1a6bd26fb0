"""The demo's waits on the workers' Prometheus metrics: warm-up, everything learned, explanations quiet."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from stream.demo.errors import DemoError
from stream.demo.scrape import MetricsScraper
from stream.demo.workers import Workers

__all__ = ["wait_explained", "wait_learned", "wait_warm"]

log = logging.getLogger(__name__)

GAUGE_PERIOD_S = 1.0  # the learner's gauges loop (stream.workers: update_gauges about once a second)


def wait_warm(scraper: MetricsScraper, workers: Workers, models: list[str], refit_models: list[str],
               timeout: float) -> bool:
    """Until every model is published, the refitted ones refitted, and the explainer holds them all."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        workers.check_alive()
        scraper.poll()
        lv = scraper.learner("prefstream_model_version")
        refits = scraper.learner("prefstream_refit_duration_seconds_count")
        ev = scraper.explainer("prefstream_model_version", "model")
        if (all(lv.get(m, 0) >= 1 for m in models) and all(refits.get(m, 0) >= 1 for m in refit_models)
                and all(ev.get(m, 0) >= 1 for m in models)):
            # the refit forces a snapshot at the next timer tick: give it and the explainer a moment
            time.sleep(1.5)
            scraper.poll()
            lv = scraper.learner("prefstream_model_version")
            ev = scraper.explainer("prefstream_model_version", "model")
            if all(ev.get(m, 0) >= lv.get(m, 0) for m in models):
                return True
        time.sleep(0.5)
    log.warning("warm-up: not every model was ready after %.0f s; replaying the rest anyway", timeout)
    return False


def wait_learned(workers: Workers, scraper: MetricsScraper, models: list[str], examples: int, timeout_s: float,
                 log_dir: Path, poll_s: float = 0.5) -> float:
    """Until every model has learned every sent example; DemoError after ``timeout_s``.

    Returns the ``time.monotonic()`` at which every example was seen learned (polled every
    ``poll_s``), before the extra gauge period this function then waits.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        workers.check_alive()
        # the learner alone at this pace: a scrape renders every series of the explainer's registry
        # (~6 % of its CPU at five a second during a 10,000 events/s burst); the scraper's own thread
        # still reads both once a second
        scraper.poll(("learner",))
        learned = scraper.learner("prefstream_events_learned_total")
        if learned and all(learned.get(m, 0) >= examples for m in models):
            done = time.monotonic()
            # the learner pushes its metric gauges about once a second, after the counters:
            # one more gauge period so that the last progress point carries the final metrics
            time.sleep(GAUGE_PERIOD_S + 0.5)
            scraper.poll()
            return done
        if time.monotonic() > deadline:
            raise DemoError(f"Learning stalled: learned {learned} of {examples} examples after {timeout_s:.0f} s "
                            f"(see {log_dir}/learn.log).")
        time.sleep(poll_s)


def wait_explained(workers: Workers, scraper: MetricsScraper, quiet_period_s: float, timeout_s: float) -> None:
    """Until no explanation (or skip) arrived for ``quiet_period_s``, at most ``timeout_s``."""
    last_n, last_change = -1.0, time.monotonic()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        workers.check_alive()
        scraper.poll()
        n = sum(scraper.explainer("prefstream_explanations_total").values())
        n += sum(scraper.explainer("prefstream_explanations_skipped_total", "reason").values())
        if n != last_n:
            last_n, last_change = n, time.monotonic()
        elif time.monotonic() - last_change >= quiet_period_s:
            return
        time.sleep(0.5)
