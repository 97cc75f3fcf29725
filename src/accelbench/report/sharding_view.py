"""The report's by-mode table: a case trained in several ``--parallel`` modes and rank
counts (the ``sharding`` suite, or any sharded records beside their DDP and one-device
runs), one row per mode x ranks with the global throughput, each rank's peak memory,
energy per sample and, where the case ran with ``--phases``, the slowest rank's time per
step in collectives and the exposed part of it (docs/sharding.md).

Records that differ only in their topology (same workload, size, per-replica batch,
precision, device, framework, host) form one group; a group is shown when at least one of
its records is sharded (``fsdp``, ``tp``, ``fsdp+tp`` or ``--act-ckpt``). Per mode and rank
count the newest successful run is taken (a quiet one where there is one). Reads stored
results only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from accelbench.result import Result
from accelbench.spec import Topology

EXPLAINED = (
    "Each row is one parallel mode at one rank count (ddp: every rank holds the whole "
    "model; fsdp: parameters, gradients and optimizer state sharded; tp: each block's "
    "attention and MLP split; fsdp+tp: a dp x tp mesh). Throughput counts the global batch "
    "(data-parallel replicas, never the ranks of one TP group twice); memory is each rank's "
    "peak (a CPU: the rank process's peak RSS, framework included; CUDA: the allocator's "
    "peak); collectives are the slowest rank's time per step in all-gather, reduce-scatter "
    "and all-reduce from --phases, which overlap with compute; exposed is the slowest "
    "rank's part of it that no compute overlapped, what the step waited for "
    "(docs/sharding.md).")


def _group_key(r: Result) -> tuple[str, ...]:
    from accelbench.report.rows import device_name

    base = dataclasses.replace(r.spec, topology=Topology()).case_key()
    return (base, str((r.machine or {}).get("hostname") or ""), device_name(r))


def _mode_key(r: Result) -> tuple[str, int, bool]:
    topo = r.spec.topology
    return (topo.parallel, topo.tp_degree if "tp" in topo.parallel else 1, topo.act_ckpt)


class ShardingFold:
    """The results :func:`mode_rows` chooses among, kept as they stream past: per case,
    mode and rank count the quiet, then newest one."""

    def __init__(self) -> None:
        self._best: dict[tuple[Any, ...], Result] = {}

    def add(self, r: Result) -> None:
        """Offer one result."""
        if r.status != "ok" or r.samples_per_s is None or not r.stored_here:
            return
        key = (_group_key(r), _mode_key(r), r.world_size)
        old = self._best.get(key)
        if old is None or (not r.noisy, r.finished_at) > (not old.noisy, old.finished_at):
            self._best[key] = r

    def results(self) -> list[Result]:
        return list(self._best.values())


def rank_memory(r: Result) -> list[int | None]:
    """Each rank's peak memory in bytes (rank order); one entry for a one-device case."""
    per_rank = (r.ranks or {}).get("per_rank") or []
    if per_rank:
        return [x.get("peak_memory_bytes") for x in per_rank]
    return [r.peak_memory_bytes]


def collective_s(r: Result) -> float | None:
    """The slowest rank's seconds per step in all collectives (``--phases`` of a sharded
    case), or None where they were not timed."""
    from accelbench.phase_text import collective_total_s

    if r.phases is None or not r.phases.collectives:
        return None
    totals = [t for t in map(collective_total_s, r.phases.collectives) if t is not None]
    return max(totals) if totals else None


def exposed_cell(r: Result) -> str:
    """The slowest rank's exposed collective time per step (the part no compute
    overlapped), or why there is none: not timed, or a rank's reason."""
    from accelbench.phase_text import EXPOSED_NOT_STORED, ms

    if r.phases is None or not r.phases.collectives:
        return "not timed (run with --phases)"
    values = []
    for c in r.phases.collectives:
        if c.get("exposed_s") is None:
            why = (c.get("exposed_note") or "no reason recorded") if "exposed_s" in c \
                else EXPOSED_NOT_STORED
            return f"unavailable (rank {c.get('rank', '?')}: {why})"
        values.append(float(c["exposed_s"]))
    return f"{ms(max(values))} ms/step"


def _label(r: Result) -> str:
    s = r.spec
    host = (r.machine or {}).get("hostname")
    return (f"{s.workload} {s.size} bs={s.batch_size}/replica {s.precision} "
            f"{s.device.split(':')[0]} {s.framework}" + (f" @{host}" if host else ""))


def _mode_label(r: Result) -> str:
    from accelbench.report.rows import parallel_label

    topo = r.spec.topology
    if r.world_size == 1 and not topo.sharded:
        return "one device"
    return parallel_label(topo) or "ddp"


def _mesh(r: Result) -> str:
    mesh = (r.ranks or {}).get("mesh") or {}
    if mesh:
        return f"dp {mesh.get('dp')} x tp {mesh.get('tp')}"
    return f"dp {r.world_size}" if r.world_size > 1 else "-"


def _memory_text(values: list[int | None]) -> str:
    from accelbench.render import fmt_bytes

    known = [v for v in values if v]
    if not known:
        return "unavailable (no rank reported its peak)"
    if len(values) == 1:
        return fmt_bytes(known[0])
    return f"max {fmt_bytes(max(known))}, min {fmt_bytes(min(known))} ({len(values)} ranks)"


def mode_rows(results: Sequence[Result]) -> list[dict[str, Any]]:
    """One formatted row per case x mode x ranks, for groups with a sharded record; in
    case, rank count and mode order (one device, ddp, fsdp, tp, fsdp+tp)."""
    from accelbench.phase_text import ms

    groups: dict[tuple[str, ...], list[Result]] = {}
    for r in results:
        if r.status == "ok" and r.samples_per_s is not None:
            groups.setdefault(_group_key(r), []).append(r)
    order = {"ddp": 0, "fsdp": 1, "tp": 2, "fsdp+tp": 3}
    rows: list[dict[str, Any]] = []
    for members in sorted(groups.values(), key=lambda m: _label(m[0])):
        if not any(m.spec.topology.sharded for m in members):
            continue
        members.sort(key=lambda m: (m.world_size, order.get(m.spec.topology.parallel, 9),
                                    m.spec.topology.act_ckpt))
        for r in members:
            energy = r.energy_j_per_sample
            coll = collective_s(r)
            rows.append({
                "case": _label(r), "mode": _mode_label(r), "ranks": r.world_size,
                "mesh": _mesh(r),
                "throughput": f"{r.samples_per_s:.3g} {r.sample_unit}s/s",
                "memory": _memory_text(rank_memory(r)),
                "energy": "unavailable" if energy is None else f"{energy:.3g} J",
                "collectives": ("not timed (run with --phases)" if coll is None
                                else f"{ms(coll)} ms/step"),
                "exposed": exposed_cell(r),
                "id": r.id[:8], "noisy": r.noisy,
            })
    return rows
