"""``--parallel``: how a torch case's model is spread over its ranks.

- ``ddp``: every rank holds the whole model; gradients are all-reduced (DDP, as before).
- ``fsdp``: FSDP2 (:func:`torch.distributed.fsdp.fully_shard`) on each block and on the
  root, over a 1-D mesh of every rank: parameters, gradients and optimizer state sharded.
- ``tp``: tensor parallelism through DTensor's ``parallelize_module``, column-wise on the
  projections into a block's attention and MLP, row-wise on the ones out of them (Megatron's
  split), over a 1-D mesh of every rank; the rest of the model is replicated. ViT's fused
  q, k, v projection is split by heads (its rows laid out per rank first); the
  ``torch.nn.Transformer*Layer`` attentions of ``transformer`` are first replaced by ones
  with separate q, k, v Linears made from the same weights
  (:mod:`accelbench.backends.torch.tp_attention`). Key/value heads fewer than the degree
  (grouped-query attention) are replicated, each rank using the one its query heads read.
- ``fsdp+tp``: a 2-D mesh (dp x tp): the tensor-parallel plan on the ``tp`` dimension, then
  FSDP2 over ``dp``.

``--act-ckpt`` wraps each block in activation checkpointing (recomputed in backward).
torch is imported inside functions only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accelbench.backends.sharding_rules import check_plans

if TYPE_CHECKING:
    import torch

    from accelbench.spec import RunSpec

#: Workloads whose blocks have a tensor-parallel plan here (the block's module names).
TP_PLANS: dict[str, dict[str, str]] = {
    "llm": {"attn.q": "col", "attn.k": "col", "attn.v": "col", "attn.o": "row",
            "mlp.up": "col", "mlp.gate": "col", "mlp.down": "row"},
    "bert": {"q": "col", "k": "col", "v": "col", "o": "row", "up": "col", "down": "row"},
    # The fused q, k, v projection is split by heads: its rows are first put in a per-rank
    # layout (_heads_by_rank), so that a column split hands each rank q, k and v of its own
    # heads; the block then runs _vit_block_forward on them.
    "vit": {"qkv": "col", "proj": "row", "fc1": "col", "fc2": "row"},
    # torch.nn.Transformer*Layer: each nn.MultiheadAttention (self_attn, and the decoder's
    # multihead_attn) is first replaced by a SplitAttention of the same weights, whose
    # q, k, v and o are Linears (SPLIT_ATTENTION); the decoder's plan names both.
    "transformer": {f"{a}.{p}": "row" if p == "o" else "col"
                    for a in ("self_attn", "multihead_attn") for p in "qkvo"}
                   | {"linear1": "col", "linear2": "row"},
}

#: Workloads whose blocks fuse q, k and v in one Linear (block attribute), rearranged by
#: heads before the column split.
FUSED_QKV = {"vit": "qkv"}

#: Workloads whose blocks' ``nn.MultiheadAttention``s are replaced by
#: :class:`~accelbench.backends.torch.tp_attention.SplitAttention`s before the plan.
SPLIT_ATTENTION = frozenset({"transformer"})

#: The transformer family without a plan in this slice, and why (none left in torch).
TP_LATER: dict[str, str] = {}


def mesh_shape(spec: RunSpec) -> tuple[int, int]:
    """(data-parallel degree, tensor-parallel degree) of the case's ranks."""
    topo = spec.topology
    tp = topo.tp_degree
    return topo.world_size // tp, tp


def data_replica(spec: RunSpec, rank: int) -> tuple[int, int]:
    """(data-parallel replica of ``rank``, replicas): the rank's data-parallel coordinate
    on the case's mesh (:func:`mesh_shape`'s dp x tp, which :func:`parallelize` lays out
    row-major through ``init_device_mesh``: ``rank = dp_index * tp + tp_index``). Under ddp
    and fsdp each rank is its own replica; the ranks of a tensor-parallel group are one
    replica, which reads one batch."""
    dp, tp = mesh_shape(spec)
    return rank // tp, dp


def check(spec: RunSpec, tp_heads: tuple[int, ...] = (), kv_heads: int | None = None
          ) -> None:
    """Refuse a ``--parallel`` mode the case's workload cannot run, in one line.

    Args:
        spec: The case.
        tp_heads: Sizes the tensor-parallel degree must divide (heads, the MLP's width),
            from the workload's configuration.
        kv_heads: Key/value heads of a grouped-query attention: the degree divides them or
            is a multiple of them (each then replicated, :func:`_replicate_kv`).

    Raises:
        ConfigError: tensor parallelism for a workload without a plan, a degree that does
            not divide its heads, or ``--act-ckpt`` for a workload without blocks.
    """
    check_plans(spec, plans=TP_PLANS, later=TP_LATER, blocks=BLOCK_WORKLOADS, widths=tp_heads,
                kv_heads=kv_heads)


