"""The read commands on a large store: wall time and peak memory of each (issue 47).

Generates SQLite stores of N synthetic but schema-valid results through the store's bulk
path (``Store.save_rows``: rows derived from real ``Result`` objects by ``result_row``,
ids and times varied; 200,000 take ~2.5 GB and under a minute), then runs each command
as its own ``accelbench`` process on each store and reports its wall time and peak
resident memory (``os.wait4`` of that one child: ``ru_maxrss``), the sizes side by side.

    python benchmarks/store_scale.py [--results N[,N...]] [--dir DIR] [--keep]
                                     [--only NAMES] [--timeout S] [--db PATH]

``--results`` takes one size or several (default ``2000,20000``; the issue's large case
is ``--results 2000,20000,200000``); ``--dir`` keeps the stores (``scale-N.db``) and
reuses them on the next run. NAMES (comma-separated, default all): startup
(``--version``: the start alone), results, results-json, compare, recommend, report,
export-json, export-csv, export-parquet, store-check.

Each command's row gives, per size: wall seconds, CPU seconds (user + system of that
process: what it costs, robust to a machine shared with other work) and peak RSS MiB;
a command that fails says its exit code.

Targets: ``results`` under 2 s, and every command's memory not growing with the store.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from accelbench.result import EnergyReading, Result
from accelbench.spec import RunSpec
from accelbench.stats import compute_stats
from accelbench.store import open_store
from accelbench.store.results import result_row

WORKLOADS = ("resnet50", "bert", "lstm", "gpt2")
PRECISIONS = ("fp32", "amp_bf16")
FRAMEWORKS = ("torch", "jax")
ITERATIONS = 400  # a long measured case: the record is ~15 KB, like a real one


def template(workload: str, precision: str, framework: str, rng: random.Random) -> Result:
    """One realistic result: 400 iteration times, energy, machine facts."""
    base = {"resnet50": 0.1, "bert": 0.05, "lstm": 0.02, "gpt2": 0.2}[workload]
    base *= 0.6 if precision == "amp_bf16" else 1.0
    times = tuple(base * (1 + rng.gauss(0, 0.02)) for _ in range(ITERATIONS))
    warm = tuple(base * 1.5 for _ in range(10))
    spec = RunSpec(workload=workload, size="small", batch_size=32,  # type: ignore[arg-type]
                   precision=precision, device="cuda:0",  # type: ignore[arg-type]
                   framework=framework)  # type: ignore[arg-type]
    mean = sum(times) / len(times)
    energy = (EnergyReading(device="cuda:0", scope="gpu", source="integrated_samples",
                            energy_j=250.0 * mean * len(times), avg_power_w=250.0,
                            energy_j_per_sample=250.0 * mean / 32, window_s=mean * len(times)),)
    return Result(
        id="TEMPLATE", spec=spec, status="ok", sample_unit="sample", samples_per_step=32,
        param_count=25_000_000,
        stats=compute_stats(times, 32, trim_fraction=0.01, stop_reason="target_ci"),
        iteration_times_s=times, warmup_times_s=warm, energy=energy, build_time_s=1.5,
        machine={"hostname": "scale-box", "os": "Linux 6.1", "cpu": {"model": "Scale CPU"},
                 "gpus": [{"device": "cuda:0", "name": "NVIDIA H100", "memory_bytes": 80 << 30,
                           "runtime": "CUDA 12.4"}],
                 "software": {"torch": "2.4.0", "cuda": "12.4"}},
        started_at="2026-01-01T00:00:00.000+00:00", finished_at="2026-01-01T00:00:01.000+00:00",
    )


def generate(db: Path, n: int, batch: int = 2000) -> float:
    """Fill a new store at ``db`` with ``n`` results; the seconds it took."""
    t0 = time.perf_counter()
    rng = random.Random(47)
    combos = [(w, p, f) for w in WORKLOADS for p in PRECISIONS for f in FRAMEWORKS]
    rows_of = {c: result_row(template(*c, rng)) for c in combos}
    with open_store(str(db)) as st:
        pending: list[dict[str, Any]] = []
        for i in range(n):
            combo = combos[i % len(combos)]
            rid = f"scale{i:07d}"
            secs = i  # one result a second, newest last
            finished = (f"2026-01-{1 + secs // 86400 % 28:02d}T{secs // 3600 % 24:02d}:"
                        f"{secs // 60 % 60:02d}:{secs % 60:02d}.000+00:00")
            suite = f"suite{i // 16:05d}"
            row = dict(rows_of[combo])
            row.update(id=rid, finished_at=finished, started_at=finished, suite_id=suite)
            row["record_json"] = (row["record_json"]
                                  .replace('"TEMPLATE"', f'"{rid}"', 1)
                                  .replace("2026-01-01T00:00:01.000+00:00", finished)
                                  .replace('"suite_id": null', f'"suite_id": "{suite}"', 1))
            pending.append(row)
            if len(pending) >= batch:
                st.save_rows(pending)
                pending = []
        st.save_rows(pending)
    return time.perf_counter() - t0


def commands(out: Path) -> dict[str, list[str]]:
    return {
        "startup": ["--version"],  # the interpreter and CLI start, for scale
        "results": ["results"],
        "results-json": ["results", "--json"],
        "compare": ["compare", "precision=fp32", "precision=amp_bf16"],
        "recommend": ["recommend", "resnet50"],
        "report": ["report", "--out", str(out / "report"), "--force"],
        "export-json": ["export", "--format", "json", "--out", str(out / "x.json"), "--force"],
        "export-csv": ["export", "--format", "csv", "--out", str(out / "x.csv"), "--force"],
        "export-parquet": ["export", "--format", "parquet", "--out",
                           str(out / "x.parquet"), "--force"],
        "store-check": ["store", "check"],
    }


def measure(argv: list[str], db: Path,
            timeout: float) -> tuple[float, float, float, int, str]:
    """(wall s, CPU s, peak RSS MiB, exit code, stdout lines) of ``accelbench ARGV`` on
    ``db``. CPU seconds (user + system, of that process) say what the command costs on a
    machine shared with other work, where the wall time mostly says how long it waited."""
    env = {**os.environ, "ACCELBENCH_DB": str(db), "COLUMNS": "120"}
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as sink:
        proc = subprocess.Popen([sys.executable, "-m", "accelbench.cli", *argv], env=env,
                                stdout=sink, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL)
        deadline = t0 + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        sink.seek(0)
        lines = sum(1 for _ in sink)
    cpu = usage.ru_utime + usage.ru_stime
    return wall, cpu, usage.ru_maxrss / 1024, proc.returncode, str(lines)


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",")]
    except ValueError:
        raise SystemExit(f"--results must be sizes like 2000,20000, got {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise SystemExit(f"--results must be positive sizes, got {text!r}")
    return sizes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="2000,20000",
                    help="results in each store, comma-separated (default 2000,20000)")
    ap.add_argument("--dir", type=Path,
                    help="folder for the stores scale-N.db (reused when present; kept)")
    ap.add_argument("--db", type=Path, help="one existing store to measure (no generation)")
    ap.add_argument("--keep", action="store_true", help="keep generated stores")
    ap.add_argument("--only", help="comma-separated command names (default: all)")
    ap.add_argument("--timeout", type=float, default=600.0, help="per command, seconds")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="accelbench-scale-"))
    folder = args.dir or work
    folder.mkdir(parents=True, exist_ok=True)
    stores: dict[str, Path] = {}
    if args.db is not None:
        stores[args.db.name] = args.db
    else:
        for n in _sizes(args.results):
            db = folder / f"scale-{n}.db"
            if not db.exists():
                secs = generate(db, n)
                print(f"generated {n} results in {secs:.1f} s "
                      f"({db.stat().st_size / 2**20:.0f} MiB): {db}", flush=True)
            stores[f"{n:,}"] = db
    cmds = commands(work)
    if args.only:
        cmds = {k: v for k, v in cmds.items() if k in args.only.split(",")}
    head = f"{'command':<15}" + "".join(f" | {label + ' results':>26}" for label in stores)
    print(head)
    print(f"{'':<15}" + " | wall s  CPU s  peak MiB  " * len(stores))
    for name, argv in cmds.items():
        cells = []
        for db in stores.values():
            wall, cpu, mib, code, _lines = measure(argv, db, args.timeout)
            shown = "" if code == 0 else f" exit {code}" if code >= 0 else f" sig{-code}"
            cells.append(f"{wall:>6.2f} {cpu:>6.2f} {mib:>9.0f}{shown:<3}")
        print(f"{name:<15}" + "".join(f" | {c:>26}" for c in cells), flush=True)
    keep = args.keep or args.dir is not None
    for p in sorted(work.rglob("*"), reverse=True):
        if keep and p.suffix == ".db":
            continue
        p.rmdir() if p.is_dir() else p.unlink()
    if not any(work.iterdir()):
        work.rmdir()
    elif keep:
        print(f"stores kept in {work}")


if __name__ == "__main__":
    main()
