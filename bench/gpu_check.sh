#!/usr/bin/env bash
# One prepared check of FALKON / the GPM refit on a lent GPU (bench/results/falkon.md, "GPU" section).
#
#   bench/gpu_check.sh            # on the device machine, from the repository root, $OUT set
#   bench/gpu_check.sh --dry-run  # here, on the CPU, tiny sizes: catches typos before device time is spent
#   bench/gpu_check.sh --fixes    # on the device, short: the tests and the two figures the CUDA fixes move
#
# pytest runs with --noconftest: tests/conftest.py imports the stream package (jsonschema, Kafka
# clients), which the device image lacks; the files run here need none of its fixtures.
#
# Steps, most important first; each runs under its own `timeout`, and a step is skipped (or cut
# short) once the whole script nears DEADLINE seconds (default 420), so the command always ends
# inside the device call's limit. Everything printed goes to $OUT/log; one line per step to
# $OUT/summary.txt. Python wheels the device image lacks (river, for RefittingGPM's ADWIN) are
# installed from .whl/ when that folder is there (see /work/.library/device/README.md).
set -u -o pipefail
export PYTHONUNBUFFERED=1
DRY=0
MODE=${1:-full}
[ "$MODE" = "--dry-run" ] && DRY=1
OUT=${OUT:-/tmp/gpu_check_out}
mkdir -p "$OUT"
LOG=$OUT/log
SUMMARY=$OUT/summary.txt
: >"$LOG"
: >"$SUMMARY"
PY=${PY:-python3}
DEADLINE=${DEADLINE:-420}

step() {  # step NAME LIMIT_S COMMAND...
    local name=$1 limit=$2 left rc t0
    shift 2
    left=$((DEADLINE - SECONDS))
    if [ "$left" -lt 20 ]; then
        echo "=== $name SKIPPED (deadline: ${left}s left)" | tee -a "$LOG" "$SUMMARY"
        return 0
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    echo "=== $name (timeout ${limit}s, t=${SECONDS}s, load $(cut -d' ' -f1-3 /proc/loadavg)): $*" | tee -a "$LOG"
    t0=$SECONDS
    timeout -k 5 "$limit" "$@" 2>&1 | tee -a "$LOG"
    rc=${PIPESTATUS[0]}
    echo "=== $name rc=$rc $((SECONDS - t0))s" | tee -a "$LOG"
    echo "$name rc=$rc $((SECONDS - t0))s (limit ${limit}s)" >>"$SUMMARY"
    return 0
}

{
    echo "# gpu_check $(date -u +%FT%TZ) dry=$DRY host=$(hostname) nproc=$(nproc)"
    uptime
    nvidia-smi -L 2>&1 || echo "no nvidia-smi"
    nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv 2>&1 || true
} | tee -a "$LOG"

if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1 && [ "$DRY" = 0 ]; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tee -a "$LOG"
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
$PY - <<'EOF' 2>&1 | tee -a "$LOG"
import sys, numpy, scipy, torch
print("python", sys.version.split()[0], "numpy", numpy.__version__, "scipy", scipy.__version__, "torch", torch.__version__,
      "cuda", torch.version.cuda, "available", torch.cuda.is_available(), "threads", torch.get_num_threads())
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print("gpu", p.name, f"{p.total_memory / 2**30:.0f} GiB", p.multi_processor_count, "SMs",
          "tf32 matmul", torch.backends.cuda.matmul.allow_tf32, "float32_matmul_precision", torch.get_float32_matmul_precision())
try:
    import river
    print("river", river.__version__)
except ImportError as exc:
    print("river missing:", exc)
EOF

FS="bench/falkon_scaling.py --centre-factor 15 --iters 30"
if [ "$DRY" = 1 ]; then
    DEV=cpu
    step tests_device 120 $PY -m pytest -q -p no:cacheprovider --noconftest tests/test_falkon_device.py
    step gpu_small 60 $PY $FS --device $DEV --sizes 500 1000 --dense-max 1000
    step gpu_large 60 $PY $FS --device $DEV --sizes 1000 2000 --dense-max 0 --max-centres 300 --cache-mb 40000
    step cpu16_small 60 $PY $FS --device cpu --sizes 500 1000
    step refit_both 120 $PY bench/refit_device.py --devices cpu --windows 200 300 --n-test 500
    step gpu_nocache 60 $PY $FS --device $DEV --sizes 2000 --dense-max 0 --max-centres 300 --cache-mb 0
    step gpu_nocache_block 60 $PY $FS --device $DEV --sizes 2000 --dense-max 0 --max-centres 300 --cache-mb 0 --block-size 16384
    step refit_gpu_big 60 $PY bench/refit_device.py --devices cpu --windows 400 --n-test 500
    step tests_cpu 60 $PY -m pytest -q -p no:cacheprovider --noconftest tests/test_falkon.py -k "closed_form or exact_krr"
elif [ "$MODE" = "--fixes" ]; then
    step tests 120 $PY -m pytest -q -p no:cacheprovider --noconftest -rs tests/test_falkon_device.py tests/test_falkon.py
    step gpu_nocache 60 $PY $FS --device cuda --sizes 1000000 --dense-max 0 --max-centres 5000 --cache-mb 0
    step refit_both 100 $PY bench/refit_device.py --devices cpu cuda --windows 2000
else
    # 1. correctness on CUDA: closed form in float64, float32 vs float64 CPU, the refit's device and dtype
    step tests_device 90 $PY -m pytest -q -p no:cacheprovider --noconftest -rs tests/test_falkon_device.py
    # 2. the results page's first command on the GPU, exact solver up to 50,000 (fits in GPU memory)
    step gpu_small 90 $PY $FS --device cuda --sizes 1000 2000 5000 10000 20000 50000 --dense-max 50000
    # 3. the second command, grown to 10^6 pairs; K_nM cached on the GPU (20 GB at n = 10^6, M = 5,000)
    step gpu_large 120 $PY $FS --device cuda --sizes 5000 10000 20000 50000 100000 200000 500000 1000000 \
        --dense-max 0 --max-centres 5000 --cache-mb 40000 --time-budget 100
    # 4. the CPU of the same machine (16 cores), the page's first command, for the ratio
    step cpu16_small 90 $PY $FS --device cpu --sizes 1000 2000 5000 10000 20000
    # 5. the refit itself: grid search + fixed point, CPU vs CUDA
    step refit_both 100 $PY bench/refit_device.py --devices cpu cuda --windows 1000 2000
    # 6. no cache at 10^6: K_nM recomputed every product, default block (~560 rows) vs 16,384 rows
    step gpu_nocache 60 $PY $FS --device cuda --sizes 1000000 --dense-max 0 --max-centres 5000 --cache-mb 0
    step gpu_nocache_block 45 $PY $FS --device cuda --sizes 1000000 --dense-max 0 --max-centres 5000 --cache-mb 0 --block-size 16384
    # 7. larger refit windows on CUDA only
    step refit_gpu_big 60 $PY bench/refit_device.py --devices cuda --windows 5000 20000
    # 8. the CPU unit tests of the solver under the image's torch
    step tests_cpu 45 $PY -m pytest -q -p no:cacheprovider --noconftest tests/test_falkon.py
fi
nvidia-smi --query-gpu=memory.used,clocks.sm,temperature.gpu,power.draw --format=csv 2>&1 | tee -a "$LOG" || true
echo "# total ${SECONDS}s" | tee -a "$LOG" "$SUMMARY"
cat "$SUMMARY"
