"""The GPU interface every vendor module implements, the one mapping from the ``cuda:N`` a
framework sees to the vendor's physical GPU, and the null object for "no GPU here".

A :class:`GpuSession` is one open session of a vendor library (``nvmlInit`` ..
``nvmlShutdown``, ``amdsmi_init`` .. ``amdsmi_shut_down``). Its GPUs are numbered by the
library (the *physical* index). A framework numbers only the GPUs left visible by
``CUDA_VISIBLE_DEVICES`` (AMD: ``HIP_VISIBLE_DEVICES``, else ``ROCR_VISIBLE_DEVICES``,
else ``CUDA_VISIBLE_DEVICES``), whose entries are indices, UUIDs (``GPU-<uuid>``, full or a
unique prefix), PCI bus ids (``0000:3b:00.0``) or NVIDIA MIG instances.
:meth:`GpuSession.physical_index` maps the one to the other; meters and knobs both go
through it, so a sweep sets the GPU its meter reads.

Which vendor is used (NVIDIA, else AMD, else none) is decided once, in
:func:`accelbench.devices.gpu.detect`; each vendor's :meth:`GpuSession.is_available` is
cached until :func:`clear_cache`.
"""

from __future__ import annotations

import os
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from accelbench.devices.errors import DeviceError

PCI_BUS_ID = re.compile(
    r"^(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])$"
)
"""``[domain:]bus:device.function``, hexadecimal (``0000:3b:00.0``, NVML's
``00000000:3B:00.0``)."""


def normalize_pci_bus_id(text: str) -> str | None:
    """``dddd:bb:dd.f`` in lower case (domain widened or narrowed to 4 digits), or None."""
    match = PCI_BUS_ID.match(text.strip())
    if match is None:
        return None
    domain, bus, dev, fn = match.groups()
    return f"{int(domain or '0', 16):04x}:{int(bus, 16):02x}:{int(dev, 16):02x}.{fn}"


def parse_visible_devices(value: str | None) -> list[str] | None:
    """Entries of a visible-devices variable as the runtime reads them.

    Args:
        value: The variable's value, or None when unset.

    Returns:
        None when unset (every GPU visible), else the entries up to the first
        invalid one (CUDA ignores everything from there on).
    """
    if value is None:
        return None
    entries: list[str] = []
    for raw in value.split(","):
        entry = raw.strip()
        if entry.startswith(("GPU-", "MIG-")) or normalize_pci_bus_id(entry) is not None:
            entries.append(entry)
            continue
        try:
            index = int(entry)
        except ValueError:
            break
        if index < 0:
            break
        entries.append(str(index))
    return entries


def device_ordinal(device: str) -> int:
    """N of ``cuda:N`` (``cuda`` is ``cuda:0``).

    Raises:
        DeviceError: For anything else.
    """
    if device == "cuda":
        return 0
    prefix, _, index = device.partition(":")
    if prefix != "cuda" or not index.isdigit():
        raise DeviceError(f"not a CUDA device: {device!r} (expected 'cuda:N')")
    return int(index)


def _bare_uuid(uuid: str) -> str:
    return uuid.lower().removeprefix("gpu-")


def in_container() -> bool:
    """Whether this process runs in a container (Docker, Podman, Kubernetes)."""
    if Path("/.dockerenv").exists() or Path("/run/.containerenv").exists():
        return True
    try:
        cgroup = Path("/proc/1/cgroup").read_text(encoding="ascii", errors="replace")
    except OSError:
        return False
    return any(word in cgroup for word in ("docker", "kubepods", "containerd", "libpod"))


class GpuEnergy(ABC):
    """One GPU's energy counter, power and state as the GPU meter
    (:mod:`accelbench.meters.gpu`) reads them, in joules and watts; a vendor's
    peculiarities (NVML's power fields, AMD SMI's counter faults) live in its subclass.

    Args:
        device: The accelbench device it stands for (``cuda:N``).
        has_counter: Whether the energy counter works.
        has_power: Whether power readings work.
        counter_resolution_j: Joules per counter step, where known.
        details: Static details of every reading (``details["sensor"]`` is :attr:`kind`).
        notes: Static remarks of every reading.
    """

    kind: ClassVar[str] = ""
    """Provenance of the readings (``nvml``, ``amdsmi``): the meter's kind."""
    nominal_update_period_s: ClassVar[float | None] = None
    """The sensor's documented update period, used until a window measures it."""

    def __init__(
        self, device: str, *, has_counter: bool, has_power: bool,
        counter_resolution_j: float | None = None, details: dict[str, Any] | None = None,
        notes: tuple[str, ...] = (),
    ) -> None:
        self.device = device
        self.has_counter = has_counter
        self.has_power = has_power
        self.counter_resolution_j = counter_resolution_j
        self.details = dict(details or {})
        self.notes = notes
        self.invalid = ""
        """Why the open window's energy cannot be trusted (set while reading), or ``""``."""

    @abstractmethod
    def read_counter_j(self) -> float:
        """The energy counter in joules. Raises :class:`DeviceError`."""

    @abstractmethod
    def read_power_w(self) -> float:
        """The current power in watts. Raises :class:`DeviceError`."""

    @abstractmethod
    def sensors(self) -> list[tuple[str, str, bool, str]]:
        """``(name, kind, readable, reason)`` of the counter and the power sensor."""

    def read_state(self) -> dict[str, Any]:
        """Power limit, clocks, throttling ... at a window edge (best effort)."""
        return {}

    def temperature_c(self) -> float | None:
        """The GPU's temperature, or None."""
        return None

    def window_started(self) -> None:
        """Reset per-window state."""
        self.invalid = ""

    def window_extras(self, window_s: float) -> dict[str, Any]:
        """Details of the window's reading beyond the static ones."""
        return {}

    def counter_span_s(self) -> float | None:
        """Seconds between the device's own timestamps of the window's first and last
        counter reads, where the counter carries them; else None."""
        return None


