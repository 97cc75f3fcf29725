"""A battery of hostile inputs (issue 47): every subcommand given malformed values, text
that is not UTF-8, control characters of every Unicode category, terminal escapes, path
components over 255 bytes, special files as ``--out``/``--db``/``--mllog``, options in a
combination where they would do nothing, damaged stores, and a PostgreSQL store URL with
a password.

Each input runs as a real ``python -m accelbench.cli`` subprocess in a directory of its
own (its working directory, ``HOME``, cache and a copy of a small seeded store), two at a
time. Counted per class of input:

- ``traceback``: a Python traceback in stdout or stderr;
- ``exit0``: exit status 0 on bad input (every input here is bad, but the secret ones,
  which may succeed where the command needs no store);
- ``exit_other``: a refusal with a status other than 2 (the project's code for bad input
  and an unusable store);
- ``multiline``: a refusal of more than one line on stderr;
- ``writes``: the store's bytes or anything under the input's directory (files, their
  bytes, links, FIFOs) changed, on bad input;
- ``secrets``: the store URL's password in stdout, stderr or any file under the input's
  directory;
- ``hang``: no end within ``--timeout`` seconds (the process group is killed).

    python benchmarks/hostile.py                 # the whole battery, 2 at a time
    python benchmarks/hostile.py --only combos --show 20   # one category, the failures
    python benchmarks/hostile.py --sample 100    # every n-th input, for a quick look

Nothing outside the temporary directory is touched: the sysfs roots point at an empty
directory (no knob is ever set), special files are device nodes made in the input's own
directory (as root; else those inputs are left out) and never the machine's ``/dev``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

SECRET = "S3cr3tPw9q"
PG_URL = f"postgresql+psycopg://bench:{SECRET}@127.0.0.1:9/results"

#: Text no argument may hold: not UTF-8, and one character of each control category.
UNIVERSAL = [
    "\udcff",              # a byte that is not UTF-8 (as Python decodes argv)
    "caf\udce9",           # Latin-1 bytes
    "\x1b[2J\x1b[31mx",    # Cc: terminal escapes
    "\x1b]0;title\x07",    # Cc: OSC sequence
    "a\tb", "a\nb", "a\rb", "a\x7fb", "a\x85b",  # Cc: tab, newline, CR, DEL, C1 NEL
    "a\u200bb", "\u202egnp.exe", "\ufeffx", "a\u2066b",  # Cf: zero width, bidi, BOM
    "a\u2028b", "a\u2029b",  # Zl, Zp
]
NUMERIC = ["\u0663\u0662", "\uff13", "\u0969", "\u00b2", "nan", "inf", "-1", "1e400",
           "0x10", "", " ", "1;5", "12abc"]
LONG = "a" * 300

#: A valid, cheap invocation per subcommand: a hostile argument is appended to it.
BASES: dict[str, list[str]] = {
    "list": ["list"],
    "devices": ["devices"],
    "run": ["run", "lstm", "--size", "tiny", "--iterations", "2", "--no-idle"],
    "suite": ["suite", "quick", "--workload", "lstm", "--precision", "fp32",
              "--iterations", "2", "--no-idle"],
    "power": ["power", "--duration", "0.2"],
    "results": ["results"],
    "report": ["report", "--out", "{dir}/report-out"],
    "compare": ["compare", "precision=fp32", "precision=amp_bf16"],
    "recommend": ["recommend", "lstm"],
    "export": ["export", "--format", "csv"],
    "reference": ["reference"],
    "ops": ["ops", "--size", "tiny", "--op", "matmul", "--iterations", "2", "--no-store"],
    "peaks": ["peaks", "--no-measure"],
    "roofline": ["roofline", "--out", "{dir}/roofline-out"],
    "doctor": ["doctor", "--probe-s", "0"],
    "sweep": ["sweep", "lstm", "--size", "tiny", "--iterations", "2",
              "--cpu-max-freqs", "auto"],
    "sweep-report": ["sweep-report", "seeded"],
    "store": ["store", "check"],
}
NUMERIC_TYPES = {"integer", "number", "threads_arg", "int_list", "mnk", "value_list",
                 "slurm_time"}
PATH_OPTIONS = {"--db", "--plugin", "--out", "--mllog", "--slurm-folder", "--config"}
#: Read commands, run against each damaged store.
READS = [
    ["results"], ["results", "--json"], ["export", "--format", "csv"],
    ["export", "--format", "json", "--out", "{dir}/x.json"], ["report", "--out", "{dir}/rep"],
    ["compare", "precision=fp32", "precision=amp_bf16"], ["recommend", "lstm"],
    ["reference", "--match"], ["ops", "--list"], ["peaks", "--no-measure"],
    ["roofline", "--out", "{dir}/rf"], ["suite", "status", "seeded"],
    ["suite", "resume", "seeded", "--dry-run"], ["suite", "quick", "--dry-run"],
    ["store", "check"],
]
#: Options in a combination where they would do nothing, and other wrong combinations.
COMBOS: list[list[str]] = [
    ["suite", "status", "seeded", "--workload", "lstm"],
    ["suite", "status", "seeded", "--iterations", "3"],
    ["suite", "status", "seeded", "--force"],
    ["suite", "status", "seeded", "--dry-run"],
    ["suite", "status", "seeded", "--size", "tiny"],
    ["suite", "status", "seeded", "--no-energy"],
    ["suite", "resume", "seeded", "--launcher", "slurm", "--partition", "p", "--dry-run"],
    ["suite", "quick", "--dry-run", "--partition", "p"],
    ["suite", "quick", "--dry-run", "--gres", "gpu:1"],
    ["suite", "quick", "--dry-run", "--time", "10"],
    ["suite", "quick", "--dry-run", "--slurm-folder", "{dir}/sl"],
    ["suite", "quick", "--dry-run", "--cases-per-job", "2"],
    ["suite", "quick", "--dry-run", "--cpus-per-task", "2"],
    ["suite", "quick", "--dry-run", "--exclusive"],
    ["suite", "quick", "--dry-run", "--dist-backend", "gloo"],
    ["ops", "--limit", "3"],
    ["ops", "--list", "--op", "matmul", "--op", "lstm"],
    ["ops", "--list", "--pass", "forward"],
    ["ops", "--op", "matmul", "--pass", "forward_backward"],
    ["ops", "--op", "conv2d", "--mnk", "4,4,4"],
    ["ops", "--measure-peaks", "--no-store"],
    ["suite", "quick", "--dry-run", "--wide"],
    ["suite", "quick", "--dry-run", "-v"],
    ["compare", "precision=fp32", "precision=amp_bf16", "--limit", "1"],
    ["ops", "--list", "--iterations", "3"],
    ["ops", "--list", "--no-store"],
    ["run", "lstm", "--size", "tiny", "--dist-backend", "nccl"],
    ["run", "lstm", "--size", "tiny", "--iterations", "3", "--min-time", "1"],
    ["run", "lstm", "--size", "tiny", "--no-energy", "--cpu-tdp-w", "100"],
    ["run", "lstm", "--size", "tiny", "--no-idle", "--idle-s", "2"],
    ["run", "lstm", "--size", "tiny", "--node-rank", "1"],
    ["run", "lstm", "--size", "tiny", "--wandb-project", "x"],
    ["run", "lstm", "--size", "tiny", "--strict-max-time"],
    ["export", "--format", "csv", "--force"],
    ["export", "--format", "json", "--force"],
    ["export", "--format", "parquet"],
    ["results", "--all", "--limit", "2"],
    ["results", "--json", "--wide"],
    ["compare", "precision=fp32", "precision=amp_bf16", "--wide", "--csv"],
    ["reference", "--match", "--csv"],
    ["peaks", "--no-measure", "--measure"],
    ["peaks", "--no-measure", "--gemm-sizes", "64"],
    ["peaks", "--no-measure", "--iterations", "3"],
    ["roofline", "--out", "{dir}/rf", "--size", "tiny"],
    ["roofline", "--out", "{dir}/rf", "--repeats", "2"],
    ["roofline", "--out", "{dir}/rf", "--tag", "x"],
    ["doctor", "--node-meter", "ipmi", "--node-meter-cmd", "echo 1"],
    ["sweep", "lstm", "--size", "tiny", "--gpu", "0", "--cpu-max-freqs", "auto"],
    ["sweep-report", "seeded", "--max-slowdown", "0.1", "--json", "--json"],
    ["store", "check", "--json", "extra"],
    ["results", "show"],
    ["list", "--json", "extra"],
    ["power", "--duration", "0.2", "--prometheus", "nohost"],
]


@dataclass
class Case:
    """One hostile invocation."""

    cid: str
    category: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    store: str = "good"
    """Which seeded store the input's copy starts from."""
    bad: bool = True
    """Bad input: must be refused (else only tracebacks, writes and secrets count)."""
    needs_root: bool = False


