"""The layout's rules, checked on the source: vendor SDKs behind devices/gpu/, no private
name crossing a module, no module over 500 lines (docs/architecture.md, "Layout")."""

from __future__ import annotations

import ast
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


def test_no_module_is_over_500_lines() -> None:
    assert [(rel, n) for rel, _, n in _modules() if n > 500] == []
