"""Mutation testing of the modules whose output users read as figures or rely on for safety.

    python benchmarks/mutants.py                 # the whole set (time: docs/mutation.md)
    python benchmarks/mutants.py --module stats  # one module (repeatable)
    python benchmarks/mutants.py --list          # the modules, their tests and mutant counts

Each mutant is one small change to one module (an operator swapped, a constant moved, a
``not`` dropped, a return value replaced by ``None``), made with Python's ``ast`` in a
*copy* of the commit HEAD (``--worktree``: of the working tree; the working tree itself is
never written: other people work in it). The module's mapped tests run against the copy
(``PYTHONPATH`` points at the copy's ``src``, so the ``accelbench`` subprocesses the tests
start run the mutant too) with ``pytest -x -q -p no:xdist`` and a time limit per mutant. A
mutant is *killed* when a test fails (or the tests overrun their limit: a hang is caught
too), and *survives* when they all pass. The score per module is killed / (all -
equivalent), where an equivalent mutant (one that changes no behaviour) is listed in
:data:`EQUIVALENT` with the reason.

Where a module has more mutants than ``--max`` (default 20), a sample of them is run, drawn
with a fixed seed (``--seed``, default 46) so two runs on the same code run the same mutants;
the output says so. mutmut and cosmic-ray were not used: each needs its own configuration of
the tree layout and test runner, and neither maps each module to its own test files; this
engine is ~300 lines and needs nothing outside the standard library and pytest. It is not an
accelbench dependency and not part of CI's time budget.

The score, date and commit are written down in ``docs/mutation.md``.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import contextlib
import copy
import dataclasses
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# name -> (module file under src/accelbench, test files, only these functions or ()).
# The order is the run order; compare_pair last (it is often being edited).
MODULES: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "stats": ("stats.py", ("tests/test_gap_ci_coverage.py", "tests/test_stats.py"), ()),
    "measure": ("execution/measure.py", ("tests/test_gap_measure.py",
                                         "tests/test_measure_queued.py",
                                         "tests/test_measure.py"), ()),
    "metering": ("execution/metering.py", ("tests/test_energy_blocks.py",
                                           "tests/test_energy_window.py"), ()),
    "phases": ("phases.py", ("tests/test_gap_phases.py", "tests/test_phases.py"), ()),
    "noise": ("execution/noise.py", ("tests/test_gap_thresholds.py", "tests/test_noise.py"),
              ()),
    "verdicts": ("verdicts.py", ("tests/test_gap_thresholds.py", "tests/test_verdicts_read.py",
                                           "tests/test_noise.py"), ()),
    "compare_stats": ("report/compare/stats.py", ("tests/test_gap_compare_stats.py",
                                                  "tests/test_compare.py"), ()),
    "report_pairs": ("report/pairs.py", ("tests/test_gap_report_ratios.py",
                                         "tests/test_report.py"), ()),
    "export": ("report/export.py", ("tests/test_gap_export.py", "tests/test_export_schema.py",
                                    "tests/test_export.py"), ()),
    "url_masking": ("store/base.py", ("tests/test_gap_url_secrets.py", "tests/test_gap_masking.py",
                                      "tests/test_password_masking.py"),
                    ("display_url", "url_secrets", "hide_secrets", "short_error")),
    "store_safety": ("store/base.py", ("tests/test_gap_store_damage.py",
                                       "tests/test_store_safety.py", "tests/test_store_damage.py",
                                       "tests/test_store_hardening.py"),
                     ("sqlite_path", "expected_columns", "expected_tables", "damage",
                      "local_file_of")),
    "outputs": ("report/outputs.py", ("tests/test_write_guard.py", "tests/test_store_safety.py"),
                ()),
    "compare_pair": ("report/compare/pair.py", ("tests/test_gap_compare_pair.py",
                                                "tests/test_compare_axes.py",
                                                "tests/test_compare.py"), ()),
}

# (module name, line, change) -> why the mutant changes no behaviour. Lines are the
# original module's; re-check this list when a module changes. Where a module moved on
# since it was measured, the entry is kept at the line measured (4d7f839, 711030a:
# docs/mutation.md) and added at the line of the commit named in its reason.
EQUIVALENT: dict[tuple[str, int, str], str] = {
    ("stats", 83, "1 -> 2"): "throughput_ci_rel_halfwidth's default samples per step: a "
    "relative half-width is the same for any (bounds and centre all scale with it)",
    ("compare_stats", 179, "0 -> 1"): "the samples per step of a group's second run for its "
    "first: the runs of one --repeats group are one case, with one samples per step",
    ("compare_stats", 163, "0 -> 1"): "(76e1027: compare_stats:179 moved) the samples per "
    "step of a group's second run for its first: one --repeats group is one case",
    ("url_masking", 149, "1 -> 2"): "display_url's count=1 -> 2: the user-info pattern's "
    "greedy '.*@' runs to the last '@', so no second match can follow the first",
    ("noise", 236, "0.0 -> 1.0"): "the default of a judged window's other_cores: a window is "
    "judged from 0.2 s on, and host_window gives every window over 0 s its other_cores",
    ("outputs", 155, "0 -> 1"): "_mode_for reads the umask by setting a throw-away value and "
    "restoring the old one at once: any value reads the same",
    ("export", 164, "False -> True"): "the JSON line encoder's allow_nan: no non-finite number "
    "reaches it (case_record makes each None, a record goes through jsonout.jsonable first, a "
    "sample line is formatted apart and the encoder only quotes its id)",
    ("compare_pair", 256, "True -> False"): "zip(match_on, key, strict=True) -> False in "
    "only_a: every key is a tuple _group built over match_on, so the lengths always match",
    ("compare_pair", 254, "True -> False"): "(fa41fa9: compare_pair:256 moved) "
    "zip(match_on, key, strict=True) -> False: every key is a tuple _group built over "
    "match_on, so the lengths always match",
    ("compare_pair", 271, "True -> False"): "(fa41fa9: compare_pair:256 moved) "
    "zip(match_on, key, strict=True) -> False: every key is a tuple _group built over "
    "match_on, so the lengths always match",
    ("compare_pair", 273, "True -> False"): "(fa41fa9: compare_pair:256 moved) "
    "zip(match_on, key, strict=True) -> False: every key is a tuple _group built over "
    "match_on, so the lengths always match",
    ("export", 207, "+ -> -"): "write_json's n_samples is only tested for zero (the first "
    "sample written, the array's closing line): a sum of positive counts is as non-zero "
    "taken away as added",
    ("compare_stats", 169, "3 -> 4"): "SeedSequence(seed).spawn(3) -> spawn(4): children are "
    "keyed by their index, and only the first two (one per side) are drawn from, so they "
    "are the same streams either way",
    ("measure", 522, "return '' -> return None"): "_below_minimum's 'no line' as None for "
    "'': its one caller reads it only as `if below:` and `bool(below)`, falsy either way",
}

SKIP_FIELDS = {"annotation", "returns", "type_comment", "format_spec", "decorator_list"}
BINOPS: dict[type, type] = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div,
                            ast.Div: ast.Mult, ast.FloorDiv: ast.Mult, ast.Pow: ast.Mult,
                            ast.Mod: ast.FloorDiv}
CMPOPS: dict[type, type] = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE,
                            ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
                            ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn,
                            ast.NotIn: ast.In}
SYMBOL = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
          ast.Pow: "**", ast.Mod: "%", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">",
          ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.Is: "is", ast.IsNot: "is not",
          ast.In: "in", ast.NotIn: "not in", ast.And: "and", ast.Or: "or"}


@dataclasses.dataclass(frozen=True)
class Mutant:
    module: str
    index: int  # the index-th mutation point of the traversal
    line: int
    change: str


def new_number(v: int | float) -> int | float:
    """The constant a mutant puts in place of ``v`` (0.95 -> 0.99, n -> n + 1, a fraction
    0 < f < 1 -> 1.7 f, so a threshold 0.5 becomes 0.85)."""
    if isinstance(v, int):
        return v + 1
    if v == 0.95:
        return 0.99
    if 0 < v < 1:
        return round(v * 1.7, 6)
    return v + 1


def points(tree: ast.AST, only: tuple[str, ...]) -> Iterator[tuple[ast.AST, str, str, int]]:  # noqa: C901
    """Each mutation point: (parent, field, what, line) in a fixed order. ``what`` names
    the mutation; applying it is :func:`apply`'s job."""

    def walk(node: ast.AST, inside: bool) -> Iterator[tuple[ast.AST, str, str, int]]:  # noqa: C901
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and only:
            inside = inside or node.name in only
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) \
                and node.test.id == "TYPE_CHECKING":
            return
        active = inside or not only
        body = getattr(node, "body", None)
        docstring = None
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            docstring = body[0]
        if active:
            line = getattr(node, "lineno", 0)
            if isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in BINOPS:
                yield node, "op", "binop", line
            elif isinstance(node, ast.Compare):
                for i, op in enumerate(node.ops):
                    if type(op) in CMPOPS:
                        yield node, f"ops.{i}", "cmp", line
            elif isinstance(node, ast.BoolOp):
                yield node, "op", "boolop", line
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
                yield node, "", "not", line
            elif isinstance(node, ast.Constant) and type(node.value) in (bool, int, float):
                yield node, "value", "const", line
            elif isinstance(node, ast.Return) and node.value is not None and not (
                    isinstance(node.value, ast.Constant) and node.value.value is None):
                yield node, "value", "return", line
        for field, value in ast.iter_fields(node):
            if field in SKIP_FIELDS:
                continue
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST) and item is not docstring:
                        yield from walk(item, inside)
            elif isinstance(value, ast.AST):
                yield from walk(value, inside)

    yield from walk(tree, False)


