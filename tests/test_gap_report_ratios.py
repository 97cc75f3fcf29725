"""Issue 46: the report's ratio bars by value and direction, against hand-computed ratios.

The precision speed-up is the mixed-precision run's throughput over its fp32 run's; the
framework ratio is the other framework's throughput over the base framework's (torch).
Each expected value is worked out here from the step times given (median step time,
samples per step), so an inverted ratio (A/B for B/A) or a wrong pairing fails.
"""

from __future__ import annotations

import pytest

from accelbench.report.pairs import (
    base_framework,
    framework_ratios,
    left_out_count,
    precision_speedups,
)
from accelbench.report.rows import case_rows
from accelbench.result import EnergyReading, Result
from accelbench.spec import RunSpec
from accelbench.stats import compute_stats

FP32_TIMES = (0.10, 0.12, 0.11, 0.09, 0.10)  # median 0.10 s
HALF_TIMES = (0.05, 0.06, 0.055, 0.045, 0.05)  # median 0.05 s: twice as fast
JAX_TIMES = (0.08, 0.09, 0.085, 0.075, 0.08)  # median 0.08 s: 1.25x torch


def result(rid: str, times: tuple[float, ...], *, precision: str = "fp32",  # noqa: PLR0913
           framework: str = "torch", suite: str | None = None,
           when: str = "2026-01-01T00:00:00.000+00:00", status: str = "ok",
           energy_per_sample: float | None = None, batch: int = 4,
           noisy: bool = False) -> Result:
    spec = RunSpec(workload="lstm", size="tiny", batch_size=batch,
                   precision=precision, framework=framework)  # type: ignore[arg-type]
    ok = status == "ok"
    energy = () if energy_per_sample is None else (
        EnergyReading(device="cpu", scope="cpu-package", source="counter",
                      energy_j=energy_per_sample * 100, avg_power_w=30.0,
                      energy_j_per_sample=energy_per_sample),)
    return Result(
        id=rid, spec=spec, status=status, sample_unit="sentence",  # type: ignore[arg-type]
        samples_per_step=batch, param_count=1,
        stats=compute_stats(times, batch, trim_fraction=0.0, stop_reason="iterations")
        if ok else None,
        iteration_times_s=times if ok else (), error=None if ok else "boom",
        machine={"hostname": "h", "cpu": {"model": "Test CPU"}, "gpus": []},
        suite_id=suite, started_at=when, finished_at=when, energy=energy,
        noise={"flagged": True, "kinds": ["contention"]} if noisy else {})


def _by_id(*results: Result) -> dict[str, Result]:
    return {r.id: r for r in results}


def test_the_precision_speedup_is_mixed_over_fp32() -> None:
    base = result("fp32run1", FP32_TIMES)
    half = result("bf16run1", HALF_TIMES, precision="amp_bf16")
    results = [base, half]
    [bar] = precision_speedups(case_rows(results), _by_id(*results))
    # (4 / 0.05) / (4 / 0.10) = 2.0: bf16 twice as fast, not 0.5.
    assert bar.value == pytest.approx(2.0)
    assert bar.precision == "amp_bf16"
    assert bar.label == "cpu lstm tiny bs=4: amp_bf16"
    assert bar.ci95 is not None and bar.ci95[0] <= 2.0 <= bar.ci95[1]
    assert bar.significant is None  # one run a side: no significance claim
    assert "closest in time" in bar.source
    # A slower half-precision run: a bar below 1.
    slow = result("fp16slow", tuple(t * 4 for t in HALF_TIMES), precision="amp_fp16")
    results = [base, slow]
    [bar] = precision_speedups(case_rows(results), _by_id(*results))
    assert bar.value == pytest.approx(0.5)


def test_the_same_suites_fp32_run_is_preferred_else_the_closest_in_time() -> None:
    same_suite_far = result("fp32same", tuple(t * 2 for t in FP32_TIMES), suite="s1",
                            when="2026-01-01T00:00:00.000+00:00")
    other_near = result("fp32near", FP32_TIMES, suite="s2",
                        when="2026-01-05T00:00:10.000+00:00")
    half = result("bf16run1", HALF_TIMES, precision="amp_bf16", suite="s1",
                  when="2026-01-05T00:00:00.000+00:00")
    results = [same_suite_far, other_near, half]
    [bar] = precision_speedups(case_rows(results), _by_id(*results))
    assert bar.value == pytest.approx(4.0)  # over the same suite's 0.20 s run
    assert bar.source.startswith("suite s1")
    # Without a run of its suite, the fp32 run closest in time: 2.0 over the near one.
    far = result("fp32far", tuple(t * 2 for t in FP32_TIMES), suite="s3",
                 when="2026-01-01T00:00:00.000+00:00")
    results = [far, other_near, half]
    [bar] = precision_speedups(case_rows(results), _by_id(*results))
    assert bar.value == pytest.approx(2.0)
    assert "fp32near" in bar.source and "fp32far" not in bar.source


def test_runs_without_a_valid_measurement_never_pair() -> None:
    bad = result("fp32bad1", FP32_TIMES, status="diverged")
    half = result("bf16run1", HALF_TIMES, precision="amp_bf16")
    results = [bad, half]
    assert precision_speedups(case_rows(results), _by_id(*results)) == []
    assert left_out_count(case_rows(results)) == 1
    assert left_out_count(case_rows([half])) == 0


