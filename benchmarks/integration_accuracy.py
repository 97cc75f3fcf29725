"""Integration accuracy of the background power sampler against exact integrals.

The sampler thread reads a synthetic power signal computed from the real clock
at the moment of each read, exactly as it reads a sensor, and integrates it
with the trapezoid rule. The error is measured against the closed-form
integral over the same span. Signals:

* ``sine``: P(t) = a + b sin(2 pi f t), f = 2 Hz: a smooth load swing.
* ``sine-fast``: the same at 7.3 Hz, not a whole number of periods per window,
  where a 50 ms interval samples each period only about three times.
* ``square``: a 0.5 s period square wave between two levels: step changes
  (training step boundaries), where the trapezoid errs by up to half an
  interval per edge.

    python benchmarks/integration_accuracy.py --duration-s 3 --intervals-ms 2 10 50
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

from accelbench.meters.sampler import PowerSampler

A_W, B_W = 150.0, 100.0
LOW_W, HIGH_W, PERIOD_S = 60.0, 300.0, 0.5


def make_sine(
    f_hz: float,
) -> tuple[Callable[[float], float], Callable[[float, float], float]]:
    w = 2 * math.pi * f_hz

    def power(t: float) -> float:
        return A_W + B_W * math.sin(w * t)

    def integral(t1: float, t2: float) -> float:
        return A_W * (t2 - t1) - B_W / w * (math.cos(w * t2) - math.cos(w * t1))

    return power, integral


def square(t: float) -> float:
    return HIGH_W if (t % PERIOD_S) < PERIOD_S / 2 else LOW_W


def square_integral(t1: float, t2: float) -> float:
    def cumulative(t: float) -> float:
        periods, rest = divmod(t, PERIOD_S)
        half = PERIOD_S / 2
        in_period = HIGH_W * min(rest, half) + LOW_W * max(rest - half, 0.0)
        return periods * (HIGH_W + LOW_W) * half + in_period

    return cumulative(t2) - cumulative(t1)


SIGNALS: dict[str, tuple[Callable[[float], float], Callable[[float, float], float]]] = {
    "sine": make_sine(2.0),
    "sine-fast": make_sine(7.3),
    "square": (square, square_integral),
}


def run(
    signal: str, interval_s: float, duration_s: float
) -> tuple[float, float, float, int, float]:
    """Sample ``signal`` for ``duration_s``; return (measured, exact, rel error, n, mean dt)."""
    power, integral = SIGNALS[signal]
    t0 = time.monotonic()
    sampler = PowerSampler.single(lambda: power(time.monotonic() - t0), interval_s=interval_s)
    sampler.start()
    time.sleep(duration_s)
    sampler.stop()
    series = sampler.series["power"]
    assert series.t_first_s is not None and series.t_last_s is not None
    exact = integral(series.t_first_s - t0, series.t_last_s - t0)
    measured = series.energy_j
    return (
        measured,
        exact,
        abs(measured - exact) / exact,
        series.n_samples,
        series.mean_interval_s or 0.0,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration-s", type=float, default=3.0)
    parser.add_argument("--intervals-ms", type=float, nargs="+", default=[2.0, 10.0, 50.0])
    parser.add_argument("--signals", nargs="+", default=list(SIGNALS), choices=list(SIGNALS))
    args = parser.parse_args()
    print(
        f"{'signal':<10} {'interval':>9} {'achieved':>9} {'samples':>8} "
        f"{'measured J':>11} {'exact J':>11} {'rel error':>10}"
    )
    for signal in args.signals:
        for interval_ms in args.intervals_ms:
            measured, exact, rel, n, mean_dt = run(signal, interval_ms / 1000, args.duration_s)
            print(
                f"{signal:<10} {interval_ms:>7.1f}ms {mean_dt * 1000:>7.2f}ms {n:>8d} "
                f"{measured:>11.3f} {exact:>11.3f} {rel:>10.3%}"
            )


if __name__ == "__main__":
    main()
