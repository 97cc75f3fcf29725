"""Energy end to end on this machine (no power sensor): unavailable or estimated, never 0."""

from __future__ import annotations

import json
from pathlib import Path

from accelbench.store import open_store
from tests.conftest import run_cli


def test_run_without_sensor_stores_unavailable_with_reason(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    p = run_cli("run", "lstm", "--size", "tiny", "--iterations", "5", "--json", db=db,
                ACCELBENCH_POWERCAP_ROOT=str(tmp_path / "no-powercap"))
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["energy_j_per_sample"] is None
    assert out["avg_power_w"] is None
    assert out["energy_source"] == "unavailable"
    assert any("--cpu-tdp-w" in n for n in out["energy_notes"])
    with open_store(str(db)) as st:
        [r] = st.query()
    [reading] = r.energy
    assert reading.source == "unavailable" and reading.energy_j is None
    assert reading.scope == "cpu-package"


def test_run_with_tdp_stores_a_labelled_estimate(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    p = run_cli("run", "lstm", "--size", "tiny", "--iterations", "30", "--cpu-tdp-w", "65",
                "--no-idle", db=db, ACCELBENCH_POWERCAP_ROOT=str(tmp_path / "no-powercap"))
    assert p.returncode == 0, p.stderr
    assert "source: estimate" in p.stdout
    with open_store(str(db)) as st:
        [r] = st.query()
    [reading] = r.energy
    assert reading.source == "estimate"
    assert reading.energy_j is not None and reading.energy_j > 0
    assert 0 < (reading.avg_power_w or 0) <= 65.0
    assert r.energy_j_per_sample is not None
    assert abs(r.energy_j_per_sample - reading.energy_j / (30 * 4)) < 1e-9
    assert "estimat" in reading.note
    assert r.summary()["energy_source"] == "estimate"


def test_no_energy_records_nothing_measured(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    p = run_cli("run", "lstm", "--size", "tiny", "--iterations", "3", "--no-energy", "--json",
                db=db)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["energy_source"] == "unavailable" and out["energy_j_per_sample"] is None
    # The record says why: not measured on purpose, not a missing sensor.
    assert out["energy_notes"] == ["energy not measured: --no-energy"]
    with open_store(str(db)) as st:
        [r] = st.query()
    [reading] = r.energy
    assert reading.source == "unavailable" and reading.device == "cpu"
    assert reading.note == "energy not measured: --no-energy"


def test_power_command_prints_sensors_briefly(tmp_path: Path) -> None:
    p = run_cli("power", "--interval-ms", "100", "--duration", "0.3",
                ACCELBENCH_POWERCAP_ROOT=str(tmp_path / "no-powercap"))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip()
    bad = run_cli("power", "--interval-ms", "0")
    assert bad.returncode == 2 and "--interval-ms" in bad.stderr
