"""The phases of a record in words and as a terminal table: ``run``'s summary and
``results --wide`` (the report's phase table is :mod:`accelbench.report.phase_view`).

Every energy figure says what it is: a measured difference with its CI, a difference
indistinguishable from zero (its CI includes 0), a negative one (the loops did not add
up), or unavailable with the reason; none is clipped to zero or hidden.
"""

from __future__ import annotations

from typing import Any

from accelbench.phase_summary import energy_reason, energy_status, share, step_time
from accelbench.phases import SUM_TOLERANCE_REL, Difference, Phase, Phases
from accelbench.result import Result

SHORT = {"input": "in", "forward": "fwd", "backward": "bwd", "optimizer": "opt",
         "communication": "comm"}
"""Short phase names for narrow cells."""

DISAGREE_MARK = "\u2260"


def ms(value: float | None) -> str:
    """Milliseconds to three significant digits, trailing zeros kept (``4.00``, ``30.0``)."""
    return "-" if value is None else f"{value * 1e3:#.3g}".rstrip(".")


def _g(value: float) -> str:
    return f"{value:.3g}"


def time_text(p: Phase) -> str:
    """``30.1 [29.5, 30.7]``: the direct time per step in ms with its CI."""
    if p.time_s is None:
        return "not separable" + (f": {p.note}" if p.note else "")
    ci = f" [{ms(p.time_ci95_s[0])}, {ms(p.time_ci95_s[1])}]" if p.time_ci95_s else ""
    return ms(p.time_s) + ci


def diff_time_text(p: Phase) -> str:
    """The differential loops' time per step in ms, marked where it disagrees with the
    direct time; ``-`` where there is none."""
    d = p.diff_time
    if d is None or d.value is None:
        return "-"
    return ms(d.value) + (f" {DISAGREE_MARK}" if p.agrees is False else "")


def energy_text(p: Phase, phases: Phases, samples_per_step: int) -> str:
    """The phase's energy per sample as its status allows: ``0.113 J [0.108, 0.117]``,
    ``indistinguishable from 0 (CI -0.0063..0.016 J)``, ``negative: -0.013 J (CI ...)``
    or ``unavailable: why``."""
    status = energy_status(p)
    e = p.energy
    per = max(1, samples_per_step)
    if status == "unavailable" or e is None or e.value is None:
        why = energy_reason(p, phases)
        # The record's one reason is said once under the table (:func:`notes`).
        return "unavailable" + (f": {why}" if why and why != phases.energy_note else "")
    value = e.value / per
    ci = (e.ci95[0] / per, e.ci95[1] / per) if e.ci95 else None
    bound = bound_text(e)
    if status == "indistinguishable":
        return "indistinguishable from 0" + (f" (CI {_g(ci[0])}..{_g(ci[1])} J)" if ci else "")
    if status == "negative":  # why: in the notes under the table
        return (f"negative: {_g(value)} J{bound}"
                + (f" (CI {_g(ci[0])}..{_g(ci[1])})" if ci else ""))
    return f"{_g(value)} J{bound}" + (f" [{_g(ci[0])}, {_g(ci[1])}]" if ci else "")


def bound_text(e: Difference) -> str:
    """`` +- 2.1%``: a phase energy's 95% bound from its sensors; `` (error bound
    unavailable)`` where the record says why there is none; empty for a record stored
    before bounds."""
    if e.rel_95 is not None:
        return f" +- {100 * e.rel_95:.2g}%"
    return " (error bound unavailable)" if e.bound_note else ""


def sum_line(phases: Phases, fallback_step_s: float | None = None) -> str | None:
    """``forward + backward + optimizer = 98.0 ms of the 100 ms step (-2.0%)``, with
    ``outside +-10%`` when the sum misses the step by more than the tolerance."""
    step_s = step_time(phases, fallback_step_s)
    parts = [p for p in phases.phases if p.in_step]
    if not parts or step_s is None or any(p.time_s is None for p in parts):
        return None
    total = sum(p.time_s or 0.0 for p in parts)
    rel = phases.sum_rel_diff if phases.sum_rel_diff is not None \
        else (total - step_s) / step_s
    text = (f"{' + '.join(p.name for p in parts)} = {ms(total)} ms of the {ms(step_s)} ms "
            f"step ({rel:+.1%})")
    if abs(rel) > SUM_TOLERANCE_REL:  # why: the record's own note, in the notes
        text += f", outside \u00b1{SUM_TOLERANCE_REL:.0%}"
    return text


def disagreements(phases: Phases) -> list[str]:
    """One line per phase whose direct and differential times disagree within their CIs."""
    out = []
    for p in phases.phases:
        said = any(n.startswith(f"{p.name}: direct") for n in phases.notes)
        if p.agrees is False and p.diff_time is not None and p.diff_time.value is not None \
                and not said:  # the record's own note, where it has one, says it
            out.append(f"{p.name}: direct {ms(p.time_s)} ms vs differential "
                       f"{ms(p.diff_time.value)} ms ({DISAGREE_MARK}: their CIs do not "
                       "overlap)")
    return out


def place(p: Phase) -> str:
    """Where a phase left out of the sum is: `` (outside the step)`` (the input copy), or
    `` (inside the others)`` for communication without a time of its own (a JAX mesh's
    collectives run inside the other phases' pieces); empty for a phase in the sum."""
    if p.in_step:
        return ""
    return " (inside the others)" if p.name == "communication" else " (outside the step)"


