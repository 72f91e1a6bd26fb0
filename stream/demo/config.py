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


def default_model_params(ds, models: list[str], gpm_params: dict | None = None) -> dict[str, dict]:
    """Constructor parameters of the demo's models for data set ``ds``.

    Parameters
    ----------
    ds : PairwiseDataset or ClickLog
    models : list of str
        Among ``"capacity"``, ``"gpm"``, ``"cgpm"``.
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
    if "capacity" in models:
        out["capacity"] = {"decreasing": [c for c in names if dirs.get(c, 1) < 0],
                           "k_additive": len(names) if len(names) <= 7 else 2}   # k = n: the full model
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



def default_sample_rate(n_pref: int, target: int = TARGET_EXPLAINED_EVENTS) -> float:
    """Fraction of ``n_pref`` preference events to explain so that about ``target`` are explained.

    Examples
    --------
    >>> round(default_sample_rate(2929), 4)
    0.0205
    >>> default_sample_rate(10)
    1.0
    """
    return float(min(1.0, max(0.002, target / max(n_pref, 1))))
