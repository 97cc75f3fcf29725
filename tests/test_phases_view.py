"""What shows the phases of a record (``--phases``): ``run``'s summary table and ``--json``,
``results``, ``compare`` and the exports, read by the real CLI from a real SQLite store
holding records with phases of every energy status (tests/phase_records.py)."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from accelbench.phase_summary import PHASE_EXPORT_COLUMNS, export_values, summary_entries
from accelbench.phase_text import energy_text, notes, shares_cell, sum_line
from accelbench.phases import Difference, Phase
from accelbench.render import print_result
from accelbench.report.compare.phases import compare_phases, phase_ratio
from accelbench.store import open_store
from tests.conftest import run_cli
from tests.phase_records import make_phases, with_phases
from tests.test_compare import make_result


def _printed(result: object, width: int = 160) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    print_result(console, result)  # type: ignore[arg-type]
    return console.export_text()


# -- run's summary ----------------------------------------------------------------------


def test_run_summary_shows_each_phase_and_every_energy_status() -> None:
    r = with_phases(make_result("ph1", avg_power_w=250.0), make_phases(communication_s=0.012))
    text = _printed(r)
    table = text[text.index("phases "):]
    lines = {line.split()[0]: line for line in table.splitlines()[1:] if line.strip()}
    # ms/step with its CI and its share of the phases' sum (30 of 110 ms).
    assert "30.0 [29.4, 30.6]" in lines["forward"] and "27.3%" in lines["forward"]
    assert "54.5%" in lines["backward"]
    # Energy per sample = J per step / 64 samples: 7.2 J -> 0.1125 J [0.108, 0.117].
    assert "0.113 J [0.108, 0.117]" in lines["forward"]
    assert "indistinguishable from 0 (CI -0.00625..0.0156 J)" in lines["optimizer"]
    assert "negative: -0.0125 J" in lines["communication"]
    assert "unavailable: outside the measured step" in lines["input"]
    # The direct/differential disagreement is marked, and said in words.
    assert "\u2260" in lines["optimizer"] and "\u2260" not in lines["forward"]
    assert "optimizer: direct 8.00 ms vs differential 10.4 ms" in table
    # The sum check: 30 + 60 + 8 + 12 = 110 ms of 100 ms (+10.0%, within the tolerance).
    assert "forward + backward + optimizer + communication = 110 ms of the 100 ms step " \
        "(+10.0%)" in table and "outside" not in table.split("(+10.0%)")[1].splitlines()[0]
    assert "communication energy is negative, shown as measured, never clipped: step " \
        "without no_sync" in table


def test_run_summary_says_why_energy_is_unavailable_and_when_the_sum_is_off() -> None:
    cpu = with_phases(make_result("cpu1", device="cpu"),
                      make_phases(energy=False, forward_s=0.04, backward_s=0.09))
    text = _printed(cpu)
    table = text[text.index("phases "):]
    forward = next(line for line in table.splitlines() if line.strip().startswith("forward"))
    assert forward.rstrip().endswith("unavailable")
    # The record's one reason is said once, not in every row.
    assert table.count("no power sensor readable here") == 1
    assert "= 138 ms of the 100 ms step (+38.0%), outside \u00b110%" in table
    # Without phases nothing is printed about them.
    assert "phases" not in _printed(make_result("plain"))


def test_energy_text_never_clips_a_difference() -> None:
    ph = make_phases()
    zero = Phase(name="optimizer", time_s=0.008,
                 energy=Difference(value=-0.2, ci95=(-0.9, 0.5), status="indistinguishable"))
    assert energy_text(zero, ph, 1) == "indistinguishable from 0 (CI -0.9..0.5 J)"
    neg = Phase(name="communication", time_s=0.01,
                energy=Difference(value=-1.5, ci95=(-2.0, -1.0), status="negative"))
    assert energy_text(neg, ph, 2) == "negative: -0.75 J (CI -1..-0.5)"
    none = Phase(name="forward", time_s=0.01, energy=None)
    assert energy_text(none, make_phases(energy=False), 1) == "unavailable"
    # The sensors' 95% bound beside the J (issue 44), or why there is none.
    bounded = Phase(name="forward", time_s=0.03, energy=Difference(
        value=7.2, ci95=(6.9, 7.5), status="measured", rel_95=0.021))
    assert energy_text(bounded, ph, 2) == "3.6 J +- 2.1% [3.45, 3.75]"
    unbounded = Phase(name="forward", time_s=0.03, energy=Difference(
        value=7.2, ci95=(6.9, 7.5), status="measured", bound_note="error bound unavailable: x"))
    assert energy_text(unbounded, ph, 1) == "7.2 J (error bound unavailable) [6.9, 7.5]"
    assert energy_text(none, ph, 1) == "unavailable"


def test_sum_line_and_notes_follow_the_record() -> None:
    ph = make_phases(input_s=None)  # 30 + 60 + 8 = 98 of 100
    assert sum_line(ph) == "forward + backward + optimizer = 98.0 ms of the 100 ms step (-2.0%)"
    r = with_phases(make_result("n1"), ph)
    assert notes(r) == [sum_line(ph), "optimizer: direct 8.00 ms vs differential 10.4 ms "
                        "(\u2260: their CIs do not overlap)"]
    # The record's own note on the disagreement replaces the generic line, said once.
    own = ("optimizer: direct 8 ms vs differential 10.4 ms, CIs apart (the direct pass "
           "waits for the device at each boundary)")
    r = with_phases(make_result("n1"), make_phases(input_s=None, notes=(own,)))
    assert notes(r) == [sum_line(ph), own]
    assert shares_cell(r) == "fwd 31%\nbwd 61%\nopt 8%"  # of 98 ms
    assert shares_cell(make_result("n2")) == "-"


def test_json_summary_has_a_flat_object_per_phase() -> None:
    r = with_phases(make_result("j1", avg_power_w=250.0), make_phases(communication_s=0.012))
    s = r.summary()
    assert list(s["phases"]) == ["input", "forward", "backward", "optimizer", "communication"]
    fwd = s["phases"]["forward"]
    assert fwd["time_s"] == 0.030 and fwd["share"] == pytest.approx(0.30 / 1.10)
    assert fwd["energy_j"] == 7.2 and fwd["energy_j_per_sample"] == pytest.approx(7.2 / 64)
    assert fwd["energy_status"] == "measured" and fwd["agrees"] is True
    assert s["phases"]["optimizer"]["energy_status"] == "indistinguishable"
    assert s["phases"]["optimizer"]["energy_ci95_j_per_sample"][0] < 0  # kept, not clipped
    assert s["phases"]["communication"]["energy_j"] == -0.8
    assert s["phases"]["input"]["in_step"] is False
    assert s["phases_sum_rel_diff"] == pytest.approx(0.10)
    assert summary_entries(None, 64) == {"phases": None, "phases_sum_rel_diff": None,
                                         "phases_notes": []}
    assert make_result("j2").summary()["phases"] is None


def test_export_values_cover_every_phase_column() -> None:
    values = export_values(make_phases(communication_s=0.012))
    assert set(values) == set(PHASE_EXPORT_COLUMNS)
    assert values["phase_backward_s"] == 0.060 and values["phase_backward_energy_j"] == 15.6
    assert values["phase_optimizer_energy_status"] == "indistinguishable"
    assert values["phase_communication_energy_status"] == "negative"
    assert values["phase_input_energy_j"] is None
    assert values["phase_input_energy_status"] == "unavailable"
    assert export_values(make_phases())["phase_communication_s"] is None
    assert all(v is None for v in export_values(None).values())


# -- compare's per-phase ratios ----------------------------------------------------------


def test_phase_ratio_by_hand() -> None:
    pa = Phase(name="backward", time_s=0.060, time_ci95_s=(0.058, 0.062),
               energy=Difference(value=16.0, ci95=(15.0, 17.0), status="measured"))
    pb = Phase(name="backward", time_s=0.030, time_ci95_s=(0.029, 0.031),
               energy=Difference(value=8.0, ci95=(7.0, 9.0), status="measured"))
    r = phase_ratio(pa, pb, 64, 64)
    assert r.time_ratio == pytest.approx(0.5)
    assert r.time_bounds == pytest.approx((0.029 / 0.062, 0.031 / 0.058))
    assert r.time_change == "faster"
    assert r.energy_ratio == pytest.approx(0.5)
    assert r.energy_bounds == pytest.approx((7.0 / 17.0, 9.0 / 15.0))
    assert r.energy_change == "cheaper"
    # Overlapping CIs: no clear change; per sample: twice the batch, same time per step
    # is half the time per sample.
    same = phase_ratio(pa, pa, 64, 64)
    assert same.time_change == same.energy_change == "no clear change"
    assert phase_ratio(pa, pa, 64, 128).time_ratio == pytest.approx(0.5)
    # An energy indistinguishable from zero on a side gives no energy ratio, and says so.
    zero = Phase(name="backward", time_s=0.060, time_ci95_s=(0.058, 0.062),
                 energy=Difference(value=0.1, ci95=(-0.5, 0.7), status="indistinguishable"))
    r = phase_ratio(pa, zero, 64, 64)
    assert r.energy_ratio is None and r.energy_change == ""
    assert r.note == "B's energy indistinguishable from 0"


def test_phase_energy_ratio_bounds_widen_by_each_sides_error_bound() -> None:
    """A: 16 J +- 10%, B: 8 J +- 5%: the CI-based bounds (7/17, 9/15) widened as worst
    cases to (7/17 x 0.95 / 1.10, 9/15 x 1.05 / 0.90); a verdict reads the widened ones;
    a side without a bound leaves them as they were and says so."""
    pa = Phase(name="backward", time_s=0.060, time_ci95_s=(0.058, 0.062),
               energy=Difference(value=16.0, ci95=(15.0, 17.0), status="measured", rel_95=0.10))
    pb = Phase(name="backward", time_s=0.030, time_ci95_s=(0.029, 0.031),
               energy=Difference(value=8.0, ci95=(7.0, 9.0), status="measured", rel_95=0.05))
    r = phase_ratio(pa, pb, 64, 64)
    assert r.energy_bounds == pytest.approx((7 / 17 * 0.95 / 1.10, 9 / 15 * 1.05 / 0.90))
    assert r.energy_change == "cheaper" and r.note == ""
    # B at 12 J (11.5-12.5) against A's 15-17: cheaper on the CIs (upper 12.5 / 15 =
    # 0.83) and with A's 10% (0.97), not with A's 40% (1.46).
    loose = dataclasses.replace(pa, energy=dataclasses.replace(pa.energy, rel_95=0.40))
    near = dataclasses.replace(pb, energy=Difference(value=12.0, ci95=(11.5, 12.5),
                                                    status="measured", rel_95=0.05))
    assert phase_ratio(pa, near, 64, 64).energy_change == "cheaper"
    assert phase_ratio(loose, near, 64, 64).energy_change == "no clear change"
    old = dataclasses.replace(pb, energy=dataclasses.replace(pb.energy, rel_95=None))
    r = phase_ratio(pa, old, 64, 64)
    assert r.energy_bounds == pytest.approx((7.0 / 17.0, 9.0 / 15.0))
    assert r.note == ("energy error bound unavailable on B: the energy bounds cover timing "
                      "noise only")


def test_compare_phases_needs_both_sides() -> None:
    a = with_phases(make_result("a"))
    assert compare_phases(make_result("x"), make_result("y")) is None
    one = compare_phases(a, make_result("b"))
    assert one is not None and not one.available and one.note.startswith("B has no phases")
    both = compare_phases(a, with_phases(make_result("c"), make_phases(communication_s=0.01)))
    assert both is not None and both.available
    assert [r.phase for r in both.ratios] == ["input", "forward", "backward", "optimizer"]
    assert both.note == "communication only in B"


# -- the CLI on a real store -------------------------------------------------------------


@pytest.fixture(scope="module")
def phase_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("phview") / "ph.db"
    with open_store(str(db)) as st:
        # fp32 and amp_bf16 of resnet50 on one GPU, both with phases: bf16 halves the
        # forward and backward time, and every measured phase energy; the optimizer's
        # time is unchanged.
        st.save(with_phases(make_result("fp32ph", avg_power_w=250.0, suite="s1"),
                            make_phases(optimizer_energy="measured")))
        st.save(with_phases(
            make_result("bf16ph", precision="amp_bf16", avg_power_w=260.0, suite="s1",
                        times=(0.06, 0.061, 0.06, 0.062, 0.06)),
            make_phases(forward_s=0.015, backward_s=0.030, optimizer_s=0.008, step_s=0.06,
                        scale_j=0.5, optimizer_energy="measured")))
        # vgg16: only the bf16 side has phases.
        st.save(make_result("vggfp32", workload="vgg16", avg_power_w=250.0, suite="s1"))
        st.save(with_phases(make_result("vggbf16", workload="vgg16", precision="amp_bf16",
                                        avg_power_w=250.0, suite="s1")))
    return db


def test_compare_cli_names_the_phases_a_change_made_faster_and_cheaper(
    phase_store: Path,
) -> None:
    proc = run_cli("compare", "precision=fp32", "precision=amp_bf16", "--json", db=phase_store)
    assert proc.returncode == 0, proc.stderr
    cases = {c["workload"]: c for c in json.loads(proc.stdout)["cases"]}
    ph = cases["resnet50"]["phases"]
    assert ph["available"] is True
    assert ph["faster"] == ["forward", "backward"]
    assert ph["cheaper"] == ["forward", "backward", "optimizer"]
    assert ph["slower"] == [] and ph["costlier"] == []
    by = {r["phase"]: r for r in ph["ratios"]}
    assert by["forward"]["time_ratio"] == pytest.approx(0.5)
    assert by["backward"]["energy_ratio"] == pytest.approx(0.5)
    assert by["optimizer"]["time_change"] == "no clear change"
    assert by["input"]["energy_ratio"] is None
    assert by["input"]["note"] == "energy unavailable on both sides"
    vgg = cases["vgg16"]["phases"]
    assert vgg["available"] is False and vgg["note"].startswith("A has no phases")

    table = run_cli("compare", "precision=fp32", "precision=amp_bf16", db=phase_store,
                    COLUMNS="160")
    assert table.returncode == 0, table.stderr
    out = table.stdout.splitlines()
    assert "phases of resnet50 paper bs=64 cuda:0 (B/A)" in table.stdout
    at = next(i for i, line in enumerate(out) if line.split()[:1] == ["forward"])
    assert "0.500" in out[at] and "faster" in out[at] and "cheaper" in out[at + 1]
    assert "phases: vgg16 paper bs=64 cuda:0: A has no phases (measure it with --phases)" \
        in table.stdout

    rows = list(csv.DictReader(io.StringIO(run_cli(
        "compare", "precision=fp32", "precision=amp_bf16", "--csv", db=phase_store).stdout)))
    res = next(r for r in rows if r["workload"] == "resnet50")
    assert float(res["phase_forward_time_ratio"]) == pytest.approx(0.5)
    assert res["phase_communication_time_ratio"] == ""
    vgg_row = next(r for r in rows if r["workload"] == "vgg16")
    assert vgg_row["phases_note"].startswith("A has no phases")


def test_results_shows_which_records_have_phases(phase_store: Path) -> None:
    wide = run_cli("results", "--wide", db=phase_store, COLUMNS="250")
    assert wide.returncode == 0, wide.stderr
    assert "phases" in wide.stdout
    lines = wide.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if "fp32ph" in line)
    # Shares of the in-step phases' 98 ms.
    assert [s for s in ("fwd 31%", "bwd 61%", "opt 8%") if s in "".join(lines[at:at + 3])] \
        == ["fwd 31%", "bwd 61%", "opt 8%"]
    assert "fwd" not in "".join(lines[i] for i, line in enumerate(lines) if "vggfp32" in line)
    rows = {r["id"]: r for r in csv.DictReader(io.StringIO(
        run_cli("results", "--csv", db=phase_store).stdout))}
    assert float(rows["fp32ph"]["phase_forward_s"]) == 0.030
    assert rows["fp32ph"]["phase_optimizer_energy_status"] == "measured"
    assert rows["vggfp32"]["phase_forward_s"] == ""
    listed = {r["id"]: r for r in json.loads(run_cli("results", "--json", db=phase_store).stdout)}
    assert listed["bf16ph"]["phases"]["forward"]["time_s"] == 0.015
    assert listed["vggfp32"]["phases"] is None


def test_export_carries_the_phases(phase_store: Path, tmp_path: Path) -> None:
    rows = {r["result_id"]: r for r in csv.DictReader(io.StringIO(
        run_cli("export", "--format", "csv", db=phase_store).stdout))}
    assert float(rows["bf16ph"]["phase_backward_s"]) == 0.030
    assert float(rows["bf16ph"]["phase_backward_energy_j"]) == pytest.approx(7.8)
    assert rows["bf16ph"]["phase_input_energy_status"] == "unavailable"
    assert rows["vggfp32"]["phase_backward_s"] == ""
    out = tmp_path / "x.json"
    proc = run_cli("export", "--format", "json", "--out", str(out), db=phase_store)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    rec = next(r for r in doc["records"] if r["id"] == "fp32ph")
    assert [p["name"] for p in rec["phases"]["phases"]] == ["input", "forward", "backward",
                                                             "optimizer"]
    assert rec["phases"]["phases"][3]["energy"]["status"] == "measured"
    case = next(c for c in doc["cases"] if c["result_id"] == "fp32ph")
    assert case["phase_forward_energy_status"] == "measured"
    assert case["phases_sum_rel_diff"] == pytest.approx(-0.02)
