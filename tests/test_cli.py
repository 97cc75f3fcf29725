"""The CLI end to end, through real subprocesses, as a user's shell runs it."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import FAULTY_PLUGIN, cli_env, hide_jax, run_cli

RUN_KEYS = {
    "id", "status", "workload", "size", "batch_size", "precision", "device", "framework",
    "sample_unit", "samples_per_s", "samples_per_s_ci95", "iterations", "step_time_s",
    "param_count", "energy_j_per_sample", "error", "peak_memory_bytes", "peak_memory_source",
}


def test_list_json_has_every_workload_with_sizes(tmp_path: Path) -> None:
    p = run_cli("list", "--json", db=tmp_path / "r.db")
    assert p.returncode == 0, p.stderr
    infos = {w["name"]: w for w in json.loads(p.stdout)}
    assert {"resnet50", "vgg16", "inception_v3", "lstm", "deepspeech2", "transformer"} <= set(infos)
    assert infos["resnet50"]["sizes"]["paper"]["param_count"] == 25_557_032
    assert infos["transformer"]["sample_unit"] == "token"
    assert infos["lstm"]["sizes"]["paper"]["default_batch_sizes"] == [64, 128, 256]
    vgg = infos["vgg16"]["sizes"]["paper"]
    assert vgg["forward_flop_per_sample"] == pytest.approx(31.0e9, rel=0.02)
    assert vgg["train_flop_per_sample"] > 2.5 * vgg["forward_flop_per_sample"]
    assert not (tmp_path / "r.db").exists()  # listing touches no store


def test_devices_json(tmp_path: Path) -> None:
    p = run_cli("devices", "--json")
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    assert rep["cpu"]["logical_cores"] >= 1 and rep["cpu"]["memory_bytes"] > 0
    assert "fp32" in rep["cpu_precisions"]
    assert isinstance(rep["gpus"], list)
    torch_fw = rep["frameworks"]["torch"]
    assert torch_fw["installed"] and torch_fw["versions"]["torch"] and not torch_fw["error"]
    assert [d["device"] for d in torch_fw["devices"]][0] == "cpu"
    jax_fw = rep["frameworks"]["jax"]
    # JAX is optional: either it runs here with its CPU, or the report says how to install it.
    if jax_fw["installed"]:
        assert jax_fw["versions"]["jax"] and jax_fw["devices"][0]["device"] == "cpu"
    else:
        assert "pip install" in jax_fw["error"]
    # The table names each framework's libraries (its backend's device_libraries) that
    # are there: on this CPU build torch has none, JAX has its jaxlib.
    table = run_cli("devices")
    assert table.returncode == 0, table.stderr
    tv = torch_fw["versions"]
    libs = ", ".join(f"{k} {tv[k]}" for k in ("cuda", "hip", "cudnn") if tv.get(k))
    assert f"torch  {tv['torch']}" + (f" ({libs})" if libs else "") in table.stdout.splitlines()
    if jax_fw["installed"]:
        v = jax_fw["versions"]
        assert f"jax  {v['jax']} (jaxlib {v['jaxlib']})" in table.stdout.splitlines()


def test_run_json_then_results_json_and_csv(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    p = run_cli("run", "lstm", "--size", "tiny", "--iterations", "12", "--tag", "cli",
                "--json", db=db)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert set(out) >= RUN_KEYS
    assert out["status"] == "ok" and out["error"] is None
    assert out["iterations"] == 12 and out["batch_size"] == 4
    assert out["sample_unit"] == "sentence"
    low, high = out["samples_per_s_ci95"]
    assert low <= out["samples_per_s"] <= high
    assert out["energy_j_per_sample"] is None
    # On a CPU the case's memory is the worker's peak RSS: a real, positive figure.
    assert out["peak_memory_bytes"] > 2**20 and "peak RSS" in out["peak_memory_source"]
    # Non-TTY: no progress noise; only a warning if the shared test machine was busy.
    assert all(ln.startswith(("accelbench: warning: ", "accelbench: note: "))
               for ln in p.stderr.splitlines()), p.stderr

    res = run_cli("results", "--json", "--workload", "lstm", db=db)
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    assert [r["id"] for r in rows] == [out["id"]]
    assert rows[0]["tag"] == "cli"

    c = run_cli("results", "--csv", db=db)
    parsed = list(csv.DictReader(io.StringIO(c.stdout)))
    assert len(parsed) == 1 and parsed[0]["workload"] == "lstm"
    assert float(parsed[0]["samples_per_s"]) == pytest.approx(out["samples_per_s"])

    human = run_cli("results", db=db)
    assert "lstm" in human.stdout and " ok " in human.stdout
    assert human.stdout.strip().splitlines()[-1] == f"1 result(s) in {db}"


def test_run_human_summary_and_failed_case_exit_code(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    p = run_cli("--plugin", FAULTY_PLUGIN, "run", "test_oom", "--size", "tiny", "--no-energy",
                db=db)
    assert p.returncode == 1  # the case failed; it is stored, not crashed
    assert "oom" in p.stdout and "MemoryError" in p.stdout
    stored = json.loads(run_cli("results", "--json", db=db).stdout)
    assert [r["status"] for r in stored] == ["oom"]


def test_suite_dry_run_and_force(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    dry = run_cli("suite", "paper", "--dry-run", db=db)
    assert dry.returncode == 0, dry.stderr
    header, *rows, total = dry.stdout.strip().splitlines()
    assert header.split("\t")[:7] == ["workload", "size", "batch", "precision", "device",
                                      "framework", "estimate"]
    lines = [ln.split("\t") for ln in rows]
    assert len(lines) == 2 + 2 + 2 + 3 + 3 + 3  # fp32 only on a CPU
    assert ["transformer", "paper", "4096", "fp32", "cpu", "torch"] in [ln[:6] for ln in lines]
    assert ["deepspeech2", "paper", "8", "fp32", "cpu", "torch"] in [ln[:6] for ln in lines]
    # Every case says how long it will take, or that nothing supports a figure yet.
    assert all(ln[6] != "" and ln[7] != "" for ln in lines)
    # The paper suite runs each case three times (--repeats), and says so.
    assert total.startswith(f"# {len(lines)} case(s) in {3 * len(lines)} run(s) (--repeats), "
                            "about ")

    args = ["--plugin", FAULTY_PLUGIN, "suite", "quick", "--workload", "test_mlp",
            "--max-time", "0.2", "--suite-id", "f1", "--json",
            "--no-energy"]  # no idle baseline nor 5 s energy window: not what is tested
    first_run = run_cli(*args, db=db)
    # Not a terminal: no progress bars; the suite id with its resume command, and one plain
    # line per finished case, all on stderr (stdout stays one JSON document).
    err_lines = first_run.stderr.strip().splitlines()
    assert err_lines[0] == (f"suite f1: 2 case(s); resume with: accelbench --db {db} "
                            f"--plugin {FAULTY_PLUGIN} suite resume f1")
    from accelbench.devices.discovery import cpu_precision_support

    bf16 = cpu_precision_support("amp_bf16")  # emulated on a CPU without bf16 instructions
    emulated = " (emulated)" if bf16 is not None and not bf16["native"] else ""
    assert [ln.split(":")[0] for ln in err_lines[1:3]] == [
        "[1/2] test_mlp tiny bs=8 fp32 torch",
        f"[2/2] test_mlp tiny bs=8 amp_bf16{emulated} torch"]
    first = json.loads(first_run.stdout)
    assert first["suite_id"] == "f1" and len(first["results"]) == 2
    forced = json.loads(run_cli(*args, "--force", db=db).stdout)
    assert len(forced["results"]) == 4


BAD_INPUTS = [
    (["run", "resnet"], "unknown workload 'resnet'; did you mean resnet50"),
    (["run", "lstm", "--batch-size", "0"], "--batch-size: must be between 1 and"),
    (["run", "lstm", "--batch-size", "-4"], "--batch-size: must be between 1 and"),
    (["run", "lstm", "--precision", "fp8"], "unknown precision 'fp8'"),
    (["run", "lstm", "--size", "huge"], "unknown size 'huge'"),
    (["run", "lstm", "--device", "cuda:0"], "device cuda:0 is unavailable"),
    (["run", "lstm", "--device", "tpu9"], "unknown device 'tpu9'"),
    (["run", "lstm", "--precision", "tf32"], "precision tf32 is not supported on cpu"),
    (["run", "transformer", "--batch-size", "1000"], "multiple"),
    (["run", "lstm", "--target-ci", "2"], "--target-ci"),
    (["suite", "nosuch"], "unknown suite 'nosuch'"),
    (["--plugin", "/nonexistent/plugin.py", "list"], "does not exist"),
]


@pytest.mark.parametrize("args, message", BAD_INPUTS, ids=[" ".join(a) for a, _ in BAD_INPUTS])
def test_bad_input_one_line_exit_2_nothing_written(
    tmp_path: Path, args: list[str], message: str
) -> None:
    db = tmp_path / "r.db"
    p = run_cli(*args, db=db)
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("accelbench: error:")
    assert message in lines[0]
    assert "Traceback" not in p.stderr
    assert not db.exists()


def test_corrupt_store_is_refused_and_left_alone(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    db.write_bytes(b"garbage" * 1000)
    for args in (["results"], ["run", "lstm", "--size", "tiny", "--iterations", "2"]):
        p = run_cli(*args, db=db)
        assert p.returncode == 2
        assert p.stderr.count("\n") == 1 and "not a database" in p.stderr
    assert db.read_bytes() == b"garbage" * 1000


def test_debug_shows_traceback(tmp_path: Path) -> None:
    p = run_cli("--debug", "run", "nosuch", db=tmp_path / "r.db")
    assert p.returncode != 0
    assert "Traceback" in p.stderr and "ConfigError" in p.stderr


def test_closed_pipe_is_not_an_error(tmp_path: Path) -> None:
    from accelbench.store import open_store
    from tests.test_store import make_result

    db = tmp_path / "r.db"
    with open_store(str(db)) as st:  # more output than a pipe buffer holds
        for i in range(400):
            st.save(make_result(f"r{i:04d}"))
    cmd = f"{sys.executable} -m accelbench.cli results --json | head -c 1"
    p = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True,
                       env=cli_env(db), timeout=120, check=False)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "[" and "Traceback" not in p.stderr


ENV_PLUGIN = str(Path(__file__).resolve().parent / "plugins" / "marker_mlp.py")


def test_global_options_work_after_the_subcommand(tmp_path: Path) -> None:
    db = tmp_path / "after.db"
    run = run_cli("run", "marker_mlp", "--size", "tiny", "--iterations", "3", "--no-energy",
                  "--plugin", ENV_PLUGIN, "--db", str(db), "--quiet", "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["workload"] == "marker_mlp"
    assert db.exists()  # --db after the subcommand chose the store
    # Before and after mix: the later --db wins, plugins add up.
    res = run_cli("--db", str(tmp_path / "other.db"), "results", "--db", str(db), "--json")
    assert res.returncode == 0, res.stderr
    assert [r["workload"] for r in json.loads(res.stdout)] == ["marker_mlp"]
    dbg = run_cli("run", "nosuch", "--debug", db=tmp_path / "x.db")
    assert "Traceback" in dbg.stderr and "ConfigError" in dbg.stderr


def test_plugins_from_the_environment_are_listed(tmp_path: Path) -> None:
    p = run_cli("list", "--json", ACCELBENCH_PLUGINS=ENV_PLUGIN)
    assert p.returncode == 0, p.stderr
    names = {w["name"] for w in json.loads(p.stdout)}
    assert "marker_mlp" in names and "resnet50" in names


@pytest.mark.usefixtures("no_warm_hubs")  # its workers are found as the CLI's descendants
def test_sigterm_ends_a_suite_like_ctrl_c(tmp_path: Path) -> None:
    """SIGTERM (what schedulers and `kill` send) stops the suite: a message with the resume
    command, exit 143, no worker left behind, finished cases kept."""
    db = tmp_path / "r.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "accelbench.cli", "--plugin", FAULTY_PLUGIN, "suite", "quick",
         "--workload", "test_hang", "--suite-id", "term1", "--no-energy", "--timeout", "120"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(db),
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        worker_pids: list[int] = []
        # The case's worker: the suite has claimed its case (the planning's device probe,
        # also a fork of the warm server, is over by then) and a worker runs.
        while time.monotonic() < deadline and not worker_pids:
            time.sleep(0.1)
            if _claimed(db):
                worker_pids = _children_running(proc.pid, "accelbench.execution.worker")
        assert worker_pids, "the hanging case's worker never started"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 143, err
    assert err.splitlines()[-2].endswith(
        f"Resume with: accelbench --db {db} --plugin {FAULTY_PLUGIN} suite resume term1")
    assert err.splitlines()[-1] == "accelbench: terminated (SIGTERM)"
    # Killed with their group as the CLI ends: gone at once, or within seconds on a loaded
    # machine (was: one fixed second's wait).
    deadline = time.monotonic() + 5
    while (alive := [pid for pid in worker_pids if _alive(pid)]) and \
            time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive, f"workers left running: {alive}"


def _claimed(db: Path) -> bool:
    import sqlite3

    if not db.exists():
        return False
    con = sqlite3.connect(db, timeout=30)
    try:
        return con.execute("SELECT COUNT(*) FROM claims").fetchone()[0] > 0
    except sqlite3.OperationalError:  # schema not created yet
        return False
    finally:
        con.close()


def _children_running(parent: int, module: str) -> list[int]:
    """Pids of ``parent``'s workers (other sessions on the machine run workers too): its
    children running ``python -m module``, and the children its warm server forked."""
    procs = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            ppid = int((entry / "stat").read_text().split(")")[-1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        procs[int(entry.name)] = (ppid, cmd)
    servers = {pid for pid, (ppid, cmd) in procs.items()
               if ppid == parent and b"accelbench.isolation.serve" in cmd}
    return [pid for pid, (ppid, cmd) in procs.items()
            if (ppid == parent and module.encode() in cmd) or ppid in servers]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_devices_prints_an_install_command_literally(tmp_path: Path) -> None:
    """Without JAX, ``devices`` says how to install it: ``pip install -e '.[jax]'``, its
    brackets kept (issue 47: rich took ``[jax]`` for markup and printed ``'.'``)."""
    hide = hide_jax(tmp_path / "hide")
    proc = subprocess.run([sys.executable, "-m", "accelbench.cli", "devices"],
                          capture_output=True, text=True, timeout=300, check=False,
                          env=cli_env(tmp_path / "r.db", PYTHONPATH=str(hide)))
    assert proc.returncode == 0, proc.stderr
    jax_line = next(line for line in proc.stdout.splitlines() if line.startswith("jax "))
    assert "pip install -e '.[jax]'" in jax_line, jax_line
    assert "'jax[cuda12]'" in jax_line and "'jax[tpu]'" in jax_line, jax_line