@dataclass
class Outcome:
    case: Case
    code: int | None
    stdout: str
    stderr: str
    seconds: float
    classes: set[str]


# --------------------------------------------------------------------------- the inputs


def _value_options() -> dict[str, list[tuple[str, str, tuple[str, ...]]]]:
    """Per subcommand: (flag, type name, choices) of every option taking a value."""
    from accelbench.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    out: dict[str, list[tuple[str, str, tuple[str, ...]]]] = {}
    for name, sp in sub.choices.items():  # type: ignore[union-attr]
        rows = []
        for action in sp._actions:
            long = [s for s in action.option_strings if s.startswith("--")]
            if not long or action.nargs == 0 or long[0] in ("--help", "--plugin"):
                continue
            kind = getattr(action.type, "__name__", "str")
            rows.append((long[0], kind, tuple(action.choices or ())))
        out[name] = rows
    return out


def inputs() -> list[Case]:
    cases: list[Case] = []
    options = _value_options()
    turn = 0
    for sub, rows in options.items():
        base = BASES[sub]
        for flag, kind, choices in rows:
            # One universal bad value per option (two for text), cycling through the list.
            for _ in range(1 if kind in NUMERIC_TYPES or choices else 2):
                text = UNIVERSAL[turn % len(UNIVERSAL)]
                turn += 1
                cases.append(Case(f"{sub}{flag}=U{turn}", "control/utf8", [*base, flag, text]))
            if kind in NUMERIC_TYPES:
                for k in range(2):
                    text = NUMERIC[(turn + k) % len(NUMERIC)]
                    cases.append(Case(f"{sub}{flag}={text!r}", "numbers", [*base, flag, text]))
                turn += 1
            if choices:
                cases.append(Case(f"{sub}{flag}=bogus", "choices", [*base, flag, "bogus"]))
            if flag in PATH_OPTIONS:
                cases.append(Case(f"{sub}{flag}=long", "long-path",
                                  [*base, flag, "{dir}/" + LONG]))
                cases.append(Case(f"{sub}{flag}=long-dir", "long-path",
                                  [*base, flag, "{dir}/" + LONG + "/x"]))
    for sub, base in BASES.items():  # positional arguments and the global options
        if sub in ("run", "recommend", "sweep"):
            for text in ("\udcff", "lstm\x1b[0m", "\u202elstm", LONG):
                argv = [base[0], text, *base[2:]]
                cases.append(Case(f"{sub}-positional={text[:8]!r}", "control/utf8", argv))
        cases.append(Case(f"{sub}--db=long", "long-path", ["--db", "{dir}/" + LONG, *base]))
        cases.append(Case(f"{sub}-db-utf8", "control/utf8", [*base, "--db", "x\udcff.db"]))
        cases.append(Case(f"{sub}--plugin-escape", "control/utf8",
                          ["--plugin", "\x1b[31mp.py", *base]))
    for i, text in enumerate(UNIVERSAL):
        cases.append(Case(f"suite-status-id{i}", "control/utf8", ["suite", "status", text]))
        cases.append(Case(f"env-db{i}", "control/utf8", ["results"],
                          env={"ACCELBENCH_DB": f"{{dir}}/{text}.db"}))
    cases += _special_files() + _combos() + _damaged() + _secrets()
    return cases


