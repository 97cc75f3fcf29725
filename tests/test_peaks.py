"""Measured peaks at tiny sizes, caching in the store, the theoretical table and CPU estimate."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from accelbench.execution.peaks import (
    PeakSweep,
    ensure_peaks,
    measure_bandwidth,
    measure_compute_peak,
)
from accelbench.roofline.peaks import peak_bytes_per_s, peak_flop_per_s
from accelbench.roofline.theoretical import (
    THEORETICAL_PEAKS,
    cpu_clock_hz,
    cpu_cores,
    cpu_peak_estimate,
    lookup_device,
    theoretical_flop_per_s,
)
from accelbench.spec import MeasurementPolicy
from accelbench.store import open_store
from accelbench.store.opbench import Peak
from tests.conftest import run_cli

TINY = MeasurementPolicy(iterations=3, warmup_min=1, warmup_max=1)


def test_compute_peak_at_tiny_sizes() -> None:
    peak = measure_compute_peak("cpu", "fp32", sides=(32, 64), policy=TINY)
    assert peak.unit == "FLOP/s" and peak.precision == "fp32" and peak.value > 0
    sweep = peak.details["sweep"]
    assert [s["n"] for s in sweep] == [32, 64]
    assert peak.value == max(s["flop_per_s"] for s in sweep)
    assert peak.hostname == socket.gethostname() and peak.device_name
    bf16 = measure_compute_peak("cpu", "amp_bf16", sides=(32,), policy=TINY)
    assert bf16.precision == "bf16"


def test_bandwidth_counts_read_plus_write() -> None:
    peak = measure_bandwidth("cpu", nbytes=1 << 20, policy=TINY)
    assert peak.unit == "B/s" and peak.precision == "bandwidth"
    d = peak.details
    assert d["buffer_bytes"] == 1 << 20
    assert peak.value == pytest.approx(2 * d["buffer_bytes"] / d["median_s"])


def test_peaks_are_cached_and_reused(tmp_path: Path) -> None:
    notices: list[str] = []
    with open_store(str(tmp_path / "r.db")) as st:
        assert peak_flop_per_s(st, "cpu", "fp32") is None
        tiny = PeakSweep(sides=(32,), copy_bytes=1 << 20, policy=TINY)
        first = ensure_peaks(st, "cpu", ["fp32", "amp_bf16"], sweep=tiny,
                             on_measure=notices.append)
        assert set(first) == {"fp32", "bf16", "bandwidth"} and len(notices) == 3
        again = ensure_peaks(st, "cpu", ["fp32", "bf16"], sweep=tiny,
                             on_measure=notices.append)
        assert len(notices) == 3  # nothing measured the second time
        assert {k: p.id for k, p in again.items()} == {k: p.id for k, p in first.items()}
        # MFU lookups: training precisions map to the GEMM peak of their format.
        assert peak_flop_per_s(st, "cpu", "amp_bf16") == first["bf16"].value
        assert peak_flop_per_s(st, "cpu", "fp32") == first["fp32"].value
        assert peak_bytes_per_s(st, "cpu") == first["bandwidth"].value
        assert peak_flop_per_s(st, "cpu", "fp32", hostname="elsewhere") is None
        assert peak_flop_per_s(st, "cuda:0", "fp32") is None
        fresh = ensure_peaks(st, "cpu", ["fp32"], bandwidth=False, remeasure=True,
                             sweep=PeakSweep(sides=(32,), policy=TINY))
        assert fresh["fp32"].id != first["fp32"].id
        # Both kept; MFU's peak is the robust one (best of the quiet ones, or of all).
        assert peak_flop_per_s(st, "cpu", "fp32") in (first["fp32"].value,
                                                      fresh["fp32"].value)
        for p in (first["fp32"], fresh["fp32"]):
            noise = p.details["noise"]
            assert noise["quiet"] in (True, False, None) and "other_cores" in noise
        assert len(st.query_peaks(latest_only=False)) == 4
        only_cached = ensure_peaks(st, "cpu", ["fp32"], measure_missing=False)
        assert set(only_cached) == {"fp32", "bandwidth"}


def test_peaks_of_other_hosts_stay_apart(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "r.db")) as st:
        st.save_peak(Peak(device="cpu", precision="fp32", value=1.0, unit="FLOP/s",
                           method="test", hostname="other-host"))
        assert peak_flop_per_s(st, "cpu", "fp32") is None
        assert peak_flop_per_s(st, "cpu", "fp32", hostname="other-host") == 1.0


@pytest.mark.parametrize(
    ("name", "precision", "value"),
    [
        ("Tesla V100-SXM2-16GB", "fp16", 125e12),
        ("Tesla V100-PCIE-32GB", "fp32", 14e12),
        ("NVIDIA A100-SXM4-40GB", "tf32", 156e12),
        ("NVIDIA H100 80GB HBM3", "bf16", 989.4e12),
        ("NVIDIA H100 PCIe", "fp16", 756e12),
        ("NVIDIA H200", "bf16", 989.4e12),
        ("AMD Instinct MI250X", "fp16", 383e12),
        ("AMD Instinct MI300X", "bf16", 1307.4e12),
        ("TPU v2", "bf16", 46e12),
        ("TPU v3", "bf16", 123e12),
        ("TPU v4", "bf16", 275e12),
        ("TPU v5 lite", "bf16", 197e12),
    ],
)
def test_theoretical_table(name: str, precision: str, value: float) -> None:
    entry = lookup_device(name)
    assert entry is not None
    assert entry.flop_per_s[precision] == pytest.approx(value)
    assert theoretical_flop_per_s("cuda:0", name, precision) == pytest.approx(value)


def test_theoretical_table_is_cited_and_sane() -> None:
    assert lookup_device("NVIDIA A100-SXM4-80GB").bytes_per_s == 2039e9  # type: ignore[union-attr]
    assert lookup_device("NVIDIA H200").bytes_per_s == 4800e9  # type: ignore[union-attr]
    assert lookup_device("Some Unknown GPU") is None and lookup_device(None) is None
    assert lookup_device("TPU v4").flop_per_s.get("fp32") is None  # type: ignore[union-attr]
    for entry in THEORETICAL_PEAKS:
        assert entry.source and entry.bytes_per_s and entry.bytes_per_s > 0
        assert all(v > 0 for v in entry.flop_per_s.values())


def _fake_root(tmp_path: Path, flags: str, mhz: str | None, max_khz: str | None) -> Path:
    (tmp_path / "proc").mkdir(parents=True)
    text = f"processor\t: 0\nflags\t\t: {flags}\n"
    if mhz:
        text += f"cpu MHz\t\t: {mhz}\n"
    (tmp_path / "proc/cpuinfo").write_text(text)
    if max_khz:
        d = tmp_path / "sys/devices/system/cpu/cpu0/cpufreq"
        d.mkdir(parents=True)
        (d / "cpuinfo_max_freq").write_text(max_khz + "\n")
    return tmp_path


def test_cpu_estimate_from_cores_flops_per_cycle_and_clock(tmp_path: Path) -> None:
    root = _fake_root(tmp_path, "fpu avx2 fma avx512f avx512_bf16", "2100.0", "3500000")
    assert cpu_clock_hz(root) == (3.5e9, "cpufreq cpuinfo_max_freq")
    est = cpu_peak_estimate("fp32", root)
    cores = cpu_cores()
    assert est.flop_per_cycle_per_core == 64
    assert est.flop_per_s == pytest.approx(cores * 64 * 3.5e9)  # type: ignore[operator]
    assert any("assumed" in a for a in est.assumptions)
    assert cpu_peak_estimate("bf16", root).flop_per_cycle_per_core == 128
    assert cpu_peak_estimate("tf32", root).flop_per_s is None


def test_cpu_estimate_says_unknown(tmp_path: Path) -> None:
    no_clock = _fake_root(tmp_path / "a", "fpu avx2 fma", None, None)
    est = cpu_peak_estimate("fp32", no_clock)
    assert est.flop_per_s is None and est.clock_hz is None
    assert any("unknown" in a for a in est.assumptions)
    mhz_only = _fake_root(tmp_path / "b", "fpu sse2", "2600.000", None)
    est = cpu_peak_estimate("fp32", mhz_only)
    assert est.clock_hz == 2.6e9 and est.flop_per_s is None  # no FMA flags: FLOP/cycle unknown
    assert cpu_peak_estimate("bf16", _fake_root(tmp_path / "c", "avx2 fma", "1000", None)
                             ).flop_per_s is None


def test_cli_peaks_measures_then_reuses(db_path: Path) -> None:
    args = ("peaks", "--gemm-sizes", "32,64", "--copy-mib", "1", "--iterations", "2")
    first = run_cli(*args, "--json", db=db_path)
    assert first.returncode == 0, first.stderr
    rows = {r["precision"]: r for r in json.loads(first.stdout)}
    assert set(rows) == {"fp32", "bf16", "bandwidth"}
    assert all(r["measured"] > 0 for r in rows.values())
    assert rows["fp32"]["theoretical_source"]  # the CPU estimate's assumptions
    cached = run_cli("peaks", "--no-measure", "--json", db=db_path)
    assert cached.returncode == 0, cached.stderr
    again = {r["precision"]: r for r in json.loads(cached.stdout)}
    assert {k: r["measured"] for k, r in again.items()} == {
        k: r["measured"] for k, r in rows.items()
    }
    table = run_cli("peaks", "--no-measure", db=db_path)
    assert table.returncode == 0 and "bandwidth" in table.stdout


def _peak(value: float, quiet: bool | None, stamp: str, device: str = "cpu",
          name: str | None = None) -> Peak:
    noise = {"quiet": quiet, "other_cores": 0.1 if quiet else 1.7, "load_avg_1m": 0.3}
    return Peak(device=device, precision="fp32", value=value, unit="FLOP/s",
                method="test", hostname=socket.gethostname(), device_name=name,
                details={"noise": noise} if quiet is not None else {}, created_at=stamp)


def test_robust_peak_is_the_best_quiet_one_else_cited_else_best_measured(
    tmp_path: Path
) -> None:
    from accelbench.roofline.peaks import robust_peak

    with open_store(str(tmp_path / "r.db")) as st:
        assert robust_peak(st, "cpu", "fp32") is None
        st.save_peak(_peak(9.0e10, None, "2026-01-01T00:00:00"))  # state not recorded
        legacy = robust_peak(st, "cpu", "fp32")
        assert legacy is not None and legacy.kind == "measured" and legacy.value == 9.0e10
        st.save_peak(_peak(1.5e11, True, "2026-01-02T00:00:00"))
        st.save_peak(_peak(1.4e11, True, "2026-01-03T00:00:00"))
        st.save_peak(_peak(6.8e10, False, "2026-01-04T00:00:00"))  # loaded, newest
        best = robust_peak(st, "cpu", "fp32")
        assert best is not None and (best.kind, best.value) == ("measured_quiet", 1.5e11)
        assert "best of 2 quiet" in best.source and "2026-01-02" in best.source
        # An accelerator with only loaded measurements falls back to its cited peak.
        h100 = "NVIDIA H100 PCIe"
        st.save_peak(_peak(2.0e13, False, "2026-01-05T00:00:00", "cuda:0", h100))
        gpu = robust_peak(st, "cuda:0", "fp32", device_name=h100)
        assert gpu is not None and gpu.kind == "theoretical"
        assert gpu.value == lookup_device(h100).flop_per_s["fp32"]  # type: ignore[union-attr]
        assert "no quiet measurement" in gpu.source
        # An unknown accelerator keeps the best measurement, labelled as not known quiet.
        odd = robust_peak(st, "cuda:0", "fp32", device_name="Some GPU")
        assert odd is not None and odd.kind == "measured" and "none known quiet" in odd.source


def test_a_measured_peak_records_the_machine_state() -> None:
    import dataclasses

    from accelbench.execution.peaks import measure_in_worker

    data = measure_in_worker("cpu", "fp32", sides=[64], policy=dataclasses.asdict(TINY))
    noise = data["details"]["noise"]
    assert {"quiet", "other_cores", "load_avg_1m", "window_s", "rule"} <= set(noise)


_ZEN4_FLAGS = "fpu avx avx2 fma avx512f avx512dq avx512_bf16 avx512vl"
_CPUINFO = {
    # AMD EPYC 9654 (Genoa): family 0x19, model 0x11.
    "zen4": ("AuthenticAMD", 25, 17, "AMD EPYC 9654 96-Core Processor", _ZEN4_FLAGS),
    # AMD Ryzen 9 7950X (Raphael): model 0x61.
    "zen4-desktop": ("AuthenticAMD", 25, 97, "AMD Ryzen 9 7950X 16-Core Processor",
                     _ZEN4_FLAGS),
    # AMD EPYC 7763 (Milan): model 0x01; no AVX-512.
    "zen3": ("AuthenticAMD", 25, 1, "AMD EPYC 7763 64-Core Processor", "fpu avx avx2 fma"),
    # Intel Xeon Platinum 8480+ (Sapphire Rapids): two 512-bit FMA units.
    "spr": ("GenuineIntel", 6, 143, "Intel(R) Xeon(R) Platinum 8480+",
            "fpu avx avx2 fma avx512f avx512_bf16 amx_bf16"),
}


def _cpuinfo_root(tmp_path: Path, which: str, *, max_khz: str | None = "3700000") -> Path:
    vendor, family, model, name, flags = _CPUINFO[which]
    root = tmp_path / which
    (root / "proc").mkdir(parents=True)
    (root / "proc/cpuinfo").write_text(
        f"processor\t: 0\nvendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: {model}\n"
        f"model name\t: {name}\nstepping\t: 1\ncpu MHz\t\t: 2400.000\nflags\t\t: {flags}\n"
    )
    if max_khz:
        d = root / "sys/devices/system/cpu/cpu0/cpufreq"
        d.mkdir(parents=True)
        (d / "cpuinfo_max_freq").write_text(max_khz + "\n")
    return root


def test_zen4_runs_avx512_on_256_bit_datapaths(tmp_path: Path) -> None:
    from accelbench.roofline.theoretical import cpu_microarch

    cores = cpu_cores()
    for which in ("zen4", "zen4-desktop"):
        root = _cpuinfo_root(tmp_path, which)
        assert cpu_microarch(root).name == "AMD Zen 4"
        est = cpu_peak_estimate("fp32", root)
        # 8 fp32 lanes per 256-bit pipe x 2 (FMA) x 2 pipes: half of two 512-bit units.
        assert est.flop_per_cycle_per_core == 32
        assert est.flop_per_s == pytest.approx(cores * 32 * 3.7e9)  # type: ignore[operator]
        assert any("256-bit" in a and "Zen 4" in a for a in est.assumptions)
        assert cpu_peak_estimate("bf16", root).flop_per_cycle_per_core == 64
    zen3 = _cpuinfo_root(tmp_path, "zen3")
    assert cpu_microarch(zen3).name == "AMD Zen 3"
    assert cpu_peak_estimate("fp32", zen3).flop_per_cycle_per_core == 32  # AVX2, 2 x 256-bit
    spr = _cpuinfo_root(tmp_path, "spr")
    assert cpu_microarch(spr).name == "" and cpu_microarch(spr).fma_bits is None
    assert cpu_peak_estimate("fp32", spr).flop_per_cycle_per_core == 64  # 2 x 512-bit
    assert cpu_peak_estimate("bf16", spr).flop_per_cycle_per_core == 1024  # AMX


def test_cpu_estimate_says_which_clock_it_assumes(tmp_path: Path) -> None:
    turbo = cpu_peak_estimate("fp32", _cpuinfo_root(tmp_path / "a", "zen4"))
    assert any("clock assumed: the maximum (turbo) clock 3.70 GHz" in a
               for a in turbo.assumptions)
    nominal = cpu_peak_estimate("fp32", _cpuinfo_root(tmp_path / "b", "zen4", max_khz=None))
    assert nominal.clock_hz == 2.4e9
    assert any("clock assumed: 2.40 GHz" in a and "not the maximum" in a
               for a in nominal.assumptions)
