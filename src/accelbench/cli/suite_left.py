"""What ``suite`` says about the cases it left and those it flagged: why nothing ran,
the planned cases ``suite status`` adds (never started), and the flagged cases' summary
wrapped to the terminal."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from rich.console import Console

from accelbench.errors import AccelbenchError


def nothing_ran(st: Any, sid: str, cases: list[Any]) -> str:
    """Why a suite ran no case: every run of its ``cases`` is stored already, or the runs
    left are held by another process running the same suite."""
    counts = st.case_key_counts(sid)
    left = [c for c in cases if counts.get(c.spec.case_key(), 0) < c.spec.policy.repeats]
    if not left:
        return f"nothing left to run: all {len(cases)} cases of suite {sid} are stored"
    return (f"nothing run here: the {len(left)} case(s) of suite {sid} not stored yet are "
            "held by another process running it (see suite status)")


def terminal_width(console: Console) -> int:
    """Columns of ``console``'s terminal; without one (a pipe, a log file), ``COLUMNS``
    or 80."""
    import shutil

    return console.width if console.is_terminal else shutil.get_terminal_size().columns


#: At most this many flagged cases are listed one a line after a suite (then a count).
FLAGGED_LISTED = 20


def noise_summary(results: list[Any], details: str, width: int = 80) -> list[str]:
    """What a suite says about its noise on stderr, wrapped to ``width`` columns (the
    per-verdict lines are ``--verbose``'s): how many cases were flagged, by which verdict,
    and what to do; then each flagged case on a line of its own (its id, case and
    verdicts); how many carry measurement notes; and the command that shows one case's
    reasons (``details``, on a line of its own so that it is never cut)."""
    import textwrap

    from accelbench.verdicts import CONTENTION, KIND_LABELS, UNSTABLE

    def wrap(text: str, first: str = "", rest: str = "  ") -> list[str]:
        return textwrap.wrap(text, width=max(width, 40), initial_indent=first,
                             subsequent_indent=rest, break_on_hyphens=False) or [first]

    flagged = [r for r in results if r.noisy]
    noted = sum(1 for r in results if r.noise.get("measure_notes"))
    notes = (f"{noted} case(s) have notes on how they were measured (a minimum reached past "
             "--max-time, a shortened energy window)") if noted else ""
    if not flagged:
        return wrap(f"accelbench: note: {notes}; see them with --verbose") if notes else []
    busy = sum(1 for r in flagged if CONTENTION in r.noise_kinds)
    vary = sum(1 for r in flagged if UNSTABLE in r.noise_kinds)
    why = [f"{busy} measured on a busy machine (other processes competed for its CPUs or GPU)"
           if busy else "",
           f"{vary} with step times that vary more than a quiet run's" if vary else ""]
    todo = ("rerun them when the machine is quiet" if busy else
            "rerun them with a longer --max-time or on a quiet machine")
    lines = wrap(f"accelbench: warning: {len(flagged)} of {len(results)} case(s) flagged: "
                 f"{'; '.join(w for w in why if w)}. Their figures may mislead: {todo}.")
    for r in flagged[:FLAGGED_LISTED]:
        s = r.spec
        kinds = ", ".join(KIND_LABELS.get(k, k) for k in r.noise_kinds) or "flagged"
        lines += wrap(f"{r.id[:8]}  {s.workload} {s.size} bs={s.batch_size} {s.precision} "
                      f"{s.device}: {kinds}", "  ", "      ")
    if len(flagged) > FLAGGED_LISTED:
        lines.append(f"  ... and {len(flagged) - FLAGGED_LISTED} more")
    if notes:
        lines += wrap(f"{notes}.", "  ")
    lines += wrap("Reasons per case: --verbose, or one case's in full:", "  ")
    lines.append(f"    {details}")
    return lines


#: The state of a case of a suite's stored plan that is not stored and that no live process
#: runs: never started (the suite was stopped first), or stopped while it ran.
TO_RUN = "to run"


def with_planned(args: argparse.Namespace, status: Any) -> tuple[Any, str]:
    """``status`` with the cases of the suite's stored plan that the store has no trace
    of (a suite killed part way: never started, or stopped while it ran) added as
    ``to run``, in the plan's order; and why the plan could not be listed (``""`` when it
    was, or none is stored)."""
    from accelbench import api
    from accelbench.store.jobs import CaseStatus

    try:
        plan = api.stored_plan(args.db, status.suite_id)
        cases = api.plan_cases(plan) if plan is not None else []
    except AccelbenchError as exc:  # a plugin not loaded here, a plan from a newer version
        return status, (f"the suite's planned cases cannot be listed here ({exc}); give "
                        "the --plugin options it was started with to list them")
    known = {c.case_key for c in status.cases}
    planned: list[Any] = []
    for c in cases:
        key = c.spec.case_key()
        if key not in known:  # (a case of --repeats appears once)
            known.add(key)
            planned.append(CaseStatus(
                case_key=key, state=TO_RUN, label=planned_label(c.spec),
                detail="planned, not stored, no live process runs it (never started, or "
                "stopped while it ran): suite resume runs it"))
    return dataclasses.replace(status, cases=(*status.cases, *planned)), ""


def planned_label(spec: Any) -> str:
    """``lstm tiny bs4 fp32 torch`` (``x2`` for two ranks): a planned case as ``suite
    status`` labels the stored ones."""
    ranks = spec.topology.world_size
    return " ".join([spec.workload, spec.size, f"bs{spec.batch_size}", spec.precision,
                     spec.framework, *([f"x{ranks}"] if ranks > 1 else [])])
