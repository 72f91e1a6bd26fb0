"""The batch updates of the learner's progressive metrics and loss monitor against their one-by-one oracles."""

from __future__ import annotations

import math

import numpy as np
import pytest
from river import metrics as rm
from river.drift import ADWIN

from stream.metrics import build_metrics
from stream.monitoring.monitor import LOSS_CLIP, Monitor
from stream.workers.progressive import AUC_WINDOW, new_progressive, update_progressive


def _scored(seed: int, n: int):
    rng = np.random.default_rng(seed)
    ys = (rng.random(n) < 0.5).tolist()
    ps = rng.random(n)
    ps[::17] = 0.5  # the accuracy's threshold, and the log loss's clamp at both ends
    ps[::23] = 0.0
    ps[::29] = 1.0
    ps[::31] = 1e-300
    return ys, ps.tolist()


@pytest.mark.parametrize("sizes", [[1, 2, 3], [500, 500, 7], [1000]])
def test_batch_update_leaves_the_state_of_one_update_per_event(sizes):
    ys, ps = _scored(sum(sizes), sum(sizes))
    acc, ll, auc = rm.Accuracy(), rm.LogLoss(), rm.RollingROCAUC(window_size=AUC_WINDOW)
    for y, p in zip(ys, ps):
        acc.update(y, p > 0.5)
        ll.update(y, p)
        auc.update(y, p)
    batched = new_progressive()
    k = 0
    for n in sizes:
        update_progressive(*batched, ys[k:k + n], ps[k:k + n])
        k += n
    b_acc, b_ll, b_auc = batched
    assert b_acc.get() == acc.get() and b_ll.get() == ll.get() and b_auc.get() == auc.get()  # bit for bit
    assert b_acc.cm.n_samples == acc.cm.n_samples == len(ys) and b_acc.cm.total_weight == acc.cm.total_weight
    assert {y: dict(r) for y, r in b_acc.cm.data.items()} == {y: dict(r) for y, r in acc.cm.data.items()}
    assert (b_ll._mean.n, b_ll._mean._mean) == (ll._mean.n, ll._mean._mean)


def _reference_alarms(ys, ps, warmup: int, delta: float = 1e-3) -> list[tuple]:
    """The loss monitor's rule through river's public ADWIN API, one event at a time:
    (scored events, dropped, kept, mean before, mean after) of each alarm."""
    det, out = ADWIN(delta=delta), []
    for k, (y, p) in enumerate(zip(ys, ps), start=1):
        p = min(max(float(p), 1e-12), 1 - 1e-12)
        loss = min(-math.log(p if y else 1.0 - p), LOSS_CLIP) / LOSS_CLIP
        if k == warmup + 1:
            det = ADWIN(delta=delta)
        w0, m0 = det.width, det.estimation
        det.update(loss)
        if not det.drift_detected or k <= warmup:
            continue
        w1, m1 = det.width, det.estimation
        dropped = w0 + 1 - w1
        if dropped <= 0:
            continue
        m_old = (m0 * w0 + loss - m1 * w1) / dropped
        if m1 > m_old:
            out.append((k, int(dropped), int(w1), LOSS_CLIP * m_old, LOSS_CLIP * m1))
    return out


def test_loss_monitor_batches_raise_the_alarms_of_the_public_adwin_one_by_one():
    rng = np.random.default_rng(3)
    ys, ps = [], []
    for n, acc in ((3000, 0.6), (3000, 0.9), (3000, 0.6), (2000, 0.95), (2000, 0.55)):
        for _ in range(n):
            y = bool(rng.random() < 0.5)
            ys.append(y)
            ps.append(acc if (y == (rng.random() < acc)) else 1 - acc)
    expect = _reference_alarms(ys, ps, warmup=500)
    assert len(expect) >= 2
    for step in (1, 500, 777):
        mon = Monitor(build_metrics(), loss_warmup=500)
        got = [r for k in range(0, len(ys), step) for r in mon.observe_losses("lin", ys[k:k + step], ps[k:k + step])]
        assert [(r["position"], r["windows"]["reference"], r["windows"]["current"], r["statistic"]["before"],
                 r["statistic"]["after"]) for r in got] == expect
