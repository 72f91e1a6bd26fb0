"""The demo's configuration: model parameters per data set and the settings file the workers read.

Examples
--------
>>> import tempfile, pathlib
>>> p = write_settings_toml(pathlib.Path(tempfile.mkdtemp()) / "demo.toml",
...                         {"models": ["capacity"], "model_params": {"capacity": {"scaler": "minmax"}}})
>>> print(p.read_text(), end="")
models = ["capacity"]
<BLANKLINE>
[model_params."capacity"]
scaler = "minmax"
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from learners.exceptions import InvalidParameterError

__all__ = ["TARGET_EXPLAINED_EVENTS", "default_model_params", "default_sample_rate", "write_settings_toml"]

#: Explanations the default sample rate aims at.
TARGET_EXPLAINED_EVENTS = 60
#: click sessions the demo's default sample rate explains at least (after the warm-up)
MIN_EXPLAINED_SESSIONS = 3


def default_model_params(ds, models: list[str], gpm_params: dict | None = None) -> dict[str, dict]:
    """Constructor parameters of the demo's models for data set ``ds``.

    Parameters
    ----------
    ds : PairwiseDataset or ClickLog
    models : list of str
        Among ``"capacity"``, ``"capacity-personal"`` (its population as ``"capacity"``), ``"gpm"``, ``"cgpm"``.
    gpm_params : dict, optional
        Overrides of the GPM/C-GPM parameters.

    Returns
    -------
    dict
        ``{model: {param: value}}`` for :attr:`stream.settings.Settings.model_params`.

    Notes
    -----
    The capacity model is the stream default :class:`learners.capacity_stream.CapacityLogistic`
    (logistic loss, AdaGrad, online standardisation, interactions penalised by c(|S| − 1)/√t;
    chosen on the real data sets by bench/quality_real.py, see docs/capacity.md); criteria whose
    ``criteria_directions`` is −1 are flipped (``decreasing``); up to 7 criteria the full capacity
    (2^n − 1 masses, ``k_additive = n``) is learned, beyond that a 2-additive one (measured: the
    full model gains up to 0.04 AUC on CEMS and loses 0.008 on the 10-criteria MCDA set swd). The
    paper's RDA / ADMM-RDA (Herin, Perny & Sokolovska 2024) stays available with ``algorithm="rda"``.

    Examples
    --------
    >>> from stream.adapters import load_dataset
    >>> p = default_model_params(load_dataset("train"), ["capacity", "gpm"])
    >>> p["capacity"]["k_additive"], p["capacity"]["decreasing"], p["gpm"]["refit_every"]
    (4, ['price', 'time', 'change', 'comfort'], 500)
    """
    names = list(ds.feature_names)
    dirs = getattr(ds, "criteria_directions", None) or {}
    out: dict[str, dict] = {}
    capacity = {"decreasing": [c for c in names if dirs.get(c, 1) < 0],
                "k_additive": len(names) if len(names) <= 7 else 2}   # k = n: the full model
    if "capacity" in models:
        out["capacity"] = dict(capacity)
    if "capacity-personal" in models:   # the same population, plus a deviation per person (docs/personal.md)
        out["capacity-personal"] = {"population": dict(capacity)}
    # a hyper-parameter search on every 5th refit (and the first): the 48-point grid took ~40 CPU-seconds
    # on a 3,000-pair window, so at refit_every=500 no refit finished while a worker caught up
    base = {"refit_every": 500, "min_train": 200, "window_size": 3000, "window": "sliding", "drift": False,
            "reselect_every": 5}
    base.update(gpm_params or {})
    for m in ("gpm", "cgpm"):
        if m in models:
            out[m] = dict(base)
    # TOML has no null: drop None values (= the constructor default)
    return {m: {k: v for k, v in p.items() if v is not None} for m, p in out.items()}


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise InvalidParameterError(f"Cannot write {v!r} ({type(v).__name__}) to a TOML settings file.")


def write_settings_toml(path: Path, values: dict[str, Any]) -> Path:
    """Write a flat settings mapping (``model_params`` as tables) to a TOML file."""
    lines = []
    tables = {}
    for k, v in values.items():
        if v is None:
            continue
        if k == "model_params":
            tables = v
            continue
        lines.append(f"{k} = {_toml_value(v)}")
    for model, params in tables.items():
        lines.append("")
        lines.append(f"[model_params.{json.dumps(model)}]")
        for k, v in params.items():
            if v is not None:
                lines.append(f"{k} = {_toml_value(v)}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path



def default_sample_rate(n_pref: int, target: int = TARGET_EXPLAINED_EVENTS, late_sessions=(),
                        min_sessions: int = MIN_EXPLAINED_SESSIONS) -> float:
    """Fraction of ``n_pref`` preference events to explain so that about ``target`` are explained,
    raised (up to 0.2) until at least ``min_sessions`` of ``late_sessions`` are in the sample.

    The explainer samples by a hash of the id (:meth:`stream.workers.explainer.ExplainerCore.sampled`:
    ``event_hash(id) < rate · 2⁶⁴``), so which click sessions a rate explains is known here: the
    demo passes the ids of the sessions replayed after its warm-up (explained once a model exists),
    and the session-only methods (distributional-categorical) then have records — at the
    preference rate alone the bundled train set's 292 sessions gave one, in the warm-up.

    Examples
    --------
    >>> round(default_sample_rate(2929), 4)
    0.0205
    >>> default_sample_rate(10)
    1.0
    >>> ids = [f"s{i}" for i in range(200)]
    >>> r = default_sample_rate(2929, late_sessions=ids)
    >>> from stream.workers._snapshot import event_hash
    >>> bool(r >= default_sample_rate(2929) and sum(event_hash(i) < r * 2.0**64 for i in ids) >= 3)
    True
    """
    rate = float(min(1.0, max(0.002, target / max(n_pref, 1))))
    if min_sessions and late_sessions:
        from stream.workers._snapshot import event_hash

        hashes = sorted(event_hash(str(i)) for i in late_sessions)
        k = min(min_sessions, len(hashes)) - 1
        rate = max(rate, min(0.2, (hashes[k] + 1) / 2.0**64))
    return rate
