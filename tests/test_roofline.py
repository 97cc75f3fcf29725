"""Model step breakdowns, roofline data from the store, charts and the CLI."""

from __future__ import annotations

import csv
import io
import json
import socket
from pathlib import Path

import pytest

from accelbench.backends import workload_flops
from accelbench.backends.opkinds import op_kind
from accelbench.execution.breakdown import breakdown_step
from accelbench.execution.opbench import OpRun, run_cases
from accelbench.opbench.cases import OpCase
from accelbench.report.roofline_files import write_roofline
from accelbench.result import EnergyReading, Result
from accelbench.roofline.breakdown import (
    UNATTRIBUTED,
    ModelBreakdown,
    save_breakdown,
)
from accelbench.roofline.data import (
    ABOVE_ROOF_REASON,
    CSV_FIELDS,
    energy_points,
    roofline_points,
    roofs,
)
from accelbench.roofline.plot import place_labels, plot_roofline
from accelbench.spec import MeasurementPolicy, RunChoices, RunSpec
from accelbench.stats import compute_stats
from accelbench.store import Store, open_store
from accelbench.store.opbench import Peak
from tests.conftest import run_cli

FAST = MeasurementPolicy(iterations=2, warmup_min=1, warmup_max=1)
CONTRACT_KEYS = {"label", "kind", "intensity_flop_per_byte", "achieved_flop_per_s",
                 "peak_flop_per_s", "peak_bytes_per_s", "device", "precision"}


@pytest.fixture(scope="module")
def ds2_breakdown():  # type: ignore[no-untyped-def]
    return breakdown_step("deepspeech2", RunChoices(size="tiny"), repeats=1, warmup=1)


def test_op_kinds() -> None:
    assert op_kind("convolution") == op_kind("convolution_backward") == "conv"
    assert op_kind("addmm") == op_kind("mm") == op_kind("bmm") == "matmul"
    assert op_kind("mkldnn_rnn_layer_backward") == op_kind("_cudnn_rnn") == "rnn"
    assert op_kind("_scaled_dot_product_flash_attention_for_cpu") == "attention"
    assert op_kind("native_batch_norm_backward") == "norm"
    assert op_kind("threshold_backward") == op_kind("hardtanh_") == "activation"
    assert op_kind("_foreach_add_") == "optimizer"
    assert op_kind("view") == "view" and op_kind("frobnicate") == "other"


def test_breakdown_counts_match_flop_accounting(ds2_breakdown) -> None:  # type: ignore[no-untyped-def]
    bd = ds2_breakdown
    expected = workload_flops("deepspeech2", "tiny", bd.batch_size)
    # The dispatch-level counter (fused LSTM kernels counted analytically) agrees
    # with the meta-device count of forward + backward.
    assert bd.flops == pytest.approx(expected.train_flop_per_sample * bd.batch_size)
    kinds = {k.kind: k for k in bd.kinds}
    assert {"conv", "rnn", "norm", "elementwise"} <= set(kinds)
    assert kinds["conv"].flops > 0 and kinds["rnn"].flops > 0
    assert kinds["norm"].flops == 0 and kinds["norm"].roofline_flops > 0  # estimated
    assert all(k.bytes >= 0 and k.time_s >= 0 for k in bd.kinds)
    assert kinds["conv"].time_s > 0 and bd.step_time_s > 0
    assert sum(k.n_calls for k in bd.kinds) == sum(o.n_calls for o in bd.ops)
    assert bd.to_dict()["kinds"][0]["kind"]
    assert ModelBreakdown.from_dict(bd.to_dict()) == bd


def test_breakdown_kinds_account_for_the_step_time(ds2_breakdown) -> None:  # type: ignore[no-untyped-def]
    bd = ds2_breakdown
    # The op kinds plus the explicit unattributed share are the whole (profiled) step.
    assert sum(k.time_s for k in bd.kinds) == pytest.approx(bd.step_time_s, rel=0.01)
    (rest,) = [k for k in bd.kinds if k.kind == UNATTRIBUTED]
    assert rest.time_s == bd.unattributed_s >= 0 and rest.flops == 0
    assert rest.time_s < bd.step_time_s  # the operators do account for most of it
    assert "profiled steps" in bd.step_time_method


@pytest.fixture(scope="module")
def op_results() -> list:  # type: ignore[type-arg]
    """Two real operator measurements (a matmul, a conv2d forward and backward), measured
    once for the module's stores: each test saves them into its own."""
    cases = [
        OpCase(op="matmul", shape={"m": 64, "n": 64, "k": 64}),
        OpCase(op="conv2d", shape={"n": 1, "h": 10, "w": 10, "c_in": 3, "kh": 3, "kw": 3,
                                   "c_out": 4, "stride": 1}, pass_="forward_backward"),
    ]
    return run_cases(cases, OpRun(device="cpu", policy=FAST, device_name="Test CPU"))


