"""Model facts (parameters, FLOPs per sample), counted once per workload, size and framework.

Counting builds the model, so it runs the workload's code and imports its
framework: it happens in a child process (``python -m accelbench.runner.facts``,
one per framework, with a timeout), never in the CLI process. Answers are
cached in the user cache directory, in a file keyed by accelbench's version;
a plugin's entries also carry a fingerprint of its source file, so editing
the plugin recounts. A warm ``accelbench list`` reads only that file.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from accelbench import __version__
from accelbench.spec import SIZES, SizeName
from accelbench.workloads.registry import (
    get_workload,
    implementation_frameworks,
    workload_origin,
)

ENV_CACHE_DIR = "ACCELBENCH_CACHE_DIR"
#: Seconds one child may spend counting all the models it was given.
COUNT_TIMEOUT_S = 600.0
#: The keys of one entry.
FACT_KEYS = ("param_count", "forward_flop_per_sample", "flop_per_sample", "flop_method")

Item = tuple[str, SizeName, str]
"""(workload, size, framework)."""


def cache_dir() -> Path:
    """``ACCELBENCH_CACHE_DIR`` or the user cache directory."""
    env = os.environ.get(ENV_CACHE_DIR)
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("accelbench", appauthor=False))


def cache_path() -> Path:
    return cache_dir() / f"model-facts-{__version__}.json"


def _file_digest(path: str | None) -> str:
    if not path:
        return "?"
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    except OSError:
        return "?"


def _origin_fingerprint(origin: str) -> str:
    if origin.startswith("accelbench."):
        return "builtin"
    if origin.endswith(".py"):
        return _file_digest(origin)
    try:
        spec = importlib.util.find_spec(origin)
    except (ImportError, ValueError):
        return "?"
    return _file_digest(spec.origin if spec else None)


def item_key(item: Item) -> str:
    """Cache key of one (workload, size, framework), with the sources' fingerprints."""
    name, size, fw = item
    prints = {_origin_fingerprint(workload_origin(name)),
              _origin_fingerprint(workload_origin(name, fw))}
    return f"{name}|{size}|{fw}|{'+'.join(sorted(prints))}"


def _read_cache() -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(cache_path().read_text())
    except (OSError, ValueError):
        return {}  # no cache yet, or a damaged one: recount
    return data if isinstance(data, dict) else {}


def _write_cache(entries: dict[str, dict[str, Any]]) -> None:
    """Merge ``entries`` into the cache file atomically (a failure only costs a recount)."""
    if not entries:
        return
    path = cache_path()
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        merged = {**_read_cache(), **entries}
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".facts-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(merged, f)
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def lookup(name: str, size: SizeName, framework: str) -> dict[str, Any] | None:
    """Cached facts of one model, or None when not counted yet."""
    return _read_cache().get(item_key((name, size, framework)))


def remember(name: str, size: SizeName, framework: str, facts: dict[str, Any]) -> None:
    """Cache facts a worker counted (only complete, successful counts are kept)."""
    entry = {k: facts.get(k) for k in FACT_KEYS}
    if entry["param_count"] is None or entry["flop_per_sample"] is None:
        return
    _write_cache({item_key((name, size, framework)): entry})


def _count_in_child(framework: str, items: Sequence[Item], plugins: Sequence[str],
                    timeout_s: float) -> dict[Item, dict[str, Any]]:
    """Count ``items`` (all of one framework) in fresh processes; failures become notes.

    Items are counted in order; a child that dies (a model that segfaults or exits)
    takes only the item it was counting with it: the rest go to a new child.
    """
    out: dict[Item, dict[str, Any]] = {}
    todo = list(items)
    while todo:
        answered, reason = _one_child(framework, todo, plugins, timeout_s)
        out.update(answered)
        todo = [i for i in todo if i not in out]
        if not todo:
            break
        culprit, todo = todo[0], todo[1:]  # the one being counted when the child ended
        out[culprit] = {"param_count": None, "flop_method": reason[:300]}
        if reason.startswith(f"not counted: {framework} counter timed out"):
            for item in todo:  # the time is spent: do not start again
                out[item] = {"param_count": None, "flop_method": reason[:300]}
            break
    return out


def _one_child(framework: str, items: Sequence[Item], plugins: Sequence[str],
               timeout_s: float) -> tuple[dict[Item, dict[str, Any]], str]:
    request = {"plugins": list(plugins), "items": [list(i) for i in items]}
    out: dict[Item, dict[str, Any]] = {}
    reason = "not counted"
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "accelbench.runner.facts"],
            input=json.dumps(request), capture_output=True, text=True,
            timeout=timeout_s, check=False,
        )
        stdout = proc.stdout
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or [""])[-1]
            reason = f"not counted: {framework} counter exited with {proc.returncode} {last}"
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        reason = f"not counted: {framework} counter timed out after {timeout_s:g} s"
    for line in stdout.splitlines():
        with contextlib.suppress(ValueError, KeyError, TypeError):
            msg = json.loads(line)
            name, size, fw = msg["item"]
            out[(name, size, fw)] = msg["facts"]
    return out, reason


