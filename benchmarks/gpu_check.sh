#!/usr/bin/env bash
# GPU check, under 8 minutes on one GPU (each step has its own time limit, 460 s in all):
#   1. the CUDA tests (pytest -k "cuda or gpu"),
#   2. the NTK benchmark on the GPU beside the CPU (benchmarks/bench_ntk.py --quick on both, then on the
#      GPU the 13,138-image MNIST 5/8 Gram matrix of the width-10,000 two-layer net),
#   3. a timed slice of Setting 1's `full` profile (all 11,272 training images and the 1,866 test images,
#      width 10,000, one noise level, one λ, one seed, 500 GD steps: GD, RDI and AUX) and its extrapolation
#      to the whole full profile (5 noise levels x 13 training runs x 3 seeds x 5,000 steps), printed as
#      "ESTIMATE".
# Usage, from the repository root:  NTK_CORE_DATA=/path/to/data bash benchmarks/gpu_check.sh
# Without a CUDA GPU it says so and exits with status 2. The log goes to stdout and to $OUT/gpu_check.log
# (/tmp/gpu_check.log when OUT is not set).
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python
LOG="${OUT:-/tmp}/gpu_check.log"
exec > >(tee "$LOG") 2>&1

if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "gpu_check: PyTorch sees no CUDA GPU on this machine; nothing to check (run it on a GPU machine)."
    exit 2
fi
"$PY" -c 'import torch; print("GPU:", torch.cuda.get_device_name(), "| torch", torch.__version__, "| CUDA", torch.version.cuda)'
status=0

echo "== 1. CUDA tests (limit 60 s)"
timeout 60 "$PY" -m pytest -q -k "cuda or gpu" tests/test_ntk.py tests/test_train.py tests/test_nets.py \
    tests/test_experiments.py || status=1

echo "== 2a. NTK benchmark, CPU (--quick --no-mnist, limit 60 s)"
timeout 60 "$PY" benchmarks/bench_ntk.py --quick --no-mnist --device cpu || status=1
echo "== 2b. NTK benchmark, GPU (--quick, with the MNIST 5/8 Gram matrix at width 10,000, limit 120 s)"
timeout 120 "$PY" benchmarks/bench_ntk.py --quick --device cuda || status=1

echo "== 3. timed slice of the full profile of Setting 1 (limit 220 s)"
timeout 220 "$PY" - <<'PYTHON' || status=1
import os, tempfile
os.environ["NTK_CORE_CACHE"] = tempfile.mkdtemp()
from ntk_core import experiments

full = experiments.make_config("setting1", "full")
steps = 500
# recorded into a temporary folder: a record keeps each unit's compute time beside the total wall time
r = experiments.record("setting1", "full", root=tempfile.mkdtemp(), noise_levels=(0.2,), lams=(1.0,),
                       seeds=(0,), steps=steps)
m = r.meta
print(f"slice: {steps} steps x {m['units']} runs (GD, RDI, AUX) on {m['data']}: wall {m['wall_time_s']:.1f} s, "
      f"training {m['unit_seconds_total']:.1f} s", flush=True)
per_step = m["unit_seconds_total"] / (steps * m["units"])  # one GD step of one training run
fixed = m["wall_time_s"] - m["unit_seconds_total"]          # data, NTK of 13,138 images, eigvalsh, KRR
runs = len(full.noise_levels) * (1 + 2 * len(full.lams)) * len(full.seeds)
# per seed: the NTK and its top eigenvalue once, KRR once per noise level (counted as 1.5 x the slice's fixed)
estimate = len(full.seeds) * 1.5 * fixed + runs * full.steps * per_step
print(f"per GD step {per_step * 1e3:.2f} ms, fixed per seed {fixed:.1f} s")
print(f"ESTIMATE full setting1 ({runs} runs x {full.steps} steps, {len(full.seeds)} seeds): {estimate / 60:.1f} min")
PYTHON

echo "gpu_check: done (status $status); log in $LOG"
exit $status
