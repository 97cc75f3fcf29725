"""TPU energy: a labelled upper-bound estimate from a published TDP, or unavailable.

TPUs have no power interface to fake; the meter's only input is the chip
generation jax reports (``device_kind``), so the real meter runs here.
"""

from __future__ import annotations

import time

import pytest

from accelbench.meters.session import open_session
from accelbench.meters.tpu import TPU_TDP, generation


def _measure(kind: str, samples: int = 10) -> tuple:  # type: ignore[type-arg]
    with open_session(["tpu:0"], idle_s=0, device_names={"tpu:0": kind}) as session:
        session.start()
        time.sleep(0.2)
        readings, _ = session.stop(samples=samples)
    return readings


def test_published_tdp_gives_a_labelled_estimate() -> None:
    (reading,) = _measure("TPU v4")
    assert reading.device == "tpu:0" and reading.source == "estimate"
    assert reading.window_s is not None and reading.window_s >= 0.2
    assert reading.avg_power_w == 192.0
    assert reading.energy_j == pytest.approx(192.0 * reading.window_s)
    assert reading.energy_j_per_sample == pytest.approx(reading.energy_j / 10)
    assert "upper bound" in reading.note and "ISCA 2023" in reading.note


def test_chip_without_a_published_tdp_is_unavailable_not_zero() -> None:
    (reading,) = _measure("TPU v5 lite")
    assert reading.source == "unavailable"
    assert reading.energy_j is None and reading.energy_j_per_sample is None
    assert "no published TDP" in reading.note


def test_generation_parsing() -> None:
    assert generation("TPU v3") == "v3" and generation("TPU v5 lite") == "v5 lite"
    assert generation("NVIDIA H200") is None
    assert set(TPU_TDP) == {"v2", "v3", "v4"}
