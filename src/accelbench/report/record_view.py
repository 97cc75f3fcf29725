"""One stored result, readable: ``accelbench results show ID``.

What a table row cannot hold: the full spec (every axis), status and verdicts with
their reasons, throughput with its CI and what it covers, energy with its provenance
(or why there is none), where and when it ran (suite, times, machine). The measurement
lines are :func:`accelbench.render.print_result`'s, as ``run`` prints them.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console

from accelbench.result import Result


def spec_lines(r: Result) -> list[tuple[str, str]]:
    """(label, text) lines of what the head line of :func:`print_result` leaves out:
    ranks, threads, fast paths, settings, tag; where and when it was stored."""
    from accelbench.report.rows import settings_text, topology_text

    s = r.spec
    lines = []
    extras = []
    if s.topology.distributed:
        extras.append("ranks=" + topology_text(s.topology.nnodes, s.topology.nproc_per_node))
    if s.threads is not None:
        extras.append(f"threads={s.threads}")
    if s.fast_paths.enabled():
        extras.append("fast paths=" + "+".join(s.fast_paths.enabled()))
    if settings_text(r):
        extras.append(f"settings: {settings_text(r)}")
    if s.tag:
        extras.append(f"tag={s.tag}")
    if extras:
        lines.append(("case also", " ".join(extras)))
    lines.append(("stored", f"id {r.id}; suite {r.suite_id or '-'}; "
                            f"started {r.started_at or '?'}, finished {r.finished_at or '?'}"))
    return lines


def machine_lines(r: Result) -> list[tuple[str, str]]:
    """(label, text) lines of the machine the result ran on."""
    m: dict[str, Any] = r.machine or {}
    cpu = m.get("cpu") or {}
    parts = [str(m.get("hostname") or "?"), str(m.get("os") or "")]
    if isinstance(cpu, dict) and cpu.get("model"):
        parts.append(f"CPU {cpu['model']}")
    out = [("machine", ", ".join(p for p in parts if p))]
    for gpu in m.get("gpus") or []:
        if isinstance(gpu, dict):
            out.append(("", f"{gpu.get('device', '?')}: {gpu.get('name', '?')}"
                            + (f" ({gpu['runtime']})" if gpu.get("runtime") else "")))
    soft = m.get("software") or {}
    if isinstance(soft, dict) and soft:
        out.append(("software", ", ".join(f"{k} {v}" for k, v in sorted(soft.items())
                                          if isinstance(v, (str, int, float)))))
    return out


def print_record(console: Console, r: Result) -> None:
    """The record in full (see the module docstring)."""
    from accelbench.render import print_result
    from accelbench.report.rows import energy_missing_reason

    print_result(console, r)
    if r.status == "ok" and r.energy_j_per_sample is None:
        why = energy_missing_reason(r)
        if all(why != e.note for e in r.energy):
            console.print(f"  energy fix    {why}", highlight=False, markup=False)
    for label, text in [*spec_lines(r), *machine_lines(r)]:
        console.print(f"  {label:<13} {text}", highlight=False, markup=False)
