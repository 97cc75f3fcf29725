#!/usr/bin/env bash
# Device check: on an NVIDIA machine, the paper suite at paper sizes in fp32 and amp_bf16
# (about 6 minutes) with PyTorch, then in amp_bf16 with JAX where a CUDA JAX is installed
# (up to 5 minutes) and the JAX/torch comparison, energy per sample and the
# counter-vs-samples cross-check, measured peaks and the paper's operators. Prints every
# table. Run from the repo root:
#
#   bash benchmarks/gpu_check.sh
#
# It uses the machine's own python3 and torch (no downloads). Packages that image lacks
# (sqlalchemy, platformdirs) travel as wheels in .whl/ (git-ignored), e.g. prepared with
#   pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --platform manylinux2014_x86_64 -d .whl sqlalchemy platformdirs greenlet
# To try the script on a CPU: DEVICE=cpu SUITE=quick OPS_SIZE=tiny bash benchmarks/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda:0}
SUITE=${SUITE:-paper}
OPS_SIZE=${OPS_SIZE:-paper}
OUT_DIR=${OUT:-$PWD/gpu_check_out}
mkdir -p "$OUT_DIR"
if [ -d .whl ]; then
    $PY -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export ACCELBENCH_DB="${ACCELBENCH_DB:-$OUT_DIR/gpu_check.db}"
ab() { $PY -m accelbench.cli "$@"; }

nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv 2>/dev/null
ab devices
echo "== $SUITE suite on $DEVICE, fp32 and amp_bf16"
# 15 shapes x 2 precisions; 3 s of measurement and a 1 s idle baseline each.
timeout 420 $PY -m accelbench.cli -q suite "$SUITE" --device "$DEVICE" \
    --precision fp32 --precision amp_bf16 --max-time 3 --target-ci 0.02 --idle-s 1 \
    --timeout 90 --suite-id gpu-check
ab results --suite-id gpu-check
# JAX, where the image has a CUDA build of it (the device has no network to install one):
# the paper models at paper size in bf16, into the same store, then JAX/torch ratios.
if $PY -c "import jax, flax, optax; assert jax.devices('gpu')" >/dev/null 2>&1; then
    echo "== jax: paper suite on $DEVICE, amp_bf16 (compile time stored apart)"
    timeout 300 $PY -m accelbench.cli -q suite "$SUITE" --framework jax --device "$DEVICE" \
        --precision amp_bf16 --max-time 3 --target-ci 0.02 --idle-s 1 --timeout 120 \
        --suite-id gpu-check-jax
    ab results --suite-id gpu-check-jax
    ab compare framework=torch,precision=amp_bf16 framework=jax,precision=amp_bf16
else
    echo "== jax: not installed with CUDA here (pip install -U 'jax[cuda12]' flax optax); skipped"
fi
echo "== energy per sample and counter-vs-samples cross-check"
ab results --suite-id gpu-check --json | $PY benchmarks/energy_table.py
echo "== measured peaks"
timeout 120 $PY -m accelbench.cli peaks --device "$DEVICE" --measure
echo "== operators ($OPS_SIZE)"
timeout 150 $PY -m accelbench.cli ops --device "$DEVICE" --size "$OPS_SIZE" --max-time 1
ab roofline --device "$DEVICE" --out "$OUT_DIR/roofline" >/dev/null && echo "roofline: $OUT_DIR/roofline"
ab report --suite-id gpu-check --out "$OUT_DIR/report" >/dev/null && echo "report: $OUT_DIR/report"
