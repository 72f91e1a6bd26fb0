"""What a replayed click log tells about position bias and the learned ranking (demo, report, bench).

:func:`click_log_summary` takes an :class:`~stream.adapters.clicks.OpenBanditLog` and,
optionally, a learned pairwise model, and returns a JSON-ready dict:

* ``ctr_by_position`` — click-through rate per position with Wilson intervals, over the
  impressions of the uniformly random logging policy (where position is independent of the
  item, so the CTRs are proportional to the examination probabilities; Wang et al. 2018, §3)
  and ``examination`` = those CTRs relative to the best position;
* ``off_policy`` — per evaluated policy (``ranked``: the learned j-th best item at position j;
  ``top_k_uniform``: the learned top 3 in random order) the IPS and SNIPS click-rate estimates
  with 95 % intervals on the random-policy logs (:mod:`stream.offpolicy`), next to the logging
  policy's own click rate. Each campaign's items are ranked by the model's scores
  (:func:`stream.clicksim.catalog_scores`, no user context); the estimates pool the campaigns'
  impressions.
"""

from __future__ import annotations

import numpy as np

from stream.clicklog import ctr_by_position, examination_from_ctr
from stream.clicksim import catalog_scores
from stream.offpolicy import ips_estimate, on_policy_estimate, ranking_weights, snips_estimate

__all__ = ["click_log_summary", "format_click_summary"]


def _random_samples(log) -> list:
    return [imp for name, imp in log.impressions.items() if name.startswith("random")]


def click_log_summary(log, learner=None, policies=("ranked", "top_k_uniform")) -> dict:
    """Position CTRs and, with ``learner``, the off-policy value of its ranking.

    Parameters
    ----------
    log : OpenBanditLog
    learner : PreferenceLearner, optional
        A fitted pairwise model over ``log.feature_names``.
    policies : tuple of str

    Returns
    -------
    dict
        ``{"impressions", "clicks", "sessions", "samples", "ctr_by_position", "examination",
        "logging_ctr", "off_policy": {policy: {"ips": {...}, "snips": {...}}}}``.
    """
    rnd = _random_samples(log) or list(log.impressions.values())
    pos = np.concatenate([imp.position for imp in rnd])
    clk = np.concatenate([imp.click for imp in rnd])
    ctr = ctr_by_position(pos, clk)
    out = {
        "samples": sorted(log.impressions),
        "impressions": int(sum(len(imp) for imp in log.impressions.values())),
        "clicks": int(sum(int(imp.click.sum()) for imp in log.impressions.values())),
        "sessions": len(log.sessions),
        "ctr_samples": [imp.name for imp in rnd],
        "ctr_by_position": {str(p): v for p, v in ctr.items()},
        "examination": list(examination_from_ctr(ctr)) if clk.sum() > 0 else None,
        "logging_ctr": on_policy_estimate(clk).as_dict(),
    }
    if learner is None:
        return out
    index = {iid: j for j, iid in enumerate(log.item_ids)}
    off = {}
    for policy in policies:
        rs, ws = [], []
        for imp in rnd:
            rows = [index[i] for i in imp.item_ids]
            scores = catalog_scores(learner, log.item_features[rows], log.feature_names,
                                    n_reference=min(64, len(rows)))
            ws.append(ranking_weights(imp.item, imp.position, imp.propensity, scores, policy=policy))
            rs.append(imp.click.astype(float))
        r, w = np.concatenate(rs), np.concatenate(ws)
        off[policy] = {"ips": ips_estimate(r, w).as_dict(), "snips": snips_estimate(r, w).as_dict()}
    out["off_policy"] = off
    return out


def format_click_summary(s: dict) -> list[str]:
    """Text lines for the demo summary."""
    lines = [f"click log            {s['impressions']} impressions, {s['clicks']} clicks, {s['sessions']} sessions "
             f"({', '.join(s['samples'])})"]
    ctr = ", ".join(f"{p}: {v['ctr']:.4f} [{v['lo']:.4f}, {v['hi']:.4f}]" for p, v in s["ctr_by_position"].items())
    lines.append(f"CTR by position      {ctr}  (random policy, Wilson 95 %)")
    lg = s["logging_ctr"]
    lines.append(f"logging policy CTR   {lg['value']:.4f} [{lg['lo']:.4f}, {lg['hi']:.4f}]")
    for policy, est in (s.get("off_policy") or {}).items():
        a, b = est["ips"], est["snips"]
        lines.append(f"learned {policy:<14} IPS {a['value']:.4f} [{a['lo']:.4f}, {a['hi']:.4f}], SNIPS {b['value']:.4f} "
                     f"[{b['lo']:.4f}, {b['hi']:.4f}] ({a['matched']} matched impressions)")
    return lines
