#!/usr/bin/env bash
# Device check on an NVIDIA machine, in sections chosen with SECTIONS (space-separated):
#
#   peaks   measured GEMM peaks (MFU needs them)                                  <= 120 s
#   modern  suite modern: llm, bert, vit at reference size, amp_bf16, torch.compile,
#           tokens/s, MFU, J/token and peak memory (issue 13)                     <= 240 s
#   sweep   power-limit sweep, 3 limits, ResNet-50 amp_bf16, frontier (issue 14)  <= 180 s
#   energy  energy per sample and the counter-vs-samples cross-check of what ran
#   paper   the paper suite at paper sizes in fp32 and amp_bf16 (torch)           <= 420 s
#   jax     the paper suite with JAX in amp_bf16 where a CUDA JAX is installed    <= 300 s
#   ops     the paper's operators, a roofline and a report                        <= 150 s
#   mllog   one GPU case logged as MLPerf lines with its power readings (issue 27) <= 90 s
#   phases  --phases of resnet50 and llm (small, amp_bf16): time and energy per phase,
#           CUDA events, NVML differential loops (issue 26)                      <= 400 s
#   sharding  the FSDP2 and TP wrappers' overhead at one rank: llm small amp_bf16 plain,
#           --parallel fsdp, tp, fsdp --act-ckpt; step time and peak memory (issue 43) <= 240 s
#   totarget  train to a target on the device: transformer and resnet50 tiny, one seed
#           each; time-, energy-, samples-to-target and the input wait (issue 42)  <= 320 s
#
# The default, "peaks modern sweep energy mllog", fits one device call (10 minutes); a second call
# with SECTIONS="paper jax ops energy" covers the rest, a third SECTIONS="phases sharding", a
# fourth SECTIONS="totarget". Run from the repo root:
#
#   bash benchmarks/gpu_check.sh
#
# It uses the machine's own python3 and torch (no downloads). Packages that image lacks
# (sqlalchemy, platformdirs) travel as wheels in .whl/ (git-ignored), e.g. prepared with
#   pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --platform manylinux2014_x86_64 -d .whl sqlalchemy platformdirs greenlet
# (the mllog section also needs mlperf-logging there: add mlperf-logging to that list)
# To try the script on a CPU:
#   DEVICE=cpu SUITE=quick OPS_SIZE=tiny MODERN_SIZE=tiny SECTIONS="modern paper ops" \
#       bash benchmarks/gpu_check.sh
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
SECTIONS=" ${SECTIONS:-peaks modern sweep energy mllog} "
want() { [[ "$SECTIONS" == *" $1 "* ]]; }

nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv 2>/dev/null
ab devices
if want peaks; then
echo "== measured peaks"
timeout 120 $PY -m accelbench.cli peaks --device "$DEVICE" --measure
fi
if want paper; then
echo "== $SUITE suite on $DEVICE, fp32 and amp_bf16"
# 15 shapes x 2 precisions; 3 s of measurement and a 1 s idle baseline each.
timeout 420 $PY -m accelbench.cli -q suite "$SUITE" --device "$DEVICE" \
    --precision fp32 --precision amp_bf16 --max-time 3 --target-ci 0.02 --idle-s 1 \
    --timeout 90 --suite-id gpu-check
ab results --suite-id gpu-check
fi
# JAX, where the image has a CUDA build of it (the device has no network to install one):
# the paper models at paper size in bf16, into the same store, then JAX/torch ratios.
if ! want jax; then
    :
elif $PY -c "import jax, flax, optax; assert jax.devices('gpu')" >/dev/null 2>&1; then
    echo "== jax: paper suite on $DEVICE, amp_bf16 (compile time stored apart)"
    timeout 300 $PY -m accelbench.cli -q suite "$SUITE" --framework jax --device "$DEVICE" \
        --precision amp_bf16 --max-time 3 --target-ci 0.02 --idle-s 1 --timeout 120 \
        --suite-id gpu-check-jax
    ab results --suite-id gpu-check-jax
    ab compare framework=torch,precision=amp_bf16 framework=jax,precision=amp_bf16
else
    echo "== jax: not installed with CUDA here (pip install -U 'jax[cuda12]' flax optax); skipped"
fi
if want ops; then
echo "== operators ($OPS_SIZE)"
timeout 150 $PY -m accelbench.cli ops --device "$DEVICE" --size "$OPS_SIZE" --max-time 1
ab roofline --device "$DEVICE" --out "$OUT_DIR/roofline" >/dev/null && echo "roofline: $OUT_DIR/roofline"
ab report --out "$OUT_DIR/report" >/dev/null && echo "report: $OUT_DIR/report"
fi

