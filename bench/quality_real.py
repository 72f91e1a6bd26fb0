"""Capacity learners on real streams: progressive AUC / log loss against linear Bradley–Terry, and merging.

For each data set (Train, Pokémon — first 20,000 duels, CEMS, ATP tennis, chameleons and the 10
monotone MCDA sets, loaders in ``stream.adapters``) every learner runs *progressively*: for each
event in stream order it predicts P(left preferred) with ``predict_proba_one`` and then learns the
event with ``learn_one`` (event by event, one process). Scores over all events:

* ``auc`` — ROC AUC of P on the strict events (ties ignored);
* ``ll`` — cross-entropy of P against (1 + y)/2 (a tie has target ½), :func:`learners.metrics.cross_entropy`.

Learners:

* ``linear-bt`` — :class:`learners.linear.LinearBT` with its defaults (the anchor);
* ``cap-paper`` — :class:`learners.capacity.CapacityRDA` with the demo's former parameters (the
  paper's hinge-loss RDA, Herin, Perny & Sokolovska 2024 Algorithm 1; with the monotonicity
  constraints of Algorithm 2, ADMM-RDA, up to 10 criteria; min-max scaling; full capacity up to 6
  criteria, else 2-additive); P = σ(margin);
* ``cap-stream`` — the stream default :class:`learners.capacity_stream.CapacityLogistic` with
  ``stream.demo.default_model_params`` (what the demo and the workers build);
* ``gpm`` — :class:`learners.refit.RefittingGPM` with the demo's parameters (but ``min_train=50``
  so that chameleons' 106 events get a fit; P = ½ before the first fit), on the first
  ``--gpm-events`` events of the data sets in ``--gpm-sets`` only (its refits cost seconds each on
  this CPU machine); its AUC is on that prefix, so compare it with the ``*_prefix`` columns.

Merge table (Pokémon): the first 20,000 duels are split over P partitions by event id (k mod P),
one learner per partition learns its part in order, ``stream.registry.merge_learners`` merges them
(the learner's own ``+=``), and the merged model is scored on the next 4,000 duels (hold-out AUC).

Table 1 check of the mini-batch variant: the paper's synthetic protocol (bench/capacity_paper.py:
K = n random non-negative masses, uniform alternatives, noise σ = 0.03, T = 500/750/1000 for
n = 10/15/20, 500 test pairs, noise-free test labels) with the stream default learned by
``learn_many`` (blocks of ``minibatch`` = 16) against ``minibatch=1`` (= the ``learn_one`` loop).

Speed: ``learn_many`` in batches of 500 on Pokémon, events/s, beside linear-bt (same run).
``--ablations`` adds one-change variants of the stream default (:data:`VARIANTS`); ``--gpm-kernels``
adds a hold-out comparison of GPM kernels with and without a constant item-kernel term;
``--gpm-kernels-only`` runs just that comparison (plus 5-fold CV on chameleons) and writes
``gpm_kernels.txt`` (last line ``sets=… min_auc_auto_minus_linear=… min_auc_auto_minus_gpm=… min_auc_auto_minus_upm=…``).

The last line is ``datasets=… min_gap_auc=… max_gap_logloss=… merge_gap_p12=… table1_max_gap=… events_per_s=…``
(gap = cap-stream − linear-bt over the data sets; merge gap = AUC(P=1) − AUC(P=12) of cap-stream).

Reproduce::

    python bench/quality_real.py --ablations --gpm-kernels --out bench/results
    python bench/quality_real.py --gpm-kernels-only --out bench/results
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from learners.capacity import CapacityRDA  # noqa: E402
from learners.capacity_stream import CapacityLogistic  # noqa: E402
from learners.linear import LinearBT  # noqa: E402
from learners.metrics import cross_entropy, roc_auc  # noqa: E402
from stream.adapters import load_dataset  # noqa: E402
from stream.adapters.mcda import MCDA_SETS  # noqa: E402
from stream.demo import default_model_params  # noqa: E402

#: Ablations of the stream default (``--ablations``): one change each against ``cap-stream``.
VARIANTS = {
    "rda": {"optimizer": "adagrad-rda"},          # AdaGrad dual averaging instead of mirror descent
    "minmax": {"scaler": "minmax"},               # min-max scaling onto [0, 1] instead of standardisation
    "no-pen": {"interaction_l1": 0.0},            # interactions unpenalised
    "c2": {"interaction_l1": 2.0},                # half the interaction penalty
    "k1": {"k_additive": 1},                      # additive model only
    "k2": {"k_additive": 2},                      # 2-additive also for n ≤ 7 (the default there is the full model)
    "full": {"k_additive": None},                 # all 2**n − 1 coalitions also for 8 ≤ n ≤ 10
}

DATASETS = ["train", "pokemon", "cems", "tennis", "chameleons"] + [f"mcda-{s}" for s in MCDA_SETS]


def paper_params(ds) -> dict:
    """The demo's capacity parameters before the stream default (paper RDA / ADMM-RDA)."""
    names = list(ds.feature_names)
    dirs = getattr(ds, "criteria_directions", None) or {}
    return {"scaler": "minmax", "decreasing": [c for c in names if dirs.get(c, 1) < 0],
            "constraints": ["monotone"] if len(names) <= 10 else [], "k_additive": None if len(names) <= 6 else 2}


