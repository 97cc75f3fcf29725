"""Node meters and the meter registry, faked at the process boundary: a fake ``ipmitool``
on PATH and fake watt-printing commands, run for real by the meters' sampler threads."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from accelbench.errors import ConfigError
from accelbench.meters import clear_availability_cache, registry
from accelbench.meters.common import Meter, NullMeter
from accelbench.meters.external import (
    CommandMeter,
    IpmiMeter,
    parse_dcmi_power,
    parse_watts,
)
from accelbench.result import EnergyReading
from accelbench.spec import MeterOptions
from accelbench.workloads.registry import load_plugin

PLUGIN = Path(__file__).parent / "plugins" / "node_meter_plugin.py"

DCMI_1_8_18 = """
    Instantaneous power reading:                   {w} Watts
    Minimum during sampling period:                 60 Watts
    Maximum during sampling period:                460 Watts
    Average power reading over sample period:      216 Watts
    IPMI timestamp:                           Thu Jan  1 00:00:00 1970
    Sampling period:                          00000001 Seconds.
    Power reading state is:                   activated
"""
DCMI_1_8_19 = """Instantaneous power reading              : 214      Watts
Minimum during sampling period           : 2        Watts
Maximum during sampling period           : 468      Watts
Average power reading over sample period : 184      Watts
IPMI timestamp                           : 2024-05-05 13:06:44 UTC
Sampling period                          : 1000 Milliseconds
Power reading state is                   : activated
"""


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fresh availability answers; registrations made by a test are forgotten after it."""
    clear_availability_cache()
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    yield
    clear_availability_cache()


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture()
def fake_ipmitool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``ipmitool`` on PATH answering ``dcmi power reading`` with the watts in ./watts."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    watts = tmp_path / "watts"
    watts.write_text("250")
    report = DCMI_1_8_18.replace("{w}", f"$(cat {watts})")
    _script(
        bindir / "ipmitool",
        f'[ "$1 $2 $3" = "dcmi power reading" ] || exit 2\ncat <<EOF\n{report}EOF\n',
    )
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    return watts


def _measure(meter: Meter, window_s: float) -> EnergyReading:
    try:
        meter.start()
        time.sleep(window_s)
        (output,) = meter.stop()
    finally:
        meter.close()
    return output.reading


def test_dcmi_output_of_both_ipmitool_layouts_parses() -> None:
    assert parse_dcmi_power(DCMI_1_8_18.replace("{w}", "220")) == (
        220.0, {"bmc_sampling_period_s": 1.0})
    assert parse_dcmi_power(DCMI_1_8_19) == (214.0, {"bmc_sampling_period_s": 1.0})
    with pytest.raises(Exception, match="deactivated"):
        parse_dcmi_power(DCMI_1_8_19.replace(": activated", ": deactivated"))
    with pytest.raises(Exception, match="no 'Instantaneous power reading'"):
        parse_dcmi_power("Invalid command\n")


def test_watts_parsing_refuses_anything_but_a_number() -> None:
    assert parse_watts("412.5\n") == 412.5
    assert parse_watts("pdu v2\n412 W\n") == 412.0
    for bad in ("", "abc", "nan", "-5", "inf"):
        with pytest.raises(Exception, match="not"):
            parse_watts(bad)


def test_ipmi_meter_integrates_the_bmc_readings(fake_ipmitool: Path) -> None:
    assert IpmiMeter.is_available()
    meter = registry.get_meter_factory("ipmi")(
        MeterOptions(node_meter="ipmi", node_meter_interval_s=0.05))
    assert isinstance(meter, IpmiMeter)
    reading = _measure(meter, 0.6)
    assert reading.device == "node" and reading.scope == "node"
    assert reading.source == "integrated_samples"
    assert reading.avg_power_w == pytest.approx(250.0)
    assert reading.energy_j is not None and reading.window_s is not None
    assert reading.energy_j == pytest.approx(250.0 * reading.window_s)
    assert reading.n_samples is not None and reading.n_samples >= 5
    details = reading.details
    assert details["boundary"] == "node" and details["sensor"] == "ipmi-dcmi"
    assert details["bmc_sampling_period_s"] == 1.0
    assert "update_period" in details and details["sensor_updates"] >= 1
    assert meter.update_period_s() is not None
    assert registry.get_meter_plugin("ipmi").boundary == "node"


