"""Fake vendor knobs for ``accelbench sweep`` tests: NVML (pynvml functions) and AMD SMI
(an ``amdsmi`` module) whose state lives in a JSON file, so that separate processes (a
sweep killed with SIGKILL, the next accelbench command) share one GPU; and fake cpufreq
and powercap trees in a temporary directory.

In another process the fakes are installed by ``tests/plugins/fake_knobs.py`` (loaded with
``ACCELBENCH_PLUGINS``) when ``ACCELBENCH_FAKE_KNOBS`` names the state file. Only the
vendor boundary is fake: accelbench's own code reads and sets these as it would real ones.
"""

from __future__ import annotations

import fcntl
import json
import os
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

STATE_ENV = "ACCELBENCH_FAKE_KNOBS"


def fake_uuid(index: int) -> str:
    """The UUID of fake NVIDIA GPU ``index`` (distinct from the 9th character on)."""
    return f"GPU-{index:08x}-aaaa-bbbb-cccc-{index:012x}"


def nvidia_key(index: int) -> str:
    """The state key of fake NVIDIA GPU ``index`` (``nvidia`` for GPU 0, then ``nvidia1`` ..)."""
    return "nvidia" if index == 0 else f"nvidia{index}"


DEFAULT_STATE: dict[str, Any] = {
    "nvidia": {"limit_mw": 300_000, "min_mw": 100_000, "max_mw": 400_000,
               "default_mw": 300_000, "sm_locked": None, "mem_locked": None,
               "mem_clocks": [1593, 1215], "sm_clocks": [1980, 1755, 1500, 1200, 990, 705],
               "deny": False},
    "amd": {"cap_uw": 250_000_000, "min_uw": 100_000_000, "max_uw": 300_000_000,
            "deny": False},
    "nvidia_count": 1,
    "log": [],
}


