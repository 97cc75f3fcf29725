"""What a notebook user calls: ``accelbench.run``, then ``sweep``, ``export`` and
``report`` over the same real SQLite store, each the code its CLI command runs.

Real workers at the tiny size; the one fake is the CPU frequency's sysfs tree (the
vendor boundary), so that the sweep can set and restore a knob without root.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

import accelbench
from accelbench import api
from accelbench.tuning.cpu import CPUFREQ_ROOT_ENV
from tests.fake_tuning import cpufreq_tree

CASE = {"size": "tiny", "iterations": 3, "energy": False}


def test_run_then_export_and_report(tmp_path: Path) -> None:
    db = str(tmp_path / "r.db")
    result = accelbench.run("lstm", db=db, tag="nb", **CASE)
    assert result.status == "ok", result.error
    # export: csv to a file, json to a stream; the filters are keywords (one name each).
    count, paths = api.export("csv", tmp_path / "r.csv", db=db, workload="lstm", tag="nb")
    assert count == 1 and paths == [tmp_path / "r.csv"]
    rows = list(csv.DictReader((tmp_path / "r.csv").open()))
    assert [(r["workload"], r["result_id"]) for r in rows] == [("lstm", result.id)]
    buf = io.StringIO()
    count, paths = api.export("json", db=db, stream=buf, size="TINY")  # any letter case
    assert count == 1 and paths == []
    assert json.loads(buf.getvalue())["cases"][0]["result_id"] == result.id
    count, _ = api.export("csv", tmp_path / "none.csv", db=db, workload="vgg16")
    assert count == 0
    # report: the HTML report of what the filters select.
    written = api.report(tmp_path / "rep", db=db, workload="lstm", no_reference=True)
    assert written.results == 1
    html = written.files.html.read_text()
    assert written.files.html == tmp_path / "rep" / "index.html" and "lstm" in html
    assert written.files.markdown.exists()
    # A second report there is refused unless force, as the CLI refuses it.
    with pytest.raises(accelbench.errors.ConfigError, match="--force"):
        api.report(tmp_path / "rep", db=db)
    assert api.report(tmp_path / "rep", db=db, force=True, title="again").results == 1


def test_sweep_sets_each_value_restores_it_and_returns_the_frontier(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = cpufreq_tree(tmp_path / "cpu")  # 800 MHz - 3 GHz, now at 3 GHz
    monkeypatch.setenv(CPUFREQ_ROOT_ENV, str(tmp_path / "cpu"))
    db = str(tmp_path / "r.db")
    events: list[str] = []
    swept = api.sweep("lstm", db=db, cpu_max_freqs="2000000,2500000", suite_id="nb-sweep",
                      on_event=lambda ev: events.append(ev.kind), **CASE)
    assert swept.suite_id == "nb-sweep"
    assert sorted(r.spec.settings.cpu_max_freq_khz for r in swept.results) == [
        2_000_000, 2_500_000]
    assert all(r.status == "ok" for r in swept.results)
    assert [f.read_text().strip() for f in files] == ["3000000", "3000000"]  # restored
    assert events[0] == "plan" and events.count("done") == 2
    assert len(swept.frontier.points) == 2
    # The same sweep resumed: both settings are stored, nothing runs again.
    again = api.sweep("lstm", db=db, cpu_max_freqs=[2_000_000, 2_500_000],
                      suite_id="nb-sweep", **CASE)
    assert sorted(r.id for r in again.results) == sorted(r.id for r in swept.results)
