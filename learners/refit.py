"""Online wrapper that keeps a window of recent pairs and periodically refits a GPM / C-GPM.

Issue 4 item 5. The stream worker calls :meth:`RefittingGPM.learn_one` for each event (cheap: the
pair is appended to a bounded sliding window or reservoir and the progressive log loss is fed to
river's ``drift.ADWIN``), asks :meth:`RefittingGPM.wants_refit` (cheap) and, when true, runs
:meth:`RefittingGPM.refit` in an executor thread. ``refit`` copies the window under a lock, fits a
fresh :class:`learners.gpm.GPM` (or :class:`learners.gpm.CGPM`) in the calling thread — on CUDA when
``torch.cuda.is_available()`` — and swaps it in atomically; ``learn_one`` / ``margin_one`` keep
working meanwhile with the previous model. Before the first fit the margin is 0.0 (p = ½).

Triggers (any of): ``refit_every`` events since the last refit started; ``refit_interval_s``
seconds since the last refit completed; ADWIN (Bifet & Gavaldà 2007) detecting a change in the progressive (prequential) log loss
``−log σ(y g)`` of the current model. The first fit happens once the window holds ``min_train``
strict (y ≠ 0) pairs.

Batches: :meth:`RefittingGPM.learn_many` appends a whole batch (one kernel block for the
progressive losses) and the worker checks the refit trigger once per batch;
:meth:`RefittingGPM.margin_many` predicts a batch with one kernel block against the Nyström centres.

The window itself is :class:`learners.pair_window.PairWindow`; the fit of a copied window (in a
thread or another process) is :mod:`learners.refit_jobs`.

Indifferent outcomes (y = 0) are counted but not stored (the GPM likelihood has no draws);
``weight`` is accepted for API compatibility and ignored (documented limitation).
"""

from __future__ import annotations

import math
import threading
import time
from typing import Mapping, Sequence

import numpy as np

from learners.base import PreferenceLearner, check_outcome, dict_to_array
from learners.exceptions import InvalidInputError, NotFittedError, SnapshotError, check_param
from learners.pair_window import WINDOWS, PairWindow
from learners.refit_jobs import DEFAULT_MODEL_PARAMS, fit_job, fit_window, refit_process_init

# fit_window / refit_process_init live in learners.refit_jobs and are re-exported here
__all__ = ["RefittingCGPM", "RefittingGPM", "fit_window", "refit_process_init"]