def _special_files() -> list[Case]:
    out: list[Case] = []
    targets = {"chr-full": "{dir}/full", "chr-null": "{dir}/null", "fifo": "{dir}/fifo",
               "store": "{store}", "link-to-store": "{dir}/store-link",
               "directory": "{dir}/adir", "dir-slash": "{dir}/adir/"}
    for name, path in targets.items():
        root = name.startswith("chr")
        out += [
            Case(f"export-out-{name}", "special-files",
                 ["export", "--format", "csv", "--out", path, "--force"], needs_root=root),
            Case(f"export-json-out-{name}", "special-files",
                 ["export", "--format", "json", "--out", path], needs_root=root),
            Case(f"run-mllog-{name}", "special-files", [*BASES["run"], "--mllog", path],
                 needs_root=root),
            Case(f"run-mlflow-{name}", "special-files",
                 [*BASES["run"], "--mlflow", f"sqlite:///{path}"], needs_root=root),
        ]
        if "dir" not in name:  # an (empty) directory is what report and roofline write into
            out += [
                Case(f"report-out-{name}", "special-files",
                     ["report", "--out", path, "--force"], needs_root=root),
                Case(f"roofline-out-{name}", "special-files",
                     ["roofline", "--out", path, "--force"], needs_root=root),
            ]
        if name not in ("store", "link-to-store"):  # the store through a link is the store
            out.append(Case(f"results-db-{name}", "special-files", ["--db", path, "results"],
                            needs_root=root))
            out.append(Case(f"run-db-{name}", "special-files", ["--db", path, *BASES["run"]],
                            needs_root=root))
    out += [
        Case("db-dash", "special-files", ["--db", "-", *BASES["run"]]),
        Case("db-memory", "special-files", ["--db", "sqlite://", *BASES["run"]]),
        Case("db-missing-results", "special-files", ["--db", "{dir}/missing.db", "results"]),
        Case("env-db-missing-results", "special-files", ["results"],
             env={"ACCELBENCH_DB": "{dir}/missing.db"}),
        Case("db-missing-export", "special-files",
             ["--db", "{dir}/missing.db", "export", "--format", "csv"]),
    ]
    return out