def make(kind: str, ds):
    names = list(ds.feature_names)
    if kind == "linear-bt":
        return LinearBT(feature_names=names)
    if kind == "cap-paper":
        return CapacityRDA(names, **paper_params(ds))
    if kind == "cap-stream" or kind.startswith("cap-stream:"):
        extra = VARIANTS[kind.split(":")[1]] if ":" in kind else {}
        return CapacityLogistic(names, **{**default_model_params(ds, ["capacity"])["capacity"], **extra})
    if kind == "gpm":
        from learners.refit import RefittingGPM

        p = dict(default_model_params(ds, ["gpm"])["gpm"], min_train=50)   # 50: a fit on chameleons' 106 events
        return RefittingGPM(names, **p)
    raise ValueError(kind)


def progressive(model, XL, XR, Y, names) -> np.ndarray:
    """Predict-then-learn, event by event; returns P(left preferred) before each event was learned."""
    P = np.empty(len(Y))
    refit = hasattr(model, "wants_refit")
    for i in range(len(Y)):
        a, b = dict(zip(names, XL[i].tolist())), dict(zip(names, XR[i].tolist()))
        P[i] = model.predict_proba_one(a, b)[1] if not refit or model.model is not None else 0.5  # GPM before its first fit: ½
        model.learn_one(a, b, int(Y[i]))
        if refit and model.wants_refit():
            model.refit()
    return P


def scores(Y, P) -> tuple[float, float]:
    return roc_auc(Y, P), cross_entropy(Y, P)


def merge_table(P_list, n_train=20000, n_test=4000, kinds=("linear-bt", "cap-stream", "cap-stream:rda")) -> dict:
    from stream.registry import merge_learners

    ds = load_dataset("pokemon")
    names = list(ds.feature_names)
    XL, XR, Y = ds.XL, ds.XR, ds.outcome
    te = slice(n_train, n_train + n_test)
    out = {}
    for kind in kinds:
        model_name = "linear-bt" if kind == "linear-bt" else "capacity"
        for P in P_list:
            parts = []
            for p in range(P):
                idx = np.arange(p, n_train, P)
                m = make(kind, ds)
                m.learn_many(XL[idx], XR[idx], Y[idx])
                parts.append((m, len(idx)))
            merged = merge_learners(model_name, parts)
            g = merged.margin_many(XL[te], XR[te]) if kind != "linear-bt" else merged.margin(XL[te], XR[te])
            out[kind, P] = roc_auc(Y[te], g)
    return out


