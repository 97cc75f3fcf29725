"""Issue 47, "Secrets in files": no file accelbench writes, or causes to be written, holds a
store URL's password; every message masks it, however the URL is spelled.

- Slurm: submitit pickles each job's arguments into ``--slurm-folder`` (mode 0644); the
  jobs get a URL with a password through a 0600 file instead. Run through submitit's local
  executor (the launcher's own submission path, no Slurm needed) against a real
  PostgreSQL store with password authentication: the job reads the file and stores its case.
- W&B keeps the command line in its offline run files; MLflow's store and artifacts: a
  real run with ``--wandb`` (offline) and ``--mlflow`` against that store.
- The Slurm store checks' refusals for five URL spellings and mistyped ones.

Each test looks for the password in every byte of every file under its folders.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from accelbench.store.base import display_url, url_secrets
from tests.conftest import run_cli
from tests.test_password_masking import SECRET, pg_secret_url  # noqa: F401 - a fixture

FAST = ("--size", "tiny", "--iterations", "3", "--max-time", "1", "--no-energy",
        "--threads", "1")


def files_holding(folder: Path, secret: str) -> list[str]:
    """The files under ``folder`` whose bytes hold ``secret`` (as given or %-encoded)."""
    from urllib.parse import quote

    needles = {secret.encode(), quote(secret, safe="").encode()}
    return [str(p) for p in folder.rglob("*")
            if p.is_file() and not p.is_symlink()
            and any(n in p.read_bytes() for n in needles)]


SPELLINGS = [
    f"postgresql://u:{SECRET}@db.example/accel",
    f"postgresql+psycopg://u:{SECRET}@db.example:5432/accel",
    f"postgresql://u:{SECRET.replace('-', '%2D')}@db.example/accel",
    f"postgresql://u@db.example/accel?sslmode=require&password={SECRET}",
    f"postgresql://u:{SECRET}@db.example",
    f"postgresql:/u:{SECRET}@db.example/accel",   # one slash short: read as a path
    f"u:{SECRET}@db.example/accel",               # no scheme at all
    f"sqlite://u:{SECRET}@/relative.db",          # SQLite with a (meaningless) password
]


@pytest.mark.parametrize("url", SPELLINGS)
def test_every_spelling_is_masked(url: str) -> None:
    shown = display_url(url)
    assert SECRET not in shown and SECRET.replace("-", "%2D") not in shown, shown
    assert url_secrets(url), url


def test_slurm_store_checks_never_print_the_password(tmp_path: Path) -> None:
    """The fleet store check (relative paths, SQLite, unreachable servers) on each
    spelling, given as --db and as ACCELBENCH_DB: no password on screen or in a file."""
    for url in SPELLINGS:
        for how in ("flag", "env"):
            args = ("--db", url) if how == "flag" else ()
            extra = {"ACCELBENCH_DB": url} if how == "env" else {}
            proc = run_cli("suite", "quick", "--launcher", "slurm", "--slurm-folder",
                           str(tmp_path / "slurm"), *args, timeout=120, **extra)
            assert proc.returncode != 0
            assert proc.stderr.startswith("accelbench: error: "), proc.stderr
            text = proc.stdout + proc.stderr
            assert SECRET not in text and SECRET.replace("-", "%2D") not in text, text
    assert files_holding(tmp_path, SECRET) == []


def test_a_url_typed_without_its_slashes_is_refused_masked(tmp_path: Path) -> None:
    """Read as a path, ``postgresql:/u:PW@h/db`` named a file and the refusal printed it,
    password and all; every command now refuses it as a mistyped URL, masked."""
    from tests.test_write_guard import subprocess_in

    for url in SPELLINGS[5:7]:
        for args, extra in ((("results", "--db", url), {}),
                            (("results",), {"ACCELBENCH_DB": url}),
                            (("run", "lstm", *FAST, "--db", url), {})):
            proc = subprocess_in(tmp_path, *args, **extra)
            assert proc.returncode == 2
            assert "looks like a database URL without its '//'" in proc.stderr
            assert SECRET not in proc.stdout + proc.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_slurm_jobs_get_the_store_from_a_private_file_not_a_pickle(
        pg_secret_url: str, tmp_path: Path) -> None:  # noqa: F811 - the fixture
    pytest.importorskip("submitit")
    from accelbench import api
    from accelbench.launchers.slurm import SlurmLauncher, SlurmOptions
    from accelbench.store import open_store
    from accelbench.store.results import ResultFilter

    folder = tmp_path / "slurm"
    launcher = SlurmLauncher(SlurmOptions(cluster="local", folder=str(folder / "%j")),
                             pg_secret_url)
    sid, _ = api.suite("quick", workloads=["lstm"], precisions=["fp32"],
                       iterations=3, max_time=1, store=pg_secret_url, launcher=launcher,
                       energy=False, threads=1)
    [job] = launcher.submitted
    # Wait for the local job to end (bounded; no timing is asserted).
    with open_store(pg_secret_url) as st:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            [row] = [j for j in st.list_jobs(sid) if j.job_id == job.job_id]
            if row.state in ("completed", "failed"):
                break
            time.sleep(1)
        assert row.state == "completed", (row, sorted(p.name for p in folder.rglob("*")))
        stored = st.query(ResultFilter(suite_id=sid))
    assert len(stored) == 1 and stored[0].status == "ok"
    pickles = list(folder.rglob("*.pkl"))
    assert pickles  # submitit's own files were written, and hold no password
    [secret_file] = list(folder.glob(".accelbench-store-*"))
    assert stat.S_IMODE(os.stat(secret_file).st_mode) == 0o600
    assert files_holding(tmp_path, SECRET) == [str(secret_file)]


@pytest.mark.slow
def test_trackers_never_hold_the_password(pg_secret_url: str,  # noqa: F811 - the fixture
                                          tmp_path: Path) -> None:
    pytest.importorskip("wandb")
    pytest.importorskip("mlflow")
    wandb_dir = tmp_path / "wb"
    wandb_dir.mkdir()
    mlflow_uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = run_cli("run", "lstm", *FAST, "--wandb", "--mlflow", mlflow_uri,
                   "--db", pg_secret_url, WANDB_MODE="offline", WANDB_DIR=str(wandb_dir),
                   timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    [wandb_run] = list(wandb_dir.glob("wandb/offline-run-*/run-*.wandb"))
    # W&B kept the command line (its --db URL) in its run file: masked.
    assert b"planted:***@" in wandb_run.read_bytes()
    assert (tmp_path / "mlflow.db").stat().st_size > 0
    assert files_holding(tmp_path, SECRET) == []