def test_missing_ipmitool_is_one_line_with_the_install_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no ipmitool here
    meter = registry.open_node_meter(MeterOptions(node_meter="ipmi"))
    assert isinstance(meter, NullMeter)
    reading = _measure(meter, 0.0)
    assert reading.source == "unavailable" and reading.energy_j is None
    assert "ipmitool not found on PATH" in reading.note
    assert "apt install ipmitool" in reading.note and "\n" not in reading.note


@pytest.mark.parametrize(
    ("stderr", "fix"),
    [
        ("Could not open device at /dev/ipmi0 or /dev/ipmi/0 or /dev/ipmidev/0: "
         "No such file or directory", "modprobe ipmi_devintf ipmi_si"),
        ("Could not open device at /dev/ipmi0: Permission denied", "run as root"),
        ("DCMI request failed because: Invalid command (c1)", "--node-meter-cmd"),
    ],
)
def test_a_refusing_bmc_gives_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stderr: str, fix: str
) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    _script(bindir / "ipmitool", f"echo '{stderr}' >&2\nexit 1\n")
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    assert not IpmiMeter.is_available()
    reason = IpmiMeter.unavailable_reason()
    assert "ipmitool dcmi power reading failed" in reason and fix in reason
    meter = registry.open_node_meter(MeterOptions(node_meter="ipmi"))
    assert isinstance(meter, NullMeter) and fix in meter.note


def test_command_meter_integrates_what_the_command_prints(tmp_path: Path) -> None:
    watts = tmp_path / "watts"
    watts.write_text("120\n")
    meter = registry.open_node_meter(
        MeterOptions(node_meter_cmd=f"cat {watts}", node_meter_interval_s=0.05))
    assert isinstance(meter, CommandMeter)  # --node-meter-cmd alone means the cmd meter
    meter.start()
    time.sleep(0.4)
    new = tmp_path / "watts.new"  # replaced whole: a `cat` mid-write would print nothing
    new.write_text("300\n")
    new.replace(watts)
    time.sleep(0.4)
    (output,) = meter.stop()
    meter.close()
    reading = output.reading
    assert reading.source == "integrated_samples"
    assert reading.details["command"] == f"cat {watts}"
    # Half the window at 120 W, half at 300 W: about 210 W on average.
    assert reading.avg_power_w == pytest.approx(210.0, rel=0.15)
    assert reading.peak_power_w == 300.0
    # No read failed; on a busy machine a `cat` can take longer than the 0.05 s interval,
    # which the reading says (and nothing else).
    assert "failed" not in reading.note, reading.note
    assert reading.note == "" or "took longer than the 0.05 s sampling interval" in reading.note


def test_bad_output_and_failed_runs_are_counted_never_zero(tmp_path: Path) -> None:
    """Every other run prints garbage; every third exits 1. Only good reads count: the
    average stays 200 W, not dragged towards zero."""
    counter = tmp_path / "n"
    counter.write_text("0")
    cmd = _script(
        tmp_path / "meter.sh",
        f"n=$(cat {counter}); echo $((n+1)) > {counter}\n"
        "if [ $((n % 3)) -eq 2 ]; then echo 'bmc busy' >&2; exit 1; fi\n"
        "if [ $((n % 2)) -eq 1 ]; then echo 'ERR'; else echo 200; fi\n",
    )
    reading = _measure(CommandMeter(str(cmd), interval_s=0.03), 0.6)
    assert reading.source == "integrated_samples"
    assert reading.avg_power_w == pytest.approx(200.0)
    assert reading.details["failed_power_reads"] >= 4
    assert "power read(s) failed" in reading.note
    assert "printed 'ERR', not a number of watts" in reading.note or "exited" in reading.note


