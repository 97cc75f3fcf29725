"""Cost and carbon per million samples, from throughput, energy and the user's rates.

Rates come from, in increasing priority: the ``[cost]`` table of the config
file, its ``[cost.devices."NAME"]`` table for the device (matched by device
id such as ``cuda:0`` or by device name such as ``NVIDIA A100-SXM4-40GB``),
and the command-line options. The config file is TOML, by default
``config.toml`` under ``platformdirs.user_config_dir("accelbench")``::

    [cost]
    currency = "USD"
    electricity_price_per_kwh = 0.30
    carbon_intensity_g_per_kwh = 350

    [cost.devices."cuda:0"]
    price_per_hour = 2.48

Formulas, per million (1e6) samples:

- machine cost = price_per_hour / 3600 s/h x 1e6 / throughput
- kWh = energy_j_per_sample x 1e6 / 3.6e6 J/kWh
- electricity cost = kWh x electricity_price_per_kwh
- gCO2 = kWh x carbon_intensity_g_per_kwh
- total cost = machine cost + electricity cost (each where its rate is known;
  a cloud price per hour usually includes electricity: then set only that)

Energy-derived figures carry the energy's provenance (measured or estimated).
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelbench.errors import ConfigError
from accelbench.report.rows import CaseRow

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    try:
        import tomli as tomllib
    except ModuleNotFoundError:
        tomllib = None

J_PER_KWH = 3.6e6
MSAMPLE = 1e6
CONFIG_NAME = "config.toml"

_RATE_KEYS = ("price_per_hour", "electricity_price_per_kwh", "carbon_intensity_g_per_kwh")


@dataclass(frozen=True, kw_only=True, slots=True)
class CostRates:
    """Prices and carbon intensity for one device; None where the user gave none."""

    price_per_hour: float | None = None
    """Price of the machine per hour (any currency; see :attr:`currency`)."""
    electricity_price_per_kwh: float | None = None
    """Price of one kWh of electricity."""
    carbon_intensity_g_per_kwh: float | None = None
    """Grams of CO2(-equivalent) emitted per kWh of electricity."""
    currency: str = ""
    """Label only, e.g. ``USD``; no conversion is done."""

    def __post_init__(self) -> None:
        for name in _RATE_KEYS:
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"{name} must be a number, got {value!r}")
            if not math.isfinite(value) or value < 0:
                raise ConfigError(f"{name} must be a finite number >= 0, got {value!r}")

    @property
    def any(self) -> bool:
        """Whether any rate is set."""
        return any(getattr(self, k) is not None for k in _RATE_KEYS)

    def merged(self, override: CostRates) -> CostRates:
        """These rates with every rate ``override`` sets replacing ours."""
        changes: dict[str, Any] = {
            k: getattr(override, k) for k in _RATE_KEYS if getattr(override, k) is not None
        }
        if override.currency:
            changes["currency"] = override.currency
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True, kw_only=True, slots=True)
class CostConfig:
    """Default rates, per-device rates, and command-line overrides."""

    default: CostRates = field(default_factory=CostRates)
    devices: Mapping[str, CostRates] = field(default_factory=dict)
    """Keyed by device id (``cuda:0``) or device name (``NVIDIA H100 80GB HBM3``)."""
    overrides: CostRates = field(default_factory=CostRates)
    source: str = ""
    """Where the file rates came from (a path), for the report."""

    def rates_for(self, device: str, device_name: str) -> CostRates:
        """The rates that apply to one device."""
        rates = self.default
        for key in (device, device_name):
            if key in self.devices:
                rates = rates.merged(self.devices[key])
        return rates.merged(self.overrides)

    @property
    def any(self) -> bool:
        """Whether any rate is configured anywhere."""
        return self.default.any or self.overrides.any or any(
            r.any for r in self.devices.values()
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class CaseCost:
    """Cost and carbon of one case per million samples; None where a rate or input is missing."""

    machine_cost_per_msample: float | None
    energy_cost_per_msample: float | None
    cost_per_msample: float | None
    kwh_per_msample: float | None
    gco2_per_msample: float | None
    energy_kind: str
    """Provenance of the energy behind kWh, electricity cost and gCO2."""
    currency: str

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form."""
        return dataclasses.asdict(self)


