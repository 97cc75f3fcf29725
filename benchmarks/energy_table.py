"""Print energy per sample and the counter-vs-samples cross-check of stored results.

    accelbench results --suite-id gpu-check --json | python benchmarks/energy_table.py
"""

from __future__ import annotations

import json
import sys


def fmt(value: float | None, spec: str) -> str:
    return format(value, spec) if value is not None else "-".rjust(len(format(0.0, spec)))


def main() -> None:
    rows = json.load(sys.stdin)
    print(f"{'workload':13} {'batch':>5} {'precision':9} {'samples/s':>11} {'avg W':>7} "
          f"{'J/sample':>10} {'source':20} {'counter vs samples':>18}  status")
    for r in sorted(rows, key=lambda r: (r["workload"], r["precision"], r["batch_size"])):
        x = r.get("energy_cross_check_rel_diff")
        print(f"{r['workload']:13} {r['batch_size']:5d} {r['precision']:9} "
              f"{fmt(r['samples_per_s'], '11.1f')} {fmt(r['avg_power_w'], '7.1f')} "
              f"{fmt(r['energy_j_per_sample'], '10.4g')} {r['energy_source']:20} "
              f"{fmt(x * 100 if x is not None else None, '17.2f')}{'%' if x is not None else ' '}"
              f"  {r['status']}")


if __name__ == "__main__":
    main()
