"""``--parallel`` and ``--devices`` in JAX: one process's devices as a ``jax.sharding.Mesh``.

The mesh has three axes, ``data``, ``fsdp`` and ``tensor``, over the ``--devices N`` devices
of the process (a CPU: N XLA host devices, set before jax starts by
:func:`~accelbench.backends.jax.runtime.prepare_process`):

- ``ddp``: ``data`` = N; every device holds the whole model; the batch is split over
  ``data`` and XLA all-reduces the gradients.
- ``fsdp``: ``fsdp`` = N; each parameter (and its gradient and optimizer state) is split
  along its largest axis that N divides (:func:`param_spec`); the batch is split too.
- ``tp``: ``tensor`` = N; Megatron's split of each block (column-wise on q, k, v, up,
  gate, fc1, linear1: their output axis; row-wise on o, down, proj, fc2, out_proj,
  linear2: their input axis; :data:`TP_PLANS`); the rest of the model is replicated; the
  batch is whole on every device. A fused q, k, v projection (vit's ``qkv``, the
  transformer's ``in_kernel``: ``[q | k | v]``, each by heads) is first laid out by device,
  ``[q_0 k_0 v_0 | q_1 k_1 v_1 | ...]`` (:func:`heads_by_device`; its module's
  ``head_groups`` tells the forward), so that the column split gives each device q, k and
  v of its own heads; the one-device model keeps ``[q | k | v]``.
- ``fsdp+tp``: ``fsdp`` = N / ``--tp``, ``tensor`` = ``--tp``: the TP plan, then FSDP's
  rule on each parameter's largest remaining axis.

The step is one ``jax.jit`` with the parameters', optimizer state's and batch's
``NamedSharding`` as its in and out shardings (GSPMD inserts the collectives). As in torch,
``--batch-size`` is per data-parallel replica and every replica trains the same synthetic
batch (the seed's), so one device at that batch takes the same gradient at every step: the
global batch is the batch tiled over ``data`` x ``fsdp`` (:func:`place_batch`).

``--act-ckpt``: each block of the model's block lists (``nnx.List`` of modules: llm, bert,
vit, transformer) runs under ``nnx.remat`` (recomputed in backward; :func:`checkpoint_blocks`).
jax is imported inside functions only.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from accelbench.backends.sharding_rules import check_plans
from accelbench.errors import ConfigError

if TYPE_CHECKING:
    from accelbench.spec import RunSpec

#: The mesh's axis names, in order.
AXES = ("data", "fsdp", "tensor")

#: Workloads whose blocks have a tensor-parallel plan: (module, its linear layer) -> how
#: the layer is split ("col": its output axis; "row": its input axis; "fused": q, k and v
#: in one kernel, ``[q | k | v]`` by heads, whose columns are first laid out by device
#: (:func:`heads_by_device`), then split as "col"). A parameter a module holds itself,
#: ``in_kernel``/``in_bias``, is the kernel/bias of its layer ``in``.
TP_PLANS: dict[str, dict[tuple[str, str], str]] = {
    "llm": {("attn", "q"): "col", ("attn", "k"): "col", ("attn", "v"): "col",
            ("attn", "o"): "row", ("mlp", "up"): "col", ("mlp", "gate"): "col",
            ("mlp", "down"): "row"},
    # bert's encoder layer holds its projections itself: the layer list's item, then q ...
    "bert": {("*", "q"): "col", ("*", "k"): "col", ("*", "v"): "col", ("*", "o"): "row",
             ("*", "up"): "col", ("*", "down"): "row"},
    # vit's block holds its fused qkv, proj and MLP itself.
    "vit": {("*", "qkv"): "fused", ("*", "proj"): "row", ("*", "fc1"): "col",
            ("*", "fc2"): "row"},
    # transformer: each attention (encoder self-, decoder self- and cross-attention) holds
    # its fused in-projection (in_kernel, in_bias) and out_proj; ff its two linears.
    "transformer": {("self_attn", "in"): "fused", ("cross_attn", "in"): "fused",
                    ("self_attn", "out_proj"): "row", ("cross_attn", "out_proj"): "row",
                    ("ff", "linear1"): "col", ("ff", "linear2"): "row"},
}

#: The transformer family without a plan here, and why (none now: kept for the refusal
#: :func:`~accelbench.backends.sharding_rules.check_plans` shares with torch).
TP_LATER: dict[str, str] = {}

#: Workloads whose blocks ``--act-ckpt`` recomputes (their models keep them in nnx.List).
BLOCK_WORKLOADS = frozenset({"llm", "bert", "vit", "transformer"})


def check(spec: RunSpec, tp_widths: tuple[int, ...] = ()) -> None:
    """Refuse what a JAX case cannot run, in one line.

    Raises:
        ConfigError: ``--phases`` or ``--data`` across processes, tensor
            parallelism without a plan or with a degree that does not divide the heads,
            ``--act-ckpt`` without blocks (:func:`~accelbench.backends.sharding_rules.check_plans`).
    """
    if spec.policy.phases and spec.topology.world_size > 1:
        raise ConfigError("--phases with JAX processes (--nproc-per-node/--nnodes): not yet "
                          "(the phase pass is built for one process's mesh: across processes "
                          "each feeds only its own devices' rows and counts no samples but "
                          "its own); use --devices N on one process or drop --phases")
    if spec.data != "synthetic" and spec.topology.world_size > 1:
        raise ConfigError(f"--data {spec.data} with JAX processes (--nproc-per-node/--nnodes): "
                          "not yet (one process's loader feeds the whole mesh; each process "
                          "would need its own shard of the files); use --devices N on one "
                          "process or --data synthetic")
    check_plans(spec, plans=TP_PLANS, later=TP_LATER, blocks=BLOCK_WORKLOADS, widths=tp_widths,
                where=" in jax")


def axis_sizes(spec: RunSpec) -> dict[str, int]:
    """``{"data": d, "fsdp": f, "tensor": t}`` of the case's mesh (their product: the
    devices)."""
    topo = spec.topology
    n, t = topo.mesh_size, topo.tp_degree
    if topo.parallel == "ddp":
        return {"data": n, "fsdp": 1, "tensor": 1}
    return {"data": 1, "fsdp": n // t, "tensor": t}


def make_mesh(spec: RunSpec, devices: list[Any]) -> Any:
    """The case's ``Mesh`` over the first devices of ``devices``."""
    import numpy as np
    from jax.sharding import Mesh

    sizes = axis_sizes(spec)
    n = sizes["data"] * sizes["fsdp"] * sizes["tensor"]
    grid = np.array(devices[:n], dtype=object).reshape(tuple(sizes[a] for a in AXES))
    return Mesh(grid, AXES)


