"""Regenerate ``src/accelbench/planning/shipped_facts.json``: the parameters and FLOPs of
every built-in workload x size x framework, counted for real in isolated children (the
counters ``accelbench list`` would otherwise run on a user's cold cache).

Run it after editing a workload, a model or a FLOP counter (``tests/test_shipped_counts.py``
fails until you do). Takes about a minute on a 2-core CPU.

    python scripts/generate_shipped_facts.py
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from importlib import metadata

from accelbench.cachedir import ENV_CACHE_DIR
from accelbench.planning import facts, shipped


def builtin_facts() -> dict[facts.Item, dict[str, object]]:
    """Every built-in model counted now, ignoring the cache and the shipped table."""
    from accelbench.workloads.registry import list_workloads, workload_origin

    names = [w.name for w in list_workloads() if workload_origin(w.name).startswith("accelbench.")]
    with tempfile.TemporaryDirectory() as cache:
        old = os.environ.get(ENV_CACHE_DIR)
        os.environ[ENV_CACHE_DIR] = cache
        try:
            return facts.ensure(facts.list_items(names), use_shipped=False)
        finally:
            if old is None:
                del os.environ[ENV_CACHE_DIR]
            else:
                os.environ[ENV_CACHE_DIR] = old


def versions() -> dict[str, str]:
    """The installed version of each framework's package (its backend's ``package``)."""
    from accelbench.backends import framework_names, get_backend

    out = {}
    for fw in framework_names():
        try:
            out[fw] = metadata.version(get_backend(fw).package)
        except metadata.PackageNotFoundError:
            out[fw] = "?"
    return out


def main() -> int:
    counted = builtin_facts()
    missing = sorted(i for i, e in counted.items()
                     if e.get("param_count") is None or e.get("flop_per_sample") is None)
    table = shipped.build(counted, facts.FACT_KEYS, versions())
    shipped.SHIPPED_PATH.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(f"{len(table['facts'])} models written to {shipped.SHIPPED_PATH}")
    for item in missing:
        print(f"not shipped (not counted): {item}: {counted[item].get('flop_method')}",
              file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
