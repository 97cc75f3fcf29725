"""Peak memory per rank by ``--parallel`` mode: the same case under DDP and FSDP (and TP).

Each mode runs through accelbench's real path (the elastic launcher, a gloo or NCCL group,
the mode's wrappers); each rank's peak memory is what the record keeps per rank (a CPU:
the rank process's peak RSS, framework included; CUDA: torch.cuda.max_memory_allocated).
The runs are sequential, so no two modes share the machine's memory at once. A model must
be large enough that its parameters, gradients and optimizer state outweigh the framework
for the difference to show (llm gpt2: 124 M parameters, 16 B each under AdamW in fp32).

    python benchmarks/sharding_memory.py                            # llm gpt2, 2 ranks, CPU
    python benchmarks/sharding_memory.py --modes ddp fsdp tp --size small --batch-size 512
"""

from __future__ import annotations

import argparse

import accelbench
from accelbench import api


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--workload", default="llm")
    ap.add_argument("--size", default="gpt2")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--nproc-per-node", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=1)
    ap.add_argument("--modes", nargs="+", default=["ddp", "fsdp"])
    args = ap.parse_args()
    policy = api.make_policy(warmup_min=1, warmup_max=1, iterations=args.iterations)
    peaks: dict[str, int] = {}
    for mode in args.modes:
        topology = api.make_topology(nproc_per_node=args.nproc_per_node, parallel=mode)
        r = accelbench.run(args.workload, size=args.size, batch_size=args.batch_size,
                           device=args.device, policy=policy, topology=topology,
                           energy=False, store=False)
        if r.status != "ok":
            raise SystemExit(f"{mode}: {r.status}: {r.error}")
        per_rank = [x["peak_memory_bytes"] for x in r.ranks["per_rank"]]
        peaks[mode] = max(per_rank)
        step = f"; step {r.stats.median_s:.1f} s" if r.stats else ""
        print(f"{mode:8s} peak memory per rank: "
              + ", ".join(f"rank {i} {b / 2**20:.0f} MiB" for i, b in enumerate(per_rank))
              + f" ({r.peak_memory_source}){step}")
    if "ddp" in peaks:
        for mode, peak in peaks.items():
            if mode != "ddp":
                print(f"{mode} / ddp peak memory per rank (max over ranks): "
                      f"{peak / peaks['ddp']:.3f}")


if __name__ == "__main__":
    main()
