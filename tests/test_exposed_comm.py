"""Exposed communication time (``--phases`` of a sharded case): the interval arithmetic
on made-up intervals, the exposed figure of made-up gloo and NCCL profiles, and what the
phase lines and the report's by-mode table say, for new records and for old ones. The
real 2-rank figure is checked in tests/test_sharding.py (its module launch)."""

from __future__ import annotations

import pytest

from accelbench.backends.torch.phases import covered, exposed_seconds, merged, minus, overlap
from accelbench.phase_text import collective_lines, exposed_text
from accelbench.phases import Phases
from accelbench.result import Result
from accelbench.spec import RunSpec

MAIN, GLOO_A, GLOO_B, OTHER = 1, 7, 8, 9


def _host(name: str, start: float, end: float, thread: int = MAIN
          ) -> tuple[str, float, float, bool, int]:
    return (name, start, end - start, False, thread)


def _kernel(name: str, start: float, end: float, stream: int = 7
            ) -> tuple[str, float, float, bool, int]:
    return (name, start, end - start, True, stream)


@pytest.mark.parametrize(("a", "b", "union_a", "both"), [
    ([(0, 10)], [(20, 30)], 10, 0),                      # none
    ([(0, 10)], [(5, 15)], 10, 5),                       # partial
    ([(2, 8)], [(0, 10)], 6, 6),                         # full: a inside b
    ([(0, 10), (2, 4), (3, 3.5)], [(1, 3)], 10, 2),      # nested: counted once
    ([(0, 4), (4, 6), (8, 9)], [(3, 8.5)], 7, 3.5),      # touching joined, two pieces cut
    ([(5, 5), (6, 4)], [(0, 10)], 0, 0),                 # empty and reversed dropped
])
def test_union_and_overlap_by_hand(a: list, b: list, union_a: float, both: float) -> None:
    assert covered(a) == pytest.approx(union_a)
    assert overlap(a, b) == pytest.approx(both) == pytest.approx(overlap(b, a))
    assert covered(minus(a, b)) == pytest.approx(union_a - both)


def test_merged_and_minus_give_disjoint_sorted_pieces() -> None:
    assert merged([(5, 7), (0, 2), (1, 3), (3, 4)]) == [(0, 4), (5, 7)]
    assert minus([(0, 10)], [(2, 3), (5, 6), (9, 12)]) == [(0, 2), (3, 5), (6, 9)]
    assert minus([(0, 10)], [(-1, 11)]) == []


def _gloo(collectives: list[tuple[float, float, int]], compute: list[tuple[float, float]],
          steps: int = 1) -> float | None:
    events = [_host("c10d::_allgather_base_", s - 1, s - 0.9) for s, _, _ in collectives]
    events += [_host("gloo:all_gather", s, e, t) for s, e, t in collectives]
    events += [_host("aten::mm", s, e) for s, e in compute]
    return exposed_seconds(events, steps)["exposed_s"]


@pytest.mark.parametrize(("collectives", "compute", "exposed_us"), [
    ([(0, 10, GLOO_A)], [(20, 30)], 10),                       # none overlapped
    ([(0, 10, GLOO_A)], [(5, 15)], 5),                         # partial
    ([(2, 8, GLOO_A)], [(0, 10)], 0),                          # fully hidden
    ([(0, 10, GLOO_A)], [(2, 4), (3, 3.5), (6, 7)], 7),        # nested ops counted once
    ([(0, 10, GLOO_A), (5, 15, GLOO_B)], [(8, 12)], 11),       # two gloo threads: union
])
def test_gloo_exposed_is_the_collectives_union_less_the_main_threads_ops(
        collectives: list, compute: list, exposed_us: float) -> None:
    assert _gloo(collectives, compute) == pytest.approx(exposed_us / 1e6)
    assert _gloo(collectives, compute, steps=2) == pytest.approx(exposed_us / 2e6)


def test_only_the_main_thread_computes_and_its_waits_are_not_compute() -> None:
    """An op on another thread hides nothing; an aten op that waits for a collective
    inside it (a functional collective's ``wait_tensor``) computes only outside the wait."""
    events = [_host("c10d::allreduce_", 0, 0.5), _host("gloo:all_reduce", 1, 9, GLOO_A),
              _host("aten::add", 0, 10), _host("_c10d_functional::wait_tensor", 2, 9),
              _host("aten::mm", 0, 20, OTHER)]
    # compute: [0, 0.5] is the c10d op (not compute), then [0.5, 2] and [9, 10]
    assert exposed_seconds(events, 1)["exposed_s"] == pytest.approx(7e-6)


