"""The roofline's files: ``roofline.json``/``.csv``/``.png``/``.svg`` (and the energy
roofline's charts) written from the store's roofline data (:mod:`accelbench.roofline.data`),
each through a temporary file renamed into place."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from accelbench.roofline.data import roofline_data, to_csv

if TYPE_CHECKING:
    from accelbench.store.db import Store

ROOFLINE_FILES = ("roofline.json", "roofline.csv", "roofline.png", "roofline.svg",
                  "roofline_energy.png", "roofline_energy.svg")
"""What :func:`write_roofline` may write in its directory."""


def write_roofline(
    store: Store, out_dir: str | Path, device: str | None = None
) -> dict[str, Path]:
    """Write roofline.png/.svg/.json/.csv (and roofline_energy.png/.svg where energy exists).

    Returns:
        The written files by kind (``png``, ``svg``, ``json``, ``csv``,
        ``energy_png``, ``energy_svg``).
    """
    from accelbench import jsonout
    from accelbench.errors import ConfigError
    from accelbench.report.outputs import atomic_paths, atomic_write_text
    from accelbench.roofline.plot import plot_energy_roofline, plot_roofline

    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file, not a directory: choose a directory "
                          "(it is created if missing)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the output directory {out}: "
                          f"{exc.strerror or exc}") from None
    data = roofline_data(store, device)
    files = {
        "json": out / "roofline.json",
        "csv": out / "roofline.csv",
        "png": out / "roofline.png",
        "svg": out / "roofline.svg",
    }
    # Each file through a temporary one renamed into place: a failed write keeps the old.
    atomic_write_text(files["json"], jsonout.dumps(data, indent=2, default=str))
    atomic_write_text(files["csv"], to_csv(data["points"]))
    title = "Roofline" + (f" - {device}" if device else "")
    with atomic_paths([files["png"], files["svg"]]) as temps:
        plot_roofline(data["points"], data["roofs"], temps, title=title)
    if data["energy_points"]:
        files["energy_png"] = out / "roofline_energy.png"
        files["energy_svg"] = out / "roofline_energy.svg"
        with atomic_paths([files["energy_png"], files["energy_svg"]]) as temps:
            plot_energy_roofline(data["energy_points"], data["roofs"], temps,
                                 title="Energy roofline" + (f" - {device}" if device else ""))
    return files
