"""DDP overhead: per-rank throughput of an N-rank data-parallel run vs one process alone.

Both runs step the same per-rank batch. The N-rank run goes through accelbench's real
path (torch's elastic launcher, a gloo or NCCL process group, DDP's gradient all-reduce
every step); its per-rank throughput is its global throughput / N. The 1-process run is
the same case on one device: on a CPU with the same threads as one rank gets (the cores
split N ways), so both use the same cores; on GPUs, one GPU. Rounds interleave so machine
noise hits both alike; the ratio (per-rank / alone) is 1.0 for free data parallelism.

    python benchmarks/ddp_overhead.py                                  # 2 ranks, gloo, CPU
    python benchmarks/ddp_overhead.py --device cuda --nproc-per-node 8 --workload resnet50 \\
        --size small
"""

from __future__ import annotations

import argparse
import os
import statistics

import accelbench
from accelbench import api


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--workload", default="lstm")
    ap.add_argument("--size", default="tiny")
    ap.add_argument("--batch-size", type=int, default=None)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--nproc-per-node", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    n = args.nproc_per_node
    threads = None
    if args.device == "cpu":
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
        threads = max(1, cores // n)
    common = dict(size=args.size, batch_size=args.batch_size, device=args.device,
                  threads=threads, iterations=args.iterations, energy=False, store=False)
    topology = api.make_topology(nproc_per_node=n)
    alone, per_rank = [], []
    for i in range(args.rounds):
        order = ("alone", "ddp") if i % 2 == 0 else ("ddp", "alone")
        got: dict[str, accelbench.Result] = {}
        for kind in order:
            got[kind] = (accelbench.run(args.workload, **common) if kind == "alone"
                         else accelbench.run(args.workload, topology=topology, **common))
        a, d = got["alone"], got["ddp"]
        if a.stats is None or d.stats is None:
            raise SystemExit(f"run failed: {a.error or d.error}")
        alone.append(a.stats.samples_per_s)
        per_rank.append(d.stats.samples_per_s / n)
        print(f"round {i + 1}: alone {alone[-1]:9.2f}/s   {n}-rank DDP {per_rank[-1]:9.2f}/s "
              f"per rank ({d.stats.samples_per_s:.2f}/s global, {d.ranks.get('backend')})   "
              f"ratio {per_rank[-1] / alone[-1]:.3f}")
    ratio = statistics.median(per_rank) / statistics.median(alone)
    print(f"{args.workload} {args.size} on {args.device}: {n}-rank DDP per-rank / 1-process "
          f"throughput = {ratio:.3f} ({threads or '-'} thread(s) per process; median of "
          f"{args.rounds} interleaved rounds)")


if __name__ == "__main__":
    main()
