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

Part 3 measures the two verdicts' rates: every tiny workload in both frameworks
(``accelbench list``), ``--quiet-rounds`` quiet runs and ``--loaded-rounds`` runs under
``--busy`` (default 2) busy loops each, a few seconds a run. For every run it keeps
the raw times and the host figures (``--save FILE``, JSON lines) and judges them
twice: with the 0.3 rule (one q3/q1 > 1.25, trimmed mean 10%, any two modes, or
other processes over 0.5 core) and with today's (contention, plus the shape checks
against each backend's ``quiet_shape`` (``execution.shape.shape_limits``) with two
modes spread through the run described, not flagged). False positives are flags on
quiet runs; a "quiet" run during which other processes used more than 0.5 core (this
machine is shared) is marked "not quiet" and left out of the false-positive rate, with
its load shown.
True positives are flags on the loaded runs. ``--analyse FILE`` judges a saved
file again (after a change of the limits) without measuring; the last table
suggests limits per (framework, device kind): the largest within-mode q3/q1 and
trimmed-mean distance of the quiet runs, with 10% room.

    python benchmarks/noise.py                      # resnet50 tiny, 1 thread, load = CPUs
    python benchmarks/noise.py --workload lstm --iterations 500 --rounds 5 --load 1
    python benchmarks/noise.py --part 3 --save noise-runs.jsonl
    python benchmarks/noise.py --analyse noise-runs.jsonl
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from accelbench.execution.process import run_case
from accelbench.planning.cases import prepare_case
from accelbench.result import Result
from accelbench.spec import MeasurementPolicy, MeterOptions, RunChoices


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
    case = prepare_case(args.workload, RunChoices(size=args.size, threads=args.threads),
                        policy=policy, meters=MeterOptions(enabled=False), check_hardware=False)
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


# -- part 3: false- and true-positive rates of the verdicts, 0.3 rule against today's -----


def old_flags(rec: dict[str, Any]) -> list[str]:
    """The 0.3 verdict of a saved run: one set of thresholds for every framework, any two
    modes flagged, every flag called a busy machine."""
    from accelbench.execution.shape import two_modes
    from accelbench.stats import trimmed_mean

    times = np.asarray(rec["times"], dtype=float)
    out = ["host"] if (rec["other_cores"] or 0.0) > OLD_OTHER_CORES else []
    if times.size >= 5:
        q1, q3 = np.quantile(times, [0.25, 0.75])
        median = float(np.median(times))
        if q3 / q1 > 1.25:
            out.append("q3/q1")
        if abs(trimmed_mean(times, rec["trim"]) / median - 1.0) > 0.10:
            out.append("trimmed")
    if times.size >= 20 and two_modes(times) is not None:
        out.append("two modes")
    return out


OLD_OTHER_CORES = 0.5