# -- power-limit sweep (issue 14): 3 limits across the GPU's range, ResNet-50 amp_bf16 --------
# Needs root (NVML refuses a power limit otherwise: one line, exit 2, nothing changed). The
# original limit is restored after each case and at the end; SWEEP_LIMITS=W,W,W overrides.
if want sweep && [[ "$DEVICE" == cuda* ]]; then
    GPU_INDEX=${DEVICE#cuda}; GPU_INDEX=${GPU_INDEX#:}; GPU_INDEX=${GPU_INDEX:-0}
    LIMITS=${SWEEP_LIMITS:-$($PY - "$GPU_INDEX" <<'PYEOF'
import sys, pynvml
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(int(sys.argv[1]))
lo, hi = (v / 1000 for v in pynvml.nvmlDeviceGetPowerManagementLimitConstraints(h))
print(",".join(str(round(w)) for w in (hi, (lo + hi) / 2, max(lo, 0.4 * hi))))
PYEOF
)}
    echo "== power-limit sweep on $DEVICE: $LIMITS W (resnet50 paper amp_bf16)"
    nvidia-smi --query-gpu=power.limit --format=csv,noheader 2>/dev/null | sed 's/^/limit before: /'
    timeout 180 $PY -m accelbench.cli sweep resnet50 --device "$DEVICE" --precision amp_bf16 \
        --power-limits "$LIMITS" --max-time 4 --target-ci 0.02 --idle-s 1 --settle-s 5 \
        --timeout 90 --suite-id gpu-check-sweep
    nvidia-smi --query-gpu=power.limit --format=csv,noheader 2>/dev/null | sed 's/^/limit after: /'
    ab sweep-report gpu-check-sweep --max-slowdown 0.1
fi

# -- modern suite (issue 13): llm, bert, vit in amp_bf16 with torch.compile ----------------------
# Cases run round-robin (every workload's smallest batch first), so the time cap below still
# measures each workload once; the larger batches follow while time remains (an OOM at the
# largest is stored as oom). Compile time is stored apart (compile_s). MFU needs the measured
# peaks above. Overrides: MODERN_TIMEOUT_S (default 240), MODERN_SIZE (paper; tiny on a CPU:
#   DEVICE=cpu MODERN_SIZE=tiny MODERN_TIMEOUT_S=300 bash benchmarks/gpu_check.sh),
# MODERN_WORKLOADS (e.g. "llm"; default all three).
if want modern; then
MODERN_ARGS=()
for w in ${MODERN_WORKLOADS:-}; do MODERN_ARGS+=(--workload "$w"); done
echo "== modern suite on $DEVICE (${MODERN_SIZE:-paper}, compile on, ${MODERN_TIMEOUT_S:-240} s cap)"
timeout "${MODERN_TIMEOUT_S:-240}" $PY -m accelbench.cli -q suite modern --device "$DEVICE" \
    --size "${MODERN_SIZE:-paper}" "${MODERN_ARGS[@]}" --max-time 3 --target-ci 0.02 \
    --idle-s 1 --timeout 180 --suite-id gpu-check-modern
ab results --suite-id gpu-check-modern --wide
ab results --suite-id gpu-check-modern --json > "$OUT_DIR/modern.json"
$PY - "$OUT_DIR/modern.json" <<'PYEOF'
import json, sys
rows = json.load(open(sys.argv[1]))
def f(v, spec):
    return format(v, spec) if v is not None else "-"
print(f"{'case':24} {'status':8} {'per s':>12} {'MFU %':>6} {'J/unit':>10} {'compile s':>9} "
      f"{'peak GiB':>8}")
for r in sorted(rows, key=lambda r: (r["workload"], r["batch_size"])):
    mem = r["peak_memory_bytes"] / 2**30 if r["peak_memory_bytes"] else None
    mfu = r["mfu"] * 100 if r["mfu"] is not None else None
    print(f"{r['workload'] + ' bs=' + str(r['batch_size']):24} {r['status']:8} "
          f"{f(r['samples_per_s'], ',.0f'):>12} {f(mfu, '.1f'):>6} "
          f"{f(r['energy_j_per_sample'], '.3g'):>10} {f(r['compile_s'], '.1f'):>9} "
          f"{f(mem, '.1f'):>8}  {r['sample_unit']}s")
llm = [r for r in rows if r["workload"] == "llm" and r["status"] == "ok"]
if llm:
    best = max(llm, key=lambda r: r["samples_per_s"])
    mfu = f"{best['mfu']:.1%}" if best["mfu"] is not None else "unknown (no measured peak)"
    jt = best["energy_j_per_sample"]
    print(f"llm: {best['samples_per_s']:,.0f} tokens/s at {best['batch_size']} tokens/step, "
          f"MFU {mfu}, J/token {f(jt, '.3g')} ({best['energy_source']})")
else:
    print("llm: no ok case within the time cap")
PYEOF
fi

if want energy; then
echo "== energy per sample and counter-vs-samples cross-check (every case this script ran)"
ab results --json | $PY benchmarks/energy_table.py
fi

# -- MLPerf log (issue 27): one GPU case, its NVML power timeline as power_reading lines --------
if want mllog; then
if $PY -c "import mlperf_logging" >/dev/null 2>&1; then
    echo "== mllog: resnet50 small amp_bf16 on $DEVICE -> $OUT_DIR/gpu_case.mllog"
    rm -f "$OUT_DIR/gpu_case.mllog"
    timeout 90 $PY -m accelbench.cli -q run resnet50 --size small --device "$DEVICE" \
        --precision amp_bf16 --max-time 3 --idle-s 1 --timeout 80 \
        --mllog "$OUT_DIR/gpu_case.mllog" >/dev/null
    $PY - "$OUT_DIR/gpu_case.mllog" <<'PYEOF'
import sys
from mlperf_logging.compliance_checker.mlp_parser import parse_file
lines, errors = parse_file(sys.argv[1], ruleset="6.0.0")
keys = [ln.key for ln in lines]
starts = [ln.value["metadata"] for ln in lines if ln.key == "power_measurement_start"]
print(f"mllog: {len(lines)} lines, {len(errors)} parse errors, "
      f"{keys.count('power_reading')} power_reading lines")
for meta in starts:
    rate = meta.get("rate_hz")
    print(f"  sensor {meta['sensor']}: {rate:.1f} Hz, {meta['boundary']}" if rate else
          f"  sensor {meta['sensor']}: one point, {meta['boundary']}")
tput = [ln.value for ln in lines if ln.key == "throughput"]
if tput:
    print(f"  throughput {tput[0]['value']:.1f} {tput[0]['metadata']['unit']}")
PYEOF
else
    echo "== mllog: mlperf-logging is not installed here (pip install 'accelbench[mlperf]'); skipped"
fi
fi

# -- phases (issue 26): where resnet50's and llm's step time and energy go ---------------------
# One case each with --phases after a short window: direct CUDA-event times per phase, then
# interleaved differential loops (5 trials x 3 loops, each >= the NVML energy window, ~5 s),
# so a case takes ~100 s (fewer trials, or none, if its --timeout comes first). Overrides: PHASES_SIZE (small), PHASES_WORKLOADS.
if want phases; then
for w in ${PHASES_WORKLOADS:-resnet50 llm}; do
    echo "== phases: $w ${PHASES_SIZE:-small} amp_bf16 on $DEVICE"
    timeout 200 $PY -m accelbench.cli -q run "$w" --size "${PHASES_SIZE:-small}" \
        --device "$DEVICE" --precision amp_bf16 --max-time 3 --idle-s 1 --timeout 190 \
        --phases --tag gpu-check-phases >/dev/null
done
$PY - "$ACCELBENCH_DB" <<'PYEOF'
import sys
from accelbench.store import open_store
with open_store(sys.argv[1]) as st:
    rows = [r for r in st.query() if r.spec.tag == "gpu-check-phases"]
for r in rows:
    ph = r.phases
    print(f"{r.spec.workload}: {r.status}, step {r.stats.median_s * 1e3:.2f} ms" if r.stats
          else f"{r.spec.workload}: {r.status} {r.error}")
    if ph is None:
        continue
    print(f"  method: {ph.method}")
    print(f"  sum of phases vs step: {ph.sum_rel_diff:+.1%}" if ph.sum_rel_diff is not None
          else "  sum: -")
    for p in ph.phases:
        dt = p.diff_time
        e = p.energy
        print(f"  {p.name:13} direct {p.time_s * 1e3 if p.time_s else float('nan'):8.3f} ms  "
              f"loops {dt.value * 1e3 if dt and dt.value is not None else float('nan'):8.3f} ms"
              f" ({dt.status if dt else '-'})  energy "
              f"{e.value if e and e.value is not None else float('nan'):8.4f} J "
              f"({e.status if e else '-'})  agrees {p.agrees}")
    print(f"  energy: {ph.energy_source}: {ph.energy_note}")
    for n in ph.notes:
        print(f"  note: {n}")
PYEOF
fi

# -- sharding (issue 43): the FSDP2 and tensor-parallel wrappers at one rank ---------------------
# One GPU, so no communication crosses a link: what is left is the wrappers' own cost (FSDP2's
# unshard/reshard copies and hooks on a group of one, which issues no all-gather or
# reduce-scatter; DTensor dispatch; checkpoint recompute). Each mode runs in a process group
# of one (the case opens it); step time and peak memory are printed against the plain run,
# the newest run of each mode (the store persists across calls). Overrides: SHARDING_SIZE
# (small), SHARDING_TIMEOUT_S (60 each).
if want sharding; then
for mode in "ddp" "fsdp" "tp" "fsdp --act-ckpt"; do
    echo "== sharding: llm ${SHARDING_SIZE:-small} amp_bf16 --parallel $mode on $DEVICE"
    # $mode unquoted on purpose: "fsdp --act-ckpt" is two arguments.
    # shellcheck disable=SC2086
    timeout "${SHARDING_TIMEOUT_S:-60}" $PY -m accelbench.cli -q run llm \
        --size "${SHARDING_SIZE:-small}" --device "$DEVICE" --precision amp_bf16 \
        --parallel $mode --max-time 3 --no-idle --timeout 55 --tag gpu-check-sharding \
        >/dev/null
done
$PY - "$ACCELBENCH_DB" <<'PYEOF'
import sys
from accelbench.store import open_store
with open_store(sys.argv[1]) as st:
    tagged = [r for r in st.query() if r.spec.tag == "gpu-check-sharding"]
def label(r):
    t = r.spec.topology
    return t.parallel + (" act-ckpt" if t.act_ckpt else "")
newest = {}
for r in sorted(tagged, key=lambda r: r.finished_at or ""):
    newest[label(r)] = r  # this call's run of each mode, not an earlier call's
rows = list(newest.values())
base = next((r for r in rows if not r.spec.topology.sharded and r.stats), None)
for r in rows:
    if r.stats is None:
        print(f"{label(r):14} {r.status}: {r.error}")
        continue
    mem = r.peak_memory_bytes
    ratio = (f"  step / plain {r.stats.median_s / base.stats.median_s:.3f}"
             f"  memory / plain {mem / base.peak_memory_bytes:.3f}"
             if base is not None and mem and base.peak_memory_bytes else "")
    peak = f"{mem / 2**20:8.1f} MiB" if mem else f"unavailable ({r.peak_memory_source})"
    print(f"{label(r):14} step {r.stats.median_s * 1e3:8.2f} ms  peak {peak}{ratio}")
PYEOF
fi

# -- train to a target on the device (issue 42): one seed each of transformer and resnet50 tiny,
# through the on-disk input pipeline (pinned batches, non_blocking copies), into a store of
# its own, then printed from it. Each run is capped at 90 s of training and 150 s in all (its
# dataset is written once first, into TOTARGET_DATA, default /tmp/accelbench-totarget-data).
# Tried with DEVICE=cpu on the shared 2-core VM at load 24 (2026-12-07): transformer reached
# its target; resnet50's image writing and training ran past the cap there.
if want totarget; then
    TT_DB="$OUT_DIR/totarget.db"
    export ACCELBENCH_DATA_DIR="${TOTARGET_DATA:-/tmp/accelbench-totarget-data}"
    for w in transformer resnet50; do
        echo "== train $w tiny on $DEVICE, 1 seed"
        timeout 150 $PY -m accelbench.cli --db "$TT_DB" train "$w" --size tiny \
            --device "$DEVICE" --seeds 1 --max-time 90 --idle-s 1
    done
    echo "== the runs to a target, read back from $TT_DB"
    ab --db "$TT_DB" results to-target
    for g in $(ab --db "$TT_DB" results to-target --json \
               | $PY -c "import json, sys; print(' '.join(g['group_id'] for g in json.load(sys.stdin)))"); do
        ab --db "$TT_DB" results to-target "$g"
    done
    ab --db "$TT_DB" export --format csv --to-target --out "$OUT_DIR/totarget.csv" \
        && echo "export: $OUT_DIR/totarget.csv"
fi