class KnobState:
    """The fake GPUs' state in a JSON file (locked while updated)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def create(self, *, nvidia_count: int = 1, **overrides: Any) -> KnobState:
        """The default state with ``nvidia_count`` identical NVIDIA GPUs (each under
        :func:`nvidia_key`) and ``overrides`` of a vendor's values (GPU 0 for NVIDIA)."""
        state = json.loads(json.dumps(DEFAULT_STATE))
        state["nvidia_count"] = nvidia_count
        for i in range(1, nvidia_count):
            state[nvidia_key(i)] = json.loads(json.dumps(DEFAULT_STATE["nvidia"]))
        for vendor, values in overrides.items():
            state[vendor].update(values)
        self.path.write_text(json.dumps(state))
        return self

    def read(self) -> dict[str, Any]:
        with open(self.path) as f:  # shared lock: never a file another process is rewriting
            fcntl.flock(f, fcntl.LOCK_SH)
            return dict(json.loads(f.read()))

    def update(self, fn: Callable[[dict[str, Any]], Any]) -> Any:
        with open(self.path, "r+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            state = json.loads(f.read())
            out = fn(state)
            f.seek(0)
            f.truncate()
            f.write(json.dumps(state))
            return out

    def sets(self, vendor: str, call: str, gpu: int | None = None) -> list[Any]:
        """Values passed to ``call`` in order (refused calls excluded), on every GPU or on
        NVIDIA GPU ``gpu``."""
        return [e["value"] for e in self.read()["log"]
                if e["vendor"] == vendor and e["call"] == call
                and (gpu is None or e.get("gpu", 0) == gpu)]


def nvml_functions(nv: Any, state: KnobState) -> dict[str, Callable[..., Any]]:
    """pynvml functions over ``state`` (handle = NVML index), raising pynvml's own errors.
    Each GPU also has an energy counter (its index + 1 kJ) and no power fields."""

    def count() -> int:
        return int(state.read().get("nvidia_count", 1))

    def handle(index: int) -> int:
        if not 0 <= index < count():
            raise nv.NVMLError(nv.NVML_ERROR_INVALID_ARGUMENT)
        return index

    def setter(call: str, key: str, make: Callable[[Any], Any]) -> Callable[..., None]:
        def fn(h: int, *args: Any) -> None:
            def change(s: dict[str, Any]) -> None:
                gpu = s[nvidia_key(h)]
                if gpu["deny"]:
                    raise nv.NVMLError(nv.NVML_ERROR_NO_PERMISSION)
                value = make(args)
                gpu[key] = value
                s["log"].append({"vendor": "nvidia", "gpu": h, "call": call, "value": value})
            state.update(change)
        fn.__name__ = f"nvmlDevice{call}"
        return fn

    def limit(args: tuple[Any, ...]) -> int:
        mw = int(args[0])
        n = DEFAULT_STATE["nvidia"]
        if not n["min_mw"] <= mw <= n["max_mw"]:
            raise nv.NVMLError(nv.NVML_ERROR_INVALID_ARGUMENT)
        return mw

    def g(key: str) -> Callable[[int], Any]:
        return lambda h: state.read()[nvidia_key(h)][key]

    def no_fields(_h: int, _fields: Any) -> None:
        raise nv.NVMLError(nv.NVML_ERROR_NOT_SUPPORTED)

    return {
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlDeviceGetCount": count,
        "nvmlDeviceGetHandleByIndex": handle,
        "nvmlDeviceGetUUID": fake_uuid,
        "nvmlDeviceGetName": lambda h: "Fake NVIDIA GPU",
        "nvmlDeviceGetTotalEnergyConsumption": lambda h: (h + 1) * 1_000_000,
        "nvmlDeviceGetPowerUsage": g("limit_mw"),
        "nvmlDeviceGetFieldValues": no_fields,
        "nvmlDeviceGetPowerManagementLimit": g("limit_mw"),
        "nvmlDeviceGetPowerManagementDefaultLimit": g("default_mw"),
        "nvmlDeviceGetPowerManagementLimitConstraints":
            lambda h: [state.read()[nvidia_key(h)]["min_mw"],
                       state.read()[nvidia_key(h)]["max_mw"]],
        "nvmlDeviceGetSupportedMemoryClocks": g("mem_clocks"),
        "nvmlDeviceGetSupportedGraphicsClocks":
            lambda h, _mem: state.read()[nvidia_key(h)]["sm_clocks"],
        "nvmlDeviceSetPowerManagementLimit": setter("SetPowerManagementLimit", "limit_mw", limit),
        "nvmlDeviceSetGpuLockedClocks": setter("SetGpuLockedClocks", "sm_locked",
                                               lambda a: [int(a[0]), int(a[1])]),
        "nvmlDeviceResetGpuLockedClocks": setter("ResetGpuLockedClocks", "sm_locked",
                                                 lambda a: None),
        "nvmlDeviceSetMemoryLockedClocks": setter("SetMemoryLockedClocks", "mem_locked",
                                                  lambda a: [int(a[0]), int(a[1])]),
        "nvmlDeviceResetMemoryLockedClocks": setter("ResetMemoryLockedClocks", "mem_locked",
                                                    lambda a: None),
    }


def install_nvml_knobs(state: KnobState, setattr_fn: Callable[[Any, str, Any], Any] = setattr
                       ) -> None:
    """Replace pynvml's knob functions (``setattr_fn``: ``monkeypatch.setattr`` in tests)."""
    import pynvml

    for name, fn in nvml_functions(pynvml, state).items():
        setattr_fn(pynvml, name, fn)


class AmdSmiException(Exception):  # noqa: N818 - amdsmi's own name
    """Base of the fake module's errors, like amdsmi's."""


class AmdSmiLibraryException(AmdSmiException):  # noqa: N818
    def __init__(self, err_code: int) -> None:
        super().__init__(f"AMDSMI error code {err_code}")
        self.err_code = err_code


def fake_amdsmi(state: KnobState) -> types.ModuleType:
    """An ``amdsmi`` module with one GPU whose power cap lives in ``state``."""
    smi = types.ModuleType("amdsmi")
    smi.AmdSmiException = AmdSmiException  # type: ignore[attr-defined]
    smi.amdsmi_init = lambda flags=None: None  # type: ignore[attr-defined]
    smi.amdsmi_shut_down = lambda: None  # type: ignore[attr-defined]
    smi.amdsmi_get_processor_handles = lambda: ["gpu0"]  # type: ignore[attr-defined]
    smi.amdsmi_get_gpu_device_uuid = lambda h: "GPU-a0a0"  # type: ignore[attr-defined]

    def cap_info(_h: str) -> dict[str, Any]:
        a = state.read()["amd"]
        return {"power_cap": a["cap_uw"], "default_power_cap": 250_000_000,
                "min_power_cap": a["min_uw"], "max_power_cap": a["max_uw"], "dpm_cap": 0}

    def set_cap(_h: str, sensor: int, cap: int) -> None:
        def change(s: dict[str, Any]) -> None:
            if s["amd"]["deny"]:
                raise AmdSmiLibraryException(10)  # AMDSMI_STATUS_NO_PERM
            s["amd"]["cap_uw"] = int(cap)
            s["log"].append({"vendor": "amd", "call": "set_power_cap", "value": int(cap)})
        state.update(change)

    smi.amdsmi_get_power_cap_info = cap_info  # type: ignore[attr-defined]
    smi.amdsmi_set_power_cap = set_cap  # type: ignore[attr-defined]
    return smi


def install_from_env() -> None:
    """In a subprocess: install the fakes over the state file ``$ACCELBENCH_FAKE_KNOBS``."""
    path = os.environ.get(STATE_ENV)
    if not path:
        return
    import sys

    state = KnobState(Path(path))
    install_nvml_knobs(state)
    if os.environ.get("ACCELBENCH_FAKE_AMD"):
        sys.modules["amdsmi"] = fake_amdsmi(state)


def cpufreq_tree(root: Path, *, policies: int = 2, min_khz: int = 800_000,
                 max_khz: int = 3_000_000) -> list[Path]:
    """``<root>/cpufreq/policyN/{scaling_max_freq,cpuinfo_min_freq,cpuinfo_max_freq}``;
    returns the scaling_max_freq files (at ``max_khz``)."""
    out = []
    for i in range(policies):
        d = root / "cpufreq" / f"policy{i}"
        d.mkdir(parents=True)
        (d / "cpuinfo_min_freq").write_text(f"{min_khz}\n")
        (d / "cpuinfo_max_freq").write_text(f"{max_khz}\n")
        (d / "scaling_max_freq").write_text(f"{max_khz}\n")
        out.append(d / "scaling_max_freq")
    return out


def rapl_tree(root: Path, *, packages: int = 1, limit_uw: int = 125_000_000,
              max_uw: int = 200_000_000) -> list[Path]:
    """``<root>/intel-rapl:N/constraint_0_{power_limit_uw,max_power_uw}`` (+ a dram
    sub-zone that must be left alone); returns the limit files."""
    out = []
    for i in range(packages):
        d = root / f"intel-rapl:{i}"
        (d / f"intel-rapl:{i}:0").mkdir(parents=True)
        (d / "name").write_text(f"package-{i}\n")
        (d / "constraint_0_power_limit_uw").write_text(f"{limit_uw}\n")
        (d / "constraint_0_max_power_uw").write_text(f"{max_uw}\n")
        (d / f"intel-rapl:{i}:0" / "constraint_0_power_limit_uw").write_text("7\n")
        out.append(d / "constraint_0_power_limit_uw")
    return out
