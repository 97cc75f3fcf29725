"""Model facts shipped with the package, so a cold ``accelbench list`` counts nothing.

``shipped_facts.json`` (beside this module) holds the parameters and FLOPs of every
built-in workload x size x framework, counted for real (the same isolated counters as
:mod:`accelbench.planning.facts`) by ``scripts/generate_shipped_facts.py``. Each entry
carries the fingerprint of its framework's model definitions: every source file that
shapes a model or its count (the workloads, and the framework's models, model base and
FLOP counter: its backend's ``model_sources``). An entry whose fingerprint differs from
the installed sources is not used (the model is counted, as before);
``tests/test_shipped_counts.py`` checks that the table covers every built-in model with
current fingerprints and that each count equals a real one. Reading the table imports no framework.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

from accelbench.backends.registry import backend_fact

#: The table, beside this module (package data).
SHIPPED_PATH = Path(__file__).with_name("shipped_facts.json")
#: Where an entry of the table came from, as ``list --json`` says it.
SOURCE = "shipped table, counted by {method} ({versions}), checked against a real count in tests"
#: Sources (relative to the package) that define the models of every framework and their
#: count; each framework's own are its backend's ``model_sources``.
_PACKAGE = Path(__file__).resolve().parents[1]
_SHARED = ("workloads/*.py", "opbench/formulas.py")


@functools.cache
def fingerprint(framework: str) -> str | None:
    """Digest of the sources behind ``framework``'s built-in models (None: not a shipped one)."""
    patterns: tuple[str, ...] = backend_fact(framework, "model_sources", ())
    if not patterns:
        return None
    digest = hashlib.sha256()
    for pattern in (*_SHARED, *patterns):
        for path in sorted(_PACKAGE.glob(pattern)):
            digest.update(str(path.relative_to(_PACKAGE)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def key(name: str, size: str, framework: str) -> str:
    """Key of one model in the table."""
    return f"{name}|{size}|{framework}"


@functools.lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    try:
        data = json.loads(SHIPPED_PATH.read_text())
    except (OSError, ValueError):
        return {}  # no table (or a damaged one): everything is counted
    return data if isinstance(data, dict) else {}


def table() -> dict[str, Any]:
    """The whole table: ``{"versions": {...}, "fingerprints": {...}, "facts": {key: entry}}``."""
    return _table()


def reload() -> None:
    """Forget the table read so far (after :data:`SHIPPED_PATH` changed)."""
    _table.cache_clear()


def lookup(name: str, size: str, framework: str) -> dict[str, Any] | None:
    """The shipped facts of one built-in model, or None (not shipped, or its sources changed)."""
    data = _table()
    entry = data.get("facts", {}).get(key(name, size, framework))
    if not isinstance(entry, dict):
        return None
    current = fingerprint(framework)
    if current is None or data.get("fingerprints", {}).get(framework) != current:
        return None
    versions = data.get("versions", {}).get(framework, "?")
    return {**entry, "source": SOURCE.format(method=entry.get("flop_method"),
                                             versions=f"{framework} {versions}")}


def build(facts: dict[tuple[str, str, str], dict[str, Any]], keys: tuple[str, ...],
          versions: dict[str, str]) -> dict[str, Any]:
    """The table for ``facts`` (complete counts only), with the current fingerprints."""
    frameworks = sorted({fw for _, _, fw in facts})
    return {
        "versions": {fw: versions.get(fw, "?") for fw in frameworks},
        "fingerprints": {fw: fingerprint(fw) for fw in frameworks},
        "facts": {key(*item): {k: entry.get(k) for k in keys}
                  for item, entry in sorted(facts.items())
                  if entry.get("param_count") is not None
                  and entry.get("flop_per_sample") is not None},
    }
