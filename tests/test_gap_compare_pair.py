"""compare's pairing module by value (issue 46: six mutants of report/compare/pair.py
survived the compare tests). Expectations by hand from the inputs: a run of batch 64 whose
median step is 0.10 s runs 640 samples/s; which side has one run; how many results of the
matched cases went unused; a noisy or failed result named by the first 8 characters of
its id."""

from __future__ import annotations

import warnings

import pytest

from accelbench.errors import AccelbenchWarning
from accelbench.report.compare.pair import compare_results
from accelbench.report.compare.stats import ONE_RUN_NOTE
from tests.test_compare import A_TIMES, B_FAST, make_result

DAY1 = "2026-01-01T00:00:00.000+00:00"
DAY2 = "2026-01-02T00:00:00.000+00:00"
DAY3 = "2026-01-03T00:00:00.000+00:00"


def _quiet(*args: object, **kwargs: object):  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return compare_results(*args, **kwargs)  # type: ignore[arg-type]


def test_each_side_s_throughput_is_its_run_s_own() -> None:
    a = make_result("a1", times=A_TIMES, finished=DAY1)  # median 0.10 s, batch 64
    b = make_result("b1", precision="amp_bf16", times=B_FAST, finished=DAY1)  # 0.05 s
    case = _quiet([a], [b]).cases[0]
    doc = case.to_dict()
    assert doc["a_samples_per_s"] == pytest.approx(640.0)
    assert doc["b_samples_per_s"] == pytest.approx(1280.0)
    assert doc["a_samples_per_s_ci95"] == pytest.approx(list(a.stats.samples_per_s_ci95))
    assert (doc["a_ci_scope"], doc["a_repeats"]) == ("iterations of 1 run", 1)
    assert doc["throughput_ratio"] == pytest.approx(2.0)


def test_a_side_without_a_usable_measurement_has_no_throughput() -> None:
    a = make_result("a1", times=A_TIMES, finished=DAY1)
    b = make_result("b1", precision="amp_bf16", times=(0.05, 0.06), status="insufficient",
                    finished=DAY1)
    with pytest.warns(AccelbenchWarning, match="no usable measurement"):
        doc = compare_results([a], [b]).cases[0].to_dict()
    assert doc["a_samples_per_s"] == pytest.approx(640.0)
    assert doc["b_samples_per_s"] is None and doc["b_samples_per_s_ci95"] is None
    assert doc["throughput_note"] == "B is insufficient"


def _group(prefix: str, suite: str, **kw: object) -> list:  # type: ignore[type-arg]
    return [make_result(f"{prefix}{i}", suite=suite, times=t, started=day, finished=day,
                        **kw)  # type: ignore[arg-type]
            for i, (t, day) in enumerate(((A_TIMES, DAY1), ((0.10, 0.11, 0.12), DAY2)))]


def test_the_note_says_which_side_has_one_run() -> None:
    group_a = _group("ga", "s1")
    group_b = _group("gb", "s2", precision="amp_bf16")
    one_a = [make_result("oa", times=A_TIMES, finished=DAY3)]
    one_b = [make_result("ob", precision="amp_bf16", times=B_FAST, finished=DAY3)]
    for a, b, side in ((group_a, one_b, "B"), (one_a, group_b, "A"),
                       (one_a, one_b, "A and B")):
        case = _quiet(a, b).cases[0]
        assert case.throughput.significant is None
        assert case.throughput.note == ONE_RUN_NOTE.format(side=side), side
    # Both sides groups of two (the same times): the two-level CI, ratio 1, no difference.
    both = _quiet(group_a, group_b).cases[0]
    assert both.throughput.value == pytest.approx(1.0) and both.throughput.significant is False
    assert both.throughput.note == "R = 2 / 2 runs: two-level bootstrap (runs, then iterations)"


def test_the_same_results_on_both_sides_are_said_and_make_no_claim() -> None:
    runs = _group("r", "s1")
    cmp = _quiet(runs, runs)
    assert "A and B select the same results" in cmp.notes
    case = cmp.cases[0]
    assert case.throughput.significant is None
    assert case.throughput.note == ONE_RUN_NOTE.format(side="A and B (the same runs)")
    other = _quiet(runs[:1], runs[1:])
    assert "A and B select the same results" not in other.notes


def test_the_results_of_matched_cases_left_unused_are_counted() -> None:
    # Paired within suite s1; a_new (suite s2) and b_new (no suite) are left unused.
    a = [make_result("a_s1", times=A_TIMES, suite="s1", finished=DAY1),
         make_result("a_new", times=(1.0, 1.0, 1.0), suite="s2", finished=DAY3)]
    b = [make_result("b_s1", precision="amp_fp16", times=B_FAST, suite="s1",
                     finished="2026-01-01T00:10:00.000+00:00"),
         make_result("b_new", precision="amp_fp16", times=(2.0, 2.0, 2.0), finished=DAY3),
         make_result("b_new2", precision="amp_fp16", times=(2.0, 2.0, 2.0), finished=DAY2)]
    cmp = _quiet(a, b)
    assert cmp.notes[-1] == (
        "3 other result(s) of the matched cases not used: 1 of 1 case(s) paired within one "
        "suite, the rest by closest start time (see 'paired')")


def test_warnings_name_a_result_by_the_first_eight_characters_of_its_id() -> None:
    quiet = make_result("0123456789abcdef-a", times=A_TIMES, finished=DAY1)
    noisy = make_result("fedcba9876543210-b", precision="amp_bf16", times=B_FAST,
                        finished=DAY1, noise_reasons=("load average 3.1 on 2 CPUs",))
    with pytest.warns(AccelbenchWarning) as got:
        compare_results([quiet], [noisy])
    (msg,) = [str(w.message) for w in got]
    assert msg.startswith("1 compared result(s) are noisy, their ratios may mislead: "
                          "fedcba98 (load average 3.1 on 2 CPUs); rerun"), msg
    failed = make_result("abcdefghijkl", precision="amp_bf16", times=(0.05, 0.06),
                         status="insufficient", finished=DAY1)
    with pytest.warns(AccelbenchWarning) as got:
        compare_results([quiet], [failed])
    (msg,) = [str(w.message) for w in got]
    assert msg.startswith("1 compared result(s) have no usable measurement and no ratio: "
                          "abcdefgh (insufficient) ("), msg
