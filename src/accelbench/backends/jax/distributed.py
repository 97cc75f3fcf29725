"""``jax.distributed`` for a case on many processes (``--nproc-per-node``/``--nnodes``).

What ``JaxBackend.distributed()`` hands the runner (:class:`JaxDistributed`):

- the ranks are started by the same launcher as torch's (torchrun's ``elastic_launch``,
  :func:`accelbench.backends.torch.distributed.launch`), which gives every rank ``RANK``,
  ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``;
- each rank then calls ``jax.distributed.initialize`` with ``MASTER_ADDR:MASTER_PORT`` as the
  coordinator (rank 0 hosts it), the world size and its rank; on a CPU, cross-process
  collectives go through gloo (``jax_cpu_collectives_implementation``);
- after that ``jax.devices()`` is every process's devices: the case's mesh spans them
  (:mod:`accelbench.backends.jax.sharding`), each process feeding its own rows of the batch.

The worker's few collectives of its own (MAX of the step times, the gather of each rank's
facts to rank 0) go through ``jax.experimental.multihost_utils.process_allgather``.
jax is imported inside functions only.
"""

from __future__ import annotations

import os
import pickle
import socket
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from accelbench.backends.ranks import LaunchOutcome, RankInfo, RankPlace
from accelbench.errors import ConfigError

if TYPE_CHECKING:
    from accelbench.spec import RunSpec

#: Seconds the rendezvous (and jax's coordinator) waits for every process at most.
RDZV_TIMEOUT_S = 900

#: Where one node's launch tells its ranks the coordinator's ``HOST:PORT``.
COORDINATOR_ENV = "ACCELBENCH_JAX_COORDINATOR"


class JaxRankGroup(RankPlace):
    """This process's place among the case's JAX processes, with the worker's collectives."""

    def _allgather(self, row: Any) -> Any:
        from jax.experimental import multihost_utils

        return multihost_utils.process_allgather(row)

    def max_all(self, values: Sequence[float]) -> list[float]:
        """Element-wise MAX of ``values`` over all processes."""
        import numpy as np

        rows = self._allgather(np.asarray(list(values), dtype=np.float32))
        return [float(v) for v in np.asarray(rows).reshape(self.info.world_size, -1).max(0)]

    def gather(self, obj: Any) -> list[Any] | None:
        """``obj`` of every process, in rank order, on rank 0 (None on the others): pickled,
        padded to the longest, all-gathered."""
        import numpy as np

        data = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
        sizes = np.asarray(self._allgather(np.asarray([data.size], dtype=np.int32))).ravel()
        padded = np.zeros(int(sizes.max()), dtype=np.uint8)
        padded[: data.size] = data
        rows = np.asarray(self._allgather(padded)).reshape(self.info.world_size, -1)
        if not self.is_root:
            return None
        return [pickle.loads(rows[r, : int(sizes[r])].tobytes())
                for r in range(self.info.world_size)]

    def threads(self) -> int:
        """CPUs this process may compute on (XLA's pools follow the affinity)."""
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1

    def device_uuid(self) -> str | None:
        return None

    def close(self) -> None:
        """Wait for every process, then leave (a failed wait does not fail this rank)."""
        import jax
        from jax.experimental import multihost_utils

        try:
            multihost_utils.sync_global_devices("accelbench-close")
        except Exception as exc:  # a peer already gone: the launcher names it
            print(f"accelbench: rank {self.info.rank}: the closing barrier failed: "
                  f"{type(exc).__name__}: {exc}"[:500], file=sys.stderr)
        jax.distributed.shutdown()


def init(device: str) -> JaxRankGroup:
    """Start ``jax.distributed`` in this launched rank; must run before jax's backends do.

    Raises:
        ConfigError: outside a launched rank.
    """
    from accelbench.backends.jax.runtime import import_jax

    info = RankInfo.from_env()
    if info is None:
        raise ConfigError("not a launched rank (RANK/LOCAL_RANK unset)")
    jax = import_jax()
    if device == "cpu":
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(**initialize_args(info, device, coordinator_address(info)))
    return JaxRankGroup(info, resolve_backend(device), jax.local_devices()[0])


def initialize_args(info: RankInfo, device: str, coordinator: str,
                    devices_per_process: int = 1) -> dict[str, Any]:
    """``jax.distributed.initialize``'s keyword arguments for this rank: the coordinator,
    the world size and this rank's id; on GPUs also ``local_device_ids``, the node's GPUs
    this process drives: ``devices_per_process`` of them from ``local_rank`` x that on
    (one each: local rank r drives GPU r, as torch's ranks do). A CPU process has its own
    host devices (none named).

    Raises:
        ConfigError: a device other than ``cpu`` or ``cuda:0`` (each process counts its
            GPUs from 0), or fewer than one device per process.
    """
    out: dict[str, Any] = {"coordinator_address": coordinator,
                           "num_processes": info.world_size, "process_id": info.rank,
                           "initialization_timeout": RDZV_TIMEOUT_S}
    if device == "cpu":
        return out
    if device != "cuda:0":
        raise ConfigError(f"--device {device} with JAX processes: use cuda:0 (local rank r "
                          "drives the node's GPU r)")
    if devices_per_process < 1:
        raise ConfigError(f"--devices {devices_per_process}: at least 1")
    first = info.local_rank * devices_per_process
    out["local_device_ids"] = list(range(first, first + devices_per_process))
    return out


