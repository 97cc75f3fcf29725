"""A case on many ranks, framework-neutral: the hooks a backend offers, and what they report.

The runner launches and joins ranks through :class:`DistributedHooks`, which a backend
returns from ``Backend.distributed()`` (torch: :mod:`accelbench.backends.torch.distributed`);
it never imports a framework's distributed package itself. :class:`RankInfo` reads the
launcher's environment (``RANK``, ``LOCAL_RANK`` ..., torchrun's names, which other
launchers share).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from accelbench.spec import RunSpec


@dataclass(frozen=True, kw_only=True, slots=True)
class RankFailure:
    """Why one rank of a launch failed, as the launcher saw it."""

    rank: int
    local_rank: int
    pid: int
    exitcode: int
    how: str
    """``killed by signal SIGKILL`` or ``exited with code 1``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class LaunchOutcome:
    """What a launch saw: no failures, or one per failed rank (first failure first)."""

    failures: tuple[RankFailure, ...] = ()
    error: str = ""
    """The launcher's own error (a rendezvous that timed out ...), or ``""``."""
    failures_by_rank: dict[int, RankFailure] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class RankInfo:
    """Where this process sits in the launch (the launcher's environment variables)."""

    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    group_rank: int
    """This node's rank in the rendezvous."""

    @classmethod
    def from_env(cls) -> RankInfo | None:
        """The launch's facts, or None outside a launched rank."""
        if "RANK" not in os.environ or "LOCAL_RANK" not in os.environ:
            return None
        return cls(
            rank=int(os.environ["RANK"]),
            local_rank=int(os.environ["LOCAL_RANK"]),
            world_size=int(os.environ["WORLD_SIZE"]),
            local_world_size=int(os.environ.get("LOCAL_WORLD_SIZE", "1")),
            group_rank=int(os.environ.get("GROUP_RANK", "0")),
        )


class RankGroup(Protocol):
    """The process group of a case, with the collectives the worker uses."""

    info: RankInfo
    backend: str
    """The resolved communication backend (``gloo``, ``nccl``)."""
    device: Any
    """The framework's device this rank drives."""
    host: str

    @property
    def is_root(self) -> bool:
        """Rank 0."""

    def max_all(self, values: Sequence[float]) -> list[float]:
        """Element-wise MAX of ``values`` over all ranks (every rank gets the same list)."""

    def gather(self, obj: Any) -> list[Any] | None:
        """``obj`` of every rank, in rank order, on rank 0 (None on the others)."""

    def threads(self) -> int:
        """Intra-op threads this rank computes with."""

    def device_uuid(self) -> str | None:
        """The vendor UUID of this rank's GPU (``GPU-...``), or None on a CPU."""

    def close(self) -> None:
        """Leave the process group."""


class RankPlace:
    """The part of a :class:`RankGroup` every framework's holds alike: this rank's place, its
    communication backend, its device and host; the framework's group adds its collectives."""

    def __init__(self, info: RankInfo, backend: str, device: Any) -> None:
        self.info = info
        self.backend = backend
        self.device = device
        self.host = socket.gethostname()

    @property
    def is_root(self) -> bool:
        """Rank 0."""
        return self.info.rank == 0


class DistributedHooks(Protocol):
    """What a backend offers for a case of many ranks."""

    rdzv_timeout_s: int
    """Seconds the rendezvous waits for every node at most."""

    def check(self, spec: RunSpec) -> None:
        """Refuse a topology that cannot run as asked, before anything runs.

        Raises:
            ConfigError: a device or a communication backend the ranks cannot use.
        """

    def resolve_backend(self, dist_backend: str, device: str) -> str:
        """The communication backend ``auto`` (or an explicit choice) means on ``device``."""

    def launch(self, *, args: Sequence[str], nnodes: int, nproc_per_node: int,
               node_rank: int, rdzv_endpoint: str | None, run_id: str, log_dir: str,
               rdzv_timeout_s: int) -> LaunchOutcome:
        """Run ``python ARGS`` as this node's ranks; block until every rank has exited."""

    def join(self, dist_backend: str, device: str) -> RankGroup:
        """In a launched rank: join the process group and return it."""
