"""One result object for every prefstream explainer.

:class:`Explanation` plays the role of ``shap.Explanation`` / ``shapiq.InteractionValues``:
it holds attributions for one or several explained instances, with the base value, the model
output, feature names, the method that produced them and the model version they came from.
It serialises to the *explanation record* of the event contract
(``stream/schemas/explanation.v1.json``) with :meth:`Explanation.to_records` and back with
:meth:`Explanation.from_record`.

Additivity convention (checked by every explainer's tests)::

    base_values + values.sum(axis=-1) == prediction        (efficiency)

for methods where it holds (Shapley-type values). Distributional values keep their
per-player distributions in ``extra``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from learners.exceptions import InvalidInputError

__all__ = ["Explanation"]

RECORD_SCHEMA_VERSION = 1


def _jsonable(obj: Any) -> Any:
    """Turn numpy scalars/arrays nested in dicts/lists into plain JSON types (non-finite floats: None).

    The common types are tested first, by exact type: a record's arrays (an interaction matrix is
    d² floats) are converted by ``ndarray.tolist`` in C when finite, and ``isinstance`` against the
    ``Mapping`` ABC — slow — is reached only by what is none of them. Before this, the records of a
    capacity-interaction call took ~60x the call itself (2.8 ms per Pokémon record, issue 29).
    """
    t = type(obj)
    if t is float:
        return obj if math.isfinite(obj) else None
    if t is np.ndarray:
        if obj.dtype.kind == "f" and not np.isfinite(obj).all():
            return _jsonable(obj.tolist())
        if obj.dtype.kind in "fiub":
            return obj.tolist()  # C: nested lists of Python floats / ints / bools
        return _jsonable(obj.tolist())
    if t is dict:
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if t is list or t is tuple:
        return [_jsonable(v) for v in obj]
    if t is str or t is int or t is bool or obj is None:
        return obj
    if isinstance(obj, np.ndarray):
        return _jsonable(np.asarray(obj))
    if isinstance(obj, (np.floating, float)):
        f = float(obj)
        return f if math.isfinite(f) else None
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj


@dataclass
class Explanation:
    """Attributions of one explainer for one or a batch of explained instances.

    Parameters
    ----------
    values : ndarray of shape (n_features,) or (n_instances, n_features), float64
        One attribution per feature (player) and instance.
    base_values : float or ndarray of shape (n_instances,)
        The value of the empty coalition, ν(∅) (or the reference QoI for ShaRP).
    feature_names : sequence of str, length n_features
    method : str
        Explanation method, e.g. ``"pref-shap"``, ``"sharp-rank"``, ``"distributional-bernoulli"``,
        ``"capacity-shapley"``, ``"linear-shapley"``.
    prediction : float or ndarray of shape (n_instances,), optional
        The model output being explained, ν(Ω); ``None`` if not meaningful.
    model_name, model_version : str, int
        Which snapshot of which model produced it (every record carries the version).
    data : ndarray of shape like ``values``, optional
        The explained feature values (for plots: e.g. x_winner − x_loser for Pref-SHAP).
    instance_ids : sequence of str, optional
        Event or request ids, one per instance.
    compute_time : float
        Wall-clock seconds spent computing the batch.
    extra : dict
        Method-specific fields (JSON-serialisable after numpy conversion), e.g.
        ``{"qoi": "rank", "interactions": [[...]]}``. A list or array with one entry per instance is split
        across the records; a tuple (or any other value) is shared by every record, so a per-feature vector
        whose length may equal the number of instances (a linear explainer's μ) is passed as a tuple.

    Raises
    ------
    InvalidInputError
        If the shapes of ``values``, ``feature_names`` and ``base_values`` disagree.

    Examples
    --------
    >>> e = Explanation(values=[0.5, -0.25], base_values=0.0, prediction=0.25,
    ...                 feature_names=["a", "b"], method="linear-shapley")
    >>> float(e.additivity_error()[0])
    0.0
    >>> e.to_records(instance_ids=["ev-1"])[0]["values"]
    [0.5, -0.25]
    """

    values: Any
    base_values: Any
    feature_names: Sequence[str]
    method: str
    prediction: Any = None
    model_name: str = ""
    model_version: int = 0
    data: Any = None
    instance_ids: Sequence[str] | None = None
    compute_time: float = 0.0
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.values = np.asarray(self.values, dtype=np.float64)
        if self.values.ndim not in (1, 2):
            raise InvalidInputError(
                f"Explanation.values must have shape (n_features,) or (n_instances, n_features); "
                f"got shape {self.values.shape}."
            )
        self.feature_names = [str(f) for f in self.feature_names]
        if self.values.shape[-1] != len(self.feature_names):
            raise InvalidInputError(
                f"Explanation has {self.values.shape[-1]} values per instance but "
                f"{len(self.feature_names)} feature names; pass one name per feature."
            )
        self.base_values = np.asarray(self.base_values, dtype=np.float64)
        if self.prediction is not None:
            self.prediction = np.asarray(self.prediction, dtype=np.float64)
        if self.data is not None:
            self.data = np.asarray(self.data, dtype=np.float64)

    # ------------------------------------------------------------------ views
    @property
    def n_instances(self) -> int:
        """Number of explained instances (1 for a 1-D ``values``)."""
        return 1 if self.values.ndim == 1 else self.values.shape[0]

    def _as_batch(self, a: np.ndarray | None) -> np.ndarray | None:
        if a is None:
            return None
        a = np.asarray(a, dtype=np.float64)
        return np.broadcast_to(a.reshape(-1) if a.ndim else a, (self.n_instances,)).copy()

    def additivity_error(self) -> np.ndarray:
        """|base + Σφ − prediction| per instance; ndarray of shape (n_instances,).

        Raises
        ------
        InvalidInputError
            If the explanation has no ``prediction``.
        """
        if self.prediction is None:
            raise InvalidInputError(f"The {self.method!r} explanation has no prediction to check.")
        v = self.values.reshape(self.n_instances, -1)
        return np.abs(self._as_batch(self.base_values) + v.sum(axis=1) - self._as_batch(self.prediction))

    def mean_abs(self) -> dict[str, float]:
        """Mean |φ| per feature over instances, sorted descending (for bar plots and summaries).

        Examples
        --------
        >>> e = Explanation(values=[[0.5, -2.0], [1.5, 0.0]], base_values=0.0, feature_names=["a", "b"], method="m")
        >>> e.mean_abs()
        {'a': 1.0, 'b': 1.0}
        """
        v = np.abs(self.values.reshape(self.n_instances, -1)).mean(axis=0)
        order = np.argsort(-v, kind="stable")
        return {self.feature_names[i]: float(v[i]) for i in order}

    def top_features(self, k: int = 3) -> list[str]:
        """The ``k`` features of largest mean |φ|.

        Examples
        --------
        >>> Explanation(values=[0.1, -3.0, 2.0], base_values=0.0, feature_names=["a", "b", "c"], method="m").top_features(2)
        ['b', 'c']
        """
        return list(self.mean_abs())[:k]

    def __getitem__(self, i: int) -> "Explanation":
        """The explanation of instance ``i`` (1-D values)."""
        if self.values.ndim == 1:
            if i not in (0, -1):
                raise IndexError(i)
            return self
        pick = lambda a: None if a is None else (a[i] if np.ndim(a) >= 1 and np.shape(a)[0] == self.n_instances else a)
        return Explanation(
            values=self.values[i], base_values=pick(self.base_values), feature_names=self.feature_names,
            method=self.method, prediction=pick(self.prediction), model_name=self.model_name,
            model_version=self.model_version, data=pick(self.data),
            instance_ids=None if self.instance_ids is None else [self.instance_ids[i]],
            compute_time=self.compute_time / self.n_instances,
            extra={k: pick(np.asarray(v)) if isinstance(v, (list, np.ndarray)) and np.shape(v)[:1] == (self.n_instances,) else v
                   for k, v in self.extra.items()},
        )

    @classmethod
    def concat(cls, parts: Sequence["Explanation"]) -> "Explanation":
        """Stack one-instance explanations of one method and feature set into a batch.

        ``values``/``data`` become (n, d) arrays, base values and predictions (n,) vectors, and each
        ``extra`` key present in every part a per-instance list; timings add up, the model version
        is the first part's.

        Raises
        ------
        InvalidInputError
            If ``parts`` is empty or the parts disagree on method or feature names.
        """
        if not parts:
            raise InvalidInputError("Explanation.concat needs at least one explanation.")
        first = parts[0]
        if any(p.method != first.method or list(p.feature_names) != list(first.feature_names) for p in parts):
            raise InvalidInputError("Explanation.concat stacks explanations of one method and one feature set only.")
        keys = set.intersection(*(set(p.extra) for p in parts))
        one = lambda a: float(np.asarray(a, dtype=np.float64).reshape(-1)[0])  # noqa: E731
        ids = [i for p in parts for i in (p.instance_ids or [])]
        return cls(
            values=np.stack([np.asarray(p.values).reshape(-1) for p in parts]),
            base_values=[one(p.base_values) for p in parts], feature_names=first.feature_names, method=first.method,
            prediction=None if any(p.prediction is None for p in parts) else [one(p.prediction) for p in parts],
            model_name=first.model_name, model_version=first.model_version,
            data=None if any(p.data is None for p in parts) else np.stack([np.asarray(p.data).reshape(-1) for p in parts]),
            instance_ids=ids if len(ids) == len(parts) else None,
            compute_time=sum(p.compute_time for p in parts), extra={k: [p.extra[k] for p in parts] for k in keys},
        )

    @classmethod
    def stack(cls, parts: Sequence["Explanation"]) -> "Explanation":
        """Stack explanations of consecutive batches of one method into one batch (rows in order).

        Per-instance arrays (values, base values, predictions, data and every ``extra`` entry whose
        first axis is the part's instance count) are concatenated; other ``extra`` entries are the
        first part's; timings add up.

        Examples
        --------
        >>> a = Explanation(values=[[1.0], [2.0]], base_values=0.0, feature_names=["x"], method="m", extra={"k": [1, 2]})
        >>> b = Explanation(values=[3.0], base_values=0.5, feature_names=["x"], method="m", extra={"k": [3]})
        >>> s = Explanation.stack([a, b])
        >>> s.values.ravel().tolist(), s.base_values.tolist(), s.extra["k"]
        ([1.0, 2.0, 3.0], [0.0, 0.0, 0.5], [1, 2, 3])
        """
        if len(parts) == 1:
            return parts[0]
        if not parts:
            raise InvalidInputError("Explanation.stack needs at least one explanation.")
        first = parts[0]
        ns = [p.n_instances for p in parts]

        def rows(a, k):                                   # a scalar base value stands for every row
            a = np.asarray(a, dtype=np.float64).reshape(-1)
            return a if a.size == k else np.broadcast_to(a, (k,))

        def per_row(key):
            vals = [p.extra.get(key) for p in parts]
            if any(v is None for v in vals) or not all(isinstance(v, (list, np.ndarray)) and len(v) == k
                                                       for v, k in zip(vals, ns)):
                return first.extra[key]
            if all(isinstance(v, list) for v in vals):
                return [x for v in vals for x in v]
            return np.concatenate([np.asarray(v) for v in vals])

        ids = [i for p in parts for i in (p.instance_ids or [])]
        return cls(
            values=np.concatenate([np.asarray(p.values).reshape(k, -1) for p, k in zip(parts, ns)]),
            base_values=np.concatenate([rows(p.base_values, k) for p, k in zip(parts, ns)]),
            feature_names=first.feature_names, method=first.method,
            prediction=None if any(p.prediction is None for p in parts) else
            np.concatenate([rows(p.prediction, k) for p, k in zip(parts, ns)]),
            model_name=first.model_name, model_version=first.model_version,
            data=None if any(p.data is None for p in parts) else
            np.concatenate([np.asarray(p.data).reshape(k, -1) for p, k in zip(parts, ns)]),
            instance_ids=ids if len(ids) == sum(ns) else None,
            compute_time=sum(p.compute_time for p in parts), extra={k: per_row(k) for k in first.extra},
        )

    # -------------------------------------------------------------- records
    def to_records(self, instance_ids: Sequence[str] | None = None) -> list[dict]:
        """Explanation records (one per instance) in the event contract's format.

        Parameters
        ----------
        instance_ids : sequence of str, optional
            Event or request ids; defaults to ``self.instance_ids`` or ``"0", "1", …``.

        Returns
        -------
        list of dict
            JSON-serialisable dicts validating against ``explanation.v1.json``.
        """
        n = self.n_instances
        ids = list(instance_ids or self.instance_ids or [str(i) for i in range(n)])
        if len(ids) != n:
            raise InvalidInputError(f"Got {len(ids)} instance ids for {n} explained instances.")
        # Each field is converted once for the whole batch (arrays by ``tolist`` in C), then taken row by
        # row: the records equal those of ``self[i]`` one at a time (tests/test_explanation_records.py),
        # at a fraction of the cost — slicing a whole Explanation per record was a fifth of the explainer
        # worker's time at 1 % of 10,000 events/s (issue 29).
        one = self.values.ndim == 1
        per_row = lambda a: not one and np.ndim(a) >= 1 and np.shape(a)[0] == n  # noqa: E731 - self[i] takes a[i]

        def scalars(a):  # a scalar field (base value, prediction) per record: the first entry of what self[i] holds
            a = np.asarray(a, dtype=np.float64)
            return _jsonable(a.reshape(n, -1)[:, 0]) if per_row(a) else [_jsonable(a.reshape(-1)[0])] * n

        values = [_jsonable(self.values)] if one else _jsonable(self.values)
        base = scalars(self.base_values)
        pred = None if self.prediction is None else scalars(self.prediction)
        data = None if self.data is None else (_jsonable(self.data) if per_row(self.data) else
                                               [_jsonable(self.data)] * n)
        extra_rows, extra_shared = {}, {}
        for k, v in self.extra.items():
            if isinstance(v, (list, np.ndarray)) and per_row(v):
                extra_rows[k] = _jsonable(v) if isinstance(v, np.ndarray) else \
                    [_jsonable(np.asarray(x)) if isinstance(x, list) else _jsonable(x) for x in v]
            else:
                extra_shared[k] = _jsonable(v)
        names = list(self.feature_names)
        per = float(self.compute_time / max(n, 1))
        out = []
        for i, rid in enumerate(ids):
            extra = {k: (extra_rows[k][i] if k in extra_rows else extra_shared[k]) for k in self.extra}
            rec = {
                "schema_version": RECORD_SCHEMA_VERSION,
                "request_id": str(rid),
                "model_name": self.model_name,
                "model_version": int(self.model_version),
                "method": self.method,
                "feature_names": list(names),
                "values": values[i],
                "base_value": base[i],
                "prediction": None if pred is None else pred[i],
                "data": None if data is None else data[i],
                "extra": extra,
                "compute_time_s": per,
            }
            if "user_id" in extra:  # per-person explanations name the person at the top level too
                uid = self.extra["user_id"][i] if "user_id" in extra_rows else self.extra["user_id"]
                rec["user_id"] = uid[0] if isinstance(uid, (list, tuple)) and len(uid) == 1 else uid
            out.append(rec)
        return out

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> "Explanation":
        """Rebuild a one-instance :class:`Explanation` from an explanation record.

        Examples
        --------
        >>> e = Explanation(values=[[0.5, -2.0], [1.5, 0.0]], base_values=0.0, feature_names=["a", "b"], method="m")
        >>> back = Explanation.from_record(e.to_records(["r0", "r1"])[1])
        >>> back.values.tolist(), back.instance_ids
        ([1.5, 0.0], ['r1'])
        """
        try:
            return cls(
                values=record["values"], base_values=record["base_value"], feature_names=record["feature_names"],
                method=record["method"], prediction=record.get("prediction"), model_name=record.get("model_name", ""),
                model_version=int(record.get("model_version", 0)), data=record.get("data"),
                instance_ids=[record.get("request_id", "0")], compute_time=float(record.get("compute_time_s", 0.0)),
                extra=dict(record.get("extra") or {}),
            )
        except KeyError as exc:
            raise InvalidInputError(f"Explanation record lacks the field {exc.args[0]!r}.") from None

    def to_json(self) -> str:
        """All records as a JSON array string.

        Examples
        --------
        >>> import json
        >>> e = Explanation(values=[0.25], base_values=1.0, feature_names=["a"], method="m", prediction=1.25)
        >>> [(r["values"], r["base_value"], r["prediction"]) for r in json.loads(e.to_json())]
        [([0.25], 1.0, 1.25)]
        """
        return json.dumps(self.to_records())