def _names(path: tuple[Any, ...]) -> list[str]:
    """A pytree path's keys as strings (``blocks``, ``0``, ``attn``, ``q``, ``kernel``)."""
    out = []
    for k in path:
        for attr in ("key", "name", "idx"):
            if hasattr(k, attr):
                out.append(str(getattr(k, attr)))
                break
        else:
            out.append(str(k))
    return out


def _layer_of(names: list[str]) -> tuple[list[str], str]:
    """A parameter's layer path and kind: ``[..., "qkv"], "kernel"`` for ``[..., "qkv",
    "kernel"]``; a fused parameter a module holds itself (``in_kernel``) is the kernel of
    its layer ``in``."""
    names = [n for n in names if n != "value"]
    leaf = names[-1] if names else ""
    for kind in ("kernel", "bias"):
        if leaf.endswith("_" + kind):
            return [*names[:-1], leaf[:-len(kind) - 1]], kind
    return names[:-1], leaf


def _tp_rule(workload: str, layer: list[str]) -> str | None:
    """``"col"``/``"row"``/``"fused"`` for a planned layer (its path), else None."""
    plan = TP_PLANS.get(workload, {})
    if len(layer) < 2:
        return None
    owner, name = layer[-2], layer[-1]
    how = plan.get((owner, name))
    if how is None and owner.isdigit():
        how = plan.get(("*", name))
    return how


def param_spec(shape: tuple[int, ...], names: list[str], workload: str,
               sizes: dict[str, int]) -> tuple[str | None, ...]:
    """The ``PartitionSpec`` entries of one parameter: the TP plan's axis on ``tensor``
    (a kernel is (in, out): column-wise and fused split ``out``, row-wise ``in``; their
    bias splits, a row-wise one stays whole), then FSDP's rule: the largest remaining axis
    that ``fsdp`` divides (a parameter with none stays whole on every device)."""
    spec: list[str | None] = [None] * len(shape)
    t, f = sizes["tensor"], sizes["fsdp"]
    layer, kind = _layer_of(names)
    how = _tp_rule(workload, layer) if t > 1 else None
    if how is not None:
        if kind == "kernel" and len(shape) == 2:
            axis = 0 if how == "row" else 1
            if shape[axis] % t == 0:
                spec[axis] = "tensor"
        elif kind == "bias" and how != "row" and len(shape) == 1 and shape[0] % t == 0:
            spec[0] = "tensor"
    if f > 1:
        free = [i for i in range(len(shape)) if spec[i] is None and shape[i] % f == 0]
        if free:
            spec[max(free, key=lambda i: (shape[i], -i))] = "fsdp"
    return tuple(spec)


