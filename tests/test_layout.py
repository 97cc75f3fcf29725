"""The layout's rules, checked on the source: vendor SDKs behind devices/gpu/, no private
name crossing a module, no import circle (imports inside functions counted)
(docs/architecture.md, "Layout"). The size of functions is ruff's budget (pyproject.toml)."""

from __future__ import annotations

import ast
import sys
from collections.abc import Mapping
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "accelbench"


def _modules() -> list[tuple[str, ast.Module, int]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        out.append((str(path.relative_to(SRC)), ast.parse(text), len(text.splitlines())))
    return out


def _imported_modules(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_gpu_sdks_are_imported_only_by_their_device_module() -> None:
    owners = {"pynvml": "devices/gpu/nvidia.py", "amdsmi": "devices/gpu/amd.py"}
    seen: dict[str, list[str]] = {sdk: [] for sdk in owners}
    for rel, tree, _ in _modules():
        for sdk in owners:
            if sdk in _imported_modules(tree):
                seen[sdk].append(rel)
    assert seen == {sdk: [owner] for sdk, owner in owners.items()}


def test_no_private_name_crosses_a_module() -> None:
    crossing = []
    for rel, tree, _ in _modules():
        aliases: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("accelbench"):
                for a in node.names:
                    if a.name.startswith("_") and not a.name.startswith("__"):
                        crossing.append(f"{rel}: from {node.module} import {a.name}")
                    aliases.add(a.asname or a.name)
            elif isinstance(node, ast.Import):
                aliases.update((a.asname or a.name).split(".")[0] for a in node.names
                               if a.name.startswith("accelbench"))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__") and isinstance(node.value, ast.Name)
                    and node.value.id in aliases):
                crossing.append(f"{rel}: {node.value.id}.{node.attr}")
    assert crossing == []


def module_files(package_dir: Path) -> dict[str, Path]:
    """Every module of the package at ``package_dir`` by dotted name (a package's
    ``__init__.py`` under the package's name)."""
    out = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports_of(name: str, modules: Mapping[str, Path]) -> set[str]:
    """The modules of ``modules`` that module ``name`` imports anywhere: at module level,
    inside functions, under ``TYPE_CHECKING``; relative imports resolved. A package's
    ``__init__`` run as a side effect of importing one of its modules is not counted."""
    path = modules[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{up}.{base}" if base else up
            # ``from pkg import mod`` imports the module pkg.mod; ``from mod import name``, mod
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                       for a in node.names]
        else:
            continue
        found.update(t for t in targets if t in modules)
    found.discard(name)
    return found


def import_circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one module of ``graph`` (Tarjan's
    algorithm), each sorted: every module of one reaches every other through imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                out.append(sorted(part))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 4 * len(graph) + 100))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(out)


def circles_in(package_dir: Path) -> list[str]:
    """Each import circle among the modules of ``package_dir`` as one line naming its files."""
    modules = module_files(package_dir)
    graph = {name: imports_of(name, modules) for name in modules}
    root = package_dir.parent
    return [" <-> ".join(str(modules[m].relative_to(root)) for m in part)
            for part in import_circles(graph)]


def test_no_import_circle_counting_imports_inside_functions() -> None:
    assert circles_in(SRC) == []


def test_the_circle_check_finds_a_circle_through_a_function_and_a_relative_import(
        tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "low.py").write_text("import os\n")
    # a -> b at module level, b -> c inside a function, c -> a by a relative import
    (pkg / "a.py").write_text("from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from pkg.c import thing\n    return thing\n")
    (pkg / "c.py").write_text("from . import low\nfrom .a import x\n")
    assert circles_in(pkg) == ["pkg/a.py <-> pkg/c.py <-> pkg/sub/b.py"]
    # Without the function's import there is no circle.
    (pkg / "sub" / "b.py").write_text("def f():\n    return 1\n")
    assert circles_in(pkg) == []


