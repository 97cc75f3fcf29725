"""Adding an option is adding one field.

A copy of the package gets ONE extra field on :class:`MeasurementPolicy` (with its
``option()`` metadata: flag, unit, bounds, help) and nothing else; the real CLI, run from
that copy as a subprocess, then shows it in ``--help``, refuses a bad value in one line with
exit 2, and carries a good one (converted from its flag's unit once) into the worker's own
RunSpec (seen by a plugin inside the worker) and into the stored record, read back by the
same copy.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import accelbench
from tests.conftest import cli_env

SRC = Path(accelbench.__file__).resolve().parent
SPY = str(Path(__file__).resolve().parent / "plugins" / "spec_spy.py")
ANCHOR = ('        help="runs of each case, each in a fresh worker (a suite interleaves them); '
          'the "\n        "headline CI then covers the variation between runs")\n')
FIELD = '''    probe_note_s: float = option(
        0.25, flag="--probe-note-ms", scale=1e3, lo=1.0, hi=1000.0,
        help="test-only option added by tests/test_option_one_field.py")
'''


@pytest.fixture(scope="module")
def patched(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package with the one field appended to MeasurementPolicy."""
    root = tmp_path_factory.mktemp("patched")
    shutil.copytree(SRC, root / "accelbench",
                    ignore=shutil.ignore_patterns("__pycache__"))
    spec = root / "accelbench" / "spec.py"
    text = spec.read_text()
    assert text.count(ANCHOR) == 1, "the anchor (MeasurementPolicy.repeats) moved"
    spec.write_text(text.replace(ANCHOR, ANCHOR + FIELD))
    return root


def _cli(root: Path, db: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = cli_env(db, **extra)
    env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "accelbench.cli", *args], env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def test_the_field_is_in_help_and_validated(patched: Path, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    help_text = _cli(patched, db, "run", "--help").stdout
    assert "--probe-note-ms" in help_text and "test-only option" in help_text
    assert "(default 250)" in " ".join(help_text.split())  # 0.25 s shown in ms
    # The unpatched package has no such option.
    plain = subprocess.run([sys.executable, "-m", "accelbench.cli", "run", "--help"],
                           env=cli_env(db), capture_output=True, text=True, check=False)
    assert "--probe-note-ms" not in plain.stdout
    for bad in ("0.5", "5000", "nan", "soon"):
        p = _cli(patched, db, "run", "lstm", "--size", "tiny", "--probe-note-ms", bad)
        lines = p.stderr.splitlines()
        assert p.returncode == 2, p.stderr
        assert len(lines) == 1 and lines[0].startswith("accelbench: error: argument "
                                                       "--probe-note-ms"), p.stderr
    assert not db.exists()


def test_the_field_reaches_the_worker_and_the_record(patched: Path, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    spy = tmp_path / "worker_spec.json"
    p = _cli(patched, db, "--plugin", SPY, "run", "spec_spy", "--size", "tiny",
             "--iterations", "3", "--no-energy", "--probe-note-ms", "40", "--json",
             ACCELBENCH_TEST_SPEC_SPY=str(spy))
    assert p.returncode == 0, p.stderr
    rid = json.loads(p.stdout)["id"]
    # The worker's own RunSpec (parsed and validated in the worker) has it, in seconds.
    assert json.loads(spy.read_text())["policy"]["probe_note_s"] == pytest.approx(0.04)
    # The stored record (what the worker was sent: spec.to_dict()) holds it in seconds.
    with sqlite3.connect(db) as conn:
        blobs = [row[0] for row in conn.execute("SELECT * FROM results")
                 for row in [[c for c in row if isinstance(c, str) and '"policy"' in c]]
                 if row]
    assert blobs, "no stored record carries the spec"
    assert any(json.loads(b).get("policy", json.loads(b).get("spec", {}).get("policy", {}))
               .get("probe_note_s") == pytest.approx(0.04) for b in blobs)
    # Read back through the patched package: a typed field of the stored spec.
    code = ("import sys; from accelbench.store import open_store; "
            f"r = open_store(sys.argv[1]).get({rid!r}); "
            "print(r.spec.policy.probe_note_s, r.status)")
    env = cli_env(db)
    env["PYTHONPATH"] = os.pathsep.join([str(patched), env.get("PYTHONPATH", "")])
    back = subprocess.run([sys.executable, "-c", code, str(db)], env=env,
                          capture_output=True, text=True, check=False)
    assert back.returncode == 0, back.stderr
    assert back.stdout.split() == ["0.04", "ok"]
