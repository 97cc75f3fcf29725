"""Harness overhead: accelbench's reported throughput vs a bare hand-written training loop.

Both measure the same model, batch and precision, side by side in one run,
alternating rounds so machine noise hits both alike. The ratio is
accelbench / bare; the target is >= 0.98.

    python benchmarks/harness_overhead.py --workload resnet50 --size tiny
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import accelbench
from accelbench.workloads import get_workload


def bare_loop(workload: str, size: str, batch_size: int, precision: str, iterations: int,
              warmup: int) -> float:
    """A plain PyTorch training loop, timed end to end; returns samples/s."""
    wl = get_workload(workload)
    torch.manual_seed(0)
    model = wl.build_model(size).train()  # type: ignore[arg-type]
    batch = wl.make_batch(size, batch_size, torch.device("cpu"),  # type: ignore[arg-type]
                          torch.Generator().manual_seed(0))
    opt = torch.optim.SGD(model.parameters(), lr=wl.learning_rate, momentum=0.9)
    bf16 = precision == "amp_bf16"

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = wl.loss(model, batch)
        loss.backward()
        opt.step()

    for _ in range(warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(iterations):
        step()
    return batch_size * iterations / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="resnet50")
    ap.add_argument("--size", default="tiny")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "amp_bf16"])
    ap.add_argument("--iterations", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    wl = get_workload(args.workload)
    batch = wl.default_batch_sizes[args.size][0]
    bare, ours, ours_mean = [], [], []
    for i in range(args.rounds):
        bare.append(bare_loop(args.workload, args.size, batch, args.precision,
                              args.iterations, warmup=10))
        r = accelbench.run(args.workload, size=args.size, precision=args.precision,
                           iterations=args.iterations, store=False)
        if r.status != "ok" or r.stats is None:
            raise SystemExit(f"accelbench run failed: {r.status} {r.error}")
        ours.append(r.stats.samples_per_s)
        ours_mean.append(batch / r.stats.mean_s)
        print(f"round {i + 1}: bare {bare[-1]:10.2f}/s   accelbench {ours[-1]:10.2f}/s "
              f"(at mean step time {ours_mean[-1]:10.2f}/s)   ratio {ours[-1] / bare[-1]:.3f}")
    ratio = statistics.median(ours) / statistics.median(bare)
    ratio_mean = statistics.median(ours_mean) / statistics.median(bare)
    print(f"{args.workload} {args.size} bs={batch} {args.precision}: "
          f"accelbench/bare throughput ratio {ratio:.3f} as reported (median step), "
          f"{ratio_mean:.3f} at the mean step time like the bare loop (target >= 0.98)")


if __name__ == "__main__":
    main()
