"""Contract suites applied to every registered model and explainer (as river's ``checks`` are
applied to every estimator).

``models.py`` and ``explainers.py`` hold the checks, each a plain function of a
:class:`~tests.checks.world.World` (a small synthetic preference stream) and a registered name;
``test_models.py`` and ``test_explainers.py`` parametrise them over ``stream.registry`` after
``stream.load_builtins()``. A plug-in registered before collection (say, in a conftest.py that
imports it) is checked with no test of its own. Per-model constructor parameters that keep the
suite fast live in ``world.FAST_PARAMS``; a model not listed there is built with ``{}``.

Model checks: inputs not mutated, state round-trip through the snapshot codec, clone keeps the
parameters, probabilities in [0, 1] with P(a≻b) + P(b≻a) = 1, skew-symmetry of the margin, the
batch methods equal to the single-sample ones, ``learn_many`` ≡ a ``learn_one`` loop (unless the
class sets ``learn_many_matches_loop = False`` and documents its mini-batch variant), merge.
Explainer checks: records validate against the explanation schema, additivity when the
explainer claims it (``fn.additive = True``), the same result under the same seed, inputs and the
learner not mutated.
"""
