"""Exact product-marginal Pref-SHAP on Pokémon (d = 26) against enumeration and today's coalition path (issue 29).

The GPM is fitted as the stream fits it (``bench/explain_wide.py``'s fit, ``--train`` events, one torch thread),
the reference is the stream's (128 catalog items, :func:`stream.plugins.gpm._prefshap_for`). Then, on
``--events`` held-out duels:

* ``max_abs_diff_enum_d12``: the exact closed form against enumeration of the SAME value function
  (:meth:`PrefSHAP.coalition_values`, product-marginal, all 2^n coalitions and
  :func:`explainers._coalitions.exact_shapley`), at n ≤ 12 players: every duel's own game on its varying
  features (the equal ones held, as the stream explains a duel) when it has at most 12 of them, and every duel
  with 12 players (the 8 stats and the 18 types in 4 groups);
* ``efficiency_err_d26``: max |Σφ − (ν(Ω) − ν(∅))| of the stream's explanations (26 players), with
  ν(Ω) = g from the model's ``decision_function`` and ν(∅) = 0;
* ``ms_per_duel_d26``: thread CPU ms per duel of the stream's ``pref-shap`` (exact, 26 players), in batches (best of 5);
* ``speedup_d9``: today's coalition path per duel (observational CME, the 18 types one player: 9 players,
  512 coalitions, kernel blocks of the fit stored, per-duel table columns forgotten) over the exact path at the
  same 9 players, in this run (the exact path at 26 players is printed beside it).

It also prints how far the two value functions' explanations are apart (docs/prefshap.md).

Last line: ``max_abs_diff_enum_d12=… efficiency_err_d26=… ms_per_duel_d26=… speedup_d9=…``.

Usage: ``OMP_NUM_THREADS=1 python bench/prefshap_exact.py [--data-dir DIR] [--events 64] [--train 1500] [--out bench/results]``
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

LINES: list[str] = []


def say(line: str = "") -> None:
    print(line, flush=True)
    LINES.append(line)


def cpu_ms(fn, reps: int = 1):
    c0 = time.thread_time()
    for _ in range(reps):
        out = fn()
    return (time.thread_time() - c0) * 1e3 / reps, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=os.environ.get("PREFSTREAM_DATA_DIR", str(REPO.parent / "shared" / "data")))
    ap.add_argument("--events", type=int, default=64)
    ap.add_argument("--train", type=int, default=1500)
    ap.add_argument("--out", default=None, help="append prefshap_exact.md / .txt here (bench/results)")
    args = ap.parse_args()
    os.environ["PREFSTREAM_DATA_DIR"] = args.data_dir
    import torch

    torch.set_num_threads(1)
    import explain_wide as ew

    from explainers._coalitions import all_coalitions, exact_shapley
    from explainers.prefshap import PrefSHAP
    from stream.models import register_all
    from stream.plugins.gpm import _duel_arrays, _prefshap_for
    from stream.plugins.groups import groups_of

    register_all()
    say(f"# bench/prefshap_exact.py — {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC")
    say(f"command: OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '')} python bench/prefshap_exact.py "
        f"--events {args.events} --train {args.train}; load average {os.getloadavg()[0]:.2f}")
    ds, names, cnames, train, events, cat = ew.load("pokemon", args.train, args.events)
    lr = ew.fit(ds, names, cnames, "gpm", train)
    ctx = ew.ctx_for("gpm", train, cat)
    model, ps, b = _prefshap_for(lr, ctx)                                   # the stream's: exact, 26 players
    _, obs, _ = _prefshap_for(lr, ctx, "observational")                     # today's: 9 players, 512 coalitions
    XL, XR, _ = _duel_arrays(model, events)
    d = len(names)
    M = model.centres_left_.shape[0]
    say(f"Pokémon GPM: d = {d}, M = {M} centres, item constant c = {float(model.item_constant_):g}, "
        f"reference {ps._ref.shape[0]} items, {len(events)} duels")

    # ---- exact vs enumeration of the same value function, n ≤ 12 players
    e26 = ps.explain_duels(XL, XR)
    diffs, n_own = [], 0
    for p in range(len(events)):
        held = np.flatnonzero(XL[p] == XR[p])
        act = np.setdiff1d(np.arange(d), held)
        if len(act) > 12:
            continue
        n_own += 1
        sub = all_coalitions(len(act)).astype(np.int64)
        masks = np.zeros((sub.shape[0], d), bool)
        masks[:, act] = sub.astype(bool)
        masks[:, held] = True
        v = ps.coalition_values(masks, XL[p:p + 1], XR[p:p + 1])[:, 0]
        want = np.zeros(d)
        want[act] = exact_shapley(v, len(act))
        diffs.append(np.abs(e26.values[p] - want).max())
    types = [n for n in names if n.startswith("type_")]
    groups = {f"types{k}": types[k::4] for k in range(4)}
    ps12 = PrefSHAP(model, reference_items=ps._ref, value_function="product-marginal", feature_groups=groups)
    ps12._ref, ps12._product_model = ps._ref, None
    pn12, mem12 = ps12.players()
    e12 = ps12.explain_duels(XL, XR)
    C12 = all_coalitions(len(pn12))
    masks12 = (C12.astype(np.int64) @ mem12.astype(np.int64)) > 0
    for p in range(len(events)):
        D = e12.extra["dropped_players"][p]
        held = np.array([n in D for n in pn12])
        act = np.flatnonzero(~held)
        bit = np.int64(1) << np.arange(len(pn12), dtype=np.int64)
        sub = all_coalitions(len(act)).astype(np.int64) @ bit[act] + int(bit[held].sum())
        v = ps12.coalition_values(masks12[sub], XL[p:p + 1], XR[p:p + 1])[:, 0]
        want = np.zeros(len(pn12))
        want[act] = exact_shapley(v, len(act))
        diffs.append(np.abs(e12.values[p] - want).max())
    max_enum = float(max(diffs))
    say(f"exact vs enumeration of the same value function: {n_own} duels on their own ≤ 12 varying features and "
        f"{len(events)} duels with 12 players (types in 4 groups): max |Δφ| = {max_enum:.2e}")

    # ---- efficiency at d = 26
    g = model.decision_function(XL, XR)
    eff = float(np.max(np.abs(e26.values.sum(axis=1) - (g - e26.base_values))))
    say(f"efficiency at d = 26: max |Σφ − (g − ν(∅))| = {eff:.2e}; max |ν(Ω) − g| = "
        f"{float(np.max(np.abs(e26.prediction - g))):.2e}; max |ν(∅)| = {float(np.max(np.abs(e26.base_values))):.2e}; "
        f"varying features per duel: median {int(np.median((XL != XR).sum(1)))}, max {int((XL != XR).sum(1).max())}")

    # ---- speed
    load0 = os.getloadavg()[0]
    reps = 5
    gr9 = groups_of(names, b["exact_players"])
    ps9 = PrefSHAP(model, reference_items=ps._ref, value_function="product-marginal", feature_groups=gr9)
    ps9._ref, ps9._product_model = ps._ref, None

    def today():
        obs.__dict__.pop("_columns", None)           # the per-duel table columns: computed afresh each time
        return obs.explain_duels(XL, XR)

    today()
    ps9.explain_duels(XL, XR)
    t26 = t9x = t9o = float("inf")
    for _ in range(reps):      # interleaved, so that a change of load hits all three alike; best of reps each
        t, _ = cpu_ms(lambda: ps.explain_duels(XL, XR))
        t26 = min(t26, t)
        t, e9x = cpu_ms(lambda: ps9.explain_duels(XL, XR))
        t9x = min(t9x, t)
        t, e9o = cpu_ms(today)
        t9o = min(t9o, t)
    load1 = os.getloadavg()[0]
    n = len(events)
    ms26, ms9x, ms9o = t26 / n, t9x / n, t9o / n
    all_active = PrefSHAP(model, reference_items=ps._ref, value_function="product-marginal")
    all_active._ref, all_active._product_model = ps._ref, None
    XR2 = XR + 1e-3                                 # every feature varying: the worst case, 26 players each
    t_w, _ = cpu_ms(lambda: all_active.explain_duels(XL[:16], XR2[:16]), 1)
    say(f"\nthread CPU ms per duel (batches of {n}, best of {reps}, interleaved); load average {load0:.2f} → {load1:.2f}:")
    say("| path | players | ms / duel |")
    say("|---|---|---|")
    say(f"| exact product-marginal (stream) | 26 (equal features held) | {ms26:.3f} |")
    say(f"| exact product-marginal, every feature varying | 26 | {t_w / 16:.3f} |")
    say(f"| exact product-marginal | 9 (types one player) | {ms9x:.3f} |")
    say(f"| observational CME coalition path (today) | 9, 512 coalitions | {ms9o:.3f} |")
    speed9 = ms9o / ms9x
    say(f"speedup at 9 players: {speed9:.1f}x (today's path over exact); today's 9-player path over the exact "
        f"26-player path: {ms9o / ms26:.1f}x")

    # ---- how far apart the two value functions are (same 9 players)
    scale = np.abs(e9o.values).max(axis=1)
    rel = np.abs(e9x.values - e9o.values).max(axis=1) / np.where(scale > 0, scale, 1)
    top = np.mean(np.argmax(np.abs(e9x.values), 1) == np.argmax(np.abs(e9o.values), 1))
    sgn = np.mean(np.sign(e9x.values) == np.sign(e9o.values))
    from scipy.stats import spearmanr

    rho = np.nanmedian([spearmanr(a, b_).statistic for a, b_ in zip(e9x.values, e9o.values)])
    say(f"\nproduct-marginal vs observational CME, same 9 players, {n} duels: max_duel max|Δφ|/max|φ_obs| = "
        f"{float(rel.max()):.3f} (median {float(np.median(rel)):.3f}); same top player in {top:.0%} of duels; "
        f"same sign in {sgn:.0%} of values; median Spearman ρ {rho:.3f}; mean |φ| per player "
        + ", ".join(f"{pn} {a:.3f}/{o:.3f}" for pn, a, o in zip(ps9.players()[0], np.abs(e9x.values).mean(0),
                                                            np.abs(e9o.values).mean(0))) + " (product/CME)")
    last = (f"max_abs_diff_enum_d12={max_enum:.3e} efficiency_err_d26={eff:.3e} ms_per_duel_d26={ms26:.4f} "
            f"speedup_d9={speed9:.1f}")
    say("")
    say(last)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "prefshap_exact.md", "a") as f:
            f.write("\n".join(LINES) + "\n\n")
        with open(out / "prefshap_exact.txt", "a") as f:
            f.write(last + "\n")


if __name__ == "__main__":
    main()
