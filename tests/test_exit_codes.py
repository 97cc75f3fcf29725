"""The README's exit-code table, one test per row (issue 23, item 10): each command run as
a real subprocess against a real SQLite store, its exit code asserted; and ``--debug``
adds a traceback without changing the code."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from accelbench.result import Result
from accelbench.spec import DeviceSettings, RunSpec
from accelbench.stats import compute_stats
from accelbench.store import open_store
from tests.conftest import cli_env, run_cli

PLUGINS = Path(__file__).resolve().parent / "plugins"
QUICK = ("--size", "tiny", "--iterations", "3", "--no-energy", "-q")


def _result(i: int, workload: str, precision: str = "fp32", status: str = "ok",
            settings: DeviceSettings | None = None, suite: str = "seeded") -> Result:
    times = (0.10, 0.11, 0.12, 0.10, 0.09, 0.10)
    spec = RunSpec(workload=workload, size="tiny", batch_size=4, precision=precision,  # type: ignore[arg-type]
                   settings=settings or DeviceSettings())
    return Result(
        id=f"exit{i:08d}", spec=spec, status=status, sample_unit="sample",
        samples_per_step=4, param_count=1000,
        stats=compute_stats(times, 4, trim_fraction=0.0, stop_reason="iterations")
        if status == "ok" else None,
        iteration_times_s=times if status == "ok" else [],
        machine={"hostname": "h", "cpu": {"model": "CPU"}}, suite_id=suite,
        started_at=f"2026-01-0{i + 1}T00:00:00.000+00:00",
        finished_at=f"2026-01-0{i + 1}T00:00:01.000+00:00")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("exit-codes") / "results.db"
    with open_store(str(db)) as st:
        st.save(_result(0, "lstm"))
        st.save(_result(1, "lstm", "amp_bf16"))
        st.save(_result(2, "resnet50"))
        st.save(_result(3, "lstm", settings=DeviceSettings(cpu_power_limit_w=50.0),
                        suite="sweep-ok"))
        st.save(_result(4, "lstm", status="error",
                        settings=DeviceSettings(cpu_power_limit_w=60.0), suite="sweep-bad"))
    return db


def code(*argv: str, db: Path, **env: str) -> int:
    proc = run_cli(*argv, db=db, **env)
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    return proc.returncode


# ---- 0 / 1 per command -------------------------------------------------------------


def test_run_ok_is_0_and_a_stored_failure_is_1(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    assert code("run", "lstm", *QUICK, db=db) == 0
    assert code("--plugin", str(PLUGINS / "run_nan.py"), "run", "run_nan", *QUICK, db=db) == 1
    with open_store(str(db), create=False) as st:
        assert sorted(r.status for r in st.query()) == ["diverged", "ok"]


def test_suite_is_0_also_with_a_failed_case_dry_run_and_status_0(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    assert code("suite", "quick", "--workload", "lstm", "--precision", "fp32",
                "--suite-id", "good", "--iterations", "3", "--no-energy", "-q", db=db) == 0
    assert code("suite", "quick", "--workload", "lstm", "--dry-run", db=db) == 0
    assert code("suite", "status", "good", db=db) == 0
    assert code("--plugin", str(PLUGINS / "run_nan.py"), "suite", "quick", "--workload",
                "run_nan", "--precision", "fp32", "--iterations", "3", "--no-energy", "-q",
                db=db) == 0  # the failed case is stored as such; the suite ran to its end


def test_sweep_report_frontier_is_0_no_usable_point_is_1(store: Path) -> None:
    assert code("sweep-report", "sweep-ok", db=store) == 0
    assert code("sweep-report", "sweep-bad", db=store) == 1


def test_ops_list_is_0(store: Path) -> None:
    assert code("ops", "--list", db=store) == 0


def test_compare_cases_is_0_nothing_to_compare_is_1(store: Path) -> None:
    assert code("compare", "precision=fp32", "precision=amp_bf16", db=store) == 0
    # both sides select results, but no case is on both sides
    assert code("compare", "id:exit00000000", "id:exit00000002", db=store) == 1


def test_recommend_answer_is_0_too_little_is_1(store: Path) -> None:
    assert code("recommend", "lstm", db=store) == 0
    assert code("recommend", "vgg16", db=store) == 1


def test_doctor_is_0_when_energy_is_measurable_else_1(store: Path, tmp_path: Path) -> None:
    proc = run_cli("doctor", "--probe-s", "0", "--json", db=store,
                   ACCELBENCH_POWERCAP_ROOT=str(tmp_path / "none"))
    measurable = json.loads(proc.stdout)["energy_measurable"]
    assert proc.returncode == (0 if measurable else 1)


@pytest.mark.parametrize("argv", [
    ("list",), ("results",), ("results", "--workload", "vgg16"), ("reference",),
    ("export", "--format", "json"), ("peaks", "--no-measure"),
    ("power", "--duration", "0.3"),
], ids=lambda a: "-".join(a))
def test_commands_that_only_succeed_or_refuse_exit_0(store: Path, argv: tuple[str, ...]) -> None:
    assert code(*argv, db=store) == 0


def test_report_and_roofline_exit_0(store: Path, tmp_path: Path) -> None:
    assert code("report", "--out", str(tmp_path / "rep"), db=store) == 0
    assert code("roofline", "--out", str(tmp_path / "rf"), db=store) == 0


# ---- 2, and --debug ------------------------------------------------------------------


def test_bad_input_and_an_unusable_store_are_2(store: Path, tmp_path: Path) -> None:
    assert code("run", "lstm", "--size", "huge", db=store) == 2
    assert code("--db", str(tmp_path / "missing" / "x.db"), "results", db=store) == 2


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
@pytest.mark.parametrize("argv", [("list",), ("list", "--json"), ("results",),
                                  ("results", "--csv"), ("devices", "--json")])
def test_stdout_on_a_full_device_is_one_line_and_2(store: Path, argv: tuple[str, ...]) -> None:
    """Standard output that cannot be written (issue 47): one line naming it, exit 2 (the
    command did not do its job), no traceback, nothing more at the interpreter's exit."""
    before = store.read_bytes()
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "accelbench.cli", *argv], stdout=full,
                              stderr=subprocess.PIPE, text=True, env=cli_env(store),
                              stdin=subprocess.DEVNULL, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        "accelbench: error: cannot write to standard output: No space left on device"]
    assert store.read_bytes() == before


