"""A JAX and a torch row never read the same: the report's summary (HTML and
``summary.md``) and ``recommend`` name every axis on which listed rows differ (issue 47)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from accelbench.spec import FastPaths
from accelbench.store import open_store
from tests.conftest import run_cli
from tests.test_compare import make_result


@pytest.fixture
def two_frameworks(tmp_path: Path) -> Path:
    """resnet50 on one CPU, fp32, bs 64: torch at 320/s, JAX at 640/s, torch compiled."""
    import dataclasses

    db = tmp_path / "fw.db"
    with open_store(str(db)) as st:
        st.save(make_result("torch001", device="cpu", times=(0.2,) * 4, avg_power_w=80.0))
        st.save(make_result("jax00001", device="cpu", framework="jax", times=(0.1,) * 4,
                            avg_power_w=80.0))
        compiled = make_result("torchc01", device="cpu", times=(0.16,) * 4, avg_power_w=80.0)
        st.save(dataclasses.replace(compiled, spec=dataclasses.replace(
            compiled.spec, fast_paths=FastPaths(compile=True))))
    return db


def test_report_summary_names_framework_and_fast_paths(two_frameworks: Path,
                                                        tmp_path: Path) -> None:
    out = tmp_path / "rep"
    proc = run_cli("report", "--out", str(out), db=two_frameworks)
    assert proc.returncode == 0, proc.stderr
    md = (out / "summary.md").read_text()
    header = next(line for line in md.splitlines() if line.startswith("| device |"))
    cols = [c.strip() for c in header.strip("|").split("|")]
    assert "framework" in cols and "fast paths" in cols
    rows = {line.split("|")[cols.index("id") + 1].strip(): [
        c.strip() for c in line.strip("|").split("|")]
        for line in md.splitlines() if line.startswith("| cpu")}
    assert rows["jax00001"][cols.index("framework")] == "jax"
    assert rows["torch001"][cols.index("framework")] == "torch"
    assert rows["torchc01"][cols.index("fast paths")] == "compile"
    assert rows["torch001"][cols.index("fast paths")] == "-"
    html = (out / "index.html").read_text()
    summary = html[html.index('<section id="summary">'):html.index("</section>",
                                                                  html.index('id="summary"'))]
    assert "<th>framework</th>" in summary and "<th>fast paths</th>" in summary
    assert re.search(r"<td>jax</td>", summary) and re.search(r"<td>torch</td>", summary)


def test_recommend_names_the_framework(two_frameworks: Path) -> None:
    proc = run_cli("recommend", "resnet50", db=two_frameworks, COLUMNS="100")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "Fastest: Test CPU fp32 bs=64 jax at 640" in out
    lines = [line for line in out.splitlines() if "bs=64" in line and "Fastest" not in line]
    assert any("bs=64 jax" in line for line in lines)
    assert any("bs=64 torch +compile" in line for line in lines)
    assert any(re.search(r"bs=64 torch\s", line) for line in lines)
    doc = json.loads(run_cli("recommend", "resnet50", "--json", db=two_frameworks).stdout)
    by_id = {o["result_id"]: o for o in doc["by_throughput"]}
    assert by_id["jax00001"]["framework"] == "jax"
    assert by_id["torchc01"]["fast_paths"] == ["compile"]
