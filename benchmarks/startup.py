"""Wall time of accelbench's first commands, each beside ``python -c "import torch"`` in the
same run (ratios, so a busy or slow machine shows as itself).

Every command runs as a real subprocess with an empty ``ACCELBENCH_CACHE_DIR`` (cold: no
model facts cached) and no store; runs alternate with the ``import torch`` baseline, and
the medians are compared. Targets (issue 25): cold ``list`` under 2 s.

    python benchmarks/startup.py [--runs 5] [--only list]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

BASELINE = [sys.executable, "-c", "import torch"]
#: name -> accelbench arguments.
COMMANDS = {
    "list": ["list"],
    "run --help": ["run", "--help"],
    "run lstm tiny": ["run", "lstm", "--size", "tiny", "--iterations", "10", "--no-store"],
}


def _wall(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, check=True, capture_output=True)
    return time.perf_counter() - t0


def _cold(args: list[str]) -> float:
    with tempfile.TemporaryDirectory() as cache:  # a fresh, empty cache every run
        env = {**os.environ, "ACCELBENCH_CACHE_DIR": cache}
        env.pop("ACCELBENCH_DB", None)
        return _wall([sys.executable, "-m", "accelbench.cli", *args], env)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only", choices=sorted(COMMANDS), action="append")
    args = ap.parse_args()
    names = args.only or list(COMMANDS)
    base: list[float] = []
    walls: dict[str, list[float]] = {n: [] for n in names}
    _wall(BASELINE, dict(os.environ))  # warm the page cache once, for both sides
    for _ in range(args.runs):
        for name in names:
            base.append(_wall(BASELINE, dict(os.environ)))
            walls[name].append(_cold(COMMANDS[name]))
    torch_s = statistics.median(base)
    print(f'python -c "import torch": median {torch_s:.2f} s over {len(base)} runs '
          f"(min {min(base):.2f}, max {max(base):.2f})")
    for name in names:
        med = statistics.median(walls[name])
        print(f"accelbench {name} (cold cache): median {med:.2f} s, min {min(walls[name]):.2f}, "
              f"max {max(walls[name]):.2f} over {args.runs} runs = {med / torch_s:.2f} x "
              "import torch")


if __name__ == "__main__":
    main()
