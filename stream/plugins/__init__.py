"""The built-in plug-ins: what joins each learner and explainer to the workers' registry.

One module per learner family holds its factory, its loader, its merge rule (decided once,
next to the learner) and its explainer adapters; the concepts they share have a module each::

    linear.py      linear-bt:  LinearBT, linear-shapley
    capacity.py    capacity:   CapacityRDA / CapacityFOBOS, capacity indices, ShaRP, Bernoulli values
    gpm.py         gpm, cgpm:  RefittingGPM / RefittingCGPM, Pref-SHAP, Bernoulli values
    gpm_merge.py   the count-weighted GPM ensemble that merges per-partition GPMs
    sessions.py    categorical distributional values of a click session (capacity and gpm)
    budgets.py     explanation budgets (exact up to EXACT_MAX_PLAYERS players, then sampled to a target
                   standard error) and the caps of every explainer call (fn.max_batch, fn.budget_s)
    groups.py      one-hot feature groups as players
    common.py      construct a learner with a clear error; tile a model-level explanation

Nothing here registers anything: :func:`stream.models.register_all` (exported as
``stream.load_builtins``) is the one place that imports the registry and registers the
built-ins, and the entry points (the CLI, :func:`stream.batch.run_batch`) call it. Importing a
module of this package imports neither torch nor matplotlib: learners and explainers are
imported inside the adapters.
"""
