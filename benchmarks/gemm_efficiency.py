"""GEMM efficiency: accelbench's matmul FLOP/s vs a bare torch.matmul loop, and % of peak.

Both time the same square GEMM on the same tensors' shapes and precision,
side by side in one process, alternating rounds so machine noise hits both
alike; each side keeps its best round. The ratio is accelbench / bare and the
target is >= 0.98. The measured peak is the store's cached GEMM peak of the
device (``accelbench peaks``), measured here with the default sweep if absent.

    python benchmarks/gemm_efficiency.py                    # N=2048, fp32, CPU
    python benchmarks/gemm_efficiency.py --n 2048 --n 4096 --precision bf16 --json
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import torch

from accelbench.backends.torch.opbench import math_mode, synchronizer, torch_dtype
from accelbench.execution.opbench import OpRun, run_case
from accelbench.execution.peaks import ensure_peaks
from accelbench.opbench.cases import OpCase, matmul_shape
from accelbench.opbench.precision import op_precision
from accelbench.roofline.theoretical import theoretical_flop_per_s
from accelbench.spec import MeasurementPolicy
from accelbench.store import open_store


def bare_loop(n: int, precision: str, device: str, iterations: int, warmup: int) -> float:
    """``torch.matmul`` in a plain loop, timed end to end (one sync); returns FLOP/s."""
    dev = torch.device(device)
    dtype = torch_dtype(precision)
    torch.manual_seed(0)
    a = torch.randn(n, n, device=dev, dtype=dtype)
    b = torch.randn(n, n, device=dev, dtype=dtype)
    sync = synchronizer(device)
    with math_mode(precision):
        for _ in range(warmup):
            torch.matmul(a, b)
        sync()
        t0 = time.perf_counter()
        for _ in range(iterations):
            torch.matmul(a, b)
        sync()
        elapsed = time.perf_counter() - t0
    return 2 * n**3 * iterations / elapsed


def accelbench_rate(n: int, precision: str, device: str, iterations: int, warmup: int
                    ) -> float:
    """The FLOP/s ``accelbench ops`` reports for the same GEMM (median iteration time)."""
    policy = MeasurementPolicy(iterations=iterations, warmup_min=warmup, warmup_max=warmup)
    case = OpCase(op="matmul", shape=matmul_shape(n, n, n), precision=precision)
    res = run_case(case, OpRun(device=device, policy=policy))
    if res.status != "ok" or res.achieved_flop_per_s is None:
        raise SystemExit(f"accelbench run failed: {res.status} {res.error}")
    return res.achieved_flop_per_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, action="append", help="square side (repeatable; 2048)")
    ap.add_argument("--precision", default="fp32", help="fp32, tf32, fp16, bf16")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--iterations", type=int, default=10, help="timed GEMMs per round")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per side")
    ap.add_argument("--threads", type=int, help="CPU threads")
    ap.add_argument("--db", help="results store holding the measured peaks")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    precision = op_precision(args.precision)
    sides = args.n or [2048]
    with open_store(args.db) as store:
        peaks = ensure_peaks(store, args.device, [precision], bandwidth=False,
                             on_measure=lambda m: print(m, flush=True))
    peak = peaks[precision]
    from accelbench.execution.peaks import device_name_of

    theoretical = theoretical_flop_per_s(args.device, device_name_of(args.device), precision)
    rows: list[dict[str, Any]] = []
    for n in sides:
        ours, bare = [], []
        for _ in range(args.rounds):
            bare.append(bare_loop(n, precision, args.device, args.iterations, args.warmup))
            ours.append(accelbench_rate(n, precision, args.device, args.iterations, args.warmup))
        best_ours, best_bare = max(ours), max(bare)
        rows.append({
            "n": n, "precision": precision, "device": args.device,
            "threads": torch.get_num_threads(),
            "accelbench_flop_per_s": best_ours, "bare_flop_per_s": best_bare,
            "ratio": best_ours / best_bare,
            "measured_peak_flop_per_s": peak.value, "peak_method": peak.method,
            "pct_measured_peak": 100 * best_ours / peak.value,
            "theoretical_flop_per_s": theoretical,
            "pct_theoretical_peak": 100 * best_ours / theoretical if theoretical else None,
            "rounds_accelbench": ours, "rounds_bare": bare,
        })
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'N':>6} {'prec':>5} {'accelbench':>12} {'bare loop':>12} {'ratio':>6} "
          f"{'% meas. peak':>13} {'% theor.':>9}")
    for r in rows:
        theo = f"{r['pct_theoretical_peak']:.1f}%" if r["pct_theoretical_peak"] else "-"
        print(f"{r['n']:>6} {r['precision']:>5} {r['accelbench_flop_per_s'] / 1e9:>8.1f} GF/s "
              f"{r['bare_flop_per_s'] / 1e9:>8.1f} GF/s {r['ratio']:>6.3f} "
              f"{r['pct_measured_peak']:>12.1f}% {theo:>9}")
    print(f"measured peak: {peak.value / 1e9:.1f} GFLOP/s ({peak.method}, {peak.created_at})")


if __name__ == "__main__":
    main()