#: Workloads whose blocks ``--act-ckpt`` checkpoints: the transformer family, whose
#: repeated layers are the items of its ModuleLists (:func:`_block_lists`).
BLOCK_WORKLOADS = frozenset({"llm", "bert", "vit", "transformer"})


def _block_lists(model: torch.nn.Module) -> list[torch.nn.ModuleList]:
    """Every ModuleList of blocks in the model (its repeated layers), outermost first."""
    import torch

    out: list[torch.nn.ModuleList] = []
    for module in model.modules():
        if isinstance(module, torch.nn.ModuleList) and not any(
                module is m or _inside(module, m) for m in out):
            out.append(module)
    return out


def _inside(module: torch.nn.Module, outer: torch.nn.Module) -> bool:
    return any(module is m for m in outer.modules())


def _blocks(model: torch.nn.Module) -> list[torch.nn.Module]:
    return [b for lst in _block_lists(model) for b in lst]


def _checkpoint_blocks(model: torch.nn.Module) -> None:
    """Each block recomputes its activations in backward (non-reentrant checkpointing)."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        checkpoint_wrapper,
    )

    for lst in _block_lists(model):
        for i, block in enumerate(lst):
            lst[i] = checkpoint_wrapper(block)


def _tp_plan(workload: str) -> dict[str, Any]:
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    return {name: ColwiseParallel() if how == "col" else RowwiseParallel()
            for name, how in TP_PLANS[workload].items()}


def _heads_by_rank(linear: torch.nn.Linear, degree: int) -> None:
    """Reorder a fused q, k, v projection's output rows from ``[q | k | v]`` (each by
    heads) to ``[q_0 k_0 v_0 | q_1 k_1 v_1 | ...]``, ``_r`` being rank r's heads, so that
    an even column split gives each rank q, k and v of the same heads. The same weights in
    another order: the model's function is unchanged."""
    import torch

    with torch.no_grad():
        w = linear.weight
        linear.weight.copy_(w.view(3, degree, -1, w.shape[-1]).transpose(0, 1)
                            .reshape(w.shape))
        if linear.bias is not None:
            b = linear.bias
            linear.bias.copy_(b.view(3, degree, -1).transpose(0, 1).reshape(b.shape))


def _vit_block_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    """:meth:`accelbench.backends.torch.models.vit.Block.forward` on this rank's heads: the
    same operations, the widths read from the local q, k, v (``self.heads`` is the rank's
    share; ``proj``'s row-wise split all-reduces the heads' outputs)."""
    import torch.nn.functional as F

    n, t, _ = x.shape
    qkv = self.qkv(self.norm1(x))
    head_dim = qkv.shape[-1] // (3 * self.heads)
    q, k, v = qkv.view(n, t, 3, self.heads, head_dim).permute(2, 0, 3, 1, 4).unbind(0)
    att = F.scaled_dot_product_attention(q, k, v)
    x = x + self.proj(att.transpose(1, 2).reshape(n, t, self.heads * head_dim))
    return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


def _sum_grad_over(group: Any) -> Any:
    """An autograd function: the identity forward, its gradient summed over ``group`` in
    backward (Megatron's copy into a tensor-parallel region)."""
    import torch
    import torch.distributed as dist

    class SumGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            return x.view_as(x)

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
            grad = grad.contiguous()
            dist.all_reduce(grad, group=group)
            return grad

    return SumGrad