def table1_gap(seeds: int = 5) -> dict:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from capacity_paper import draw_capacity, draw_pairs  # noqa: E402
    from learners._mobius import capacity_from_mobius

    out = {}
    for n, T in ((10, 500), (15, 750), (20, 1000)):
        acc = {1: [], 16: []}
        for seed in range(seeds):
            rng = np.random.default_rng(seed)
            idx, m_true = draw_capacity(n, rng)
            v = capacity_from_mobius(m_true, idx)
            X, Yp, lab, _ = draw_pairs(v, n, T, rng)
            Xt, Yt, _, clean = draw_pairs(v, n, 500, rng)
            for mb in acc:
                model = CapacityLogistic([f"c{i}" for i in range(n)], minibatch=mb)
                model.learn_many(X, Yp, lab)
                acc[mb].append(float(np.mean(np.sign(model.margin_many(Xt, Yt)) == clean)))
        out[n] = (float(np.mean(acc[1])), float(np.mean(acc[16])))
    return out


def speed(batch: int = 500, n_events: int = 20000, repeats: int = 3) -> dict:
    """``learn_many`` events/s in batches of ``batch`` on Pokémon (26 criteria), with the linear-bt anchor and the
    paper's RDA (former demo parameters) measured in the same run: the whole-run rate (best of ``repeats``) and
    the rate at the median batch time (less sensitive to the other jobs on a shared machine), and the rate in CPU
    seconds of this process (``time.process_time``, with OMP_NUM_THREADS=1: what an idle core would do, as
    bench/capacity_paper.py times)."""
    ds = load_dataset("pokemon")
    XL, XR, Y = ds.XL[:n_events], ds.XR[:n_events], ds.outcome[:n_events]
    out = {}
    for kind in ("cap-stream", "linear-bt", "cap-paper"):
        best, best_cpu, per_batch = math.inf, math.inf, []
        for _ in range(repeats):
            m = make(kind, ds)
            t_run, c_run = time.perf_counter(), time.process_time()
            for s in range(0, n_events, batch):
                t0 = time.perf_counter()
                m.learn_many(XL[s:s + batch], XR[s:s + batch], Y[s:s + batch])
                per_batch.append(time.perf_counter() - t0)
            best = min(best, time.perf_counter() - t_run)
            best_cpu = min(best_cpu, time.process_time() - c_run)
        out[kind] = (n_events / best, batch / float(np.median(per_batch)), n_events / best_cpu)
    out["load"] = os.getloadavg()[0]
    return out


GPM_KERNELS = {"gpm": 0.0, "gpm+c1": 1.0, "gpm+c10": 10.0, "gpm+c100": 100.0, "gpm+auto": "auto"}
GPM_CONSTANT_GRID = (0.0, 1.0, 10.0, 100.0)


