"""Model facts (parameters, FLOPs per sample), counted once per workload, size and framework.

Counting builds the model, so it runs the workload's code and imports its
framework: it happens in isolated child processes (:mod:`accelbench.isolation.isolate`,
one at a time per framework, each model within a timeout), never in the CLI process. Answers are
cached in the user cache directory, in a file keyed by accelbench's version;
a plugin's entries also carry a fingerprint of its source file, so editing
the plugin recounts. A warm ``accelbench list`` reads only that file. The built-in
models' facts also ship with the package (:mod:`accelbench.planning.shipped`), so a cold
``list`` counts only what is neither cached nor shipped (plugins, edited models).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import math
import os
import tempfile
import warnings
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from accelbench.cachedir import cache_dir
from accelbench.errors import AccelbenchWarning, ConfigError
from accelbench.planning import shipped
from accelbench.spec import MAX_SECONDS, SizeName
from accelbench.version import __version__
from accelbench.workloads.registry import (
    get_workload,
    implementation_frameworks,
    workload_origin,
)

ENV_COUNT_TIMEOUT = "ACCELBENCH_COUNT_TIMEOUT_S"
#: Seconds one model may take to count (building it and tracing a training step; the
#: first of a child also imports the framework).
COUNT_TIMEOUT_S = 300.0
#: The FLOP facts of a model, as a record (:class:`accelbench.result.Result`) names them.
FLOP_KEYS = ("forward_flop_per_sample", "flop_per_sample", "flop_method")
#: The keys of one entry.
FACT_KEYS = ("param_count", *FLOP_KEYS)
#: Where facts not shipped with the package come from (``list --json``'s ``facts_source``).
COUNTED_HERE = "counted on this machine (then cached)"

Item = tuple[str, SizeName, str]
"""(workload, size, framework)."""


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


def _shipped(item: Item, key: str) -> dict[str, Any] | None:
    """The shipped facts of a built-in model (never of a plugin's, whatever its name)."""
    if not key.endswith("|builtin"):
        return None
    return shipped.lookup(*item)


def lookup(name: str, size: SizeName, framework: str) -> dict[str, Any] | None:
    """Cached facts of one model (counted on this machine), or None when not counted yet.

    Not the shipped table: a case passes these to its worker, so a record's FLOPs are
    always counted where it ran (by the worker, else earlier on this machine).
    """
    return _read_cache().get(item_key((name, size, framework)))


def remember(name: str, size: SizeName, framework: str, facts: dict[str, Any]) -> None:
    """Cache facts a worker counted (only complete, successful counts are kept)."""
    entry = {k: facts.get(k) for k in FACT_KEYS}
    if entry["param_count"] is None or entry["flop_per_sample"] is None:
        return
    _write_cache({item_key((name, size, framework)): entry})


def count_timeout_s() -> float:
    """Seconds one model may take to count: ``ACCELBENCH_COUNT_TIMEOUT_S`` (unset or empty:
    the default).

    Raises:
        ConfigError: the variable is not a finite number of seconds in (0, one week].
    """
    text = os.environ.get(ENV_COUNT_TIMEOUT)
    if not text:
        return COUNT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= MAX_SECONDS):
        raise ConfigError(f"{ENV_COUNT_TIMEOUT} must be a number of seconds above 0 and at "
                          f"most {MAX_SECONDS:g}, got {text!r}")
    return value


def _count_in_child(framework: str, items: Sequence[Item], plugins: Sequence[str],
                    timeout_s: float) -> tuple[dict[Item, dict[str, Any]], list[str]]:
    """Count ``items`` (all of one framework) in isolated children; failures become notes.

    Items are counted in order, each within ``timeout_s``. A child that dies
    (segfault, ``sys.exit``), hangs or fails outside the counter takes with it the
    item it was counting and the other sizes of that workload (they run the same
    code): the rest go to a new child. Returns the facts and one warning per failure.
    """
    from accelbench.isolation.isolate import IsolatedError, stream

    out: dict[Item, dict[str, Any]] = {}
    problems: list[str] = []
    todo = list(items)
    while todo:
        try:
            for answer in stream(
                "accelbench.planning.facts:count_items", {"items": [list(i) for i in todo]},
                what=f"{framework} counter", timeout_s=timeout_s, plugins=plugins,
                warm=framework,
            ):
                name, size, fw = answer["item"]
                out[(name, size, fw)] = answer["facts"]
        except IsolatedError as exc:
            todo = [i for i in todo if i not in out]
            if not todo:  # failed after its last answer: nothing lost
                break
            culprit = todo[0]
            reason = f"not counted: {exc.detail}"[:300]
            lost = [i for i in todo if (i[0], i[2]) == (culprit[0], culprit[2])]
            for item in lost:
                out[item] = {"param_count": None, "flop_method": reason}
            problems.append(
                f"parameters and FLOPs of {culprit[0]} ({framework}) are unavailable: "
                f"counting its {culprit[1]} model: {exc.detail}"
            )
        todo = [i for i in todo if i not in out]
    return out, problems