@dataclass(frozen=True, slots=True)
class VendorEnergy:
    """What the GPU meter needs of one vendor library beyond its :class:`GpuSession`; each
    vendor's energy module defines one (``VENDOR``), listed in
    :data:`accelbench.devices.gpu.ENERGY`."""

    session: type[GpuSession]
    """The vendor's session class."""
    open: Callable[[Any, str, str | None], GpuEnergy]
    """``open(session, device, uuid)``: the energy counter and power of ``cuda:N``
    (``uuid`` overrides the visible devices where the vendor supports it). Raises
    :class:`DeviceError`: not found, or it reports neither energy nor power (saying why)."""
    sensor_probe: Callable[[Any, int], tuple[str, list[tuple[str, bool, str]]]]
    """``sensor_probe(session, index)``: the label of physical GPU ``index`` and ``(what,
    readable, why not)`` of its ``energy counter`` and ``power``."""
    activity: Callable[[Any, str, str | None], dict[str, Any]]
    """``activity(session, device, uuid)``: other ``processes`` (``pid``,
    ``used_memory_bytes``), clocks, ``throttle_reasons``, utilisation, temperature (None
    where not reported). Raises :class:`DeviceError`: the GPU cannot be found."""
    fix: Callable[[str], str]
    """``fix(reason)``: the fix for a problem of this library (``accelbench doctor``)."""


_AVAILABLE: dict[type, tuple[bool, str]] = {}
_S = TypeVar("_S", bound="GpuSession")


def clear_cache() -> None:
    """Forget cached :meth:`GpuSession.is_available` answers (tests, hot-plug)."""
    _AVAILABLE.clear()


