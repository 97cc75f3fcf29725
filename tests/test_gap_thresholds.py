"""Issue 46: every threshold of the noise verdicts tested just below, at and just above it.

The contention verdict flags a case when other processes used *more than*
``OTHER_CORES_MAX`` (0.5) cores; a host window is judged from ``MIN_HOST_WINDOW_S`` (0.2 s)
on; the hypervisor's steal is mentioned above 0.05 cores. Each boundary is pinned from both
sides with the literal figure, so a moved constant or ``>`` turned into ``>=`` fails here.
CPU counters are given as :class:`HostSample` values (the /proc boundary), the verdict is
the real one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from accelbench.execution import noise
from accelbench.execution.noise import HostSample, NoiseProbe, host_window
from accelbench.verdicts import read_verdict, verdict_label, verdict_lines


def _tight() -> list[float]:
    return list(np.random.default_rng(1).normal(0.010, 0.0002, 200))


def _probe(other_cores: float, *, window_s: float = 1.0, before_s: float = 0.01,
           before_other: float = 0.0, steal: float = 0.0) -> NoiseProbe:
    """A probe whose measured window of ``window_s`` saw ``other_cores`` of other
    processes (the case itself one core) and whose before-window lasted ``before_s``."""
    probe = NoiseProbe()
    probe.configure("cpu", case_cores=1)
    probe._t0 = HostSample(t_s=0.0, busy_s=0.0, steal_s=0.0, own_s=0.0, load_avg_1m=0.25)
    probe._before = HostSample(t_s=before_s, busy_s=(1.0 + before_other) * before_s,
                               steal_s=0.0, own_s=before_s, load_avg_1m=0.25)
    # Counters from zero, so that the differences are exact (0.2 - 0 is 0.2; 200.2 - 200
    # is not).
    probe._w0 = HostSample(t_s=0.0, busy_s=0.0, steal_s=0.0, own_s=0.0, load_avg_1m=0.5)
    probe._w1 = HostSample(t_s=window_s, busy_s=(1.0 + other_cores) * window_s,
                           steal_s=steal * window_s, own_s=window_s, load_avg_1m=1.75)
    return probe


def _verdict(probe: NoiseProbe) -> dict[str, Any]:
    """The record's noise figures, with the verdict read from them."""
    stored = probe.verdict(_tight(), 0.01)
    return {**stored, **read_verdict(stored)}


@pytest.fixture(autouse=True)
def _eight_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(noise, "logical_cpus", lambda: 8)


def test_the_contention_threshold_is_more_than_half_a_core() -> None:
    assert noise.OTHER_CORES_MAX == 0.5
    below = _verdict(_probe(0.49))
    at = _verdict(_probe(0.5))
    above = _verdict(_probe(0.51))
    assert below["host"]["during"]["other_cores"] == pytest.approx(0.49)
    assert below["flagged"] is False and below["kinds"] == []
    assert at["host"]["during"]["other_cores"] == 0.5
    assert at["flagged"] is False and at["reasons"] == []  # "more than": 0.5 is allowed
    assert above["flagged"] is True and above["kinds"] == ["contention"]
    [reason] = above["reasons"]
    assert reason == ("other processes used 0.51 CPU cores during the measurement "
                      "(more than 0.5); load average 1.75 on 8 CPUs")
    assert verdict_lines(above) == [f"busy machine: {reason}"]
    assert verdict_label(above) == "busy machine"
    # 0.6 and 0.8 are well above the threshold too (a threshold moved to 0.85 fails).
    for other in (0.6, 0.8):
        assert _verdict(_probe(other))["kinds"] == ["contention"], other
    assert _verdict(_probe(0.51))["host"]["other_cores_max"] == 0.5


def test_a_window_is_judged_from_a_fifth_of_a_second() -> None:
    assert noise.MIN_HOST_WINDOW_S == 0.2
    # At 0.2 s the measured window is judged; just under it, it is not, and a before
    # window of 0.19 s is too short as well: nothing is judged.
    at = _verdict(_probe(0.9, window_s=0.2))
    assert at["host"]["judged"] == "during" and at["flagged"] is True
    assert "during the measurement" in at["reasons"][0]
    under = _verdict(_probe(0.9, window_s=0.19, before_s=0.19, before_other=0.9))
    assert under["host"]["judged"] is None and under["flagged"] is False
    # A short measured window falls back on a long enough before-window, and says so.
    fallback = _verdict(_probe(0.9, window_s=0.19, before_s=0.2, before_other=0.9))
    assert fallback["host"]["judged"] == "before" and fallback["flagged"] is True
    assert ("before the measurement (the measured window was too short to judge)"
            in fallback["reasons"][0])
    quiet_before = _verdict(_probe(0.9, window_s=0.19, before_s=0.2, before_other=0.49))
    assert quiet_before["host"]["judged"] == "before" and quiet_before["flagged"] is False