def ensure(items: Iterable[Item], plugins: Sequence[str] = (),
           timeout_s: float | None = None, *,
           use_shipped: bool = True) -> dict[Item, dict[str, Any]]:
    """Facts of every item: from the cache, else the shipped table (unless ``use_shipped``
    is False), else counted in isolated children per framework.

    A model whose counting crashes, exits or runs past ``timeout_s`` (default
    :func:`count_timeout_s`) gets ``param_count`` None and a ``flop_method`` note, and
    one :class:`~accelbench.errors.AccelbenchWarning` per workload says so; the others
    are counted all the same.
    """
    limit_s = timeout_s if timeout_s is not None else count_timeout_s()
    cache = _read_cache()
    found: dict[Item, dict[str, Any]] = {}
    missing: dict[str, list[Item]] = {}
    keys: dict[Item, str] = {}
    for item in items:
        keys[item] = item_key(item)
        hit = cache.get(keys[item])
        if hit is None and use_shipped:
            hit = _shipped(item, keys[item])
        if hit is not None:
            found[item] = hit
        else:
            missing.setdefault(item[2], []).append(item)
    fresh: dict[str, dict[str, Any]] = {}
    # One child per framework, side by side: each imports only its own framework.
    with ThreadPoolExecutor(max_workers=max(1, len(missing))) as pool:
        counted = list(pool.map(lambda kv: _count_in_child(kv[0], kv[1], plugins, limit_s),
                                missing.items()))
    for _, problems in counted:  # warned here, in the calling thread
        for problem in problems:
            warnings.warn(problem, AccelbenchWarning, stacklevel=2)
    for answers, _ in counted:
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
        sizes = get_workload(name).sizes()  # the common sizes and the workload's own
        for fw in implementation_frameworks(name):
            items += [(name, size, fw) for size in sizes]
    return items


def uncached(items: Iterable[Item]) -> list[Item]:
    """The items neither cached nor shipped (what :func:`ensure` would count)."""
    cache = _read_cache()
    keys = {i: item_key(i) for i in items}
    return [i for i, k in keys.items() if k not in cache and _shipped(i, k) is None]


def describe_workloads(names: Sequence[str], plugins: Sequence[str] = ()) -> list[dict[str, Any]]:
    """What ``accelbench list`` shows: each workload, its frameworks, and per size the facts."""
    facts = ensure(list_items(names), plugins)
    infos = []
    for name in names:
        wl = get_workload(name)
        fws = implementation_frameworks(name)
        sizes: dict[str, Any] = {}
        for size in wl.sizes():
            per_fw = {fw: facts[(name, size, fw)] for fw in fws}
            first = next(iter(per_fw.values()), {})
            sizes[size] = {
                "param_count": first.get("param_count"),
                "default_batch_sizes": list(wl.default_batch_sizes[size]),
                "notes": wl.size_notes(size),
                "forward_flop_per_sample": first.get("forward_flop_per_sample"),
                "train_flop_per_sample": first.get("flop_per_sample"),
                "flop_method": first.get("flop_method"),
                "facts_source": first.get("source") or COUNTED_HERE,
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


def count_items(items: Sequence[Sequence[str]]) -> Iterator[dict[str, Any]]:
    """Child side (run by :mod:`accelbench.isolation.isolate`): count each item in turn."""
    for name, size, fw in items:
        yield {"item": [name, size, fw], "facts": count_here(name, size, fw)}
