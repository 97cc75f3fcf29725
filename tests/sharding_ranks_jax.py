"""One JAX process of tests/test_sharding_jax.py's launch (torch's elastic launcher, as
``accelbench run --framework jax --nproc-per-node 2`` starts them), with 2 XLA host devices:
jax.distributed joined through the backend's hooks, then llm tiny trained 3 steps on one
device of rank 0's (the reference) and in every mode on a mesh spanning both processes
(ddp, fsdp and fsdp+tp ``--tp 2`` over both processes' 2 devices, 4 in all; tp over one
device of each, 2 in all: llm tiny's 2 kv heads allow no more; fsdp+tp with every block
under nnx.remat), the worker's own collectives tried; rank 0 writes the losses and facts
as JSON to ``sys.argv[1]``."""

from __future__ import annotations

import json
import os
import sys

# XLA's cheaper compile, as the parity script's (the same numbers; 4 compiles per process).
os.environ["XLA_FLAGS"] = ("--xla_force_host_platform_device_count=2 "
                           "--xla_backend_optimization_level=0 "
                           "--xla_llvm_disable_expensive_passes=true")

from accelbench.backends.jax.distributed import JaxDistributed  # noqa: E402
from accelbench.backends.jax.runtime import prepare_process  # noqa: E402
from accelbench.spec import RunSpec, Topology  # noqa: E402

prepare_process()
group = JaxDistributed().join("auto", "cpu")

import jax  # noqa: E402 - after jax.distributed.initialize

from accelbench.backends.jax.backend import JaxTrainStep  # noqa: E402
from accelbench.workloads.registry import get_implementation  # noqa: E402

impl = get_implementation("llm", "jax")
MODES = {"ddp": Topology(nproc_per_node=2, devices=2),
         "fsdp": Topology(nproc_per_node=2, devices=2, parallel="fsdp"),
         "tp": Topology(nproc_per_node=2, parallel="tp"),
         "fsdp+tp": Topology(nproc_per_node=2, devices=2, parallel="fsdp+tp", tp=2,
                             act_ckpt=True)}
# The reference: one device of rank 0's own (no mesh), the same seed and batch.
if group.is_root:
    MODES = {"one": Topology(), **MODES}

out: dict[str, dict] = {}
for mode, topo in MODES.items():
    step = JaxTrainStep(impl, RunSpec(workload="llm", size="tiny", batch_size=32,
                                      framework="jax", topology=topo))
    losses = []
    for _ in range(3):
        step.step()
        losses.append(step.loss_value())
    local = sum(s.data.size for x in jax.tree.leaves(step.state[0])
                for s in x.addressable_shards)
    out[mode] = {"losses": losses, "local_params": local, "params": step.param_count,
                 "rows": int(step.batch[0].shape[0]), "extra": step.extra(),
                 "memory": step.peak_memory()}
    del step
facts = {"rank": group.info.rank, "devices": len(jax.devices()),
         "local_params": {m: o.pop("local_params") for m, o in out.items()},
         "max": group.max_all([float(group.info.rank), -1.0])}
gathered = group.gather(facts)
if group.is_root:
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        json.dump({"modes": out, "ranks": gathered}, f)
group.close()
