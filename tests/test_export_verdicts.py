"""A JSON export's records read alike whichever version wrote them: a record that stores
its noise figures only is exported with the verdict read from them, in the keys older
records stored it under (``flagged``, ``kinds``, ``by_kind``, ``reasons``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from accelbench.store import open_store
from tests.noise_scenarios import measure
from tests.test_verdicts_read import VERDICT_KEYS, WRITTEN, _record


def _export(db: Path, out: Path) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "accelbench.cli", "--db", str(db), "export",
                           "--format", "json", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(out.read_text("utf-8"))


def test_exported_records_carry_the_verdict_old_records_stored(tmp_path: Path) -> None:
    names = ("quiet", "busy_just_above", "level_shift", "busy_and_wide")
    db = tmp_path / "r.db"
    with open_store(str(db)) as st:
        for i, name in enumerate(names):
            now = measure(name)
            assert not set(VERDICT_KEYS) & set(now)  # stored as figures only
            st.save(_record(f"new{i}", now))
            st.save(_record(f"old{i}", WRITTEN[name]))
    doc = _export(db, tmp_path / "x.json")
    records = {r["id"]: r for r in doc["records"]}
    cases = {c["result_id"]: c for c in doc["cases"]}
    assert len(records) == 2 * len(names)
    for i, name in enumerate(names):
        new, old = records[f"new{i}"]["noise"], records[f"old{i}"]["noise"]
        for key in VERDICT_KEYS:
            assert new[key] == WRITTEN[name][key] == old[key], (name, key)
        assert cases[f"new{i}"]["noisy"] == cases[f"old{i}"]["noisy"] == WRITTEN[name]["flagged"]
    # Not every scenario is clean: the verdict in the export is not a constant.
    assert {records[f"new{i}"]["noise"]["flagged"] for i in range(len(names))} == {True, False}
