"""``docs/cli.md``, the command reference, generated from the ``accelbench`` parser.

``python -m accelbench.cli.docs --out docs/cli.md`` rewrites it; without ``--out`` the
Markdown goes to standard output. Nothing here depends on the terminal or the
environment: the text is built from the parser's actions (option strings, metavars,
choices, help), never from argparse's width-dependent help layout, so every machine
generates the same bytes (``tests/test_cli_docs.py`` checks the file is current).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from accelbench.cli import build_parser
from accelbench.cli.args import add_options
from accelbench.options import option

REGENERATE = "python -m accelbench.cli.docs --out docs/cli.md"

HEADER = f"""# Command reference

Every `accelbench` subcommand with its options and their help, generated from the
command's own parser: do not edit by hand. Regenerate with
`{REGENERATE}` (`tests/test_cli_docs.py` fails when this
file is not current). `accelbench COMMAND --help` prints the same help in a terminal.
What the commands are for: the [README](../README.md) and [the other pages](README.md).
"""

_MD_SPECIAL = re.compile(r"([\\`*_<>])")


def _text(text: str | None) -> str:
    """Help text on one line, Markdown's special characters escaped."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join((text or "").split()))


def _code(text: str) -> str:
    return f"``{text}``" if "`" in text else f"`{text}`"


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    # argparse's own expansion of %(default)s, %(choices)s and %%: no layout involved.
    return parser._get_formatter()._expand_help(action)  # noqa: SLF001


def _metavar(parser: argparse.ArgumentParser, action: argparse.Action, default: str) -> str:
    return parser._get_formatter()._format_args(action, default)  # noqa: SLF001


def _signature(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.option_strings:
        return _metavar(parser, action, action.dest)
    flags = ", ".join(action.option_strings)
    if action.nargs == 0:
        return flags
    return f"{flags} {_metavar(parser, action, action.dest.upper())}"


def _choices_note(action: argparse.Action) -> str:
    """The choices, where a metavar hides them."""
    if action.metavar is None or not isinstance(action.choices, (list, tuple, dict)):
        return ""
    return f" (one of: {', '.join(str(c) for c in action.choices)})"


def _is_global_copy(action: argparse.Action) -> bool:
    """The global options every subcommand also accepts after its name."""
    return action.dest.endswith("_sub")


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[
        tuple[str, argparse.ArgumentParser, str]]:
    for action in parser._actions:  # noqa: SLF001
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            helps = {c.dest: c.help or "" for c in action._choices_actions}  # noqa: SLF001
            for name, sub in action.choices.items():
                yield name, sub, helps.get(name, "")


def _options(parser: argparse.ArgumentParser, *, skip_globals: bool) -> list[str]:
    lines: list[str] = []
    for group in parser._action_groups:  # noqa: SLF001
        shown = [a for a in group._group_actions  # noqa: SLF001
                 if a.help != argparse.SUPPRESS and not isinstance(a, argparse._HelpAction)  # noqa: SLF001
                 and not isinstance(a, argparse._SubParsersAction)  # noqa: SLF001
                 and not (skip_globals and _is_global_copy(a))]
        if not shown:
            continue
        lines += ["", f"*{_text(group.title)}*", ""] if group.title else [""]
        if group.description:
            lines += [_text(group.description), ""]
        for a in shown:
            sig = _code(_signature(parser, a))
            text = _text(_help(parser, a))
            note = _text(_choices_note(a))
            lines.append(f"- {sig}" + (f": {text}{note}" if text or note else ""))
    return lines


def _usage(path: str, parser: argparse.ArgumentParser) -> str:
    positionals = [_signature(parser, a) for a in parser._actions  # noqa: SLF001
                   if not a.option_strings and not isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001
    return " ".join([path, "[options]", *positionals])


def _command(path: str, parser: argparse.ArgumentParser, summary: str) -> list[str]:
    lines = ["", f"## {path}", ""]
    if summary:
        lines += [_text(summary), ""]
    if parser.description and parser.description != summary:
        lines += [_text(parser.description), ""]
    lines += ["```text", _usage(path, parser), "```"]
    lines += _options(parser, skip_globals=True)
    for name, sub, help_text in _subcommands(parser):
        lines += _command(f"{path} {name}", sub, help_text)
    return lines


def render() -> str:
    """The whole of ``docs/cli.md``."""
    parser = build_parser()
    commands = list(_subcommands(parser))
    lines = [HEADER.rstrip("\n"), "", "## Commands", "", "| command | what it does |",
             "| --- | --- |"]
    for name, _, help_text in commands:
        anchor = re.sub(r"[^a-z0-9 -]", "", f"accelbench {name}".lower()).replace(" ", "-")
        lines.append(f"| [`{name}`](#{anchor}) | {_text(help_text).replace('|', '&#124;')} |")
    lines += ["", "## Global options", "",
              "Given before the command, or after it (the later one wins).",
              *_options(parser, skip_globals=False)]
    for name, sub, help_text in commands:
        lines += _command(f"accelbench {name}", sub, help_text)
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, kw_only=True, slots=True)
class DocsOptions:
    """``python -m accelbench.cli.docs``."""

    out: str | None = option(None, flag="--out", metavar="PATH", nonempty=True,
                             help="write here (whole, then renamed into place); default: "
                             "stdout")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m accelbench.cli.docs",
                                 description="Write the command reference (docs/cli.md).")
    add_options(ap, DocsOptions, filled=True)
    args = ap.parse_args(argv)
    text = render()
    if args.out is None:
        sys.stdout.write(text)
        return 0
    out = Path(args.out)
    if out.exists() and not out.is_file():
        sys.stderr.write(f"{ap.prog}: error: --out {args.out}: not a regular file "
                         "(only a regular file is ever replaced)\n")
        return 2
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
