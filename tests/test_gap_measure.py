"""When the adaptive loop tests its CI again after a CI stop that the late blocks undid
(issue 46: the mutant ``next_check = len(times) + 1`` -> ``- 1`` survived; it re-tests
the same blocks at once and so pushes the next test a geometric step further on, which
changes the blocks and steps a case stops at).

The loop's own rule: the CI is first tested once the minimum is done (10 blocks), and
after a test at ``n`` blocks next at ``max(n + 1, ceil(1.1 n))``; a CI stop waits for the
blocks still running and is undone when they widen the CI, and then the CI is tested
again on the very next block.
"""

from __future__ import annotations

import pytest

from accelbench.execution import measure as measure_module
from accelbench.spec import MeasurementPolicy
from accelbench.stats import throughput_ci_rel_halfwidth
from tests.test_measure_queued import Scripted


def test_after_an_undone_ci_stop_the_ci_is_tested_on_the_next_block(
        monkeypatch: pytest.MonkeyPatch) -> None:
    tested: list[int] = []
    real = measure_module.ci_reached

    def spy(times: list[float], samples_per_step: int, target: float) -> bool:
        tested.append(len(times))
        return real(times, samples_per_step, target)

    monkeypatch.setattr(measure_module, "ci_reached", spy)
    target = 0.046
    # Blocks alternate 1.0/1.1 ms up to the 9th, then 1.0 ms; blocks 10-12 are slow
    # (1.5 ms) and are still running (3 late) when the 10th block's CI stops the loop.
    times = [0.0015 if 10 <= i <= 12 else (0.0011 if i % 2 and i < 9 else 0.001)
             for i in range(40)]
    # The CI of the first n blocks against the target, n = 10, 13, 14, 15, 16, 19:
    assert throughput_ci_rel_halfwidth(times[:10], 1) <= target  # the stop
    assert throughput_ci_rel_halfwidth(times[:13], 1) > target  # undone by the late 3
    assert throughput_ci_rel_halfwidth(times[:14], 1) > target  # the next block: not yet
    assert throughput_ci_rel_halfwidth(times[:15], 1) <= target  # (never tested)
    assert throughput_ci_rel_halfwidth(times[:16], 1) <= target  # max(15, ceil(15.4))
    assert throughput_ci_rel_halfwidth(times[:19], 1) <= target  # with its late 3: stop
    timer = Scripted(lambda i: times[i], lag=3)
    pol = MeasurementPolicy(target_ci=target, min_iterations=10, min_time_s=0.0)
    got = measure_module.measure(measure_module.Loop(lambda: None, lambda: None, pol, 1,
                                                     blocks=timer), k=20, ahead=8)
    assert tested == [10, 13, 14, 16, 19]
    assert got.stop_reason == "target_ci"
    assert len(got.times_s) == 19 and got.steps == 19 * 20 == sum(timer.sizes)