def table_rows(r: Result) -> list[dict[str, str]]:
    """One formatted row per phase of ``r`` (empty where it has none)."""
    ph = r.phases
    if ph is None:
        return []
    rows = []
    for p in ph.phases:
        sh = share(p, ph)
        rows.append({
            "phase": p.name + place(p),
            "time": time_text(p),
            "share": "-" if sh is None else f"{sh:.1%}",
            "diff_time": diff_time_text(p),
            "energy": energy_text(p, ph, r.samples_per_step),
            "energy_status": energy_status(p),
        })
    return rows


def notes(r: Result) -> list[str]:
    """What a reader of the phase table must know: the sum check, disagreements, the
    record's own notes (each once)."""
    ph = r.phases
    if ph is None:
        return []
    out = []
    line = sum_line(ph, r.stats.median_s if r.stats else None)
    if line:
        out.append(line)
    out += disagreements(ph)
    for p in ph.phases:
        if energy_status(p) == "negative":
            out.append(f"{p.name} energy is negative, shown as measured, never clipped"
                       + (f": {p.energy.note}" if p.energy is not None and p.energy.note
                          else ""))
    if ph.energy_note:
        out.append(f"energy: {ph.energy_note}")
    if any(p.energy is not None and p.energy.rel_95 is not None for p in ph.phases):
        out.append("J +- x%: the phase's 95% error bound from its sensors (the loops' "
                   "bounds added, docs/energy.md); [low, high]: the trials' bootstrap CI")
    out += [f"{p.name} energy: {p.energy.bound_note}" for p in ph.phases
            if p.energy is not None and p.energy.bound_note]
    out += [n for n in ph.notes if n not in out]
    return out


def collective_total_s(entry: dict[str, Any]) -> float | None:
    """One rank's seconds per step in all its collectives (each kind's, and ``other_s``),
    or None where no kind was timed."""
    from accelbench.phases import COLLECTIVE_KINDS

    times = [entry.get(f"{k}_s") for k in (*COLLECTIVE_KINDS, "other")]
    known = [t for t in times if t is not None]
    return sum(known) if known else None


#: What an entry stored before exposed time was computed says in its place.
EXPOSED_NOT_STORED = "not in this record (stored before exposed time was computed)"


def exposed_text(entry: dict[str, Any]) -> str:
    """``exposed 3.10 ms``, or ``exposed unavailable (why)``: the part of one rank's
    collective time per step that no compute overlapped."""
    if "exposed_s" not in entry:
        return f"exposed unavailable ({EXPOSED_NOT_STORED})"
    value = entry.get("exposed_s")
    if value is None:
        return f"exposed unavailable ({entry.get('exposed_note') or 'no reason recorded'})"
    return f"exposed {ms(value)} ms"


def collective_lines(phases: Phases) -> list[str]:
    """A sharded case's time per step in each collective kind, one line per rank:
    ``rank 0: all_gather 12.3 ms (10/step), reduce_scatter 4.10 ms (3/step), all_reduce
    0 ms (0/step); total 16.4 ms, exposed 5.20 ms``; a rank without figures says why."""
    from accelbench.phases import COLLECTIVE_KINDS

    out = []
    for c in phases.collectives:
        parts = []
        for kind in COLLECTIVE_KINDS:
            seconds = c.get(f"{kind}_s")
            calls = (c.get("calls") or {}).get(kind)
            parts.append(f"{kind} unavailable" if seconds is None else
                         f"{kind} {ms(seconds)} ms ({calls:g}/step)")
        note = f" ({c['note']})" if c.get("note") else ""
        total = collective_total_s(c)
        tail = (f"; total {ms(total)} ms, {exposed_text(c)}" if total is not None else "")
        out.append(f"rank {c.get('rank', '?')}: {', '.join(parts)}{tail}{note}")
    return out


def print_phases(console: Any, r: Result) -> None:
    """``run``'s phase table (nothing where the record has no phases)."""
    from rich import box
    from rich.table import Table

    rows = table_rows(r)
    if not rows or r.phases is None:
        return
    ph = r.phases
    console.print(f"  phases        direct: {ph.method}, {ph.attribution_steps} steps after "
                  "the window; differential: steady-state loops (energy source: "
                  f"{ph.energy_source})", highlight=False, markup=False, soft_wrap=True)
    t = Table(box=box.SIMPLE_HEAD, padding=(0, 1), show_edge=False, header_style="bold")
    t.add_column("phase", no_wrap=True)
    t.add_column("ms/step [95% CI]", justify="right", no_wrap=True)
    t.add_column("share", justify="right", no_wrap=True)
    t.add_column("diff. ms", justify="right", no_wrap=True)
    t.add_column(f"energy J/{r.sample_unit} [95% CI]", overflow="fold")
    for row in rows:
        t.add_row(row["phase"], row["time"], row["share"], row["diff_time"], row["energy"])
    from rich.padding import Padding

    console.print(Padding(t, (0, 0, 0, 4), expand=False))
    for note in notes(r):
        console.print(f"    note: {note}", highlight=False, markup=False, soft_wrap=True)
    if ph.collectives:
        console.print(f"  collectives   per rank, ms/step: {ph.collectives_method}",
                      highlight=False, markup=False, soft_wrap=True)
        for line in collective_lines(ph):
            console.print(f"    {line}", highlight=False, markup=False, soft_wrap=True)


def shares_cell(r: Result) -> str:
    """``fwd 30%``, ``bwd 60%``, ``opt 8%``, one a line: the in-step phases' shares of the
    step (``results --wide``); ``-`` without phases."""
    ph = r.phases
    if ph is None:
        return "-"
    parts = []
    for p in ph.phases:
        sh = share(p, ph)
        if p.in_step and sh is not None:
            parts.append(f"{SHORT.get(p.name, p.name)} {sh:.0%}")
    return "\n".join(parts) or "phases (no times)"
