"""Background power sampling with an exact online integral and bounded memory.

:class:`PowerSeries` holds one sensor's samples. It integrates them online as
they arrive, so the energy it reports never depends on how many samples it
keeps: when the stored timeline reaches its limit, adjacent bins are merged in
pairs. Bins are contiguous and each carries the exact energy of its span, so
merging loses time resolution only, never energy.

A series is fed in one of two modes:

* ``"power"``: each value is an instantaneous power in watts; the energy of the
  segment between two samples is the trapezoid ``(p0 + p1) / 2 * dt``.
* ``"energy"``: each value is the energy in joules since the previous value
  (a counter difference); the first value only marks the start.

:class:`PowerSampler` calls a read function on a daemon thread at a fixed
interval and feeds one series per channel.
"""

from __future__ import annotations

import math
import threading
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from accelbench.meters import clock as meter_clock
from accelbench.meters.clock import now as clock_now

SampleMode = Literal["power", "energy"]

DEFAULT_INTERVAL_S = 0.01
"""Default sampling interval: 10 ms."""
DEFAULT_MAX_SAMPLES = 100_000
"""Default bound on stored bins per series (about 1.6 MB)."""


@dataclass(frozen=True, slots=True)
class LiveValue:
    """The latest state of one channel, for live displays."""

    power_w: float | None
    """Power of the latest sample (power mode) or segment (energy mode)."""
    energy_j: float
    """Energy integrated since the series began."""
    t_s: float | None = None
    """Monotonic time of the latest sample (the energy is up to that time)."""