def _replicate_kv(attn: Any, mesh: Any) -> None:
    """Key/value heads replicated over a tensor-parallel degree that exceeds them (a
    multiple of them), as Megatron does for grouped-query attention: ``k`` and ``v`` stay
    whole (plain parameters, the same on every rank) and each rank keeps the output of the
    one key/value head its query heads use, head ``(r * heads_per_rank) // (heads //
    kv_heads)`` on rank r. Their output's gradient is summed over the ranks (each rank's
    covers its own query heads), so ``k``'s and ``v``'s weights and the block's input get
    the whole gradient on every rank. The attention then sees 1 key/value head."""
    degree, rank = mesh.size(), mesh.get_local_rank()
    heads, kv_heads = attn.heads, attn.kv_heads
    head_dim = attn.k.out_features // kv_heads
    kv = (rank * (heads // degree)) // (heads // kv_heads)
    sum_grad = _sum_grad_over(mesh.get_group())

    def own_head(_module: Any, _args: Any, out: torch.Tensor) -> torch.Tensor:
        return sum_grad.apply(out)[..., kv * head_dim:(kv + 1) * head_dim]

    attn.k.register_forward_hook(own_head)
    attn.v.register_forward_hook(own_head)
    attn.kv_heads = degree  # divided by the degree below: 1 per rank


def _tensor_parallel(model: torch.nn.Module, workload: str, mesh: Any) -> None:
    """The column/row-wise plan on each block; each block's attention then computes its
    share of the heads (``heads`` and ``kv_heads`` divided by the degree; key/value heads
    fewer than the degree are replicated instead, :func:`_replicate_kv`). A fused q, k, v
    projection (:data:`FUSED_QKV`) is first laid out by rank (:func:`_heads_by_rank`); an
    ``nn.MultiheadAttention`` (:data:`SPLIT_ATTENTION`) is first replaced by a
    :class:`~accelbench.backends.torch.tp_attention.SplitAttention` of the same weights,
    which reads its heads from its local width."""
    import types

    from torch.distributed.tensor.parallel import parallelize_module

    from accelbench.backends.torch.tp_attention import split_attention

    degree = mesh.size()
    plan = _tp_plan(workload)
    fused = FUSED_QKV.get(workload)
    for block in _blocks(model):
        if workload in SPLIT_ATTENTION:
            split_attention(block)
        attn = getattr(block, "attn", block)
        replicate = getattr(attn, "kv_heads", degree) < degree
        present = {k: v for k, v in plan.items() if _has(block, k)
                   and not (replicate and k in ("attn.k", "attn.v"))}
        if fused is not None:
            _heads_by_rank(getattr(block, fused), degree)
            block.forward = types.MethodType(_vit_block_forward, block)
        parallelize_module(block, mesh, present)
        if replicate:
            _replicate_kv(attn, mesh)
        for name in ("heads", "kv_heads"):
            if hasattr(attn, name):
                setattr(attn, name, getattr(attn, name) // degree)


def _has(block: torch.nn.Module, path: str) -> bool:
    """The block has a module at ``path`` (gpt2-style MLPs have no ``gate``)."""
    try:
        return block.get_submodule(path) is not None
    except AttributeError:
        return False


def _mp_policy(precision: str) -> Any:
    """FSDP2's mixed precision following ``--precision``: amp parameters in bf16/fp16 for
    compute with gradients reduced in fp32; fp32/tf32: none."""
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy

    dtype = {"amp_bf16": torch.bfloat16, "amp_fp16": torch.float16}.get(precision)
    if dtype is None:
        return MixedPrecisionPolicy()
    return MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32)


def _fully_shard(model: torch.nn.Module, mesh: Any, precision: str) -> None:
    from torch.distributed.fsdp import fully_shard

    mp = _mp_policy(precision)
    for block in _blocks(model):
        fully_shard(block, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)


def ensure_group(device: torch.device) -> None:
    """A process group of one for a sharded mode on a single device (the wrappers' own
    overhead at one rank): an in-memory store, gloo on a CPU, nccl on CUDA."""
    import torch.distributed as dist

    if dist.is_initialized():
        return
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)


def parallelize(model: torch.nn.Module, spec: RunSpec, device: torch.device
                ) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The model spread over the ranks as ``--parallel`` asks, and what the record says of
    it (mode, mesh). ``ddp`` keeps the wrapper of :func:`wrap_model`."""
    from accelbench.backends.torch.distributed import wrap_model

    topo = spec.topology
    if topo.parallel == "ddp":
        if not topo.act_ckpt:
            return wrap_model(model, device), {}
        _checkpoint_blocks(model)
        return wrap_model(model, device), {"mode": "ddp", "act_ckpt": True}
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    ensure_group(device)
    world = dist.get_world_size()
    dp, tp = (world // topo.tp_degree, topo.tp_degree) if "tp" in topo.parallel else (world, 1)
    # Order: the tensor-parallel plan names the blocks' own modules, so it comes before
    # checkpointing wraps them; FSDP2 shards last (over DTensors on a 2-D mesh).
    if topo.parallel == "fsdp":
        mesh = init_device_mesh(device.type, (dp,), mesh_dim_names=("dp",))
    elif topo.parallel == "tp":
        mesh = init_device_mesh(device.type, (tp,), mesh_dim_names=("tp",))
        _tensor_parallel(model, spec.workload, mesh)
    else:
        mesh = init_device_mesh(device.type, (dp, tp), mesh_dim_names=("dp", "tp"))
        _tensor_parallel(model, spec.workload, mesh["tp"])
    if topo.act_ckpt:
        _checkpoint_blocks(model)
    if "fsdp" in topo.parallel:
        _fully_shard(model, mesh["dp"] if topo.parallel == "fsdp+tp" else mesh,
                     spec.precision)
    info = {"mode": topo.parallel, "mesh": {"dp": dp, "tp": tp},
            "act_ckpt": topo.act_ckpt,
            "mixed_precision": (f"FSDP2 param {spec.precision[4:]}, reduce fp32"
                                if "fsdp" in topo.parallel and spec.precision.startswith("amp")
                                else "none")}
    return model, info