def ensure(items: Iterable[Item], plugins: Sequence[str] = (),
           timeout_s: float = COUNT_TIMEOUT_S) -> dict[Item, dict[str, Any]]:
    """Facts of every item: from the cache, else counted in one child per framework."""
    cache = _read_cache()
    found: dict[Item, dict[str, Any]] = {}
    missing: dict[str, list[Item]] = {}
    keys: dict[Item, str] = {}
    for item in items:
        keys[item] = item_key(item)
        hit = cache.get(keys[item])
        if hit is not None:
            found[item] = hit
        else:
            missing.setdefault(item[2], []).append(item)
    fresh: dict[str, dict[str, Any]] = {}
    # One child per framework, side by side: each imports only its own framework.
    with ThreadPoolExecutor(max_workers=max(1, len(missing))) as pool:
        counted = list(pool.map(lambda kv: _count_in_child(kv[0], kv[1], plugins, timeout_s),
                                missing.items()))
    for answers in counted:
        for item, facts in answers.items():
            found[item] = facts
            if facts.get("param_count") is not None and facts.get("flop_per_sample") is not None:
                fresh[keys[item]] = {k: facts.get(k) for k in FACT_KEYS}
    _write_cache(fresh)
    return found


def list_items(names: Sequence[str]) -> list[Item]:
    """Every (workload, size, framework) of ``names`` that some framework implements."""
    items: list[Item] = []
    for name in names:
        for fw in implementation_frameworks(name):
            items += [(name, size, fw) for size in SIZES]  # type: ignore[misc]
    return items


def uncached(items: Iterable[Item]) -> list[Item]:
    """The items the cache does not hold yet (what :func:`ensure` would count)."""
    cache = _read_cache()
    return [i for i in items if item_key(i) not in cache]


def describe_workloads(names: Sequence[str], plugins: Sequence[str] = ()) -> list[dict[str, Any]]:
    """What ``accelbench list`` shows: each workload, its frameworks, and per size the facts."""
    facts = ensure(list_items(names), plugins)
    infos = []
    for name in names:
        wl = get_workload(name)
        fws = implementation_frameworks(name)
        sizes: dict[str, Any] = {}
        for size in SIZES:
            per_fw = {fw: facts[(name, size, fw)] for fw in fws}  # type: ignore[index]
            first = next(iter(per_fw.values()), {})
            sizes[size] = {
                "param_count": first.get("param_count"),
                "default_batch_sizes": list(wl.default_batch_sizes[size]),  # type: ignore[index]
                "notes": wl.size_notes(size),  # type: ignore[arg-type]
                "forward_flop_per_sample": first.get("forward_flop_per_sample"),
                "train_flop_per_sample": first.get("flop_per_sample"),
                "flop_method": first.get("flop_method"),
                "frameworks": per_fw,
            }
        infos.append({
            "name": wl.name,
            "family": wl.family,
            "sample_unit": wl.sample_unit,
            "description": wl.description,
            "loss": wl.loss_kind,
            "learning_rate": wl.learning_rate,
            "frameworks": list(fws),
            "sizes": sizes,
        })
    return infos


def count_here(name: str, size: SizeName, framework: str,
               batch_size: int | None = None) -> dict[str, Any]:
    """Count one model in this process (the framework is imported); errors become a note."""
    from accelbench.backends import get_backend
    from accelbench.workloads.registry import get_implementation

    wl = get_workload(name)
    backend = get_backend(framework)
    out: dict[str, Any] = {"param_count": None}
    impl = None
    try:
        impl = get_implementation(name, framework)
        batch = batch_size or wl.default_batch_sizes[size][0]
        fc = backend.count_flops(impl, size, batch)
    except Exception as exc:  # a model the counter cannot trace still has its throughput
        out["flop_method"] = f"not counted: {type(exc).__name__}: {exc}"[:300]
        if impl is not None:
            with contextlib.suppress(Exception):
                out["param_count"] = backend.param_count(impl, size)
        return out
    out["param_count"] = (fc.param_count if fc.param_count is not None
                          else backend.param_count(impl, size))
    out.update(forward_flop_per_sample=fc.forward_flop_per_sample,
               flop_per_sample=fc.train_flop_per_sample, flop_method=fc.method)
    return out


def main() -> int:
    """Child side: count each requested item, one JSON line per item on stdout."""
    from accelbench.workloads.registry import load_plugin

    chan = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # whatever model code prints must not corrupt the answers
    request = json.loads(sys.stdin.read())
    for origin in request.get("plugins", []):
        load_plugin(origin)
    for name, size, fw in request["items"]:
        facts = count_here(name, size, fw)
        chan.write(json.dumps({"item": [name, size, fw], "facts": facts}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
