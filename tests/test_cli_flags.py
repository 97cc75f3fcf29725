"""No hand-written flag: every subcommand's options come from ``option()`` fields.

Two views of one rule. In the source (an AST scan of ``src/accelbench/cli``), the only
``add_argument`` calls are the generator's (``args._add_one``) and the global options'
(``cli/__init__``: ``--db``, ``--plugin``, ``--debug``, ``--quiet``, ``--version``). In the
parser as built, every argument of every subcommand but ``--help`` and the global ones
was made by the generator from a dataclass field (it marks each action it adds).
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import accelbench.cli
from accelbench.cli import build_parser
from accelbench.options import FieldOption

CLI = Path(accelbench.cli.__file__).resolve().parent
#: Where ``add_argument`` may be called: (module, function).
ALLOWED = {("args.py", "_add_one"), ("__init__.py", "_add_global_args"),
           ("__init__.py", "build_parser")}
GLOBAL_DESTS = {"help", "version", "db", "plugin", "debug", "quiet", "db_sub", "plugin_sub",
                "debug_sub", "quiet_sub"}


def _calls(path: Path) -> list[tuple[str, int]]:
    """(enclosing function, line) of each ``.add_argument(...)`` call in ``path``."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, func: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, (ast.FunctionDef,
                                                    ast.AsyncFunctionDef)) else func
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute) \
                    and child.func.attr == "add_argument":
                found.append((func, child.lineno))
            visit(child, name)

    visit(ast.parse(path.read_text(encoding="utf-8")), "<module>")
    return found


def test_no_add_argument_outside_the_generator_and_the_global_options() -> None:
    stray = [f"{path.name}:{line} in {func}()"
             for path in sorted(CLI.glob("*.py"))
             for func, line in _calls(path) if (path.name, func) not in ALLOWED]
    assert stray == [], "hand-written flags (declare an option() field instead): " \
        + ", ".join(stray)
    # The scan sees calls at all: the generator's own are found.
    assert _calls(CLI / "args.py"), "the AST scan found no add_argument at all"


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


def test_every_argument_of_every_subcommand_comes_from_a_field() -> None:
    subs = _subparsers(build_parser())
    assert len(subs) >= 18  # list ... store, sweep-report
    made = 0
    for name, sub in subs.items():
        for action in sub._actions:
            if action.dest in GLOBAL_DESTS:
                continue
            fo = getattr(action, "option_field", None)
            assert isinstance(fo, FieldOption), \
                f"accelbench {name}: {action.option_strings or action.dest} is hand-written"
            made += 1
    assert made > 150  # every subcommand's options, counted


def test_a_generated_option_is_checked_by_its_field() -> None:
    """The flags keep their meaning: roofline's --repeats is its own field (profiled
    steps, at most 1000), not run's (runs of a case, at most 100)."""
    subs = _subparsers(build_parser())

    def field_of(cmd: str, flag: str) -> FieldOption:
        action = next(a for a in subs[cmd]._actions if flag in a.option_strings)
        fo: FieldOption = action.option_field  # type: ignore[attr-defined]
        return fo

    run_repeats, roofline_repeats = field_of("run", "--repeats"), field_of("roofline",
                                                                            "--repeats")
    assert run_repeats.field is not roofline_repeats.field
    assert (run_repeats.opt.hi, roofline_repeats.opt.hi) == (100, 1000)
    assert "profiled steps" in roofline_repeats.opt.help
    # One declaration shared: run's and sweep's --size are RunChoices.size itself.
    assert field_of("run", "--size").field is field_of("sweep", "--size").field
    assert field_of("run", "--precision").field is field_of("roofline", "--precision").field
