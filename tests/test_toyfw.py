"""A third framework is one plugin: tests/plugins/toyfw.py (numpy) registers a backend, a
workload and its implementation, and trains through the real runner into the store.

Nothing in accelbench names it: the framework name is a registry key, the worker and the
probe import the plugin that registers it, and every framework decision (devices, fast
paths, data-parallel runs, OOM) is asked of its backend.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import TESTS, cli_env, run_cli

TOYFW = str(TESTS / "plugins" / "toyfw.py")
SRC = Path(__file__).resolve().parents[1] / "src" / "accelbench"


def test_toy_framework_trains_through_the_runner_and_is_stored(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    out = run_cli("--plugin", TOYFW, "run", "toy_regression", "--framework", "toyfw",
                  "--size", "tiny", "--no-energy", "--iterations", "30", db=db)
    assert out.returncode == 0, out.stderr
    # Read back through the store with the plugin loaded (an alias finds it by name).
    out = run_cli("--plugin", TOYFW, "results", "--framework", "toy", "--json", db=db)
    assert out.returncode == 0, out.stderr
    (r,) = json.loads(out.stdout)
    assert r["status"] == "ok", r["error"]
    assert (r["framework"], r["workload"]) == ("toyfw", "toy_regression")
    assert r["param_count"] == 9  # 8 weights + bias at size tiny: the backend's own step
    assert r["iterations"] == 30 and r["samples_per_s"] > 0
    assert r["flop_per_sample"] == 6.0 * 8  # its backend counted the FLOPs
    assert r["compile_s"] is None


def test_toy_framework_decisions_are_its_backend_s(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    base = ["--plugin", TOYFW, "run", "toy_regression", "--framework", "toyfw", "--size",
            "tiny", "--no-energy"]
    refusals = {
        "--compile": "compile: framework toyfw has no fast paths; drop the option",
        "--nproc-per-node=2": "framework toyfw not yet",
        "--device=cuda": "unknown device 'cuda' for toyfw; use cpu",
    }
    for flag, message in refusals.items():
        out = run_cli(*base, flag, db=db)
        assert out.returncode == 2 and message in out.stderr, (flag, out.stderr)
    out = run_cli("--plugin", TOYFW, "run", "toy_regression", "--framework", "toyf", db=db)
    assert out.returncode == 2 and "did you mean toyfw" in out.stderr, out.stderr
    # Without the plugin the name is unknown, and the list of frameworks says which exist.
    out = run_cli("run", "lstm", "--framework", "toyfw", db=db)
    assert out.returncode == 2
    assert "unknown framework 'toyfw'" in out.stderr and "torch, jax" in out.stderr
    assert not db.exists()


def test_toy_framework_is_listed_with_its_counts(tmp_path: Path) -> None:
    out = run_cli("--plugin", TOYFW, "list", "--json", db=tmp_path / "r.db")
    assert out.returncode == 0, out.stderr
    info = {w["name"]: w for w in json.loads(out.stdout)}
    assert info["toy_regression"]["frameworks"] == ["toyfw"]
    assert info["toy_regression"]["sizes"]["small"]["param_count"] == 65
    assert info["resnet50"]["frameworks"] == ["torch", "jax"]


def test_the_registry_is_a_key_not_a_list() -> None:
    """In a fresh interpreter: the built-ins come first, a plugin's backend joins them,
    a second backend under a taken name is refused, labels fall back to the name."""
    code = f"""
from accelbench.backends import framework_names, framework_label, register_backend
from accelbench.errors import ConfigError
from accelbench.workloads.registry import load_plugin
assert framework_names() == ("torch", "jax"), framework_names()
assert framework_label("mxnet") == "mxnet" and framework_label("pytorch") == "PyTorch"
load_plugin({TOYFW!r})
assert framework_names() == ("torch", "jax", "toyfw")
class Other:
    name = "toyfw"
try:
    register_backend(Other)
except ConfigError as exc:
    print("refused:", exc)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=cli_env(), check=False, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "refused: framework 'toyfw' is already registered" in out.stdout


def test_no_module_of_accelbench_names_the_toy_framework_or_imports_a_framework_by_name(
) -> None:
    """The seam: the toy framework needed no edit outside its own file, and nothing outside
    backends/ imports torch or jax's backend modules directly."""
    framework_import = re.compile(r"^\s*(from|import) accelbench\.backends\.(torch|jax)\b",
                                  re.MULTILINE)
    for path in SRC.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "toyfw" not in text, path
        if "backends" not in path.relative_to(SRC).parts:
            assert not framework_import.search(text), path
