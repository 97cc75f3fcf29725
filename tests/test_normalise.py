"""One rule for names (issue 23, items 8 and 9): any letter case accepted, the canonical
lower-case form stored; filters checked like ``run`` checks them, or as the store holds
them; workload and size names are identifiers; tags bounded and free of control
characters. Real subprocesses against real SQLite stores."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from accelbench.errors import ConfigError
from accelbench.names import MAX_TAG_LEN, check_identifier, check_tag, fold
from accelbench.result import Result
from accelbench.spec import RunSpec, check_size, normalize_framework, normalize_precision
from accelbench.stats import compute_stats
from accelbench.store import open_store
from accelbench.workloads.registry import get_workload
from tests.conftest import run_cli

QUICK = ("--iterations", "3", "--no-energy", "-q")


def _columns(db: Path) -> list[tuple[str, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT workload, size, precision, device, framework, tag "
                            "FROM results").fetchall()


def test_run_in_any_letter_case_stores_the_canonical_names(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    proc = run_cli("run", "LSTM", "--size", "TINY", "--precision", "FP32", "--device", "CPU",
                   "--framework", "Torch", "--tag", "Mixed Case Kept", *QUICK, db=db)
    assert proc.returncode == 0, proc.stderr
    assert _columns(db) == [("lstm", "tiny", "fp32", "cpu", "torch", "Mixed Case Kept")]


def test_the_resolvers_fold_case_for_the_api() -> None:
    assert fold("  CUDA:0 ") == "cuda:0"
    assert get_workload("ResNet50").name == "resnet50"
    assert check_size("SMALL") == "small"
    assert normalize_precision("BF16") == "amp_bf16"
    assert normalize_framework("PyTorch") == "torch"
    with pytest.raises(ConfigError, match="unknown precision 'FP7'"):
        normalize_precision("FP7")


def _seed(db: Path) -> None:
    times = (0.10, 0.11, 0.12, 0.10)
    with open_store(str(db)) as st:
        for i, (workload, device) in enumerate([("lstm", "cpu"),
                                                ("plugin_gone", "cpu"),
                                                ("lstm", "weird-npu:0")]):
            spec = RunSpec(workload=workload, size="tiny", batch_size=4, device=device)
            st.save(Result(
                id=f"norm{i:08d}", spec=spec, status="ok", sample_unit="sample",
                samples_per_step=4, param_count=10,
                stats=compute_stats(times, 4, trim_fraction=0.0, stop_reason="iterations"),
                iteration_times_s=times, machine={"hostname": "h"}, suite_id="s",
                started_at=f"2026-01-0{i + 1}T00:00:00+00:00",
                finished_at=f"2026-01-0{i + 1}T00:00:01+00:00"))


@pytest.fixture
def seeded(tmp_path: Path) -> Path:
    db = tmp_path / "seed.db"
    _seed(db)
    return db


@pytest.mark.parametrize(("argv", "ids"), [
    (("--workload", "LSTM"), {"norm00000000", "norm00000002"}),
    (("--size", "Tiny", "--device", "CPU"), {"norm00000000", "norm00000001"}),
    (("--precision", "FP32", "--framework", "TORCH"),
     {"norm00000000", "norm00000001", "norm00000002"}),
    # values only the store knows (an unloaded plugin's workload, an old device string)
    (("--workload", "plugin_gone"), {"norm00000001"}),
    (("--device", "weird-npu:0"), {"norm00000002"}),
    # valid but absent: an empty answer, exit 0
    (("--workload", "vgg16"), set()),
    (("--device", "cuda"), set()),
])
def test_filters_take_valid_or_stored_values(seeded: Path, argv: tuple[str, ...],
                                             ids: set[str]) -> None:
    proc = run_cli("results", "--json", *argv, db=seeded)
    assert proc.returncode == 0, proc.stderr
    assert {r["id"] for r in json.loads(proc.stdout)} == ids


@pytest.mark.parametrize(("command", "argv", "says"), [
    (("results",), ("--size", "enormous"), "unknown size 'enormous'"),
    (("results",), ("--device", "quantum"), "unknown device 'quantum'"),
    (("results",), ("--workload", "lstmm"), "did you mean lstm"),
    (("export", "--format", "csv"), ("--precision", "fp7"), "unknown precision"),
    (("compare", "device=cpu", "device=cpu"), ("--framework", "caffe"), "unknown framework"),
])
def test_filters_refuse_what_run_refuses(seeded: Path, command: tuple[str, ...],
                                         argv: tuple[str, ...], says: str) -> None:
    before = seeded.read_bytes()
    proc = run_cli(*command, *argv, db=seeded)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("accelbench: error: --"), proc.stderr
    assert says in lines[0]
    assert seeded.read_bytes() == before


def test_identifiers() -> None:
    for good in ("lstm", "inception_v3", "seq512", "my-model.v2", "a" * 64):
        assert check_identifier("workload", good) == good
    for bad in ("", "LSTM", "1model", "evil<script>", "a b", "a" * 65, "é", None):
        with pytest.raises(ConfigError, match="not a valid identifier"):
            check_identifier("workload", bad, "plugin.py")


def test_a_plugin_size_name_must_be_an_identifier(tmp_path: Path) -> None:
    plugin = tmp_path / "badsize.py"
    plugin.write_text(
        "from accelbench.workloads.registry import Workload, register_workload\n"
        "@register_workload\n"
        "class W(Workload):\n"
        "    name = 'okname'\n    family = 't'\n    sample_unit = 's'\n"
        "    default_batch_sizes = {'tiny': (1,), 'small': (1,), 'paper': (1,),\n"
        "                           'Big\\nOne': (1,)}\n")
    proc = run_cli("--plugin", str(plugin), "list", db=tmp_path / "r.db")
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert "size name 'Big\\nOne'" in line and str(plugin) in line and "\n" not in line


def test_tags() -> None:
    assert check_tag("x" * MAX_TAG_LEN) == "x" * MAX_TAG_LEN
    assert check_tag("ünïcödé — ok") == "ünïcödé — ok"
    for bad, says in (("x" * (MAX_TAG_LEN + 1), "at most 200"), ("a\nb", "control"),
                      ("\x1b[2J", "control"), ("a\u2028b", "control"), ("a\u202eb", "control")):
        with pytest.raises(ConfigError, match=says):
            check_tag(bad)


def test_the_api_refuses_a_bad_tag_before_anything_runs(tmp_path: Path) -> None:
    from accelbench.planning.cases import prepare_case
    from accelbench.spec import RunChoices

    with pytest.raises(ConfigError, match="--tag must not contain control"):
        prepare_case("lstm", RunChoices(size="tiny", tag="a\nb"), check_hardware=False)
