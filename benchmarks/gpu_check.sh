#!/usr/bin/env bash
# GPU check, under 10 minutes on one GPU (each step has its own time limit, 570 s in all):
#   1. the CUDA tests (pytest -k "cuda or gpu"),
#   2. the NTK benchmark on the GPU beside the CPU (benchmarks/bench_ntk.py --quick on both, then on the
#      GPU the 13,138-image MNIST 5/8 Gram matrix of the width-10,000 two-layer net),
#   3. a timed slice of Setting 1's `full` profile (all 11,272 training images and the 1,866 test images,
#      width 10,000, one noise level, one λ, one seed, 500 GD steps: GD, RDI and AUX) and its extrapolation
#      to the whole full profile (5 noise levels x 13 training runs x 3 seeds x 5,000 steps), printed as
#      "ESTIMATE",
#   4. timed slices of the full profiles of Settings 2 and 3 on the CIFAR-10 images at hand (the paper's
#      11-layer, 192-channel network: 3 epochs of 600 images, λ = 4 only; ResNet-34: 2 epochs of 3,500
#      images, noise 0.4, CCE, with and without AUX), extrapolated to the whole full profiles ("ESTIMATE").
# Usage, from the repository root:  NTK_CORE_DATA=/path/to/data bash benchmarks/gpu_check.sh
# Steps 3 and 4 need MNIST and CIFAR-10 under $NTK_CORE_DATA. Without a CUDA GPU it says so and exits with
# status 2. The log goes to stdout and to $OUT/gpu_check.log
# (/tmp/gpu_check.log when OUT is not set).
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python
LOG="${OUT:-/tmp}/gpu_check.log"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # ntk_core from this checkout, installed or not
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

echo "== 4. timed slices of the full profiles of Settings 2 and 3 (limit 110 s)"
timeout 110 "$PY" - <<'PYTHON' || status=1
import os, tempfile
os.environ["NTK_CORE_CACHE"] = tempfile.mkdtemp()
from ntk_core import experiments


def passes(train, evaluated, epochs):
    """Image passes: a training image costs a forward and a backward pass (≈ 3 forward passes)."""
    return epochs * (3 * train + evaluated)


# Setting 2: units are training runs (SGD, AUX, RDI at lambda 4, clean runs); full: 16 runs x 100 epochs
full2 = experiments.make_config("setting2", "full")
r = experiments.record("setting2", "full", root=tempfile.mkdtemp(), n_train=600, n_val=150, lams=(4.0,),
                       clean_lams=(4.0,), epochs=3, seeds=(0,))
m = r.meta
per_run = m["unit_seconds_total"] / m["units"]
scale = passes(full2.n_train, full2.n_train + full2.n_val + 2_000, full2.epochs) / passes(600, 600 + 150 + 192, 3)
runs2 = 4 + 2 * len(full2.lams)
print(f"setting2 slice: {m['units']} runs x 3 epochs of 600 images on the GPU: {m['unit_seconds_total']:.1f} s, "
      f"wall {m['wall_time_s']:.1f} s", flush=True)
print(f"ESTIMATE full setting2 ({runs2} runs x {full2.epochs} epochs of {full2.n_train:,} images, "
      f"{len(full2.seeds)} seed): {runs2 * per_run * scale / 3600:.1f} h", flush=True)

# Setting 3: units are training runs; full: 4 noise levels x 2 losses x with/without AUX x 3 seeds
full3 = experiments.make_config("setting3", "full")
r = experiments.record("setting3", "full", root=tempfile.mkdtemp(), n_train=3_500, n_val=500, n_test=1_000,
                       noise_levels=(0.4,), losses=("ce",), epochs=2, lr_milestones=(1,), seeds=(0,))
m = r.meta
per_run = m["unit_seconds_total"] / m["units"]
scale = passes(full3.n_train, full3.n_train + full3.n_val + 10_000, full3.epochs) / passes(3_500, 5_000, 2)
runs3 = len(full3.noise_levels) * len(full3.losses) * 2 * len(full3.seeds)
print(f"setting3 slice: {m['units']} runs x 2 epochs of 3,500 images (ResNet-34) on the GPU: "
      f"{m['unit_seconds_total']:.1f} s, wall {m['wall_time_s']:.1f} s", flush=True)
print(f"ESTIMATE full setting3 ({runs3} runs x {full3.epochs} epochs of {full3.n_train:,} images): "
      f"{runs3 * per_run * scale / 3600:.1f} h", flush=True)
PYTHON

echo "gpu_check: done (status $status); log in $LOG"
exit $status