def describe(node: ast.AST, field: str, what: str) -> str:
    if what == "binop":
        op = node.op  # type: ignore[attr-defined]
        return f"{SYMBOL[type(op)]} -> {SYMBOL[BINOPS[type(op)]]}"
    if what == "cmp":
        op = node.ops[int(field.split(".")[1])]  # type: ignore[attr-defined]
        return f"{SYMBOL[type(op)]} -> {SYMBOL[CMPOPS[type(op)]]}"
    if what == "boolop":
        return "and -> or" if isinstance(node.op, ast.And) else "or -> and"  # type: ignore
    if what == "not":
        return f"not {ast.unparse(node.operand)[:40]} -> {ast.unparse(node.operand)[:40]}"  # type: ignore
    if what == "const":
        v = node.value  # type: ignore[attr-defined]
        return f"{v!r} -> {(not v) if isinstance(v, bool) else new_number(v)!r}"
    return f"return {ast.unparse(node.value)[:50]} -> return None"  # type: ignore


def apply(tree: ast.Module, index: int, only: tuple[str, ...]) -> str:
    """The module's source with its index-th mutation point changed."""
    tree = copy.deepcopy(tree)
    for i, (node, field, what, _line) in enumerate(points(tree, only)):
        if i != index:
            continue
        if what == "binop":
            node.op = BINOPS[type(node.op)]()  # type: ignore[attr-defined]
        elif what == "cmp":
            k = int(field.split(".")[1])
            ops = node.ops  # type: ignore[attr-defined]
            ops[k] = CMPOPS[type(ops[k])]()
        elif what == "boolop":
            node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()  # type: ignore
        elif what == "not":
            # ``not x`` -> ``bool(x)``: keeps the node's place, drops the negation.
            new = ast.Call(func=ast.Name("bool", ast.Load()), args=[node.operand], keywords=[])  # type: ignore
            node.__class__ = ast.Call
            node.__dict__.clear()
            node.__dict__.update(new.__dict__)
        elif what == "const":
            v = node.value  # type: ignore[attr-defined]
            node.value = (not v) if isinstance(v, bool) else new_number(v)  # type: ignore
        elif what == "return":
            node.value = ast.Constant(None)  # type: ignore[attr-defined]
        return ast.unparse(ast.fix_missing_locations(tree)) + "\n"
    raise IndexError(index)


