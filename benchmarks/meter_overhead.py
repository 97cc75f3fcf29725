"""Meter overhead: training throughput with the power sampler at 10 ms vs with no meter.

This machine has no power sensor, so the sampler reads a powercap (RAPL) tree
written to a temporary folder (ACCELBENCH_POWERCAP_ROOT) by a background
thread that advances the counters like a real package would: the same meter
code, thread and file reads as on a machine with RAPL. Rounds alternate so
machine noise hits both alike; the ratio is metered / unmetered (target >= 0.99).

It measures the shipped defaults (power sampling at 10 ms, RAPL counters polled at
100 ms, or faster where a counter could wrap sooner) and, for comparison, RAPL forced to
the 10 ms sampling interval. Both runs of a round time the same number of steps: energy
windows last at least 5 s, and on a shared VM a longer run reads slower by itself.

    python benchmarks/meter_overhead.py --workload resnet50 --size tiny
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

import accelbench

MAX_UJ = 262_143_328_850


def fake_powercap(root: Path, stop: threading.Event, watts: float = 40.0) -> threading.Thread:
    """Two RAPL zones whose counters advance at ``watts`` until ``stop`` is set."""
    zones = {"intel-rapl:0": "package-0", "intel-rapl:0:0": "dram"}
    for zone, name in zones.items():
        d = root / zone
        d.mkdir(parents=True)
        (d / "name").write_text(f"{name}\n")
        (d / "energy_uj").write_text("0\n")
        (d / "max_energy_range_uj").write_text(f"{MAX_UJ}\n")

    def advance() -> None:
        t0 = time.monotonic()
        while not stop.is_set():
            uj = int((time.monotonic() - t0) * watts * 1e6) % MAX_UJ
            for zone in zones:
                tmp = root / zone / "energy_uj.tmp"
                tmp.write_text(f"{uj}\n")
                os.replace(tmp, root / zone / "energy_uj")
            time.sleep(0.02)

    thread = threading.Thread(target=advance, daemon=True)
    thread.start()
    return thread


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="resnet50")
    ap.add_argument("--size", default="tiny")
    ap.add_argument("--iterations", type=int, default=80)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--interval-ms", type=float, default=10.0)
    ap.add_argument("--counter-poll-ms", type=float, action="append",
                    help="RAPL poll intervals to compare (default: 100 and 10)")
    args = ap.parse_args()
    for poll_ms in args.counter_poll_ms or [100.0, 10.0]:
        compare(args, poll_ms)


def compare(args: argparse.Namespace, poll_ms: float) -> None:
    """Alternating rounds without and with the meter; prints the ratio."""
    stop = threading.Event()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["ACCELBENCH_POWERCAP_ROOT"] = tmp
        fake_powercap(Path(tmp), stop)
        plain, metered = [], []
        n = args.iterations

        def unmetered(count: int) -> accelbench.Result:
            return accelbench.run(args.workload, size=args.size, iterations=count,
                                  energy=False, store=False)

        def with_meter(count: int) -> accelbench.Result:
            return accelbench.run(args.workload, size=args.size, iterations=count,
                                  meter_interval_ms=args.interval_ms, counter_poll_ms=poll_ms,
                                  idle_s=0, store=False)

        for i in range(args.rounds):
            # A sensor's energy window lasts at least 5 s, so a metered run may time more
            # steps than asked; the unmetered run of the round times as many (on this VM a
            # longer run reads up to ~15% slower), and the order alternates.
            if i % 2 == 0:
                b = with_meter(n)
                n = max(n, len(b.iteration_times_s))
                a = unmetered(n)
            else:
                a = unmetered(n)
                b = with_meter(n)
            if a.stats is None or b.stats is None:
                raise SystemExit(f"run failed: {a.error or b.error}")
            plain.append(a.stats.samples_per_s)
            metered.append(b.stats.samples_per_s)
            src = b.energy_source
            reading = b.primary_energy[0] if b.primary_energy else None
            polls = reading.n_samples if reading else None
            print(f"round {i + 1}: no meter {plain[-1]:9.2f}/s   sampler {metered[-1]:9.2f}/s "
                  f"({src}, {polls} polls, {len(b.iteration_times_s)} steps)   "
                  f"ratio {metered[-1] / plain[-1]:.3f}")
        stop.set()
    ratio = statistics.median(metered) / statistics.median(plain)
    print(f"{args.workload} {args.size}: metered/unmetered throughput ratio {ratio:.3f} "
          f"with RAPL polled every {poll_ms:g} ms (target >= 0.99)")


if __name__ == "__main__":
    main()
