"""What a replayed click log tells about position bias and the learned ranking (demo, report, bench).

:func:`click_log_summary` takes an :class:`~stream.adapters.clicks.OpenBanditLog` and,
optionally, a learned pairwise model, and returns a JSON-ready dict:

* ``ctr_by_position`` — click-through rate per position with Wilson intervals, over the
  impressions of the uniformly random logging policy (where position is independent of the
  item, so the CTRs are proportional to the examination probabilities; Wang et al. 2018, §3)
  and ``examination`` = those CTRs relative to the best position;
* ``off_policy`` — per evaluated policy (``ranked``: the learned j-th best item at position j;
  ``top_k_uniform``: the learned top 3 in random order) the IPS and SNIPS click-rate estimates
  with 95 % intervals on the random-policy logs (:mod:`stream.clicks.offpolicy`), next to the logging
  policy's own click rate. Each campaign's items are ranked by the model's scores
  (:func:`stream.clicks.simulate.catalog_scores`, no user context); the estimates pool the campaigns'
  impressions.
"""

from __future__ import annotations

import numpy as np

from stream.clicks.log import ctr_by_position, examination_from_ctr
from stream.clicks.simulate import catalog_scores
from stream.clicks.offpolicy import ips_estimate, on_policy_estimate, ranking_weights, snips_estimate

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
    if s.get("off_policy"):
        lines.append(f"off-policy value     of the ranking learned by {s.get('model') or 'the model'} "
                     f"({'in-sample: trained on these logs, ' if s.get('in_sample') else ''}random-policy logs, 95 %):")
    for policy, est in (s.get("off_policy") or {}).items():
        a, b = est["ips"], est["snips"]
        lines.append(f"  {policy:<18} IPS {a['value']:.4f} [{a['lo']:.4f}, {a['hi']:.4f}], SNIPS {b['value']:.4f} "
                     f"[{b['lo']:.4f}, {b['hi']:.4f}] ({a['matched']} matched impressions)")
    return lines


# ------------------------------------------------------------------ demo / report hooks
def demo_settings(ds) -> dict:
    """Settings the demo gives the workers for a data set: SNIPS-weighted, hashed pairs for Open Bandit."""
    from stream.adapters.clicks import OpenBanditLog

    if isinstance(ds, OpenBanditLog):
        return {"click_weighting": "snips", "click_orientation": "hashed"}
    return {}


def demo_click_summary(ds, model_messages, models) -> dict | None:
    """The demo's ``click_log`` summary: :func:`click_log_summary` with the final model of the run.

    Parameters
    ----------
    ds : data set of the run (only an :class:`OpenBanditLog` gives a summary)
    model_messages : list of (bytes, bytes)
        The run's model-topic messages (key, value).
    models : list of str
        Models of the run, in order of preference for the off-policy evaluation.

    Returns
    -------
    dict or None
        ``None`` for other data sets; ``"model"`` names the model evaluated (the first of
        ``models`` with a snapshot that scores the items).
    """
    from stream import registry
    from stream.adapters.clicks import OpenBanditLog
    from stream.contract import decode_snapshot
    from stream.workers._snapshot import split_stream_meta

    if not isinstance(ds, OpenBanditLog):
        return None
    latest = {}
    for k, v in model_messages:
        if k is not None:
            latest[k.decode()] = v
    for name in models:
        parts = []
        for key, v in latest.items():
            if v is None or not key.startswith(name + "@"):
                continue
            try:
                snap = decode_snapshot(v)
                parts.append((registry.get_model(name).loader(split_stream_meta(snap["state"])[0]), snap["training_count"]))
            except Exception:  # noqa: BLE001 - an unreadable snapshot only loses this summary line
                continue
        if not parts:
            continue
        try:
            learner = registry.merge_learners(name, parts)
            out = click_log_summary(ds, learner)
        except Exception:  # noqa: BLE001 - e.g. a GPM not fitted yet: try the next model
            continue
        out["model"] = name
        out["in_sample"] = True
        return out
    out = click_log_summary(ds)
    out["model"] = None
    return out


def click_log_html(s: dict) -> str:
    """The report's section about a click log (position bias and off-policy value)."""
    import html

    rows = "".join(f"<tr><th>{p}</th><td>{v['impressions']}</td><td>{v['clicks']}</td><td>{v['ctr']:.4f}</td>"
                   f"<td>[{v['lo']:.4f}, {v['hi']:.4f}]</td></tr>" for p, v in s["ctr_by_position"].items())
    est = "".join(f"<tr><th>{html.escape(p)}</th>" + "".join(
        f"<td>{e[m]['value']:.4f} [{e[m]['lo']:.4f}, {e[m]['hi']:.4f}]</td>" for m in ("ips", "snips"))
        + f"<td>{e['ips']['matched']}</td></tr>" for p, e in (s.get("off_policy") or {}).items())
    lg = s["logging_ctr"]
    model = html.escape(str(s.get("model")))
    return (f"<h2>Click log: position bias and off-policy value</h2><p>{s['impressions']} impressions, {s['clicks']} clicks, "
            f"{s['sessions']} sessions ({html.escape(', '.join(s['samples']))}). CTR by position on the uniformly random "
            f"logs ({html.escape(', '.join(s['ctr_samples']))}), Wilson 95 % intervals:</p>"
            f"<table><tr><th>position</th><th>impressions</th><th>clicks</th><th>CTR</th><th>95 %</th></tr>{rows}</table>"
            + (f"<p>Off-policy click rate of the ranking learned by <b>{model}</b> (in-sample: trained on these logs) "
               f"on the random logs, 95 % intervals; logging policy: {lg['value']:.4f} [{lg['lo']:.4f}, {lg['hi']:.4f}].</p>"
               f"<table><tr><th>policy</th><th>IPS</th><th>SNIPS</th><th>matched</th></tr>{est}</table>" if est else ""))
