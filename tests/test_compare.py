"""``accelbench compare``: ratios and bootstrap CIs against hand-computed values.

Also home of :func:`make_result`, the hand-built Result the other report tests use
where exact samples, energy or power timelines are needed (this machine has no
power sensor and no GPU).
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from accelbench.errors import AccelbenchWarning, ConfigError
from accelbench.report.compare import (
    compare,
    compare_results,
    parse_selector,
    ratios,
    to_csv,
)
from accelbench.result import EnergyReading, Result
from accelbench.spec import RunSpec
from accelbench.stats import compute_stats
from accelbench.store import open_store
from tests.conftest import run_cli

GPU = "NVIDIA A100-SXM4-40GB"


def make_result(  # noqa: PLR0913
    rid: str,
    *,
    workload: str = "resnet50",
    size: str = "paper",
    batch: int = 64,
    precision: str = "fp32",
    device: str = "cuda:0",
    gpu_name: str = GPU,
    times: Sequence[float] = (0.10, 0.11, 0.10, 0.12, 0.10),
    avg_power_w: float | None = None,
    energy_source: str = "integrated_samples",
    status: str = "ok",
    tag: str = "",
    suite: str | None = None,
    finished: str = "2026-01-01T00:00:00.000+00:00",
    timeline: dict[str, Any] | None = None,
    sample_unit: str = "image",
    framework: str = "torch",
    compile_s: float | None = None,
    started: str | None = None,
    noise_reasons: Sequence[str] = (),
    final_loss: float | None = None,
) -> Result:
    """A stored-shape Result with exact samples; energy = power x mean step time / batch.

    ``ok``, ``insufficient`` (stats without a CI) and ``diverged`` cases hold their
    times; ``noise_reasons`` flags the case noisy."""
    spec = RunSpec(workload=workload, size=size, batch_size=batch,  # type: ignore[arg-type]
                   precision=precision, device=device, tag=tag,  # type: ignore[arg-type]
                   framework=framework)  # type: ignore[arg-type]
    ok = status in ("ok", "insufficient", "diverged")
    energy: tuple[EnergyReading, ...] = ()
    if ok and avg_power_w is not None:
        mean_t = float(np.mean(times))
        energy = (EnergyReading(
            device=device, scope="gpu" if device != "cpu" else "cpu-package",
            source=energy_source,  # type: ignore[arg-type]
            energy_j=avg_power_w * mean_t * len(times), avg_power_w=avg_power_w,
            energy_j_per_sample=avg_power_w * mean_t / batch, window_s=mean_t * len(times),
            note="estimated from TDP" if energy_source == "estimate" else "",
        ),)
    elif ok:
        energy = (EnergyReading(device=device, scope="gpu", source="unavailable",
                                note="no sensor"),)
    gpus = [] if device == "cpu" else [{"device": device, "name": gpu_name,
                                         "memory_bytes": 40 * 2**30, "runtime": "CUDA 12.4"}]
    return Result(
        id=rid, spec=spec, status=status, sample_unit=sample_unit,  # type: ignore[arg-type]
        samples_per_step=batch, param_count=25_557_032,
        stats=compute_stats(times, batch, trim_fraction=0.0, stop_reason="iterations",
                            with_ci=status != "insufficient")
        if ok else None,
        iteration_times_s=tuple(times) if ok else (),
        final_loss=final_loss,
        noise={"flagged": True, "reasons": list(noise_reasons)} if noise_reasons else {},
        error=None if ok else {"oom": "CUDA out of memory (synthetic)",
                               "timeout": "worker exceeded its 900 s timeout"}.get(
                                   status, "ValueError: synthetic"),
        energy=energy, power_timeline=timeline or {}, compile_s=compile_s,
        machine={"hostname": "gpu-box", "os": "Linux 6.1", "cpu": {"model": "Test CPU"},
                 "gpus": gpus, "software": {"torch": "2.4.0", "cuda": "12.4"}},
        suite_id=suite, started_at=started or finished, finished_at=finished,
    )


# -- the statistics, by hand ------------------------------------------------------------

A_TIMES = (0.10, 0.10, 0.12)
B_FAST = (0.05, 0.05, 0.06)
B_OVERLAP = (0.10, 0.12, 0.12)


def _exact_ratio_distribution(ta: Sequence[float], tb: Sequence[float]) -> list[float]:
    """Every equally likely bootstrap ratio medA*/medB* (n = 3: 27 x 27 resamples)."""
    med_a = [float(np.median(s)) for s in itertools.product(ta, repeat=len(ta))]
    med_b = [float(np.median(s)) for s in itertools.product(tb, repeat=len(tb))]
    return sorted(a / b for a in med_a for b in med_b)


def test_throughput_ratio_and_ci_match_hand_computation() -> None:
    # medA = 0.10, medB = 0.05 at the same batch: B is exactly twice as fast.
    # Resampled medians: A is 0.10 w.p. 20/27, 0.12 w.p. 7/27 (two or more 0.12 draws);
    # B is 0.05 / 0.06 likewise. Ratios medA*/medB*: 5/3 w.p. 140/729 (19%), 2 w.p. 449/729,
    # 2.4 w.p. 140/729, so the 2.5% and 97.5% quantiles are 5/3 and 2.4.
    tput, energy = ratios(A_TIMES, 64, B_FAST, 64)
    assert tput.value == pytest.approx(2.0)
    assert tput.ci95 == pytest.approx((5 / 3, 2.4))
    assert tput.significant is True
    assert energy.value is None and "unavailable" in energy.note
    exact = _exact_ratio_distribution(A_TIMES, B_FAST)
    assert exact[int(0.025 * len(exact))] == pytest.approx(5 / 3)
    assert exact[int(0.975 * len(exact))] == pytest.approx(2.4)


def test_significance_flips_when_samples_overlap() -> None:
    # medA = 0.10, medB = 0.12: ratio 5/6. Resampled ratios: 5/6 w.p. 400/729, 1 w.p.
    # 280/729, 1.2 w.p. 49/729 (6.7% > 2.5%): the CI [5/6, 1.2] contains 1.
    tput, _ = ratios(A_TIMES, 64, B_OVERLAP, 64)
    assert tput.value == pytest.approx(0.10 / 0.12)
    assert tput.ci95 == pytest.approx((0.10 / 0.12, 1.2))
    assert tput.significant is False


def test_batch_size_enters_the_throughput_ratio() -> None:
    tput, _ = ratios((0.1,) * 5, 32, (0.1,) * 5, 64)
    assert tput.value == pytest.approx(2.0)
    assert tput.ci95 == pytest.approx((2.0, 2.0))
    assert tput.significant is True


def test_energy_ratio_and_ci() -> None:
    # Constant step times: no timing variability, so the energy CI collapses to the ratio.
    _, energy = ratios((0.1,) * 6, 64, (0.2,) * 6, 64,
                       energy_a_j_per_sample=1.0, energy_b_j_per_sample=0.5)
    assert energy.value == pytest.approx(0.5)
    assert energy.ci95 == pytest.approx((0.5, 0.5))
    assert energy.significant is True
    # Varying times: E* = E x mean(t*)/mean(t); the CI lies within what resampling allows
    # (extreme resamples: all-min or all-max times on each side) and brackets the ratio.
    ta, tb = (0.10, 0.10, 0.12), (0.20, 0.21, 0.22)
    _, energy = ratios(ta, 64, tb, 64, energy_a_j_per_sample=1.0, energy_b_j_per_sample=1.05)
    lo_bound = 1.05 * (0.20 / np.mean(tb)) / (0.12 / np.mean(ta))
    hi_bound = 1.05 * (0.22 / np.mean(tb)) / (0.10 / np.mean(ta))
    assert energy.ci95 is not None
    assert lo_bound <= energy.ci95[0] <= 1.05 <= energy.ci95[1] <= hi_bound
    assert energy.significant is False


def test_no_ci_is_invented() -> None:
    tput, energy = ratios((0.1,), 8, (0.05,), 8, energy_a_j_per_sample=2.0,
                          energy_b_j_per_sample=1.0)
    assert tput.value == pytest.approx(2.0) and tput.ci95 is None and tput.significant is None
    assert energy.value == pytest.approx(0.5) and energy.ci95 is None
    assert "no CI" in energy.note
    tput, energy = ratios((), 8, (0.05,), 8)
    assert tput.value is None and energy.value is None


def test_fixed_seed_gives_the_same_interval() -> None:
    rng = np.random.default_rng(1)
    ta, tb = rng.normal(0.1, 0.01, 50), rng.normal(0.09, 0.01, 50)
    assert ratios(ta, 8, tb, 8)[0].ci95 == ratios(ta, 8, tb, 8)[0].ci95


# -- selectors and matching -------------------------------------------------------------


def test_selector_syntax() -> None:
    s = parse_selector("precision=bf16,device=cuda:0")
    assert s.kind == "filter" and dict(s.pairs) == {"precision": "amp_bf16", "device": "cuda:0"}
    assert parse_selector("suite:quick-1").kind == "suite"
    assert parse_selector("id:ab12").value == "ab12"
    assert parse_selector("ab12").kind == "word"
    for bad in ("", "colour=red", "device=", "precision=fp8"):
        with pytest.raises(ConfigError):
            parse_selector(bad)


def test_devices_compared_case_by_case() -> None:
    a = [make_result("a1", device="cpu", times=A_TIMES, avg_power_w=100.0),
         make_result("a2", device="cpu", workload="vgg16", times=A_TIMES),
         make_result("a3", device="cpu", batch=128, times=A_TIMES)]
    b = [make_result("b1", device="cuda:0", times=B_FAST, avg_power_w=150.0),
         make_result("b2", device="cuda:0", workload="vgg16", status="oom")]
    cmp = compare_results(a, b)
    assert cmp.axes == ("device",)
    assert cmp.match_on == ("workload", "size", "batch_size", "precision", "framework")
    by_wl = {c.key["workload"]: c for c in cmp.cases}
    assert set(by_wl) == {"resnet50", "vgg16"}
    res = by_wl["resnet50"]
    assert res.throughput.value == pytest.approx(2.0)
    assert res.throughput.ci95 == pytest.approx((5 / 3, 2.4))
    # E = P x mean(t) / batch on each side.
    expected = (150.0 * np.mean(B_FAST)) / (100.0 * np.mean(A_TIMES))
    assert res.energy.value == pytest.approx(expected)
    assert res.energy_kind == "measured"
    assert by_wl["vgg16"].throughput.value is None
    assert "B is oom" in by_wl["vgg16"].throughput.note
    assert len(cmp.only_a) == 1 and cmp.only_a[0]["batch_size"] == 128


DAY1 = "2026-01-01T00:00:00.000+00:00"
DAY3 = "2026-01-03T00:00:00.000+00:00"


def test_pairs_from_one_suite_when_both_sides_have_one() -> None:
    # A newer fp32 run exists (a_new), but only a_s1 shares a suite with a B run.
    a = [make_result("a_s1", times=A_TIMES, suite="s1", finished=DAY1),
         make_result("a_new", times=(1.0, 1.0, 1.0), suite="s2", finished=DAY3)]
    b = [make_result("b_s1", precision="amp_fp16", times=B_FAST, suite="s1",
                     finished="2026-01-01T00:10:00.000+00:00"),
         make_result("b_new", precision="amp_fp16", times=(2.0, 2.0, 2.0), finished=DAY3)]
    cmp = compare_results(a, b)
    assert cmp.axes == ("precision",)
    case = cmp.cases[0]
    assert (case.a.id, case.b.id) == ("a_s1", "b_s1")
    assert case.throughput.value == pytest.approx(2.0)
    assert case.pairing.method == "same_suite" and case.pairing.text == "same suite"
    assert case.pairing.time_apart_s == pytest.approx(600.0)
    doc = case.to_dict()
    assert (doc["pairing"], doc["a_suite_id"], doc["b_suite_id"]) == ("same_suite", "s1", "s1")
    assert doc["a_started_at"] == DAY1
    assert any("paired within one suite" in n for n in cmp.notes)


def test_without_a_common_suite_the_closest_runs_in_time_pair() -> None:
    # b1 ran an hour after a_late and two days after a_early: a_late is its pair, though
    # a_early is the one in the same (absent) suite position and newer B runs do not exist.
    a = [make_result("a_early", times=(1.0, 1.0, 1.0), finished=DAY1, suite="x"),
         make_result("a_late", times=A_TIMES, finished=DAY3, suite="y")]
    b = [make_result("b1", precision="amp_bf16", times=B_FAST,
                     finished="2026-01-03T01:00:00.000+00:00", suite="z")]
    case = compare_results(a, b).cases[0]
    assert (case.a.id, case.b.id) == ("a_late", "b1")
    assert case.pairing.method == "closest_in_time"
    assert case.pairing.time_apart_s == pytest.approx(3600.0)
    assert case.pairing.text == "1.0 h apart"
    assert "closest in time" in case.pairing.detail and "y" in case.pairing.detail
    # One candidate a side: "only", still with the time apart shown.
    only = compare_results(a[1:], b).cases[0]
    assert only.pairing.method == "only" and only.pairing.time_apart_s == pytest.approx(3600.0)


def test_noisy_input_warns_and_can_be_excluded() -> None:
    quiet = make_result("quiet", times=A_TIMES, finished=DAY1)
    noisy = make_result("noisy", precision="amp_bf16", times=B_FAST, finished=DAY1,
                        noise_reasons=("load average 3.1 on 2 CPUs during the case",))
    with pytest.warns(AccelbenchWarning, match=r"1 compared result\(s\) are noisy.*noisy "
                      r"\(load average 3.1"):
        cmp = compare_results([quiet], [noisy])
    assert cmp.cases[0].noisy and cmp.cases[0].to_dict()["b_noisy"] is True
    # Excluded: no case left, nothing to warn about, and the exclusion is said.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cmp = compare_results([quiet], [noisy], exclude_noisy=True)
    assert cmp.cases == () and cmp.excluded_noisy == ("noisy",)
    assert any("--exclude-noisy: left out 1" in n for n in cmp.notes)
    # A quiet alternative of the same case is used instead of the noisy one.
    alt = make_result("alt", precision="amp_bf16", times=B_FAST, finished=DAY3)
    cmp = compare_results([quiet], [noisy, alt], exclude_noisy=True)
    assert [c.b.id for c in cmp.cases] == ["alt"]


def test_insufficient_and_diverged_runs_get_no_ratio() -> None:
    a = [make_result("a1", times=A_TIMES), make_result("a2", workload="vgg16", times=A_TIMES)]
    b = [make_result("b1", precision="amp_bf16", times=(0.05, 0.06), status="insufficient"),
         make_result("b2", precision="amp_bf16", workload="vgg16", times=B_FAST,
                     status="diverged", final_loss=float("nan"))]
    with pytest.warns(AccelbenchWarning, match="no usable measurement"):
        cmp = compare_results(a, b)
    notes = {c.key["workload"]: c.throughput.note for c in cmp.cases}
    assert notes == {"resnet50": "B is insufficient", "vgg16": "B is diverged"}
    assert all(c.throughput.value is None and c.energy.value is None for c in cmp.cases)
    # An ok run of the same case is preferred over an insufficient one.
    ok = make_result("b3", precision="amp_bf16", times=B_FAST)
    cmp = compare_results(a[:1], [b[0], ok])
    assert cmp.cases[0].b.id == "b3" and cmp.cases[0].throughput.value == pytest.approx(2.0)


def test_no_ci_from_two_iterations() -> None:
    tput, _ = ratios((0.1, 0.11), 8, (0.05, 0.06, 0.05), 8)
    assert tput.value is not None and tput.ci95 is None and tput.significant is None
    assert "fewer than 3 iterations" in tput.note


@pytest.fixture
def cmp_store(tmp_path: Path) -> Path:
    path = tmp_path / "cmp.db"
    with open_store(str(path)) as st:
        st.save(make_result("aaaa01", device="cpu", times=A_TIMES, avg_power_w=100.0,
                            suite="s-old"))
        st.save(make_result("bbbb01", device="cuda:0", times=B_FAST, avg_power_w=150.0,
                            energy_source="estimate", suite="s-new"))
        st.save(make_result("bbbb02", device="cuda:0", workload="lstm", times=B_OVERLAP,
                            sample_unit="sentence", suite="s-new"))
    return path


def test_store_selectors(cmp_store: Path) -> None:
    with open_store(str(cmp_store)) as st:
        by_device = compare(st, "device=cpu", "device=cuda:0")
        by_suite = compare(st, "s-old", "suite:s-new")
        by_id = compare(st, "aaaa", "id:bbbb01")
        assert [c.throughput.value for c in by_device.cases] == pytest.approx([2.0])
        assert [c.b.id for c in by_suite.cases] == ["bbbb01"]
        assert [c.b.id for c in by_id.cases] == ["bbbb01"]
        assert by_device.cases[0].energy_kind == "estimated"
        with pytest.raises(ConfigError, match="ambiguous"):
            compare(st, "aaaa", "bbbb")
        with pytest.raises(ConfigError, match="neither a suite id nor a result id"):
            compare(st, "zzzz", "bbbb01")


def test_cli_json_csv_and_table(cmp_store: Path) -> None:
    proc = run_cli("compare", "device=cpu", "device=cuda:0", "--json", db=cmp_store)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["axes"] == ["device"]
    case = doc["cases"][0]
    assert case["throughput_ratio"] == pytest.approx(2.0)
    assert case["throughput_ratio_ci95"] == pytest.approx([5 / 3, 2.4])
    # One run a side: the within-run CI excludes 1, but that supports no claim.
    assert case["throughput_significant"] is None
    assert "R = 1 on A and B" in case["throughput_note"]
    assert (case["a_repeats"], case["b_repeats"]) == (1, 1)
    assert case["energy_kind"] == "estimated"

    proc = run_cli("compare", "device=cpu", "device=cuda:0", "--csv", db=cmp_store)
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert float(rows[0]["throughput_ratio_ci95_low"]) == pytest.approx(5 / 3)
    assert rows[0]["throughput_significant"] == ""

    proc = run_cli("compare", "device=cpu", "device=cuda:0", db=cmp_store)
    assert proc.returncode == 0
    assert "2.000 [1.667, 2.400]" in proc.stdout and "can't tell" in proc.stdout
    assert "--repeats 3" in proc.stdout
    assert "matched on: workload, size, batch_size, precision" in proc.stdout
    assert "compared: device: cpu (A) vs cuda:0 (B), named by the selectors" in proc.stdout

    proc = run_cli("compare", "device=cpu", "device=mps", db=cmp_store)
    assert proc.returncode == 2 and "no results match" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_csv_of_a_case_without_ratio() -> None:
    cmp = compare_results([make_result("a", device="cpu")],
                          [make_result("b", status="oom")])
    row = next(csv.DictReader(io.StringIO(to_csv(cmp))))
    assert row["throughput_ratio"] == "" and row["b_status"] == "oom"


def test_framework_is_an_axis_of_comparison(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "r.db")) as st:
        for fw, times in (("torch", (0.2, 0.21, 0.2, 0.22, 0.2)), ("jax", (0.1, 0.1, 0.11, 0.1))):
            for prec in ("fp32", "amp_bf16"):
                st.save(make_result(f"{fw}-{prec}", precision=prec, framework=fw, times=times,
                                    avg_power_w=200.0))
        cmp = compare(st, "framework=torch", "framework=jax")
        by_prec = {c.key["precision"]: c for c in cmp.cases}
    assert cmp.axes == ("framework",) and "framework" not in cmp.match_on
    assert set(by_prec) == {"fp32", "amp_bf16"}  # matched per precision, not across
    for case in by_prec.values():
        assert case.a.spec.framework == "torch" and case.b.spec.framework == "jax"
        assert case.throughput.value == pytest.approx(2.0, rel=0.1)
        assert case.throughput.ci95 is not None and case.throughput.ci95[0] > 1
        assert case.throughput.significant is None  # one run a side: cannot tell
        assert case.energy.value is not None and case.energy.value < 1
    with pytest.raises(ConfigError, match="unknown framework"):
        parse_selector("framework=mxnet")


def test_cli_pairing_noisy_warning_and_narrow_table(tmp_path: Path) -> None:
    db = tmp_path / "noisy.db"
    with open_store(str(db)) as st:
        st.save(make_result("quiet01", times=A_TIMES, suite="s-1", finished=DAY1))
        st.save(make_result("noisy01", precision="amp_bf16", times=B_FAST, suite="s-1",
                            finished=DAY1, noise_reasons=("another process used 80% CPU",)))
        st.save(make_result("later01", precision="amp_bf16", times=(1.0,) * 5, finished=DAY3))
    proc = run_cli("compare", "precision=fp32", "precision=amp_bf16", db=db,
                   COLUMNS="80", TERM="dumb")
    assert proc.returncode == 0, proc.stderr
    # The warning names the noisy run and the way out; the table marks it and says the
    # pair came from one suite, not the newer run of another day.
    assert "noisy" in proc.stderr and "--exclude-noisy" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert "same suite" in proc.stdout and "2.000 [1.667, 2.400]" in proc.stdout
    assert "!" in proc.stdout
    proc = run_cli("compare", "precision=fp32", "precision=amp_bf16", "--exclude-noisy",
                   "--json", db=db)
    assert proc.returncode == 0, proc.stderr
    assert "noisy" not in proc.stderr
    doc = json.loads(proc.stdout, parse_constant=_refuse)
    case = doc["cases"][0]
    assert (case["b_id"], case["pairing"]) == ("later01", "only")
    assert doc["excluded_noisy"] == ["noisy01"]
    proc = run_cli("compare", "precision=fp32", "precision=amp_bf16", "--wide", db=db)
    assert "suite s-1" in proc.stdout and "quiet01 / noisy01" in proc.stdout


def test_compare_table_fits_80_columns() -> None:
    from rich.console import Console

    from accelbench.report.compare import table

    a = [make_result(f"a{i}", workload=wl, times=A_TIMES, avg_power_w=200.0, suite="s")
         for i, wl in enumerate(("inception_v3", "deepspeech2", "transformer"))]
    b = [make_result(f"b{i}", workload=wl, precision="amp_bf16", times=B_FAST, suite="s",
                     avg_power_w=210.0, energy_source="estimate",
                     noise_reasons=("load",) if i == 0 else ())
         for i, wl in enumerate(("inception_v3", "deepspeech2", "transformer"))]
    with pytest.warns(AccelbenchWarning):
        cmp = compare_results(a, b)
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(table(cmp))
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= 80
    text = "\n".join(lines)
    assert "\u2026" not in text
    assert text.count("2.000 [1.667, 2.400]") == 3 and "same suite" in text
    assert "inception_v3" in text and "10,240" not in text


def test_phase_tables_fit_80_columns_and_say_why_a_ratio_is_missing() -> None:
    """--phases on both sides: one table a case, every ratio with its bounds, 80 columns."""
    from rich.console import Console

    from accelbench.report.compare.render import phase_tables
    from tests.phase_records import make_phases, with_phases

    a = [with_phases(make_result(f"a{i}", workload=wl, avg_power_w=250.0),
                     make_phases(optimizer_energy="measured", communication_s=0.01))
         for i, wl in enumerate(("inception_v3", "deepspeech2"))]
    b = [with_phases(make_result(f"b{i}", workload=wl, precision="amp_bf16",
                                 avg_power_w=250.0, times=B_FAST),
                     make_phases(forward_s=0.015, backward_s=0.03, step_s=0.05, scale_j=0.5,
                                 communication_s=0.01))
         for i, wl in enumerate(("inception_v3", "deepspeech2"))]
    cmp = compare_results(a, b)
    tables, lines = phase_tables(cmp)
    assert len(tables) == 2
    console = Console(width=80, record=True, file=io.StringIO())
    for t in tables:
        console.print(t)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80 and "\u2026" not in text
    # forward: 15/30 ms of the same batch, bounds from the CIs (0.98-1.02 of each side).
    assert text.count("0.500") >= 4 and "0.48-0.52" in text
    # The optimizer's energy on B is indistinguishable from 0, communication's is
    # negative on both sides: no ratio, said so.
    assert "B \u22480" in text and "neg. both" in text
    assert lines[0].startswith("phases: B/A per sample")


def _refuse(name: str) -> None:
    raise ValueError(f"non-standard JSON constant {name}")


def test_fast_paths_and_device_settings_are_other_cases() -> None:
    """A compiled step or a sweep's power limit is another case: compared across devices, it
    pairs only with its like, and the plain comparison keeps its match fields."""
    import dataclasses

    from accelbench.spec import DeviceSettings, FastPaths

    def variant(r: Result, **spec_changes: Any) -> Result:
        return dataclasses.replace(r, id=r.id + "v",
                                   spec=dataclasses.replace(r.spec, **spec_changes))

    plain_a = make_result("a1", device="cpu", times=A_TIMES)
    plain_b = make_result("b1", device="cuda:0", times=B_FAST)
    compiled_b = variant(make_result("b2", device="cuda:0", times=A_TIMES),
                         fast_paths=FastPaths(compile=True))
    capped_b = variant(make_result("b3", device="cuda:0", times=A_TIMES),
                       settings=DeviceSettings(power_limit_w=200.0))
    cmp = compare_results([plain_a], [compiled_b, capped_b, plain_b])
    assert cmp.match_on[-2:] == ("fast_paths", "settings")
    paired = [c for c in cmp.cases if c.a is not None and c.b is not None]
    assert [(c.a.id, c.b.id) for c in paired] == [("a1", "b1")]  # only the plain twin
    assert paired[0].throughput.value == pytest.approx(2.0)
    unpaired = {(k["fast_paths"], k["settings"]) for k in cmp.only_b}
    assert unpaired == {("compile", ""), ("", "power_limit_w=200")}
    assert compare_results([plain_a], [plain_b]).match_on == (
        "workload", "size", "batch_size", "precision", "framework")
