"""Time figures that unit tests used to assert as wall-clock bounds (issue 46).

A unit test that asserts "under 2 s" fails on a loaded machine and says nothing on a
quiet one; where the bound was a promise to users it is measured here instead, with the
machine's load beside it:

- ``--max-time`` overshoot: how far past ``--max-time`` the adaptive loop ends (a step of
  2-20 ms alternating, target CI out of reach, ``--max-time 0.5``): the wall time of the
  loop minus 0.5 s, and the step that crossed the limit.
- a strict cap that refuses the energy window's extension (0.2 s, 10 ms steps): wall time.
- counting a paper-size VGG16's FLOPs on the meta device (nothing allocated): wall time.

    python benchmarks/time_bounds.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time


def _max_time_overshoot() -> tuple[float, float]:
    from accelbench.execution.measure import Loop, measure
    from accelbench.spec import MeasurementPolicy

    state = {"i": 0}

    def jittery() -> None:
        state["i"] += 1
        time.sleep(0.02 if state["i"] % 2 else 0.0005)

    pol = MeasurementPolicy(target_ci=0.001, max_time_s=0.5, min_iterations=5)
    t0 = time.perf_counter()
    got = measure(Loop(jittery, lambda: None, pol, 1))
    return time.perf_counter() - t0 - 0.5, got.times_s[-1]


def _strict_cap() -> float:
    from accelbench.execution.measure import Loop, run_loop
    from accelbench.meters.updates import EnergyWindow
    from accelbench.spec import MeasurementPolicy

    window = EnergyWindow(min_s=5.0, min_steps=32, update_period_s=0.1)
    policy = MeasurementPolicy(max_time_s=0.2, strict_max_time=True, min_iterations=3,
                               warmup_min=1, warmup_max=1)
    t0 = time.perf_counter()
    run_loop(Loop(lambda: time.sleep(0.01), lambda: None, policy, 1, energy_window=window))
    return time.perf_counter() - t0


def _vgg_flops() -> float:
    from accelbench.backends import workload_flops

    t0 = time.perf_counter()
    workload_flops("vgg16", "paper", 64)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    over, crossing, strict, vgg = [], [], [], []
    for _ in range(args.runs):
        o, c = _max_time_overshoot()
        over.append(o)
        crossing.append(c)
        strict.append(_strict_cap())
        vgg.append(_vgg_flops())
    med = statistics.median
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; "
          f"medians of {args.runs} runs (max in brackets)")
    print(f"--max-time 0.5 s overshoot: {med(over) * 1e3:.0f} ms ({max(over) * 1e3:.0f}); "
          f"the step that crossed it {med(crossing) * 1e3:.0f} ms")
    print(f"--strict-max-time 0.2 s with an energy window refused: {med(strict):.2f} s "
          f"({max(strict):.2f})")
    print(f"VGG16 paper FLOPs on the meta device: {med(vgg):.2f} s ({max(vgg):.2f})")


if __name__ == "__main__":
    main()
