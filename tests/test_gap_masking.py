"""Issue 46: a real sweep and a real suite against a password-protected PostgreSQL print
no password, and their resume lines name the store masked.

The masking test of issue 23 ran ``sweep`` only where it was refused before printing and
``suite`` only as dry runs, so a resume line built from the raw ``--db`` passed it. Here
both run for real (a tiny CPU case; the CPU frequency knob a fake sysfs tree, the vendor
boundary) against the cluster of tests/test_password_masking.py (scram-sha-256, a
planted password), and every line they print is checked.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from accelbench.store import open_store
from accelbench.tuning.cpu import CPUFREQ_ROOT_ENV
from tests.conftest import TESTS, cli_env, cli_process
from tests.fake_tuning import cpufreq_tree
from tests.test_password_masking import SECRET, pg_secret_url  # noqa: F401

BUSY = str(TESTS / "plugins" / "run_busy.py")


def _masked(url: str) -> str:
    return url.replace(f":{SECRET}@", ":***@")


def test_a_real_sweep_prints_its_resume_line_masked(
        pg_secret_url: str, tmp_path: Path) -> None:  # noqa: F811
    cpufreq_tree(tmp_path / "cpu")
    env = cli_env(None, **{CPUFREQ_ROOT_ENV: str(tmp_path / "cpu")})
    proc = cli_process(["--db", pg_secret_url, "sweep", "run_busy", "--plugin", BUSY,
                        "--size", "tiny", "--no-energy", "--iterations", "3",
                        "--cpu-max-freqs", "2000000", "--suite-id", "pwsweep"],
                       env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    printed = proc.stdout + proc.stderr
    assert SECRET not in printed
    # The resume line is printed, and names the store as display_url does.
    assert (f"resume with: accelbench --db {_masked(pg_secret_url)} sweep run_busy ... "
            "--suite-id pwsweep") in proc.stderr
    with open_store(pg_secret_url) as st:
        [stored] = st.query()
    assert stored.suite_id == "pwsweep" and stored.spec.settings.cpu_max_freq_khz == 2_000_000
    assert SECRET not in str(stored.to_dict())


def test_a_real_suite_prints_no_password(pg_secret_url: str, tmp_path: Path) -> None:  # noqa: F811
    proc = cli_process(["--db", pg_secret_url, "--plugin", BUSY, "suite", "quick",
                        "--workload", "run_busy", "--precision", "fp32", "--iterations", "3",
                        "--no-energy", "--suite-id", "pwsuite2"],
                       env=cli_env(None), timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    assert "pwsuite2" in proc.stdout + proc.stderr
    with open_store(pg_secret_url) as st:
        runs = [r for r in st.query() if r.suite_id == "pwsuite2"]
    assert runs and all(r.status == "ok" for r in runs)
    # What the store keeps of the run names no password either.
    assert all(SECRET not in str(r.to_dict()) for r in runs)


@pytest.mark.parametrize("url", [
    "postgresql+psycopg://u:{s}@host/db",
    "postgresql+psycopg://u@host/db?password={s}",
    "postgresql://u:{s}@host:5432/db?sslmode=require",
])
def test_a_suite_refused_on_the_store_names_it_masked(url: str, tmp_path: Path) -> None:
    # An unreachable store: the one error line names the URL, masked.
    bad = url.format(s=SECRET).replace("host", "127.0.0.1").replace("127.0.0.1:5432",
                                                                      "127.0.0.1:1")
    if "127.0.0.1/" in bad:
        bad = bad.replace("127.0.0.1/", "127.0.0.1:1/")
    proc = cli_process(["--db", bad, "results"], env=cli_env(None), timeout=120)
    assert proc.returncode == 2
    assert SECRET not in proc.stdout + proc.stderr
    assert "***" in proc.stderr