def test_exposed_never_reads_above_the_collectives_summed_time() -> None:
    """Nothing overlapped: the exposed time is the collectives' own time, exactly, though
    an interval's end less its start rounds above its duration (0.1 + 0.2 - 0.1)."""
    assert (0.1 + 0.2) - 0.1 > 0.2  # the rounding this guards against
    events = [_host("c10d::allgather_", 0, 0.05), _host("aten::mm", 0, 0.05),
              ("gloo:all_gather", 0.1, 0.2, False, GLOO_A)]  # starts at 0.1, lasts 0.2
    assert exposed_seconds(events, 1)["exposed_s"] == 0.2 / 1e6


def test_nccl_exposed_is_the_nccl_kernels_less_the_other_kernels() -> None:
    events = [_kernel("ncclDevKernel_AllGather_RING_LL", 0, 10, stream=20),
              _kernel("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL", 30, 40, stream=20),
              _kernel("ampere_sgemm_128x64_nn", 5, 20, stream=7),
              _kernel("Memcpy HtoD (Pageable -> Device)", 0, 5, stream=7),
              _host("aten::mm", 0, 50)]
    assert exposed_seconds(events, 1)["exposed_s"] == pytest.approx(15e-6)


@pytest.mark.parametrize(("events", "says"), [
    ([_host("aten::mm", 0, 10)], "no collective in the profile"),
    ([_kernel("ncclDevKernel_AllReduce_Sum_f32", 0, 5), _kernel("Memset (Device)", 0, 9)],
     "no compute kernel"),
    ([_host("gloo:all_gather", 0, 10, GLOO_A), _host("aten::mm", 0, 5)],
     "main thread could not be told"),
    ([_host("c10d::allreduce_", 0, 1, GLOO_A), _host("gloo:all_reduce", 0, 10, GLOO_A),
      _host("aten::mm", 0, 5)], "main thread could not be told"),
    ([_host("c10d::allreduce_", 0, 1), _host("gloo:all_reduce", 0, 10, GLOO_A)],
     "no aten op"),
])
def test_a_profile_that_cannot_tell_says_why_never_zero(events: list, says: str) -> None:
    got = exposed_seconds(events, 3)
    assert got["exposed_s"] is None and says in got["exposed_note"]


def test_phase_lines_and_the_report_say_exposed_or_why_not() -> None:
    from accelbench.report.sharding_view import exposed_cell

    new = {"rank": 0, "all_gather_s": 0.004, "reduce_scatter_s": 0.002, "all_reduce_s": 0.0,
           "calls": {"all_gather": 3, "reduce_scatter": 3, "all_reduce": 0},
           "exposed_s": 0.0015}
    old = {k: v for k, v in new.items() if k != "exposed_s"} | {"rank": 1}
    none = new | {"rank": 1, "exposed_s": None, "exposed_note": "no aten op was recorded"}
    phases = Phases(phases=(), method="", attribution_steps=1, step_time_s=None,
                    sum_rel_diff=None, collectives=(new, old))
    back = Phases.from_dict(phases.to_dict())  # an old entry reads back as it was
    assert back.collectives[1] == old
    lines = collective_lines(back)
    assert lines[0].endswith("; total 6.00 ms, exposed 1.50 ms")
    assert "exposed unavailable (not in this record" in lines[1]
    assert exposed_text(none) == "exposed unavailable (no aten op was recorded)"

    def stored(*collectives: dict) -> Result:
        ph = Phases(phases=(), method="", attribution_steps=1, step_time_s=None,
                    sum_rel_diff=None, collectives=collectives)
        return Result(id="x", spec=RunSpec(workload="llm", size="tiny", batch_size=4),
                      status="ok", sample_unit="token", samples_per_step=4,
                      phases=Phases.from_dict(ph.to_dict()) if collectives else None)

    assert exposed_cell(stored()) == "not timed (run with --phases)"
    assert exposed_cell(stored(new, old)).startswith("unavailable (rank 1: not in this record")
    assert exposed_cell(stored(new, new | {"rank": 1, "exposed_s": 0.003})) == "3.00 ms/step"
    assert exposed_cell(stored(new, none)) == "unavailable (rank 1: no aten op was recorded)"
