"""JAX's input pipeline against torch's on the same files: accelbench's ``BatchLoader``
(spawned worker processes, numpy batches; what ``--framework jax --data`` reads through)
and torch's ``DataLoader`` (what ``--framework torch --data`` reads through), each making
the same samples (:mod:`accelbench.data.transforms`: JPEG decode, RandomResizedCrop, flip,
normalise; or token windows) of a generated dataset, with no model. Prints samples/s per
loader and worker count and the ratio BatchLoader / DataLoader, medians over rounds that
alternate the two so machine noise hits both alike. The workers' start and the first
batch are outside the timing (as in a case: the step takes its first batch at build).

    python benchmarks/jax_loader.py                          # resnet50 tiny images, 0 and 2 workers
    python benchmarks/jax_loader.py --workload llm --batches 200 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any


def rate(loader: Any, batches: int, batch: int) -> float:
    it = iter(loader)
    next(it)  # workers started, first batch made: outside the timing
    t0 = time.perf_counter()
    for _ in range(batches):
        next(it)
    return batches * batch / (time.perf_counter() - t0)


def torch_loader(dataset: Any, batch: int, workers: int) -> Any:
    import torch
    from torch.utils.data import DataLoader

    def forever() -> Any:
        loader = DataLoader(dataset, batch_size=batch, shuffle=True, num_workers=workers,
                            drop_last=True, persistent_workers=workers > 0,
                            prefetch_factor=2 if workers > 0 else None,
                            generator=torch.Generator().manual_seed(0))
        while True:
            yield from loader
    return forever()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", default="resnet50")
    ap.add_argument("--size", default="tiny")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--batches", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    args = ap.parse_args()

    from accelbench.backends.jax.input import build_samples
    from accelbench.backends.torch.input import build_dataset
    from accelbench.data.generate import ensure_generated
    from accelbench.data.layouts import layout_of
    from accelbench.data.loader import BatchLoader
    from accelbench.workloads.registry import get_workload

    layout = layout_of(get_workload(args.workload), args.size)
    root = Path(os.environ.get("ACCELBENCH_DATA_DIR") or tempfile.mkdtemp())
    path, _ = ensure_generated(layout, args.size, out=root / f"{layout.key()}-{args.size}")
    print(f"# {args.workload} {args.size}: {path}, batches of {args.batch}, "
          f"{args.batches} timed batches, {args.rounds} rounds, load {os.getloadavg()[0]:.2f}")
    got: dict[tuple[str, int], list[float]] = {}
    for _ in range(args.rounds):
        for w in args.workers:
            ours = BatchLoader(build_samples(path, layout), args.batch, w, 2, seed=0)
            try:
                got.setdefault(("BatchLoader", w), []).append(rate(ours, args.batches,
                                                                   args.batch))
            finally:
                ours.close()
            got.setdefault(("DataLoader", w), []).append(
                rate(torch_loader(build_dataset(path, layout), args.batch, w), args.batches,
                     args.batch))
    print("| workers | torch DataLoader /s | accelbench BatchLoader /s | ratio |")
    print("| --- | --- | --- | --- |")
    for w in args.workers:
        theirs = statistics.median(got["DataLoader", w])
        ours_r = statistics.median(got["BatchLoader", w])
        print(f"| {w} | {theirs:,.0f} | {ours_r:,.0f} | {ours_r / theirs:.2f} |")


if __name__ == "__main__":
    main()
