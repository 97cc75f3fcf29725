"""JAX vs PyTorch throughput of every workload on this machine, at tiny and small size.

Each case is measured by accelbench in both frameworks, interleaved (torch, jax,
torch, jax ...) so machine noise hits both alike; the table shows each side's
median throughput over the rounds, the JAX/torch ratio and JAX's compile time.
There is no target: it is a finding.

    python benchmarks/framework_throughput.py [--sizes tiny,small] [--rounds 2]
"""

from __future__ import annotations

import argparse
import statistics

import accelbench
from accelbench.workloads import list_workloads


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="tiny,small")
    ap.add_argument("--workloads", default="", help="comma-separated (default: all)")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-time", type=float, default=4.0)
    args = ap.parse_args()
    names = [w for w in args.workloads.split(",") if w] or [w.name for w in list_workloads()]
    rows = []
    for size in args.sizes.split(","):
        for name in names:
            tput: dict[str, list[float]] = {"torch": [], "jax": []}
            compile_s: list[float] = []
            for _ in range(args.rounds):
                for fw in ("torch", "jax"):
                    r = accelbench.run(name, size=size, framework=fw, precision=args.precision,
                                       max_time=args.max_time, store=False, energy=False)
                    if r.status != "ok" or r.samples_per_s is None:
                        print(f"{name} {size} {fw}: {r.status} {r.error}")
                        continue
                    tput[fw].append(r.samples_per_s)
                    if r.compile_s is not None:
                        compile_s.append(r.compile_s)
            t = statistics.median(tput["torch"]) if tput["torch"] else None
            j = statistics.median(tput["jax"]) if tput["jax"] else None
            ratio = j / t if t and j else None
            rows.append((name, size, t, j, ratio, statistics.median(compile_s)
                         if compile_s else None))
            print(f"{name:13s} {size:6s} torch {t or 0:12.2f}/s  jax {j or 0:12.2f}/s  "
                  f"jax/torch {ratio or 0:6.2f}  jax compile {rows[-1][5] or 0:6.1f} s",
                  flush=True)
    print("\n| workload | size | torch /s | jax /s | jax / torch | jax compile s |")
    print("|---|---|---|---|---|---|")
    for name, size, t, j, ratio, comp in rows:
        print(f"| {name} | {size} | {t or 0:.4g} | {j or 0:.4g} | "
              f"{ratio if ratio is not None else float('nan'):.2f} | {comp or 0:.1f} |")


if __name__ == "__main__":
    main()
