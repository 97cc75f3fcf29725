"""Cases on many ranks: torch's elastic launcher, real DDP over gloo, real processes.

The ranks are real processes started through ``torch.distributed``'s launcher API; the
only fake is the powercap tree (the vendor boundary), advanced by a thread at a known
power so the true energy of the window is known.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from accelbench.errors import ConfigError
from accelbench.execution.launch import outcome_record
from accelbench.planning.cases import prepare_case
from accelbench.result import Result
from accelbench.spec import MeterOptions, RunChoices, Topology
from accelbench.store import open_store
from tests.conftest import cli_env, run_cli, run_cli_many

PLUGIN = str(Path(__file__).parent / "plugins" / "dist_faults.py")
#: The plugin's models are torch's: each accelbench command that loads it imports torch, so
#: it is forked from a CLI server that has imported it already (still a process of its own).
PLUGIN_IMPORTS = ("torch",)
POWER_W = 40.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_is_free(port: int) -> bool:
    """Nobody listens on ``port`` (closed connections may linger in TIME_WAIT: a server
    binds past those with SO_REUSEADDR, as torch's TCPStore does)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            s.listen()
        except OSError:
            return False
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purpose (it holds no port, runs nothing)
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


class _PackageAtKnownPower(threading.Thread):
    """A fake RAPL package whose counter follows a constant draw of ``POWER_W``."""

    def __init__(self, root: Path) -> None:
        super().__init__(daemon=True)
        zone = root / "intel-rapl:0"
        zone.mkdir(parents=True)
        (zone / "name").write_text("package-0\n")
        (zone / "max_energy_range_uj").write_text("262143328850\n")
        self.counter = zone / "energy_uj"
        self.counter.write_text("0\n")
        self.halt = threading.Event()

    def run(self) -> None:
        t0 = time.monotonic()
        while not self.halt.is_set():
            tmp = self.counter.with_suffix(".tmp")
            tmp.write_text(f"{int(POWER_W * (time.monotonic() - t0) * 1e6)}\n")
            os.replace(tmp, self.counter)
            time.sleep(0.002)


def test_two_ranks_on_one_node_store_topology_times_and_host_energy_once(
    tmp_path: Path,
) -> None:
    db = tmp_path / "r.db"
    tree = _PackageAtKnownPower(tmp_path / "powercap")
    tree.start()
    try:
        # Adaptive (an exact --iterations count is never extended for energy): the ranks
        # agree to extend the window to the 5 s the package counter needs.
        p = run_cli("run", "lstm", "--size", "tiny", "--nproc-per-node", "2",
                    "--max-time", "1", "--min-iterations", "3", "--no-idle", "--json", db=db,
                    ACCELBENCH_POWERCAP_ROOT=str(tmp_path / "powercap"))
    finally:
        tree.halt.set()
        tree.join()
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert (out["nnodes"], out["nproc_per_node"], out["world_size"]) == (1, 2, 2)
    assert out["dist_backend"] == "gloo" and out["global_batch_size"] == 2 * out["batch_size"]
    with open_store(str(db)) as st:
        [r] = st.query()
    assert r.status == "ok", r.error
    assert r.spec.topology.nproc_per_node == 2 and r.spec.topology.world_size == 2
    # Weak scaling: throughput is the global batch over the median of the max-over-ranks
    # series, and that series is each iteration's slowest rank.
    assert r.samples_per_step == 2 * r.spec.batch_size
    assert r.stats is not None
    assert r.stats.samples_per_s == pytest.approx(
        r.samples_per_step / float(np.median(r.iteration_times_s)))
    ranks = r.ranks
    assert ranks["world_size"] == 2 and ranks["backend"] == "gloo"
    per_rank = ranks["per_rank"]
    assert [x["rank"] for x in per_rank] == [0, 1]
    assert len({x["pid"] for x in per_rank}) == 2  # two processes, not one
    own = np.array([x["iteration_times_s"] for x in per_rank])
    assert own.shape == (2, len(r.iteration_times_s))
    assert np.allclose(own.max(axis=0), r.iteration_times_s, rtol=0, atol=1e-12)
    assert not np.allclose(own[0], own[1])  # each rank's own clock, really kept
    # Energy: the node's package is read by local rank 0 only, so it is counted once and
    # equals the tree's true energy over the window.
    packages = [e for e in r.energy if e.scope == "cpu-package"]
    assert len(packages) == 1, [e.device for e in r.energy]
    [pkg] = packages
    assert pkg.source == "counter" and pkg.details["provenance"]["rank"] == 0
    assert pkg.energy_j is not None and pkg.window_s is not None
    assert pkg.window_s >= 4.9  # both ranks extended the window to the counter's 5 s
    assert pkg.energy_j == pytest.approx(POWER_W * pkg.window_s, rel=0.02)
    assert [rd["rank"] for rd in ranks["energy_readers"]] == [0]
    total_j = sum(e.energy_j or 0.0 for e in r.energy if e.scope in ("cpu-package", "dram"))
    assert r.energy_j_per_sample == pytest.approx(
        total_j / (r.samples_per_step * len(r.iteration_times_s)), rel=1e-9)
    listing = run_cli("results", db=db)
    assert listing.returncode == 0, listing.stderr
    assert "1x2" in listing.stdout


def test_two_nodes_meet_at_a_localhost_rendezvous_and_store_one_record(
    tmp_path: Path,
) -> None:
    port = _free_port()
    # The two nodes' commands at once, each its own accelbench process (forked from the
    # warm CLI server, as run_cli's are: the interpreter start and imports are shared).
    procs = run_cli_many(
        [(("run", "test_dist_ok", "--plugin", PLUGIN, "--size", "tiny", "--nnodes", "2",
           "--node-rank", str(node), "--rdzv-endpoint", f"127.0.0.1:{port}",
           "--iterations", "3", "--no-energy", "--timeout", "200"),
          {"ACCELBENCH_DB": str(tmp_path / f"node{node}.db")}) for node in (0, 1)],
        timeout=240, workers=2, preload=PLUGIN_IMPORTS)
    outs = [(p.stdout, p.stderr) for p in procs]
    for p, (o, e) in zip(procs, outs, strict=True):
        assert p.returncode == 0, o + e
    stored: list[Result] = []
    for node in (0, 1):
        path = tmp_path / f"node{node}.db"
        if path.exists():
            with open_store(str(path)) as st:
                stored += st.query()
    assert len(stored) == 1  # one case, one record, on the node holding rank 0
    [r] = stored
    assert r.status == "ok", r.error
    assert (r.ranks["nnodes"], r.ranks["world_size"]) == (2, 2)
    assert sorted(x["node"] for x in r.ranks["per_rank"]) == [0, 1]
    assert r.samples_per_step == 2 * r.spec.batch_size
    assert sum("the node holding rank 0 of the case stores its record" in o
               for o, _e in outs) == 1
    assert _port_is_free(port)  # the rendezvous store is gone with its host


def test_a_killed_rank_fails_the_case_naming_it_and_leaves_no_process(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    pids = tmp_path / "pids"
    pids.mkdir()
    p = run_cli("run", "test_dist_kill", "--plugin", PLUGIN, "--size", "tiny",
                "--nproc-per-node", "2", "--iterations", "50", "--no-energy", db=db,
                preload=PLUGIN_IMPORTS, ACCELBENCH_TEST_PID_DIR=str(pids))
    assert p.returncode == 1, p.stderr
    with open_store(str(db)) as st:
        [r] = st.query()
    assert r.status == "error"
    assert r.error is not None and r.error.startswith("rank 1 ")
    assert "SIGKILL" in r.error
    assert r.param_count == 676  # what rank 0 reported before the case failed
    assert r.ranks["backend"] == "gloo"
    killed = [f for f in r.ranks["failures"] if f["rank"] == 1]
    assert killed and killed[0]["how"] == "killed by signal SIGKILL"
    started = [int(x) for f in pids.iterdir() for x in f.read_text().split()]
    assert len(started) == 4  # two ranks and their agent (named twice)
    deadline = time.monotonic() + 60  # killed at once; reaped whenever the CPUs allow
    while any(_alive(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [pid for pid in started if _alive(pid)]


def test_a_rank_s_own_oom_report_names_it_over_its_peer_s_broken_connection(
    tmp_path: Path,
) -> None:
    """The launcher's verdict from what the ranks wrote (the peer failed first in time)."""
    from accelbench.backends.ranks import LaunchOutcome, RankFailure

    (tmp_path / "rank-0.json").write_text(json.dumps(
        {"rank": 0, "host": "h", "status": "error",
         "error": "RuntimeError: Connection closed by peer [127.0.0.1]:1"}))
    (tmp_path / "rank-1.json").write_text(json.dumps(
        {"rank": 1, "host": "h", "status": "oom", "error": "MemoryError: no room"}))
    failures = (RankFailure(rank=0, local_rank=0, pid=10, exitcode=1, how="exited with code 1"),
                RankFailure(rank=1, local_rank=1, pid=11, exitcode=1, how="exited with code 1"))
    rec = outcome_record(str(tmp_path), LaunchOutcome(failures=failures), Topology(
        nproc_per_node=2))
    assert rec["status"] == "oom"
    assert rec["error"].startswith("rank 1 (local rank 1, pid 11) on h failed: MemoryError")


def test_a_rank_dead_without_a_report_is_described_by_its_last_stderr_line(
    tmp_path: Path,
) -> None:
    """A rank killed by a signal in C++ writes no report: the launcher keeps each rank's
    stderr (attempt_N/<local rank>/stderr.log under the logs folder) and the record quotes
    that rank's last line, not its peer's."""
    from accelbench.backends.ranks import LaunchOutcome, RankFailure

    logs = tmp_path / "logs" / "accelbench-run_x1" / "attempt_0"
    for local, text in ((0, "all fine\n"), (1, "step 3\nterminate called without an "
                                              "active exception\n[W warning chatter]\n")):
        (logs / str(local)).mkdir(parents=True)
        (logs / str(local) / "stderr.log").write_text(text)
    failures = (RankFailure(rank=1, local_rank=1, pid=11, exitcode=-6,
                            how="killed by signal SIGABRT"),
                RankFailure(rank=0, local_rank=0, pid=10, exitcode=-15,
                            how="killed by signal SIGTERM"))
    rec = outcome_record(str(tmp_path), LaunchOutcome(failures=failures),
                         Topology(nproc_per_node=2))
    assert rec["error"] == ("rank 1 (local rank 1, pid 11) failed: killed by signal SIGABRT "
                            "without a report; its last stderr line: terminate called "
                            "without an active exception")
    # No log kept (an older launcher, a wiped folder): the plain description.
    rec = outcome_record(str(tmp_path / "none"), LaunchOutcome(failures=failures[:1]),
                         Topology(nproc_per_node=2))
    assert rec["error"].endswith("killed by signal SIGABRT without a report")


def test_a_rank_leaves_with_its_code_and_output_but_without_the_interpreter_s_teardown(
) -> None:
    """ranks.leave: what the rank printed gets out (pipes are block-buffered), the exit code
    is the rank's, and nothing of the interpreter's teardown runs (atexit handlers, and
    with them torch's C++ static destructors that aborted finished ranks)."""
    code = ("import atexit, sys\n"
            "from accelbench.execution.ranks import leave\n"
            "atexit.register(lambda: print('teardown ran', file=sys.stderr))\n"
            "print('the record is written')\n"
            "sys.stderr.write('last words')\n"
            "leave(3)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, env=cli_env())
    assert p.returncode == 3
    assert p.stdout == "the record is written\n"
    assert p.stderr == "last words"


def test_data_parallel_refusals_say_how_to_fix() -> None:
    topo = Topology(nproc_per_node=2)
    # JAX's ranks are jax.distributed processes now (docs/sharding.md): planned, not refused.
    jax_ranks = prepare_case("lstm", RunChoices(size="tiny", framework="jax"), topology=topo,
                             check_hardware=False)
    assert jax_ranks.spec.topology.world_size == 2
    with pytest.raises(ConfigError, match="use --device cuda"):
        prepare_case("lstm", RunChoices(size="tiny", device="cuda:1"), topology=topo,
                     check_hardware=False)
    with pytest.raises(ConfigError, match="nccl needs --device cuda"):
        prepare_case("lstm", RunChoices(size="tiny"), topology=Topology(nproc_per_node=2,
                     dist_backend="nccl"), check_hardware=False)
    with pytest.raises(ConfigError, match="--energy-trials"):
        prepare_case("lstm", RunChoices(size="tiny"), topology=topo,
                     meters=MeterOptions(energy_trials=3), check_hardware=False)
    one = prepare_case("lstm", RunChoices(size="tiny"), topology=Topology(), check_hardware=False)
    assert one.samples_per_step == one.spec.batch_size


def test_ranks_round_trip_and_old_records_load() -> None:
    spec = prepare_case("lstm", RunChoices(size="tiny"), topology=Topology(nproc_per_node=2),
                        check_hardware=False).spec
    r = Result(id="x", spec=spec, status="ok", sample_unit="s", samples_per_step=8,
               ranks={"world_size": 2, "backend": "gloo", "per_rank": []})
    back = Result.from_dict(json.loads(json.dumps(r.to_dict())))
    assert back.ranks == r.ranks and back.world_size == 2 and back.stored_here
    old = r.to_dict()
    del old["ranks"]
    assert Result.from_dict(old).ranks == {}
    assert Result.from_dict({**old, "ranks": {"stored_elsewhere": True}}).stored_here is False