def mutants_of(name: str, root: Path = ROOT) -> tuple[ast.Module, list[Mutant]]:
    path, _tests, only = MODULES[name]
    tree = ast.parse((root / "src" / "accelbench" / path).read_text())
    found = [Mutant(name, i, line, describe(node, field, what))
             for i, (node, field, what, line) in enumerate(points(tree, only))]
    return tree, found


def make_copy(worktree: bool, rev: str, extra: list[str]) -> Path:
    """A copy to mutate: the commit ``rev`` (``git archive``: what the score in the docs
    is of, whatever is half-edited in the working tree) with the working tree's ``extra``
    files over it, or with ``--worktree`` the working tree as it is (no .git, no venv, no
    caches)."""
    dest = Path(tempfile.mkdtemp(prefix="accelbench-mutants-"))
    if worktree:
        ignore = shutil.ignore_patterns(".git", ".venv", "__pycache__", ".pytest_cache",
                                        ".mypy_cache", ".ruff_cache", "*.egg-info", "out")
        shutil.copytree(ROOT, dest / "tree", ignore=ignore)
    else:
        (dest / "tree").mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest / "tree")], input=archive, check=True)
        for rel in extra:
            (dest / "tree" / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest / "tree" / rel)
    return dest


def run_tests(tree: Path, tests: tuple[str, ...], limit: float, pycache: Path) -> tuple[str, float]:
    """'pass', 'fail' or 'timeout', and the seconds taken."""
    env = dict(os.environ, PYTHONPATH=str(tree / "src"), PYTHONPYCACHEPREFIX=str(pycache))
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:xdist",
           "-p", "no:cacheprovider", "-o", "addopts=", *tests]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    RUNNING.add(proc)
    try:
        rc = proc.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return "timeout", time.monotonic() - t0
    finally:
        RUNNING.discard(proc)
    return ("pass" if rc == 0 else "fail"), time.monotonic() - t0