def _combos() -> list[Case]:
    return [Case(f"combo{i}:{' '.join(argv)[:60]}", "combos", argv)
            for i, argv in enumerate(COMBOS)]


#: Reads that never decode a result record: on a store whose only damage is one record
#: that does not parse they answer from the tables they read, exit 0 and write what they
#: were asked to (docs/store.md, "Each record a read uses"); every other damage refuses them.
NO_RECORD_READS = {("ops", "--list"), ("peaks", "--no-measure"), ("roofline", "--out"),
                   ("suite", "status")}


def _damaged() -> list[Case]:
    return [Case(f"{damage}:{' '.join(argv)}", "damaged-store", argv, store=damage,
                 bad=not (damage == "bad-json" and tuple(argv[:2]) in NO_RECORD_READS))
            for damage in ("truncated", "v999", "dropped-column", "bad-json")
            for argv in READS]


def _secrets() -> list[Case]:
    out: list[Case] = []
    for sub, base in BASES.items():
        out.append(Case(f"{sub}-pg-flag", "secrets", ["--db", PG_URL, *base], bad=False))
        out.append(Case(f"{sub}-pg-env", "secrets", base, env={"ACCELBENCH_DB": PG_URL},
                        bad=False))
        out.append(Case(f"{sub}-pg-bad-option", "secrets", [*base, "--db", PG_URL, "--nope"],
                        bad=False))
    for spelled in (PG_URL, PG_URL.replace("+psycopg", ""),
                    PG_URL.replace(f":{SECRET}@", f":{SECRET}%40@"),
                    f"postgresql://bench:{SECRET}@/results?host=/tmp",
                    f"postgresql+psycopg://bench:{SECRET}@127.0.0.1:9"):
        out.append(Case(f"slurm-pg:{spelled[:24]}", "secrets",
                        ["suite", "quick", "--launcher", "slurm", "--db", spelled,
                         "--slurm-folder", "{dir}/slurm"], bad=False))
    out += [
        Case("run-wandb-pg", "secrets", ["--db", PG_URL, *BASES["run"], "--wandb"],
             env={"WANDB_MODE": "offline"}, bad=False),
        Case("run-mllog-pg", "secrets", ["--db", PG_URL, *BASES["run"], "--mllog",
                                         "{dir}/ml.log"], bad=False),
        Case("run-debug-pg", "secrets", ["--debug", "--db", PG_URL, *BASES["run"]], bad=False),
    ]
    return out


