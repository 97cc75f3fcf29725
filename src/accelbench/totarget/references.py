"""Reference runs of the default recipes, shipped with the package (``references.json``,
written by ``benchmarks/totarget_references.py``): the samples-to-target of seeds no user
run starts from, against which a set of runs is checked the way MLPerf checks submissions
against its reference convergence points (:func:`accelbench.totarget.score.rcp_check`).

A check is made only where it means something: the recipe is the default one, unchanged,
and the evaluations come every as many samples as the references' did (samples-to-target is
counted in evaluations).

The default framework's references are keyed ``WORKLOAD/SIZE``, another framework's
``WORKLOAD/SIZE@FRAMEWORK``. A run is checked against its own framework's references where
they are shipped, else against the default framework's: MLPerf's reference convergence
points are one set per benchmark, whatever framework a submission uses.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from accelbench.frameworks import DEFAULT_FRAMEWORK
from accelbench.totarget.recipes import RECIPES, Recipe


@dataclass(frozen=True, kw_only=True, slots=True)
class Reference:
    """The reference runs of one default recipe."""

    samples_to_target: tuple[int, ...]
    eval_every: int
    seeds: str
    measured: str
    """When, where and how (date, machine, load, feed, command)."""
    framework: str = DEFAULT_FRAMEWORK
    """The framework the reference runs trained with."""
    feed: str = "memory"
    """How they read their data: ``files`` (from disk, as ``train`` does) or ``memory``
    (drawn in memory: the first references, shipped before training read files)."""


def reference_key(workload: str, size: str, framework: str = DEFAULT_FRAMEWORK) -> str:
    """The key of a recipe's reference runs in ``references.json``."""
    key = f"{workload}/{size}"
    return key if framework == DEFAULT_FRAMEWORK else f"{key}@{framework}"


@cache
def _shipped() -> dict[str, Any]:
    text = resources.files("accelbench.totarget").joinpath("references.json").read_text()
    data = json.loads(text)
    return data if isinstance(data, dict) else {}


def reference_for(recipe: Recipe, *, eval_every: int, target: float,
                  framework: str = DEFAULT_FRAMEWORK) -> tuple[Reference | None, str]:
    """The references a run of ``recipe`` in ``framework`` is checked against (its own
    framework's where shipped, else the default framework's), or None and why there are
    none."""
    key = reference_key(recipe.workload, recipe.size)
    shipped = _shipped()
    entry = shipped.get(reference_key(recipe.workload, recipe.size, framework),
                        shipped.get(key))
    if entry is None:
        return None, f"no reference runs shipped for {key}"
    if RECIPES.get((recipe.workload, recipe.size)) != recipe:
        return None, ("the recipe was changed (--lr/--batch-size/--data): the references "
                      "do not apply")
    if target != recipe.auto_target():
        return None, "the target is not the recipe's (--target auto)"
    if int(entry["eval_every"]) != eval_every:
        return None, (f"the references evaluated every {entry['eval_every']} samples, "
                      f"this run every {eval_every}")
    return Reference(samples_to_target=tuple(int(v) for v in entry["samples_to_target"]),
                     eval_every=int(entry["eval_every"]), seeds=str(entry["seeds"]),
                     measured=str(entry["measured"]),
                     framework=str(entry.get("framework", DEFAULT_FRAMEWORK)),
                     feed=str(entry.get("feed", "memory"))), ""
