"""``accelbench power`` and the sensor part of ``accelbench devices``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

from accelbench.meters.common import Meter, MeterOutput
from accelbench.meters.registry import DeviceMeterOptions, device_meters
from accelbench.meters.sampler import LiveValue


def sensor_report() -> list[dict[str, Any]]:
    """Every power sensor the device meters find, readable or not, with the reason.

    Returns:
        Dicts with ``name``, ``kind``, ``device``, ``readable`` and ``reason``.
    """
    return [info.to_dict() for plugin in device_meters() for info in plugin.sensors()]


def open_all_meters(*, interval_s: float, cpu_tdp_w: float | None = None) -> list[Meter]:
    """Meters for every readable sensor of every device meter: visible GPUs, readable RAPL
    zones, else the estimate (of the whole machine: ``power`` watches everything, not
    itself; ``cpu_tdp_w`` gives the TDP where the table does not know the CPU)."""
    options = DeviceMeterOptions(interval_s=interval_s, cpu_tdp_w=cpu_tdp_w)
    return [meter for plugin in device_meters() for meter in plugin.open_watched(options)]


def _label(meter: Meter, sensor: str) -> str:
    return f"{sensor} (estimate)" if meter.kind == "estimate" else sensor


def _snapshot(meters: list[Meter]) -> list[tuple[str, str, LiveValue]]:
    return [
        (_label(meter, sensor), meter.kind, value)
        for meter in meters
        for sensor, value in meter.live().items()
    ]


def _table(rows: list[tuple[str, str, LiveValue]], elapsed_s: float) -> Table:
    table = Table(title=f"power, {elapsed_s:.1f} s")
    table.add_column("sensor")
    table.add_column("source")
    table.add_column("power W", justify="right")
    table.add_column("avg W", justify="right")
    table.add_column("energy J", justify="right")
    for name, kind, value in rows:
        power = "-" if value.power_w is None else f"{value.power_w:.1f}"
        avg = f"{value.energy_j / elapsed_s:.1f}" if elapsed_s > 0 else "-"
        table.add_row(name, kind, power, avg, f"{value.energy_j:.2f}")
    return table


def _line(rows: list[tuple[str, str, LiveValue]], elapsed_s: float) -> str:
    parts = [
        f"{name}={'-' if v.power_w is None else format(v.power_w, '.1f')}W" for name, _, v in rows
    ]
    return f"t={elapsed_s:.2f}s " + " ".join(parts)


def watch_power(
    interval_ms: int, duration_s: float | None, console: Console, *,
    cpu_tdp_w: float | None = None, on_start: Callable[[list[Meter]], None] | None = None,
) -> None:
    """Print live power per sensor until ``duration_s`` passes or Ctrl-C; ``on_start``
    gets the started meters (``--prometheus`` serves their live values).

    A rich live table on a terminal, one plain line per interval otherwise.
    Ends with the average power and energy per sensor.

    Args:
        interval_ms: Sampling and display interval in milliseconds (>= 1).
        duration_s: How long to watch; None until Ctrl-C.
        console: Where to print.
        cpu_tdp_w: TDP of the CPU packages for the estimate where no CPU sensor is
            readable (``--cpu-tdp-w``); None looks it up in the table.

    Raises:
        ConfigError: On a bad interval or duration.
    """
    from accelbench.power_watch import PowerWatch
    from accelbench.spec import MeterOptions

    PowerWatch(interval_ms=interval_ms, duration=duration_s)  # the options' own checks
    MeterOptions(cpu_tdp_w=cpu_tdp_w)
    interval_s = interval_ms / 1000.0
    meters = open_all_meters(interval_s=interval_s, cpu_tdp_w=cpu_tdp_w)
    if not meters:
        console.print("no readable power sensor found:", markup=False)
        for info in sensor_report():
            console.print(f"  {info['name']}: {info['reason']}", markup=False, highlight=False)
        return
    started: list[Meter] = []
    outputs: list[MeterOutput] = []
    t0_s = time.monotonic()
    try:
        for meter in meters:
            meter.start()
            started.append(meter)
        t0_s = time.monotonic()
        if on_start is not None:
            on_start(started)
        _show(started, console, interval_s, duration_s, t0_s)
    finally:
        for meter in started:
            outputs.extend(meter.stop())
        for meter in meters:
            meter.close()
    _print_totals(outputs, console)


def _show(started: list[Meter], console: Console, interval_s: float,
          duration_s: float | None, t0_s: float) -> None:
    """The live values every interval from ``t0_s`` until ``duration_s`` or Ctrl-C."""
    display_s = max(interval_s, 0.05) if console.is_terminal else interval_s
    next_s = t0_s
    live = Live(console=console, auto_refresh=False) if console.is_terminal else None
    try:
        if live is not None:
            live.start()
        while True:
            next_s += display_s
            now_s = time.monotonic()
            if duration_s is not None and next_s - t0_s > duration_s:
                time.sleep(max(0.0, t0_s + duration_s - now_s))
                break
            time.sleep(max(0.0, next_s - now_s))
            elapsed_s = time.monotonic() - t0_s
            rows = _snapshot(started)
            if live is not None:
                live.update(_table(rows, elapsed_s), refresh=True)
            else:
                console.print(_line(rows, elapsed_s), markup=False, highlight=False)
    except KeyboardInterrupt:
        pass
    finally:
        if live is not None:
            live.stop()


def _print_totals(outputs: list[MeterOutput], console: Console) -> None:
    """Each sensor's average power and energy over the watch, or why it has none."""
    for output in outputs:
        r = output.reading
        if r.energy_j is None:
            console.print(f"{r.device}: unavailable ({r.note})", markup=False, highlight=False)
        else:
            console.print(
                f"{r.device}: {r.avg_power_w or 0.0:.1f} W average, {r.energy_j:.2f} J "
                f"over {r.window_s or 0.0:.1f} s ({r.source})",
                markup=False,
                highlight=False,
            )
