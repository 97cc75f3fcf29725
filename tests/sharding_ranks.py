"""One rank of tests/test_sharding.py's launches: llm tiny trained a few steps in each
``--parallel`` mode in turn (one process group for all), after rank 0 trained it on one
device before any group existed; the losses and each rank's share of the parameters
written by rank 0 as JSON to the first argument; the second, if given, is the number of
steps (default 3; ``benchmarks/sharding_parity.py`` trains 50). At 4 ranks tp replicates
llm tiny's 2 key/value heads (each serves 2 ranks) and fsdp+tp is a 2 x 2 mesh. vit tiny
is trained on one device and under tp (its fused q, k, v split by heads) at the end, and
transformer tiny likewise (its nn.MultiheadAttentions replaced by split ones), with its
dropout off for the parity and once more under tp with it on (:func:`transformer_runs`),
unless ``--parity-only`` (which also leaves out each mode's profiled collectives). In
each mode every rank also reads a few batches of ``--data generated`` through the step's
feed (their digests, its data-parallel replica and mesh coordinate gathered)."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from accelbench.backends.torch.input import open_feed
from accelbench.backends.torch.sharding import data_replica
from accelbench.backends.torch.step import TorchTrainStep
from accelbench.spec import RunSpec, Topology
from accelbench.workloads.registry import get_implementation

STEPS = 3
#: Batches of generated data each rank reads in each mode (and rank 0 on one device).
DATA_BATCHES = 3
MODES = (("ddp", None), ("fsdp", None), ("tp", None), ("fsdp+tp", 2))


def local_numel(step: TorchTrainStep) -> int:
    """Elements of the parameters this rank holds (a DTensor's local shard)."""
    total = 0
    for p in step.optimizer.param_groups[0]["params"]:
        local = p.to_local() if hasattr(p, "to_local") else p
        total += local.numel()
    return total


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="one rank of the sharding parity launch")
    ap.add_argument("out", help="JSON file rank 0 writes")
    ap.add_argument("steps", nargs="?", type=int, default=STEPS)
    ap.add_argument("--parity-only", action="store_true",
                    help="llm's losses and shares only: no vit, no profiled collectives")
    return ap.parse_args()


ARGS = argparse.Namespace(steps=STEPS)


def train(spec: RunSpec, impl: Any = None) -> tuple[TorchTrainStep, list[float | None]]:
    step = TorchTrainStep(impl or get_implementation(spec.workload, "torch"), spec)
    losses = []
    for _ in range(ARGS.steps):
        step.step()
        losses.append(step.loss_value())
    return step, losses


def fed_batches(spec: RunSpec) -> list[str]:
    """Digests of the first batches ``--data generated`` (no loader workers) gives this
    rank of ``spec``'s topology: the step's own feed (sampler, loader, draws) without a
    model."""
    spec = dataclasses.replace(spec, data="generated", loader_workers=0)
    feed, _timer = open_feed(get_implementation("llm", "torch").workload, spec,
                             torch.device("cpu"))
    out = []
    for _ in range(DATA_BATCHES):
        digest = hashlib.sha256()
        for t in feed():
            digest.update(t.numpy().tobytes())
        out.append(digest.hexdigest()[:16])
    feed.stop()  # type: ignore[attr-defined]  # open_feed's callable is a Feed
    return out


def mesh_coordinate(step: TorchTrainStep) -> list[int] | None:
    """This rank's coordinate on the widest mesh its parameters lie on (DTensors': a
    tensor-parallel one's 2-D mesh under fsdp+tp), or None."""
    meshes = [p.device_mesh for p in step.model.parameters() if hasattr(p, "device_mesh")]
    if not meshes:
        return None
    return list(max(meshes, key=lambda m: m.ndim).get_coordinate())