def test_the_framework_ratio_is_the_other_over_the_base() -> None:
    torch_run = result("torchrun", FP32_TIMES, suite="s1", energy_per_sample=0.5)
    jax_run = result("jaxrun01", JAX_TIMES, framework="jax", suite="s1",
                     energy_per_sample=0.3)
    results = [torch_run, jax_run]
    rows = case_rows(results)
    assert base_framework(rows) == "torch"
    bars, table = framework_ratios(rows, _by_id(*results), "torch")
    [bar], [row] = bars, table
    # (4 / 0.08) / (4 / 0.10) = 1.25: JAX faster than torch; energy 0.3 / 0.5 = 0.6.
    assert bar.value == pytest.approx(1.25)
    assert row["throughput_ratio"] == pytest.approx(1.25)
    assert (row["base"], row["other"]) == ("torch", "jax")
    assert row["base_samples_per_s"] == pytest.approx(40.0)
    assert row["other_samples_per_s"] == pytest.approx(50.0)
    assert row["energy_ratio"] == pytest.approx(0.6)
    assert row["energy_ci95"] is not None
    assert row["same_suite"] is True and row["noisy"] is False
    assert row["throughput_ci95"][0] <= 1.25 <= row["throughput_ci95"][1]
    assert row["throughput_significant"] is None


def test_the_base_framework_comes_from_the_data() -> None:
    jax_run = result("jaxrun01", JAX_TIMES, framework="jax")
    assert base_framework(case_rows([jax_run])) == "jax"
    assert base_framework(case_rows([])) == "torch"
    assert base_framework(case_rows([jax_run, result("t", FP32_TIMES)])) == "torch"


def test_repeat_groups_pair_over_their_runs() -> None:
    # Two runs a side in one suite each: the ratio of the groups' headlines, which is
    # samples per step over the mean of the run medians: (4 / 0.08) / (4 / 0.10) = 1.25.
    a = [result(f"torch{i}", tuple(t + d for t in FP32_TIMES), suite="g1",
                when=f"2026-01-01T00:00:0{i}.000+00:00") for i, d in ((1, -0.01), (2, 0.01))]
    b = [result(f"jaxr{i}", tuple(t + d for t in JAX_TIMES), framework="jax", suite="g1",
                when=f"2026-01-01T00:00:0{i + 2}.000+00:00") for i, d in ((1, -0.01), (2, 0.01))]
    results = [*a, *b]
    bars, table = framework_ratios(case_rows(results), _by_id(*results), "torch")
    [bar] = bars
    assert bar.value == pytest.approx(1.25)
    assert isinstance(bar.significant, bool)  # two runs a side: the CI may support a claim
    assert table[0]["throughput_significant"] is bar.significant


def test_the_newest_quiet_run_is_paired_before_a_newer_noisy_one() -> None:
    base = result("fp32run1", FP32_TIMES, when="2026-01-01T00:00:00.000+00:00")
    quiet = result("bf16quie", HALF_TIMES, precision="amp_bf16",
                   when="2026-01-02T00:00:00.000+00:00")
    noisy = result("bf16nois", tuple(t * 4 for t in HALF_TIMES), precision="amp_bf16",
                   when="2026-01-03T00:00:00.000+00:00", noisy=True)
    results = [base, quiet, noisy]
    [bar] = precision_speedups(case_rows(results), _by_id(*results))
    assert bar.value == pytest.approx(2.0) and bar.noisy is False
    # A noisy run only where the case has nothing else; its bar says so.
    results = [base, noisy]
    [bar] = precision_speedups(case_rows(results), _by_id(*results))
    assert bar.value == pytest.approx(0.5) and bar.noisy is True
    # Of two fp32 runs as far apart in time from different suites, the quiet one.
    near_noisy = result("fp32nois", tuple(t * 2 for t in FP32_TIMES), noisy=True,
                        when="2026-01-03T00:00:00.000+00:00")
    near_quiet = result("fp32quie", FP32_TIMES, when="2026-01-01T00:00:00.000+00:00")
    middle = result("bf16mid1", HALF_TIMES, precision="amp_bf16",
                    when="2026-01-02T00:00:00.000+00:00")
    results = [near_noisy, near_quiet, middle]
    [bar] = precision_speedups(case_rows(results), _by_id(*results))
    assert bar.value == pytest.approx(2.0)


def test_a_group_against_one_run_says_which_side_has_one() -> None:
    a = [result(f"torch{i}", tuple(t + d for t in FP32_TIMES), suite="g1",
                when=f"2026-01-01T00:00:0{i}.000+00:00", energy_per_sample=0.5)
         for i, d in ((1, -0.01), (2, 0.01))]
    b = result("jaxone01", JAX_TIMES, framework="jax", energy_per_sample=0.3,
               when="2026-01-01T00:00:05.000+00:00")
    results = [*a, b]
    [bar], [row] = framework_ratios(case_rows(results), _by_id(*results), "torch")
    # B pairs with the run of A's group closest in time (torch2, median 0.11 s): the
    # ratio of those two runs, 0.11 / 0.08.
    assert bar.value == pytest.approx(0.11 / 0.08) and bar.significant is None
    assert "R = 1 on B:" in row["energy_note"] and "R = 1 on A and B" not in row["energy_note"]
    assert row["energy_ratio"] == pytest.approx(0.6)
    # One run a side: both sides named.
    results = [a[0], b]
    [row] = framework_ratios(case_rows(results), _by_id(*results), "torch")[1]
    assert "R = 1 on A and B:" in row["energy_note"]
