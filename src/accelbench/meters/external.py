"""Node meters: the whole machine's power, read from outside its devices.

A node meter gives the ``node`` measurement boundary (everything behind the
machine's power supplies), as opposed to ``device`` (a GPU's own sensor) and
``device+host`` (adding the CPU package and DRAM through RAPL). Two are built in
and registered in :mod:`accelbench.meters.registry`:

* ``ipmi``: the BMC's DCMI power reading, ``ipmitool dcmi power reading``
  ("Instantaneous power reading: N Watts").
* ``cmd``: any command the user names (``--node-meter-cmd 'CMD'``) that prints
  the current power in watts on stdout, e.g. a smart PDU's or a wall meter's CLI.

Both report power only, sampled on a background thread at least once a second
(MLPerf Power requires >= 1 Hz); the energy is the integral of the samples
(``source="integrated_samples"``). A read that fails (non-zero exit, output that
is not a number, a timeout) is counted and skipped, never taken as zero.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from abc import abstractmethod
from collections.abc import Hashable
from typing import Any

from accelbench.errors import ConfigError, MeterError
from accelbench.meters import clock
from accelbench.meters.common import (
    Meter,
    NullMeter,
    SensorInfo,
    SensorUnsupportedError,
)
from accelbench.meters.counter import CounterSampleMeter, Sensor
from accelbench.meters.sampler import DEFAULT_MAX_SAMPLES

NODE_DEVICE = "node"
"""Device label and scope of every node meter reading."""
MAX_NODE_INTERVAL_S = 1.0
"""Slowest sampling allowed: MLPerf Power samples node power at 1 Hz or faster."""
DEFAULT_NODE_INTERVAL_S = 1.0
"""Default sampling interval of node meters."""
READ_TIMEOUT_S = 10.0
"""A read (one ``ipmitool`` or user command run) taking longer than this fails."""
IPMI_INSTALL_FIX = (
    "install ipmitool (`sudo apt install ipmitool` or `sudo dnf install ipmitool`) and load "
    "the BMC driver (`sudo modprobe ipmi_devintf ipmi_si`)"
)

_DCMI_POWER_RE = re.compile(r"Instantaneous power reading\s*:\s*([0-9]+(?:\.[0-9]+)?)\s*Watts",
                            re.IGNORECASE)
_DCMI_PERIOD_RE = re.compile(r"Sampling period\s*:\s*([0-9]+)\s*(Seconds|Milliseconds)",
                             re.IGNORECASE)
_DCMI_STATE_RE = re.compile(r"Power reading state is\s*:\s*(\w+)", re.IGNORECASE)


def check_interval(interval_s: float) -> float:
    """``interval_s`` if it is a valid node-meter sampling interval.

    Raises:
        ConfigError: Not in ``(0, 1]`` seconds.
    """
    if not (isinstance(interval_s, (int, float)) and 0 < interval_s <= MAX_NODE_INTERVAL_S):
        raise ConfigError(
            f"node meter interval must be > 0 and <= {MAX_NODE_INTERVAL_S:g} s (MLPerf Power "
            f"samples at >= 1 Hz), got {interval_s!r}"
        )
    return float(interval_s)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def parse_watts(stdout: str) -> float:
    """The power a node meter command printed: a number of watts (``"412.5"``, ``"412 W"``).

    The last non-empty line counts, so a command may print a banner first.

    Raises:
        MeterError: The output is not a finite, non-negative number.
    """
    line = _last_line(stdout)
    text = re.sub(r"\s*(w|watts?)$", "", line, flags=re.IGNORECASE)
    try:
        value = float(text)
    except ValueError:
        shown = line if len(line) <= 60 else line[:57] + "..."
        raise MeterError(f"printed {shown!r}, not a number of watts") from None
    if not math.isfinite(value) or value < 0:
        raise MeterError(f"printed {value!r} W, not a plausible power")
    return value


def parse_dcmi_power(stdout: str) -> tuple[float, dict[str, Any]]:
    """Power and extras from ``ipmitool dcmi power reading`` output.

    Both layouts are understood: ``Instantaneous power reading:   220 Watts``
    (ipmitool <= 1.8.18) and ``Instantaneous power reading   : 214   Watts`` (1.8.19).

    Returns:
        ``(watts, extras)``; extras hold ``bmc_sampling_period_s`` where printed.

    Raises:
        MeterError: No reading in the output, or the BMC says power measurement is off.
    """
    extras: dict[str, Any] = {}
    state = _DCMI_STATE_RE.search(stdout)
    if state is not None and state.group(1).lower() in ("deactivated", "inactive"):
        raise MeterError(
            "the BMC reports power measurement deactivated (`Power reading state is: "
            f"{state.group(1)}`): its readings are not measurements"
        )
    period = _DCMI_PERIOD_RE.search(stdout)
    if period is not None:
        scale = 1.0 if period.group(2).lower() == "seconds" else 1e-3
        extras["bmc_sampling_period_s"] = int(period.group(1)) * scale
    power = _DCMI_POWER_RE.search(stdout)
    if power is None:
        raise MeterError(
            f"no 'Instantaneous power reading' in ipmitool's output ({_last_line(stdout)!r})"
        )
    return float(power.group(1)), extras


def ipmi_error_fix(stderr: str) -> str:
    """The fix for an ``ipmitool`` failure, from its error text."""
    text = stderr.lower()
    if "permission denied" in text:
        return ("run as root, or grant access to the BMC device (e.g. a udev rule "
                "`KERNEL==\"ipmi*\", GROUP=\"ipmi\", MODE=\"0660\"` and add yourself to `ipmi`)")
    if "could not open device" in text or "no such file" in text:
        return ("no local BMC interface: load the drivers (`sudo modprobe ipmi_devintf "
                "ipmi_si`); in a VM or container there is usually no BMC to reach")
    if "invalid command" in text or "not supported" in text or "dcmi" in text:
        return ("this BMC does not answer DCMI power readings; use a PDU or wall meter "
                "through --node-meter-cmd 'CMD' instead")
    return "check that `ipmitool dcmi power reading` works in a shell on this machine"


class NodeMeter(CounterSampleMeter):
    """Base of node meters: whole-machine power sampled at >= 1 Hz and integrated.

    Subclasses implement :meth:`read_node_power_w` (raising :class:`MeterError` on a
    failed read) and :meth:`describe`. The update period is nominally the sampling
    interval, measured from the readings where they repeat between updates.

    Args:
        interval_s: Sampling interval, at most :data:`MAX_NODE_INTERVAL_S`.
        details: Static extras merged into every reading's details.
        max_samples: Bound on stored samples.

    Raises:
        ConfigError: On an interval outside ``(0, 1]`` s.
    """

    kind = "node"
    sensor = "node"
    """``details["sensor"]`` of the readings."""

    def __init__(
        self,
        *,
        interval_s: float = DEFAULT_NODE_INTERVAL_S,
        details: dict[str, Any] | None = None,
        max_samples: int = DEFAULT_MAX_SAMPLES,
    ) -> None:
        interval_s = check_interval(interval_s)
        sensor = Sensor(
            has_counter=False, has_power=True,
            details={"sensor": self.sensor, "boundary": "node", **(details or {})},
            nominal_update_period_s=interval_s,
        )
        super().__init__(NODE_DEVICE, NODE_DEVICE, sensor, interval_s=interval_s,
                         max_samples=max_samples)
        self._slow_reads = 0
        self._max_read_s = 0.0
        self._read_extras: dict[str, Any] = {}

    @abstractmethod
    def read_node_power_w(self) -> float:
        """One power reading of the whole node in watts. Raises :class:`MeterError`."""

    def read_counter_j(self) -> float:
        raise SensorUnsupportedError("node meters report power only")

    def read_power_w(self) -> float:
        t0 = clock.now()
        try:
            return self.read_node_power_w()
        finally:
            read_s = clock.now() - t0
            self._max_read_s = max(self._max_read_s, read_s)
            if read_s > self.interval_s:
                self._slow_reads += 1

    def _window_started(self) -> None:
        self._slow_reads = 0
        self._max_read_s = 0.0
        self._read_extras = {}

    def _window_extras(self, window_s: float) -> tuple[dict[str, Any], list[str]]:
        details: dict[str, Any] = {**self._read_extras, "max_read_s": self._max_read_s}
        notes: list[str] = []
        if self._slow_reads:
            details["slow_reads"] = self._slow_reads
            notes.append(
                f"{self._slow_reads} read(s) took longer than the {self.interval_s:g} s "
                f"sampling interval (longest {self._max_read_s:.2f} s): sampled below "
                f"{1 / self.interval_s:.3g} Hz then"
            )
        return details, notes


def _run(argv: list[str], what: str) -> subprocess.CompletedProcess[str]:
    """Run one read; failures become :class:`MeterError` naming ``what``."""
    try:
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=READ_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise MeterError(f"{what} did not answer within {READ_TIMEOUT_S:g} s") from None
    except OSError as exc:
        raise MeterError(f"{what} could not be run: {exc}") from None


class IpmiMeter(NodeMeter):
    """Node power from the BMC: ``ipmitool dcmi power reading``.

    Args:
        interval_s: Sampling interval, at most 1 s.
        max_samples: Bound on stored samples.
    """

    kind = "ipmi"
    sensor = "ipmi-dcmi"

    @classmethod
    def _probe(cls) -> tuple[bool, str]:
        exe = shutil.which("ipmitool")
        if exe is None:
            return False, f"ipmitool not found on PATH: {IPMI_INSTALL_FIX}"
        try:
            read_dcmi_power(exe)
        except MeterError as exc:
            return False, str(exc)
        return True, ""

    @classmethod
    def _availability_key(cls) -> Hashable:
        return shutil.which("ipmitool")

    def read_node_power_w(self) -> float:
        exe = shutil.which("ipmitool")
        if exe is None:
            raise MeterError(f"ipmitool not found on PATH: {IPMI_INSTALL_FIX}")
        power_w, extras = read_dcmi_power(exe)
        self._read_extras.update(extras)
        return power_w

    def describe(self) -> list[SensorInfo]:
        return [SensorInfo("node power (IPMI DCMI)", "ipmi-dcmi", NODE_DEVICE, True, "")]


def read_dcmi_power(exe: str = "ipmitool") -> tuple[float, dict[str, Any]]:
    """One ``ipmitool dcmi power reading``: watts and extras.

    Raises:
        MeterError: ipmitool failed (with the fix) or printed no reading.
    """
    done = _run([exe, "dcmi", "power", "reading"], "ipmitool dcmi power reading")
    if done.returncode != 0:
        why = _last_line(done.stderr) or _last_line(done.stdout) or f"exit {done.returncode}"
        raise MeterError(f"ipmitool dcmi power reading failed ({why}): {ipmi_error_fix(why)}")
    return parse_dcmi_power(done.stdout)


class CommandMeter(NodeMeter):
    """Node power from a user's command that prints watts (``--node-meter-cmd``).

    The command runs through ``/bin/sh -c`` once per sample, so pipes work
    (``curl -s http://pdu/outlet/3 | jq .watts``).

    Args:
        command: The shell command.
        interval_s: Sampling interval, at most 1 s.
        max_samples: Bound on stored samples.

    Raises:
        ConfigError: On an empty command or a bad interval.
    """

    kind = "cmd"
    sensor = "command"

    def __init__(
        self,
        command: str,
        *,
        interval_s: float = DEFAULT_NODE_INTERVAL_S,
        max_samples: int = DEFAULT_MAX_SAMPLES,
    ) -> None:
        if not command or not command.strip():
            raise ConfigError("--node-meter-cmd needs a command that prints watts, got ''")
        self.command = command
        super().__init__(interval_s=interval_s, details={"command": command},
                         max_samples=max_samples)

    @classmethod
    def _probe(cls) -> tuple[bool, str]:
        return True, ""

    def read_node_power_w(self) -> float:
        done = _run(["/bin/sh", "-c", self.command], f"node meter command {self.command!r}")
        if done.returncode != 0:
            why = _last_line(done.stderr) or "no message"
            raise MeterError(
                f"node meter command {self.command!r} exited with status {done.returncode} "
                f"({why})"
            )
        try:
            return parse_watts(done.stdout)
        except MeterError as exc:
            raise MeterError(f"node meter command {self.command!r} {exc}") from None

    def describe(self) -> list[SensorInfo]:
        return [SensorInfo(f"node power (`{self.command}`)", "cmd", NODE_DEVICE, True, "")]


def _interval(options: Any) -> float:
    return check_interval(getattr(options, "node_meter_interval_s", DEFAULT_NODE_INTERVAL_S))


def ipmi_factory(options: Any) -> Meter:
    """The ``ipmi`` node meter, or a :class:`NullMeter` saying why it cannot read (with
    the fix) so the record shows ``unavailable`` rather than nothing."""
    interval_s = _interval(options)
    if not IpmiMeter.is_available():
        return NullMeter(NODE_DEVICE, NODE_DEVICE,
                         f"IPMI node meter: {IpmiMeter.unavailable_reason()}")
    return IpmiMeter(interval_s=interval_s)


def command_factory(options: Any) -> Meter:
    """The ``cmd`` node meter running ``options.node_meter_cmd``.

    Raises:
        ConfigError: No command given.
    """
    command = getattr(options, "node_meter_cmd", None)
    if not command:
        raise ConfigError("--node-meter cmd needs --node-meter-cmd 'CMD' (a command that "
                          "prints the node's power in watts)")
    return CommandMeter(str(command), interval_s=_interval(options))


__all__ = [
    "CommandMeter",
    "IpmiMeter",
    "NodeMeter",
    "check_interval",
    "command_factory",
    "ipmi_factory",
    "ipmi_error_fix",
    "parse_dcmi_power",
    "parse_watts",
    "read_dcmi_power",
]