def data_of(spec: RunSpec, step: TorchTrainStep) -> dict[str, list[Any]]:
    """Every rank's data-parallel replica (accelbench's arithmetic), mesh coordinate (the
    step's own mesh) and first batches of generated data, gathered to every rank."""
    mine = {"replica": list(data_replica(spec, dist.get_rank())),
            "coordinate": mesh_coordinate(step), "batches": fed_batches(spec)}
    every: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(every, mine)
    return {key: [rank[key] for rank in every] for key in mine}


def without_dropout(impl: Any) -> Any:
    """``impl`` building its model with every dropout off (nn.Dropout and the attentions'
    dropout on their weights): under tp each rank would draw its masks over its own shard,
    so only a dropout-free curve can follow one device's."""

    class NoDropout(type(impl)):  # type: ignore[misc]  # the workload's own implementation
        def build_model(self, size: str) -> nn.Module:
            model = super().build_model(size)
            for m in model.modules():
                if isinstance(m, nn.Dropout):
                    m.p = 0.0
                elif isinstance(m, nn.MultiheadAttention):
                    m.dropout = 0.0
            return model

    return NoDropout(impl.workload)


def transformer_runs(out: dict[str, object], *, grouped: bool) -> None:
    """transformer tiny without dropout on one device (rank 0, before any process group:
    ``grouped`` False) or under tp (``grouped``), and under tp with its dropout on."""
    impl = get_implementation("transformer", "torch")
    spec = RunSpec(workload="transformer", size="tiny", batch_size=32)
    if grouped:
        spec = RunSpec(workload="transformer", size="tiny", batch_size=32, topology=Topology(
            nproc_per_node=dist.get_world_size(), parallel="tp"))
    step, losses = train(spec, without_dropout(impl))
    if not grouped:
        out["transformer_one_device"] = losses
        return
    out["transformer_tp"] = {"losses": losses, "local_params": local_numel(step),
                             "params": step.param_count}
    out["transformer_tp_dropout"] = train(spec, impl)[1]


def main() -> None:
    global ARGS
    ARGS = parse_args()
    # One thread a rank: the ranks share the host's cores, and idle OpenMP threads spinning
    # while a rank waits on the other cost more CPU than the tiny models' math.
    torch.set_num_threads(1)
    out: dict[str, object] = {}
    if os.environ["RANK"] == "0":  # one device, before any process group exists
        out["one_device"] = train(RunSpec(workload="llm", size="tiny", batch_size=64))[1]
        # generated here, before the other ranks read it
        out["one_device_batches"] = fed_batches(RunSpec(workload="llm", size="tiny",
                                                        batch_size=64))
        if not ARGS.parity_only:
            out["vit_one_device"] = train(RunSpec(workload="vit", size="tiny",
                                                  batch_size=8))[1]
            transformer_runs(out, grouped=False)
    dist.init_process_group("gloo")
    for mode, tp in MODES:
        spec = RunSpec(workload="llm", size="tiny", batch_size=64, topology=Topology(
            nproc_per_node=dist.get_world_size(), parallel=mode, tp=tp,  # type: ignore[arg-type]
            act_ckpt=mode == "fsdp+tp"))
        step, losses = train(spec)
        out[mode] = {"losses": losses, "local_params": local_numel(step),
                     "collectives": (None if ARGS.parity_only
                                     else step.phase_steps().collective_times(1)),
                     "params": step.param_count, "sharding": step.extra().get("sharding"),
                     "data": data_of(spec, step)}
    if not ARGS.parity_only:  # ViT's fused q, k, v split by heads (vit tiny: 4 heads, MLP 64)
        spec = RunSpec(workload="vit", size="tiny", batch_size=8, topology=Topology(
            nproc_per_node=dist.get_world_size(), parallel="tp"))
        step, losses = train(spec)
        out["vit_tp"] = {"losses": losses, "local_params": local_numel(step),
                         "params": step.param_count}
        transformer_runs(out, grouped=True)
    if dist.get_rank() == 0:
        with open(ARGS.out, "w", encoding="utf-8") as f:
            json.dump(out, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
