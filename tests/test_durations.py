"""Times for people: significant digits in the right unit, never 0.000 for a non-zero time."""

from __future__ import annotations

import io

from rich.console import Console

from accelbench.durations import fmt_ms, fmt_time
from accelbench.render import print_result, results_table
from accelbench.result import Stats
from tests.test_result import _full


def test_fmt_time_picks_the_unit_and_keeps_significant_digits() -> None:
    assert fmt_time(0.0123456) == "12.35 ms"
    assert fmt_time(1.234e-5) == "12.34 \u00b5s"
    assert fmt_time(2.5e-7) == "250 ns"
    assert fmt_time(1.5) == "1.5 s"
    assert fmt_time(12345.6) == "12345.6 s"
    assert fmt_time(0) == "0 s"
    assert fmt_time(None) == fmt_time(float("nan")) == fmt_time(-1.0) == "-"
    for tiny in (3e-7, 4.2e-9, 9.99e-7, 1e-12):
        assert not fmt_time(tiny).startswith("0 "), tiny


def test_fmt_ms_never_reads_zero_for_a_sub_microsecond_step() -> None:
    assert fmt_ms(3.12e-7) == "0.000312"
    assert fmt_ms(0.0123) == "12.3"
    assert fmt_ms(1.2345) == "1,234"
    assert fmt_ms(None) == "-"


def test_a_jax_sized_step_prints_its_times_not_zero() -> None:
    """A step of a few hundred nanoseconds (a JAX run of a tiny model) printed
    "min 0.000 ms"; the run summary and results --wide now show its digits."""
    r = _full()
    stats = Stats(n=5, median_s=4.1e-7, mean_s=4.3e-7, trimmed_mean_s=4.2e-7,
                  trim_fraction=0.1, std_s=1e-8, min_s=3.9e-7, max_s=5e-7,
                  samples_per_s=1e7, samples_per_s_ci95=None, ci_rel_halfwidth=None,
                  stop_reason="iterations")
    r = r.__class__.from_dict({**r.to_dict(), "stats": stats.to_dict(), "phases": None})
    buf = io.StringIO()
    console = Console(file=buf, width=120, color_system=None)
    print_result(console, r)
    line = next(x for x in buf.getvalue().splitlines() if "step time" in x)
    assert "median 410 ns, trimmed mean 420 ns, min 390 ns" in line
    assert "0.000" not in buf.getvalue()
    buf = io.StringIO()
    Console(file=buf, width=250, color_system=None).print(results_table([r], wide=True))
    assert "0.00041" in buf.getvalue()
