"""Wall time of ``accelbench list``: cold (model facts counted) vs warm (read from the cache).

Both run as real subprocesses with a fresh cache directory; the warm runs follow
the cold one. Target: warm under 1 s.

    python benchmarks/list_latency.py [--warm-runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def _list(env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "accelbench.cli", "list"], env=env, check=True,
                   capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warm-runs", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "ACCELBENCH_CACHE_DIR": cache}
        cold = _list(env)
        warm = [_list(env) for _ in range(args.warm_runs)]
    print(f"accelbench list: cold {cold:.2f} s (counts every model in both frameworks), "
          f"warm median {statistics.median(warm):.3f} s, max {max(warm):.3f} s "
          f"(target < 1 s warm)")


if __name__ == "__main__":
    main()
