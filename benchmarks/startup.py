"""Wall time of accelbench's first commands, each beside ``python -c "import torch"`` in the
same run (ratios, so a busy or slow machine shows as itself), and the overhead a suite's
case costs beyond its measurement.

Every command runs as a real subprocess with an empty ``ACCELBENCH_CACHE_DIR`` (cold: no
model facts cached) and no store (a suite: a fresh temporary store); runs alternate with
the ``import torch`` baseline, and the medians are compared. For the suite, each case's
overhead is the suite's wall time minus the time its cases measured (the sum of their
iteration times), divided by the cases. Targets (issue 25): cold ``list`` under 2 s;
per-case overhead under 1 s. ``run lstm tiny, warm hub`` is the same ``run`` with
``ACCELBENCH_WARM_DIR`` set and its hub already started (the framework's import kept
between commands).

    python benchmarks/startup.py [--runs 5] [--only list] [--suite-workloads lstm,vgg16]
    python benchmarks/startup.py --only suite --runs 1 --suite-workloads all   # suite quick

The ``import torch`` wall and the machine's load average (``/proc/loadavg``) are printed
with the figures: on a machine other jobs keep busy, compare runs of the same session.

``--case-start`` measures instead what starting one case's child costs with each design
of the process layer, interleaved round by round: accelbench's warm fork server
(``isolation/forkserver.py``: the framework and the worker modules imported once, a child
forked per case with the parent's pipes, environment and working directory), the standard
library's forkserver context with ``set_forkserver_preload`` (the same modules named), and
a plain ``python`` child that imports them itself (what a case costs with no server). Each
child answers one line once it runs with the framework imported; the figure is the wall
from the request to that answer, and the first case (the server's start included) apart:

    python benchmarks/startup.py --case-start [--runs 15]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BASELINE = [sys.executable, "-c", "import torch"]
#: name -> accelbench arguments ("suite" gets its workloads from --suite-workloads).
COMMANDS = {
    "list": ["list"],
    "run --help": ["run", "--help"],
    "run lstm tiny": ["run", "lstm", "--size", "tiny", "--iterations", "10", "--no-store"],
    "run lstm tiny, warm hub": ["run", "lstm", "--size", "tiny", "--iterations", "10",
                                "--no-store"],
    "suite": ["suite", "quick", "--precision", "fp32"],
}


#: Commands run with ``ACCELBENCH_WARM_DIR`` (isolation/warmhub.py), the hub started by an
#: untimed run first: what each command costs once the framework's import is kept. Their
#: worker is the hub's grandchild, so its CPU is not in this process's children's.
WARM = {"run lstm tiny, warm hub"}

#: CPU seconds (user + system) of each command's whole process tree, by command name: on a
#: machine other jobs keep busy, the wall stretches but the work a command does does not.
CPU: dict[str, list[float]] = {}


def _children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def _wall(argv: list[str], env: dict[str, str], name: str = "import torch") -> float:
    cpu0, t0 = _children_cpu(), time.perf_counter()
    subprocess.run(argv, env=env, check=True, capture_output=True)
    wall = time.perf_counter() - t0
    CPU.setdefault(name, []).append(_children_cpu() - cpu0)
    return wall


def _measured(db: str) -> list[float]:
    """Seconds each stored case measured (the sum of its iteration times); prints each
    case's own wall (its record's start to finish) split into measured, warm-up, build
    and the rest (the worker's start, checks, FLOPs, idle baseline, its record)."""
    from datetime import datetime

    from accelbench.store import open_store

    with open_store(db) as st:
        results = sorted(st.query(), key=lambda r: r.started_at or "")
    for r in results:
        wall = (datetime.fromisoformat(r.finished_at or "")
                - datetime.fromisoformat(r.started_at or "")).total_seconds()
        measured, warm = sum(r.iteration_times_s or ()), sum(r.warmup_times_s or ())
        build = (r.build_time_s or 0.0)
        print(f"    {r.spec.workload:12s} {r.spec.precision:8s} case wall {wall:5.2f} s = "
              f"measured {measured:5.2f} + warm-up {warm:5.2f} + build {build:4.2f} + rest "
              f"{wall - measured - warm - build:4.2f} ({len(r.iteration_times_s or ())} "
              "iterations)")
    return [sum(r.iteration_times_s or ()) for r in results]


def _cold(args: list[str], name: str,
          per_case: list[tuple[float, list[float]]] | None = None,
          warm_dir: str | None = None) -> float:
    with tempfile.TemporaryDirectory() as cache:  # a fresh, empty cache every run
        env = {**os.environ, "ACCELBENCH_CACHE_DIR": cache}
        env.pop("ACCELBENCH_DB", None)
        env.pop("ACCELBENCH_WARM_DIR", None)
        if warm_dir is not None:
            env["ACCELBENCH_WARM_DIR"] = warm_dir
            # One cache path (the hub's key holds the environment), emptied: cold too.
            env["ACCELBENCH_CACHE_DIR"] = os.path.join(warm_dir, "cache")
            shutil.rmtree(env["ACCELBENCH_CACHE_DIR"], ignore_errors=True)
        if per_case is not None:
            env["ACCELBENCH_DB"] = os.path.join(cache, "results.db")
        wall = _wall([sys.executable, "-m", "accelbench.cli", *args], env, name)
        if per_case is not None:
            per_case.append((wall, _measured(env["ACCELBENCH_DB"])))
        return wall


def _load() -> str:
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


# --------------------------------------------------------------------------- case start

#: What a torch case's child needs imported (the warm server's preload, by module name: what
#: ``set_forkserver_preload`` takes).
TORCH_CASE_MODULES = ["torch", "accelbench.execution.worker", "accelbench.execution.measure",
                      "accelbench.execution.noise", "accelbench.stats",
                      "accelbench.meters.registry", "accelbench.backends.torch.backend",
                      "accelbench.backends.torch.step", "accelbench.backends.torch.flops",
                      "accelbench.backends.torch.model"]
_SPAWNED = ("import sys; from accelbench.isolation.serve import preload; preload('torch'); "
            "sys.stdout.write(sys.stdin.read()); sys.stdout.flush()")


def _answer(conn: object) -> None:
    """The stdlib forkserver's child: answer at once (its modules came with the fork)."""
    conn.send(b"{}")  # type: ignore[attr-defined]
    conn.close()  # type: ignore[attr-defined]


def _start_forked() -> float:
    """accelbench's warm server: fork a child running ``json.tool`` (it echoes its stdin)."""
    from accelbench.isolation import forkserver

    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = forkserver.spawn("torch", "json.tool:main", [], err.fileno())
        assert proc is not None and proc.stdin and proc.stdout
        proc.stdin.write("{}")
        proc.stdin.close()
        proc.stdout.readline()
        wall = time.perf_counter() - t0
        proc.wait(60)
    return wall


def _start_stdlib(ctx: multiprocessing.context.BaseContext) -> float:
    t0 = time.perf_counter()
    ours, theirs = ctx.Pipe()
    proc = ctx.Process(target=_answer, args=(theirs,))  # type: ignore[attr-defined]
    proc.start()
    ours.recv()
    wall = time.perf_counter() - t0
    proc.join(60)
    return wall


def _start_spawned() -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", _SPAWNED], input="{}", text=True,
                   capture_output=True, check=True)
    return time.perf_counter() - t0