class PowerSeries:
    """One sensor's samples: exact running integral, bounded timeline.

    Args:
        max_bins: Most timeline bins kept. When reached, adjacent pairs merge.

    Raises:
        ValueError: If ``max_bins`` is below 2.
    """

    def __init__(self, *, max_bins: int = DEFAULT_MAX_SAMPLES) -> None:
        if max_bins < 2:
            raise ValueError(f"max_bins must be >= 2, got {max_bins}")
        self._max_bins = max_bins
        # Bin i spans [_edges[i], _edges[i + 1]] and holds _bin_energy[i] joules.
        self._edges = array("d")
        self._bin_energy = array("d")
        self._stride = 1  # raw segments per stored bin
        self._pending_energy_j = 0.0
        self._pending_count = 0
        # Neumaier-compensated running sum: exact to rounding for any length.
        self._sum_j = 0.0
        self._comp_j = 0.0
        self._last_power_w: float | None = None
        self._prev_sample_w: float | None = None
        self.n_samples = 0
        """Samples received (every sample, including merged ones)."""
        self.t_first_s: float | None = None
        self.t_last_s: float | None = None
        self.peak_power_w: float | None = None
        """Highest sample (power mode) or segment average (energy mode)."""
        self.min_power_w: float | None = None
        self._dt_n = 0
        self._dt_mean_s = 0.0
        self._dt_m2 = 0.0
        self.max_interval_s: float | None = None
        self.min_interval_s: float | None = None

    # -- feeding ---------------------------------------------------------------------------

    def add_power(self, t_s: float, power_w: float) -> None:
        """Add an instantaneous power sample (trapezoidal integration).

        Args:
            t_s: Sample time (monotonic seconds).
            power_w: Power in watts.

        Raises:
            ValueError: If time goes backwards.
        """
        if self._begin(t_s):
            self._prev_sample_w = power_w
            self._last_power_w = power_w
            self._track_power(power_w)
            return
        assert self.t_last_s is not None and self._prev_sample_w is not None
        dt_s = t_s - self.t_last_s
        self._close_segment(t_s, 0.5 * (self._prev_sample_w + power_w) * dt_s, dt_s)
        self._prev_sample_w = power_w
        self._last_power_w = power_w
        self._track_power(power_w)

    def add_energy(self, t_s: float, energy_j: float) -> None:
        """Add a counter increment: ``energy_j`` joules since the previous call.

        The first call only marks the start; its value is ignored.

        Args:
            t_s: Time of the counter read (monotonic seconds).
            energy_j: Energy since the previous read, in joules.

        Raises:
            ValueError: If time goes backwards.
        """
        if self._begin(t_s):
            return
        assert self.t_last_s is not None
        dt_s = t_s - self.t_last_s
        self._close_segment(t_s, energy_j, dt_s)
        if dt_s > 0:
            power_w = energy_j / dt_s
            self._last_power_w = power_w
            self._track_power(power_w)

    def _begin(self, t_s: float) -> bool:
        """Register the first sample; return True if this was it."""
        if self.t_last_s is None:
            self.t_first_s = self.t_last_s = t_s
            self.n_samples = 1
            self._edges.append(t_s)
            return True
        if t_s < self.t_last_s:
            raise ValueError(f"sample time went backwards: {t_s} < {self.t_last_s}")
        return False

    def _track_power(self, power_w: float) -> None:
        if self.peak_power_w is None or power_w > self.peak_power_w:
            self.peak_power_w = power_w
        if self.min_power_w is None or power_w < self.min_power_w:
            self.min_power_w = power_w

    def _close_segment(self, t_s: float, energy_j: float, dt_s: float) -> None:
        # Neumaier summation of the running integral.
        total = self._sum_j + energy_j
        if abs(self._sum_j) >= abs(energy_j):
            self._comp_j += (self._sum_j - total) + energy_j
        else:
            self._comp_j += (energy_j - total) + self._sum_j
        self._sum_j = total
        # Welford statistics of the achieved interval.
        self._dt_n += 1
        delta = dt_s - self._dt_mean_s
        self._dt_mean_s += delta / self._dt_n
        self._dt_m2 += delta * (dt_s - self._dt_mean_s)
        if self.max_interval_s is None or dt_s > self.max_interval_s:
            self.max_interval_s = dt_s
        if self.min_interval_s is None or dt_s < self.min_interval_s:
            self.min_interval_s = dt_s
        self.n_samples += 1
        self.t_last_s = t_s
        # Timeline: segments collect into a pending bin of `stride` segments.
        self._pending_energy_j += energy_j
        self._pending_count += 1
        if self._pending_count >= self._stride:
            self._edges.append(t_s)
            self._bin_energy.append(self._pending_energy_j)
            self._pending_energy_j = 0.0
            self._pending_count = 0
            if len(self._bin_energy) >= self._max_bins:
                self._decimate()

    def _decimate(self) -> None:
        """Merge adjacent bin pairs; energy of every span is kept exactly."""
        n_bins = len(self._bin_energy)
        pairs = n_bins // 2
        merged = array(
            "d", (self._bin_energy[2 * i] + self._bin_energy[2 * i + 1] for i in range(pairs))
        )
        edges = array("d", self._edges[0 : 2 * pairs + 1 : 2])
        if n_bins % 2:
            # The odd bin out becomes the (partly filled) pending bin of the new stride.
            self._pending_energy_j += self._bin_energy[n_bins - 1]
            self._pending_count += self._stride
        self._bin_energy = merged
        self._edges = edges
        self._stride *= 2

    # -- results ---------------------------------------------------------------------------

    @property
    def energy_j(self) -> float:
        """Exact running integral over ``[t_first_s, t_last_s]`` in joules."""
        return self._sum_j + self._comp_j

    @property
    def last_power_w(self) -> float | None:
        """Latest sample (power mode) or latest segment average (energy mode)."""
        return self._last_power_w

    @property
    def covered_s(self) -> float:
        """Time spanned by the samples."""
        if self.t_first_s is None or self.t_last_s is None:
            return 0.0
        return self.t_last_s - self.t_first_s

    @property
    def mean_interval_s(self) -> float | None:
        """Mean achieved sampling interval, or None with fewer than two samples."""
        return self._dt_mean_s if self._dt_n else None

    @property
    def std_interval_s(self) -> float | None:
        """Standard deviation of the achieved interval."""
        if self._dt_n < 2:
            return None
        return math.sqrt(self._dt_m2 / (self._dt_n - 1))

    @property
    def stored_bins(self) -> int:
        """Bins held in memory (including a partly filled one)."""
        return len(self._bin_energy) + (1 if self._pending_count else 0)

    def bins(self) -> list[tuple[float, float, float]]:
        """All stored bins as ``(t_start_s, t_end_s, energy_j)``, contiguous, in order."""
        out = [
            (self._edges[i], self._edges[i + 1], self._bin_energy[i])
            for i in range(len(self._bin_energy))
        ]
        if self._pending_count and self.t_last_s is not None:
            out.append((self._edges[-1], self.t_last_s, self._pending_energy_j))
        return out

    def interval_stats(self) -> dict[str, float | int | None]:
        """Achieved-interval statistics, for :attr:`EnergyReading.details`."""
        return {
            "n_samples": self.n_samples,
            "mean_interval_s": self.mean_interval_s,
            "std_interval_s": self.std_interval_s,
            "min_interval_s": self.min_interval_s,
            "max_interval_s": self.max_interval_s,
            "stored_bins": self.stored_bins,
        }

    def timeline(self, *, max_points: int = 500, t0_s: float = 0.0) -> dict[str, list[float]]:
        """Average power per time slice, at most ``max_points`` slices.

        Args:
            max_points: Most points returned; bins are merged in groups to fit.
            t0_s: Time subtracted from the slice midpoints (the window start).

        Returns:
            ``{"t_s": [...], "power_w": [...]}``: slice midpoints relative to
            ``t0_s`` and the slice's average power.
        """
        bins = self.bins()
        if not bins:
            if self.t_first_s is not None and self._last_power_w is not None:
                return {"t_s": [round(self.t_first_s - t0_s, 6)], "power_w": [self._last_power_w]}
            return {"t_s": [], "power_w": []}
        group = max(1, math.ceil(len(bins) / max(1, max_points)))
        t_out: list[float] = []
        p_out: list[float] = []
        for i in range(0, len(bins), group):
            chunk = bins[i : i + group]
            start, end = chunk[0][0], chunk[-1][1]
            duration = end - start
            if duration <= 0:
                continue
            t_out.append(round(0.5 * (start + end) - t0_s, 6))
            p_out.append(round(sum(b[2] for b in chunk) / duration, 6))
        return {"t_s": t_out, "power_w": p_out}


