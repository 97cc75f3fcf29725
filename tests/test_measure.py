"""The measurement loop with real (sleep or busy) steps; no framework involved."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np
import pytest

from accelbench.backends.blocks import BlockTime, HostBlocks
from accelbench.execution.measure import (
    BLOCK_TARGET_S,
    BLOCKS_UNDER_CAP,
    MIN_BLOCKS,
    Loop,
    block_size,
    ci_reached,
    measure,
    run_loop,
    warm_up,
)
from accelbench.spec import MeasurementPolicy
from accelbench.stats import compute_stats, throughput_ci_rel_halfwidth


def _busy(seconds: float):  # type: ignore[no-untyped-def]
    def step() -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    return step


def _noop() -> None:
    pass


def test_exact_iterations_and_raw_times_kept() -> None:
    pol = MeasurementPolicy(iterations=17, warmup_min=2, warmup_max=4)
    t = run_loop(Loop(_busy(0.001), _noop, pol, samples_per_step=8))
    assert len(t.times_s) == 17
    assert t.stop_reason == "iterations"
    assert 2 <= len(t.warmup_times_s) <= 4
    assert all(x >= 0.001 for x in t.times_s)


def test_adaptive_stop_on_target_ci() -> None:
    pol = MeasurementPolicy(target_ci=0.2, min_iterations=10, max_time_s=30)
    times, reason = (got := measure(Loop(_busy(0.0005), _noop, pol, 1))).times_s, got.stop_reason
    assert reason == "target_ci"
    assert 10 <= len(times) < 1000


def test_stops_at_max_time_when_noise_is_high() -> None:
    state = {"i": 0}

    def jittery() -> None:
        state["i"] += 1
        time.sleep(0.02 if state["i"] % 2 else 0.0005)

    pol = MeasurementPolicy(target_ci=0.001, max_time_s=0.5, min_iterations=5)
    start = time.perf_counter()
    got = measure(Loop(jittery, _noop, pol, 1))
    times, reason = got.times_s, got.stop_reason
    assert reason == "max_time"
    # Every step but the last started before the 0.5 s limit (the times are part of the
    # elapsed time the loop checks), unless the minimum of 5 carried it past: a count of
    # the loop's own figures, not a wall-clock bound the machine's load decides. How far
    # past --max-time a loop ends is a figure: benchmarks/time_bounds.py.
    assert len(times) >= 5
    assert sum(times[:-1]) < 0.5 or len(times) == 5
    assert time.perf_counter() - start < 60, "a 0.5 s --max-time loop ran a minute: a hang"


def test_stops_at_max_iterations() -> None:
    pol = MeasurementPolicy(target_ci=0.001, max_iterations=12, min_iterations=5)
    state = {"i": 0}

    def alternating() -> None:
        state["i"] += 1
        time.sleep(0.004 if state["i"] % 2 else 0.0005)

    got = measure(Loop(alternating, _noop, pol, 1))
    times, reason = got.times_s, got.stop_reason
    assert reason == "max_iterations"
    assert len(times) == 12


def test_warmup_runs_until_step_time_stops_falling() -> None:
    # Steps get faster for the first 8 iterations, then are flat.
    state = {"i": 0}

    def warming() -> None:
        state["i"] += 1
        time.sleep(max(0.002, 0.03 - 0.004 * state["i"]))

    pol = MeasurementPolicy(warmup_min=5, warmup_max=40)
    times = warm_up(warming, _noop, pol)
    assert len(times) >= 8
    assert len(times) < 40
    assert times[-1] < times[0]


def test_warmup_is_bounded_when_time_keeps_falling() -> None:
    state = {"i": 0}

    def always_faster() -> None:
        state["i"] += 1
        time.sleep(0.05 / state["i"])

    pol = MeasurementPolicy(warmup_min=5, warmup_max=9)
    assert len(warm_up(always_faster, _noop, pol)) == 9


def test_synchronize_is_inside_the_timed_region() -> None:
    # A device that is "asynchronous": the step returns at once, sync waits.
    pol = MeasurementPolicy(iterations=5, warmup_min=0, warmup_max=0)
    t = run_loop(Loop(_noop, _busy(0.003), pol, 1))
    assert min(t.times_s) >= 0.003
    assert t.warmup_times_s == ()


# -- minimum samples (issue 10) --------------------------------------------------------------


def test_warmup_minimum_is_honoured_past_its_time_limit() -> None:
    pol = MeasurementPolicy(warmup_min=4, warmup_max=10, warmup_max_time_s=0.001)
    notes: list[str] = []
    times = warm_up(_busy(0.005), _noop, pol, notes=notes)
    assert len(times) == 4
    assert len(notes) == 1 and "minimum of 4 iterations" in notes[0]
    # Within its time, no note.
    quiet: list[str] = []
    warm_up(_busy(0.0005), _noop, MeasurementPolicy(warmup_min=2, warmup_max=3), notes=quiet)
    assert quiet == []


def test_measurement_goes_on_to_the_minimum_past_max_time() -> None:
    state = {"i": 0}

    def jittery() -> None:  # never reaches a tight CI
        state["i"] += 1
        time.sleep(0.008 if state["i"] % 2 else 0.001)

    pol = MeasurementPolicy(target_ci=0.001, max_time_s=0.01, min_iterations=8, warmup_max=0,
                            warmup_min=0)
    t = run_loop(Loop(jittery, _noop, pol, 1))
    assert len(t.times_s) == 8
    assert t.stop_reason == "max_time"
    assert not t.below_minimum
    assert len(t.notes) == 1 and "past --max-time 0.01 s to the minimum of 8" in t.notes[0]


def test_strict_max_time_cuts_below_the_minimum() -> None:
    pol = MeasurementPolicy(target_ci=0.001, max_time_s=0.01, min_iterations=8, warmup_max=0,
                            warmup_min=0, strict_max_time=True)
    t = run_loop(Loop(_busy(0.004), _noop, pol, 1))
    assert 1 <= len(t.times_s) < 8
    assert t.stop_reason == "max_time"
    assert t.below_minimum
    assert "--strict-max-time" in t.notes[-1] and "no CI" in t.notes[-1]


def test_exact_iterations_below_the_minimum_are_honoured() -> None:
    pol = MeasurementPolicy(iterations=2, min_iterations=10, warmup_min=0, warmup_max=0)
    t = run_loop(Loop(_busy(0.001), _noop, pol, 1))
    assert len(t.times_s) == 2 and not t.below_minimum and t.notes == ()


def test_adaptive_stop_decides_on_the_reported_ci() -> None:
    """The stop test is the reported CI: equal decisions up to 256 times; above, where a
    cheap screen runs first, a stop still always means a reported CI within the target."""
    rng = np.random.default_rng(11)
    targets = (0.005, 0.01, 0.02, 0.05)
    for trial in range(40):
        n = int(rng.integers(10, 250)) if trial < 30 else int(rng.integers(257, 600))
        times = list(rng.lognormal(np.log(0.01), float(rng.uniform(0.01, 0.2)), n))
        rel = compute_stats(times, 32, trim_fraction=0.01, stop_reason="target_ci")
        assert rel.ci_rel_halfwidth is not None
        for target in targets:
            reached = ci_reached(times, 32, target)
            if n <= 256:
                assert reached == (rel.ci_rel_halfwidth <= target), trial
            elif reached:
                assert rel.ci_rel_halfwidth <= target, trial


def test_a_target_ci_stop_reports_a_ci_within_the_target(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Each step's time is set (0.5-1 ms in a fixed pattern), not measured: on a busy
    # machine a real busy-wait's times spread with the load and the stop is luck.
    from accelbench.execution import measure

    pol = MeasurementPolicy(target_ci=0.03, min_iterations=10, max_time_s=20,
                            warmup_min=0, warmup_max=0)
    state = {"i": 0}

    def noisy() -> None:
        state["i"] += 1

    def timed(step: Callable[[], None], sync: Callable[[], None]) -> float:
        step()
        sync()
        return 0.0005 * (1 + (state["i"] * 7919 % 13) / 13)

    monkeypatch.setattr(measure, "_timed", timed)
    t = run_loop(Loop(noisy, _noop, pol, 4))
    st = compute_stats(t.times_s, 4, trim_fraction=0.01, stop_reason=t.stop_reason)
    assert t.stop_reason == "target_ci"
    assert st.ci_rel_halfwidth is not None and st.ci_rel_halfwidth <= 0.03
    assert state["i"] == len(t.warmup_times_s) + len(t.times_s)  # every step ran once


def test_insufficient_case_through_the_worker() -> None:
    from tests.test_isolation import run_plugin_case

    strict = MeasurementPolicy(max_time_s=0.005, strict_max_time=True, min_iterations=10,
                               warmup_min=1, warmup_max=1, target_ci=0.001)
    r = run_plugin_case("run_busy", "run_busy.py", policy=strict, batch_size=64)
    assert r.status == "insufficient", r.error
    assert r.stats is not None and r.stats.n < 10
    assert r.stats.samples_per_s_ci95 is None and r.stats.ci_rel_halfwidth is None
    assert "--strict-max-time" in (r.error or "")

    lenient = MeasurementPolicy(max_time_s=0.001, min_iterations=10, warmup_min=1,
                                warmup_max=1, target_ci=0.001)
    r = run_plugin_case("run_busy", "run_busy.py", policy=lenient, batch_size=64)
    assert r.status == "ok", r.error
    assert r.stats is not None and r.stats.n == 10 and r.stats.ci_rel_halfwidth is not None
    assert any("past --max-time" in n for n in r.noise["measure_notes"])


# -- blocks of steps, one device wait each (issue 25) -----------------------------------------


class _ScriptedBlocks:
    """A block timer on a fake clock: step i takes ``per_step(i)`` seconds of device time;
    a block's time is the sum of its steps'. Counts steps run and waits."""

    clock = "fake clock"

    def __init__(self, per_step) -> None:  # type: ignore[no-untyped-def]
        self.per_step = per_step
        self.steps = 0
        self.waits = 0
        self.sizes: list[int] = []

    def run_block(self, k: int) -> BlockTime:
        total = 0.0
        for _ in range(k):
            total += self.per_step(self.steps)
            self.steps += 1
        self.waits += 1
        self.sizes.append(k)
        return BlockTime(total)


def test_block_size_comes_from_the_warmup_step_time_and_fits_the_count() -> None:
    adaptive = MeasurementPolicy()  # --max-iterations 1000: at most 33 a block
    assert block_size([0.004] * 6, adaptive) == math.ceil(BLOCK_TARGET_S / 0.004)
    assert block_size([0.0001] * 6, adaptive) == 1000 // BLOCKS_UNDER_CAP
    assert block_size([0.5] * 6, adaptive) == 1  # a step longer than a block: one a block
    assert block_size([], adaptive) == 1  # no warm-up, nothing to size it from
    # The last steps decide (warm-up's first steps are slow).
    assert block_size([0.5, 0.5, 0.01, 0.01, 0.01], adaptive) == math.ceil(
        BLOCK_TARGET_S / 0.01)
    assert block_size([0.0001] * 6, MeasurementPolicy(iterations=95)) == 3
    assert block_size([0.0001] * 6, MeasurementPolicy(iterations=10)) == 1


def test_exact_iterations_are_exact_with_blocks() -> None:
    fake = _ScriptedBlocks(lambda i: 0.001)
    got = measure(Loop(_noop, _noop, MeasurementPolicy(iterations=95), 4, blocks=fake), k=7)
    assert got.stop_reason == "iterations"
    assert got.steps == fake.steps == 95  # N steps, the last block shorter
    assert got.block_steps == fake.sizes == [7] * 13 + [4]
    assert len(got.times_s) == 14 and got.times_s == pytest.approx([0.001] * 14)


def test_the_stop_rule_judges_per_step_means_of_blocks() -> None:
    """Steps alternate 0.4/0.65 ms (a runtime's two stable modes): single steps give no CI
    within 2%, while blocks of 50 steps all have the same per-step mean."""
    bimodal = (lambda i: 0.0004 if i % 2 else 0.00065)  # noqa: E731
    fake = _ScriptedBlocks(bimodal)
    pol = MeasurementPolicy(target_ci=0.02)
    got = measure(Loop(_noop, _noop, pol, 4, blocks=fake), k=50)
    assert got.stop_reason == "target_ci"
    assert len(got.times_s) == MIN_BLOCKS and got.steps == 50 * MIN_BLOCKS
    assert got.times_s == pytest.approx([0.000525] * MIN_BLOCKS)
    singles = [bimodal(i) for i in range(got.steps)]
    assert throughput_ci_rel_halfwidth(singles, 4) > 0.02  # what per-step times would say


def test_max_iterations_caps_blocks_at_the_exact_step_count() -> None:
    # Block means alternate 1 and 3 ms: the CI never gets within 0.1%.
    fake = _ScriptedBlocks(lambda i: 0.001 if (i // 30) % 2 else 0.003)
    pol = MeasurementPolicy(target_ci=0.001, max_iterations=100, min_iterations=10)
    got = measure(Loop(_noop, _noop, pol, 1, blocks=fake), k=30)
    notes = got.notes
    assert got.stop_reason == "max_iterations"
    assert got.steps == fake.steps == 100 and got.block_steps == [30, 30, 30, 10]
    # The record says why the target was not reached, and what would reach it.
    assert len(notes) == 1 and "--max-iterations 100 stopped" in notes[0]
    assert "4 timed blocks" in notes[0] and "higher --max-iterations" in notes[0]


def test_the_minimum_counts_blocks_too() -> None:
    """Fewer than MIN_BLOCKS blocks is not enough for a CI, however many steps they hold:
    --max-time passes to the minimum, and --strict-max-time cuts it as insufficient."""
    fake = _ScriptedBlocks(lambda i: 0.001 * (1 + (i // 20) % 2))  # blocks: 1, 2, 1 ms...
    pol = MeasurementPolicy(target_ci=0.001, max_time_s=1e-9, min_iterations=10)
    got = measure(Loop(_noop, _noop, pol, 1, blocks=fake), k=20)
    assert got.stop_reason == "max_time" and len(got.times_s) == MIN_BLOCKS
    assert got.steps == 20 * MIN_BLOCKS

    strict = MeasurementPolicy(target_ci=0.001, max_time_s=1e-9, min_iterations=10,
                               strict_max_time=True, warmup_min=3, warmup_max=3)
    t = run_loop(Loop(_busy(0.0002), _noop, strict, 1, blocks=HostBlocks(_busy(0.0002), _noop)))
    assert t.below_minimum and len(t.times_s) == 1 and t.steps == t.block_steps[0] > 1
    assert "timed blocks" in t.notes[-1] and "no CI" in t.notes[-1]


def test_one_device_wait_per_block_and_its_time_in_the_block() -> None:
    waits = {"n": 0}

    def device_wait() -> None:  # an asynchronous device: the work shows at the wait
        waits["n"] += 1
        _busy(0.002)()

    got = measure(Loop(_noop, device_wait, MeasurementPolicy(iterations=40), 1,
                       blocks=HostBlocks(_noop, device_wait)), k=10)
    assert waits["n"] == 1 + 4  # one before measuring, then one a block, never one a step
    assert got.steps == 40 and all(t >= 0.002 / 10 for t in got.times_s)


def test_run_loop_with_blocks_records_how_it_timed() -> None:
    pol = MeasurementPolicy(iterations=200, warmup_min=3, warmup_max=3)
    t = run_loop(Loop(_busy(0.0003), _noop, pol, 8, blocks=HostBlocks(_busy(0.0003), _noop)))
    assert t.steps == 200 and sum(t.block_steps) == 200
    assert 1 < t.steps_per_block <= 200 // BLOCKS_UNDER_CAP
    assert len(t.times_s) == len(t.block_steps) >= MIN_BLOCKS
    assert f"per-step means of blocks of {t.steps_per_block} steps" in t.timing()
    assert all(x >= 0.0003 for x in t.times_s)
    # Without a block timer (torch on a CPU) every step is its own time, as before.
    short = MeasurementPolicy(iterations=20, warmup_min=2, warmup_max=2)
    plain = run_loop(Loop(_busy(0.0003), _noop, short, 8))
    assert plain.block_steps == () and plain.steps == len(plain.times_s) == 20
    assert plain.timing().startswith("every step timed on its own")


def test_ranks_that_agree_on_every_step_keep_one_step_a_block() -> None:
    agreed: list[float] = []

    def agree(t: float, elapsed: float) -> tuple[float, float]:
        agreed.append(t)
        return t, elapsed

    fake = _ScriptedBlocks(lambda i: 0.001)
    pol = MeasurementPolicy(iterations=30, warmup_min=2, warmup_max=2)
    t = run_loop(Loop(_busy(0.0002), _noop, pol, 1, agree=agree, blocks=fake))
    assert fake.steps == 0 and t.steps == len(t.times_s) == 30
    assert len(agreed) == len(t.warmup_times_s) + 30


def test_cuda_event_blocks_time_each_step_and_wait_once() -> None:
    """EventBlocks' logic on a fake device clock (no GPU here): events recorded between
    steps on the given stream, one wait per block, step i = event i to event i + 1."""
    from accelbench.backends.torch.step import EventBlocks

    device = {"now_ms": 0.0, "syncs": 0}
    durations = iter([1.0, 2.5, 0.5, 4.0, 3.0])
    streams: list[object] = []

    class FakeEvent:
        def record(self, stream: object = None) -> None:
            streams.append(stream)
            self.at = device["now_ms"]

        def synchronize(self) -> None:
            device["syncs"] += 1

        def elapsed_time(self, other: FakeEvent) -> float:
            return other.at - self.at

    def step() -> None:
        device["now_ms"] += next(durations)

    stream = object()
    blocks = EventBlocks(step, FakeEvent, stream)
    b = blocks.run_block(3)
    assert b.step_times_s == pytest.approx((0.001, 0.0025, 0.0005))
    assert b.total_s == pytest.approx(0.004) and device["syncs"] == 1
    assert streams == [stream] * 4
    b = blocks.run_block(2)
    assert b.step_times_s == pytest.approx((0.004, 0.003)) and device["syncs"] == 2
    # The loop keeps the events' per-step times (for the distribution checks).
    got = measure(Loop(_noop, _noop, MeasurementPolicy(iterations=4), 1,
                       blocks=EventBlocks(lambda: step_fixed(device), FakeEvent)), k=2)
    assert got.step_times_s == pytest.approx([0.002] * 4) and got.block_steps == [2, 2]


def step_fixed(device: dict[str, float]) -> None:
    device["now_ms"] += 2.0


def test_queued_blocks_note_a_minimum_carried_past_max_time_only_when_adaptive() -> None:
    """Issue 46: the note that measurement went on past --max-time to its minimum is for
    the adaptive loop; an exact count never has a time limit to go past."""
    from tests.test_measure_queued import Scripted

    class Slow(Scripted):
        """Queuing a block of k steps takes k x 2 ms of host time (the loop's clock)."""

        def submit(self, k: int) -> None:
            time.sleep(0.002 * k)
            super().submit(k)

    def run(policy: MeasurementPolicy) -> list[str]:
        return measure(Loop(_noop, _noop, policy, 1, blocks=Slow(lambda i: 0.01, lag=1)),
                       k=5).notes

    adaptive = run(MeasurementPolicy(max_time_s=0.05, min_iterations=40, target_ci=1e-9))
    [note] = [n for n in adaptive if n.startswith(
        "measurement went on past --max-time 0.05 s to the minimum of 40 iterations")]
    # The steps done when the time ran out: fewer than the minimum, a whole number of blocks.
    done = int(note.split(" done at the limit")[0].rsplit("(", 1)[1])
    assert 0 < done < 40 and done % 5 == 0, note
    exact = run(MeasurementPolicy(iterations=40, max_time_s=0.05))
    assert not any("went on past --max-time" in n for n in exact), exact


def test_the_block_size_is_the_one_asked_even_where_no_block_was_full() -> None:
    from accelbench.execution.measure import Timings

    # An exact count of 3 steps asked in blocks of 6: one block of 3, k still 6.
    t = Timings(warmup_times_s=(), times_s=(0.01,), stop_reason="iterations",
                block_steps=(3,), block_size=6)
    assert t.steps_per_block == 6 and t.steps == 3
    assert Timings(warmup_times_s=(), times_s=(0.01, 0.01), stop_reason="iterations",
                   block_steps=(4, 2)).steps_per_block == 4
    assert Timings(warmup_times_s=(), times_s=(0.01,), stop_reason="iterations"
                   ).steps_per_block == 1


def test_one_step_a_time_the_minimum_note_names_no_blocks() -> None:
    notes = measure(Loop(lambda: time.sleep(0.02), _noop,
                         MeasurementPolicy(max_time_s=0.03, min_iterations=5,
                                           target_ci=1e-9), 1)).notes
    [note] = [n for n in notes if "went on past --max-time" in n]
    assert note.startswith("measurement went on past --max-time 0.03 s to the minimum of 5 "
                           "iterations ("), note
    done = int(note.split(" done at the limit")[0].rsplit("(", 1)[1])
    assert 0 < done < 5, note
