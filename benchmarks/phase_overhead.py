"""--phases overhead: the headline throughput of a case with ``--phases`` vs without.

The phase pass (attribution steps, differential loops) runs after the measured window,
so the headline should not move: the ratio (with / without) is 1.0 up to noise. Runs go
through the real path (warm worker, isolated child) and interleave (with, without,
without, with, ...) so machine drift hits both alike; the load average and the noise
record's competing cores are printed beside each pair.

    python benchmarks/phase_overhead.py                          # lstm tiny on the CPU
    python benchmarks/phase_overhead.py --workload resnet50 --size small --device cuda:0
"""

from __future__ import annotations

import argparse
import os
import statistics

import accelbench


def _other_cores(r: accelbench.Result) -> str:
    during = ((r.noise or {}).get("host") or {}).get("during") or {}
    value = during.get("other_cores")
    return f"{value:.2f}" if isinstance(value, (int, float)) else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--workload", default="lstm")
    ap.add_argument("--size", default="tiny")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    common = dict(size=args.size, device=args.device, threads=args.threads,
                  iterations=args.iterations, energy=False, store=False)
    tput: dict[bool, list[float]] = {True: [], False: []}
    for i in range(args.rounds):
        order = (True, False) if i % 2 == 0 else (False, True)
        for phases in order:
            r = accelbench.run(args.workload, phases=phases, **common)
            if r.stats is None or r.status != "ok":
                raise SystemExit(f"run failed: {r.status}: {r.error}")
            if phases and (r.phases is None or not r.phases.phases):
                raise SystemExit(f"no phases in the record: {r.phases}")
            tput[phases].append(r.stats.samples_per_s)
            print(f"round {i + 1} {'--phases' if phases else 'plain   '}: "
                  f"{r.stats.samples_per_s:10.2f}/s  load {os.getloadavg()[0]:5.2f}  "
                  f"other cores {_other_cores(r)}")
    ratio = statistics.median(tput[True]) / statistics.median(tput[False])
    pairs = statistics.median(a / b for a, b in zip(tput[True], tput[False], strict=True))
    print(f"{args.workload} {args.size} on {args.device}: headline throughput with --phases / "
          f"without = {ratio:.3f} (median of each; median of the rounds' ratios {pairs:.3f}; "
          f"{args.rounds} interleaved runs each, "
          f"{args.iterations} iterations; target >= 0.99, load average now "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
