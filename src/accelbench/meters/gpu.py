"""The GPU meter, for NVIDIA and AMD alike, on :mod:`accelbench.devices.gpu`.

:class:`GpuMeter` reads one GPU's energy counter at the window edges and samples its
power on a background thread (:class:`~accelbench.meters.counter.CounterSampleMeter`);
what it reads comes from the vendor's :class:`~accelbench.devices.gpu.common.GpuEnergy`
(:data:`accelbench.devices.gpu.ENERGY`)
(:mod:`accelbench.devices.gpu.nvidia_energy`: NVML's energy counter and power fields;
:mod:`accelbench.devices.gpu.amd_energy`: AMD SMI's accumulator with its fault checks).
The vendor is the one :func:`accelbench.devices.gpu.detect` picks (NVIDIA, else AMD).
Its readings keep the vendor's provenance: ``kind`` and ``details["sensor"]`` are
``nvml`` or ``amdsmi``.

Only the GPUs a case uses are measured: ``cuda:N`` is the N-th GPU left visible by
``CUDA_VISIBLE_DEVICES`` (AMD: ``HIP_VISIBLE_DEVICES``, else ``ROCR_VISIBLE_DEVICES``,
else ``CUDA_VISIBLE_DEVICES``), resolved by
:meth:`accelbench.devices.gpu.common.GpuSession.physical_index`, the mapping the knobs use.
This module registers the ``gpu`` device meter (:mod:`accelbench.meters.registry`).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from accelbench.devices import gpu
from accelbench.devices.gpu.common import GpuEnergy, GpuSession, NoGpus
from accelbench.errors import MeterError
from accelbench.meters.common import Meter, NullMeter, SensorInfo
from accelbench.meters.counter import CounterSampleMeter, Sensor
from accelbench.meters.registry import DeviceMeterOptions, register_device_meter
from accelbench.meters.sampler import DEFAULT_INTERVAL_S, DEFAULT_MAX_SAMPLES


class GpuMeter(CounterSampleMeter):
    """Energy and power of one GPU. Build it with :func:`open_meter`.

    Args:
        energy: What it reads (the vendor's ``VendorEnergy.open``).
        interval_s: Power sampling interval.
        max_samples: Bound on stored samples.
        session: The vendor session ``energy`` belongs to, closed with the meter.
    """

    def __init__(
        self,
        energy: GpuEnergy,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        max_samples: int = DEFAULT_MAX_SAMPLES,
        session: GpuSession | None = None,
    ) -> None:
        # The vendor's provenance (``nvml``, ``amdsmi``) names this meter's readings.
        setattr(self, "kind", energy.kind)  # noqa: B010 - Meter.kind is a class default
        sensor = Sensor(
            has_counter=energy.has_counter, has_power=energy.has_power,
            counter_resolution_j=energy.counter_resolution_j, details=dict(energy.details or {}),
            notes=energy.notes, nominal_update_period_s=energy.nominal_update_period_s,
        )
        super().__init__(energy.device, "gpu", sensor, interval_s=interval_s,
                         max_samples=max_samples)
        self.energy = energy
        self._session = session
        self._closed = False

    def _checked(self) -> None:
        if self.energy.invalid:
            self.invalidate(self.energy.invalid)

    def _window_started(self) -> None:
        self.energy.window_started()

    def _window_extras(self, window_s: float) -> tuple[dict[str, Any], list[str]]:
        extras = self.energy.window_extras(window_s)
        self._checked()
        return extras, []

    def _counter_span_s(self) -> float | None:
        return self.energy.counter_span_s()

    def read_counter_j(self) -> float:
        try:
            return self.energy.read_counter_j()
        finally:
            self._checked()

    def read_power_w(self) -> float:
        try:
            return self.energy.read_power_w()
        finally:
            self._checked()

    def read_state(self) -> dict[str, Any]:
        return self.energy.read_state()

    def temperature_c(self) -> float | None:
        """The GPU's temperature (NVML: ``NVML_TEMPERATURE_GPU``; AMD SMI: edge, else
        hotspot), or None."""
        return self.energy.temperature_c()

    @classmethod
    def _probe(cls) -> tuple[bool, str]:
        return available()

    @classmethod
    def _availability_key(cls) -> Hashable:
        return ()

    def describe(self) -> list[SensorInfo]:
        return [SensorInfo(name, kind, self.device, readable, reason)
                for name, kind, readable, reason in self.energy.sensors()]

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._session is not None:
                self._session.close()


def available() -> tuple[bool, str]:
    """Whether a GPU library (NVML, else AMD SMI) sees a GPU here, and why not."""
    if gpu.detect() is NoGpus:
        return False, gpu.unavailable_reason()
    return True, ""


def open_meter(
    device: str,
    *,
    interval_s: float = DEFAULT_INTERVAL_S,
    uuid: str | None = None,
    max_samples: int = DEFAULT_MAX_SAMPLES,
    vendor: type[GpuSession] | None = None,
) -> Meter:
    """The meter for ``cuda:N``: a :class:`GpuMeter`, or a :class:`NullMeter` saying why not.

    Args:
        device: ``cuda:N``.
        interval_s: Power sampling interval.
        uuid: The GPU's UUID if known (overrides the visible devices; NVIDIA).
        max_samples: Bound on stored samples.
        vendor: The vendor session class (default: the one :func:`gpu.detect` picks).
    """
    cls = vendor or gpu.detect()
    if cls is NoGpus:
        return NullMeter(device, "gpu", f"no GPU power interface: {gpu.unavailable_reason()}")
    try:
        session = cls()
    except MeterError as exc:
        return NullMeter(device, "gpu", str(exc))
    try:
        energy = gpu.ENERGY[cls].open(session, device, uuid)
    except MeterError as exc:
        session.close()
        return NullMeter(device, "gpu", str(exc))
    return GpuMeter(energy, interval_s=interval_s, max_samples=max_samples, session=session)


def visible_devices(vendor: type[GpuSession] | None = None) -> list[str]:
    """``cuda:N`` for every GPU this process can see (``[]`` if none)."""
    cls = vendor or gpu.detect()
    if cls is NoGpus or not cls.is_available():
        return []
    try:
        with cls() as session:
            n = session.visible_count()
    except MeterError:
        return []
    return [f"cuda:{i}" for i in range(n)]


def vendor_sensors(cls: type[GpuSession]) -> list[SensorInfo]:
    """Every GPU sensor one vendor library sees, hidden GPUs included, or why none."""
    unreadable = f"{cls.vendor_name} GPUs ({cls.library})"
    try:
        session = cls()
    except MeterError as exc:
        return [SensorInfo(unreadable, cls.sensor_kind, "", False, str(exc))]
    try:
        device_of: dict[int, str] = {}
        for n in range(session.count()):
            try:
                device_of.setdefault(session.physical_index(n)[0], f"cuda:{n}")
            except MeterError:
                break
        out: list[SensorInfo] = []
        hidden_why = f"not visible to this process ({cls.visibility_vars[0]})"
        for index in range(session.count()):
            label, probes = gpu.ENERGY[cls].sensor_probe(session, index)
            device = device_of.get(index, "")
            for (what, ok, why), suffix in zip(probes, ("energy", "power"), strict=True):
                reason = why if not ok else ("" if device else hidden_why)
                out.append(SensorInfo(f"{label} {what}", f"{cls.sensor_kind}-{suffix}",
                                      device, ok, reason))
        return out
    except MeterError as exc:
        return [SensorInfo(unreadable, cls.sensor_kind, "", False, str(exc))]
    finally:
        session.close()


def list_sensors() -> list[SensorInfo]:
    """Every GPU sensor of every vendor library, for ``accelbench devices``."""
    return [info for cls in gpu.VENDORS for info in vendor_sensors(cls)]


def device_activity(device: str, *, uuid: str | None = None) -> dict[str, Any]:
    """What else is happening on ``cuda:N``: processes, clocks, throttling, utilisation.

    For the noise record of a case (:mod:`accelbench.execution.noise`); every field
    is best effort (None where the vendor library does not report it).

    Raises:
        MeterError: No GPU library, or it cannot find the device.
    """
    cls = gpu.detect()
    if cls is NoGpus:
        raise MeterError(gpu.unavailable_reason())
    with cls() as session:
        return gpu.ENERGY[cls].activity(session, device, uuid)


def diagnose(options: Any) -> tuple[list[Any], list[tuple[Meter, str, str]]]:
    """``accelbench doctor``'s GPU part: each vendor library up to the one in use (the
    others say why not) with its unreadable sensors and fixes; a meter per readable GPU
    of the vendor in use, to probe."""
    from accelbench.meters.doctor import Finding

    findings: list[Finding] = []
    probes: list[tuple[Meter, str, str]] = []
    used = gpu.detect()
    for cls in gpu.VENDORS:
        devices: list[str] = []
        for info in vendor_sensors(cls):
            if info.readable and info.device and not info.reason:
                if info.device not in devices:
                    devices.append(info.device)
                continue
            problem = info.reason or "not readable"
            findings.append(Finding(sensor=info.name, kind=cls.sensor_kind, boundary="device",
                                    readable=info.readable and bool(info.device),
                                    energy=False, problem=problem,
                                    fix=gpu.ENERGY[cls].fix(problem)))
        if cls is used or used is NoGpus and cls is gpu.VENDORS[-1]:
            probes += [(open_meter(device, vendor=cls), cls.sensor_kind, "device")
                       for device in devices]
        if cls is used:
            break
    return findings, probes


def claims(device: str) -> bool:
    """``cuda`` and ``cuda:N`` (NVIDIA, and AMD under ROCm)."""
    return device == "cuda" or (device.startswith("cuda:") and device[5:].isdigit())


def _open(device: str, options: DeviceMeterOptions) -> Meter:
    return open_meter(device, interval_s=options.interval_s, uuid=options.uuid,
                      max_samples=options.max_samples)


def _activity(device: str, uuid: str | None) -> dict[str, Any]:
    return device_activity(device, uuid=uuid)


register_device_meter(
    "gpu", claims=claims, open=_open, available=available, sensors=list_sensors,
    visible=visible_devices, activity=_activity, diagnose=diagnose, order=10,
)
