"""prefstream workers: the learner (:mod:`.learner`) and the explainer (:mod:`.explainer`).

Both run on one consumer loop (:class:`~stream.workers.loop.ConsumerLoop`: aiokafka's group
consumer in micro-batches) around plain-Python cores
(:class:`~stream.workers.learner.LearnerCore`, :class:`~stream.workers.explainer.ExplainerCore`)
that hold the state and can be tested without a broker. See ``docs/workers.md``.
"""

__all__ = ["run_explainer", "run_learner"]


def run_learner(settings, **kwargs):
    """Run the learner worker until stopped (see :func:`stream.workers.learner.run_learner`)."""
    from stream.workers.learner import run_learner as _run

    return _run(settings, **kwargs)


def run_explainer(settings, **kwargs):
    """Run the explainer worker until stopped (see :func:`stream.workers.explainer_loop.run_explainer`)."""
    from stream.workers.explainer_loop import run_explainer as _run

    return _run(settings, **kwargs)