class PowerSampler:
    """Calls ``read_fn`` on a daemon thread every ``interval_s`` and integrates the values.

    One sample is taken synchronously in :meth:`start` and one in :meth:`stop`,
    so the integral spans the whole window. The thread ends cleanly, keeping
    what it has, if ``read_fn`` raises; the exception is kept in :attr:`error`.
    A sampler is single-use.

    Args:
        read_fn: Returns one value per channel; ``nan`` skips that channel this time.
        channels: Channel (sensor) names.
        interval_s: Target sampling interval in seconds.
        mode: ``"power"`` (values in W) or ``"energy"`` (J since the previous read).
        max_samples: Bound on stored bins per channel.
        name: Thread name.
        clock: Monotonic clock in seconds (injectable for tests).

    Raises:
        ValueError: On a non-positive interval or an empty or duplicate channel list.
    """

    def __init__(
        self,
        read_fn: Callable[[], Sequence[float]],
        channels: Sequence[str],
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        mode: SampleMode = "power",
        max_samples: int = DEFAULT_MAX_SAMPLES,
        name: str = "accelbench-power-sampler",
        clock: Callable[[], float] = clock_now,
    ) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        if not channels or len(set(channels)) != len(channels):
            raise ValueError(f"channels must be non-empty and unique, got {list(channels)}")
        self._read_fn = read_fn
        self.channels = tuple(channels)
        self.interval_s = interval_s
        self.mode: SampleMode = mode
        self.series = {ch: PowerSeries(max_bins=max_samples) for ch in self.channels}
        self._name = name
        self._clock = clock
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        self._cancel: Callable[[], None] | None = None
        self._started = False
        self._error: BaseException | None = None

    @classmethod
    def single(
        cls,
        read_fn: Callable[[], float],
        channel: str = "power",
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        mode: SampleMode = "power",
        max_samples: int = DEFAULT_MAX_SAMPLES,
        name: str = "accelbench-power-sampler",
        clock: Callable[[], float] = clock_now,
    ) -> PowerSampler:
        """A one-channel sampler whose ``read_fn`` returns a bare float."""
        return cls(
            lambda: (read_fn(),),
            (channel,),
            interval_s=interval_s,
            mode=mode,
            max_samples=max_samples,
            name=name,
            clock=clock,
        )

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Take the first sample synchronously, then start the thread.

        Raises:
            RuntimeError: If the sampler was already started.
            Exception: Whatever ``read_fn`` raises on the first sample.
        """
        if self._started:
            raise RuntimeError("a PowerSampler can be started once; make a new one")
        self._started = True
        self._sample()
        sim = meter_clock.simulated()
        if sim is not None:
            # Simulated time: the ticks fire on the simulator's thread, in time order.
            self._cancel = sim.every(self.interval_s, self._sim_tick)
            return
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def _sim_tick(self) -> None:
        if self._error is not None:
            return
        try:
            self._sample()
        except BaseException as exc:  # as the thread would: keep what it has
            self._error = exc

    def stop(self, *, final_sample: bool = True) -> None:
        """Stop and join the thread, then take the last sample synchronously.

        Safe to call twice. Errors of the last sample are kept in :attr:`error`.
        """
        if self._cancel is not None:
            self._cancel()
            self._cancel = None
            if final_sample and self._error is None:
                try:
                    self._sample()
                except Exception as exc:  # the window's data stays usable
                    self._error = exc
            return
        thread = self._thread
        if thread is None:
            return
        self._stop_event.set()
        thread.join()
        self._thread = None
        if final_sample and self._error is None:
            try:
                self._sample()
            except Exception as exc:  # the window's data stays usable
                self._error = exc

    def __enter__(self) -> PowerSampler:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        """Whether the sampling thread is alive (on simulated time: whether it ticks)."""
        if self._cancel is not None:
            return True
        return self._thread is not None and self._thread.is_alive()

    @property
    def error(self) -> BaseException | None:
        """The exception that ended sampling early, if any."""
        return self._error

    # -- reading ---------------------------------------------------------------------------

    def live(self) -> dict[str, LiveValue]:
        """Latest power and energy so far per channel (thread-safe)."""
        with self._lock:
            return {
                ch: LiveValue(power_w=s.last_power_w, energy_j=s.energy_j, t_s=s.t_last_s)
                for ch, s in self.series.items()
            }

    # -- internals -------------------------------------------------------------------------

    def _sample(self) -> None:
        t0 = self._clock()
        values = self._read_fn()
        t1 = self._clock()
        t_s = 0.5 * (t0 + t1)  # the read happened somewhere in [t0, t1]
        if len(values) != len(self.channels):
            raise ValueError(
                f"read function returned {len(values)} values for {len(self.channels)} channels"
            )
        with self._lock:
            for ch, value in zip(self.channels, values, strict=True):
                if value is None or math.isnan(value):
                    continue
                series = self.series[ch]
                if self.mode == "power":
                    series.add_power(t_s, value)
                else:
                    series.add_energy(t_s, value)

    def _run(self) -> None:
        next_s = self._clock()
        try:
            while True:
                next_s += self.interval_s
                delay_s = next_s - self._clock()
                if delay_s < 0:
                    # Fell behind (a slow read, a busy machine): resume the grid from
                    # now instead of firing a burst of catch-up samples.
                    next_s = self._clock()
                    delay_s = 0.0
                if self._stop_event.wait(delay_s):
                    return
                self._sample()
        except BaseException as exc:  # end the thread cleanly; the owner reads .error
            self._error = exc
