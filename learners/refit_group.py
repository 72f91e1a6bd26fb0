"""One refit over the windows of several :class:`~learners.refit.RefittingGPM` learners (one per partition).

Issue 30 item 2. The stream keeps one learner per input partition (its processing guarantee is per
partition, ``docs/workers.md``), so a GPM refitted per partition sees a third of a 3-partition stream,
chooses its own length-scales, scaler and item constant, and the parts cannot be pooled into one GPM of
Hu, Chau et al. (2022), Sec. 2 (the merge then served the biggest part alone). Here the owner of the
partitions (the learner worker) refits them **as one**:

* **Trigger** (:func:`group_wants_refit`): the triggers of :class:`~learners.refit.RefittingGPM`, counted
  over the group — ``min_train`` strict pairs stored in all windows together, ``refit_every`` events
  learned by all members since the last refit, the time trigger or an ADWIN drift flag of any member; and
  members holding different fits (restored after a rebalance). A member that starts learning after the
  group's fit takes that fit at once (:func:`group_adopt`), without a refit.
* **Fit** (:func:`group_refit_begin`): one job on the union of the windows. At most ``window_size`` pairs
  are taken (the most recent share of each sliding window, in proportion to its length), and the rows
  are put in a canonical order (lexicographic on the pair), so that the same stored pairs give the same
  job — the same model — whatever partitions they came through.
* **Install** (:func:`group_refit_finish`): every member gets the same fitted model, tagged with a
  ``fit_id`` (a digest of the job), which its snapshot carries. The merge of the served model
  (:func:`stream.plugins.gpm_merge.merge_gpm`) counts parts with one ``fit_id`` once: the served GPM is
  that fit, and the examples it represents are the members' total.

The members keep their own windows, counters, progressive losses and snapshots; only the fit is shared.
"""

from __future__ import annotations

import copy
import hashlib
import math
import time
from typing import Sequence

import numpy as np

from learners.refit_jobs import fit_job

__all__ = ["compatible", "group_adopt", "group_refit", "group_refit_abort", "group_refit_begin", "group_refit_finish",
           "group_wants_refit", "supports_group"]


def supports_group(learner) -> bool:
    """True for a learner that can take part in a group refit (a RefittingGPM / RefittingCGPM)."""
    from learners.refit import RefittingGPM

    return isinstance(learner, RefittingGPM)


def compatible(a, b) -> bool:
    """Whether ``a`` and ``b`` can share one fit (same class, feature and context names)."""
    return type(a) is type(b) and a.feature_names == b.feature_names and a.context_names == b.context_names


def _fit_ids(members) -> set:
    return {getattr(m.model, "fit_id", None) or id(m.model) for m in members if m.model is not None}


def group_wants_refit(members: Sequence) -> bool:
    """True when the group is due a refit (see the module docstring); the first member's parameters rule."""
    if not members or any(m._refitting for m in members):
        return False
    ref = members[0]
    stored = sum(m.n_window for m in members)
    if stored < ref.min_train:
        return False
    if all(m.model is None for m in members):
        return True
    if len(_fit_ids(members)) > 1:
        return True
    if ref.refit_every is not None and sum(m._since for m in members) >= ref.refit_every:
        return True
    if ref.refit_interval_s is not None and any(time.monotonic() - m._last_refit_t >= ref.refit_interval_s
                                                for m in members):
        return True
    return any(m._drift_flag for m in members)


def group_adopt(members: Sequence) -> list[int]:
    """Give every member without a model (and no refit running) the group's newest fit; their indices.

    The newest fit is the model of the member with the highest model version. Each adopting member
    counts it as its next version, as a refit would.
    """
    fitted = [m for m in members if m.model is not None]
    if not fitted:
        return []
    ref = max(fitted, key=lambda m: m.model_version).model
    out = []
    for k, m in enumerate(members):
        if m.model is None and not m._refitting:
            model = copy.copy(ref)
            with m._lock:
                model.model_version = m._version + 1
                m._model = model
                m._version += 1
                m._adwin = m._new_adwin()
            out.append(k)
    return out


def _canonical(XL, XR, U, y):
    """The rows sorted lexicographically on (left, right, context, outcome)."""
    if y.shape[0] < 2:
        return XL, XR, U, y
    keys = np.concatenate([XL, XR, U, y[:, None]], axis=1)
    order = np.lexsort(keys.T[::-1])
    return XL[order], XR[order], U[order], y[order]


def group_refit_begin(members: Sequence) -> dict:
    """Claim every member's window and build one job on their union (a :func:`learners.refit_jobs.fit_window` job).

    The job also carries ``"members"`` (how many) and ``"fit_id"``.
    """
    ref = max(members, key=lambda m: (m.model is not None, m.model_version))
    claimed = [m._claim_window(chronological=True) for m in members]
    triggers = [c[4] for c in claimed]
    trigger = next((t for t in ("first", "drift", "count", "time") if t in triggers), "count")
    lens = [c[3].shape[0] for c in claimed]
    total, cap = sum(lens), ref.window_size
    parts = []
    for (XL, XR, U, y, _), n in zip(claimed, lens):
        k = n if total <= cap else int(math.floor(cap * n / total))
        parts.append((XL[n - k:], XR[n - k:], U[n - k:], y[n - k:]))   # the most recent share (sliding)
    XL, XR, U, y = (np.concatenate([p[i] for p in parts]) for i in range(4))
    XL, XR, U, y = _canonical(XL, XR, U, y)
    search = None if ref.model is not None else True
    if ref.model is not None and "drift" in triggers:
        search = True
    job = ref._job(XL, XR, U, y, trigger, search=search)
    h = hashlib.blake2b(digest_size=12)
    for a in (XL, XR, U, y):
        h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
    h.update(repr(sorted(job["params"].items())).encode())
    job["fit_id"] = h.hexdigest()
    job["members"] = len(members)
    return job


def group_refit_abort(members: Sequence) -> None:
    """Forget a group refit that will not finish."""
    for m in members:
        m.refit_abort()


def group_refit_finish(members: Sequence, job: dict, fitted) -> list[dict]:
    """Install the model fitted for ``job`` (a model or its state dict) in every member, tagged with the
    job's ``fit_id``; the members' :meth:`~learners.refit.RefittingGPM.refit_finish` results, in order."""
    from learners.gpm import _PairModel

    try:
        model = _PairModel.from_state(fitted, device=job["device"]) if isinstance(fitted, dict) else fitted
        model.fit_id = job["fit_id"]
    except BaseException:
        group_refit_abort(members)
        raise
    return [m.refit_finish(job, copy.copy(model)) for m in members]   # each member numbers its own version


def group_refit(members: Sequence) -> list[dict]:
    """Begin, fit (in this thread) and finish one group refit."""
    job = group_refit_begin(members)
    try:
        model = fit_job(job)
    except BaseException:
        group_refit_abort(members)
        raise
    return group_refit_finish(members, job, model)
