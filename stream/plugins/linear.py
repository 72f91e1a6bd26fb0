"""The ``linear-bt`` plug-in: :class:`learners.linear.LinearBT` and its exact ``linear-shapley`` values.

Merge rule: no merger is registered, so :func:`stream.registry.merge_learners` uses
:meth:`LinearBT.__iadd__ <learners.linear.LinearBT.__iadd__>`: the training-count-weighted average
of the raw-unit weights (parameter mixing, Zinkevich et al. 2010).
"""

from __future__ import annotations

from learners.exceptions import InvalidInputError
from stream.contract.arrays import background_arrays, side_array
from stream.plugins.budgets import capped
from stream.plugins.common import construct

__all__ = ["explain_linear_shapley", "linear_factory", "linear_loader", "shapley_of_weights"]


def linear_factory(settings, params: dict):
    """A fresh :class:`~learners.linear.LinearBT` (feature names from the settings unless given).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> linear_factory(SimpleNamespace(feature_names=["a", "b"]), {"learning_rate": 0.2}).feature_names
    ['a', 'b']
    """
    from learners.linear import LinearBT

    kw = dict(params)
    if getattr(settings, "feature_names", None) and "feature_names" not in kw:
        kw["feature_names"] = list(settings.feature_names)
    return construct("linear-bt", LinearBT, **kw)


def linear_loader(state: dict):
    """:meth:`LinearBT.from_state <learners.linear.LinearBT.from_state>`.

    Examples
    --------
    >>> from learners.linear import LinearBT
    >>> linear_loader(LinearBT(["a", "b"]).state_dict()).feature_names
    ['a', 'b']
    """
    from learners.linear import LinearBT

    return LinearBT.from_state(state)


def shapley_of_weights(weights, names: list, examples: list, ctx):
    """Exact Shapley values of each event's margin w·(x_l − x_r) (:func:`explainers.linear.explain_linear`).

    ``weights``: a model exposing ``weights``, a weight vector (n_features,), or one weight vector per
    event (n_events, n_features). The background mean difference μ = E[b_l − b_r] comes from
    ``ctx.background`` when it holds examples, else μ = 0 (left and right items i.i.d., Hu, Chau et
    al. 2022, Sec. 3.1). A batch is one matrix product (exact: equal to one call per event to 1e-9).
    """
    from explainers.linear import explain_linear

    XL, XR = side_array(examples, names, "left"), side_array(examples, names, "right")
    BL, BR = background_arrays(ctx.background, names)
    mu = (BL - BR) if len(BL) else None
    return explain_linear(weights, XL, XR, background_mean_diff=mu, feature_names=names,
                          model_version=ctx.model_version, instance_ids=[ex.event_id for ex in examples])


@capped(max_batch=4096, budget_s=2.0, step=4096)
def explain_linear_shapley(learner, examples: list, ctx):
    """Exact Shapley values of w·(x_l − x_r), φ_j = w_j (D_j − μ_j) (:func:`shapley_of_weights`)."""
    names = list(learner.feature_names)
    if not names:
        raise InvalidInputError("The linear-bt model has not learned any example yet; nothing to explain.")
    return shapley_of_weights(learner, names, examples, ctx)


explain_linear_shapley.additive = True  # base + Σφ = margin (efficiency); tests/checks verifies it
