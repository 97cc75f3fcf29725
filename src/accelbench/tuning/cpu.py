"""CPU knobs through sysfs: cpufreq ``scaling_max_freq`` (kHz, every policy) and the RAPL
package long-term limit ``constraint_0_power_limit_uw`` (microwatts, every package zone).

The cpufreq root is ``/sys/devices/system/cpu`` unless ``ACCELBENCH_CPUFREQ_ROOT`` is set,
the powercap root the one :func:`accelbench.devices.powercap.powercap_root` reads (tests point
both at fake trees under a temporary directory).
"""

from __future__ import annotations

import errno
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from accelbench.devices.powercap import powercap_root
from accelbench.errors import ConfigError, UnsupportedError
from accelbench.tuning.knob import PrivilegeError

CPUFREQ_ROOT_ENV = "ACCELBENCH_CPUFREQ_ROOT"
DEFAULT_CPUFREQ_ROOT = "/sys/devices/system/cpu"
_PACKAGE = re.compile(r"^intel-rapl:\d+$")


def cpufreq_root() -> Path:
    """``$ACCELBENCH_CPUFREQ_ROOT`` or ``/sys/devices/system/cpu``."""
    return Path(os.environ.get(CPUFREQ_ROOT_ENV) or DEFAULT_CPUFREQ_ROOT)


def _read_int(path: Path) -> int:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError) as exc:
        raise UnsupportedError(f"cannot read {path}: {exc}") from exc


def _write(path: Path, value: int, hint: str) -> None:
    try:
        path.write_text(f"{value}\n")
    except PermissionError as exc:
        raise PrivilegeError(f"cannot write {path}: permission denied; {hint}") from exc
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise PrivilegeError(f"cannot write {path}: {exc.strerror}; {hint}") from exc
        raise UnsupportedError(f"cannot write {path}: {exc.strerror or exc}") from exc


def _hint(path: Path) -> str:
    try:
        owner = path.stat().st_uid
    except OSError:
        owner = 0
    who = "root" if owner == 0 else f"its owner (uid {owner})"
    return f"run as {who}, or make it writable (`sudo chmod o+w {path}`; resets at reboot)"


class _SysfsKnob:
    """A value written to several sysfs files at once (one per policy or package)."""

    name = ""
    device = ""
    what = ""

    def files(self) -> list[Path]:
        raise NotImplementedError

    def bounds(self, path: Path) -> tuple[int, int]:
        raise NotImplementedError

    def scale(self) -> float:
        """Knob unit per file unit."""
        return 1.0

    def _files(self) -> list[Path]:
        found = self.files()
        if not found:
            raise UnsupportedError(f"no {self.what} on this machine")
        return found

    def read(self) -> Any:
        return {str(p): _read_int(p) for p in self._files()}

    def allowed(self) -> Sequence[float]:
        bounds = [self.bounds(p) for p in self._files()]
        lo = max(b[0] for b in bounds) * self.scale()
        hi = min(b[1] for b in bounds) * self.scale()
        return [lo, hi]

    def check_writable(self) -> None:
        for p in self._files():  # the current value back: no change, the same permission
            _write(p, _read_int(p), _hint(p))

    def apply(self, value: float) -> None:
        raw = int(round(value / self.scale()))
        paths = self._files()
        for p in paths:
            lo, hi = self.bounds(p)
            if not lo <= raw <= hi:
                raise ConfigError(f"{self.name.replace('_', '-')} {value:g} is outside "
                                  f"{p}'s range {lo * self.scale():g}-{hi * self.scale():g}")
        for p in paths:
            _write(p, raw, _hint(p))

    def restore(self, original: Any) -> None:
        for path, raw in dict(original).items():
            _write(Path(path), int(raw), _hint(Path(path)))

    def describe(self, original: Any) -> str:
        values = sorted({int(v) for v in dict(original).values()})
        return f"{json.dumps(values)[1:-1]} ({len(original)} file(s))"


class CpuFreqKnob(_SysfsKnob):
    """``scaling_max_freq`` of every cpufreq policy (``cpu_max_freq_khz``)."""

    name = "cpu_max_freq_khz"
    device = "cpu"
    what = "cpufreq scaling_max_freq"

    def files(self) -> list[Path]:
        root = cpufreq_root()
        policies = sorted((root / "cpufreq").glob("policy*/scaling_max_freq"))
        return policies or sorted(root.glob("cpu[0-9]*/cpufreq/scaling_max_freq"))

    def bounds(self, path: Path) -> tuple[int, int]:
        return (_read_int(path.parent / "cpuinfo_min_freq"),
                _read_int(path.parent / "cpuinfo_max_freq"))

    def describe(self, original: Any) -> str:
        return super().describe(original).replace(" (", " kHz (", 1)


class RaplLimitKnob(_SysfsKnob):
    """``constraint_0_power_limit_uw`` of every RAPL package zone (``cpu_power_limit_w``)."""

    name = "cpu_power_limit_w"
    device = "rapl"
    what = "RAPL package zone with constraint_0_power_limit_uw"

    def files(self) -> list[Path]:
        root = powercap_root()
        if not root.is_dir():
            return []
        return [d / "constraint_0_power_limit_uw" for d in sorted(root.iterdir())
                if _PACKAGE.match(d.name) and (d / "constraint_0_power_limit_uw").is_file()]

    def bounds(self, path: Path) -> tuple[int, int]:
        top = path.parent / "constraint_0_max_power_uw"
        return 1, _read_int(top) if top.is_file() else 10**10

    def scale(self) -> float:
        return 1e-6

    def describe(self, original: Any) -> str:
        values = sorted({int(v) / 1e6 for v in dict(original).values()})
        return f"{', '.join(f'{v:g}' for v in values)} W ({len(original)} zone(s))"