def by_device(x: Any, groups: int) -> Any:
    """A numpy copy of a fused ``[q | k | v]`` array (kernel or bias: the last axis, each
    third by heads) as ``[q_0 k_0 v_0 | ... | q_g-1 k_g-1 v_g-1]``, ``_r`` the r-th of
    ``groups`` equal runs of heads: the same values in another order."""
    import numpy as np

    host = np.asarray(x)  # on the host: no XLA program per shape
    return host.reshape(*host.shape[:-1], 3, groups, -1).swapaxes(-3, -2).reshape(host.shape)


def heads_by_device(model: Any, spec: RunSpec) -> int:
    """Under tensor parallelism, every fused layer of the plan (``"fused"``: vit's qkv,
    the transformer's in-projections) laid out by device (:func:`by_device`, the
    ``tensor`` axis's size the groups) and the module holding it told (``head_groups``,
    which its forward reads), so that a column split hands each device q, k and v of its
    own heads and XLA moves nothing between the projection and attention. The model
    computes the same function. Returns the layers laid out (0: nothing to do)."""
    import jax.numpy as jnp
    from flax import nnx

    t = axis_sizes(spec)["tensor"]
    if t == 1 or "fused" not in TP_PLANS.get(spec.workload, {}).values():
        return 0
    owners: dict[tuple[str, ...], Any] = {}
    for path, node in list(nnx.iter_graph(model)):
        if not isinstance(node, nnx.Param):
            continue
        layer, _ = _layer_of([str(k) for k in path])
        if _tp_rule(spec.workload, layer) != "fused":
            continue
        node.value = jnp.asarray(by_device(node.value, t))
        owner = model
        for k in layer[:-1]:
            owner = owner[int(k)] if k.isdigit() else getattr(owner, k)
        if not hasattr(owner, "head_groups"):
            raise TypeError(f"{type(owner).__name__} does not read a fused layer laid out "
                            "by device (no head_groups)")
        owner.head_groups = t
        owners[tuple(layer)] = owner
    return len(owners)


