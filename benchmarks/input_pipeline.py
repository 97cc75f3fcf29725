"""Input pipelines: every tiny image and token workload's throughput with synthetic data
and with generated data read through accelbench's loader, and its stall share; with
``--loader``, accelbench's image dataset against a bare Pillow + DataLoader loop over the
same files (no model; ratio accelbench / bare, target >= 0.95).

Each case runs through accelbench's real path (a worker process, the DataLoader feeding
the step, the wait timed inside each step), rounds interleaved so machine noise hits all
alike; the figures are medians over the rounds.

    python benchmarks/input_pipeline.py                      # every tiny workload, 3 rounds
    python benchmarks/input_pipeline.py --workload resnet50 --rounds 5 --workers 0 2
    python benchmarks/input_pipeline.py --loader             # the loader against a bare loop
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from accelbench import api

WORKLOADS = ("resnet50", "vgg16", "inception_v3", "vit", "llm", "bert", "lstm", "transformer")


def one(workload: str, data: str, workers: int | None, iterations: int) -> dict:
    extra = {} if data == "synthetic" else {"data": data, "loader_workers": workers}
    [r] = api.run_repeats(workload, size="tiny", iterations=iterations, energy=False,
                          store=False, **extra)
    assert r.status == "ok", (workload, data, r.error)
    inp = r.input or {}
    return {"tput": r.samples_per_s, "stall": inp.get("stall_fraction"),
            "wait": inp.get("wait_median_s"), "unit": r.sample_unit}


def table(args: argparse.Namespace) -> None:
    kinds = [("synthetic", None)] + [("generated", w) for w in args.workers]
    got: dict[tuple[str, str, int | None], list[dict]] = {}
    for _ in range(args.rounds):
        for wl in args.workload:
            for data, workers in kinds:
                got.setdefault((wl, data, workers), []).append(
                    one(wl, data, workers, args.iterations))
    head = ["workload", "synthetic /s"] + [f"generated w={w} /s (x, stall, wait)"
                                           for w in args.workers]
    print("| " + " | ".join(head) + " |\n|" + " --- |" * len(head))
    for wl in args.workload:
        base = statistics.median(x["tput"] for x in got[(wl, "synthetic", None)])
        cells = [wl, f"{base:,.0f} {got[(wl, 'synthetic', None)][0]['unit']}s"]
        for w in args.workers:
            runs = got[(wl, "generated", w)]
            tput = statistics.median(x["tput"] for x in runs)
            stall = statistics.median(x["stall"] for x in runs)
            wait = statistics.median(x["wait"] for x in runs)
            cells.append(f"{tput:,.0f} ({tput / base:.2f}x, {100 * stall:.0f}%, "
                         f"{1e3 * wait:.2f} ms)")
        print("| " + " | ".join(cells) + " |")


def loader_ratio(args: argparse.Namespace) -> None:
    """accelbench's ImageFolderSet vs a bare Pillow pipeline, both in a DataLoader."""
    import numpy as np
    import torch
    from PIL import Image
    from torch.utils.data import DataLoader

    from accelbench.backends.torch.input import ImageFolderSet
    from accelbench.data.check import image_files
    from accelbench.data.generate import ensure_generated
    from accelbench.data.layouts import ImageLayout

    side = 64
    with tempfile.TemporaryDirectory() as tmp:
        path, _ = ensure_generated(ImageLayout(side=side, classes=10), "small",
                                   out=Path(tmp) / "d")
        files = image_files(path)

        class Bare:
            def __len__(self) -> int:
                return len(files)

            def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
                name, label = files[i]
                with Image.open(name) as raw:
                    img = raw.convert("RGB")
                w, h = img.size
                s = int(min(w, h) * float(np.sqrt(np.random.uniform(0.08, 1.0))))
                x, y = np.random.randint(0, w - s + 1), np.random.randint(0, h - s + 1)
                img = img.resize((side, side), Image.Resampling.BILINEAR,
                                 box=(x, y, x + s, y + s))
                if np.random.rand() < 0.5:
                    img = img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
                a = (np.asarray(img, dtype=np.float32) / 255.0 - 0.45) / 0.225
                return torch.from_numpy(a.transpose(2, 0, 1).copy()), label

        def rate(ds: object, workers: int) -> float:
            loader = DataLoader(ds, batch_size=32, shuffle=True, num_workers=workers,
                                drop_last=True)
            t0, n = time.perf_counter(), 0
            for x, _y in loader:
                n += len(x)
            return n / (time.perf_counter() - t0)

        for workers in args.workers:
            ours, bare = [], []
            for _ in range(args.rounds):
                ours.append(rate(ImageFolderSet(files, side), workers))
                bare.append(rate(Bare(), workers))
            o, b = statistics.median(ours), statistics.median(bare)
            print(f"workers={workers}: accelbench {o:,.0f} images/s, bare {b:,.0f} images/s, "
                  f"ratio {o / b:.3f} ({len(files)} JPEGs of {side} px, {args.rounds} rounds)")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--workload", nargs="+", default=list(WORKLOADS))
    ap.add_argument("--workers", nargs="+", type=int, default=[0, 2])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--loader", action="store_true")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    if args.loader:
        loader_ratio(args)
    else:
        table(args)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
