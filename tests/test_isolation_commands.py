"""Commands other than ``run`` isolate user model code and kernels the same way.

Real ``python -m accelbench.cli`` subprocesses with a plugin whose models segfault,
hang, exit or record which process built them (tests/plugins/iso_models.py):
``list`` and ``roofline --model`` must return (no exit 139, no hang), with one
line saying what failed, and no model is ever built in the CLI process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import TESTS, cli_env, run_cli

PLUGIN = str(TESTS / "plugins" / "iso_models.py")


@pytest.fixture(scope="module")
def warm_list() -> None:
    """Count the built-in models once (the session's facts cache), so the per-model
    timeouts of the tests below can be small."""
    p = run_cli("list", timeout=900)
    assert p.returncode == 0, p.stderr


def _error_line(p: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert "Traceback" not in p.stderr
    return lines[0]


def test_list_survives_models_that_crash_hang_or_exit(warm_list: None, tmp_path: Path) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    env = cli_env(ACCELBENCH_TEST_ISO_MARKER_DIR=str(markers), ACCELBENCH_COUNT_TIMEOUT_S="10")
    proc = subprocess.Popen(
        [sys.executable, "-m", "accelbench.cli", "--plugin", PLUGIN, "list", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    infos = {i["name"]: i for i in json.loads(out)}
    assert {"resnet50", "lstm", "iso_marker", "iso_segv", "iso_hang", "iso_exit"} <= set(infos)
    assert infos["lstm"]["sizes"]["tiny"]["param_count"] == 20196  # the others still print
    assert infos["iso_marker"]["sizes"]["tiny"]["param_count"] == 676
    for name in ("iso_segv", "iso_hang", "iso_exit"):
        assert infos[name]["sizes"]["tiny"]["param_count"] is None
    warnings = [ln for ln in err.splitlines() if ln.strip()]
    assert all(ln.startswith("accelbench: warning: ") for ln in warnings), err
    by_name = {n: [w for w in warnings if f" {n} " in w] for n in ("iso_segv", "iso_hang",
                                                                   "iso_exit")}
    assert all(len(v) == 1 for v in by_name.values()), err  # one line per workload
    assert "SIGSEGV" in by_name["iso_segv"][0]
    assert "timed out after 10 s" in by_name["iso_hang"][0]
    assert "SystemExit: 3" in by_name["iso_exit"][0]
    # The model was built (to count it), but never in the CLI process.
    pids = {int(f.read_text()) for f in markers.iterdir()}
    assert pids and proc.pid not in pids


@pytest.mark.parametrize(("workload", "timeout_s", "expected"), [
    ("iso_segv", "120", "roofline --model iso_segv: worker killed by signal SIGSEGV"),
    ("iso_exit", "120", "roofline --model iso_exit: SystemExit: 3"),
    ("iso_hang", "10", "roofline --model iso_hang: timed out after 10 s"),
])
def test_roofline_model_is_isolated(workload: str, timeout_s: str, expected: str,
                                    tmp_path: Path) -> None:
    p = run_cli("--quiet", "--plugin", PLUGIN, "roofline", "--model", workload,
                "--timeout", timeout_s, "--out", str(tmp_path / "out"), db=tmp_path / "r.db",
                timeout=200)
    assert p.returncode in (1, 2), p.stderr
    assert _error_line(p) == f"accelbench: error: {expected}"


def test_roofline_breakdown_is_quiet_and_sums_to_the_step(tmp_path: Path) -> None:
    out = tmp_path / "out"
    p = run_cli("roofline", "--model", "lstm", "--repeats", "2", "--out", str(out),
                db=tmp_path / "r.db")
    assert p.returncode == 0, p.stderr
    assert "USDT" not in p.stderr and "profiler_start" not in p.stderr
    assert "kineto" not in p.stderr.lower()
    (bd,) = json.loads((out / "roofline.json").read_text())["breakdowns"]
    total = sum(k["time_s"] for k in bd["kinds"])
    assert total == pytest.approx(bd["step_time_s"], rel=0.01)
    assert any(k["kind"] == "unattributed" for k in bd["kinds"])
    assert "profiled steps" in bd["step_time_method"]
    assert "unattributed" in p.stdout and "% of step" in p.stdout


def test_ops_case_past_its_timeout_is_stored_and_the_rest_go_on(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    # A 3072^3 GEMM takes about a second here: a thousand of them cannot fit in 12 s,
    # while 12 s leave the small case room for its fresh worker's start (torch's import,
    # 1.4 s quiet) on a loaded machine.
    p = run_cli("ops", "--size", "tiny", "--op", "matmul", "--precision", "fp32",
                "--matmul-sizes", "3072", "--mnk", "8,8,8", "--iterations", "1000",
                "--timeout", "12", "--json", db=db, timeout=300)
    assert p.returncode == 1, p.stderr
    rows = {r["label"]: r for r in json.loads(p.stdout)}
    big = rows["matmul 3072x3072 @ 3072x3072 fp32 fwd"]
    assert big["status"] == "timeout" and "timed out after 12 s" in big["error"]
    assert rows["matmul 8x8 @ 8x8 fp32 fwd"]["status"] == "ok"
    listed = run_cli("ops", "--list", "--json", db=db)
    assert {r["status"] for r in json.loads(listed.stdout)} == {"ok", "timeout"}


@pytest.mark.parametrize("args", [
    ("roofline", "--batch-size", "0"),
    ("roofline", "--repeats", "0"),
    ("roofline", "--timeout", "nan"),
    ("roofline", "--threads", "100000"),
    ("roofline", "--out", ""),
    ("peaks", "--measure", "--no-measure"),
    ("peaks", "--copy-mib", "0"),
    ("peaks", "--copy-mib", str(10**23)),
    ("peaks", "--gemm-sizes", "0"),
    ("ops", "--list", "--limit", "0"),
    ("ops", "--timeout", "inf"),
    ("ops", "--matmul-sizes", str(10**23)),
])
def test_bad_options_are_refused_at_parse_time(args: tuple[str, ...], tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    p = run_cli(*args, db=db, timeout=60)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr
    assert not db.exists()  # refused before the store was opened


def test_roofline_out_at_a_file_is_one_line(tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.write_text("x")
    p = run_cli("roofline", "--out", str(target), db=tmp_path / "r.db")
    assert p.returncode == 2
    assert "is a file, not a directory" in _error_line(p)
    assert target.read_text() == "x"
