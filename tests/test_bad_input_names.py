"""Issue 46: every bad invocation of tests/test_bad_input.py is refused with a line that
names what was wrong: the offending option or value.

tests/test_bad_input.py checks exit 2, one line, no traceback and an unchanged store; it
never looked at what the line says, so "error: invalid value" would pass it. This file
replays the same table (the same cases, the same store, the same runner) and asserts
that the line holds one of the invocation's own words: an option's name, a value, a
``key=value`` selector's key or value, an environment variable's name or value, or the
file or directory it pointed at. A value that cannot be printed as given (bytes that are
not UTF-8, control characters) counts when it is shown escaped.
"""

from __future__ import annotations

import pytest

from tests.test_bad_input import BAD, BAD_ENV, Outcome, outcomes  # noqa: F401 (the replay)

# Where the line names something else, and why that is right (or known to be wrong).
NAMES_OTHER = {
    "no-command": "COMMAND",  # nothing was given: the line names what is missing
}
# Lines that name the wrong thing today: kept visible (strict xfail) until fixed.
KNOWN_VAGUE = {
    "sweep-no-gpu": "names the GPU it lacks (--device/--gpu), not --power-limits",
    "sweep-unknown-workload": "refuses the GPU knob before the unknown workload 'lstmm'",
}

CASES: dict[str, tuple[list[str], dict[str, str]]] = {
    **{cid: (argv, {}) for cid, argv in BAD},
    **{cid: (argv, env) for cid, env, argv in BAD_ENV},
}


def words(case_id: str, argv: list[str], env: dict[str, str]) -> list[str]:
    """What the line may name: each word of the invocation, placeholders resolved."""
    out: list[str] = []
    for a in [*argv, *env.keys(), *env.values()]:
        a = a.replace("{file}", f"{case_id}/file").replace("{dir}", f"{case_id}/dir")
        out.append(a)
        for part in a.split("=", 1) if "=" in a else ():
            out.append(part)
        out.append(a.encode("unicode_escape", "backslashreplace").decode("ascii"))
        out.append(ascii(a)[1:-1])
    return [w for w in out if w.strip()]


def _params() -> list[object]:
    out: list[object] = []
    for cid in CASES:
        marks = [pytest.mark.xfail(reason=KNOWN_VAGUE[cid], strict=True)] \
            if cid in KNOWN_VAGUE else []
        out.append(pytest.param(cid, marks=marks, id=cid))
    return out


@pytest.mark.parametrize("case_id", _params())
def test_the_error_line_names_the_offending_option_or_value(
        outcomes: dict[str, Outcome], case_id: str) -> None:  # noqa: F811
    o = outcomes[case_id]
    assert o.returncode == 2, o.stderr[-400:]
    line = o.stderr.strip().splitlines()[0]
    if case_id in NAMES_OTHER:
        assert NAMES_OTHER[case_id] in line, line
        return
    argv, env = CASES[case_id]
    named = [w for w in words(case_id, argv, env) if w in line]
    assert named, f"the line names none of {argv + list(env)}: {line}"


def test_the_replay_is_the_whole_table() -> None:
    assert len(CASES) == len(BAD) + len(BAD_ENV) >= 300
    assert set(NAMES_OTHER) | set(KNOWN_VAGUE) <= set(CASES)