# --------------------------------------------------------------------------- the stores


def make_seeds(root: Path) -> dict[str, Path]:
    from tests.conftest import seed_store

    good = root / "good.db"
    seed_store(good)
    seeds = {"good": good}
    for damage in ("truncated", "v999", "dropped-column", "bad-json"):
        path = root / f"{damage}.db"
        shutil.copy(good, path)
        if damage == "truncated":
            data = path.read_bytes()
            path.write_bytes(data[: len(data) // 3])
        else:
            with sqlite3.connect(path) as conn:
                if damage == "v999":
                    conn.execute("UPDATE meta SET value='999' WHERE key='schema_version'")
                elif damage == "dropped-column":
                    conn.execute("ALTER TABLE results DROP COLUMN device_name")
                else:
                    conn.execute("UPDATE results SET record_json='{not json' "
                                 "WHERE id='seed00000000'")
        seeds[damage] = path
    return seeds


# --------------------------------------------------------------------------- running


def _snapshot(here: Path) -> dict[str, str]:
    """Every entry under ``here`` but the cache: its kind and, for files, its bytes."""
    found: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(here):
        rel = os.path.relpath(dirpath, here)
        if rel.split(os.sep)[0] == "cache":
            continue
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            key = os.path.join(rel, name)
            if stat.S_ISREG(st.st_mode):
                with open(path, "rb") as f:
                    found[key] = hashlib.sha256(f.read()).hexdigest()
            elif stat.S_ISLNK(st.st_mode):
                found[key] = "link:" + os.readlink(path)
            else:
                found[key] = f"mode:{stat.S_IFMT(st.st_mode)}:{st.st_rdev}"
    return found


def _holds_secret(here: Path) -> list[str]:
    hits = []
    needle = SECRET.encode()
    for dirpath, _dirs, filenames in os.walk(here):
        for name in filenames:
            path = os.path.join(dirpath, name)
            if not os.path.isfile(path) or os.path.islink(path):
                continue
            try:
                with open(path, "rb") as f:
                    if needle in f.read():
                        hits.append(os.path.relpath(path, here))
            except OSError:
                continue
    return hits


def _prepare(here: Path, seeds: dict[str, Path], case: Case) -> tuple[Path, bool]:
    for sub in ("home", "cache", "empty-sysfs", "adir"):
        (here / sub).mkdir(parents=True)
    store = here / "results.db"
    shutil.copy(seeds[case.store], store)
    (here / "file").write_text("not a database\n")
    (here / "store-link").symlink_to(store)
    os.mkfifo(here / "fifo")
    made = True
    try:
        os.mknod(here / "full", 0o666 | stat.S_IFCHR, os.makedev(1, 7))
        os.mknod(here / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except (PermissionError, OSError):
        made = False
    return store, made


def _fresh(argv: list[str], env: dict[str, str], cwd: Path,
           timeout: float) -> tuple[int | None, str, str]:
    """``python -m accelbench.cli ARGV`` started from scratch, argv and environment as
    bytes (as a shell passes them); the process group killed at the timeout."""
    proc = subprocess.Popen(
        [sys.executable.encode(), b"-m", b"accelbench.cli", *(os.fsencode(a) for a in argv)],
        cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={os.fsencode(k): os.fsencode(v) for k, v in env.items()},
        start_new_session=True)
    try:
        out_b, err_b = proc.communicate(timeout=timeout)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out_b, err_b = proc.communicate()
        code = None
    return code, out_b.decode("utf-8", "replace"), err_b.decode("utf-8", "replace")


def _warm(argv: list[str], env: dict[str, str], cwd: Path,
          timeout: float) -> tuple[int | None, str, str]:
    """The same, forked from a process that has imported accelbench already (the test
    suite's tests/cliserver.py): each input is still a process of its own, with its own
    argv, environment, directory, stdin, stdout, stderr and exit status."""
    from tests.cliserver import warm_cli

    try:
        proc = warm_cli().run(argv, env=env, cwd=str(cwd), timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        return None, str(exc.stdout or ""), str(exc.stderr or "")
    return proc.returncode, proc.stdout, proc.stderr


def run_case(root: Path, seeds: dict[str, Path], case: Case, n: int,
             timeout: float, fresh: bool = False) -> Outcome | None:
    """Run ``case`` in a directory of its own under ``root``; None: left out (a device
    node it needs cannot be made by this user)."""
    here = root / f"case{n:04d}"
    store, root_ok = _prepare(here, seeds, case)
    if case.needs_root and not root_ok:
        shutil.rmtree(here, ignore_errors=True)
        return None

    def fill(text: str) -> str:
        return text.replace("{dir}", str(here)).replace("{store}", str(store))

    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELBENCH_", "WANDB",
                                                                     "MLFLOW"))}
    env.update({
        # The model-facts cache is shared (warmed once): `list` counts FLOPs when cold.
        "ACCELBENCH_DB": str(store), "ACCELBENCH_CACHE_DIR": str(root / "facts-cache"),
        "ACCELBENCH_POWERCAP_ROOT": str(here / "empty-sysfs"),
        "ACCELBENCH_CPUFREQ_ROOT": str(here / "empty-sysfs"),
        "ACCELBENCH_PLUGIN_TIMEOUT_S": "30", "HOME": str(here / "home"),
        "XDG_CACHE_HOME": str(here / "cache"), "MPLCONFIGDIR": str(here / "cache"),
        "TORCH_HOME": str(here / "cache"), "WANDB_DIR": str(here / "cache"),
        "PYTHONDONTWRITEBYTECODE": "1",
    })
    env.update({k: fill(v) for k, v in case.env.items()})
    argv = [fill(a) for a in case.argv]
    before = _snapshot(here)
    start = time.monotonic()
    code, out, err = (_fresh if fresh else _warm)(argv, env, here, timeout)
    seconds = time.monotonic() - start
    hung = code is None
    classes: set[str] = set()
    if hung:
        classes.add("hang")
    if "Traceback (most recent call last)" in out + err and "--debug" not in argv:
        classes.add("traceback")
    if case.bad and not hung:
        if code == 0:
            classes.add("exit0")
        elif code != 2:
            classes.add("exit_other")
        elif len(err.splitlines()) > 1:
            classes.add("multiline")
        after = _snapshot(here)
        changed = sorted(k for k in before.keys() | after.keys()
                         if before.get(k) != after.get(k))
        if changed:
            classes.add("writes")
            err += "\n[changed: " + ", ".join(changed[:6]) + "]"
    if SECRET in out + err or _holds_secret(here):
        classes.add("secrets")
    shutil.rmtree(here, ignore_errors=True)
    return Outcome(case, code, out, err, seconds, classes)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=2, help="inputs run at a time (default 2)")
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="seconds before an input counts as a hang (default 60)")
    ap.add_argument("--only", help="one category (control/utf8, numbers, choices, "
                    "long-path, special-files, combos, damaged-store, secrets)")
    ap.add_argument("--sample", type=int, help="every n-th input only")
    ap.add_argument("--show", type=int, default=5,
                    help="failing inputs shown per class (default 5)")
    ap.add_argument("--json", help="write every outcome to this JSON file")
    ap.add_argument("--fresh", action="store_true",
                    help="start every input as a new interpreter (slower; default: forked "
                    "from one that imported accelbench, tests/cliserver.py)")
    ap.add_argument("--check-bases", action="store_true",
                    help="run only the valid invocations the inputs are built on")
    args = ap.parse_args(argv)

    cases = inputs() if not args.check_bases else [
        Case(f"base:{sub}", "bases", base, bad=False) for sub, base in BASES.items()]
    if args.only:
        cases = [c for c in cases if c.category == args.only]
    if args.sample:
        cases = cases[::args.sample]
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.cliserver
    root = Path(tempfile.mkdtemp(prefix="accelbench-hostile-"))
    try:
        seeds = make_seeds(root / "seeds")
        start = time.monotonic()
        warm_up = Case("warm-up", "bases", ["list"], bad=False)  # fills the facts cache
        run_case(root, seeds, warm_up, 99999, 600.0, args.fresh)
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = [pool.submit(run_case, root, seeds, c, i, args.timeout, args.fresh)
                       for i, c in enumerate(cases)]
            outcomes = [o for f in futures if (o := f.result()) is not None]
        wall = time.monotonic() - start
    finally:
        if not args.fresh:
            from tests.cliserver import close_warm_cli

            close_warm_cli()
        shutil.rmtree(root, ignore_errors=True)
    _report(outcomes, wall, args.show)
    if args.json:
        Path(args.json).write_text(json.dumps([
            {"id": o.case.cid, "category": o.case.category, "argv": [ascii(a) for a in
                                                                       o.case.argv],
             "code": o.code, "classes": sorted(o.classes), "seconds": round(o.seconds, 2),
             "stderr": o.stderr[-400:]} for o in outcomes], indent=1))
    return 0


