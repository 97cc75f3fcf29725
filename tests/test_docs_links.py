"""The README and docs/*.md: every relative link resolves (file and heading), the README
stays a user's page, its test command is .ci/run's, and every ``accelbench`` command line
shown in them is accepted by the parser."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from accelbench.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _prose(text: str) -> str:
    """The text outside fenced code blocks and inline code."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def _anchors(path: Path) -> set[str]:
    """GitHub's anchors for the headings of a Markdown file."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for line in FENCE.sub("", path.read_text(encoding="utf-8")).splitlines():
        m = re.match(r"#{1,6} (.+)", line)
        if not m:
            continue
        heading = m.group(1).strip().lower().replace("`", "")
        slug = re.sub(r"[^\w\- ]", "", heading).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _links() -> list[tuple[Path, str]]:
    return [(page, target) for page in PAGES
            for target in LINK.findall(_prose(page.read_text(encoding="utf-8")))
            if not re.match(r"[a-z]+:", target)]


def test_pages_have_relative_links() -> None:
    assert any(t.startswith("docs/") for p, t in _links() if p == README)


@pytest.mark.parametrize(("page", "target"), _links(),
                         ids=lambda v: v.name if isinstance(v, Path) else str(v))
def test_relative_link_resolves(page: Path, target: str) -> None:
    path, _, anchor = target.partition("#")
    dest = (page.parent / path).resolve() if path else page
    assert dest.exists(), f"{page.relative_to(ROOT)}: link to {target}: no such file"
    if anchor and dest.suffix == ".md":
        assert anchor in _anchors(dest), f"{page.relative_to(ROOT)}: {target}: no such heading"


def test_readme_is_a_users_page() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300
    # No test counts or timings of the project's own runs in the README.
    assert not re.search(r"\b\d+ tests\b|\d+m\d+s", "\n".join(lines))


def test_readme_test_command_is_ci_run() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    install = next(line for line in ci if line.startswith("python -m pip install"))
    pytest_line = next(line for line in ci if line.startswith("python -m pytest"))
    venv = next(line for line in ci if line.startswith("python3 -m venv"))
    activate = next(line for line in ci if line.startswith(". .venv/bin/activate"))
    readme = README.read_text(encoding="utf-8")
    command = " && ".join([venv, activate, install, pytest_line])
    assert f"\n{command}\n" in readme, command


def _command_lines(text: str) -> list[str]:
    """``accelbench ...`` lines of the bash blocks, continuations joined."""
    found = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            for part in line.split("&&"):
                words = shlex.split(part, comments=True)
                while words and re.match(r"[A-Z_]+=", words[0]):
                    words.pop(0)
                if words[:1] == ["accelbench"]:
                    found.append(shlex.join(words))
    return found


def test_every_shown_command_parses() -> None:
    parser = build_parser()
    shown = [(p.name, c) for p in PAGES for c in _command_lines(p.read_text(encoding="utf-8"))]
    assert len(shown) > 20
    bad = []
    for name, command in shown:
        try:
            parser.parse_args(shlex.split(command)[1:])
        except SystemExit:
            bad.append(f"{name}: {command}")
    assert bad == []