def _populate(st: Store, breakdown, results: list) -> list:  # type: ignore[no-untyped-def,type-arg]
    host = socket.gethostname()
    for prec, value in (("fp32", 2e11), ("bf16", 1e12)):
        st.save_peak(Peak(device="cpu", precision=prec, value=value, unit="FLOP/s",
                           method="test", hostname=host, device_name="Test CPU"))
    st.save_peak(Peak(device="cpu", precision="bandwidth", value=2e10, unit="B/s",
                       method="test", hostname=host, device_name="Test CPU"))
    for r in results:
        st.save_op_result(r)
    save_breakdown(st, breakdown)
    return results


def test_roofline_points_shape(tmp_path: Path, ds2_breakdown, op_results) -> None:  # type: ignore[no-untyped-def]
    with open_store(str(tmp_path / "r.db")) as st:
        results = _populate(st, ds2_breakdown, op_results)
        points = roofline_points(st)
        rf = roofs(st)
    ops = [p for p in points if p["kind"] == "op"]
    models = [p for p in points if p["kind"] == "model"]
    assert len(ops) == 2 and models
    for p in points:
        assert set(p) >= CONTRACT_KEYS
        assert p["intensity_flop_per_byte"] > 0 and p["achieved_flop_per_s"] > 0
        assert p["peak_bytes_per_s"] == 2e10
        assert p["bound"] in ("memory", "compute")
    mm = next(p for p in ops if p["group"] == "matmul")
    r0 = results[0]
    assert mm["intensity_flop_per_byte"] == pytest.approx(r0.case.flops / r0.case.min_bytes)
    assert mm["peak_flop_per_s"] == 2e11 and mm["precision"] == "fp32"
    groups = {p["group"]: p for p in models}
    assert {"conv", "rnn", "total"} <= set(groups)
    assert groups["norm"]["bound"] == "memory"  # ~0.1 FLOP/byte, far left of the ridge
    assert groups["total"]["label"] == "deepspeech2 (whole step)"
    assert {(r["precision"], r["ridge_flop_per_byte"]) for r in rf} == {
        ("fp32", 10.0), ("bf16", 50.0)
    }


def test_write_roofline_files(tmp_path: Path, ds2_breakdown, op_results) -> None:  # type: ignore[no-untyped-def]
    with open_store(str(tmp_path / "r.db")) as st:
        _populate(st, ds2_breakdown, op_results)
        files = write_roofline(st, tmp_path / "out")
    for kind in ("png", "svg", "json", "csv"):
        assert files[kind].is_file() and files[kind].stat().st_size > 0
    assert files["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in files["svg"].read_bytes()[:2000]
    data = json.loads(files["json"].read_text())
    assert set(data) == {"points", "roofs", "energy_points", "breakdowns", "above_roof"}
    assert data["points"]
    rows = list(csv.DictReader(io.StringIO(files["csv"].read_text())))
    assert len(rows) == len(data["points"]) and tuple(rows[0]) == CSV_FIELDS
    assert "energy_png" not in files  # no energy measured


def test_empty_store_still_writes_a_chart(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "r.db")) as st:
        files = write_roofline(st, tmp_path / "out")
    assert files["png"].stat().st_size > 0 and files["svg"].stat().st_size > 0
    assert json.loads(files["json"].read_text())["points"] == []


def test_energy_roofline(tmp_path: Path, ds2_breakdown, op_results) -> None:  # type: ignore[no-untyped-def]
    bd = ds2_breakdown
    spec = RunSpec(workload="deepspeech2", size="tiny", batch_size=bd.batch_size)
    times = (0.01, 0.011, 0.012)
    fc = workload_flops("deepspeech2", "tiny", bd.batch_size)
    result = Result(
        id="e1", spec=spec, status="ok", sample_unit="utterance",
        samples_per_step=bd.batch_size,
        stats=compute_stats(times, bd.batch_size, trim_fraction=0.0, stop_reason="iterations"),
        iteration_times_s=times,
        energy=(EnergyReading(device="cpu", scope="cpu-package", source="counter",
                              energy_j=1.0, energy_j_per_sample=0.05, avg_power_w=30.0),),
        machine={"hostname": socket.gethostname(), "cpu": {"model": "Test CPU"}, "gpus": []},
        started_at="2026-01-01T00:00:00+00:00", finished_at="2026-01-01T00:00:01+00:00",
        flop_per_sample=fc.train_flop_per_sample,
    )
    with open_store(str(tmp_path / "r.db")) as st:
        _populate(st, bd, op_results)
        st.save(result)
        points = energy_points(st)
        files = write_roofline(st, tmp_path / "out")
    assert len(points) == 1
    assert points[0]["flop_per_j"] == pytest.approx(fc.train_flop_per_sample / 0.05)
    assert points[0]["intensity_flop_per_byte"] == pytest.approx(bd.flops / bd.bytes)
    assert files["energy_png"].stat().st_size > 0 and files["energy_svg"].stat().st_size > 0