@pytest.mark.parametrize("argv", [
    [b"run", b"\xff"],
    [b"results", b"--suite-id", b"caf\xe9"],
    [b"--db", b"/tmp/\xfe.db", b"results"],
])
def test_bytes_that_are_not_utf8_are_one_line_and_2(store: Path, argv: list[bytes]) -> None:
    """Arguments as a shell passes them, as bytes (issue 47: a traceback at the first
    store query or print)."""
    before = store.read_bytes()
    proc = subprocess.run([sys.executable.encode(), b"-m", b"accelbench.cli", *argv],
                          capture_output=True, env=cli_env(store), stdin=subprocess.DEVNULL,
                          timeout=120, check=False)
    lines = proc.stderr.decode("utf-8", "replace").splitlines()
    assert proc.returncode == 2, lines
    assert len(lines) == 1 and "must be valid UTF-8" in lines[0], lines
    assert proc.stdout == b""
    assert store.read_bytes() == before


@pytest.mark.parametrize("argv", [
    ("results",),                          # a missing store (StoreError)
    ("run", "lstm", "--size", "tiny", "--precision", "fp7"),  # bad input (ConfigError)
])
def test_debug_adds_a_traceback_but_keeps_the_code(tmp_path: Path, argv: tuple[str, ...]) -> None:
    db = ("--db", str(tmp_path / "missing" / "x.db"))
    plain = run_cli(*db, *argv)
    debug = run_cli("--debug", *db, *argv)
    assert plain.returncode == debug.returncode == 2
    assert "Traceback" not in plain.stderr and "Traceback" in debug.stderr
    assert debug.stderr.strip().splitlines()[-1] == plain.stderr.strip()


# ---- 130 / 143 -----------------------------------------------------------------------


@pytest.mark.parametrize(("sig", "expected"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupted_is_130_terminated_is_143(tmp_path: Path, sig: int, expected: int) -> None:
    # A suite of 18 cases (a minute or more here) prints its plan line on stderr once its
    # handlers are in place and it is running: the signal lands while it works.
    proc = subprocess.Popen(
        [sys.executable, "-m", "accelbench.cli", "suite", "quick", "--no-energy"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=cli_env(tmp_path / "interrupted.db"))
    try:
        deadline = time.monotonic() + 240  # generous: the machine may be busy
        assert proc.stderr is not None
        line = ""
        while time.monotonic() < deadline and "resume with" not in line:
            line = proc.stderr.readline()
            if not line and proc.poll() is not None:
                break
        assert "resume with" in line, (proc.poll(), line)
        proc.send_signal(sig)
        assert proc.wait(timeout=120) == expected
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_power_stopped_with_ctrl_c_ends_normally(store: Path) -> None:
    """``power`` runs until Ctrl-C by design: that is its normal end (summary, exit 0)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "accelbench.cli", "power", "--interval-ms", "100",
         "--cpu-tdp-w", "100"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(store))
    try:
        deadline = time.monotonic() + 240
        assert proc.stdout is not None
        seen = 0
        while time.monotonic() < deadline and seen < 2:  # two readings: in its loop
            if proc.stdout.readline():
                seen += 1
            elif proc.poll() is not None:
                break
        assert seen == 2, proc.poll()
        proc.send_signal(signal.SIGINT)
        out, _err = proc.communicate(timeout=120)
        assert proc.returncode == 0
        assert "average" in out or "unavailable" in out  # the summary of the window
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
