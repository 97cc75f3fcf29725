"""Noise awareness on this machine: the same case quiet and under a competing CPU load.

Part 1 runs one case (one CPU thread, a fixed number of iterations) alternately
on a quiet machine and while busy-loop processes (``python -c "while True:
pass"``) compete for the CPUs, and prints for each run the throughput, its CI,
whether accelbench flagged it noisy and why, and the other processes' CPU use it
recorded; then the throughput ratio loaded / quiet. The point: the loaded runs
have tight CIs too (the CI only sees the times the case got), so only the noise
record tells them apart.

Part 2 shows what keeps a CI honest under load: adaptive stopping on
``--target-ci`` (more iterations when the times spread, up to ``--max-time``),
the minimum number of iterations (reached past ``--max-time``, with a note), and
``--strict-max-time`` (a case cut below the minimum is ``insufficient``, no CI).

    python benchmarks/noise.py                      # resnet50 tiny, 1 thread, load = CPUs
    python benchmarks/noise.py --workload lstm --iterations 500 --rounds 5 --load 1
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator

from accelbench.execution.process import run_case
from accelbench.planning.cases import prepare_case
from accelbench.result import Result
from accelbench.spec import MeasurementPolicy, MeterOptions


@contextlib.contextmanager
def competing_load(processes: int) -> Iterator[None]:
    """``processes`` busy loops for the duration of the block (nothing for 0)."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
             for _ in range(processes)]
    try:
        if procs:
            time.sleep(0.3)
        yield
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def measure(args: argparse.Namespace, policy: MeasurementPolicy) -> Result:
    case = prepare_case(args.workload, size=args.size, threads=args.threads, policy=policy,
                        meters=MeterOptions(enabled=False), check_hardware=False)
    return run_case(case.spec, samples_per_step=case.samples_per_step,
                    sample_unit=case.sample_unit,
                    known_flops={"flop_method": "not counted (benchmark)"})


def ci_text(r: Result) -> str:
    st = r.stats
    if st is None or st.ci_rel_halfwidth is None:
        return f"no CI (n={st.n if st else 0})"
    return f"+-{st.ci_rel_halfwidth:.1%}"


def row(label: str, r: Result) -> str:
    st = r.stats
    host = (r.noise.get("host") or {}).get("during") or {}
    other = host.get("other_cores")
    tput = f"{st.samples_per_s:10.1f}" if st else f"{'-':>10}"
    reasons = "; ".join(r.noise_reasons) or "-"
    return (f"{label:8} {r.status:12} {tput} {ci_text(r):>14} {st.n if st else 0:6d} "
            f"{(st.stop_reason if st else '-'):14} "
            f"{'NOISY' if r.noisy else 'quiet':6} "
            f"{'-' if other is None else format(other, '.2f'):>6}  {reasons}")


HEADER = (f"{'run':8} {'status':12} {'samples/s':>10} {'CI95':>14} {'iters':>6} "
          f"{'stop':14} {'flag':6} {'other':>6}  reasons")


def part1(args: argparse.Namespace) -> None:
    print(f"== part 1: {args.workload} {args.size}, {args.threads} thread(s), "
          f"{args.iterations} iterations; load = {args.load} busy loop(s) on "
          f"{os.cpu_count()} CPUs; {args.rounds} interleaved rounds")
    print("   ('other' = CPU cores other processes used during the measured window)")
    print(HEADER)
    policy = MeasurementPolicy(iterations=args.iterations, warmup_min=5, warmup_max=20,
                               timeout_s=600)
    quiet: list[float] = []
    loaded: list[float] = []
    flagged = {"quiet": 0, "loaded": 0}
    for i in range(args.rounds):
        for label, load in (("quiet", 0), ("loaded", args.load)):
            with competing_load(load):
                r = measure(args, policy)
            print(row(f"{label}{i + 1}", r), flush=True)
            if r.stats is not None:
                (quiet if label == "quiet" else loaded).append(r.stats.samples_per_s)
            flagged[label] += int(r.noisy)
    if quiet and loaded:
        ratio = statistics.median(loaded) / statistics.median(quiet)
        print(f"throughput loaded / quiet (medians of rounds): {ratio:.3f}; "
              f"flagged noisy: quiet {flagged['quiet']}/{args.rounds}, "
              f"loaded {flagged['loaded']}/{args.rounds}")


def part2(args: argparse.Namespace) -> None:
    print(f"\n== part 2: what keeps the CI honest under load ({args.load} busy loop(s))")
    print(HEADER)
    adaptive = MeasurementPolicy(target_ci=args.target_ci, min_iterations=10,
                                 max_time_s=args.max_time, warmup_min=5, warmup_max=20,
                                 timeout_s=600)
    cut = MeasurementPolicy(target_ci=args.target_ci, min_iterations=args.minimum,
                            max_time_s=0.01, warmup_min=5, warmup_max=20, timeout_s=600)
    strict = MeasurementPolicy(target_ci=args.target_ci, min_iterations=args.minimum,
                               max_time_s=0.01, strict_max_time=True, warmup_min=5,
                               warmup_max=20, timeout_s=600)
    runs = [
        ("tgt-q", 0, adaptive, f"--target-ci {args.target_ci:g} --max-time {args.max_time:g}, "
                               "quiet"),
        ("tgt-L", args.load, adaptive, "the same under load"),
        ("min-L", args.load, cut, f"--max-time 0.01 (below the minimum {args.minimum}), load"),
        ("strict", args.load, strict, "the same with --strict-max-time"),
    ]
    for label, load, policy, what in runs:
        with competing_load(load):
            r = measure(args, policy)
        print(row(label, r) + f"   [{what}]", flush=True)
        for note in r.noise.get("measure_notes") or ():
            print(f"{'':8} note: {note}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="resnet50")
    ap.add_argument("--size", default="tiny")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iterations", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--load", type=int, default=os.cpu_count() or 1,
                    help="busy-loop processes of the loaded runs (default: one per CPU)")
    ap.add_argument("--target-ci", type=float, default=0.02)
    ap.add_argument("--max-time", type=float, default=3.0)
    ap.add_argument("--minimum", type=int, default=20)
    ap.add_argument("--part", choices=("1", "2", "both"), default="both")
    args = ap.parse_args()
    if args.part in ("1", "both"):
        part1(args)
    if args.part in ("2", "both"):
        part2(args)


if __name__ == "__main__":
    main()