def case_start(runs: int) -> None:
    """Each design's wall from a case's request to its child's answer (module doc)."""
    from accelbench.isolation import forkserver

    print(f"load average before: {_load()}")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(TORCH_CASE_MODULES)
    starts = {"warm fork server": _start_forked, "stdlib forkserver": lambda: _start_stdlib(ctx),
              "plain spawn": _start_spawned}
    first = {name: start() for name, start in starts.items()}  # servers start here
    walls: dict[str, list[float]] = {name: [] for name in starts}
    names = list(starts)
    for i in range(runs):
        for name in names[i % 3:] + names[: i % 3]:  # rotated: none always runs first
            walls[name].append(starts[name]())
    forkserver.shutdown()
    med = {name: statistics.median(w) for name, w in walls.items()}
    for name, w in walls.items():
        print(f"{name:18s}: first case {first[name]:6.3f} s (its server's start included); "
              f"then median {med[name] * 1000:7.1f} ms (min {min(w) * 1000:.1f}, max "
              f"{max(w) * 1000:.1f}) over {runs} runs")
    spawn = med["plain spawn"]
    for name in ("warm fork server", "stdlib forkserver"):
        print(f"plain spawn / {name}: {spawn / med[name]:.1f} x")
    print(f"warm fork server / stdlib forkserver: "
          f"{med['warm fork server'] / med['stdlib forkserver']:.2f} x")
    print(f"load average after: {_load()}")


#: A suite's command with no warm server: every case's worker starts as ``python -m``.
_NO_SERVER = ("import sys; from accelbench.isolation import forkserver; "
              "forkserver.server = lambda *a, **k: None; from accelbench.cli import main; "
              "sys.exit(main(sys.argv[1:]))")


