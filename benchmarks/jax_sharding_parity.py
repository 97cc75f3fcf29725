"""Loss parity of JAX's ``--parallel`` modes on XLA host devices (docs/sharding.md).

A workload at tiny size (``--workload``: llm, vit or transformer), the same seed and global
batch, trained ``--steps`` steps on one device and under ddp, fsdp and fsdp+tp (``--tp 2``,
with ``--act-ckpt``) on ``--devices`` host devices, and tp on as many as the heads allow
(llm tiny: its 2 key/value heads, so 2; vit and transformer tiny: 4 heads, so all 4);
prints each mode's losses, the largest relative difference from one device's at any step,
the elements of the parameters device 0 holds (the sharding is real, not DDP again) and
the collectives in the mode's compiled step. One process: the host devices are set before
jax is imported.

    python benchmarks/jax_sharding_parity.py --steps 50 --devices 4
    python benchmarks/jax_sharding_parity.py --steps 50 --devices 4 --workload vit
    python benchmarks/jax_sharding_parity.py --steps 50 --devices 4 --workload transformer
    python benchmarks/jax_sharding_parity.py --steps 50 --devices 4 --workload transformer \
        --transformer-dropout 0

``--transformer-dropout 0`` builds the JAX transformer without dropout (the workload trains
with 0.1): under ddp, fsdp and fsdp+tp its masks are drawn for the global batch, so with
dropout the curve differs from one device's by dropout's noise, not by the sharding.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time

MODES = (("ddp", None, False), ("fsdp", None, False), ("tp", None, False),
         ("fsdp+tp", 2, True))

#: Devices of the tp mode where fewer than ``--devices``: llm tiny's 2 key/value heads.
TP_DEVICES = {"llm": 2}

COLLECTIVES = ("all-reduce", "all-gather", "all-to-all", "collective-permute",
               "reduce-scatter")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--workload", default="llm", choices=("llm", "vit", "transformer"))
    ap.add_argument("--batch-size", type=int, default=None,
                    help="per replica; default the workload's tiny batch (llm: 32 tokens, "
                         "2 sequences of 16; vit: 4 images; transformer: 64 tokens)")
    ap.add_argument("--transformer-dropout", type=float, default=None,
                    help="the JAX transformer's dropout rate instead of the workload's 0.1")
    args = ap.parse_args(argv)
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               f" --xla_force_host_platform_device_count={args.devices}")

    from accelbench.backends.jax.backend import JaxTrainStep
    from accelbench.backends.jax.runtime import import_jax
    from accelbench.spec import RunSpec, Topology
    from accelbench.workloads.registry import get_implementation, get_workload

    jax = import_jax()
    impl = get_implementation(args.workload, "jax")
    if args.transformer_dropout is not None:
        from accelbench.backends.jax.models import transformer

        transformer.DROPOUT = args.transformer_dropout  # read by build_model
    batch = args.batch_size or get_workload(args.workload).default_batch_sizes["tiny"][0]

    def train(spec: RunSpec) -> tuple[JaxTrainStep, list[float]]:
        step = JaxTrainStep(impl, spec)
        losses = []
        for _ in range(args.steps):
            step.step()
            losses.append(float(step.loss_value() or 0.0))
        return step, losses

    t0 = time.perf_counter()
    base = RunSpec(workload=args.workload, size="tiny", batch_size=batch)
    _, reference = train(base)
    out: dict[str, object] = {"workload": args.workload, "batch_size": batch,
                              "transformer_dropout": args.transformer_dropout,
                              "one_device": reference, "devices": len(jax.devices("cpu"))}
    worst = 0.0
    for mode, tp, ckpt in MODES:
        devices = args.devices
        if mode == "tp":
            devices = TP_DEVICES.get(args.workload, args.devices)
        spec = RunSpec(workload=args.workload, size="tiny", batch_size=batch,
                       topology=Topology(devices=devices, parallel=mode, tp=tp,  # type: ignore[arg-type]
                                         act_ckpt=ckpt))
        step, losses = train(spec)
        params = step.state[0]
        local = sum(x.addressable_shards[0].data.size for x in jax.tree.leaves(params))
        rel = max(abs(a - b) / abs(b) for a, b in zip(losses, reference, strict=True))
        worst = max(worst, rel)
        hlo = step._compiled.as_text()  # noqa: SLF001 - the compiled step's collectives
        out[mode] = {"losses": losses, "max_rel_diff": rel, "params": step.param_count,
                     "device0_params": int(local), "sharding": step.extra()["sharding"],
                     "collectives": {c: len(re.findall(rf" {c}(-start)?\(", hlo))
                                     for c in COLLECTIVES}}
    out["max_rel_diff"] = worst
    out["seconds"] = round(time.perf_counter() - t0, 1)
    json.dump(out, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
