"""Every CI says what it covers (one run's iterations, or R runs), a CI wider than its
estimate is shown as unreliable, and a ``compare`` row's columns divide to its ratio.

Results are built with exact step times (tests/test_compare.py ``make_result``) and
stored in real SQLite files; the CLI runs as a real subprocess. One short real ``run``
checks the summary's wording and the between-run spread from the store.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
import socket
from collections.abc import Sequence
from pathlib import Path

import pytest
from rich.console import Console

from accelbench import api
from accelbench.cli.run import group_summary
from accelbench.render import fmt_rate
from accelbench.report.compare import compare_results, table
from accelbench.report.export import export
from accelbench.report.rows import case_row, ci_text
from accelbench.result import Result
from accelbench.spec import MeasurementPolicy
from accelbench.store import open_store
from tests.conftest import run_cli
from tests.test_compare import make_result

#: Two fast steps and three slow ones: the median is a slow step, and the bootstrap CI
#: of the throughput reaches the fast steps' rate, far wider than the estimate.
WILD = (0.01, 0.01, 5.0, 5.0, 5.0)
STEADY = (0.10, 0.11, 0.10, 0.12, 0.10)


def _with_repeats(r: Result, repeats: int) -> Result:
    return dataclasses.replace(r, spec=dataclasses.replace(
        r.spec, policy=MeasurementPolicy(repeats=repeats)))


def test_a_ci_wider_than_its_estimate_is_shown_as_unreliable(tmp_path: Path) -> None:
    wild = make_result("wild0001", device="cpu", times=WILD)
    assert wild.stats is not None and wild.stats.ci_rel_halfwidth is not None
    assert wild.stats.ci_rel_halfwidth > 1.0  # the premise: half-width > the estimate
    db = tmp_path / "r.db"
    with open_store(str(db)) as st:
        st.save(wild)
        st.save(make_result("calm0001", device="cpu", workload="lstm", times=STEADY))
    before = db.read_bytes()

    narrow = run_cli("results", db=db, COLUMNS="80", TERM="dumb")
    assert narrow.returncode == 0, narrow.stderr
    assert "unrel." in narrow.stdout and "CI wider than the estimate" in narrow.stdout
    assert max(len(line) for line in narrow.stdout.splitlines()
               if "result(s) in" not in line) <= 80
    wide = run_cli("results", "--wide", db=db, COLUMNS="250", TERM="dumb")
    assert "unreliable (5 iterations)" in wide.stdout
    # No percentage of thousands anywhere: the calm case keeps its +-x%, the wild none.
    assert not re.search(r"\d{3,}%", narrow.stdout + wide.stdout)
    assert re.search(r"\u00b1\d+(\.\d+)?%", narrow.stdout)

    doc = {r["id"]: r for r in json.loads(run_cli("results", "--json", db=db).stdout)}
    assert doc["wild0001"]["ci_unreliable"] is True
    assert doc["wild0001"]["samples_per_s_ci95"] is not None  # the numbers stay
    assert doc["calm0001"]["ci_unreliable"] is False
    assert db.read_bytes() == before  # reading changed nothing

    # Report rows and export say the same.
    assert case_row(wild).ci_unreliable and case_row(wild).ci_text == \
        "unreliable (5 iterations)"
    assert ci_text(0.031, 5) == "\u00b13.1%" and ci_text(1.5, 7) == "unreliable (7 iterations)"
    text, _ = export([wild], "csv", None)
    assert text is not None
    row = next(csv.DictReader(io.StringIO(text)))
    assert row["ci_unreliable"] == "True" and row["ci_scope"] == "iterations of 1 run"


def test_report_summary_legend_and_unreliable_cell() -> None:
    from accelbench.report.html import ci_legend
    from accelbench.report.sections import summary_row

    rows = [case_row(make_result("wild0001", device="cpu", times=WILD)),
            case_row(make_result("calm0001", device="cpu", workload="lstm", times=STEADY))]
    legend = ci_legend(rows)
    assert any("one run's iterations only" in line for line in legend)
    assert any(line.startswith("unreliable (n iterations)") for line in legend)
    assert summary_row(rows[0], None, "")["ci"] == "unreliable (5 iterations)"
    assert "\u2013" in summary_row(rows[1], None, "")["ci"]
    assert ci_legend(rows[1:])[1:] == []  # no unreliable row: no such legend line


@pytest.mark.parametrize("repeats", [1, 3])
def test_scope_field_and_table_marker(tmp_path: Path, repeats: int) -> None:
    runs = [_with_repeats(make_result(f"run{i:05d}", device="cpu", suite="s-1",
                                      times=tuple(t * (1 + 0.05 * i) for t in STEADY),
                                      finished=f"2026-01-01T00:0{i}:00.000+00:00"), repeats)
            for i in range(repeats)]
    db = tmp_path / "r.db"
    with open_store(str(db)) as st:
        for r in runs:
            st.save(r)
    doc = json.loads(run_cli("results", "--json", db=db).stdout)
    assert [r["ci_scope"] for r in doc] == ["iterations of 1 run"] * repeats
    narrow = run_cli("results", db=db, COLUMNS="80", TERM="dumb").stdout
    wide = run_cli("results", "--wide", db=db, COLUMNS="250", TERM="dumb").stdout
    assert "\u00b1CI*" in narrow and "95% CI*" in wide
    for out in (narrow, wide):
        if repeats == 1:
            assert "*CI: this run's iterations only, not between runs" in out
        else:
            assert "*CI: each run's own iterations (rN/R: run N of R, --repeats)" in out
            assert "3/3" in out  # r3/3 narrow, run/R 3/3 wide
    # `run --repeats 3 --json`: the group's CI covers its runs, each run's its iterations.
    group = group_summary(runs)
    assert group["group"]["ci_scope"] == ("3 runs" if repeats == 3 else "iterations of 1 run")
    assert {r["ci_scope"] for r in group["results"]} == {"iterations of 1 run"}


def _group(prefix: str, suite: str, medians: Sequence[float]) -> list[Result]:
    return [make_result(f"{prefix}{i:05d}", precision="fp32", suite=suite,
                        times=(m, m * 1.02, m * 0.99, m * 1.01, m),
                        finished=f"2026-01-0{1 if prefix == 'a' else 2}T00:0{i}:00.000+00:00")
            for i, m in enumerate(medians)]


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def test_compare_r3_columns_divide_to_the_printed_ratio(tmp_path: Path) -> None:
    a = _group("a", "s-a", (0.10, 0.11, 0.12))
    b = _group("b", "s-b", (0.05, 0.06, 0.07))
    cmp = compare_results(a, b)
    (case,) = cmp.cases
    ra, rb = case.rates
    assert (ra.runs, rb.runs) == (3, 3) and ra.ci_scope == "3 runs"
    assert case.throughput.value == pytest.approx(rb.samples_per_s / ra.samples_per_s)  # type: ignore[operator]
    # Not the single runs the old columns showed (the newest run of each side).
    assert ra.samples_per_s != pytest.approx(case.a.stats.samples_per_s)  # type: ignore[union-attr]

    db = tmp_path / "cmp.db"
    with open_store(str(db)) as st:
        for r in (*a, *b):
            st.save(r)
    doc = json.loads(run_cli("compare", "s-a", "s-b", "--json", db=db).stdout)
    c = doc["cases"][0]
    assert c["throughput_ratio"] == pytest.approx(c["b_samples_per_s"] / c["a_samples_per_s"])
    assert (c["a_ci_scope"], c["b_ci_scope"]) == ("3 runs", "3 runs")
    low, high = c["a_samples_per_s_ci95"]
    assert low < c["a_samples_per_s"] < high

    proc = run_cli("compare", "s-a", "s-b", db=db, COLUMNS="80", TERM="dumb")
    assert proc.returncode == 0, proc.stderr
    row = next(line for line in proc.stdout.splitlines() if line.startswith("resnet50"))
    m = re.search(r"([\d,.]+)\s+([\d,.]+)\s+(\d\.\d{3}) \[", row)
    assert m, proc.stdout
    col_a, col_b, ratio = (_num(g) for g in m.groups())
    # The printed columns divide to the printed ratio (within their rounding).
    assert col_b / col_a == pytest.approx(ratio, rel=2e-3), (col_a, col_b, ratio)
    assert "3 vs 3 runs" in proc.stdout and "s-a / s-b" in proc.stdout.replace("\n", " ")
    assert "\u00b1" in proc.stdout  # the group means carry their CI
    wide = run_cli("compare", "s-a", "s-b", "--wide", db=db, COLUMNS="250", TERM="dumb")
    assert re.search(r"\[[\d,.]+, [\d,.]+\]", wide.stdout)
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(table(cmp))
    assert max(len(line) for line in console.export_text().splitlines()) <= 80


def test_run_says_its_ci_covers_one_run_and_shows_the_spread_here(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    spec = api.plan_run("lstm", size="tiny", iterations=5).spec
    host = socket.gethostname()
    with open_store(str(db)) as st:
        for i, median in enumerate((0.010, 0.0105, 0.011)):
            r = make_result(f"old{i:05d}", workload="lstm", size="tiny", device="cpu",
                            batch=spec.batch_size, times=(median,) * 5)
            st.save(dataclasses.replace(r, spec=spec, machine={**r.machine,
                                                               "hostname": host}))
        other = make_result("elsewhere", workload="lstm", size="tiny", device="cpu",
                            batch=spec.batch_size, times=(0.5,) * 5)
        st.save(dataclasses.replace(other, spec=spec))  # another host: not counted
    p = run_cli("run", "lstm", "--size", "tiny", "--iterations", "5", "--no-energy", db=db)
    assert p.returncode == 0, p.stderr
    assert "over this run's iterations only" in p.stdout or "unreliable" in p.stdout
    b = spec.batch_size
    spread = (b / 0.010 - b / 0.011) / ((b / 0.010 + b / 0.0105 + b / 0.011) / 3)
    assert f"3 earlier runs here: {fmt_rate(b / 0.011)}-{fmt_rate(b / 0.010)} (spread " \
        f"{spread:.1%})" in p.stdout, p.stdout