def gpm_kernels(names_sets=("chameleons", "tennis", "train", "pokemon"), max_events=4000, selection="holdout") -> dict:
    """Hold-out AUC / log loss of GPM with item kernel (c + k_RBF)/√(1+c) (c = 0: pure k_E; c = 1, 10, 100;
    c selected), UPM, linear-bt, capacity stream default.

    The item kernel gives the pair kernel (k_E + c·k_UPM)/(1 + c), whose RKHS contains UPM's
    f(a) − f(b) (``GPM(item_constant=c)``; ``item_constant="auto"`` selects c in
    :data:`GPM_CONSTANT_GRID` with λ and the length-scale multiplier by ``selection``; UPM uses the
    same ``selection``). First ``max_events`` events, first 70 % train, last 30 % test.
    """
    import torch

    from learners.gpm import GPM, UPM

    out = {}
    for name in names_sets:
        ds = load_dataset(name)
        T = min(len(ds), max_events)
        XL, XR, Y = ds.XL[:T], ds.XR[:T], ds.outcome[:T]
        ntr = int(0.7 * T)
        tr, te = slice(0, ntr), slice(ntr, T)
        common = dict(penalty_grid=(1e-3, 1e-4, 1e-5, 1e-6), multiplier_grid=(0.5, 1.0, 2.0), max_centres=1000,
                      selection=selection)
        models = [(label, GPM, dict(item_constant=c, constant_grid=GPM_CONSTANT_GRID)) for label, c in GPM_KERNELS.items()]
        for label, cls, kw in models + [("upm", UPM, {})]:
            torch.manual_seed(0)
            t0 = time.perf_counter()
            m = cls(list(ds.feature_names), **common, **kw).fit(XL[tr], XR[tr], Y[tr])
            g = m.decision_function(XL[te], XR[te])
            out[name, label] = (roc_auc(Y[te], g), cross_entropy(Y[te], 0.5 * (1 + np.tanh(0.5 * g))))
            out[name, label, "c"] = getattr(m, "item_constant_", 0.0)
            out[name, label, "s"] = time.perf_counter() - t0
        for label in ("linear-bt", "cap-stream"):
            m = make(label, ds)
            m.learn_many(XL[tr], XR[tr], Y[tr])
            g = m.margin(XL[te], XR[te]) if label == "linear-bt" else m.margin_many(XL[te], XR[te])
            out[name, label] = (roc_auc(Y[te], g), cross_entropy(Y[te], 0.5 * (1 + np.tanh(0.5 * g))))
        out[name, "T"] = T
        print(name, selection, {"|".join(map(str, k[1:])): v for k, v in out.items() if k[0] == name},
              f"load {os.getloadavg()[0]:.2f}", flush=True)
    return out


def gpm_linear_kernels(names_sets=("chameleons", "train", "tennis"), max_events=4000, gammas=(1.0, 10.0)) -> list[str]:
    """Measurement only (not a model option): GPM with a linear term in the item kernel,
    k(x, y) = (c + γ⟨x, y⟩/d + k_RBF(x, y)) / √(1 + c + γ) on scaled features (pair kernel
    k(a,c)k(b,d) − k(a,d)k(b,c)), c = 0 or selected in :data:`GPM_CONSTANT_GRID`; same protocol as
    :func:`gpm_kernels` (hold-out). Returns one printed line per set.
    """
    import torch

    from learners.gpm import GPM
    from learners.kernels import PairKernel, _sqdist_scaled

    class LinPair(PairKernel):
        gamma = 1.0

        def to(self, dtype, device):
            b = PairKernel.to(self, dtype, device)
            k = LinPair(b.kind, b.lengthscales, b.context_lengthscales, b.constant)
            k.gamma = self.gamma
            return k

        def __call__(self, Z1, Z2):
            d, ls = self.d, self.lengthscales.to(dtype=Z1.dtype, device=Z1.device)
            L1, R1, L2, R2 = Z1[:, :d], Z1[:, d:2 * d], Z2[:, :d], Z2[:, d:2 * d]
            c, g = float(self.constant), self.gamma / d
            k = lambda A, B: c + g * (A @ B.T) + torch.exp(-0.5 * _sqdist_scaled(A, B, ls))  # noqa: E731
            return (k(L1, L2) * k(R1, R2) - k(L1, R2) * k(R1, L2)) / (1 + c + self.gamma)

    def model(gamma):
        class LinGPM(GPM):
            def _kernel(self, ls, lsu=None, constant=0.0):
                b = super()._kernel(ls, lsu, constant)
                k = LinPair(b.kind, b.lengthscales, b.context_lengthscales, b.constant)
                k.gamma = gamma
                return k
        return LinGPM

    lines = []
    for name in names_sets:
        ds = load_dataset(name)
        T = min(len(ds), max_events)
        ntr = int(0.7 * T)
        XL, XR, Y = ds.XL[:T], ds.XR[:T], ds.outcome[:T]
        res = []
        for gamma in gammas:
            for c in (0.0, "auto"):
                torch.manual_seed(0)
                m = model(gamma)(list(ds.feature_names), penalty_grid=(1e-3, 1e-4, 1e-5, 1e-6), multiplier_grid=(0.5, 1.0, 2.0),
                                 max_centres=1000, item_constant=c, constant_grid=GPM_CONSTANT_GRID).fit(XL[:ntr], XR[:ntr], Y[:ntr])
                g = m.decision_function(XL[ntr:], XR[ntr:])
                res.append(f"lin{gamma:g},c={c}->{m.item_constant_:g}: {roc_auc(Y[ntr:], g):.4f}/"
                           f"{cross_entropy(Y[ntr:], 0.5 * (1 + np.tanh(0.5 * g))):.3f}")
        lines.append(f"{name} " + " | ".join(res) + f" load {os.getloadavg()[0]:.2f}")
        print(lines[-1], flush=True)
    return lines


