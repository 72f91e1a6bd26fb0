"""prefstream workers: the learner (:mod:`.learner`) and the explainer (:mod:`.explainer`).

Both are thin loops — decode, learn or explain, emit — around plain-Python cores
(:class:`~stream.workers.learner.LearnerCore`, :class:`~stream.workers.explainer.ExplainerCore`)
that hold the state and can be tested without a broker: the learner an aiokafka group
consumer working in micro-batches, the explainer a Faust app. See ``docs/workers.md``.
"""

__all__ = ["run_explainer", "run_learner"]


def run_learner(settings, **kwargs):
    """Run the learner worker until stopped (see :func:`stream.workers.learner.run_learner`)."""
    from stream.workers.learner import run_learner as _run

    return _run(settings, **kwargs)


def run_explainer(settings, **kwargs):
    """Run the explainer worker until stopped (see :func:`stream.workers.explainer.run_explainer`)."""
    from stream.workers.explainer import run_explainer as _run

    return _run(settings, **kwargs)