#: Lower layers and the layers above them they must never import: below the framework
#: seam, ``accelbench.frameworks`` (the registry below them) is asked about frameworks,
#: never ``backends/``; planning sizes what execution runs (``accelbench.phases.PhasePlan``)
#: without importing it.
NEVER_IMPORTED = {
    "accelbench.devices": ("accelbench.backends", "accelbench.execution", "accelbench.planning",
                           "accelbench.roofline", "accelbench.report"),
    "accelbench.opbench": ("accelbench.backends", "accelbench.execution", "accelbench.planning",
                           "accelbench.roofline", "accelbench.report"),
    "accelbench.planning": ("accelbench.execution", "accelbench.api", "accelbench.cli"),
    # The roofline's facts (stored peaks, breakdowns, theoretical tables, charts) sit below
    # what measures them (``execution.peaks``, ``execution.breakdown``), the planner's
    # estimate and the report's section, which read them; its files are written by
    # ``report.roofline_files``.
    "accelbench.roofline": ("accelbench.execution", "accelbench.isolation", "accelbench.planning",
                            "accelbench.report"),
    # One result in words (``result_text``, ``phase_text``) and in the terminal (``render``)
    # sit below the report, which prints a stored record the way ``run`` does.
    "accelbench.render": ("accelbench.report",),
    "accelbench.result_text": ("accelbench.report", "accelbench.render"),
    "accelbench.phase_text": ("accelbench.report", "accelbench.render"),
    # Datasets find the cache directory in ``accelbench.cachedir``, not in the planner.
    "accelbench.data": ("accelbench.planning",),
}


def layer_breaches(package_dir: Path, rules: Mapping[str, tuple[str, ...]]) -> list[str]:
    """Each import of a module under a key of ``rules`` into a package it names, as
    ``importer -> imported``."""
    modules = module_files(package_dir)
    out = []
    for name in modules:
        for low, above in rules.items():
            if name == low or name.startswith(f"{low}."):
                out.extend(f"{name} -> {t}" for t in sorted(imports_of(name, modules))
                           if any(t == a or t.startswith(f"{a}.") for a in above))
    return out


def test_a_lower_layer_imports_no_layer_above_it() -> None:
    assert layer_breaches(SRC, NEVER_IMPORTED) == []


def test_the_layer_check_finds_an_import_inside_a_function(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "low").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "low" / "__init__.py").write_text("")
    (pkg / "high.py").write_text("X = 1\n")
    (pkg / "low" / "a.py").write_text("def f():\n    from pkg.high import X\n    return X\n")
    assert layer_breaches(pkg, {"pkg.low": ("pkg.high",)}) == ["pkg.low.a -> pkg.high"]


def room_of(name: str) -> str:
    """The top-level part a module belongs to: ``accelbench.report.rows`` ->
    ``accelbench.report``; ``accelbench`` itself is its own."""
    return ".".join(name.split(".")[:2])


def room_circles(package_dir: Path) -> list[str]:
    """Each circle between the package's top-level parts (its subpackages and modules),
    imports inside functions counted, as one line naming the parts: two parts that import
    each other through any of their modules make one, though no module circle does."""
    modules = module_files(package_dir)
    graph: dict[str, set[str]] = {}
    for name in modules:
        room = room_of(name)
        graph.setdefault(room, set()).update(
            room_of(t) for t in imports_of(name, modules) if room_of(t) != room)
    return [" <-> ".join(part) for part in import_circles(graph)]


def test_no_top_level_part_imports_one_that_imports_it_back() -> None:
    assert room_circles(SRC) == []


def test_the_part_check_finds_two_parts_that_import_each_other(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "report").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "report" / "__init__.py").write_text("")
    # render.py -> report.rows, report.sections -> render.py: no module circle, a part one
    (pkg / "report" / "rows.py").write_text("X = 1\n")
    (pkg / "render.py").write_text("def f():\n    from pkg.report.rows import X\n    return X\n")
    (pkg / "report" / "sections.py").write_text("from pkg import render\n")
    assert circles_in(pkg) == []
    assert room_circles(pkg) == ["pkg.render <-> pkg.report"]
    (pkg / "render.py").write_text("def f():\n    return 1\n")
    assert room_circles(pkg) == []
