"""Pref-SHAP on the paper's data (Hu, Chau et al. 2022, Section 4, Figs 2–5, Appendix B): findings and speed.

What it does, in one run:

1. **Synthetic cluster duels** (:mod:`bench.synthetic_cluster`, Section 4): fits a GPM and a UPM
   (:mod:`learners.gpm`, fixed hyper-parameters, ``--n-train`` training duels), explains
   ``--n-duels`` random test duels oriented winner-vs-loser with Pref-SHAP (exact, d = 7,
   2^7 = 128 coalitions) and the A-vs-B test duels; checks efficiency and skew-symmetry;
   compares with the UPM-SHAP baseline (φ_f(x_winner) − φ_f(x_loser)) and the naive
   concatenation baseline (14 players, Appendix B).
2. **Speed**: ms per duel of batched exact Pref-SHAP on CPU, the batched-CG (Algorithm 3) vs
   cached-Cholesky measurement, and the ratio against ``shap.KernelExplainer`` on the
   concatenated features (the naive KernelSHAP baseline; skipped if ``shap`` is not installed).
3. **Pokémon and chameleons** (``$PREFSTREAM_DATA_DIR`` or ``../shared/data``): top features next
   to the paper's (Pokémon: type advantage and Speed; chameleons: jl.res has a negative effect).

Plots (bar + beeswarm, coloured by x_winner − x_loser) go to ``bench/results/prefshap_*.png``,
the markdown summary to ``bench/results/prefshap.md`` and the raw output to
``bench/results/prefshap.txt``.

Usage::

    OMP_NUM_THREADS=2 python bench/prefshap_paper.py            # ~5–10 min on 2 busy cores
    python bench/prefshap_paper.py --quick                       # smaller fits, for a smoke test

Last line::

    efficiency_err=<f> skew_err=<f> top_global=<feature> top_AB=<feature> ms_per_duel=<f> n_duels=<int> coalitions=<int>

(efficiency_err: max |ν(∅) + Σφ − g| over the explained synthetic duels; skew_err: max
|φ(x^ℓ, x^r) + φ(x^r, x^ℓ)|; top_*: feature of largest mean |φ| globally / on A-vs-B duels;
ms_per_duel: wall-clock ms per duel of the global batch; coalitions: per duel.)
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.synthetic_cluster import make_synthetic_cluster  # noqa: E402
from explainers import plots  # noqa: E402
from explainers.prefshap import PrefSHAP  # noqa: E402
from learners.gpm import GPM, UPM  # noqa: E402
from learners.metrics import roc_auc  # noqa: E402

RESULTS = ROOT / "bench" / "results"


class _Tee:
    """Print to stdout and keep a copy for bench/results/prefshap.txt."""

    def __init__(self):
        self.buf = io.StringIO()

    def __call__(self, *a):
        line = " ".join(str(x) for x in a)
        print(line, flush=True)
        self.buf.write(line + "\n")


def _corr(a, b) -> float:
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.std() == 0 or b.std() == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def _fmt_top(e, k=4) -> str:
    return ", ".join(f"{n} {v:.3f}" for n, v in list(e.mean_abs().items())[:k])


def synthetic(args, out, md):
    d = make_synthetic_cluster(seed=args.seed)
    names = d.feature_names
    n = d.outcome.shape[0]
    perm = np.random.default_rng(args.seed).permutation(n)
    tr, te = perm[: args.n_train], perm[int(0.9 * n):]
    t0 = time.perf_counter()
    # item_constant=0: the paper's pure k_E (the committed results; concat-shap needs it) — GPM's default now selects c
    common = dict(penalty=args.penalty, lengthscale_multiplier=args.multiplier, seed=args.seed, max_centres=args.max_centres,
                  item_constant=0.0)
    gpm = GPM(names, **common).fit(d.XL[tr], d.XR[tr], d.outcome[tr])
    fit_gpm = time.perf_counter() - t0
    t0 = time.perf_counter()
    upm = UPM(names, **common).fit(d.XL[tr], d.XR[tr], d.outcome[tr])
    fit_upm = time.perf_counter() - t0
    yt = d.outcome[te]
    auc_g = roc_auc(yt, gpm.decision_function(d.XL[te], d.XR[te]))
    auc_u = roc_auc(yt, upm.decision_function(d.XL[te], d.XR[te]))
    out(f"# synthetic: n_train={len(tr)} M={gpm.alpha_.shape[0]} fit_gpm_s={fit_gpm:.1f} fit_upm_s={fit_upm:.1f} "
        f"test_auc_gpm={auc_g:.3f} test_auc_upm={auc_u:.3f} (paper Table 3: 0.98 / 0.71)")

    rng = np.random.default_rng(args.seed + 1)
    sel = rng.choice(te, size=min(args.n_duels, len(te)), replace=False)
    XL, XR, y = d.XL[sel], d.XR[sel], d.outcome[sel]
    cat = d.item_features
    ex = PrefSHAP(gpm, cat, max_reference=args.max_reference, cache_mb=0)
    t0 = time.perf_counter(); c0 = time.process_time()
    e = ex.explain_duels(XL, XR, outcome=y)
    wall = time.perf_counter() - t0; cpu = time.process_time() - c0
    ms = 1000 * wall / len(sel)
    eff = float(e.additivity_error().max())
    g_true = gpm.decision_function(XL, XR) * y
    pred_err = float(np.abs(e.prediction - g_true).max())
    import torch
    t0 = time.perf_counter(); c0 = time.process_time()
    e32 = PrefSHAP(gpm, cat, max_reference=args.max_reference, cache_mb=0, dtype=torch.float32).explain_duels(XL, XR, outcome=y)
    ms32, cpu32 = 1000 * (time.perf_counter() - t0) / len(sel), 1000 * (time.process_time() - c0) / len(sel)
    d32 = float(np.abs(e32.values - e.values).max())
    out(f"# pref-shap float32: wall_ms_per_duel={ms32:.1f} cpu_ms_per_duel={cpu32:.1f} max|phi32-phi64|={d32:.1e}")
    e_rev = PrefSHAP(gpm, cat, max_reference=args.max_reference, cache_mb=0).explain_duels(XR, XL)
    e_fwd_lr = e.values * y[:, None]                      # back to left-vs-right orientation
    skew = float(np.abs(e_fwd_lr + e_rev.values).max())
    out(f"# pref-shap global: n_duels={len(sel)} coalitions={int(np.max(e.extra['coalitions']))} "
        f"exact={bool(np.all(e.extra['exact']))} "
        f"reference={e.extra['reference_size']} wall_ms_per_duel={ms:.1f} cpu_ms_per_duel={1000 * cpu / len(sel):.1f} "
        f"efficiency_err={eff:.2e} |nu(Omega)-g|={pred_err:.2e} skew_err={skew:.2e}")
    out(f"#   mean|phi|: {_fmt_top(e, 7)}")
    inter = [e.mean_abs()[k] for k in ("xAB", "xAC", "xBC")]
    out(f"#   inter-cluster spread max/min = {max(inter) / min(inter):.2f} (paper: about equal)")
    corr = {k: _corr(e.values[:, j], e.data[:, j]) for j, k in enumerate(e.feature_names)}
    out("#   corr(phi_j, x_winner-x_loser): " + ", ".join(f"{k} {v:+.2f}" for k, v in corr.items()))
    plots.summary(e, str(RESULTS / "prefshap_synthetic_global.png"), title="Pref-SHAP (GPM), synthetic, global")

    # A-vs-B duels
    cl = d.cluster
    ab = te[((cl[d.left[te]] == 0) & (cl[d.right[te]] == 1)) | ((cl[d.left[te]] == 1) & (cl[d.right[te]] == 0))]
    ab = ab[: args.n_duels]
    eab = PrefSHAP(gpm, cat, max_reference=args.max_reference, cache_mb=0).explain_duels(d.XL[ab], d.XR[ab], outcome=d.outcome[ab])
    jab = eab.feature_names.index("xAB")
    phi_ab = eab.values[:, jab]
    top_dec = phi_ab >= np.quantile(phi_ab, 0.9)
    frac_pos = float(np.mean(eab.data[top_dec, jab] > 0))
    out(f"# pref-shap A-vs-B: n_duels={len(ab)} mean|phi|: {_fmt_top(eab, 7)}")
    out(f"#   top-decile phi(xAB) with x_winner-x_loser>0: {frac_pos:.2f}; corr(phi_xAB, diff_xAB)={_corr(phi_ab, eab.data[:, jab]):+.2f}")
    plots.summary(eab, str(RESULTS / "prefshap_synthetic_AB.png"), title="Pref-SHAP (GPM), synthetic, A vs B")

    # UPM-SHAP baseline
    ue = PrefSHAP(upm, cat, max_reference=args.max_reference, cache_mb=0).explain_upm_duels(XL, XR, outcome=y)
    uab = PrefSHAP(upm, cat, max_reference=args.max_reference, cache_mb=0).explain_upm_duels(d.XL[ab], d.XR[ab], outcome=d.outcome[ab])
    ucorr = {k: _corr(ue.values[:, j], ue.data[:, j]) for j, k in enumerate(ue.feature_names)}
    u_phi_ab = uab.values[:, jab]
    u_top = u_phi_ab >= np.quantile(u_phi_ab, 0.9)
    out(f"# upm-shap global: mean|phi|: {_fmt_top(ue, 7)}; efficiency_err={ue.additivity_error().max():.2e}")
    out("#   corr(phi_j, x_winner-x_loser): " + ", ".join(f"{k} {v:+.2f}" for k, v in ucorr.items()))
    out(f"# upm-shap A-vs-B: mean|phi|: {_fmt_top(uab, 7)}; top-decile phi(xAB) with diff>0: "
        f"{float(np.mean(uab.data[u_top, jab] > 0)):.2f}")
    sep_p = eab.mean_abs()["xAB"] / eab.mean_abs()["x0"]
    sep_u = uab.mean_abs()["xAB"] / uab.mean_abs()["x0"]
    out(f"#   A-vs-B separation mean|phi(xAB)| / mean|phi(x0)|: Pref-SHAP {sep_p:.2f}, UPM-SHAP {sep_u:.2f}")
    plots.summary(ue, str(RESULTS / "prefshap_synthetic_upm_global.png"), title="UPM-SHAP baseline, synthetic, global")

    # naive concatenation (Appendix B)
    nc = min(args.n_concat, len(sel))
    t0 = time.perf_counter()
    ce = PrefSHAP(gpm, None, max_reference=args.max_reference, max_coalitions=args.concat_coalitions, cache_mb=0,
                  value_function="interventional") \
        .explain_concat_duels(XL[:nc], XR[:nc], reference_duels=(d.XL[tr[:4000]], d.XR[tr[:4000]]), outcome=y[:nc])
    c_ms = 1000 * (time.perf_counter() - t0) / nc
    ma = ce.mean_abs()
    pairs = ", ".join(f"{k}: (l) {ma[k + '(l)']:.3f} vs (r) {ma[k + '(r)']:.3f}" for k in names[:4])
    out(f"# concat-shap (2d=14 players, marginal value function as KernelSHAP, {ce.extra['coalitions']} sampled "
        f"coalitions, {nc} duels, {c_ms:.0f} ms/duel, efficiency_err={ce.additivity_error().max():.1e}): {pairs}")
    plots.summary(ce, str(RESULTS / "prefshap_synthetic_concat.png"), max_display=14, title="Naive concatenation (Appendix B)")

    # CG (Algorithm 3) vs cached Cholesky for the CME systems
    k = min(20, len(sel))
    timing = {}
    for solver in ("cholesky", "cg"):
        exs = PrefSHAP(gpm, cat, max_reference=256, solver=solver, cache_mb=0)
        t0 = time.perf_counter()
        es = exs.explain_duels(XL[:k], XR[:k], outcome=y[:k])
        timing[solver] = (1000 * (time.perf_counter() - t0) / k, es)
    exs = PrefSHAP(gpm, cat, max_reference=256, solver="cholesky", cache_mb=256)
    exs.explain_duels(XL[:k], XR[:k], outcome=y[:k])                       # fills the factor cache
    t0 = time.perf_counter()
    exs.explain_duels(XL[k:2 * k], XR[k:2 * k], outcome=y[k:2 * k])
    cached_ms = 1000 * (time.perf_counter() - t0) / k
    cg_diff = float(np.abs(timing["cg"][1].values - timing["cholesky"][1].values).max())
    out(f"# CME solver ({k} duels, n_ref=256): cholesky {timing['cholesky'][0]:.1f} ms/duel, cholesky with cached "
        f"factors {cached_ms:.1f} ms/duel, batched PCG (Algorithm 3) {timing['cg'][0]:.1f} ms/duel; max |phi_cg - phi_chol| = {cg_diff:.1e}")

    # naive KernelSHAP on concatenated features (shap.KernelExplainer)
    ks = None
    try:
        import shap  # noqa: F401
    except ImportError:
        out("# shap not installed: KernelExplainer ratio skipped")
    else:
        import shap
        nk = min(args.n_kernelshap, len(sel))
        bg = np.concatenate([d.XL[tr[:args.kernelshap_background]], d.XR[tr[:args.kernelshap_background]]], axis=1)
        f = lambda Z: gpm.decision_function(Z[:, :7], Z[:, 7:])
        kex = shap.KernelExplainer(f, bg)
        Z = np.concatenate([XL[:nk], XR[:nk]], axis=1)
        t0 = time.perf_counter()
        v1 = kex.shap_values(Z, nsamples=args.kernelshap_nsamples, silent=True)
        ks_ms = 1000 * (time.perf_counter() - t0) / nk
        v2 = shap.KernelExplainer(f, bg).shap_values(Z, nsamples=args.kernelshap_nsamples, silent=True)
        noise = float(np.abs(np.asarray(v1) - np.asarray(v2)).max() / max(np.abs(v1).max(), 1e-12))
        ks = ks_ms / ms
        out(f"# shap.KernelExplainer (concat 14 features, background={bg.shape[0]}, nsamples={args.kernelshap_nsamples}, "
            f"{nk} duels): {ks_ms:.0f} ms/duel, run-to-run relative max diff {noise:.2f}; Pref-SHAP exact "
            f"{ms:.1f} ms/duel -> speed-up x{ks:.1f}")

    md += [
        "### Synthetic cluster duels (Hu, Chau et al. 2022, Section 4, Figs 2–3, Appendix B)",
        "",
        f"GPM on {len(tr)} training duels (M = {gpm.alpha_.shape[0]} Nyström centres, fixed λ = {args.penalty}, "
        f"length-scale multiplier {args.multiplier}): test AUC {auc_g:.3f} (paper 0.98); UPM {auc_u:.3f} (paper 0.71).",
        "",
        "| check | measured | paper / target |",
        "|---|---|---|",
        f"| global top feature | {e.top_features(1)[0]} | x^[0] |",
        f"| global mean \\|φ\\| | {_fmt_top(e, 4)} | x0 first, xAB ≈ xAC ≈ xBC |",
        f"| inter-cluster spread max/min | {max(inter) / min(inter):.2f} | ≈ 1 |",
        f"| A-vs-B top feature (Pref-SHAP / UPM-SHAP) | {eab.top_features(1)[0]} / {uab.top_features(1)[0]} | x^AB / not x^AB |",
        f"| A-vs-B mean \\|φ(xAB)\\| / mean \\|φ(x0)\\| (Pref-SHAP / UPM-SHAP) | {sep_p:.2f} / {sep_u:.2f} | xAB dominant for Pref-SHAP only |",
        f"| top-decile φ(xAB) with x_winner − x_loser > 0 (Pref-SHAP / UPM-SHAP) | {frac_pos:.2f} / "
        f"{float(np.mean(uab.data[u_top, jab] > 0)):.2f} | red for large φ (Pref-SHAP only) |",
        f"| corr(φ, x_winner − x_loser), x0 / xAB (Pref-SHAP) | {corr['x0']:+.2f} / {corr['xAB']:+.2f} | positive |",
        f"| corr(φ, x_winner − x_loser), x0 / xAB (UPM-SHAP) | {ucorr['x0']:+.2f} / {ucorr['xAB']:+.2f} | weaker |",
        f"| efficiency error (max) | {eff:.1e} | 0 |",
        f"| skew-symmetry error (max) | {skew:.1e} | 0 |",
        f"| concat-shap, same feature on both sides | {pairs} | unequal (pathology) |",
        "",
        "Speed (CPU, 2 shared cores, float64, exact 2^7 = 128 coalitions, reference catalog "
        f"{e.extra['reference_size']} items, M = {gpm.alpha_.shape[0]} centres):",
        "",
        "| what | ms per duel |",
        "|---|---|",
        f"| Pref-SHAP, batch of {len(sel)} duels, float64 (wall / CPU) | {ms:.1f} / {1000 * cpu / len(sel):.1f} |",
        f"| same in float32 (wall / CPU; max \\|Δφ\\| = {d32:.0e}) | {ms32:.1f} / {cpu32:.1f} |",
        f"| CME by batched Cholesky, {k} duels, n_ref = 256 | {timing['cholesky'][0]:.1f} |",
        f"| same, Cholesky factors cached from a previous call | {cached_ms:.1f} |",
        f"| CME by batched PCG (Algorithm 3), {k} duels, n_ref = 256 | {timing['cg'][0]:.1f} |",
        f"| naive concatenation with our machinery (marginal value function, {ce.extra['coalitions']} sampled "
        f"coalitions of 14 players) | {c_ms:.0f} |",
    ]
    if ks is not None:
        md.append(f"| shap.KernelExplainer on concatenated features (nsamples={args.kernelshap_nsamples}, "
                  f"background {args.kernelshap_background}) | {ks * ms:.0f} (Pref-SHAP is x{ks:.1f} faster) |")
    md.append("")
    for f_ in ("synthetic_global", "synthetic_AB", "synthetic_upm_global", "synthetic_concat"):
        md.append(f"![{f_}](prefshap_{f_}.png)")
    md.append("")
    return dict(eff=eff, skew=skew, top_global=e.top_features(1)[0], top_ab=eab.top_features(1)[0], ms=ms,
                n=len(sel), coal=int(np.max(e.extra["coalitions"])))          # per duel since issue 23


def real_data(args, out, md):
    from stream.adapters import duels

    data_dir = os.environ.get("PREFSTREAM_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    md += ["### Real data (Hu, Chau et al. 2022, Section 4, Figs 4–6, Appendix B)", "",
           "| data set | GPM test AUC | Pref-SHAP top features (mean \\|φ\\|) | sign check | paper |", "|---|---|---|---|---|"]
    # Pokémon
    try:
        ds = duels.load_pokemon(data_dir)
    except Exception as exc:  # data not available
        out(f"# pokemon skipped: {exc}")
    else:
        X = np.asarray(ds.item_features, float)
        names = list(ds.feature_names)
        n = len(ds.outcome)
        perm = np.random.default_rng(args.seed).permutation(n)
        tr, te = perm[: args.n_train_pokemon], perm[int(0.9 * n):]
        L, R, y = X[ds.left], X[ds.right], np.asarray(ds.outcome)
        gpm = GPM(names, penalty=args.penalty, lengthscale_multiplier=args.multiplier, seed=args.seed,
                  max_centres=args.max_centres, item_constant=0.0).fit(L[tr], R[tr], y[tr])
        auc = roc_auc(y[te], gpm.decision_function(L[te], R[te]))
        groups = {"Type": [f for f in names if f.startswith("type_")]}
        sel = te[: args.n_duels_pokemon]
        t0 = time.perf_counter()
        e = PrefSHAP(gpm, X, max_reference=args.max_reference, feature_groups=groups, cache_mb=0) \
            .explain_duels(L[sel], R[sel], outcome=y[sel])
        ms = 1000 * (time.perf_counter() - t0) / len(sel)
        corr = {k: _corr(e.values[:, j], e.data[:, j]) for j, k in enumerate(e.feature_names)}
        out(f"# pokemon: n_train={len(tr)} M={gpm.alpha_.shape[0]} test_auc={auc:.3f} (paper 0.86); players={e.feature_names} "
            f"coalitions={e.extra['coalitions']} {ms:.1f} ms/duel; eff_err={e.additivity_error().max():.1e}")
        out(f"#   mean|phi|: {_fmt_top(e, 9)}")
        out(f"#   corr(phi, x_winner-x_loser): Speed {corr['Speed']:+.2f}, Attack {corr['Attack']:+.2f}")
        plots.summary(e, str(RESULTS / "prefshap_pokemon.png"), title="Pref-SHAP (GPM), Pokémon (Type = one group)")
        md.append(f"| Pokémon | {auc:.3f} (paper 0.86) | {_fmt_top(e, 4)} | corr(φ_Speed, Δ Speed) = {corr['Speed']:+.2f} | "
                  "type advantage and Speed |")
    # chameleons
    try:
        ds = duels.load_chameleons(data_dir)
    except Exception as exc:
        out(f"# chameleons skipped: {exc}")
    else:
        X = np.asarray(ds.item_features, float)
        names = list(ds.feature_names)
        L, R, y = X[ds.left], X[ds.right], np.asarray(ds.outcome)
        gpm = GPM(names, seed=args.seed, both_orders=True, item_constant=0.0).fit(L, R, y)
        auc = roc_auc(y, gpm.decision_function(L, R))
        e = PrefSHAP(gpm, X, cache_mb=0).explain_duels(L, R, outcome=y)
        j = e.feature_names.index("jl.res")
        c = _corr(e.values[:, j], e.data[:, j])
        pos = e.data[:, j] > 0
        m_pos = float(e.values[pos, j].mean()) if pos.any() else float("nan")
        out(f"# chameleons: all {len(y)} contests (penalty {gpm.penalty_}, multiplier {gpm.multiplier_}), "
            f"train auc={auc:.3f}; mean|phi|: {_fmt_top(e, 7)}")
        out(f"#   jl.res: corr(phi, x_winner-x_loser)={c:+.2f}; mean phi when winner has the larger jaw={m_pos:+.3f} "
            f"(paper: larger jaw than the opponent has a negative effect)")
        plots.summary(e, str(RESULTS / "prefshap_chameleons.png"), title="Pref-SHAP (GPM), chameleons")
        md.append(f"| chameleons | {auc:.3f} (train, 106 contests; paper test 0.92) | {_fmt_top(e, 4)} | "
                  f"corr(φ_jl.res, Δ jl.res) = {c:+.2f}; mean φ_jl.res when Δ > 0: {m_pos:+.3f} | jl.res negative |")
    md += ["", "![pokemon](prefshap_pokemon.png)", "", "![chameleons](prefshap_chameleons.png)", ""]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-train", type=int, default=12000)
    p.add_argument("--n-train-pokemon", type=int, default=6000)
    p.add_argument("--n-duels", type=int, default=200)
    p.add_argument("--n-duels-pokemon", type=int, default=100)
    p.add_argument("--penalty", type=float, default=1e-5)
    p.add_argument("--multiplier", type=float, default=1.0)
    p.add_argument("--max-centres", type=int, default=2000)
    p.add_argument("--max-reference", type=int, default=512)
    p.add_argument("--n-concat", type=int, default=10)
    p.add_argument("--concat-coalitions", type=int, default=1024)
    p.add_argument("--n-kernelshap", type=int, default=1)
    p.add_argument("--kernelshap-background", type=int, default=50)
    p.add_argument("--kernelshap-nsamples", type=int, default=2048)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="small fits and batches (smoke test)")
    p.add_argument("--no-real", action="store_true", help="skip Pokémon and chameleons")
    args = p.parse_args(argv)
    if args.quick:
        args.n_train, args.n_train_pokemon, args.n_duels, args.n_concat = 3000, 3000, 60, 6
        args.n_duels_pokemon = 30
        args.n_kernelshap, args.kernelshap_nsamples = 1, 512
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = _Tee()
    cmd = "python bench/prefshap_paper.py " + " ".join(argv if argv is not None else sys.argv[1:])
    out(f"# {cmd.strip()}")
    md = ["## Pref-SHAP (explainers/prefshap/)", "", f"Reproduce: `OMP_NUM_THREADS=2 {cmd.strip()}`", ""]
    res = synthetic(args, out, md)
    if not args.no_real:
        real_data(args, out, md)
    last = (f"efficiency_err={res['eff']:.3e} skew_err={res['skew']:.3e} top_global={res['top_global']} "
            f"top_AB={res['top_ab']} ms_per_duel={res['ms']:.2f} n_duels={res['n']} coalitions={res['coal']}")
    md += ["Last line:", "", "```", last, "```", ""]
    out(last)
    if not args.quick:
        (RESULTS / "prefshap.md").write_text("\n".join(md) + "\n")
        (RESULTS / "prefshap.txt").write_text(out.buf.getvalue())
    return res


if __name__ == "__main__":
    main()
