"""Shared fixtures: an isolated results store and a CLI runner (real subprocesses)."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent

# One intra-op thread unless the runner chose otherwise, set before any test module
# imports torch (it reads this once): the in-process model tests ran with two threads
# per pytest-xdist worker on two cores, each waiting on the other's at every op.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# XLA without its backend optimisations and with its older CPU fusion emitters: the tests
# check behaviour, not speed. A tiny Inception compiles in half the time at level 0 (121 s
# -> 56 s here, its steps 2x slower), and its step's compile takes 5.7 s instead of 9.1 s
# with the older emitters (the JAX-heavy test files: 155 s -> 127 s with -n 2). The
# runner's own XLA_FLAGS are kept; ACCELBENCH_TEST_XLA_OPT=1 compiles as users do. The
# flags are jaxlib 0.10's (the test extra pins it): XLA aborts on a flag it does not know.
if os.environ.get("ACCELBENCH_TEST_XLA_OPT") != "1" and \
        "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = " ".join(
        filter(None, [os.environ.get("XLA_FLAGS"), "--xla_backend_optimization_level=0",
                      "--xla_cpu_use_fusion_emitters=false"]))
FAULTY_PLUGIN = str(TESTS / "plugins" / "faulty.py")
# A runner started in the background by a shell without job control (`pytest &` in a script,
# `nohup`-style CI steps) inherits SIGINT ignored, and so would every process the tests
# start: accelbench honours that, as any program should, and the Ctrl-C tests would wait
# in vain. The tests' processes get the default a terminal gives.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_configure(config: pytest.Config) -> None:
    """Compile accelbench's modules to bytecode once, in the runner (not in each xdist
    worker). The tests start hundreds of accelbench processes, and a runner whose
    environment says not to write bytecode (``PYTHONDONTWRITEBYTECODE=1``, as this
    project's CI containers set) would have each of them compile the package from source
    again: 0.25 s of CPU for a refused command line, 0.3-0.5 s for a case, here. Python
    still reads bytecode that exists; a source tree it may not write to is left as it is."""
    if hasattr(config, "workerinput"):
        return
    import compileall
    import importlib.util

    spec = importlib.util.find_spec("accelbench")
    for location in (spec.submodule_search_locations or []) if spec else []:
        if os.access(location, os.W_OK):
            compileall.compile_dir(location, quiet=2)


@pytest.fixture(scope="session", autouse=True)
def _caches(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One model-facts cache and one XLA compilation cache for the whole run, never the
    user's own. XLA compiles every JAX case's step (and a model build's few bucketed
    initialiser programs, backends/jax/hostinit.py); sharing them across the run's worker
    processes keeps the suite fast. Records say when the cache was on (``backend_extra``)."""
    # Under pytest-xdist every worker has its own base temp; their parent is shared, so the
    # workers share one facts cache and one XLA cache (each model is counted once per run).
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    for name in ("cache", "xla-cache"):
        (root / name).mkdir(exist_ok=True)
    # Warm servers kept between the run's accelbench processes (isolation/warmhub.py):
    # each process that runs a case would import its framework again (torch with
    # TorchDynamo: about 3.5 s of CPU, some 180 times a run). One directory for the run,
    # shared by its workers and stopped by the process that started them (below); a test
    # of the per-process servers turns it off.
    warm = _warm_dir(root)
    warm.mkdir(exist_ok=True)
    settings = {
        "ACCELBENCH_WARM_DIR": str(warm),
        # A hub holds ~300 MB (torch); one a test's own environment started is not
        # needed a minute later.
        "ACCELBENCH_WARM_IDLE_S": "60",
        "ACCELBENCH_CACHE_DIR": str(root / "cache"),
        "JAX_COMPILATION_CACHE_DIR": str(root / "xla-cache"),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
    }
    # One intra-op thread per case unless the runner chose otherwise: pytest-xdist puts a
    # worker on every core, and two OpenMP threads per case on a loaded 2-core machine wait
    # on each other at every op (a tiny lstm step went from 2 ms to 1.3 s at load 4).
    settings.setdefault("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS") or "1")
    saved = {k: os.environ.get(k) for k in settings}
    os.environ.update(settings)
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _warm_dir(root: Path) -> Path:
    return root / "warm"


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The run's warm hubs end with it, stopped once every worker is done: by the xdist
    controller (whose base temp directory holds the workers' own), or by the one process
    of a run without workers."""
    if hasattr(session.config, "workerinput"):
        return
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is None:
        return
    from accelbench.isolation.warmhub import stop_hubs

    stop_hubs(str(_warm_dir(factory.getbasetemp())))


@pytest.fixture
def no_warm_hubs(monkeypatch: pytest.MonkeyPatch) -> None:
    """This test's accelbench processes start their own warm servers, as by default."""
    monkeypatch.delenv("ACCELBENCH_WARM_DIR", raising=False)


@pytest.fixture
def db_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh SQLite store path, also set as ACCELBENCH_DB for in-process API calls."""
    path = tmp_path / "results.db"
    monkeypatch.setenv("ACCELBENCH_DB", str(path))
    yield path


def train_losses(step: Any, steps: int) -> list[float]:
    """``steps`` steps of a backend's real training step, each waited for: their losses,
    each one checked to be a finite number."""
    losses = []
    for _ in range(steps):
        step.step()
        step.synchronize()
        value = step.loss_value()
        assert value is not None and math.isfinite(value)
        losses.append(value)
    return losses


def cli_env(db: Path | None = None, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("ACCELBENCH_DB", None)
    if db is not None:
        env["ACCELBENCH_DB"] = str(db)
    env.update(extra)
    return env


def run_cli(
    *args: str, db: Path | None = None, timeout: float = 300, preload: tuple[str, ...] = (),
    **extra: str
) -> subprocess.CompletedProcess[str]:
    """Run ``accelbench ARGS`` in a process of its own, as a user's shell would (no TTY);
    PRELOAD: see :func:`cli_process`."""
    return cli_process(list(args), env=cli_env(db, **extra), timeout=timeout, preload=preload)


def run_cli_many(calls: list[tuple[tuple[str, ...], dict[str, str]]], *, db: Path | None = None,
                 timeout: float = 300, workers: int = 6,
                 preload: tuple[str, ...] = ()) -> list[subprocess.CompletedProcess[str]]:
    """``run_cli(*args, db=db, **extra)`` for each ``(args, extra)`` of CALLS, several at a
    time (independent invocations that mostly wait: on a store, on a worker, on a timeout),
    the results in the order of CALLS."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(run_cli, *args, db=db, timeout=timeout, preload=preload,
                               **extra)
                   for args, extra in calls]
        return [f.result() for f in futures]


