"""One rank of tests/test_sharding.py's launch: llm tiny trained a few steps in each
``--parallel`` mode in turn (one process group for all), after rank 0 trained it on one
device before any group existed; the losses and each rank's share of the parameters
written by rank 0 as JSON to ``sys.argv[1]``; ``sys.argv[2]``, if given, is the number of
steps (default 4; ``benchmarks/sharding_parity.py`` trains 50). At 4 ranks tp is left out
(llm tiny's 2 key/value heads do not split 4 ways) and fsdp+tp is a 2 x 2 mesh. vit tiny
is trained on one device and under tp (its fused q, k, v split by heads) at the end."""

from __future__ import annotations

import json
import os
import sys

import torch.distributed as dist

from accelbench.backends.torch.step import TorchTrainStep
from accelbench.spec import RunSpec, Topology
from accelbench.workloads.registry import get_implementation

STEPS = 4
MODES = (("ddp", None), ("fsdp", None), ("tp", None), ("fsdp+tp", 2))


def local_numel(step: TorchTrainStep) -> int:
    """Elements of the parameters this rank holds (a DTensor's local shard)."""
    total = 0
    for p in step.optimizer.param_groups[0]["params"]:
        local = p.to_local() if hasattr(p, "to_local") else p
        total += local.numel()
    return total


def train(spec: RunSpec) -> tuple[TorchTrainStep, list[float | None]]:
    step = TorchTrainStep(get_implementation(spec.workload, "torch"), spec)
    losses = []
    for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else STEPS):
        step.step()
        losses.append(step.loss_value())
    return step, losses


def main() -> None:
    out: dict[str, object] = {}
    if os.environ["RANK"] == "0":  # one device, before any process group exists
        out["one_device"] = train(RunSpec(workload="llm", size="tiny", batch_size=64))[1]
        out["vit_one_device"] = train(RunSpec(workload="vit", size="tiny", batch_size=8))[1]
    dist.init_process_group("gloo")
    for mode, tp in MODES:
        if mode == "tp" and 2 % dist.get_world_size():
            continue  # llm tiny's 2 key/value heads: TP over at most 2 ranks
        spec = RunSpec(workload="llm", size="tiny", batch_size=64, topology=Topology(
            nproc_per_node=dist.get_world_size(), parallel=mode, tp=tp,  # type: ignore[arg-type]
            act_ckpt=mode == "fsdp+tp"))
        step, losses = train(spec)
        out[mode] = {"losses": losses, "local_params": local_numel(step),
                     "collectives": step.phase_steps().collective_times(1),
                     "params": step.param_count, "sharding": step.extra().get("sharding")}
    # ViT's fused q, k, v split by heads (vit tiny: 4 heads, an MLP of 64)
    spec = RunSpec(workload="vit", size="tiny", batch_size=8, topology=Topology(
        nproc_per_node=dist.get_world_size(), parallel="tp"))
    step, losses = train(spec)
    out["vit_tp"] = {"losses": losses, "local_params": local_numel(step),
                     "params": step.param_count}
    if dist.get_rank() == 0:
        with open(sys.argv[1], "w", encoding="utf-8") as f:
            json.dump(out, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
