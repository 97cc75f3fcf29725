"""torch.distributed for a case on many devices: the launcher, the process group, DDP.

The runner stays framework-neutral (:mod:`accelbench.execution.launch`); everything that
touches torch.distributed is here, with torch imported inside functions.

- :class:`TorchDistributed` is what ``TorchBackend.distributed()`` hands the runner.
- :func:`launch` starts the ranks of this node through torchrun's own API
  (``elastic_launch`` with a c10d rendezvous, no restarts): no home-made launcher.
- :func:`init` joins the process group in a rank and returns a :class:`RankGroup` with the
  few collectives the worker needs (MAX all-reduce, gather to rank 0).
- :func:`rank_device` and :func:`wrap_model` are what the train step calls: a rank of a
  CUDA case drives ``cuda:LOCAL_RANK``; with a process group up, the model is wrapped in
  DDP.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from accelbench.backends.ranks import LaunchOutcome, RankFailure, RankInfo, RankPlace
from accelbench.errors import ConfigError

if TYPE_CHECKING:
    import torch

    from accelbench.spec import RunSpec

#: Seconds the c10d rendezvous waits for every node at most (the case's own timeout is
#: usually shorter: the parent kills the launcher then).
RDZV_TIMEOUT_S = 900


def resolve_backend(dist_backend: str, device: str) -> str:
    """``auto`` -> ``nccl`` on CUDA, ``gloo`` otherwise; an explicit choice is checked."""
    cuda = device.startswith("cuda")
    if dist_backend == "auto":
        return "nccl" if cuda else "gloo"
    if dist_backend == "nccl" and not cuda:
        raise ConfigError("--dist-backend nccl needs --device cuda; use gloo (or auto) on a CPU")
    return dist_backend


def launch(
    *,
    args: Sequence[str],
    nnodes: int,
    nproc_per_node: int,
    node_rank: int,
    rdzv_endpoint: str | None,
    run_id: str,
    log_dir: str,
    rdzv_timeout_s: int = RDZV_TIMEOUT_S,
) -> LaunchOutcome:
    """Run ``python ARGS`` as this node's ranks through ``elastic_launch``; blocks until
    every rank has exited (or one failed and the agent stopped the others).

    One node uses a rendezvous on a free localhost port; several nodes meet at
    ``rdzv_endpoint``, which node rank 0 hosts (c10d's ``is_host``).
    """
    import sys

    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    endpoint = rdzv_endpoint if nnodes > 1 and rdzv_endpoint else "127.0.0.1:0"
    config = LaunchConfig(
        min_nodes=nnodes,
        max_nodes=nnodes,
        nproc_per_node=nproc_per_node,
        run_id=run_id,
        rdzv_backend="c10d",
        rdzv_endpoint=endpoint,
        # Two nodes on one host (tests, a workstation) must not both try to host the store.
        # read_timeout: a node that comes up first waits for the host's store as long as
        # for the rendezvous itself (c10d's 60 s default fails it on a slow start).
        rdzv_configs={"timeout": rdzv_timeout_s, "read_timeout": rdzv_timeout_s,
                      "is_host": node_rank == 0 or nnodes == 1},
        max_restarts=0,
        monitor_interval=0.1,
        # Each rank's stderr in LOG_DIR/<run>/attempt_0/<local rank>/stderr.log (a rank that
        # dies without a report is described by its last line), and still on ours.
        logs_specs=DefaultLogsSpecs(log_dir=log_dir, redirects=Std.ERR, tee=Std.ERR),
        # Short: a rank left after another failed is stopped, not waited for.
        shutdown_timeout=5,
    )
    try:
        elastic_launch(config, entrypoint=sys.executable)(*args)
    except ChildFailedError as exc:
        failures = []
        for rank, f in exc.failures.items():
            how = (f"killed by signal {f.signal_name()}" if f.exitcode < 0
                   else f"exited with code {f.exitcode}")
            failures.append((f.timestamp, RankFailure(
                rank=int(rank), local_rank=int(f.local_rank), pid=int(f.pid),
                exitcode=int(f.exitcode), how=how)))
        failures.sort(key=lambda tf: (tf[0], tf[1].rank))
        ordered = tuple(f for _, f in failures)
        return LaunchOutcome(failures=ordered, failures_by_rank={f.rank: f for f in ordered})
    except Exception as exc:  # a rendezvous that failed, a bad endpoint ...
        return LaunchOutcome(error=f"{type(exc).__name__}: {exc}"[:500])
    return LaunchOutcome()


# --------------------------------------------------------------------------- in a rank


class RankGroup(RankPlace):
    """The process group of a case, with the collectives the worker uses.

    Args:
        info: This rank's place.
        backend: ``gloo`` or ``nccl`` (resolved).
        device: The torch device this rank drives (collectives of nccl run on it).
    """

    device: torch.device

    def max_all(self, values: Sequence[float]) -> list[float]:
        """Element-wise MAX of ``values`` over all ranks (every rank gets the same list)."""
        import torch
        import torch.distributed as dist

        t = torch.tensor(list(values), dtype=torch.float64, device=self._coll_device())
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return [float(v) for v in t.tolist()]

    def gather(self, obj: Any) -> list[Any] | None:
        """``obj`` of every rank, in rank order, on rank 0 (None on the others)."""
        import torch.distributed as dist

        out: list[Any] | None = [None] * self.info.world_size if self.is_root else None
        dist.gather_object(obj, out, dst=0)
        return out

    def threads(self) -> int:
        """Intra-op threads this rank computes with (ranks sharing a node split its cores)."""
        import torch

        return int(torch.get_num_threads())

    def device_uuid(self) -> str | None:
        """The CUDA device's UUID (``GPU-...``), or None on a CPU."""
        return device_uuid(self.device)

    def close(self) -> None:
        """Leave the group once every rank is done with it: a barrier first, so no rank
        tears its connections down while a peer is still in a collective with it (gloo
        fails a collective whose peer closed mid-way), then the group's own shutdown (its
        threads joined while the interpreter is whole). A barrier that fails (a peer
        already gone, which its own record reports) does not fail this rank."""
        import sys

        import torch.distributed as dist

        if not dist.is_initialized():
            return
        try:
            dist.barrier()
        except Exception as exc:  # a peer that died: the launcher names it
            print(f"accelbench: rank {self.info.rank}: the closing barrier failed: "
                  f"{type(exc).__name__}: {exc}"[:500], file=sys.stderr)
        dist.destroy_process_group()

    def _coll_device(self) -> torch.device:
        import torch

        return self.device if self.backend == "nccl" else torch.device("cpu")


def rank_device(device: str) -> torch.device:
    """The device this process drives: ``cuda:LOCAL_RANK`` for a rank of a CUDA case (the
    spec's device names the kind), the spec's device otherwise."""
    import torch

    info = RankInfo.from_env()
    if info is not None and device.startswith("cuda"):
        dev = torch.device(f"cuda:{info.local_rank}")
        torch.cuda.set_device(dev)
        return dev
    return torch.device(device)


def init(dist_backend: str, device: str) -> RankGroup:
    """Join the process group of this launch (``env://``) and return it.

    Raises:
        ConfigError: outside a launched rank, or a backend that cannot run on the device.
    """
    import datetime

    import torch.distributed as dist

    info = RankInfo.from_env()
    if info is None:
        raise ConfigError("not a launched rank (RANK/LOCAL_RANK unset)")
    backend = resolve_backend(dist_backend, device)
    dev = rank_device(device)
    dist.init_process_group(backend=backend, timeout=datetime.timedelta(minutes=30))
    return RankGroup(info, backend, dev)


def several_ranks() -> bool:
    """A process group of more than one rank is up (a group of one, which a sharded mode
    on one device opens, is not data parallelism)."""
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def wrap_model(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """The model in DDP when a process group of several ranks is up; the model itself
    otherwise."""
    if not several_ranks():
        return model
    from torch.nn.parallel import DistributedDataParallel

    if device.type == "cuda":
        return DistributedDataParallel(model, device_ids=[device.index])
    return DistributedDataParallel(model)


def device_uuid(device: torch.device) -> str | None:
    """The CUDA device's UUID (``GPU-...``), or None on a CPU."""
    import torch

    if device.type != "cuda":
        return None
    uuid = str(torch.cuda.get_device_properties(device).uuid)
    return uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"


class TorchDistributed:
    """The torch backend's :class:`~accelbench.backends.ranks.DistributedHooks`."""

    rdzv_timeout_s = RDZV_TIMEOUT_S

    def check(self, spec: RunSpec) -> None:
        """Rank r drives ``cuda:r``: the case names ``cpu`` or the first GPU; nccl needs GPUs.

        Raises:
            ConfigError: another device, or ``--dist-backend nccl`` on a CPU.
        """
        if spec.device.startswith("cuda") and spec.device != "cuda:0":
            raise ConfigError(f"--device {spec.device} with --nproc-per-node: rank r drives "
                              "cuda:r; use --device cuda (pick GPUs with CUDA_VISIBLE_DEVICES)")
        if spec.device not in ("cpu", "cuda:0"):
            raise ConfigError(f"--device {spec.device} with --nproc-per-node: data-parallel "
                              "runs take --device cpu or cuda")
        resolve_backend(spec.topology.dist_backend, spec.device)  # nccl on a CPU fails here

    def resolve_backend(self, dist_backend: str, device: str) -> str:
        return resolve_backend(dist_backend, device)

    def launch(self, *, args: Sequence[str], nnodes: int, nproc_per_node: int,
               node_rank: int, rdzv_endpoint: str | None, run_id: str, log_dir: str,
               rdzv_timeout_s: int) -> LaunchOutcome:
        return launch(args=args, nnodes=nnodes, nproc_per_node=nproc_per_node,
                      node_rank=node_rank, rdzv_endpoint=rdzv_endpoint, run_id=run_id,
                      log_dir=log_dir, rdzv_timeout_s=rdzv_timeout_s)

    def join(self, dist_backend: str, device: str) -> RankGroup:
        return init(dist_backend, device)
