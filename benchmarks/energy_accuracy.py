"""Energy accuracy against a known truth: accelbench's error and its 95% bound's coverage
per trace kind and sensor, and the peers (Zeus, CodeCarbon) on the same truth (issue 44).

Each trial draws a random power trace of one kind (square wave at a step frequency, ramp,
bursts, thermal drift; tests/sensor_sim.py), puts it behind one simulated sensor at the
real vendor boundary (a fake pynvml: energy counter, 25%-coverage instant power and the
1 s average; a powercap tree whose RAPL counter wraps; a fake ipmitool at 1 Hz), and
measures one window with accelbench's own meter session on simulated time. The error is
against the trace's exact energy over that window; "covered" means the reading's stated
95% bound held the truth.

    python benchmarks/energy_accuracy.py                   # 1,340 trials, about 4 min
    python benchmarks/energy_accuracy.py --trials 20       # quick look
    /tmp/peers/bin/python benchmarks/energy_accuracy.py --peers   # + Zeus, CodeCarbon (+4 min)

The simulator needs accelbench's test extra (``pip install -e '.[test]'``: pytest, numpy,
nvidia-ml-py). ``--peers`` needs zeus and codecarbon installed in the benchmark's own environment
(never an accelbench dependency); where one is missing its rows say why.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.sensor_sim import TRACE_KINDS, Trial, run_trial  # noqa: E402

#: Trials per trace kind for each sensor, relative to --trials (IPMI runs a process per
#: reading: fewer).
SHARE = {"nvml-counter": 1.0, "nvml-sampled": 1.0, "nvml-power1s": 1.0, "rapl": 0.25,
         "ipmi": 0.1}


def _pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{100 * x:.2f}%"


def accelbench_rows(trials: int, work: Path) -> list[tuple[str, str, list[Trial]]]:
    rows = []
    for sensor, share in SHARE.items():
        n = max(1, round(trials * share))
        for kind in TRACE_KINDS:
            rows.append((sensor, kind, [run_trial(sensor, kind, s, work) for s in range(n)]))
    return rows


def print_accelbench(rows: list[tuple[str, str, list[Trial]]]) -> None:
    print("accelbench, per sensor and trace kind: |error| against the truth, and the 95% bound")
    print(f"{'sensor':13s} {'kind':7s} {'trials':>6s} {'median |err|':>12s} {'worst |err|':>11s}"
          f" {'covered':>8s} {'median bound':>12s}")
    by_kind: dict[str, list[Trial]] = {}
    for sensor, kind, ts in rows:
        errs = [abs(t.error) for t in ts]
        cov = sum(t.covered for t in ts) / len(ts)
        print(f"{sensor:13s} {kind:7s} {len(ts):6d} {_pct(statistics.median(errs)):>12s} "
              f"{_pct(max(errs)):>11s} {cov:8.1%} "
              f"{_pct(statistics.median(t.bound for t in ts)):>12s}")
        by_kind.setdefault(kind, []).extend(ts)
    total = sum(len(ts) for ts in by_kind.values())
    print(f"\nper trace kind, all sensors ({total} trials):")
    for kind, ts in by_kind.items():
        cov = sum(t.covered for t in ts) / len(ts)
        print(f"  {kind:7s} covered {cov:.1%} of {len(ts)}, median bound "
              f"{_pct(statistics.median(t.bound for t in ts))}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=100,
                    help="trials per trace kind for each NVML sensor (default 100)")
    ap.add_argument("--peers", action="store_true",
                    help="also Zeus's ZeusMonitor and CodeCarbon on the same simulated NVML")
    ap.add_argument("--peer-trials", type=int, default=25,
                    help="trials per trace kind for each peer (default 25; CodeCarbon's "
                         "tracker takes about 2 s to start)")
    args = ap.parse_args()
    if args.trials < 1 or args.peer_trials < 1:
        ap.error("--trials and --peer-trials must be >= 1")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        rows = accelbench_rows(args.trials, Path(tmp))
        print_accelbench(rows)
        if args.peers:
            from benchmarks.energy_peers import print_peers

            counter = {kind: [t.error for t in ts]
                       for sensor, kind, ts in rows if sensor == "nvml-counter"}
            print_peers(args.peer_trials, Path(tmp), counter)
    print(f"\n({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
