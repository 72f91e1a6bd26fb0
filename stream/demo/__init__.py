"""The end-to-end demo (``prefstream demo``, ``make demo``): a real data set streamed through the
broker into the product's own learner and explainer workers, ending with a summary and a report.

================  ==========================================================================
module            what
================  ==========================================================================
``run``           :func:`run_demo`: the orchestration, one function per step
``config``        model parameters per data set, the workers' TOML settings file
``workers``       launching ``python -m stream worker learn|explain`` and stopping them
``events``        what is replayed (preference events, Train choices as click sessions)
``topics``        the run-unique topics: read to the end, delete
``scrape``        :class:`MetricsScraper`: the workers' Prometheus endpoints, polled
``summary``       the summary dict and its printed form
``errors``        :class:`DemoError`
================  ==========================================================================
"""

from stream.demo.config import default_model_params, write_settings_toml
from stream.demo.errors import DemoError
from stream.demo.events import demo_stream
from stream.demo.events import train_session as _train_session  # noqa: F401  (tests build sessions with it)
from stream.demo.run import run_demo
from stream.demo.scrape import MetricsScraper
from stream.demo.summary import format_summary
from stream.report import rebuild_report

__all__ = ["DemoError", "MetricsScraper", "default_model_params", "demo_stream", "format_summary", "rebuild_report",
           "run_demo", "write_settings_toml"]
