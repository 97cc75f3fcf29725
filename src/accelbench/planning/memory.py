"""Each rank's memory, estimated before a case runs (``run --dry-run``), per ``--parallel``.

The parts, in bytes per rank:

- parameters (fp32, 4 B each), gradients (fp32) and optimizer state (AdamW: two fp32
  moments; SGD: one momentum buffer), each divided by the degree that shards it: 1 under
  DDP, the ranks under FSDP, the tensor-parallel degree under TP (the blocks' linear
  layers hold nearly all of a transformer's parameters; embeddings are replicated, so this
  part is a lower bound), the ranks under FSDP+TP;
- activations of one step for a transformer (``d_model``, ``layers``, ``heads``,
  ``seq_len`` in its configuration): Korthikanti et al. (2022), *Reducing Activation
  Recomputation in Large Transformer Models*, eq. 1 and 2 without the attention-score term
  (these models call fused scaled-dot-product attention, which never stores the scores):
  ``34 s b h`` bytes per layer in 16-bit, ``s b h (10 + 24 / t)`` under t-way tensor
  parallelism, doubled for fp32; with ``--act-ckpt`` only each layer's input (``2 s b h``
  bytes in 16-bit) plus one layer's full set; plus the logits and their gradient in fp32
  (``2 x 4 s b vocab``) where the model has a vocabulary. Other workloads: not estimated
  (said so).

What it leaves out (framework buffers, the allocator's cache, FSDP2's unsharded
parameters of the block in flight, communication buffers) is named in the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelbench.spec import RunSpec

#: Bytes of optimizer state per parameter (fp32).
OPTIMIZER_BYTES = {"adamw": 8, "sgd": 4}
LEFT_OUT = ("not counted: framework and runtime buffers, the allocator's cache, FSDP2's "
            "unsharded parameters of the block in flight, communication buffers")


@dataclass(frozen=True, slots=True)
class RankMemory:
    """One rank's estimated memory in bytes, by part."""

    params: int
    grads: int
    optimizer: int
    activations: int | None
    """None: not estimated for this workload (:attr:`note` says why)."""
    note: str

    @property
    def total(self) -> int:
        return self.params + self.grads + self.optimizer + (self.activations or 0)


def _activation_bytes(spec: RunSpec, cfg: Any, tokens: int) -> int | None:
    names = ("d_model", "layers", "heads", "seq_len")
    if cfg is None or not all(isinstance(getattr(cfg, n, None), int) for n in names):
        return None
    h, layers = int(cfg.d_model), int(cfg.layers)
    t = spec.topology.tp_degree
    width = 2 if spec.precision.startswith("amp") else 4  # bytes per activation element
    # Korthikanti's per-layer bytes at 2 B/element, rescaled to this precision's width.
    per_layer = tokens * h * (10 + 24 / t) * width / 2
    vocab = getattr(cfg, "vocab", None)
    logits = 2 * 4 * tokens * int(vocab) if isinstance(vocab, int) else 0
    if spec.topology.act_ckpt:
        return int(layers * tokens * h * width + per_layer + logits)
    return int(layers * per_layer + logits)


def estimate_rank_memory(spec: RunSpec, param_count: int) -> RankMemory:
    """Each rank's memory for ``spec`` (a model of ``param_count`` parameters)."""
    from accelbench.workloads.registry import get_workload

    wl = get_workload(spec.workload)
    held = _params_held(spec, param_count, wl)
    params = int(held * 4)  # fp32 master weights
    opt = int(held * OPTIMIZER_BYTES.get(wl.optimizer, 8))
    cfg = wl.config(spec.size) if callable(getattr(wl, "config", None)) else None
    seq = getattr(cfg, "seq_len", None)
    tokens = spec.batch_size if wl.sample_unit.startswith("token") or not seq else \
        spec.batch_size * int(seq)
    act = _activation_bytes(spec, cfg, tokens)
    note = LEFT_OUT if act is not None else (
        f"activations not estimated for {spec.workload} (the estimate knows transformer "
        f"layers only); {LEFT_OUT}")
    return RankMemory(params=params, grads=params, optimizer=opt, activations=act, note=note)


def _params_held(spec: RunSpec, param_count: int, wl: Any) -> float:
    """Parameters one rank holds: FSDP splits all of them over its ranks; a tensor-parallel
    plan splits only its layers' weights (``Workload.tp_split_params``) over the TP
    degree, embeddings, norms and heads staying whole on every TP rank (then FSDP splits
    what each TP rank holds over ``dp``)."""
    topo = spec.topology
    if topo.parallel == "ddp":
        return float(param_count)
    if topo.parallel == "fsdp":
        return param_count / topo.mesh_size
    tp = topo.tp_degree
    dp = topo.mesh_size // tp if topo.parallel == "fsdp+tp" else 1
    split = wl.tp_split_params(spec.size, tp)
    if split is None:  # no plan: refused before an estimate; all split, as a bound
        return param_count / (tp * dp)
    split = min(split, param_count)
    return (param_count - split + split / tp) / dp


def fits(est: RankMemory, device_bytes: int | None, ranks_sharing: int) -> bool | None:
    """Whether ``ranks_sharing`` ranks of ``est`` fit in ``device_bytes`` (None: the
    device's memory is not known)."""
    if device_bytes is None:
        return None
    return est.total * ranks_sharing <= device_bytes