def gpm_kernel_lines(gk: dict, gk_cv: dict | None, load: float) -> list[str]:
    """The GPM-kernel tables (hold-out selection on every set; 5-fold CV on chameleons) and the last line."""
    labels = tuple(GPM_KERNELS) + ("upm", "linear-bt", "cap-stream")
    sets = [k[0] for k in gk if len(k) == 2 and k[1] == "T"]
    out = [f"GPM item kernel (c + k_RBF)/sqrt(1+c) (pair kernel (k_E + c·k_UPM)/(1+c)); gpm+auto selects c in "
           f"{GPM_CONSTANT_GRID} with λ and the multiplier; load average {load:.2f}", ""]
    for sel, res in (("hold-out", gk), ("5-fold CV", gk_cv)):
        if not res:
            continue
        names = [k[0] for k in res if len(k) == 2 and k[1] == "T"]
        out += [f"| test AUC / log loss (first ≤ 4,000 events, 70/30; selection: {sel}) | " + " | ".join(labels) + " | c selected |",
                "|---|" + "---|" * (len(labels) + 1)]
        for name in names:
            out.append(f"| {name} ({res[name, 'T']}) | " + " | ".join(f"{res[name, k][0]:.4f} / {res[name, k][1]:.4f}" for k in labels)
                       + f" | {res[name, 'gpm+auto', 'c']:g} |")
        out.append("")
    d_lin = min(gk[n, "gpm+auto"][0] - gk[n, "linear-bt"][0] for n in sets)
    d_gpm = min(gk[n, "gpm+auto"][0] - gk[n, "gpm"][0] for n in sets)
    d_upm = min(gk[n, "gpm+auto"][0] - gk[n, "upm"][0] for n in sets)
    out.append(f"sets={len(sets)} min_auc_auto_minus_linear={d_lin:.4f} min_auc_auto_minus_gpm={d_gpm:.4f} "
               f"min_auc_auto_minus_upm={d_upm:.4f}")
    return out


