"""The built-in models and explainers, registered in one place: :func:`register_all`.

=========  ==============================================  =========================================
model      learner (plug-in module)                        explanation methods
=========  ==============================================  =========================================
capacity   :class:`learners.capacity_stream.CapacityLogistic`  capacity-shapley, capacity-interaction,
           (``algorithm="rda"``: paper RDA / ADMM-RDA)     sharp-rank, sharp-pairwise,
           :mod:`stream.plugins.capacity`                  distributional-bernoulli,
                                                           distributional-categorical (click sessions)
gpm        :class:`learners.refit.RefittingGPM`             pref-shap, distributional-bernoulli,
           :mod:`stream.plugins.gpm`                       distributional-categorical (click sessions)
cgpm       :class:`learners.refit.RefittingCGPM`            pref-shap, pref-shap-context,
           :mod:`stream.plugins.gpm`                       distributional-bernoulli
linear-bt  :class:`learners.linear.LinearBT`                linear-shapley
           :mod:`stream.plugins.linear`
capacity-  :class:`learners.capacity_personal.CapacityPersonal`  per-person capacity Shapley and
personal   :mod:`stream.plugins.personal`                  interaction indices (docs/personal.md)
linear-bt- :class:`learners.linear_personal.LinearBTPersonal`
personal   :mod:`stream.plugins.personal`
=========  ==============================================  =========================================

This is the only module that both imports :mod:`stream.registry` and names a built-in; the
registry never imports it. The entry points call :func:`register_all` explicitly (the
``prefstream`` CLI before any command, :func:`stream.batch.run_batch`); from a notebook call
``stream.load_builtins()`` first. It is idempotent, and it never replaces a registration it did
not make: if ``"capacity"`` (say) is already registered with another factory it raises
:class:`~learners.exceptions.InvalidParameterError` — register your own model under another
name, or after :func:`register_all` with ``replace=True``.

Per-model parameters come from ``Settings.model_params[<model>]`` (config file, ``--param``);
item features from ``Settings.feature_names`` and, for ``cgpm``, contexts from
``Settings.context_names``. Merge rules (decided once, in each plug-in module):
``capacity`` pools RDA parts and otherwise explains the largest part
(:func:`stream.plugins.capacity.merge_capacity`); ``gpm``/``cgpm`` form the count-weighted
ensemble (:func:`stream.plugins.gpm_merge.merge_gpm`); ``linear-bt`` mixes parameters by count
(``LinearBT.__iadd__``, the registry's default for a mergeable learner). Explanation budgets: :mod:`stream.plugins.budgets`.

Explainers that only make sense for click sessions carry ``session_only = True``; the explainer
worker runs them on click-session jobs (``ctx.params["session"]``) and the others on preference
events. Explainers whose values add up to the explained output (base + Σφ = prediction) carry
``additive = True``, which the contract suite in ``tests/checks`` verifies.

Examples
--------
>>> from stream import registry
>>> register_all()
>>> "capacity" in registry.models() and "linear-shapley" in registry.explainers_for("linear-bt")
True
>>> register_all()    # idempotent
"""

from __future__ import annotations

import threading

from learners.exceptions import InvalidParameterError
from stream import registry
from stream.plugins import capacity as _cap
from stream.plugins import gpm as _gpm
from stream.plugins import linear as _lin
from stream.plugins import personal as _per
from stream.plugins.gpm_merge import merge_gpm
# the player grouping the explainers use, under the names this module gave it before the split
from stream.plugins.groups import feature_groups  # noqa: F401
from stream.plugins.groups import on_features as _on_features  # noqa: F401
from stream.plugins.groups import players as _players  # noqa: F401
from stream.plugins.sessions import session_categorical

__all__ = ["BUILTIN_EXPLAINERS", "BUILTIN_MODELS", "register_all"]

#: name → (factory, loader, merger or None)
BUILTIN_MODELS = {
    "linear-bt": (_lin.linear_factory, _lin.linear_loader, None),
    "capacity": (_cap.capacity_factory, _cap.capacity_loader, _cap.merge_capacity),
    "gpm": (_gpm.gpm_factory, _gpm.gpm_loader, merge_gpm),
    "cgpm": (_gpm.cgpm_factory, _gpm.gpm_loader, merge_gpm),
    "capacity-personal": (_per.capacity_personal_factory, _per.personal_loader, _per.merge_personal),
    "linear-bt-personal": (_per.linear_personal_factory, _per.personal_loader, _per.merge_personal),
}

#: model → {method: explainer}
BUILTIN_EXPLAINERS = {
    "linear-bt": {"linear-shapley": _lin.explain_linear_shapley},
    "capacity": {"capacity-shapley": _cap.capacity_shapley, "capacity-interaction": _cap.capacity_interaction,
                 "sharp-rank": _cap.sharp_rank, "sharp-pairwise": _cap.sharp_pairwise,
                 "distributional-bernoulli": _cap.margin_bernoulli,
                 "distributional-categorical": session_categorical},
    "gpm": {"pref-shap": _gpm.pref_shap, "distributional-bernoulli": _gpm.gpm_bernoulli,
            "distributional-categorical": session_categorical},
    "cgpm": {"pref-shap": _gpm.pref_shap, "pref-shap-context": _gpm.pref_shap_context,
             "distributional-bernoulli": _gpm.gpm_bernoulli},
    "capacity-personal": {"capacity-shapley": _per.person_capacity_shapley,
                          "capacity-interaction": _per.person_capacity_interaction,
                          "capacity-shapley-deviation": _per.person_deviation_shapley,
                          "capacity-interaction-deviation": _per.person_deviation_interaction},
    "linear-bt-personal": {"linear-shapley": _per.person_linear_shapley,
                           "linear-shapley-deviation": _per.person_linear_deviation},
}

_LOCK = threading.Lock()
_DONE = False


def register_all() -> None:
    """Register every built-in model and explainer (idempotent).

    Only the first call registers; a model re-registered later with ``replace=True`` stays.

    Raises
    ------
    InvalidParameterError
        If a built-in's name is already taken by another registration (it is never replaced).
    """
    global _DONE
    with _LOCK:
        if _DONE:  # later calls never undo a replace=True made after the first one
            return
        known = set(registry.models())
        for name, (factory, loader, merger) in BUILTIN_MODELS.items():
            if name in known:
                spec = registry.get_model(name)
                if (spec.factory, spec.loader, spec.merger) != (factory, loader, merger):
                    raise InvalidParameterError(
                        f"A model named {name!r} is already registered and is not the built-in one; prefstream never "
                        f"replaces it silently. Register your model under another name, or after "
                        f"stream.load_builtins() with replace=True.")
                continue
            registry.register_model(name, factory, loader, merger=merger)
        for model, methods in BUILTIN_EXPLAINERS.items():
            have = registry.explainers_for(model)
            for method, fn in methods.items():
                if method in have:
                    if have[method] is not fn:
                        raise InvalidParameterError(
                            f"Explainer {method!r} of {model!r} is already registered and is not the built-in one; "
                            "prefstream never replaces it silently. Register yours under another method name, or "
                            "after stream.load_builtins() with replace=True.")
                    continue
                registry.register_explainer(model, method, fn)
        _DONE = True
