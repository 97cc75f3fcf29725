"""The process layer (``accelbench.isolation``) sits under the code that runs cases: it
imports nothing from the layers that start children (execution, planning, the CLI, the
API, reports), counting imports inside functions, and its modules form no circle. What a
child runs is named by module (``"accelbench.execution.worker"``), never imported here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "accelbench"
ABOVE = ("accelbench.execution", "accelbench.planning", "accelbench.cli", "accelbench.api",
         "accelbench.report", "accelbench.roofline", "accelbench.opbench",
         "accelbench.store", "accelbench.sinks", "accelbench.launchers")


def _imports(path: Path) -> set[str]:
    """Every accelbench module ``path`` imports, anywhere in the file."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module != "accelbench":  # `from accelbench import jsonout`: jsonout
                found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return {name for name in found if name == "accelbench" or name.startswith("accelbench.")}


def _isolation_modules() -> dict[str, Path]:
    return {f"accelbench.isolation.{p.stem}": p for p in sorted((SRC / "isolation").glob("*.py"))
            if p.stem != "__init__"}


def test_the_process_layer_imports_no_layer_above_it() -> None:
    upward = sorted(f"{name} -> {imp}" for name, path in _isolation_modules().items()
                    for imp in _imports(path)
                    if imp == "accelbench" or imp.startswith(ABOVE))
    assert upward == []


def test_the_process_layer_has_no_circle() -> None:
    modules = _isolation_modules()
    edges = {name: {m for m in modules if any(i == m or i.startswith(m + ".")
                                              for i in _imports(path))} - {name}
             for name, path in modules.items()}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(nxt == goal or reaches(nxt, goal, seen | {nxt})
                   for nxt in edges[start] - seen)

    assert sorted(m for m in modules if reaches(m, m, set())) == []


def test_the_check_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text("def g():\n    from accelbench.execution import worker\n")
    assert "accelbench.execution" in _imports(f)


def test_an_error_raised_in_a_child_is_raised_again_in_the_parent() -> None:
    """Real children (fresh interpreters): accelbench's own error comes back as its class
    with its message (a bad workload stays exit 2 in the CLI); any other as IsolatedError."""
    from accelbench.errors import ConfigError
    from accelbench.isolation.isolate import IsolatedError, call

    with pytest.raises(ConfigError, match=r"^unknown workload 'no_such_workload'"):
        call("accelbench.workloads.registry:get_workload", {"name": "no_such_workload"},
             what="t", timeout_s=300)
    with pytest.raises(IsolatedError, match=r"^t: JSONDecodeError: ") as info:
        call("json:loads", {"s": "{"}, what="t", timeout_s=300)
    assert info.value.kind == "raised"
