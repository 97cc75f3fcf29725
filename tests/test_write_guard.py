"""Issue 47, "Written where it must not be": one check (report.outputs.check_target) guards
every path accelbench writes (export, report, roofline, --mllog, --mlflow's store, W&B's
folder) against the results store (through symbolic and hard links, and as a
``sqlite:///`` URL) and special files (a device, a FIFO); the store is named the same way
by ``--db`` and ``ACCELBENCH_DB``, and never as ``-`` or an in-memory database.

Real ``accelbench`` subprocesses on real SQLite files; each test checks the exit code and
the bytes (or kind) of the store and of every file the command was pointed at, before and
after. The tests run as root, so nothing here is refused for lack of permission.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import warnings
from pathlib import Path

import pytest

from accelbench.errors import AccelbenchWarning, ConfigError
from accelbench.report.outputs import atomic_write_text, check_target
from accelbench.store import open_store
from tests.conftest import run_cli
from tests.test_store import make_result
from tests.test_store_safety import one_error_line

RUN = ("run", "lstm", "--size", "tiny", "--iterations", "3", "--max-time", "1", "--no-energy",
       "-q")


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def listing(folder: Path) -> dict[str, str]:
    """Every entry under ``folder`` with its kind and, for a regular file, its bytes' hash."""
    out = {}
    for path in sorted(folder.rglob("*")):
        mode = path.lstat().st_mode
        out[str(path.relative_to(folder))] = (
            sha(path) if stat.S_ISREG(mode) else f"mode {stat.S_IFMT(mode):o}")
    return out


@pytest.fixture
def store(tmp_path: Path) -> Path:
    db = tmp_path / "keep.db"
    with open_store(str(db)) as st:
        for i in range(3):
            st.save(make_result(f"g{i}", finished=f"2026-01-01T00:00:0{i}.000+00:00"))
    return db


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def _is_dev_full() -> bool:
    try:
        return stat.S_ISCHR(os.stat("/dev/full").st_mode)
    except OSError:
        return False


def test_export_and_report_never_replace_a_device_or_a_fifo(store: Path, fifo: Path,
                                                            tmp_path: Path) -> None:
    before, files = sha(store), listing(tmp_path)
    targets = [str(fifo)] + (["/dev/full"] if _is_dev_full() else [])
    for target in targets:
        for args in (("export", "--format", "csv", "--out", target, "--force"),
                     ("export", "--format", "json", "--out", target),
                     ("report", "--out", target, "--force", "--no-reference")):
            proc = run_cli(*args, db=store)
            assert proc.returncode == 2, (args, proc.stderr)
            line = one_error_line(proc)
            assert target in line and "not a regular file" in line, line
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    if _is_dev_full():
        assert stat.S_ISCHR(os.lstat("/dev/full").st_mode)
    assert sha(store) == before and listing(tmp_path) == files


def test_the_store_is_never_an_output_through_any_link(store: Path, tmp_path: Path) -> None:
    soft, hard = tmp_path / "soft.db", tmp_path / "hard.db"
    soft.symlink_to(store)
    os.link(store, hard)
    before, files = sha(store), listing(tmp_path)
    for target in (store, soft, hard):
        proc = run_cli("export", "--format", "json", "--out", str(target), "--force", db=store)
        assert proc.returncode == 2
        assert "is the results store" in one_error_line(proc)
    assert sha(store) == before and listing(tmp_path) == files


@pytest.mark.parametrize("how", ["store", "symlink", "hardlink", "fifo", "/dev/full"])
def test_mllog_is_refused_into_the_store_or_a_special_file_before_anything_runs(
        store: Path, tmp_path: Path, how: str) -> None:
    if how == "/dev/full" and not _is_dev_full():
        pytest.skip("no /dev/full here")
    target = {"store": store, "/dev/full": Path("/dev/full")}.get(how, tmp_path / "log")
    if how == "symlink":
        target.symlink_to(store)
    elif how == "hardlink":
        os.link(store, target)
    elif how == "fifo":
        os.mkfifo(target)
    before, files = sha(store), listing(tmp_path)
    # A FIFO nobody reads would block the command forever: the timeout bounds that.
    proc = run_cli(*RUN, "--mllog", str(target), db=store, timeout=120)
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert line.startswith(f"accelbench: error: --mllog {target} ")
    assert ("the results store" in line) == (how in ("store", "symlink", "hardlink"))
    assert sha(store) == before and listing(tmp_path) == files
    if how == "/dev/full":
        assert stat.S_ISCHR(os.lstat(target).st_mode)