class GpuSession(ABC):
    """An open session of one vendor library and the GPUs it sees.

    Subclasses open the library in ``__init__`` (raising :class:`DeviceError` with the
    fix when it cannot start) and release it in :meth:`close`.
    """

    vendor: ClassVar[str] = ""
    """``nvidia``, ``amd`` (the prefix of a knob's device string), ``none``."""
    vendor_name: ClassVar[str] = ""
    """``NVIDIA``, ``AMD``: for messages."""
    library: ClassVar[str] = ""
    """``NVML``, ``AMD SMI``: for messages."""
    sensor_kind: ClassVar[str] = ""
    """``nvml``, ``amdsmi``: the kind of its sensors and readings (provenance)."""
    visibility_vars: ClassVar[tuple[str, ...]] = ()
    """The variables naming the visible GPUs, the first set one deciding."""

    # -- the library ---------------------------------------------------------------------

    @abstractmethod
    def count(self) -> int:
        """GPUs the library sees (hidden ones included)."""

    @abstractmethod
    def uuid(self, index: int) -> str:
        """UUID of physical GPU ``index``."""

    def pci_bus_id(self, index: int) -> str | None:
        """PCI bus id of physical GPU ``index`` (normalised), or None if unknown."""
        return None

    def mig_parent_uuid(self, entry: str) -> str:
        """UUID of the GPU a MIG instance (``MIG-...``) belongs to."""
        raise DeviceError(f"{entry}: {self.library} has no MIG instances")

    @abstractmethod
    def close(self) -> None:
        """Release the library (idempotent)."""

    def __enter__(self: _S) -> _S:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- availability --------------------------------------------------------------------

    @classmethod
    def availability(cls) -> tuple[bool, str]:
        """``(whether the library starts here and sees a GPU, why not)``, cached."""
        if cls not in _AVAILABLE:
            _AVAILABLE[cls] = cls._probe()
        return _AVAILABLE[cls]

    @classmethod
    def is_available(cls) -> bool:
        """Whether the library starts here and sees at least one GPU (cached)."""
        return cls.availability()[0]

    @classmethod
    def unavailable_reason(cls) -> str:
        """Why :meth:`is_available` is False (with the fix), or ``""``."""
        return cls.availability()[1]

    @classmethod
    def _probe(cls) -> tuple[bool, str]:
        try:
            session = cls()
        except DeviceError as exc:
            return False, str(exc)
        try:
            n = session.count()
        except DeviceError as exc:
            return False, str(exc)
        finally:
            session.close()
        if n < 1:
            return False, f"{cls.library} found no {cls.vendor_name} GPU"
        return True, ""

    # -- the visible-devices mapping -----------------------------------------------------

    def visible(self) -> tuple[str, list[str]] | None:
        """``(variable, entries)`` of the first visible-devices variable set, or None."""
        for var in self.visibility_vars:
            entries = parse_visible_devices(os.environ.get(var))
            if entries is not None:
                return var, entries
        return None

    def visible_count(self) -> int:
        """How many GPUs a framework in this process numbers ``cuda:0`` ...."""
        n = self.count()
        visible = self.visible()
        return n if visible is None else min(n, len(visible[1]))

    def physical_index(self, ordinal: int, device: str = "") -> tuple[int, str | None]:
        """The vendor's index of the ``ordinal``-th visible GPU, and its MIG instance.

        Args:
            ordinal: N of ``cuda:N``.
            device: The name for messages (default ``cuda:N``).

        Returns:
            ``(physical index, MIG UUID or None)``.

        Raises:
            DeviceError: The GPU is not visible or not found.
        """
        device = device or f"cuda:{ordinal}"
        visible = self.visible()
        entries = [str(i) for i in range(self.count())] if visible is None else visible[1]
        if ordinal >= len(entries):
            if visible is None:
                var, value = self.visibility_vars[0], "<unset>"
            else:
                var, value = visible[0], os.environ.get(visible[0], "")
            raise DeviceError(
                f"{device} is not visible to this process: {len(entries)} GPU(s) visible "
                f"({var}={value!r})"
            )
        return self.entry_index(entries[ordinal], device)

    def entry_index(self, entry: str, device: str = "") -> tuple[int, str | None]:
        """The physical index of one visible-devices entry (index, UUID, PCI bus id, MIG).

        Returns:
            ``(physical index, MIG UUID or None)``.

        Raises:
            DeviceError: No GPU, or more than one, matches the entry.
        """
        where = f"{device}: " if device else ""
        count = self.count()
        if entry.isdigit():
            if int(entry) >= count:
                raise DeviceError(
                    f"{where}{self.library} has no GPU with index {entry} ({count} found)"
                )
            return int(entry), None
        pci = normalize_pci_bus_id(entry)
        if pci is not None:
            found = [i for i in range(count) if self.pci_bus_id(i) == pci]
            if not found:
                raise DeviceError(f"{where}no GPU at PCI bus id {entry!r} found by {self.library}")
            return found[0], None
        mig: str | None = None
        if entry.startswith("MIG-GPU-"):
            # Legacy MIG form MIG-GPU-<uuid>/<gi>/<ci>: the parent GPU is in the name.
            mig, entry = entry, entry[len("MIG-") :].split("/")[0]
        elif entry.startswith("MIG-"):
            mig, entry = entry, self.mig_parent_uuid(entry)
        uuids = [_bare_uuid(self.uuid(i)) for i in range(count)]
        bare = _bare_uuid(entry)
        # CUDA accepts any unique prefix of a GPU UUID.
        found = [i for i, u in enumerate(uuids) if u == bare] or [
            i for i, u in enumerate(uuids) if u.startswith(bare)
        ]
        if len(found) > 1:
            raise DeviceError(f"{where}GPU UUID prefix {entry!r} is ambiguous")
        if not found:
            raise DeviceError(f"{where}no GPU with UUID {entry!r} found by {self.library}")
        return found[0], mig


class NoGpus(GpuSession):
    """The null object where no vendor library sees a GPU: no GPUs, and the reason."""

    vendor = "none"
    vendor_name = "no vendor"
    library = "no GPU library"

    def __init__(self, reason: str = "no GPU library available") -> None:
        self.reason = reason

    @classmethod
    def _probe(cls) -> tuple[bool, str]:
        return False, "no GPU library available"

    def count(self) -> int:
        return 0

    def uuid(self, index: int) -> str:
        raise DeviceError(f"no GPU {index}: {self.reason}")

    def physical_index(self, ordinal: int, device: str = "") -> tuple[int, str | None]:
        raise DeviceError(f"{device or f'cuda:{ordinal}'}: {self.reason}")

    def close(self) -> None:
        pass