def coordinator_address(info: RankInfo) -> str:
    """``HOST:PORT`` of jax's coordinator, which rank 0 hosts.

    One node: the port :meth:`JaxDistributed.launch` took on this host and handed the
    ranks in ``ACCELBENCH_JAX_COORDINATOR`` (no torch imported in a rank). Otherwise
    ``MASTER_ADDR:MASTER_PORT`` where it is free (a launcher that only names it); under
    torch's elastic agent that port is the agent's own store (``TORCHELASTIC_USE_AGENT_STORE``),
    so rank 0 takes a free port on its host and hands it to the others through that
    store (torch's ``TCPStore``, a client like each rank's own process group would be)."""
    given = os.environ.get(COORDINATOR_ENV)
    if given:
        return given
    addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() != "true":
        return f"{addr}:{port}"
    import datetime

    from torch.distributed import TCPStore

    store = TCPStore(addr, port, is_master=False,
                     timeout=datetime.timedelta(seconds=RDZV_TIMEOUT_S))
    key = (f"accelbench/jax-coordinator/{os.environ.get('TORCHELASTIC_RUN_ID', '')}/"
           f"{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}")
    if info.rank == 0:
        with socket.socket() as s:
            s.bind(("", 0))
            free = s.getsockname()[1]
        # One node: MASTER_ADDR is this host; several: the store's host need not be rank
        # 0's, so rank 0 names its own.
        host = addr if info.local_world_size == info.world_size else socket.getfqdn()
        store.set(key, f"{host}:{free}")
    return store.get(key).decode()


def resolve_backend(device: str) -> str:
    """What carries the cross-process collectives: gloo on a CPU."""
    return "gloo" if device == "cpu" else "xla"


class JaxDistributed:
    """The JAX backend's :class:`~accelbench.backends.ranks.DistributedHooks`."""

    rdzv_timeout_s = RDZV_TIMEOUT_S

    def check(self, spec: RunSpec) -> None:
        """CPU processes only for now; ``--dist-backend`` auto or gloo; what a JAX mesh
        cannot run yet (:func:`accelbench.backends.jax.sharding.check`).

        Raises:
            ConfigError: a GPU/TPU case, ``--dist-backend nccl``, ``--phases``, ``--data``.
        """
        if spec.device != "cpu":
            raise ConfigError(f"--nproc-per-node/--nnodes with framework jax on {spec.device}: "
                              "not yet (jax.distributed runs on --device cpu here); use "
                              "--devices N on one process")
        if spec.topology.dist_backend not in ("auto", "gloo"):
            raise ConfigError(f"--dist-backend {spec.topology.dist_backend} with framework "
                              "jax: its CPU processes talk through gloo; use auto")
        if not spec.topology.sharded:  # plain ddp over processes is a mesh too
            from accelbench.backends.jax.sharding import check

            check(spec)

    def resolve_backend(self, dist_backend: str, device: str) -> str:
        return resolve_backend(device)

    def launch(self, *, args: Sequence[str], nnodes: int, nproc_per_node: int,
               node_rank: int, rdzv_endpoint: str | None, run_id: str, log_dir: str,
               rdzv_timeout_s: int) -> LaunchOutcome:
        """The ranks through torch's elastic launcher (the one launcher accelbench has); on
        one node, a free local port for jax's coordinator picked here first."""
        try:
            from accelbench.backends.torch.distributed import launch
        except ImportError as exc:  # pragma: no cover - torch is a core dependency
            return LaunchOutcome(error=f"the rank launcher needs torch: {exc}")
        before = os.environ.get(COORDINATOR_ENV)
        if nnodes == 1:  # the ranks inherit the launcher's environment
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                os.environ[COORDINATOR_ENV] = f"127.0.0.1:{s.getsockname()[1]}"
        try:
            return launch(args=args, nnodes=nnodes, nproc_per_node=nproc_per_node,
                          node_rank=node_rank, rdzv_endpoint=rdzv_endpoint, run_id=run_id,
                          log_dir=log_dir, rdzv_timeout_s=rdzv_timeout_s)
        finally:
            if before is None:
                os.environ.pop(COORDINATOR_ENV, None)
            else:
                os.environ[COORDINATOR_ENV] = before

    def join(self, dist_backend: str, device: str) -> JaxRankGroup:
        return init(device)
