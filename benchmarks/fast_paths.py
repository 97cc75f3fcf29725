"""What the fast paths do on this machine: throughput with and without --channels-last on
ResNet-50 (small) and with and without --compile on the tiny LLM, side by side.

Each pair is measured by accelbench in real workers (nothing stored), interleaved in rounds
(plain, fast, plain, fast ...) so that machine noise hits both sides alike; it prints each
round's throughputs and fast/plain ratio, then the median ratio. --compile's compile time
is stored apart (compile_s) and shown, never in the throughput. There is no target: on a
CPU these paths are not where they pay off; on a GPU run the same script with --device.

    python benchmarks/fast_paths.py [--rounds 3] [--max-time 3] [--device cpu]
"""

from __future__ import annotations

import argparse
import statistics

import accelbench
from accelbench.api import make_fast_paths
from accelbench.workloads import list_workloads


def _pairs(only: str) -> list[tuple[str, str, str, str]]:
    """(label, workload, size, fast path) of each comparison asked for."""
    out = []
    if only in ("", "channels_last"):
        out.append(("channels-last", "resnet50", "small", "channels_last"))
    if only in ("", "compile"):
        names = {w.name for w in list_workloads()}
        llm = "llm" if "llm" in names else "transformer"
        if llm != "llm":
            print("note: workload llm is not registered here; --compile is measured on "
                  "transformer tiny instead")
        out.append(("compile", llm, "tiny", "compile"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-time", type=float, default=3.0,
                    help="seconds of measurement per run")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--only", choices=("", "channels_last", "compile"), default="")
    ap.add_argument("--no-discard-first", dest="discard_first", action="store_false",
                    help="count the first run too (by default one run per pair is discarded)")
    args = ap.parse_args()
    summary = []
    for label, workload, size, flag in _pairs(args.only):
        fast = make_fast_paths(**{flag: True})
        plain_tput: list[float] = []
        fast_tput: list[float] = []
        ratios: list[float] = []
        compile_s: list[float] = []
        unit = ""
        print(f"== {label}: {workload} {size} {args.precision} on {args.device}", flush=True)
        if args.discard_first:
            # The first run of a script has measured systematically slow here (ResNet-50
            # small: 4-6 images/s against 50-60 after it), so one run is thrown away.
            accelbench.run(workload, size=size, device=args.device, precision=args.precision,
                           max_time=1.0, store=False, energy=False)
        for i in range(1, args.rounds + 1):
            got = {}
            for side, paths in (("plain", None), ("fast", fast)):
                r = accelbench.run(workload, size=size, device=args.device,
                                   precision=args.precision, fast_paths=paths,
                                   max_time=args.max_time, store=False, energy=False)
                if r.status != "ok" or r.samples_per_s is None:
                    print(f"  round {i} {side}: {r.status} {r.error}", flush=True)
                    continue
                unit = r.sample_unit
                got[side] = r.samples_per_s
                if r.compile_s is not None and side == "fast":
                    compile_s.append(r.compile_s)
            if len(got) == 2:
                plain_tput.append(got["plain"])
                fast_tput.append(got["fast"])
                ratios.append(got["fast"] / got["plain"])
                print(f"  round {i}: plain {got['plain']:10.1f} {unit}s/s   {label} "
                      f"{got['fast']:10.1f} {unit}s/s   ratio {ratios[-1]:.3f}", flush=True)
        if not ratios:
            print(f"  {label}: no round measured both sides")
            continue
        comp = f", compile_s {', '.join(f'{c:.1f}' for c in compile_s)}" if compile_s else ""
        print(f"  median ratio {label}/plain {statistics.median(ratios):.3f} over "
              f"{len(ratios)} round(s) (per round: "
              f"{', '.join(f'{x:.3f}' for x in ratios)}){comp}", flush=True)
        summary.append((label, workload, size, statistics.median(plain_tput),
                        statistics.median(fast_tput), unit, statistics.median(ratios),
                        ratios, compile_s))
    print("\n| fast path | case | plain /s | with it /s | median ratio | per round "
          "| compile s |")
    print("|---|---|---|---|---|---|---|")
    for label, workload, size, p, f, unit, med, ratios, comp in summary:
        print(f"| {label} | {workload} {size} ({unit}s) | {p:.4g} | {f:.4g} | {med:.3f} | "
              f"{' / '.join(f'{x:.3f}' for x in ratios)} | "
              f"{' / '.join(f'{c:.1f}' for c in comp) or '-'} |")


if __name__ == "__main__":
    main()