RUNNING: set[subprocess.Popen[bytes]] = set()
"""The test runs under way (each its own process group), ended when the script is."""


def stop(*_: object) -> None:
    """SIGTERM/SIGINT: end the test runs under way (their whole process groups: the
    servers and workers the tests started too), then exit; the copies are removed on the
    way out."""
    for proc in list(RUNNING):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    sys.exit(143)


def run_module(name: str, copies: list[Path], max_n: int, seed: int,  # noqa: PLR0915
               log: list[str], skip: tuple[str, ...] = ()) -> dict[str, object]:
    path, tests, only = MODULES[name]
    rel = Path("src") / "accelbench" / path
    original = (copies[0] / "tree" / rel).read_text()
    tests = tuple(t for t in tests if (copies[0] / "tree" / t).exists() and t not in skip)
    mod_tree, found = mutants_of(name, copies[0] / "tree")
    chosen = found
    if len(found) > max_n:
        chosen = sorted(random.Random(f"{seed}:{name}").sample(found, max_n),
                        key=lambda m: m.index)
    sampled = f" (a sample of {len(chosen)} of {len(found)}, seed {seed})" \
        if len(chosen) < len(found) else ""
    print(f"\n== {name}: src/accelbench/{path}, {len(found)} mutants{sampled}; "
          f"tests: {' '.join(tests)}", flush=True)
    for _ in range(2):  # twice: one flaky failure on a loaded machine skips nothing
        status, base = run_tests(copies[0] / "tree", tests, 900, copies[0] / "pycache")
        if status == "pass":
            break
    if status != "pass":
        print(f"   the tests fail on the unmutated code ({status}): module skipped", flush=True)
        return {"name": name, "error": status}
    limit = base * 2 + 30
    print(f"   unmutated tests pass in {base:.1f} s; limit per mutant {limit:.0f} s", flush=True)
    free: queue.Queue[Path] = queue.Queue()
    for c in copies:
        free.put(c)
    stamp = iter(range(1_000_000_000, 2_000_000_000))
    lock = threading.Lock()

    def one(m: Mutant) -> tuple[Mutant, str, float]:
        work = free.get()
        target = work / "tree" / rel
        st = target.stat()
        try:
            target.write_text(apply(mod_tree, m.index, only))
            # A distinct mtime per mutant: bytecode cached for an earlier mutant of the
            # same size in the same second is never taken for this one.
            with lock:
                t = next(stamp)
            os.utime(target, (st.st_atime, t))
            result, secs = run_tests(work / "tree", tests, limit, work / "pycache")
        finally:
            target.write_text(original)
            os.utime(target, (st.st_atime, st.st_mtime))
            free.put(work)
        return m, result, secs

    killed, survivors, equivalent = 0, [], []
    pool = concurrent.futures.ThreadPoolExecutor(len(copies))
    try:
        done = pool.map(one, chosen)
        for n, (m, result, secs) in enumerate(done, 1):
            key = (name, m.line, m.change)
            mark = {"fail": "killed", "timeout": "killed (timeout)"}.get(result, "SURVIVED")
            if result != "pass":
                killed += 1
            elif key in EQUIVALENT:
                mark = "equivalent"
                equivalent.append(m)
            else:
                survivors.append(m)
            print(f"   [{n}/{len(chosen)}] {path}:{m.line} {m.change}: {mark} ({secs:.0f} s)",
                  flush=True)
            log.append(f"{name}\t{path}:{m.line}\t{m.change}\t{mark}")
    finally:  # stopped: mutants not started yet are not started
        pool.shutdown(wait=True, cancel_futures=True)
    scored = len(chosen) - len(equivalent)
    score = killed / scored if scored else 1.0
    print(f"   {name}: {killed}/{scored} killed = {score:.0%}"
          f" ({len(equivalent)} equivalent, {len(survivors)} survived){sampled}", flush=True)
    return {"name": name, "killed": killed, "scored": scored, "score": score,
            "survivors": survivors, "sampled": sampled}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--module", action="append", choices=list(MODULES),
                    help="run only this module (repeatable); default: all")
    ap.add_argument("--list", action="store_true", help="list the modules and exit")
    ap.add_argument("--max", type=int, default=20,
                    help="mutants per module at most (a seeded sample beyond); default 20")
    ap.add_argument("--seed", type=int, default=46)
    ap.add_argument("--jobs", type=int, default=2,
                    help="mutants tested at once, each in its own copy; default 2")
    ap.add_argument("--worktree", action="store_true",
                    help="mutate a copy of the working tree as it is (default: of HEAD)")
    ap.add_argument("--rev", default="HEAD", help="the commit to mutate; default HEAD")
    ap.add_argument("--with", dest="with_", action="append", metavar="PATH",
                    help="a working-tree file copied over the commit (a new test); repeatable")
    ap.add_argument("--skip-test", action="append", metavar="PATH",
                    help="leave this mapped test file out (a score before it was added)")
    ap.add_argument("--log", type=Path, help="also write one line per mutant to this file")
    args = ap.parse_args()
    names = args.module or list(MODULES)
    if args.list:
        for name in names:
            path, tests, only = MODULES[name]
            n = len(mutants_of(name)[1])
            scope = f" (functions {', '.join(only)})" if only else ""
            print(f"{name:14} src/accelbench/{path}{scope}: {n} mutants; {' '.join(tests)}")
        return 0
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", args.rev],
                            capture_output=True, text=True).stdout.strip()
    extra = f" with {' '.join(args.with_)}" if args.with_ else ""
    print(f"mutation testing of {'the working tree at ' if args.worktree else ''}{commit}{extra}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; --max {args.max} "
          f"--seed {args.seed} --jobs {args.jobs}", flush=True)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    copies = [make_copy(args.worktree, args.rev, args.with_ or []) for _ in range(args.jobs)]
    log: list[str] = []
    t0 = time.monotonic()
    results = []
    try:
        for name in names:
            results.append(run_module(name, copies, args.max, args.seed, log,
                                      tuple(args.skip_test or ())))
    finally:
        for c in copies:
            shutil.rmtree(c, ignore_errors=True)
        if args.log:
            args.log.write_text("\n".join(log) + "\n")
    print(f"\n== summary ({time.monotonic() - t0:.0f} s)")
    for r in results:
        if "error" in r:
            print(f"{r['name']:14} tests fail unmutated ({r['error']})")
            continue
        print(f"{r['name']:14} {r['killed']}/{r['scored']} = {r['score']:.0%}{r['sampled']}")
        for m in r["survivors"]:  # type: ignore[attr-defined]
            print(f"{'':14}   survived: {MODULES[m.module][0]}:{m.line} {m.change}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
