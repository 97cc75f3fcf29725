"""A rank of a distributed case: its message file, and rank 0's gathering of every rank's
times and readings into the case's one record."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from typing import TYPE_CHECKING, Any, NoReturn

from accelbench.execution.metering import not_measured
from accelbench.result import EnergyReading, Result

if TYPE_CHECKING:
    from accelbench.backends.ranks import RankGroup
    from accelbench.spec import RunSpec

#: How the iteration time of a distributed case is derived (stored with its per-rank times).
ITERATION_TIME_RULE = (
    "iteration i's time is the max over ranks of each rank's own device-synchronised step "
    "time (all-reduced MAX after the step, outside the timed region); throughput is the "
    "global batch (batch x world size) over the median of those"
)

_HOST_READER = ("host CPU packages and DRAM (RAPL, else the TDP estimate) and any node "
                "meter: local rank 0 of each node")


class FileChannel:
    """Rank 0's messages for the launcher process (which forwards them to the parent):
    JSON lines appended to a file; a rank other than 0 sends nothing."""

    def __init__(self, path: str | None) -> None:
        self._stream = open(path, "a", buffering=1, encoding="utf-8") if path else None  # noqa: SIM115

    def send(self, kind: str, **payload: Any) -> None:
        if self._stream is None:
            return
        from accelbench import jsonout

        self._stream.write(jsonout.dumps({"type": kind, **payload}) + "\n")
        self._stream.flush()


def leave(code: int) -> NoReturn:
    """End a rank's process with ``code`` once its record and reports are written and its
    process group is closed, without the interpreter's teardown.

    torch's C++ teardown at interpreter exit (static destructors, the process group's and
    store's threads) aborted a finished rank now and then with SIGABRT ("terminate called
    without an active exception", no Python frame left: after the last line of Python),
    which failed a case whose record was already written, or left a peer waiting. Nothing
    of the case is left to do at that point: stdio is flushed and the process ends here.
    """
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def write_json(path: str, data: dict[str, Any]) -> None:
    """Write atomically: the launcher never reads half a file."""
    from accelbench import jsonout

    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(jsonout.dumps(data))
    os.replace(tmp, path)


def gather_ranks(
    spec: RunSpec, group: RankGroup, result: Result,
    warmup_times_s: list[float], times_s: list[float],
) -> Result:
    """Gather every rank's own times, device and readings to rank 0: there, ``result``
    with the case's ``ranks`` record and its merged energy readings (one reader per
    sensor); on the other ranks, ``result`` unchanged."""
    info = group.info
    mine = {
        "rank": info.rank,
        "local_rank": info.local_rank,
        "node": info.group_rank,
        "host": group.host,
        "pid": os.getpid(),
        "device": str(group.device),
        "device_uuid": group.device_uuid(),
        "threads": group.threads(),
        "iteration_times_s": times_s,
        "warmup_times_s": warmup_times_s,
        "peak_memory_bytes": result.peak_memory_bytes,
        "energy": [e.to_dict() for e in result.energy],
        "power_timeline": result.power_timeline,
    }
    gathered = group.gather(mine)
    if gathered is None:
        return result
    energy, timeline, readers = merge_energy(spec, gathered)
    topo = spec.topology
    per_rank = [{k: v for k, v in r.items() if k not in ("energy", "power_timeline")}
                for r in gathered]
    ranks = {
        "world_size": info.world_size,
        "nnodes": topo.nnodes,
        "nproc_per_node": topo.nproc_per_node,
        "backend": group.backend,
        "launcher": "torch.distributed elastic_launch (c10d rendezvous, no restarts)",
        "iteration_time": ITERATION_TIME_RULE,
        **_mesh(spec),
        "per_rank": per_rank,
        "energy_readers": readers,
        "energy_rule": (
            "every physical sensor has one reader: each GPU by the rank that drives it "
            "(deduplicated by UUID); " + _HOST_READER + "; readings are gathered to rank 0 "
            "and summed per kind over the global samples of the window"
        ),
    }
    return dataclasses.replace(result, energy=energy, power_timeline=timeline, ranks=ranks)


def _mesh(spec: RunSpec) -> dict[str, Any]:
    """``--parallel`` and its mesh, for a sharded case only (DDP's records keep their
    bytes)."""
    topo = spec.topology
    if not topo.sharded:
        return {}
    return {"parallel": topo.parallel, "act_ckpt": topo.act_ckpt,
            "mesh": {"dp": topo.dp_degree, "tp": topo.tp_degree,
                     "dims": ["dp", "tp"] if topo.parallel == "fsdp+tp" else
                     ["tp"] if topo.parallel == "tp" else ["dp"]}}


def merge_energy(
    spec: RunSpec, gathered: list[dict[str, Any]]
) -> tuple[tuple[EnergyReading, ...], dict[str, Any], list[dict[str, Any]]]:
    """All ranks' readings with their provenance, each physical GPU once (by UUID); device
    names of nodes other than the first get a ``nodeN/`` prefix so none collide."""
    several_nodes = len({r["node"] for r in gathered}) > 1
    energy: list[EnergyReading] = []
    timeline: dict[str, Any] = {}
    readers: list[dict[str, Any]] = []
    seen_uuids: set[str] = set()
    for r in gathered:
        prefix = f"node{r['node']}/" if several_nodes and r["node"] != 0 else ""
        names: list[str] = []
        for e in r["energy"]:
            if e.get("scope") == "gpu" and r["device_uuid"]:
                if r["device_uuid"] in seen_uuids:
                    continue  # one GPU, two ranks: read once
                seen_uuids.add(r["device_uuid"])
            details = dict(e.get("details") or {})
            details["provenance"] = {"rank": r["rank"], "local_rank": r["local_rank"],
                                     "node": r["node"], "host": r["host"],
                                     "device_uuid": r["device_uuid"]}
            reading = EnergyReading.from_dict(
                {**e, "device": prefix + str(e["device"]), "details": details})
            energy.append(reading)
            names.append(reading.device)
        for key, series in r["power_timeline"].items():
            timeline[prefix + key] = series
        if names:
            readers.append({"rank": r["rank"], "node": r["node"], "host": r["host"],
                            "reads": names})
    if not energy and not spec.meters.enabled:
        energy = [not_measured(spec)]
    return tuple(energy), timeline, readers
