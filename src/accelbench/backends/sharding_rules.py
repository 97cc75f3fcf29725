"""The refusals every framework's sharding shares: tensor parallelism needs a plan for the
workload and a degree that divides its heads and widths; ``--act-ckpt`` needs blocks.

Each backend's ``sharding.check`` calls :func:`check_plans` with its own plans (torch and
JAX do not plan the same workloads yet) after its own framework's refusals.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

from accelbench.errors import ConfigError

if TYPE_CHECKING:
    from accelbench.spec import RunSpec


def check_plans(spec: RunSpec, *, plans: Collection[str], later: Mapping[str, str],
                blocks: Collection[str], widths: tuple[int, ...] = (),
                kv_heads: int | None = None, where: str = "") -> None:
    """Refuse, in one line, tensor parallelism for a workload without a plan (``later``:
    the transformer family's workloads planned later, and why) or with a degree that does
    not divide ``widths`` (heads, key/value heads, the MLP's width), and ``--act-ckpt`` for
    a workload outside ``blocks``. ``where`` (e.g. `` in jax``) names the framework in the
    refusal of a workload planned later.

    ``kv_heads``: a framework that replicates key/value heads when the degree exceeds them
    (torch, as Megatron does for grouped-query attention) passes them here rather than in
    ``widths``: the degree must then divide them or be a multiple of them.

    Raises:
        ConfigError: as above.
    """
    topo = spec.topology
    if topo.parallel in ("tp", "fsdp+tp"):
        if spec.workload in later:
            raise ConfigError(f"--parallel {topo.parallel}: no tensor-parallel plan for "
                              f"{spec.workload}{where} yet: {later[spec.workload]}; use fsdp")
        if spec.workload not in plans:
            raise ConfigError(f"--parallel {topo.parallel} needs a transformer workload "
                              f"({', '.join(plans)}); {spec.workload} has no tensor-parallel "
                              "plan: use fsdp or ddp")
        degree = topo.tp_degree
        if any(n % degree for n in widths) or (
                kv_heads is not None and kv_heads % degree and degree % kv_heads):
            kv = ("" if kv_heads is None else
                  f" and divide its {kv_heads} key/value heads or be a multiple of them "
                  "(each then replicated)")
            raise ConfigError(f"--tp {degree} must divide the heads and widths of "
                              f"{spec.workload} at {spec.size} ({', '.join(map(str, widths))})"
                              f"{kv}")
    if topo.act_ckpt and spec.workload not in blocks:
        raise ConfigError(f"--act-ckpt checkpoints each block of a transformer workload "
                          f"({', '.join(sorted(blocks))}); "
                          f"{spec.workload} has none")