def test_a_command_that_always_fails_gives_no_figure(tmp_path: Path) -> None:
    reading = _measure(CommandMeter("echo 'no route to pdu' >&2; exit 3", interval_s=0.05),
                       0.3)
    assert reading.source == "unavailable"
    assert reading.energy_j is None and reading.avg_power_w is None
    assert "exited with status 3 (no route to pdu)" in reading.note


def test_a_read_slower_than_the_interval_is_noted() -> None:
    reading = _measure(CommandMeter("sleep 0.12; echo 90", interval_s=0.05), 0.5)
    assert reading.details["slow_reads"] >= 1
    assert reading.details["max_read_s"] >= 0.12
    assert "took longer than the 0.05 s sampling interval" in reading.note
    assert reading.avg_power_w == pytest.approx(90.0)


def test_node_meters_sample_at_one_hertz_or_faster() -> None:
    with pytest.raises(ConfigError, match=r">= 1 Hz"):
        CommandMeter("echo 1", interval_s=2.0)
    with pytest.raises(ConfigError, match="needs a command"):
        CommandMeter("  ")
    assert CommandMeter("echo 1").update_period_s() == 1.0  # nominal: the interval


# -- the registry ------------------------------------------------------------------------------


def test_builtins_are_registered_with_their_boundary() -> None:
    names = {p.name: p.boundary for p in registry.list_meters()}
    assert names["ipmi"] == "node" and names["cmd"] == "node"
    assert registry.node_meter_name(MeterOptions()) is None
    assert registry.open_node_meter(MeterOptions()) is None


def test_duplicates_are_refused_unless_replace() -> None:
    def first(options: MeterOptions) -> Meter:
        return CommandMeter("echo 1")

    def second(options: MeterOptions) -> Meter:
        return CommandMeter("echo 2")

    registry.register_meter("wall_meter", first)
    registry.register_meter("wall_meter", first)  # the same factory again: harmless
    with pytest.raises(ConfigError, match="already registered"):
        registry.register_meter("wall_meter", second)
    with pytest.raises(ConfigError, match="already registered"):
        registry.register_meter("ipmi", second)
    registry.register_meter("wall_meter", second, replace=True)
    assert registry.get_meter_factory("wall_meter") is second


def test_bad_registrations_and_unknown_names() -> None:
    with pytest.raises(ConfigError, match="boundary must be one of"):
        registry.register_meter("x_meter", lambda o: CommandMeter("echo 1"), boundary="rack")
    with pytest.raises(ConfigError, match="lower case"):
        registry.register_meter("Bad Name", lambda o: CommandMeter("echo 1"))
    with pytest.raises(ConfigError, match=r"unknown meter 'ipmy'; did you mean ipmi\?"):
        registry.get_meter_factory("ipmy")


def test_a_plugin_file_registers_a_meter_found_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outlet = tmp_path / "outlet"
    outlet.write_text("75.5")
    monkeypatch.setenv("ACCELBENCH_TEST_PDU_FILE", str(outlet))
    with pytest.raises(ConfigError, match="unknown meter 'test_pdu'"):
        registry.get_meter_plugin("test_pdu")
    monkeypatch.delitem(  # import the plugin afresh, whatever an earlier test loaded
        __import__("sys").modules,
        f"__accelbench_plugin_{abs(hash(str(PLUGIN.resolve())))}",
        raising=False,
    )
    load_plugin(str(PLUGIN))
    plugin = registry.get_meter_plugin("test_pdu")
    assert plugin.boundary == "node"
    meter = registry.open_node_meter(
        MeterOptions(node_meter="test_pdu", node_meter_interval_s=0.05))
    assert meter is not None and meter.kind == "test_pdu"
    reading = _measure(meter, 0.3)
    assert reading.source == "integrated_samples" and reading.device == "node"
    assert reading.avg_power_w == pytest.approx(75.5)
    assert reading.details["sensor"] == "test-pdu"
