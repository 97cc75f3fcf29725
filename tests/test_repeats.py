"""Repeated runs (``--repeats``): fresh workers, interleaved in a suite, grouped in the
store, resumed by count, and compared with a CI that covers the variation between runs.

The workload (tests/plugins/shifting_step.py) sleeps a per-worker amount each step: the
n-th worker to train gets 1.0, 3.0, 2.0 x 30 ms in turn, so one run's CI is tight while
two runs of the same case differ by far more than it, as the issue found for real models
(resnet50 tiny: 86-153 img/s over 20 runs with CIs of about +-1.8%).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import TESTS, run_cli

from accelbench import api
from accelbench.errors import ConfigError
from accelbench.report.compare import compare, compare_results
from accelbench.report.rows import repeat_positions
from accelbench.spec import MeasurementPolicy
from accelbench.stats import group_stats
from accelbench.store import ResultFilter, open_store

PLUGIN = str(TESTS / "plugins" / "shifting_step.py")
QUIET = {"energy": False, "idle_s": 0.0, "plugins": [PLUGIN]}


@pytest.fixture
def shift_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "shift"
    folder.mkdir()
    monkeypatch.setenv("ACCELBENCH_TEST_SHIFT_DIR", str(folder))
    return folder


def test_repeats_are_bounded_everywhere(tmp_path: Path) -> None:
    assert MeasurementPolicy().repeats == 1
    for bad in (0, -1, 101):
        with pytest.raises(ConfigError, match="--repeats"):
            MeasurementPolicy(repeats=bad)
    with pytest.raises(ConfigError, match="--repeats"):
        api.plan_run("lstm", size="tiny", repeats=0)
    p = run_cli("run", "lstm", "--size", "tiny", "--repeats", "0", db=tmp_path / "r.db")
    assert p.returncode == 2 and "--repeats" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
    # Suites used for comparison default to three runs; the quick ones to one.
    assert api.get_suite("paper").policy.repeats == 3
    assert api.get_suite("frameworks").policy.repeats == 3
    assert api.get_suite("quick").policy.repeats == 1
    assert api.get_suite("small").policy.repeats == 1


def test_runs_of_a_case_differ_beyond_their_cis_and_compare_says_so(
    db_path: Path, shift_dir: Path
) -> None:
    # R = 1: two runs of one case (workers 1 and 2: 30 ms and 90 ms steps).
    one_a = api.run("shifting_step", size="tiny", iterations=20, **QUIET)
    one_b = api.run("shifting_step", size="tiny", iterations=20, **QUIET)
    for r in (one_a, one_b):
        assert r.status == "ok", r.error
        assert r.stats is not None and r.stats.samples_per_s_ci95 is not None
    ci_a, ci_b = one_a.stats.samples_per_s_ci95, one_b.stats.samples_per_s_ci95  # type: ignore[union-attr]
    # The same case, and the two within-run CIs do not even overlap.
    assert one_a.spec.case_key() == one_b.spec.case_key()
    assert ci_b[1] < ci_a[0], (ci_a, ci_b)
    cmp1 = compare_results([one_a], [one_b])
    (case1,) = cmp1.cases
    assert case1.throughput.ci95 is not None and case1.throughput.ci95[1] < 1  # CI excludes 1
    assert case1.throughput.significant is None  # ... and still: cannot tell
    assert "R = 1" in case1.throughput.note and "within-run noise only" in case1.throughput.note

    # R = 3: two suites of the same case, three runs each (workers 3-5 and 6-8).
    sid_a, runs_a = api.suite("quick", workloads=["shifting_step"], precisions=["fp32"],
                              iterations=20, repeats=3, **QUIET)
    sid_b, runs_b = api.suite("quick", workloads=["shifting_step"], precisions=["fp32"],
                              iterations=20, repeats=3, **QUIET)
    assert len(runs_a) == len(runs_b) == 3
    assert all(r.status == "ok" for r in (*runs_a, *runs_b))
    assert len({r.spec.case_key() for r in (*runs_a, *runs_b)}) == 1
    with open_store(str(db_path)) as st:
        cmp3 = compare(st, f"suite:{sid_a}", f"suite:{sid_b}")
    (case3,) = cmp3.cases
    assert (len(case3.a_runs), len(case3.b_runs)) == (3, 3)
    assert case3.throughput.significant is False, case3.throughput
    low, high = case3.throughput.ci95  # type: ignore[misc]
    assert low < 1 < high
    # The between-run CI of one group is far wider than any one run's CI.
    g = group_stats([r.iteration_times_s for r in runs_a], runs_a[0].samples_per_step)
    within = float(np.median([r.stats.ci_rel_halfwidth for r in runs_a]))  # type: ignore[union-attr]
    assert g.between_runs and g.ci_rel_halfwidth is not None
    assert g.ci_rel_halfwidth > within
    spread = np.ptp([r.stats.samples_per_s for r in runs_a])  # type: ignore[union-attr]
    assert spread > 3 * within * g.samples_per_s  # runs differ by several within-run CIs
    print(f"R=1: A {one_a.samples_per_s:.1f} {ci_a}, B {one_b.samples_per_s:.1f} {ci_b}, "
          f"ratio {case1.throughput.value:.3f} {case1.throughput.ci95}; R=3: runs "
          f"{[round(r.samples_per_s or 0, 1) for r in (*runs_a, *runs_b)]}, ratio "
          f"{case3.throughput.value:.3f} {case3.throughput.ci95}; group CI +-"
          f"{g.ci_rel_halfwidth:.1%} vs within-run median +-{within:.1%}")
    doc = cmp3.to_dict()["cases"][0]
    assert (doc["a_repeats"], doc["b_repeats"]) == (3, 3)
    assert doc["throughput_significant"] is False


def test_suite_interleaves_repeats_groups_them_and_resumes_by_count(
    db_path: Path, shift_dir: Path
) -> None:
    names = ["shifting_step", "shifting_step_b"]
    events: list[tuple[str, str]] = []

    def on_event(ev: api.SuiteEvent) -> None:
        if ev.kind in ("start", "skip") and ev.case is not None:
            events.append((ev.kind, ev.case.spec.workload))

    sid, results = api.suite("quick", workloads=names, precisions=["fp32"], iterations=5,
                             repeats=2, on_event=on_event, **QUIET)
    # Round-robin: every case once, then every case again.
    assert [w for _k, w in events] == names * 2
    assert [r.spec.workload for r in results] == names * 2
    assert all(r.status == "ok" and r.suite_id == sid for r in results)
    assert all(r.spec.policy.repeats == 2 for r in results)
    with open_store(str(db_path)) as st:
        stored = st.query(ResultFilter(suite_id=sid))
        assert sorted(st.case_key_counts(sid).values()) == [2, 2]
    pos = repeat_positions(stored)
    assert sorted(pos.values()) == [(1, 2), (1, 2), (2, 2), (2, 2)]
    # Resume: both runs of both cases are stored, nothing runs again.
    events.clear()
    _sid, again = api.suite("quick", workloads=names, precisions=["fp32"], iterations=5,
                            repeats=2, suite_id=sid, on_event=on_event, **QUIET)
    assert again == [] and [k for k, _w in events] == ["skip"] * 4
    # Asking for a third run of each: only the third runs.
    _sid, third = api.suite("quick", workloads=names, precisions=["fp32"], iterations=5,
                            repeats=3, suite_id=sid, **QUIET)
    assert [r.spec.workload for r in third] == names
    with open_store(str(db_path)) as st:
        assert sorted(st.case_key_counts(sid).values()) == [3, 3]
    # The results table names the run of each result.
    p = run_cli("results", "--suite-id", sid, "--wide", db=db_path, COLUMNS="200")
    assert p.returncode == 0, p.stderr
    assert "3/3" in p.stdout and "1/3" in p.stdout