def main(argv=None) -> None:
    from stream import load_builtins

    load_builtins()  # the registry knows no model until the built-ins are registered
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="*", default=DATASETS)
    ap.add_argument("--max-events", type=int, default=20000)
    ap.add_argument("--gpm-sets", nargs="*", default=["chameleons", "train", "tennis", "cems"])
    ap.add_argument("--gpm-events", type=int, default=1500)
    ap.add_argument("--merge-P", nargs="*", type=int, default=[1, 4, 12])
    ap.add_argument("--no-table1", action="store_true")
    ap.add_argument("--ablations", action="store_true", help="also run the VARIANTS of the stream default")
    ap.add_argument("--gpm-kernels", action="store_true", help="also measure GPM with a constant item-kernel term")
    ap.add_argument("--gpm-kernel-sets", nargs="*", default=["chameleons", "tennis", "train", "pokemon"])
    ap.add_argument("--gpm-linear", action="store_true",
                    help="only the GPM linear-item-kernel measurement (chameleons, Train, tennis; hold-out)")
    ap.add_argument("--gpm-kernels-only", action="store_true",
                    help="only the GPM-kernel comparison (hold-out on --gpm-kernel-sets, 5-fold CV on chameleons); "
                         "writes gpm_kernels.txt with --out")
    ap.add_argument("--no-speed", action="store_true")
    ap.add_argument("--speed-only", action="store_true", help="only the speed section (last line events_per_s=…)")
    ap.add_argument("--out", default=None, help="write quality.md / quality.txt into this folder")
    args = ap.parse_args(argv)
    if args.gpm_linear:
        gpm_linear_kernels()
        return
    if args.gpm_kernels_only:
        gk = gpm_kernels(args.gpm_kernel_sets)
        gk_cv = gpm_kernels(("chameleons",), selection="cv") if "chameleons" in args.gpm_kernel_sets else None
        text = gpm_kernel_lines(gk, gk_cv, os.getloadavg()[0])
        print("\n".join(text))
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            with open(os.path.join(args.out, "gpm_kernels.txt"), "w") as fh:
                fh.write("\n".join(text) + "\n")
        return

    lines = []

    def emit(s=""):
        print(s, flush=True)
        lines.append(s)

    t_start = time.time()
    if args.speed_only:
        sp = speed()
        print(f"# learn_many, batches of 500, Pokémon (26 criteria; cap-stream 2-additive: 351 masses), load average "
              f"{sp['load']:.2f}; events/s wall-clock whole run (best of 3) / at the median batch time / per CPU second:")
        for k in ("cap-stream", "linear-bt", "cap-paper"):
            print(f"# {k}: {sp[k][0]:,.0f} / {sp[k][1]:,.0f} / {sp[k][2]:,.0f} "
                  f"(CPU ratio to linear-bt {sp[k][2] / sp['linear-bt'][2]:.2f})")
        print(f"events_per_s={sp['cap-stream'][1]:.0f} cpu_events_per_s={sp['cap-stream'][2]:.0f} "
              f"linear_bt_cpu_events_per_s={sp['linear-bt'][2]:.0f} load={sp['load']:.2f}")
        return
    emit(f"# load average at start: {os.getloadavg()[0]:.2f}")
    emit("| data set (events) | linear-bt AUC | cap-paper AUC | cap-stream AUC | gap AUC | linear-bt LL | "
         "cap-paper LL | cap-stream LL | gap LL | GPM AUC / linear-bt / cap-stream (prefix) |")
    emit("|---|---|---|---|---|---|---|---|---|---|")
    gaps_auc, gaps_ll = [], []
    abl = {}
    for name in args.datasets:
        ds = load_dataset(name)
        T = min(len(ds), args.max_events)
        names = list(ds.feature_names)
        XL, XR, Y = ds.XL[:T], ds.XR[:T], ds.outcome[:T]
        res, probs = {}, {}
        for kind in ("linear-bt", "cap-paper", "cap-stream"):
            probs[kind] = progressive(make(kind, ds), XL, XR, Y, names)
            res[kind] = scores(Y, probs[kind])
        if args.ablations:
            for v in VARIANTS:
                if (v == "full" and not 7 < len(names) <= 10) or (v == "k2" and len(names) > 7):
                    continue
                abl[name, v] = scores(Y, progressive(make(f"cap-stream:{v}", ds), XL, XR, Y, names))
            abl[name, "stream"] = res["cap-stream"]
            abl[name, "linear-bt"] = res["linear-bt"]
        ga = res["cap-stream"][0] - res["linear-bt"][0]
        gl = res["cap-stream"][1] - res["linear-bt"][1]
        gaps_auc.append(ga)
        gaps_ll.append(gl)
        gpm = "—"
        if name in args.gpm_sets:
            Tg = min(T, args.gpm_events)
            Pg = progressive(make("gpm", ds), XL[:Tg], XR[:Tg], Y[:Tg], names)
            gpm = (f"{roc_auc(Y[:Tg], Pg):.3f} / {roc_auc(Y[:Tg], probs['linear-bt'][:Tg]):.3f} / "
                   f"{roc_auc(Y[:Tg], probs['cap-stream'][:Tg]):.3f} (first {Tg})")
        emit(f"| {name} ({T}) | {res['linear-bt'][0]:.4f} | {res['cap-paper'][0]:.4f} | {res['cap-stream'][0]:.4f} | "
             f"{ga:+.4f} | {res['linear-bt'][1]:.4f} | {res['cap-paper'][1]:.4f} | {res['cap-stream'][1]:.4f} | "
             f"{gl:+.4f} | {gpm} |")
    emit(f"# load average after the progressive runs: {os.getloadavg()[0]:.2f}")
    if args.ablations:
        cols = ["stream"] + list(VARIANTS)
        emit()
        emit("| AUC − linear-bt AUC / log loss − linear-bt log loss | " + " | ".join(cols) + " |")
        emit("|---|" + "---|" * len(cols))
        for name in args.datasets:
            ref = abl[name, "linear-bt"]
            cells = [f"{abl[name, c][0] - ref[0]:+.4f} / {abl[name, c][1] - ref[1]:+.4f}" if (name, c) in abl else "—"
                     for c in cols]
            emit(f"| {name} | " + " | ".join(cells) + " |")
        worst = {c: min(abl[n, c][0] - abl[n, "linear-bt"][0] for n in args.datasets if (n, c) in abl) for c in cols}
        emit("| worst AUC gap | " + " | ".join(f"{worst[c]:+.4f}" for c in cols) + " |")

    mt = merge_table(args.merge_P)
    emit()
    emit("| Pokémon hold-out AUC (train 20,000 split by event id, test next 4,000) | " +
         " | ".join(f"P = {P}" for P in args.merge_P) + " |")
    emit("|---|" + "---|" * len(args.merge_P))
    for kind in ("linear-bt", "cap-stream", "cap-stream:rda"):
        emit(f"| {kind} | " + " | ".join(f"{mt[kind, P]:.4f}" for P in args.merge_P) + " |")
    merge_gap = mt["cap-stream", args.merge_P[0]] - mt["cap-stream", args.merge_P[-1]]

    if args.gpm_kernels:
        emit()
        for line in gpm_kernel_lines(gpm_kernels(args.gpm_kernel_sets), None, os.getloadavg()[0])[:-1]:
            emit(line)

    rate = math.nan
    if not args.no_speed:
        sp = speed()
        rate = sp["cap-stream"][1]
        emit()
        emit(f"learn_many, batches of 500, Pokémon (26 criteria; cap-stream 2-additive: 351 masses), load average "
             f"{sp['load']:.2f}; events/s wall-clock whole run (best of 3) / at the median batch time / per CPU second:")
        for k in ("cap-stream", "linear-bt", "cap-paper"):
            emit(f"* {k}: {sp[k][0]:,.0f} / {sp[k][1]:,.0f} / {sp[k][2]:,.0f} "
                 f"(CPU ratio to linear-bt {sp[k][2] / sp['linear-bt'][2]:.2f})")

    t1_gap = math.nan
    if not args.no_table1:
        t1 = table1_gap()
        emit()
        emit("| Table 1 cell (noise-free test accuracy, 5 seeds) | minibatch=1 (= learn_one loop) | minibatch=16 | gap |")
        emit("|---|---|---|---|")
        for n, (a1, a16) in t1.items():
            emit(f"| n = {n} | {a1:.4f} | {a16:.4f} | {a1 - a16:+.4f} |")
        t1_gap = max(abs(a1 - a16) for a1, a16 in t1.values())
    emit(f"# load average at end: {os.getloadavg()[0]:.2f}; wall {time.time() - t_start:.0f} s")
    emit(f"datasets={len(args.datasets)} min_gap_auc={min(gaps_auc):.4f} max_gap_logloss={max(gaps_ll):.4f} "
         f"merge_gap_p12={merge_gap:.4f} table1_max_gap={t1_gap:.4f} events_per_s={rate:.0f}")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "quality.txt"), "w") as fh:
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