def test_mlflow_is_refused_into_the_store_by_url_and_link(store: Path, tmp_path: Path) -> None:
    pytest.importorskip("mlflow")
    soft = tmp_path / "soft.db"
    soft.symlink_to(store)
    before, files = sha(store), listing(tmp_path)
    for uri in (f"sqlite:///{store}", f"sqlite:///{soft}"):
        proc = run_cli(*RUN, "--mlflow", uri, db=store, timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert "--mlflow" in one_error_line(proc) and "the results store" in proc.stderr
    # MLflow's own variable names the store too.
    proc = run_cli(*RUN, "--mlflow", db=store, timeout=120,
                   MLFLOW_TRACKING_URI=f"sqlite:///{store}")
    assert proc.returncode == 2 and "MLFLOW_TRACKING_URI" in one_error_line(proc)
    assert sha(store) == before and listing(tmp_path) == files


def test_wandb_never_writes_into_the_store(store: Path, tmp_path: Path) -> None:
    pytest.importorskip("wandb")
    before, files = sha(store), listing(tmp_path)
    # WANDB_DIR naming the store file itself (W&B would write its run folders there).
    proc = run_cli(*RUN, "--wandb", db=store, timeout=120, WANDB_MODE="offline",
                   WANDB_DIR=str(store))
    assert proc.returncode == 2 and "WANDB_DIR" in one_error_line(proc)
    assert sha(store) == before and listing(tmp_path) == files


def test_a_write_error_of_the_mllog_is_one_line_and_the_case_stays_stored(
        store: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """The log's file fails after the sink opened (here: it became /dev/full, where every
    write fails with ENOSPC): one warning line per case, no logging traceback."""
    if not _is_dev_full():
        pytest.skip("no /dev/full here")
    pytest.importorskip("mlperf_logging")
    from accelbench.sinks import SinkOptions, open_sinks

    log = tmp_path / "run.log"
    with open_store(str(store)) as st:
        result = st.query()[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with open_sinks(SinkOptions(mllog=str(log)), store_label=str(store)) as sinks:
            sinks.emit(result)  # a regular file: written
            assert log.read_text(encoding="utf-8").count(":::MLLOG") > 5
            # Writes now fail (the handler opens its file again at the next line).
            sinks.sinks[0].handler.close()  # type: ignore[attr-defined]
            sinks.sinks[0].handler.baseFilename = "/dev/full"  # type: ignore[attr-defined]
            sinks.sinks[0].path = Path("/dev/full")  # type: ignore[attr-defined]
            sinks.emit(result)
    said = [str(w.message) for w in caught if issubclass(w.category, AccelbenchWarning)]
    assert len(said) == 1, said
    assert said[0].startswith("--mllog: case g") and "/dev/full" in said[0], said
    captured = capfd.readouterr()
    assert "Traceback" not in captured.err and "Logging error" not in captured.err
    assert stat.S_ISCHR(os.lstat("/dev/full").st_mode)


def test_mllog_onto_a_regular_file_becoming_the_store_at_a_case_is_not_written(
        store: Path, tmp_path: Path) -> None:
    """Checked again at each case: a path swapped for a link to the store meanwhile."""
    pytest.importorskip("mlperf_logging")
    from accelbench.sinks import SinkOptions, open_sinks

    log = tmp_path / "run.log"
    with open_store(str(store)) as st:
        result = st.query()[0]
    before = sha(store)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with open_sinks(SinkOptions(mllog=str(log)), store_label=str(store)) as sinks:
            log.symlink_to(store)
            sinks.emit(result)
    assert any("the results store" in str(w.message) for w in caught)
    assert sha(store) == before


def test_check_target_and_atomic_writes_refuse_special_files(fifo: Path, tmp_path: Path
                                                             ) -> None:
    with pytest.raises(ConfigError, match="FIFO"):
        check_target(fifo)
    with pytest.raises(ConfigError, match="FIFO"):
        atomic_write_text(fifo, "x")  # the last line of defence of every output file
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    folder = tmp_path / "d"
    folder.mkdir()
    keep = folder / "keep.db"
    keep.write_bytes(b"x")
    with pytest.raises(ConfigError, match="holds the results store"):
        check_target(folder, protected=[keep], flag="WANDB_DIR", folder=True)
    check_target(tmp_path / "new.txt", protected=[keep])  # a new file is fine


# -- the store's name ----------------------------------------------------------------------

def test_a_read_command_never_creates_a_named_store(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    for args, extra in (((), {"ACCELBENCH_DB": str(missing)}),
                        (("--db", str(missing)), {})):
        for command in (("results",), ("export", "--format", "csv"), ("ops", "--list"),
                        ("suite", "status", "nosuch")):
            proc = run_cli(*command, *args, **extra)
            assert proc.returncode == 2, (command, proc.stdout, proc.stderr)
            assert f"{missing} does not exist" in one_error_line(proc)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["-", "sqlite://", "sqlite:///:memory:",
                                  "sqlite:///file:mem?mode=memory&uri=true"])
def test_a_store_that_keeps_nothing_is_refused(tmp_path: Path, name: str) -> None:
    for how in ("flag", "env"):
        extra = {"ACCELBENCH_DB": name} if how == "env" else {}
        args = () if how == "env" else ("--db", name)
        proc = subprocess_in(tmp_path, *RUN, *args, **extra)
        assert proc.returncode == 2, proc.stderr
        origin = "ACCELBENCH_DB" if how == "env" else "--db"
        assert one_error_line(proc).startswith(f"accelbench: error: {origin} ")
    assert list(tmp_path.iterdir()) == []  # no file named '-' (or anything else)


def subprocess_in(cwd: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """``accelbench ARGS`` run in ``cwd`` (where a store named ``-`` would appear)."""
    from tests.conftest import cli_env, cli_process

    return cli_process(list(args), env=cli_env(None, **extra), cwd=cwd, timeout=120)


def test_a_refused_mlflow_store_writes_nothing_anywhere(store: Path, fifo: Path,
                                                        tmp_path: Path) -> None:
    """Refused before MLflow is imported (its import writes ~/.config/mlflow), and a folder
    named as the SQLite file is refused at once (MLflow retried it for minutes)."""
    pytest.importorskip("mlflow")
    home = tmp_path / "home"
    home.mkdir()
    folder = tmp_path / "a-folder"
    folder.mkdir()
    before, files = sha(store), listing(tmp_path)
    for target, said in ((fifo, "a FIFO"), (folder, "is a folder")):
        proc = run_cli(*RUN, "--mlflow", f"sqlite:///{target}", db=store, timeout=120,
                       HOME=str(home))
        assert proc.returncode == 2, proc.stderr
        assert said in one_error_line(proc) and "--mlflow" in proc.stderr
    assert sha(store) == before and listing(tmp_path) == files
    assert list(home.iterdir()) == []


def test_only_out_says_force_changes_nothing(tmp_path: Path, store: Path) -> None:
    """The store refusal names --force only where there is one (--out)."""
    with pytest.raises(ConfigError) as out:
        check_target(store, protected=[store])
    assert "--out" in str(out.value) and "even with --force" in str(out.value)
    with pytest.raises(ConfigError) as log:
        check_target(store, protected=[store], flag="--mllog")
    assert "--mllog" in str(log.value) and "--force" not in str(log.value)


def test_an_existing_out_file_needs_force(tmp_path: Path) -> None:
    from accelbench.report.outputs import check_out_files

    old = tmp_path / "old.csv"
    old.write_text("kept\n")
    with pytest.raises(ConfigError, match="an existing file; choose another --out, or pass "
                                          "--force"):
        check_out_files([old])
    check_out_files([old], force=True)  # refused no more
    check_out_files([tmp_path / "new.csv"])  # nothing there: nothing to refuse
    assert old.read_text() == "kept\n"


def test_written_files_get_the_umask_or_keep_their_mode(tmp_path: Path) -> None:
    """A new file: 0o666 less the umask (as open() would make it); a replaced one keeps its
    permissions."""
    old_umask = os.umask(0)
    try:
        atomic_write_text(tmp_path / "open.txt", "x")
        os.umask(0o027)
        atomic_write_text(tmp_path / "masked.txt", "x")
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE((tmp_path / "open.txt").stat().st_mode) == 0o666
    assert stat.S_IMODE((tmp_path / "masked.txt").stat().st_mode) == 0o640
    private = tmp_path / "private.txt"
    private.write_text("old")
    private.chmod(0o600)
    atomic_write_text(private, "new")
    assert private.read_text() == "new" and stat.S_IMODE(private.stat().st_mode) == 0o600
