"""Selection: which results each side of ``accelbench compare A B`` holds.

Selector syntax is in :mod:`accelbench.report.compare`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from accelbench.errors import ConfigError
from accelbench.result import Result
from accelbench.spec import normalize_framework, normalize_precision
from accelbench.store import ResultFilter, Store
from accelbench.store.brief_groups import spec_counts
from accelbench.store.briefs import ResultBrief, brief_of, iter_briefs, load

SELECTOR_KEYS = {
    "device": "device",
    "precision": "precision",
    "framework": "framework",
    "workload": "workload",
    "size": "size",
    "suite": "suite_id",
    "suite_id": "suite_id",
    "tag": "tag",
    "id": "id",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class Selector:
    """A parsed selector."""

    text: str
    kind: Literal["filter", "suite", "id", "word"]
    pairs: tuple[tuple[str, str], ...] = ()
    """(ResultFilter field, value) pairs of a ``filter`` selector."""
    value: str = ""
    """The suite id, id prefix or bare word of the other kinds."""


def parse_selector(text: str) -> Selector:
    """Parse the selector syntax in the module docstring.

    Raises:
        ConfigError: empty selector, unknown key, or a pair without a value.
    """
    text = text.strip()
    if not text:
        raise ConfigError("empty selector; use e.g. device=cuda:0, suite:ID or a result id")
    for prefix, kind in (("suite:", "suite"), ("id:", "id")):
        if text.startswith(prefix) and "=" not in text:
            value = text[len(prefix):]
            if not value:
                raise ConfigError(f"selector {text!r} lacks a value after {prefix!r}")
            return Selector(text=text, kind=kind, value=value)  # type: ignore[arg-type]
    if "=" not in text:
        return Selector(text=text, kind="word", value=text)
    pairs = []
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not value:
            raise ConfigError(f"selector part {part!r} must look like KEY=VALUE")
        if key not in SELECTOR_KEYS:
            raise ConfigError(
                f"unknown selector key {key!r}; use one of {', '.join(sorted(SELECTOR_KEYS))}"
            )
        name = SELECTOR_KEYS[key]
        if name == "precision":
            value = normalize_precision(value)
        elif name == "framework":
            value = normalize_framework(value)
        pairs.append((name, value))
    return Selector(text=text, kind="filter", pairs=tuple(pairs))


def select(store: Store, selector: Selector, base: ResultFilter | None = None) -> list[Result]:
    """The results ``selector`` picks (restricted by ``base``), newest first; each decoded
    whole (a comparison decodes only the ones it pairs: :func:`select_briefs`).

    Raises:
        ConfigError: nothing matches, or an id prefix is ambiguous.
    """
    return load(store, select_briefs(store, selector, base))


def select_briefs(store: Store, selector: Selector,
                  base: ResultFilter | None = None) -> list[ResultBrief]:
    """:func:`select` as briefs (:mod:`accelbench.store.briefs`): what pairing reads of
    each result, a few hundred bytes each, read in batches.

    Raises:
        ConfigError: nothing matches, or an id prefix is ambiguous.
    """
    base = base or ResultFilter()
    if selector.kind == "word":
        in_suite = list(iter_briefs(store, merge_filter(base, {"suite_id": selector.value})))
        if in_suite:
            return in_suite
        ids = store.ids_with_prefix(selector.value)
        if not ids:
            raise ConfigError(
                f"{selector.text!r} is neither a suite id nor a result id in {store.where}; "
                "selectors look like device=cuda:0, suite:ID or id:PREFIX"
            )
        return _by_id(store, selector, ids, base)
    if selector.kind == "suite":
        found = list(iter_briefs(store, merge_filter(base, {"suite_id": selector.value})))
        if not found:
            raise ConfigError(f"no results of suite {selector.value!r} match in {store.where}")
        return found
    if selector.kind == "id":
        return _by_id(store, selector, store.ids_with_prefix(selector.value), base)
    fields = dict(selector.pairs)
    rid = fields.pop("id", None)
    found = list(iter_briefs(store, merge_filter(base, fields)))
    if rid is not None:
        found = [r for r in found if r.id.startswith(rid)]
    if not found:
        raise ConfigError(f"no results match {selector.text!r} in {store.where}")
    return found


def select_filter(store: Store, selector: Selector, base: ResultFilter | None = None
                  ) -> tuple[ResultFilter, list[tuple[Any, Any, int]]] | None:
    """:func:`select_briefs`' selection as a filter and its distinct specs
    (:func:`accelbench.store.brief_groups.spec_counts`), for reading it a case at a time;
    None where it is not a filter (an id) or not served so (not SQLite, a record that is
    not JSON: :func:`select_briefs` reads it and says what is wrong).

    Raises:
        ConfigError: nothing matches (as :func:`select_briefs`).
    """
    base = base or ResultFilter()
    if store.dialect != "sqlite" or selector.kind == "id":
        return None
    if selector.kind in ("word", "suite"):
        flt = merge_filter(base, {"suite_id": selector.value})
    else:
        fields = dict(selector.pairs)
        if "id" in fields:
            return None
        flt = merge_filter(base, fields)
    counts = spec_counts(store, flt)
    if any(text is None for text, _, _ in counts):
        return None
    if not any(n for _, _, n in counts):
        if selector.kind == "word":
            return None
        if selector.kind == "suite":
            raise ConfigError(f"no results of suite {selector.value!r} match in {store.where}")
        raise ConfigError(f"no results match {selector.text!r} in {store.where}")
    return flt, counts


def merge_filter(base: ResultFilter, fields: dict[str, str]) -> ResultFilter:
    for name, value in fields.items():
        current = getattr(base, name)
        if current is not None and current != value:
            raise ConfigError(f"selector sets {name}={value} but the filters say {current}")
    return dataclasses.replace(base, **fields)  # type: ignore[arg-type]


def _by_id(store: Store, selector: Selector, ids: list[str],
           base: ResultFilter) -> list[ResultBrief]:
    if not ids:
        raise ConfigError(f"no result id starts with {selector.value!r} in {store.where}")
    if len(ids) > 1:
        raise ConfigError(
            f"result-id prefix {selector.value!r} is ambiguous ({', '.join(ids[:2])}, ...); "
            "type more characters"
        )
    result = store.get(ids[0])
    if result is None:  # pragma: no cover - deleted between the two reads
        raise ConfigError(f"result {ids[0]} vanished from {store.where}")
    return [brief_of(result, ids[0])]
