"""One JAX process of tests/test_sharding_jax.py's launch (torch's elastic launcher, as
``accelbench run --framework jax --nproc-per-node 2`` starts them): jax.distributed joined
through the backend's hooks, llm tiny trained 3 steps under fsdp on the mesh of both
processes' devices, the worker's own collectives tried; rank 0 writes the losses as JSON
to ``sys.argv[1]`` (the test compares them with one device's, which its module trains
anyway)."""

from __future__ import annotations

import json
import sys

from accelbench.backends.jax.distributed import JaxDistributed
from accelbench.backends.jax.runtime import prepare_process
from accelbench.spec import RunSpec, Topology

prepare_process()
group = JaxDistributed().join("auto", "cpu")

import jax  # noqa: E402 - after jax.distributed.initialize

from accelbench.backends.jax.backend import JaxTrainStep  # noqa: E402
from accelbench.workloads.registry import get_implementation  # noqa: E402

impl = get_implementation("llm", "jax")


step = JaxTrainStep(impl, RunSpec(workload="llm", size="tiny", batch_size=32, framework="jax",
                                  topology=Topology(nproc_per_node=2, parallel="fsdp")))
mesh_losses = []
for _ in range(3):
    step.step()
    mesh_losses.append(step.loss_value())
local = sum(s.data.size for x in jax.tree.leaves(step.state[0]) for s in x.addressable_shards)
facts = {"rank": group.info.rank, "local_params": local, "devices": len(jax.devices()),
         "max": group.max_all([float(group.info.rank), -1.0])}
gathered = group.gather(facts)
if group.is_root:
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        json.dump({"mesh": mesh_losses, "ranks": gathered,
                   "params": step.param_count, "extra": step.extra(),
                   "rows": int(step.batch[0].shape[0])}, f)
group.close()
