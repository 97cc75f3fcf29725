"""Linux powercap ``intel-rapl`` zones: where they are, what each one is, whether this
process may read its counter (``energy_uj``, microjoules, wrapping at
``max_energy_range_uj``). ``intel-rapl-mmio`` zones duplicate the package zones and are
skipped. The RAPL meter (:mod:`accelbench.meters.rapl`) and the RAPL limit knob
(:mod:`accelbench.tuning.cpu`) read the zones found here.

The root is ``/sys/class/powercap`` unless ``ACCELBENCH_POWERCAP_ROOT`` is set (read at
call time). Since the 2020 PLATYPUS side channel (CVE-2020-8694) most kernels make
``energy_uj`` readable by root only; such a zone is reported unreadable with the command
that grants access.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

ROOT_ENV = "ACCELBENCH_POWERCAP_ROOT"
DEFAULT_ROOT = "/sys/class/powercap"
MAX_PLAUSIBLE_DOMAIN_W = 10_000.0
"""A counter decrease implying more than this is a reset, not a wrap (no CPU package
or DRAM domain draws 10 kW). Also the power bound of a zone without
``constraint_*_max_power_uw`` when deriving its poll interval: 20 times the largest
server package TDP (about 500 W), and costless on real counters, whose wrap periods
at 10 kW are still 26 s (package, 262 kJ range) and 6.5 s (DRAM, 65 kJ), far above
the default 100 ms poll."""
ZONE_RE = re.compile(r"^intel-rapl:(\d+)(?::(\d+))?$")
SCOPES = {"dram": "dram", "core": "cpu-core", "uncore": "cpu-uncore", "psys": "platform"}


def powercap_root() -> Path:
    """The powercap sysfs root: ``$ACCELBENCH_POWERCAP_ROOT`` or ``/sys/class/powercap``."""
    return Path(os.environ.get(ROOT_ENV) or DEFAULT_ROOT)


def open_text(path: Path) -> str:
    """Read a sysfs file. The one place the powercap code opens files (tests make
    a file unreadable here)."""
    with open(path, encoding="ascii") as f:
        return f.read()


def read_int(path: Path) -> int:
    return int(open_text(path).strip())


def access_note(root: Path | None = None) -> str:
    """How to make the RAPL counters readable."""
    root = root if root is not None else powercap_root()
    return (
        "RAPL energy counters are readable only by root: run as root, or grant read access "
        f"with `sudo chmod a+r {root}/intel-rapl:*/energy_uj` (resets at reboot)"
    )


@dataclass(frozen=True, slots=True)
class RaplDomain:
    """One powercap RAPL zone."""

    zone: str
    """Directory name, e.g. ``intel-rapl:0:1``."""
    name: str
    """Contents of ``name``: ``package-0``, ``dram``, ``core`` ..."""
    path: Path
    package_index: int
    max_energy_range_uj: int | None
    """Wrap point of ``energy_uj``; None if the file is missing or unreadable."""
    readable: bool
    reason: str = ""
    """Why it is unreadable, with the fix."""
    max_power_uw: int | None = None
    """Largest ``constraint_*_max_power_uw`` of the zone; None if it has none."""
    max_power_file: str = ""
    """The constraint file :attr:`max_power_uw` comes from."""

    @property
    def max_power_w(self) -> float:
        """Most power the domain is assumed to draw: its constraint's maximum, else
        :data:`MAX_PLAUSIBLE_DOMAIN_W`."""
        if self.max_power_uw:
            return self.max_power_uw * 1e-6
        return MAX_PLAUSIBLE_DOMAIN_W

    @property
    def wrap_period_s(self) -> float | None:
        """Shortest time in which the counter can wrap (range / :attr:`max_power_w`);
        None when the wrap point is unknown."""
        if not self.max_energy_range_uj:
            return None
        return self.max_energy_range_uj * 1e-6 / self.max_power_w

    @property
    def scope(self) -> str:
        """``cpu-package``, ``dram``, ``cpu-core``, ``cpu-uncore``, ``platform`` or the name."""
        if self.name.startswith("package"):
            return "cpu-package"
        return SCOPES.get(self.name, self.name)

    @property
    def device(self) -> str:
        """Reading label: ``package-0``, ``dram-0``, ``core-0``, ``psys``."""
        if self.name.startswith("package") or self.name == "psys":
            return self.name
        return f"{self.name}-{self.package_index}"


def zone_domain(path: Path, root: Path) -> RaplDomain | None:
    """The RAPL zone at ``path`` (None if it is not one)."""
    match = ZONE_RE.match(path.name)
    if match is None or not path.is_dir():
        return None
    try:
        name = open_text(path / "name").strip() or path.name
    except OSError:
        name = path.name
    try:
        max_range: int | None = read_int(path / "max_energy_range_uj")
    except (OSError, ValueError):
        max_range = None
    max_power_uw, max_power_file = zone_max_power(path)
    readable, reason = True, ""
    try:
        read_int(path / "energy_uj")
    except PermissionError:
        readable, reason = False, access_note(root)
    except FileNotFoundError:
        readable, reason = False, f"{path.name} has no energy_uj counter"
    except (OSError, ValueError) as exc:
        readable, reason = False, f"cannot read {path / 'energy_uj'}: {exc}"
    return RaplDomain(
        zone=path.name,
        name=name,
        path=path,
        package_index=int(match.group(1)),
        max_energy_range_uj=max_range,
        readable=readable,
        reason=reason,
        max_power_uw=max_power_uw,
        max_power_file=max_power_file,
    )


def zone_max_power(path: Path) -> tuple[int | None, str]:
    """The largest readable positive ``constraint_*_max_power_uw`` of a zone, and its file."""
    best: tuple[int | None, str] = (None, "")
    for file in sorted(path.glob("constraint_*_max_power_uw")):
        try:
            value = read_int(file)
        except (OSError, ValueError):
            continue
        if value > 0 and (best[0] is None or value > best[0]):
            best = (value, file.name)
    return best


def discover_domains(root: Path | None = None) -> list[RaplDomain]:
    """Every RAPL zone under the powercap root (``[]`` if there is none).

    Args:
        root: Powercap root; default :func:`powercap_root`.
    """
    root = root if root is not None else powercap_root()
    if not root.is_dir():
        return []
    candidates: list[Path] = []
    for top in sorted(root.iterdir()):
        candidates.append(top)
        if ZONE_RE.match(top.name) and top.is_dir():
            # Sub-zones appear at the top level in sysfs, but also nested in copies.
            candidates.extend(sorted(p for p in top.iterdir() if ZONE_RE.match(p.name)))
    seen: dict[str, RaplDomain] = {}
    for path in candidates:
        if path.name not in seen:
            domain = zone_domain(path, root)
            if domain is not None:
                seen[path.name] = domain

    def order(d: RaplDomain) -> tuple[int, int]:
        match = ZONE_RE.match(d.zone)
        sub = match.group(2) if match else None
        return d.package_index, -1 if sub is None else int(sub)

    return sorted(seen.values(), key=order)


