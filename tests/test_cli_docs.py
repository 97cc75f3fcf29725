"""docs/cli.md is generated from the parser (``python -m accelbench.cli.docs``): it must be
current, name every subcommand and option, and come out the same at any terminal width."""

from __future__ import annotations

import argparse
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from accelbench.cli import build_parser
from accelbench.cli.docs import REGENERATE, main, render

ROOT = Path(__file__).resolve().parents[1]
CLI_MD = ROOT / "docs" / "cli.md"


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("ACCELBENCH_") and k not in ("COLUMNS", "LINES")}
    return {**env, **extra}


def test_cli_md_is_current() -> None:
    # A real process, as the documented command runs, at an odd terminal width.
    proc = subprocess.run([sys.executable, "-m", "accelbench.cli.docs"], capture_output=True,
                          text=True, env=_clean_env(COLUMNS="37"), timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == CLI_MD.read_text(encoding="utf-8"), (
        f"docs/cli.md is not current: regenerate it with `{REGENERATE}`")


def test_every_subcommand_and_option_is_documented() -> None:
    text = render()
    parser = build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert len(sub.choices) >= 18
    for name, p in sub.choices.items():
        assert f"\n## accelbench {name}\n" in text, name
        section = text.split(f"\n## accelbench {name}\n", 1)[1].split("\n## accelbench ", 1)[0]
        plain = re.sub(r"\\(.)", r"\1", section)  # Markdown's escapes undone
        for action in p._actions:
            if isinstance(action, argparse._HelpAction) or action.dest.endswith("_sub"):
                continue
            for flag in action.option_strings:
                assert flag in section, f"{name}: {flag} missing from docs/cli.md"
            if action.help and action.help != argparse.SUPPRESS and "%" not in action.help:
                words = " ".join(action.help.split())[:40]
                assert words in plain, (name, words)
    for flag in ("--db", "--plugin", "--debug", "--quiet", "--version"):
        assert f"`{flag}" in text.split("\n## accelbench ", 1)[0] or f", {flag}" in text


def test_output_does_not_depend_on_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    narrow = render()
    monkeypatch.setenv("COLUMNS", "250")
    assert render() == narrow


def test_out_writes_the_file_and_replaces_only_regular_files(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cli.md"
    out.write_text("stale\n", encoding="utf-8")
    assert main(["--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == render()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cli.md"]

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert main(["--out", str(fifo)]) == 2
    assert "not a regular file" in capsys.readouterr().err
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cli.md", "fifo"]