class RefittingGPM(PreferenceLearner):
    """A GPM refitted on a bounded window of recent pairs (C-GPM when ``context_names`` is given).

    Parameters
    ----------
    feature_names : sequence of str
        Item features, in array column order.
    context_names : sequence of str, optional
        Context features; when given the model is a C-GPM and ``model_name`` is ``"cgpm"``.
    window_size : int, default=5000
        Maximum number of stored pairs.
    window : {"sliding", "reservoir"}, default="sliding"
        Keep the most recent pairs, or a uniform reservoir sample of all pairs (Vitter's algorithm R).
    refit_every : int or None, default=1000
        Refit after this many events (None: never by count).
    refit_interval_s : float or None, default=None
        Refit when this many seconds passed since the last refit (None: never by time).
    drift : bool, default=True
        Refit when ADWIN fires on the progressive log loss.
    adwin_delta : float, default=0.002
        ADWIN confidence parameter.
    min_train : int, default=50
        Strict pairs needed before the first fit.
    model_params : dict, optional
        Keyword arguments of :class:`learners.gpm.GPM` (defaults: a 4 × 3 hold-out grid, ≤ 1000 centres).
    reselect_every : int, default=1
        Search the hyper-parameter grid on every ``reselect_every``-th refit (and on the first and
        every drift-triggered one); the refits in between fit at the last selected penalty,
        length-scale multiplier and item constant on the whole window. 1: search on every refit.
        A search fits the whole grid (48 points at the defaults, ~40 CPU-seconds on a 3,000-pair
        window of 26 features), a fixed refit one point.
    device : str, optional
        Torch device of the refit; None → "cuda" if available else "cpu".
    seed : int, default=0

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> m = RefittingGPM(["a"], refit_every=100, min_train=100)
    >>> for _ in range(100):
    ...     xl, xr = {"a": rng.normal()}, {"a": rng.normal()}
    ...     m.learn_one(xl, xr, 1 if xl["a"] > xr["a"] else -1)
    >>> m.margin_one({"a": 1.0}, {"a": -1.0})
    0.0
    >>> m.wants_refit()
    True
    >>> info = m.refit()
    >>> m.margin_one({"a": 1.0}, {"a": -1.0}) > 0
    True
    """

    model_name = "gpm"

    @property
    def refit_function(self):
        """Picklable ``job -> fitted state`` of the refit protocol (:meth:`refit_begin`, :func:`fit_window`,
        :meth:`refit_finish`), runnable in another process."""
        return fit_window

    def __init__(self, feature_names: Sequence[str], context_names: Sequence[str] | None = None, window_size: int = 5000,
                 window: str = "sliding", refit_every: int | None = 1000, refit_interval_s: float | None = None,
                 drift: bool = True, adwin_delta: float = 0.002, min_train: int = 50, model_params: dict | None = None,
                 device: str | None = None, seed: int = 0, reselect_every: int = 1):
        self.feature_names_in = list(feature_names)
        self.context_names = None if context_names is None else list(context_names)
        self.window_size = window_size
        self.window = window
        self.refit_every = refit_every
        self.refit_interval_s = refit_interval_s
        self.drift = drift
        self.adwin_delta = adwin_delta
        self.min_train = min_train
        self.model_params = model_params
        self.device = device
        self.seed = seed
        self.reselect_every = reselect_every
        o = type(self).__name__
        check_param(o, "feature_names", feature_names, len(self.feature_names_in) > 0 and len(set(self.feature_names_in)) == len(self.feature_names_in), "a non-empty list of distinct names")
        check_param(o, "window_size", window_size, isinstance(window_size, int) and window_size >= 2, "an int >= 2")
        check_param(o, "window", window, window in WINDOWS, "one of 'sliding', 'reservoir'")
        check_param(o, "refit_every", refit_every, refit_every is None or (isinstance(refit_every, int) and refit_every >= 1), "None or an int >= 1")
        check_param(o, "refit_interval_s", refit_interval_s, refit_interval_s is None or refit_interval_s > 0, "None or a float in (0, inf)")
        check_param(o, "min_train", min_train, isinstance(min_train, int) and 2 <= min_train <= window_size, "an int in [2, window_size]")
        check_param(o, "adwin_delta", adwin_delta, 0 < adwin_delta < 1, "a float in (0, 1)")
        check_param(o, "reselect_every", reselect_every, isinstance(reselect_every, int) and reselect_every >= 1, "an int >= 1")
        if self.context_names is not None:
            self.model_name = "cgpm"
        self._d = len(self.feature_names_in)
        self._p = 0 if self.context_names is None else len(self.context_names)
        self._lock = threading.Lock()
        self._rng = np.random.default_rng(seed)
        self._window = PairWindow(window_size, self._d, self._p, window, self._rng)
        self._n_seen = 0
        self._since = 0
        self._last_refit_t = time.monotonic()
        self._drift_flag = False
        self._refitting = False
        self._model = None
        self._version = 0
        self._fixed_refits = 0  # refits at the last selected hyper-parameters since the last search
        self._adwin = self._new_adwin()
        self._loss_sum, self._loss_n = 0.0, 0
        self.last_refit_info: dict | None = None
        self._last_margins = None

    # ------------------------------------------------------------ helpers
    def _new_adwin(self):
        from river import drift

        return drift.ADWIN(delta=self.adwin_delta)

    @property
    def feature_names(self) -> list[str]:
        return list(self.feature_names_in)

    @property
    def model(self):
        """The current fitted :class:`~learners.gpm.GPM` / :class:`~learners.gpm.CGPM`, or None before the first fit."""
        return self._model

    @property
    def model_version(self) -> int:
        """Number of completed refits (0 before the first)."""
        return self._version

    @property
    def n_window(self) -> int:
        return self._window.len

    @property
    def n_seen(self) -> int:
        return self._n_seen

    @property
    def progressive_log_loss(self) -> float:
        """Mean prequential log loss of the current models on strict events (nan before any)."""
        return self._loss_sum / self._loss_n if self._loss_n else float("nan")

    def _arrays(self, x_left, x_right, context):
        o = type(self).__name__
        xl = dict_to_array(x_left, self.feature_names_in, o)
        xr = dict_to_array(x_right, self.feature_names_in, o)
        if self._p:
            if context is None:
                raise InvalidInputError(f"{o} ({self.model_name}) needs a context dict with keys {self.context_names}.")
            u = dict_to_array(context, self.context_names, o)
        else:
            u = np.zeros(0)
        return xl, xr, u

    def _margin(self, model, xl, xr, u) -> float:
        if model is None:
            return 0.0
        if self._p:
            return float(model.decision_function(xl[None], xr[None], u[None])[0])
        return float(model.decision_function(xl[None], xr[None])[0])

    # ------------------------------------------------------------ learner API
    def learn_one(self, x_left: Mapping[str, float], x_right: Mapping[str, float], y: int,
                  context: Mapping[str, float] | None = None, weight: float = 1.0) -> None:
        """Append one pair to the window and update the progressive loss / drift detector.

        Raises
        ------
        InvalidInputError
            Missing or non-finite features, missing context for a C-GPM, outcome outside {+1, −1, 0}.
        """
        y = check_outcome(y, type(self).__name__)
        xl, xr, u = self._arrays(x_left, x_right, context)
        self._n_seen += 1
        self._since += 1
        if y == 0:
            return
        model = self._model
        if model is not None:
            g = self._margin(model, xl, xr, u)
            loss = min(10.0, float(np.logaddexp(0.0, -y * g)))
            self._loss_sum += loss
            self._loss_n += 1
            if self.drift:
                self._adwin.update(loss)
                if self._adwin.drift_detected:
                    self._drift_flag = True
        with self._lock:
            self._window.append(xl[None], xr[None], u[None], np.array([float(y)]))

    def _check_many(self, X_left, X_right, context):
        """Float arrays (n, d), (n, d), (n, p) of a batch, checked like :meth:`_arrays` checks a row."""
        o = type(self).__name__
        XL = np.asarray(X_left, dtype=np.float64)
        XR = np.asarray(X_right, dtype=np.float64)
        if XL.ndim != 2 or XL.shape != XR.shape or XL.shape[1] != self._d:
            raise InvalidInputError(f"{o}: X_left and X_right must both have shape (n, {self._d}) with columns "
                                    f"{self.feature_names_in}; got {XL.shape} and {XR.shape}.")
        n = XL.shape[0]
        if self._p:
            if context is None:
                raise InvalidInputError(f"{o} ({self.model_name}) needs a context array with columns {self.context_names}.")
            U = np.asarray(context, dtype=np.float64)
            if U.shape != (n, self._p):
                raise InvalidInputError(f"{o}: context must have shape ({n}, {self._p}); got {U.shape}.")
        else:
            U = np.zeros((n, 0))
        if not (np.isfinite(XL).all() and np.isfinite(XR).all() and np.isfinite(U).all()):
            raise InvalidInputError(f"{o}: features and context must be finite (no NaN or inf).")
        return XL, XR, U

    def _margins(self, model, XL, XR, U) -> np.ndarray:
        if model is None:
            return np.zeros(XL.shape[0])
        if self._p:
            return np.asarray(model.decision_function(XL, XR, U), dtype=np.float64)
        return np.asarray(model.decision_function(XL, XR), dtype=np.float64)

    def margin_many(self, X_left, X_right, context=None) -> np.ndarray:
        """Margins of a batch from the current fitted model (zeros before the first fit).

        One kernel block K(batch, Nyström centres) @ α (:meth:`learners.gpm.GPM.decision_function`),
        so equal to the :meth:`margin_one` loop up to floating-point summation order.
        """
        XL, XR, U = self._check_many(X_left, X_right, context)
        if XL.shape[0] == 0:
            return np.zeros(0)
        model = self._model
        g = self._margins(model, XL, XR, U)
        # the worker predicts a batch, then learns the same arrays: learn_many reuses these margins
        # (references, not ids, so a later array can never be mistaken for these)
        self._last_margins = (XL, XR, U if self._p else None, model, g)
        return g

    def predict_proba_many(self, X_left, X_right, context=None) -> np.ndarray:
        """P(left preferred) for a batch (one kernel block).

        Raises
        ------
        NotFittedError
            Before the first refit, as :meth:`predict_proba_one`.
        """
        if self._model is None:
            raise NotFittedError(f"{type(self).__name__} has not been refitted yet ({self._window.len} pairs stored, "
                                 f"min_train={self.min_train}).")
        return super().predict_proba_many(X_left, X_right, context)

    def learn_many(self, X_left, X_right, y, context=None, weight=None) -> None:
        """Append a batch to the window; equal to the :meth:`learn_one` loop.

        The progressive losses of the whole batch come from one kernel block against the current
        model (the model does not change inside a batch: refits are separate calls, and the worker
        asks :meth:`wants_refit` once per batch). ADWIN sees the losses in row order. The sliding
        window is written with one fancy-indexed assignment; the reservoir draws its random slots
        row by row in the loop's order (:meth:`learners.pair_window.PairWindow.append`). ``weight`` is checked and ignored, as in :meth:`learn_one`.

        Raises
        ------
        InvalidInputError
            Shapes, NaN/inf, outcomes outside {+1, −1, 0}, missing context; nothing is learned then.
        """
        o = type(self).__name__
        XL, XR, U = self._check_many(X_left, X_right, context)
        n = XL.shape[0]
        Y = np.asarray(y)
        if Y.shape != (n,) or Y.dtype == bool or Y.dtype.kind not in "iuf" or not np.isin(Y, (-1, 0, 1)).all():
            raise InvalidInputError(f"{o}: y must have shape ({n},) with values in {{+1, -1, 0}}.")
        if weight is not None:
            W = np.asarray(weight, dtype=np.float64)
            if W.shape != (n,) or not (np.isfinite(W).all() and (W > 0).all()):
                raise InvalidInputError(f"{o}: weight must be {n} finite floats > 0.")
        self._n_seen += n
        self._since += n
        strict = Y != 0
        model = self._model
        last, self._last_margins = self._last_margins, None
        g = None
        if model is not None and last is not None and last[0] is X_left and last[1] is X_right \
                and (last[2] is context or not self._p) and last[3] is model:
            g = last[4][strict]
        XL, XR, U, Y = XL[strict], XR[strict], U[strict], Y[strict].astype(np.float64)
        k = Y.shape[0]
        if k == 0:
            return
        if model is not None:
            if g is None:
                g = self._margins(model, XL, XR, U)
            losses = np.minimum(10.0, np.logaddexp(0.0, -Y * g))
            self._loss_sum += float(losses.sum())
            self._loss_n += k
            if self.drift:
                adwin = self._adwin
                for v in losses.tolist():
                    adwin.update(v)
                    if adwin.drift_detected:
                        self._drift_flag = True
        with self._lock:
            self._window.append(XL, XR, U, Y)

    def margin_one(self, x_left, x_right, context=None) -> float:
        """g(x_left, x_right[, context]) from the current fitted model; 0.0 before the first fit."""
        xl, xr, u = self._arrays(x_left, x_right, context)
        return self._margin(self._model, xl, xr, u)

    def predict_proba_one(self, x_left, x_right, context=None) -> dict[int, float]:
        """``{+1: σ(g), -1: 1 − σ(g)}`` from the current fitted model.

        Raises
        ------
        NotFittedError
            Before the first refit: there is no probability to report yet (the worker's progressive
            validation skips such events instead of scoring a constant 0.5).
        """
        if self._model is None:
            raise NotFittedError(f"{type(self).__name__} has not been refitted yet ({self._window.len} pairs stored, "
                                 f"min_train={self.min_train}).")
        return super().predict_proba_one(x_left, x_right, context)

    # ------------------------------------------------------------ refit protocol
    def wants_refit(self) -> bool:
        """True when a refit is due (count, time or drift trigger) and enough strict pairs are stored."""
        if self._refitting or self._window.len < self.min_train:
            return False
        if self._model is None:
            return True
        if self.refit_every is not None and self._since >= self.refit_every:
            return True
        if self.refit_interval_s is not None and time.monotonic() - self._last_refit_t >= self.refit_interval_s:
            return True
        return bool(self._drift_flag)

    def _resolve_device(self) -> str:
        if self.device is not None:
            return self.device
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"

    def refit(self) -> dict:
        """Fit a fresh model on a copy of the window and swap it in atomically.

        Equal to ``refit_finish(job, fit_window(job))`` with ``job = refit_begin()``; the worker
        may run :func:`fit_window` in another process instead (see :meth:`refit_begin`).

        Returns
        -------
        dict
            ``duration_s`` (float, s), ``n_train`` (int), ``val_auc`` (float, hold-out AUC of the
            selected model), ``device`` (str), ``model_version`` (int), ``penalty``, ``multiplier``, ``item_constant``,
            ``trigger`` ("first", "count", "time" or "drift").
        """
        job = self.refit_begin()
        try:
            model = fit_job(job)
        except BaseException:
            self.refit_abort()
            raise
        return self.refit_finish(job, model)

    def refit_begin(self) -> dict:
        """First step of a refit: copy the window (under the lock) into a picklable job.

        ``fit_window(job)`` (module function, pure: arrays in, state dict out) can then run in
        a thread or another process, and :meth:`refit_finish` installs its result; call
        :meth:`refit_abort` if it fails. Learning goes on meanwhile.
        """
        XL, XR, U, y, trigger = self._claim_window(chronological=False)
        return self._job(XL, XR, U, y, trigger)

    def _claim_window(self, chronological: bool) -> tuple:
        """Start a refit: mark it running, copy the window (oldest first if ``chronological`` and
        sliding), name the trigger and reset the triggers; ``(XL, XR, U, y, trigger)``."""
        with self._lock:
            self._refitting = True
            XL, XR, U, y = self._window.arrays() if chronological else self._window.copy()
            trigger = ("first" if self._model is None else "drift" if self._drift_flag else
                       "count" if self.refit_every is not None and self._since >= self.refit_every else "time")
            self._since = 0
            self._drift_flag = False
            self._last_refit_t = time.monotonic()
        return XL, XR, U, y, trigger

    def _job(self, XL, XR, U, y, trigger: str, search: bool | None = None) -> dict:
        """The picklable refit job of these pairs (model parameters from this learner and its current model)."""
        device = self._resolve_device()
        params = dict(DEFAULT_MODEL_PARAMS)
        params.update(self.model_params or {})
        params.setdefault("dtype", "float32" if device.startswith("cuda") else "float64")
        params["device"] = device
        params["seed"] = int(self.seed) + self._version
        model = self._model
        if search is None:
            search = model is None or trigger == "drift" or self._fixed_refits >= self.reselect_every - 1
        if not search:  # refit at the selected point (GPM.fit searches nothing when none is "auto")
            params.update(penalty=float(model.penalty_), lengthscale_multiplier=float(model.multiplier_),
                          item_constant=float(getattr(model, "item_constant_", 0.0)))
        return {"XL": XL, "XR": XR, "U": U, "y": y, "feature_names": self.feature_names_in,
                "context_names": self.context_names if self._p else None, "params": params, "trigger": trigger,
                "t0": time.perf_counter(), "device": device, "searched": bool(search)}

    def refit_abort(self) -> None:
        """Forget a refit started with :meth:`refit_begin` that will not finish."""
        self._refitting = False

    def refit_finish(self, job: dict, fitted) -> dict:
        """Install the model fitted for ``job`` (a model, or the state dict :func:`fit_window` returns).

        Returns the dict of :meth:`refit`.
        """
        from learners.gpm import _PairModel

        try:
            model = _PairModel.from_state(fitted, device=job["device"]) if isinstance(fitted, dict) else fitted
            model.model_version = self._version + 1
            with self._lock:
                self._model = model  # atomic reference swap
                self._version += 1
                self._last_refit_t = time.monotonic()  # time trigger counts from the completed refit
                self._adwin = self._new_adwin()
                self._fixed_refits = 0 if job.get("searched", True) else self._fixed_refits + 1
        finally:
            self._refitting = False
        auc = float(model.val_auc_)
        info = {"duration_s": time.perf_counter() - job["t0"], "n_train": int(model.n_train_),
                "val_auc": auc if math.isfinite(auc) else None, "searched": bool(job.get("searched", True)),
                "device": job["device"], "model_version": self._version,
                "penalty": float(model.penalty_), "multiplier": float(model.multiplier_),
                "item_constant": float(getattr(model, "item_constant_", 0.0)), "trigger": job["trigger"]}
        self.last_refit_info = info
        return info

    # ------------------------------------------------------------ state
    def _params(self) -> dict:
        return {"window_size": self.window_size, "window": self.window, "refit_every": self.refit_every,
                "refit_interval_s": self.refit_interval_s, "drift": self.drift, "adwin_delta": self.adwin_delta,
                "min_train": self.min_train, "model_params": _jsonable(self.model_params), "device": self.device,
                "seed": self.seed, "reselect_every": self.reselect_every}

    def state_dict(self) -> dict:
        """Meta (names, parameters, counters, fitted model meta) and float32 arrays (model + window).

        The window is included so a restored learner can keep refitting; arrays are float32, so a
        5000-pair window of 20 features plus 1000 centres takes well under 8 MB.
        """
        with self._lock:
            XL, XR, U, y = self._window.arrays()
            arrays = {"window_left": XL.astype(np.float32), "window_right": XR.astype(np.float32),
                      "window_context": U.astype(np.float32), "window_y": y.astype(np.int8)}
            model = self._model
        meta = {"model_name": self.model_name, "feature_names": self.feature_names, "context_names": self.context_names,
                "params": self._params(), "model_version": self._version, "n_seen": self._n_seen,
                "n_strict": self._window.n_offered, "fitted": model is not None, "model": None,
                "fixed_refits": self._fixed_refits}
        if model is not None:
            ms = model.state_dict(float32=True)
            meta["model"] = ms["meta"]
            arrays.update({"model." + k: v for k, v in ms["arrays"].items()})
        return {"meta": meta, "arrays": arrays}

    @classmethod
    def from_state(cls, state: dict) -> "RefittingGPM":
        """Rebuild from :meth:`state_dict` output (model, window and counters).

        Raises
        ------
        SnapshotError
            If the state is not a RefittingGPM state.
        """
        from learners.gpm import _PairModel

        try:
            meta, arr = state["meta"], state["arrays"]
            if meta.get("model_name") not in ("gpm", "cgpm"):
                raise SnapshotError(f"State holds model {meta.get('model_name')!r}, not 'gpm'/'cgpm'.")
            p = dict(meta["params"])
            klass = RefittingCGPM if meta["context_names"] is not None else RefittingGPM
            obj = klass(meta["feature_names"], meta["context_names"], **p)
            obj._window.restore(arr["window_left"], arr["window_right"], arr["window_context"] if obj._p else None,
                                arr["window_y"], meta["n_strict"])
            obj._n_seen = int(meta["n_seen"])
            obj._version = int(meta["model_version"])
            obj._fixed_refits = int(meta.get("fixed_refits", 0))  # older snapshots: count from 0
            if meta["fitted"]:
                marr = {k[len("model."):]: v for k, v in arr.items() if k.startswith("model.")}
                obj._model = _PairModel.from_state({"meta": meta["model"], "arrays": marr})
        except SnapshotError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise SnapshotError(f"Not a RefittingGPM state dict: missing or malformed entry {exc}.") from None
        return obj


class RefittingCGPM(RefittingGPM):
    """:class:`RefittingGPM` for context-dependent preferences (C-GPM); ``context_names`` is required."""

    model_name = "cgpm"

    def __init__(self, feature_names: Sequence[str], context_names: Sequence[str], **kwargs):
        check_param("RefittingCGPM", "context_names", context_names, context_names is not None and len(context_names) > 0, "a non-empty list of context feature names")
        super().__init__(feature_names, context_names, **kwargs)


def _jsonable(d):
    if d is None:
        return None
    out = {}
    for k, v in d.items():
        if isinstance(v, tuple):
            v = list(v)
        if isinstance(v, float) and not math.isfinite(v):
            v = None
        out[k] = v
    return out