def suite_ab(runs: int, suite: list[str]) -> None:
    """A suite's wall with the warm server (as shipped) and without (each case's worker a
    fresh ``python -m``), alternated; the same cases, a fresh store and cache each run."""
    print(f"load average before: {_load()}")
    walls: dict[str, list[float]] = {"warm server": [], "no server": []}
    for i in range(runs):
        for name in (list(walls) if i % 2 == 0 else list(walls)[::-1]):
            with tempfile.TemporaryDirectory() as tmp:
                env = {**os.environ, "ACCELBENCH_CACHE_DIR": tmp,
                       "ACCELBENCH_DB": os.path.join(tmp, "results.db")}
                env.pop("ACCELBENCH_WARM_DIR", None)
                argv = ([sys.executable, "-m", "accelbench.cli"] if name == "warm server"
                        else [sys.executable, "-c", _NO_SERVER])
                walls[name].append(_wall([*argv, *suite], env, name))
                cases = len(_measured(env["ACCELBENCH_DB"]))
    med = {name: statistics.median(w) for name, w in walls.items()}
    for name, w in walls.items():
        each = ", ".join(f"{x:.1f}" for x in w)
        print(f"{name}: median {med[name]:.1f} s over {runs} runs ({each}) for {cases} cases")
    print(f"no server - warm server: {med['no server'] - med['warm server']:.1f} s = "
          f"{(med['no server'] - med['warm server']) / max(1, cases):.2f} s per case")
    print(f"load average after: {_load()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only", choices=sorted(COMMANDS), action="append")
    ap.add_argument("--suite-workloads", default="lstm,transformer,vgg16",
                    help="the suite's workloads, comma-separated, or 'all' (every one: "
                    "suite quick, both precisions)")
    ap.add_argument("--case-start", action="store_true",
                    help="the start of one case's child with each design of the process "
                    "layer (module doc) instead of the commands")
    ap.add_argument("--suite-ab", action="store_true",
                    help="a suite's wall with the warm server and without, alternated")
    args = ap.parse_args()
    if args.case_start:
        case_start(args.runs)
        return
    names = args.only or list(COMMANDS)
    suite = list(COMMANDS["suite"])
    if args.suite_workloads == "all":
        suite = ["suite", "quick"]
    else:
        for w in args.suite_workloads.split(","):
            suite += ["--workload", w]
    if args.suite_ab:
        suite_ab(args.runs, suite)
        return
    base: list[float] = []
    walls: dict[str, list[float]] = {n: [] for n in names}
    per_case: list[tuple[float, list[float]]] = []
    print(f"load average before: {_load()}")
    _wall(BASELINE, dict(os.environ))  # warm the page cache once, for both sides
    warm_dir = tempfile.mkdtemp(prefix="ab-warm-")
    for name in names:
        if name in WARM:  # start its hub (untimed)
            _cold(COMMANDS[name], "hub start", warm_dir=warm_dir)
    try:
        for _ in range(args.runs):
            for name in names:
                base.append(_wall(BASELINE, dict(os.environ)))
                if name == "suite":
                    walls[name].append(_cold(suite, name, per_case))
                else:
                    walls[name].append(_cold(COMMANDS[name], name,
                                             warm_dir=warm_dir if name in WARM else None))
    finally:
        from accelbench.isolation.warmhub import stop_hubs

        stop_hubs(warm_dir)
        shutil.rmtree(warm_dir, ignore_errors=True)
    torch_s = statistics.median(base)
    print(f'python -c "import torch": median {torch_s:.2f} s over {len(base)} runs '
          f"(min {min(base):.2f}, max {max(base):.2f}); CPU "
          f"{statistics.median(CPU['import torch']):.2f} s")
    for name in names:
        med = statistics.median(walls[name])
        label = " ".join(suite[:2]) + f" ({args.suite_workloads})" if name == "suite" else name
        print(f"accelbench {label} (cold cache): median {med:.2f} s, min {min(walls[name]):.2f}, "
              f"max {max(walls[name]):.2f} over {args.runs} runs = {med / torch_s:.2f} x "
              f"import torch; " + ("its worker's CPU is the hub's" if name in WARM else
                                   f"CPU of its processes {statistics.median(CPU[name]):.2f} s"))
    for wall, measured in per_case:
        n = max(1, len(measured))
        over = wall - sum(measured)
        print(f"  suite run: {len(measured)} cases, wall {wall:.1f} s, measured "
              f"{sum(measured):.1f} s ({', '.join(f'{m:.2f}' for m in measured)}), overhead "
              f"{over:.1f} s = {over / n:.2f} s per case ({over / wall:.0%} of the wall)")
    print(f"load average after: {_load()}")


if __name__ == "__main__":
    main()