def test_cli_roofline(db_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "chart"
    p = run_cli("roofline", "--model", "lstm", "--size", "tiny", "--repeats", "1",
                "--out", str(out), db=db_path)
    assert p.returncode == 0, p.stderr
    assert "lstm" in p.stdout and "no measured peaks" in p.stderr
    assert "USDT" not in p.stderr and "profiler_start" not in p.stderr
    for name in ("roofline.png", "roofline.svg", "roofline.json", "roofline.csv"):
        assert (out / name).stat().st_size > 0
    data = json.loads((out / "roofline.json").read_text())
    assert {p["group"] for p in data["points"]} >= {"rnn", "matmul", "total"}
    bad = run_cli("roofline", "--model", "nope", "--out", str(out), db=db_path)
    assert bad.returncode == 2 and "unknown workload" in bad.stderr


def test_points_above_their_roof_are_flagged(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    host = socket.gethostname()
    with open_store(str(db)) as st:
        # A roof far below what the operator reaches: the peak was "measured under load".
        st.save_peak(Peak(device="cpu", precision="fp32", value=1e3, unit="FLOP/s",
                           method="test", hostname=host, device_name="Test CPU"))
        st.save_peak(Peak(device="cpu", precision="bandwidth", value=1e3, unit="B/s",
                           method="test", hostname=host, device_name="Test CPU"))
        for r in run_cases([OpCase(op="matmul", shape={"m": 32, "n": 32, "k": 32})],
                           OpRun(device="cpu", policy=FAST, device_name="Test CPU")):
            st.save_op_result(r)
        (point,) = roofline_points(st)
    assert point["above_roof"] is True and point["note"] == ABOVE_ROOF_REASON
    assert point["pct_of_roof"] > 100
    out = tmp_path / "out"
    p = run_cli("roofline", "--out", str(out), db=db)
    assert p.returncode == 0, p.stderr
    assert "ABOVE their measured roof" in p.stdout and "accelbench peaks --measure" in p.stdout
    data = json.loads((out / "roofline.json").read_text())
    assert data["points"][0]["above_roof"] is True
    assert data["above_roof"] == {"count": 1, "reason": ABOVE_ROOF_REASON}
    (row,) = csv.DictReader(io.StringIO((out / "roofline.csv").read_text()))
    assert row["above_roof"] == "True" and row["note"] == ABOVE_ROOF_REASON
    # A point under its roof is not flagged.
    with open_store(str(db)) as st:
        st.save_peak(Peak(device="cpu", precision="fp32", value=1e15, unit="FLOP/s",
                           method="test", hostname=host, device_name="Test CPU"))
        st.save_peak(Peak(device="cpu", precision="bandwidth", value=1e15, unit="B/s",
                           method="test", hostname=host, device_name="Test CPU"))
        (point,) = roofline_points(st)
    assert point["above_roof"] is False and point["note"] is None


def _overlapping(boxes: list[tuple[float, float, float, float]]) -> list[tuple[int, int]]:
    return [(i, j) for i, a in enumerate(boxes) for j, b in enumerate(boxes) if i < j
            and a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]]


def test_place_labels_never_overlaps() -> None:
    anchors = [(100.0 + 3 * i, 100.0 + 2 * (i % 4)) for i in range(20)]  # a tight cluster
    sizes = [(60.0, 10.0)] * 20
    spots = place_labels(anchors, sizes, (0.0, 0.0, 600.0, 400.0))
    boxes = [(s[0], s[1], s[0] + w, s[1] + h) for s, (w, h) in zip(spots, sizes, strict=True)
             if s]
    assert len(boxes) >= 15 and _overlapping(boxes) == []
    # No room at all: a label is left unplaced (numbered by the chart), never overlapped.
    assert place_labels([(5.0, 5.0)] * 3, [(8.0, 8.0)] * 3, (0.0, 0.0, 20.0, 20.0)).count(
        None) >= 1


def test_chart_labels_do_not_overlap_with_20_points(tmp_path: Path) -> None:
    points = [
        {"label": f"matmul case number {i}", "kind": "op", "precision": "fp32",
         "intensity_flop_per_byte": 10 * (1.05 ** i), "achieved_flop_per_s": 1e10 * (1.1 ** i),
         "above_roof": i == 3}
        for i in range(20)
    ]
    roofs_ = [{"hostname": "h", "device": "cpu", "precision": "fp32", "peak_flop_per_s": 2e10,
               "peak_bytes_per_s": 1e9, "ridge_flop_per_byte": 20.0}]
    labels = plot_roofline(points, roofs_, [tmp_path / "r.png"])
    renderer = labels[0].figure.canvas.get_renderer()
    boxes = []
    for t in labels:
        e = t.get_window_extent(renderer)
        boxes.append((e.x0, e.y0, e.x1, e.y1))
    assert len(labels) == 20  # every point labelled (by name, or by number with a key)
    assert _overlapping(boxes) == []
    assert (tmp_path / "r.png").stat().st_size > 0
