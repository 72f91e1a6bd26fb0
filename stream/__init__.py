"""prefstream's stream layer: the event contract, settings, the registry of models and
explainers, the workers, the file runner, the demo and its report.

The whole error tree of prefstream is importable from here (defined in
:mod:`learners.exceptions`, with the stream's own subclasses beside the code that raises them)::

    PrefstreamError
    ├── InvalidInputError (ValueError)
    │   └── DeadLetter                  stream.contract: an event refused, with its reason
    ├── InvalidParameterError (ValueError)
    ├── NotFittedError (RuntimeError)
    ├── SnapshotError (ValueError)
    ├── BudgetError (ValueError)
    ├── BrokerError (RuntimeError)      stream.broker: the local broker cannot start / answer
    ├── BrokerUnavailable (ConnectionError)   stream.replay: no broker to replay to
    └── DemoError (RuntimeError)        stream.demo: a step of the demo failed

The built-in models and explainers are registered by :func:`load_builtins` (the CLI and
:func:`run_batch` call it); the registry itself (:mod:`stream.registry`) knows no model. Names
are imported on first use, so ``import stream`` loads neither torch, matplotlib nor a Kafka client.

Examples
--------
>>> import stream
>>> stream.load_builtins()
>>> {"capacity", "cgpm", "gpm", "linear-bt"} <= set(stream.registry.models())
True
>>> stream.get_model("nope")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
learners.exceptions.InvalidParameterError: Unknown model 'nope'; registered models: [...]...
>>> issubclass(stream.DeadLetter, stream.InvalidInputError) and issubclass(stream.DemoError, stream.PrefstreamError)
True
"""

from learners._exports import lazy_exports as _lazy_exports
from learners.exceptions import (
    BudgetError,
    InvalidInputError,
    InvalidParameterError,
    NotFittedError,
    PrefstreamError,
    SnapshotError,
)

__all__ = [
    "BrokerError",
    "BrokerUnavailable",
    "BudgetError",
    "DeadLetter",
    "DemoError",
    "ExplainContext",
    "InvalidInputError",
    "InvalidParameterError",
    "ItemCatalog",
    "ModelSpec",
    "NotFittedError",
    "PreferenceExample",
    "PrefstreamError",
    "Settings",
    "SnapshotError",
    "decode_snapshot",
    "encode_snapshot",
    "explainers_for",
    "get_explainer",
    "get_model",
    "load_builtins",
    "load_dataset",
    "merge_learners",
    "parse_explain_request",
    "parse_preference",
    "rebuild_report",
    "register_explainer",
    "register_model",
    "run_batch",
    "run_demo",
    "validate_record",
    "write_report",
]

_WHERE = {
    "BrokerError": "stream.broker",
    "BrokerUnavailable": "stream.replay",
    "DeadLetter": "stream.contract", "ItemCatalog": "stream.contract", "PreferenceExample": "stream.contract",
    "decode_snapshot": "stream.contract", "encode_snapshot": "stream.contract",
    "parse_explain_request": "stream.contract", "parse_preference": "stream.contract",
    "validate_record": "stream.contract",
    "DemoError": "stream.demo", "run_demo": "stream.demo",
    "ExplainContext": "stream.registry", "ModelSpec": "stream.registry", "explainers_for": "stream.registry",
    "get_explainer": "stream.registry", "get_model": "stream.registry", "merge_learners": "stream.registry",
    "register_explainer": "stream.registry", "register_model": "stream.registry",
    "Settings": "stream.settings",
    "load_dataset": "stream.adapters",
    "rebuild_report": "stream.report", "write_report": "stream.report",
    "run_batch": "stream.batch",
}

__getattr__, __dir__ = _lazy_exports(__name__, _WHERE, __all__)


def load_builtins() -> None:
    """Register the built-in models and explainers (:func:`stream.models.register_all`; idempotent)."""
    from stream.models import register_all

    register_all()
