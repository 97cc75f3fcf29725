#!/usr/bin/env bash
# Device check for an NVIDIA machine: the paper suite at paper sizes, fp32 and amp_bf16,
# within about 8 minutes, then the results table. Run from the repository root:
#   bash benchmarks/gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export ACCELBENCH_DB="${ACCELBENCH_DB:-$PWD/gpu_check.db}"
if [ ! -x .venv/bin/accelbench ]; then
    python3 -m venv .venv
    .venv/bin/pip install -q torch==2.13.0 -e '.[nvidia]'
fi
. .venv/bin/activate
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv || true
accelbench devices
# 15 shapes x 2 precisions; 3 s of measurement each keeps the suite near 6 minutes.
timeout 480 accelbench -q suite paper --device cuda:0 --precision fp32 --precision amp_bf16 \
    --max-time 3 --target-ci 0.02 --timeout 90 --suite-id gpu-check || true
accelbench results --suite-id gpu-check
