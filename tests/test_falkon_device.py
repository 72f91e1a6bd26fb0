"""FALKON, GPM and the refitting GPM on every torch device present: CPU always, CUDA when there is one.

The CUDA cases skip on a machine without a GPU (CI has none); ``bench/gpu_check.sh`` runs this file
on a lent GPU. Oracles: the Nyström closed form ``α = (K_nMᵀ K_nM + λ n K_MM)^† K_nMᵀ y`` (Rudi,
Carratino & Rosasco 2017, Sec. 2) computed in float64 on the CPU, and the float64 CPU fit of the same
GPM (Hu, Chau et al. 2022, Sec. 2.1) for the float32 fits a refit makes on CUDA.
"""

import numpy as np
import pytest
import torch

from learners.falkon import Falkon
from learners.gpm import GPM
from learners.kernels import PairKernel
from learners.metrics import roc_auc
from learners.refit import RefittingGPM

HAS_CUDA = torch.cuda.is_available()
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device here"))]


def _duels(n, seed=0):
    """Intransitive duels on 3 features: feature 0 decides when both items have feature 2 > 0, else feature 1."""
    rng = np.random.default_rng(seed)
    A, B = rng.normal(size=(n, 3)), rng.normal(size=(n, 3))
    dec = np.where((A[:, 2] > 0) & (B[:, 2] > 0), 0, 1)
    y = np.where(A[np.arange(n), dec] > B[np.arange(n), dec], 1, -1)
    return A, B, y


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("cache", [0, 2**30])
def test_float64_falkon_on_device_equals_the_nystrom_closed_form(device, cache):
    A, B, y = _duels(400)
    Z = torch.tensor(np.c_[A, B], dtype=torch.float64)
    yt = torch.tensor(y, dtype=torch.float64)
    kern = PairKernel("gpm", torch.ones(3, dtype=torch.float64))
    lam, M = 1e-4, 60
    m = Falkon(kern, penalty=lam, n_centres=M, tol=1e-14, max_iter=300, device=device, block_size=97,
               cache_bytes=cache).fit(Z, yt)
    assert m.alpha_.device.type == device and m.alpha_.dtype == torch.float64
    C = Z[m.centre_indices_]
    KnM, KMM = kern(Z, C), kern(C, C)
    alpha = torch.linalg.pinv(KnM.T @ KnM + lam * Z.shape[0] * KMM, hermitian=True) @ (KnM.T @ yt)
    pred, ref = m.predict(Z).cpu(), KnM @ alpha
    assert float((pred - ref).norm() / ref.norm()) == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_float32_gpm_on_device_is_close_to_the_float64_cpu_fit(device):
    """A refit on CUDA fits in float32 (learners.refit): its margins stay within 5 % (relative L2) of the
    float64 CPU fit at λ = 1e-4 (about 2 % measured on the CPU) and its test AUC within 0.005."""
    A, B, y = _duels(800, seed=1)
    fix = dict(penalty=1e-4, lengthscale_multiplier=1.0, item_constant=0.0, validation_fraction=0.0, n_centres=200)
    ref = GPM(dtype="float64", device="cpu", **fix).fit(A[:600], B[:600], y[:600])
    m = GPM(dtype="float32", device=device, **fix).fit(A[:600], B[:600], y[:600])
    np.testing.assert_allclose(m.centres_left_, ref.centres_left_, rtol=1e-6, atol=1e-6)
    g_ref, g = ref.decision_function(A[600:], B[600:]), m.decision_function(A[600:], B[600:])
    assert g.dtype == np.float64 and g.shape == (200,)
    assert float(np.linalg.norm(g - g_ref) / np.linalg.norm(g_ref)) == pytest.approx(0.0, abs=0.05)
    assert roc_auc(y[600:], g) == pytest.approx(roc_auc(y[600:], g_ref), abs=0.005)


@pytest.mark.parametrize("device", [None] + DEVICES)
def test_refit_runs_on_the_resolved_device_and_serves_python_floats(device):
    """``device=None`` resolves to "cuda" when torch sees a GPU, else "cpu"; on CUDA the refit fits in float32."""
    A, B, y = _duels(300, seed=2)
    r = RefittingGPM(["a", "b", "c"], refit_every=None, min_train=300, device=device,
                     model_params={"penalty_grid": (1e-3, 1e-4), "multiplier_grid": (1.0,), "max_centres": 100})
    r.learn_many(A, B, y)
    info = r.refit()
    want = device or ("cuda" if HAS_CUDA else "cpu")
    assert info["device"] == want and info["n_train"] == 270  # 10 % held out for the penalty choice
    assert r.model.dtype == ("float32" if want == "cuda" else "float64")
    g1 = r.margin_one(dict(zip("abc", A[0])), dict(zip("abc", B[0])))
    assert type(g1) is float
    g = r.margin_many(A, B)
    assert g.dtype == np.float64 and g[0] == pytest.approx(g1, rel=1e-5, abs=1e-6)
    assert roc_auc(y, g) > 0.8


@pytest.mark.parametrize("device", DEVICES)
def test_kernel_blocks_are_sized_for_the_device(device):
    """~6 temporaries of ``rows × M`` within 64 MiB on the CPU, 2 GiB (at most 1/8 of free memory) on CUDA."""
    from learners.falkon import BLOCK_BYTES, default_block_size

    assert default_block_size(5000, 4, "cpu") == 64 * 2**20 // (6 * 5000 * 4) == 559
    assert default_block_size(10**7, 8, "cpu") == 256 and default_block_size(1, 4, "cpu") == 65536
    budget = BLOCK_BYTES[torch.device(device).type]
    if device == "cuda":
        budget = min(budget, torch.cuda.mem_get_info()[0] // 8)
    assert default_block_size(5000, 4, device) == max(256, min(65536, budget // (6 * 5000 * 4)))
    assert Falkon(None, device=device)._block(5000, 4) == default_block_size(5000, 4, device)
    assert Falkon(None, device=device, block_size=17)._block(5000, 4) == 17


@pytest.mark.parametrize("device", DEVICES)
def test_prediction_tensors_are_built_once_per_fitted_state(device):
    A, B, y = _duels(300, seed=3)
    m = GPM(dtype="float32" if device == "cuda" else "float64", device=device, penalty=1e-3, lengthscale_multiplier=1.0,
            item_constant=1.0, validation_fraction=0.0, n_centres=50).fit(A, B, y)
    g = m.decision_function(A[:20], B[:20])
    kern, C, a = m._predictor()
    assert m._predictor()[1] is C and C.device.type == device and a.shape == (50,)
    np.testing.assert_allclose(m.decision_function(A[:20], B[:20]), g, rtol=0, atol=0)   # same tensors, same numbers
    m.alpha_ = 2.0 * m.alpha_                       # a new fitted state (a refit assigns new arrays)
    assert m._predictor()[1] is not C
    np.testing.assert_allclose(m.decision_function(A[:20], B[:20]), 2.0 * g, rtol=1e-6, atol=1e-9)
