"""The isolated child of a distributed case: launches this node's ranks, reports one record.

Started by :mod:`accelbench.execution.process` exactly as the single-device worker is
(``python -m accelbench.execution.launch``, own session, ``PR_SET_PDEATHSIG``, the parent's
timeout, the private channel), for a spec whose topology spans more than one rank. It
launches the ranks through the case's backend (``Backend.distributed().launch``: torch's
elastic launcher; each rank runs ``python -m accelbench.execution.worker --rank RUNDIR``),
forwards rank 0's progress to the parent while they run, and answers with one record:

- rank 0's record when every rank finished;
- ``oom`` / ``error`` naming the rank that failed first and why (its own report when it
  wrote one, else how it died) when any rank failed; the agent has stopped the others by
  then, and every rank dies with this process (PDEATHSIG) if the parent kills it;
- on a node that does not hold rank 0 (several nodes), a record saying the node holding
  rank 0 stores the case (the parent does not store it).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
from typing import TYPE_CHECKING, Any

from accelbench.isolation import channel, child

if TYPE_CHECKING:
    from accelbench.backends.ranks import LaunchOutcome, RankFailure
    from accelbench.spec import Topology

#: Seconds between two looks at rank 0's progress file.
_POLL_S = 0.2


def _forward(path: str, chan: channel.Channel, stop: threading.Event,
             seen: dict[str, Any]) -> None:
    """Thread body: rank 0's progress lines to the parent as they appear (the parameter
    count a phase carries is kept in ``seen``, for a case that fails later)."""
    pos = 0
    while True:
        done = stop.is_set()
        try:
            with open(path, encoding="utf-8") as f:
                f.seek(pos)
                data = f.read()
        except OSError:
            data = ""
        end = data.rfind("\n")
        if end >= 0:
            pos += len(data[: end + 1].encode("utf-8"))
            for line in data[: end + 1].splitlines():
                try:
                    msg = json.loads(line)
                except json.JSONDecodeError:
                    continue
                kind = msg.pop("type", None)
                if msg.get("param_count") is not None:
                    seen["param_count"] = msg["param_count"]
                if kind in ("phase", "progress"):
                    chan.send(kind, **msg)
        if done:
            return
        stop.wait(_POLL_S)


def run_id(spec_key: str, endpoint: str | None) -> str:
    """The rendezvous id: the same on every node of one case (same case, same endpoint)."""
    digest = hashlib.sha256(f"{spec_key}|{endpoint}".encode()).hexdigest()[:16]
    return f"accelbench-{digest}"


def _read(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _blame(failure: RankFailure, report: dict[str, Any] | None) -> int:
    """How surely this rank's failure is the cause (lower: more): its own OOM report; death
    by a signal the agent does not send; its own error that is not a broken connection to a
    peer; then the rest (a peer that saw the culprit go, or was stopped by the agent).
    Timestamps alone mislead: the agent sees a peer's error and the culprit's death in the
    same pass."""
    report = report or {}
    if report.get("status") == "oom":
        return 0
    if failure.exitcode < 0 and failure.exitcode != -15:  # not the agent's SIGTERM
        return 1
    if report and not any(t in str(report.get("error", "")) for t in _PEER_ERRORS):
        return 2
    return 3


def _last_stderr_line(rundir: str, local_rank: int) -> str:
    """The last meaningful line a rank of this node wrote to its stderr (the launcher keeps
    each rank's in ``rundir/logs/<run>/attempt_N/<local rank>/stderr.log``), or ""."""
    import glob

    paths = sorted(glob.glob(os.path.join(rundir, "logs", "*", "attempt_*", str(local_rank),
                                          "stderr.log")))
    return child.last_line(child.tail(paths[-1], 2000))[:300] if paths else ""


#: Texts of a collective that failed because another rank went away (gloo, NCCL, c10d).
_PEER_ERRORS = ("Connection closed by peer", "Connection reset by peer", "Broken pipe",
                "NCCL communicator was aborted", "remote process exited",
                "Socket Timeout", "Connection refused")


def outcome_record(rundir: str, outcome: LaunchOutcome, topo: Topology, backend: str = "",
                   seen: dict[str, Any] | None = None) -> dict[str, Any]:
    """The one record of this node's launch (see the module doc); ``backend`` is the
    resolved communication backend (gloo, nccl), ``seen`` what rank 0 reported before it ended."""
    base = {"world_size": topo.world_size, "nnodes": topo.nnodes,
            "nproc_per_node": topo.nproc_per_node, **({"backend": backend} if backend else {})}
    known = {k: v for k, v in (seen or {}).items() if k == "param_count"}
    failures = list(outcome.failures)
    reports = {f.rank: _read(os.path.join(rundir, f"rank-{f.rank}.json")) for f in failures}
    facts = [{"rank": f.rank, "local_rank": f.local_rank, "pid": f.pid, "how": f.how,
              **({"report": reports[f.rank]} if reports[f.rank] else {})} for f in failures]
    if failures:
        first = min(failures, key=lambda f: (_blame(f, reports[f.rank]), failures.index(f)))
        report = reports[first.rank] or {}
        status = "oom" if report.get("status") == "oom" else "error"
        last = "" if report.get("error") else _last_stderr_line(rundir, first.local_rank)
        why = report.get("error") or f"{first.how} without a report" + (
            f"; its last stderr line: {last}" if last else "")
        where = f" on {report['host']}" if report.get("host") else ""
        return {"status": status,
                "error": f"rank {first.rank} (local rank {first.local_rank}, pid {first.pid})"
                         f"{where} failed: {why}",
                "ranks": {**base, "failures": facts}, **known}
    if outcome.error:
        return {"status": "error", "error": f"the launch failed: {outcome.error}",
                "ranks": base, **known}
    record = _read(os.path.join(rundir, "result.json"))
    if record is not None:
        return record
    return {"status": "ok", "error": None, "ranks": {**base, "stored_elsewhere": True}}


def main() -> int:
    """Entry point of the launcher child."""
    chan = channel.Channel()
    request = json.loads(sys.stdin.read())
    channel.die_with_parent(int(request.get("parent_pid", os.getppid())))

    from accelbench.backends import get_backend
    from accelbench.spec import RunSpec

    spec = RunSpec.from_dict(request["spec"])
    topo = spec.topology
    hooks = get_backend(spec.framework).distributed()  # the backend's launcher
    if spec.device == "cpu" and spec.threads is None and "OMP_NUM_THREADS" not in os.environ:
        # Ranks sharing a node's cores: torchrun's own default (one thread each) would
        # starve a rank; split the cores instead.
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
        os.environ["OMP_NUM_THREADS"] = str(max(1, cores // topo.nproc_per_node))
    rundir = tempfile.mkdtemp(prefix="accelbench-ranks-")
    try:
        with open(os.path.join(rundir, "request.json"), "w", encoding="utf-8") as f:
            json.dump({**request, "agent_pid": os.getpid()}, f)
        stop = threading.Event()
        seen: dict[str, Any] = {}
        fwd = threading.Thread(
            target=_forward, args=(os.path.join(rundir, "messages.jsonl"), chan, stop, seen),
            daemon=True)
        fwd.start()
        outcome = hooks.launch(
            args=["-m", "accelbench.execution.worker", "--rank", rundir],
            nnodes=topo.nnodes, nproc_per_node=topo.nproc_per_node, node_rank=topo.node_rank,
            rdzv_endpoint=topo.rdzv_endpoint,
            run_id=run_id(spec.case_key(), topo.rdzv_endpoint),
            log_dir=os.path.join(rundir, "logs"),
            rdzv_timeout_s=max(1, int(min(spec.policy.timeout_s, hooks.rdzv_timeout_s))),
        )
        stop.set()
        fwd.join(timeout=5)
        backend = hooks.resolve_backend(topo.dist_backend, spec.device)
        record = outcome_record(rundir, outcome, topo, backend, seen)
    finally:
        shutil.rmtree(rundir, ignore_errors=True)
    chan.send("result", record=record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
