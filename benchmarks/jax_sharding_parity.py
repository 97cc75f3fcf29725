"""Loss parity of JAX's ``--parallel`` modes on XLA host devices (docs/sharding.md).

llm tiny, the same seed and global batch, trained ``--steps`` steps on one device and under
ddp, fsdp and fsdp+tp (``--tp 2``, with ``--act-ckpt``) on ``--devices`` host devices, and
tp on 2 of them (llm tiny's 2 key/value heads split at most 2 ways); prints each mode's
losses, the largest relative difference from one device's at any step, and the elements
of the parameters device 0 holds (the sharding is real, not DDP again). One process: the
host devices are set before jax is imported.

    python benchmarks/jax_sharding_parity.py --steps 50 --devices 4
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

MODES = (("ddp", None, False), ("fsdp", None, False), ("tp", None, False),
         ("fsdp+tp", 2, True))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=32,
                    help="tokens per replica (llm tiny: 2 sequences of 16)")
    args = ap.parse_args(argv)
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               f" --xla_force_host_platform_device_count={args.devices}")

    from accelbench.backends.jax.backend import JaxTrainStep
    from accelbench.backends.jax.runtime import import_jax
    from accelbench.spec import RunSpec, Topology
    from accelbench.workloads.registry import get_implementation

    jax = import_jax()
    impl = get_implementation("llm", "jax")

    def train(spec: RunSpec) -> tuple[JaxTrainStep, list[float]]:
        step = JaxTrainStep(impl, spec)
        losses = []
        for _ in range(args.steps):
            step.step()
            losses.append(float(step.loss_value() or 0.0))
        return step, losses

    t0 = time.perf_counter()
    base = RunSpec(workload="llm", size="tiny", batch_size=args.batch_size)
    _, reference = train(base)
    out: dict[str, object] = {"one_device": reference, "devices": len(jax.devices("cpu"))}
    worst = 0.0
    for mode, tp, ckpt in MODES:
        devices = 2 if mode == "tp" else args.devices
        spec = RunSpec(workload="llm", size="tiny", batch_size=args.batch_size,
                       topology=Topology(devices=devices, parallel=mode, tp=tp,  # type: ignore[arg-type]
                                         act_ckpt=ckpt))
        step, losses = train(spec)
        params = step.state[0]
        local = sum(x.addressable_shards[0].data.size for x in jax.tree.leaves(params))
        rel = max(abs(a - b) / abs(b) for a, b in zip(losses, reference, strict=True))
        worst = max(worst, rel)
        out[mode] = {"losses": losses, "max_rel_diff": rel, "params": step.param_count,
                     "device0_params": int(local), "sharding": step.extra()["sharding"]}
    out["max_rel_diff"] = worst
    out["seconds"] = round(time.perf_counter() - t0, 1)
    json.dump(out, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