def cli_process(argv: list[str], *, env: dict[str, str], timeout: float = 300,
                cwd: Path | str | None = None,
                preload: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """``python -m accelbench.cli ARGV`` with this environment and working directory, stdin
    from /dev/null, its output captured.

    The process is forked from a warm server that has already imported accelbench
    (tests/cliserver.py), one per pytest worker and PRELOAD (packages the server imports
    too, for invocations that import them anyway), unless the environment changes how the
    interpreter starts (a PYTHON* variable differs, e.g. a test's own PYTHONPATH) or
    ACCELBENCH_TEST_FRESH_CLI=1: then it is started from scratch.
    """
    cwd = str(cwd or os.getcwd())
    if _fresh_start_needed(env):
        return subprocess.run([sys.executable, "-m", "accelbench.cli", *argv],
                              capture_output=True, text=True, timeout=timeout, env=env,
                              cwd=cwd, stdin=subprocess.DEVNULL, check=False)
    from tests.cliserver import warm_cli

    return warm_cli(preload).run(argv, env=env, cwd=cwd, timeout=timeout)


def _fresh_start_needed(env: dict[str, str]) -> bool:
    if os.environ.get("ACCELBENCH_TEST_FRESH_CLI") == "1":
        return True
    keys = {k for k in (*env, *os.environ) if k.startswith("PYTHON")}
    return any(env.get(k) != os.environ.get(k) for k in keys)


@pytest.fixture(scope="session", autouse=True)
def _close_warm_cli() -> Iterator[None]:
    yield
    from tests.cliserver import close_warm_cli

    close_warm_cli()


def seed_store(path: Path) -> None:
    """A small real store at ``path``: three ok results of suite ``seeded`` (lstm fp32 and
    amp_bf16, resnet50 fp32, tiny), for the bad-input replay and ``benchmarks/hostile.py``."""
    from accelbench.result import Result
    from accelbench.spec import RunSpec
    from accelbench.stats import compute_stats
    from accelbench.store import open_store

    times = (0.10, 0.11, 0.12, 0.10, 0.09, 0.10)
    with open_store(str(path)) as st:
        for i, (workload, precision) in enumerate(
                [("lstm", "fp32"), ("lstm", "amp_bf16"), ("resnet50", "fp32")]):
            spec = RunSpec(workload=workload, size="tiny", batch_size=4,
                           precision=precision)  # type: ignore[arg-type]
            st.save(Result(
                id=f"seed{i:08d}", spec=spec, status="ok", sample_unit="sample",
                samples_per_step=4, param_count=1000,
                stats=compute_stats(times, 4, trim_fraction=0.0, stop_reason="iterations"),
                iteration_times_s=times, machine={"hostname": "h", "cpu": {"model": "CPU"}},
                suite_id="seeded", started_at=f"2026-01-0{i + 1}T00:00:00.000+00:00",
                finished_at=f"2026-01-0{i + 1}T00:00:01.000+00:00"))


def hide_jax(folder: Path) -> Path:
    """A folder for PYTHONPATH whose sitecustomize hides jax from the import system, as on a
    machine without it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(
        "import sys\n"
        "class _Hide:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'jax' or name.startswith('jax.'):\n"
        "            raise ModuleNotFoundError(name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, _Hide())\n")
    return folder