def test_steal_is_mentioned_above_a_twentieth_of_a_core() -> None:
    at = _verdict(_probe(0.9, steal=0.05))["reasons"][0]
    assert "stolen" not in at
    above = _verdict(_probe(0.9, steal=0.06))["reasons"][0]
    assert above.endswith("; load average 1.75 on 8 CPUs; 0.06 of them stolen by the "
                          "hypervisor")


def test_host_window_edges() -> None:
    a = HostSample(t_s=5.0, busy_s=10.0, steal_s=0.0, own_s=1.0, load_avg_1m=3.0)
    # No time passed: only the window and the load, nothing divided by zero.
    assert host_window(a, a, case_cores=1) == {"window_s": 0.0, "load_avg_1m": 3.0}
    # The machine's CPU count caps the busy cores (8 here): 9.6 busy read over 1 s.
    b = HostSample(t_s=6.0, busy_s=19.6, steal_s=0.0, own_s=2.0, load_avg_1m=3.0)
    w = host_window(a, b, case_cores=None)
    assert w["busy_cores"] == 8.0 and w["own_cores"] == 1.0 and w["other_cores"] == 7.0
    assert w["own_share"] is None
    # Counters that went backwards (a wrapped or reset counter) count as zero, not negative.
    c = HostSample(t_s=7.0, busy_s=5.0, steal_s=0.0, own_s=0.5, load_avg_1m=None)
    w = host_window(a, c, case_cores=2)
    assert w["busy_cores"] == 0.0 and w["own_cores"] == 0.0 and w["other_cores"] == 0.0
    assert w["own_share"] == 0.0 and w["load_avg_1m"] is None
    # More own than busy time (ticks blur): other processes used nothing, not less.
    d = HostSample(t_s=6.0, busy_s=10.5, steal_s=0.0, own_s=2.0, load_avg_1m=3.0)
    assert host_window(a, d, case_cores=1)["other_cores"] == 0.0


def test_the_load_recorded_is_the_one_minute_average(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(noise.os, "getloadavg", lambda: (1.25, 5.5, 15.75))
    assert noise.host_sample().load_avg_1m == 1.25

    def unavailable() -> tuple[float, float, float]:
        raise OSError("no load average here")

    monkeypatch.setattr(noise.os, "getloadavg", unavailable)
    assert noise.host_sample().load_avg_1m is None


def _unstable(**figures: Any) -> list[str]:
    """The unstable verdict's reasons of a record whose shape figures are ``figures``,
    under the default limits (q3/q1 1.25, trimmed mean 10%, any clustered shift)."""
    from accelbench.verdicts import unstable_reasons

    limits = {"key": "*/*", "q3_q1": 1.25, "trimmed": 0.10, "shift": 0.05, "basis": "test"}
    return unstable_reasons({"limits": limits, **figures})


def _group(q3_q1: float = 1.0, rel: float = 0.0, mode: str | None = None) -> dict[str, Any]:
    return {"mode": mode, "n": 50, "q3_q1": q3_q1, "trimmed_rel_diff": rel}


def test_the_shape_limits_are_more_than_their_figure() -> None:
    """Read from stored figures: q3/q1 above its limit, the trimmed mean's distance above
    its limit either way, and a clustered shift above the row's, are unstable; at the
    limit they are not."""
    assert _unstable(groups=[_group(q3_q1=1.25)]) == []
    assert _unstable(groups=[_group(q3_q1=1.2501)]) == [
        "q3/q1 = 1.25 (more than 1.25, the limit for */*)"]
    assert _unstable(groups=[_group(rel=0.10), _group(rel=-0.10)]) == []
    assert _unstable(groups=[_group(rel=-0.1001, mode="slow")]) == [
        "trimmed mean -10% from the median in the slow mode (more than 10%): outliers or a "
        "second mode"]
    modes = {"low_s": 0.010, "high_s": 0.0115, "high_share": 0.4,
             "arrangement": {"spread": False, "z": -5.0}}
    assert _unstable(modes={**modes, "shift": 0.05}) == []
    [reason] = _unstable(modes={**modes, "shift": 0.0501})
    assert reason.startswith("two modes clustered in time, 10 ms (60%) and 11.5 ms (40%)")
    assert reason.endswith("moving the mean by about 5.0%)")
    # Spread through the run: described when written, never a verdict.
    assert _unstable(modes={**modes, "shift": 0.5,
                            "arrangement": {"spread": True, "z": 0.0}}) == []
    assert _unstable() == [] and _unstable(groups=[_group(q3_q1=None, rel=None)]) == []