def _report(outcomes: list[Outcome], wall: float, show: int) -> None:
    classes = ("traceback", "exit0", "exit_other", "multiline", "writes", "secrets", "hang")
    total: Counter[str] = Counter()
    per_category: dict[str, Counter[str]] = defaultdict(Counter)
    sizes: Counter[str] = Counter()
    for o in outcomes:
        sizes[o.case.category] += 1
        for c in o.classes:
            total[c] += 1
            per_category[o.case.category][c] += 1
    load = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() \
        else "?"
    print(f"{len(outcomes)} hostile inputs in {wall:.0f} s (load average now {load})")
    print(f"{'category':<16}{'inputs':>7}" + "".join(f"{c:>11}" for c in classes))
    for cat in sorted(sizes):
        print(f"{cat:<16}{sizes[cat]:>7}" + "".join(f"{per_category[cat][c]:>11}"
                                                    for c in classes))
    print(f"{'all':<16}{len(outcomes):>7}" + "".join(f"{total[c]:>11}" for c in classes))
    for o in outcomes:
        if o.case.category == "bases":
            last = (o.stderr.strip().splitlines() or [""])[-1][:120]
            print(f"  {o.case.cid}: exit {o.code} in {o.seconds:.1f} s {last!a}")
    for c in classes:
        bad = [o for o in outcomes if c in o.classes][:show]
        for o in bad:
            last = (o.stderr.strip().splitlines() or [""])[-1][:160]
            print(f"  {c}: {o.case.cid[:70]!a} -> {o.code}: {last!a}")


if __name__ == "__main__":
    sys.exit(main())