def default_config_path() -> Path:
    """``config.toml`` in the user's accelbench config directory."""
    import platformdirs

    return Path(platformdirs.user_config_dir("accelbench", appauthor=False)) / CONFIG_NAME


def _rates(table: Mapping[str, Any], where: str) -> CostRates:
    allowed = {*_RATE_KEYS, "currency"}
    unknown = sorted(set(table) - allowed - {"devices"})
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join(unknown)} in {where}; allowed: {', '.join(sorted(allowed))}"
        )
    values = {k: table[k] for k in allowed if k in table}
    if "currency" in values and not isinstance(values["currency"], str):
        raise ConfigError(f"currency in {where} must be a string")
    try:
        return CostRates(**values)
    except ConfigError as exc:
        raise ConfigError(f"{exc} (in {where})") from None


def load_cost_config(
    path: str | Path | None = None, *, overrides: CostRates | None = None
) -> CostConfig:
    """Read the ``[cost]`` tables of a TOML config file.

    Args:
        path: The file; None for :func:`default_config_path`, which may be absent.
        overrides: Rates from the command line, applied to every device.

    Raises:
        ConfigError: ``path`` was given but does not exist, or the file is invalid.
    """
    explicit = path is not None
    file = Path(path).expanduser() if path is not None else default_config_path()
    over = overrides or CostRates()
    if not file.is_file():
        if explicit:
            raise ConfigError(f"config file {file} does not exist")
        return CostConfig(overrides=over)
    if tomllib is None:  # pragma: no cover - Python 3.10 without tomli
        raise ConfigError("reading config files needs tomli on Python 3.10: pip install tomli")
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {file}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {file} is not valid TOML: {exc}") from None
    cost = data.get("cost", {})
    if not isinstance(cost, dict):
        raise ConfigError(f"[cost] in {file} must be a table")
    devices_raw = cost.get("devices", {})
    if not isinstance(devices_raw, dict) or not all(
        isinstance(v, dict) for v in devices_raw.values()
    ):
        raise ConfigError(f'[cost.devices] in {file} must hold tables like [cost.devices."cuda:0"]')
    devices = {
        str(name): _rates(table, f'[cost.devices."{name}"] of {file}')
        for name, table in devices_raw.items()
    }
    return CostConfig(
        default=_rates(cost, f"[cost] of {file}"), devices=devices, overrides=over,
        source=str(file),
    )


def case_cost(row: CaseRow, rates: CostRates) -> CaseCost | None:
    """Cost and carbon of ``row`` per million samples, or None when no rate is set."""
    if not rates.any:
        return None
    tput = row.samples_per_s
    machine = (
        rates.price_per_hour / 3600.0 * MSAMPLE / tput
        if rates.price_per_hour is not None and tput
        else None
    )
    e = row.energy_j_per_sample
    kwh = e * MSAMPLE / J_PER_KWH if e is not None else None
    energy_cost = (
        kwh * rates.electricity_price_per_kwh
        if kwh is not None and rates.electricity_price_per_kwh is not None
        else None
    )
    gco2 = (
        kwh * rates.carbon_intensity_g_per_kwh
        if kwh is not None and rates.carbon_intensity_g_per_kwh is not None
        else None
    )
    parts = [p for p in (machine, energy_cost) if p is not None]
    return CaseCost(
        machine_cost_per_msample=machine,
        energy_cost_per_msample=energy_cost,
        cost_per_msample=sum(parts) if parts else None,
        kwh_per_msample=kwh,
        gco2_per_msample=gco2,
        energy_kind=row.energy_kind,
        currency=rates.currency,
    )
