"""Input pipelines: every tiny image and token workload's throughput with synthetic data
and with generated data read through accelbench's loader, and its stall share; with
``--loader``, accelbench's image dataset against bare Pillow + DataLoader loops doing the
same work over the same files (no model; ratio accelbench / bare, target >= 0.95).

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
    inp = r.input
    return {"tput": r.samples_per_s, "stall": inp.stall_fraction if inp else None,
            "wait": inp.wait_median_s if inp else None, "unit": r.sample_unit}


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


def _bare_crop(width: int, height: int) -> tuple[int, int, int, int]:
    """RandomResizedCrop's box as torchvision computes it (scale 0.08-1, log-uniform ratio
    3/4-4/3, ten tries, then the centre crop), written out here as a user would."""
    import math
    import random

    area = width * height
    for _ in range(10):
        target = area * random.uniform(0.08, 1.0)
        aspect = math.exp(random.uniform(math.log(3 / 4), math.log(4 / 3)))
        w, h = round(math.sqrt(target * aspect)), round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            x, y = random.randint(0, width - w), random.randint(0, height - h)
            return x, y, x + w, y + h
    ratio = width / height
    w, h = (width, round(width * 3 / 4)) if ratio > 4 / 3 else \
        (round(height * 3 / 4), height) if ratio < 3 / 4 else (width, height)
    x, y = (width - w) // 2, (height - h) // 2
    return x, y, x + w, y + h


def loader_ratio(args: argparse.Namespace) -> None:
    """accelbench's image dataset (as ``run`` builds it: ``build_dataset``) against bare
    Pillow datasets doing the same work (decode, RandomResizedCrop, flip, per-channel
    normalisation to a CHW float tensor), each in a ``DataLoader`` of the same settings;
    the rounds alternate which goes first."""
    import random

    import numpy as np
    import torch
    from PIL import Image
    from torch.utils.data import DataLoader

    from accelbench.backends.torch.input import build_dataset
    from accelbench.data.check import image_files
    from accelbench.data.generate import ensure_generated
    from accelbench.data.layouts import ImageLayout

    side = 64
    mean = np.asarray((0.485, 0.456, 0.406), dtype=np.float32)
    std = np.asarray((0.229, 0.224, 0.225), dtype=np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        layout = ImageLayout(side=side, classes=10)
        path, _ = ensure_generated(layout, "small", out=Path(tmp) / "d")
        files = image_files(path)

        class Bare:
            """The formula as written: (x / 255 - mean) / std, then CHW."""

            def __len__(self) -> int:
                return len(files)

            def image(self, i: int) -> Image.Image:
                name, _label = files[i]
                with Image.open(name) as raw:
                    img = raw.convert("RGB")
                img = img.resize((side, side), Image.Resampling.BILINEAR,
                                 box=_bare_crop(*img.size))
                if random.random() < 0.5:
                    img = img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
                return img

            def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
                a = (np.asarray(self.image(i), dtype=np.float32) / 255.0 - mean) / std
                return torch.from_numpy(a.transpose(2, 0, 1).copy()), files[i][1]

        class BareFused(Bare):
            """The same normalisation folded into one scale and shift, in place."""

            scale = (1.0 / (255.0 * std))[:, None, None]
            shift = (mean / std)[:, None, None]

            def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
                a = np.ascontiguousarray(np.asarray(self.image(i)).transpose(2, 0, 1),
                                         dtype=np.float32)
                a *= self.scale
                a -= self.shift
                return torch.from_numpy(a), files[i][1]

        def rate(ds: object, workers: int) -> float:
            loader = DataLoader(ds, batch_size=32, shuffle=True, num_workers=workers,
                                drop_last=True)
            t0, n = time.perf_counter(), 0
            for x, _y in loader:
                n += len(x)
            return n / (time.perf_counter() - t0)

        for workers in args.workers:
            got: dict[str, list[float]] = {"accelbench": [], "bare": [], "bare fused": []}
            for r in range(args.rounds):
                kinds = [("accelbench", build_dataset(path, layout)), ("bare", Bare()),
                         ("bare fused", BareFused())]
                for name, ds in kinds if r % 2 == 0 else kinds[::-1]:
                    got[name].append(rate(ds, workers))
            o, b, f = (statistics.median(got[k]) for k in ("accelbench", "bare", "bare fused"))
            print(f"workers={workers}: accelbench {o:,.0f} images/s, bare {b:,.0f} (ratio "
                  f"{o / b:.3f}), bare with the fused normalisation {f:,.0f} (ratio "
                  f"{o / f:.3f}); {len(files)} JPEGs of {side} px, medians of {args.rounds} "
                  "rounds")


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