def new_verdict(rec: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """Today's verdict of a saved run, the shape checks recomputed with the current table
    (the contention verdict is the record's own: host and GPU figures)."""
    from accelbench.execution.shape import time_checks

    checks = time_checks(rec["times"], rec["trim"], framework=rec["framework"],
                         device=rec["device"])
    kinds = (["contention"] if rec["contention"] else []) + (
        ["unstable"] if checks["reasons"] else [])
    return kinds, checks


def within_mode_shape(rec: dict[str, Any], checks: dict[str, Any]) -> tuple[float, float]:
    """The largest q3/q1 and |trimmed mean / median - 1| the shape checks looked at: of the
    whole series, or of each mode where two modes were described."""
    times = np.asarray(rec["times"], dtype=float)
    modes = checks.get("modes")
    groups = [times]
    if modes and modes["arrangement"]["spread"]:
        high = times >= modes["split_s"]
        groups = [times[~high], times[high]]
    from accelbench.stats import trimmed_mean

    q, t = 1.0, 0.0
    for g in groups:
        if g.size >= 5:
            q1, q3 = np.quantile(g, [0.25, 0.75])
            q = max(q, float(q3 / q1))
            t = max(t, abs(trimmed_mean(g, rec["trim"]) / float(np.median(g)) - 1.0))
    return q, t


def run_one(args: argparse.Namespace, framework: str, workload: str, label: str,
            busy: int) -> dict[str, Any]:
    policy = MeasurementPolicy(target_ci=0.002, min_iterations=30, max_time_s=args.run_s,
                               warmup_min=3, warmup_max=30, warmup_max_time_s=3.0,
                               timeout_s=args.timeout)
    load_before = os.getloadavg()[0]
    with competing_load(busy):
        case = prepare_case(workload, RunChoices(size="tiny", framework=framework,
                                                 threads=args.threads),
                            policy=policy, meters=MeterOptions(enabled=False),
                            check_hardware=False)
        r = run_case(case.spec, samples_per_step=case.samples_per_step,
                     sample_unit=case.sample_unit,
                     known_flops={"flop_method": "not counted (benchmark)"})
    host = r.noise.get("host") or {}
    judged = host.get(host.get("judged") or "", None) or {}
    return {
        "framework": framework, "workload": workload, "label": label, "busy": busy,
        "device": r.spec.device, "status": r.status, "trim": r.spec.policy.trim_fraction,
        "times": list(r.iteration_times_s), "other_cores": judged.get("other_cores"),
        "load_avg_1m_before": load_before, "load_avg_1m": judged.get("load_avg_1m"),
        "contention": "contention" in r.noise_kinds, "kinds": list(r.noise_kinds),
        "reasons": list(r.noise_reasons), "described": list(r.noise_described),
    }


def part3(args: argparse.Namespace) -> list[dict[str, Any]]:
    from accelbench.workloads.registry import list_workloads

    frameworks = args.frameworks.split(",")
    workloads = (args.workloads.split(",") if args.workloads else
                 [w.name for w in list_workloads() if w.family != "test"])
    print(f"== part 3: {len(workloads)} tiny workloads x {frameworks}, "
          f"{args.quiet_rounds} quiet + {args.loaded_rounds} loaded ({args.busy} busy loops) "
          f"runs each, ~{args.run_s:g} s measured a run, {os.cpu_count()} CPUs")
    records: list[dict[str, Any]] = []
    save = open(args.save, "a") if args.save else None  # noqa: SIM115
    try:
        for fw in frameworks:
            for wl in workloads:
                # Interleaved (quiet, loaded, quiet, ...) so a slow drift hits both.
                n = max(args.quiet_rounds, args.loaded_rounds)
                for label in [x for i in range(n) for x, k in (
                        ("quiet", args.quiet_rounds), ("loaded", args.loaded_rounds)) if i < k]:
                    rec = run_one(args, fw, wl, label, args.busy if label == "loaded" else 0)
                    records.append(rec)
                    if save is not None:
                        save.write(json.dumps(rec) + "\n")
                        save.flush()
                    print(run_line(rec), flush=True)
    finally:
        if save is not None:
            save.close()
    return records


def run_line(rec: dict[str, Any]) -> str:
    kinds, _checks = new_verdict(rec)
    other = rec["other_cores"]
    return (f"  {rec['framework']:5} {rec['workload']:12} {rec['label']:6} {rec['status']:6} "
            f"n={len(rec['times']):4d} other={'-' if other is None else format(other, '.2f')}"
            f" load={rec['load_avg_1m_before']:.1f}  0.3: {','.join(old_flags(rec)) or '-':22}"
            f" now: {','.join(kinds) or '-'}")


def rates(records: list[dict[str, Any]]) -> None:
    """False-positive rates (quiet runs) and true-positive rates (loaded runs), 0.3 rule
    against today's, per framework; suggested shape limits from the quiet runs."""
    ok = [r for r in records if r["status"] == "ok" and r["times"]]
    quiet = [r for r in ok if r["label"] == "quiet"]
    really_quiet = [r for r in quiet if (r["other_cores"] or 0.0) <= OLD_OTHER_CORES]
    loaded = [r for r in ok if r["label"] == "loaded"]
    loads = sorted(r["load_avg_1m_before"] for r in quiet)
    print(f"\n== rates ({len(ok)} runs; quiet runs' 1-min load average "
          f"{loads[0]:.1f}-{loads[-1]:.1f}; {len(quiet) - len(really_quiet)} of {len(quiet)} "
          "'quiet' runs were not quiet: other processes > 0.5 core, left out of the FP rate)"
          if loads else "\n== rates")
    print(f"{'framework':10} {'quiet runs':>10} {'FP 0.3':>10} {'FP now':>10} {'described':>10}"
          f" {'loaded':>7} {'TP 0.3':>8} {'TP now':>8} {'TP busy':>8}")
    for fw in sorted({r["framework"] for r in ok}) + ["all"]:
        q = [r for r in really_quiet if fw in ("all", r["framework"])]
        ld = [r for r in loaded if fw in ("all", r["framework"])]
        fp_old = sum(1 for r in q if old_flags(r))
        fp_new = sum(1 for r in q if new_verdict(r)[0])
        described = sum(1 for r in q if new_verdict(r)[1]["described"])
        tp_old = sum(1 for r in ld if old_flags(r))
        tp_new = sum(1 for r in ld if new_verdict(r)[0])
        tp_busy = sum(1 for r in ld if r["contention"])
        print(f"{fw:10} {len(q):>10} {frac(fp_old, q):>10} {frac(fp_new, q):>10} "
              f"{frac(described, q):>10} {len(ld):>7} {frac(tp_old, ld):>8} "
              f"{frac(tp_new, ld):>8} {frac(tp_busy, ld):>8}")
    print("(FP: quiet runs flagged; described: quiet runs with two modes described, not "
          "flagged; TP: loaded runs flagged; TP busy: flagged as a busy machine)")
    # Every run that had competition (our busy loops, or a shared machine's other jobs):
    # caught at all, as a busy machine, and by the shape checks alone (were the host
    # figures missing), by the 0.3 rule and today's.
    contended = [r for r in ok if (r["other_cores"] or 0.0) > OLD_OTHER_CORES]
    print(f"\nruns with competition (other processes > 0.5 core: {len(loaded)} loaded by "
          f"{args_busy(loaded)} busy loops, {len(quiet) - len(really_quiet)} 'quiet' runs on "
          "the shared machine):")
    print(f"{'framework':10} {'runs':>5} {'any 0.3':>8} {'any now':>8} {'busy now':>9} "
          f"{'shape 0.3':>10} {'shape now':>10} {'described':>10}")
    for fw in sorted({r["framework"] for r in contended}) + ["all"]:
        c = [r for r in contended if fw in ("all", r["framework"])]
        print(f"{fw:10} {len(c):>5} {frac(sum(1 for r in c if old_flags(r)), c):>8} "
              f"{frac(sum(1 for r in c if new_verdict(r)[0]), c):>8} "
              f"{frac(sum(1 for r in c if r['contention']), c):>9} "
              f"{frac(sum(1 for r in c if set(old_flags(r)) - {'host'}), c):>10} "
              f"{frac(sum(1 for r in c if 'unstable' in new_verdict(r)[0]), c):>10} "
              f"{frac(sum(1 for r in c if new_verdict(r)[1]['described']), c):>10}")
    print("\nquiet runs flagged now, and why:")
    for r in really_quiet:
        kinds, checks = new_verdict(r)
        if kinds:
            print(f"  {r['framework']} {r['workload']}: {'; '.join(checks['reasons'])}")
    print("\nshape of the quiet runs (largest within-mode q3/q1, |trimmed - median|) and the "
          "limits they suggest (10% room, never below 0.3's):")
    for fw in sorted({r["framework"] for r in really_quiet}):
        shapes = [within_mode_shape(r, new_verdict(r)[1]) for r in really_quiet
                  if r["framework"] == fw]
        qs = sorted(s[0] for s in shapes)
        ts = sorted(s[1] for s in shapes)
        print(f"  {fw}/cpu: q3/q1 median {statistics.median(qs):.3f}, max {qs[-1]:.3f} -> "
              f"limit {max(1.25, math.ceil(qs[-1] * 1.1 * 20) / 20):.2f}; trimmed max "
              f"{ts[-1]:.1%} -> limit {max(0.10, math.ceil(ts[-1] * 1.1 * 20) / 20):.2f}")


def args_busy(runs: list[dict[str, Any]]) -> str:
    return "/".join(str(b) for b in sorted({r["busy"] for r in runs})) or "0"


def frac(k: int, of: list[Any]) -> str:
    return f"{k}/{len(of)}" if of else "-"


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
    ap.add_argument("--part", choices=("1", "2", "3", "both"), default="both")
    ap.add_argument("--frameworks", default="torch,jax", help="part 3 (comma-separated)")
    ap.add_argument("--workloads", default="", help="part 3: only these (comma-separated)")
    ap.add_argument("--quiet-rounds", type=int, default=2)
    ap.add_argument("--loaded-rounds", type=int, default=1)
    ap.add_argument("--busy", type=int, default=2, help="part 3: busy loops of a loaded run")
    ap.add_argument("--run-s", type=float, default=2.0, help="part 3: seconds measured a run")
    ap.add_argument("--timeout", type=float, default=300.0, help="part 3: a case's timeout")
    ap.add_argument("--save", help="part 3: append each run to this JSON-lines file")
    ap.add_argument("--analyse", metavar="FILE", help="judge a saved part-3 file again")
    args = ap.parse_args()
    # SIGTERM ends the benchmark like Ctrl-C: the busy loops are killed on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.analyse:
        with open(args.analyse) as f:
            rates([json.loads(line) for line in f if line.strip()])
        return
    if args.part in ("1", "both"):
        part1(args)
    if args.part in ("2", "both"):
        part2(args)
    if args.part == "3":
        rates(part3(args))


if __name__ == "__main__":
    main()