def param_shardings(params: Any, mesh: Any, spec: RunSpec) -> Any:
    """A ``NamedSharding`` for every parameter leaf (:func:`param_spec`)."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    sizes = dict(mesh.shape)

    def one(path: tuple[Any, ...], x: Any) -> Any:
        names = [n for n in _names(path) if n != "value"]
        return NamedSharding(mesh, PartitionSpec(*param_spec(tuple(x.shape), names,
                                                             spec.workload, sizes)))

    return jax.tree_util.tree_map_with_path(one, params)


def like_params(tree: Any, params: Any, shardings: Any, mesh: Any) -> Any:
    """Shardings for ``tree`` (the optimizer's state): a leaf whose path ends with a
    parameter's path and has its shape takes that parameter's sharding (AdamW's moments,
    SGD's momentum); any other leaf (a step count) is replicated."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    by_path: dict[tuple[str, ...], tuple[tuple[int, ...], Any]] = {}
    for (path, x), s in zip(jax.tree_util.tree_leaves_with_path(params),
                            jax.tree.leaves(shardings), strict=True):
        by_path[tuple(_names(path))] = (tuple(x.shape), s)
    replicated = NamedSharding(mesh, PartitionSpec())

    def one(path: tuple[Any, ...], x: Any) -> Any:
        names = tuple(_names(path))
        shape = tuple(getattr(x, "shape", ()))
        for start in range(len(names)):
            hit = by_path.get(names[start:])
            if hit is not None and hit[0] == shape:
                return hit[1]
        return replicated

    return jax.tree_util.tree_map_with_path(one, tree)


def put(tree: Any, shardings: Any) -> Any:
    """``tree`` (the same values in every process) on its shardings: ``device_put`` where
    this process holds every device of a sharding, else each process its own shards (a mesh
    over many processes: ``jax.make_array_from_callback``)."""
    import jax
    import numpy as np

    def one(x: Any, s: Any) -> Any:
        if s.is_fully_addressable:
            return jax.device_put(x, s)
        host = np.asarray(x)
        return jax.make_array_from_callback(host.shape, s, lambda idx: host[idx])

    return jax.tree.map(one, tree, shardings)


def place_batch(batch: Any, mesh: Any) -> Any:
    """The global batch on the mesh: each leaf with the batch's rows as its first axis (the
    first leaf's; a token batch's rows are sequences) tiled over ``data`` x ``fsdp`` (every
    replica trains the seed's batch, as torch's ranks do) and split over them; other
    leaves replicated. A mesh over many processes: each process feeds the rows of its own
    devices (``jax.make_array_from_process_local_data``)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding, PartitionSpec

    leaves = [x for x in jax.tree.leaves(batch) if getattr(x, "ndim", 0) >= 1]
    batch_size = leaves[0].shape[0] if leaves else -1
    replicas = mesh.shape["data"] * mesh.shape["fsdp"]
    split = NamedSharding(mesh, PartitionSpec(("data", "fsdp")))
    whole = NamedSharding(mesh, PartitionSpec())

    def one(x: Any) -> Any:
        if getattr(x, "ndim", 0) >= 1 and x.shape[0] == batch_size:
            if not split.is_fully_addressable:
                # This process's replicas of the seed's batch (the distinct row blocks its
                # devices hold: none split over processes, as tp's, is the whole batch);
                # the global batch is every process's rows in process order.
                shape = (x.shape[0] * replicas, *x.shape[1:])
                blocks = {idx[0].indices(shape[0]) if idx else (0, shape[0], 1) for idx
                          in split.addressable_devices_indices_map(shape).values()}
                local = sum(len(range(*b)) for b in blocks) // x.shape[0]
                rows = np.concatenate([np.asarray(x)] * local, axis=0)
                return jax.make_array_from_process_local_data(split, rows, shape)
            tiled = jnp.concatenate([x] * replicas, axis=0) if replicas > 1 else x
            return jax.device_put(tiled, split)
        return put(x, whole)

    return jax.tree.map(one, batch)


@functools.cache
def _remat_class(base: type) -> type:
    """``base`` whose ``__call__`` runs under ``nnx.remat`` (one class per base, so the
    model's graph definition stays the same from step to step)."""
    from flax import nnx

    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N807
        return nnx.remat(base.__call__)(self, *args, **kwargs)

    return type(base.__name__, (base,), {"__call__": __call__,
                                         "__module__": base.__module__})


def checkpoint_blocks(model: Any) -> int:
    """Every module in one of the model's block lists (``nnx.List``) recomputes its
    activations in backward; returns the blocks so wrapped."""
    from flax import nnx

    n = 0
    for _, node in nnx.iter_graph(model):
        if isinstance(node, nnx.List):
            for item in node:
                if isinstance(item, nnx.Module) and not getattr(type(item), "_remat", False):
                    cls = _remat_class(type(item))
                    cls._remat = True  # type: ignore[attr-defined]
                    item.__class__ = cls
                    n += 1
    return n


def memory_per_device(devices: list[Any]) -> list[dict[str, Any]] | str:
    """Each device's peak bytes (XLA's ``memory_stats``), or why there are none."""
    out: list[dict[str, Any]] = []
    for d in devices:
        try:
            stats = d.memory_stats()
        except Exception:  # noqa: BLE001 - a platform without statistics
            stats = None
        if not stats or stats.get("peak_bytes_in_use") is None:
            return (f"unavailable: XLA keeps no memory statistics on {d.platform} "
                    "(memory_stats() is None); the process's peak covers every device")
        out.append({"device": str(d), "peak_memory_bytes": int(stats["peak_bytes_in_use"])})
    return out


def describe(spec: RunSpec, mesh: Any, blocks: int) -> dict[str, Any]:
    """What the record says of the mesh (torch's ``backend_extra.sharding`` shape: mode,
    ``mesh`` as dp x tp, mixed precision; plus JAX's own axes and devices)."""
    topo = spec.topology
    sizes = dict(mesh.shape)
    processes = len({d.process_index for d in mesh.devices.flat})
    return {"mode": topo.parallel,
            "mesh": {"dp": sizes["data"] * sizes["fsdp"], "tp": sizes["tensor"]},
            "axes": {a: int(sizes[a]) for a in AXES},
            "devices": int(mesh.size),
            **({"processes": processes, "devices_per_process": int(mesh.size) // processes}
               if processes > 1 else {}),
            "platform": str(mesh.devices.flat[0].platform),
            "act_ckpt": topo.act_ckpt,
            **({"remat_blocks": blocks} if topo.act_ckpt else {}),
            "mixed_precision": (f"parameters cast to {spec.precision[4:]} in the step, "
                                "fp32 master weights" if spec.precision.startswith("amp")
                                else "none")}
