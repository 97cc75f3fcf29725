"""The Python API's keywords: one name per option, checked at the call.

Every option of :mod:`accelbench.spec` (and :class:`~accelbench.sinks.SinkOptions`) is a
keyword of :func:`accelbench.run` under ONE name: its flag's without dashes
(``--max-time`` is ``max_time``, in the flag's unit), or for a ``--no-...`` switch the
positive name (``--no-energy`` is ``energy=False``). The option objects themselves are
keywords too (``policy=MeasurementPolicy(...)``); flat keywords apply on top of them.

A keyword that is no option is refused when the function is called, before anything is
planned, opened or run, with the closest names (:func:`check_keywords`).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

from accelbench.options import FieldOption, field_options, to_field_value
from accelbench.sinks.options import SinkOptions
from accelbench.spec import (
    DeviceSettings,
    FastPaths,
    MeasurementPolicy,
    MeterOptions,
    RunChoices,
    Topology,
)

#: The option objects a case takes, by keyword, in the order they are resolved.
OBJECTS: dict[str, type] = {
    "choices": RunChoices, "policy": MeasurementPolicy, "meters": MeterOptions,
    "topology": Topology, "fast_paths": FastPaths, "settings": DeviceSettings,
    "sinks": SinkOptions,
}


def keyword_of(fo: FieldOption) -> str:
    """The one API name of option ``fo``: its flag's name (``max_time``), the positive
    name of a ``--no-`` switch (``energy``), or the field's name where it has no flag."""
    flag = fo.opt.flag
    if flag is None:
        return fo.name
    if fo.opt.negate and flag.startswith("--no-"):
        return flag[len("--no-"):].replace("-", "_")
    return flag.lstrip("-").replace("-", "_")


def keywords_of(cls: type) -> dict[str, FieldOption]:
    """API name -> option field, for dataclass ``cls``."""
    return {keyword_of(fo): fo for fo in field_options(cls)}


def check_keywords(where: str, given: Iterable[str], allowed: Collection[str]) -> None:
    """Refuse a keyword of ``where()`` that is not in ``allowed``, naming the closest.

    Raises:
        TypeError: ``run() got an unknown option 'precison' (did you mean 'precision'?)``.
    """
    for key in given:
        if key in allowed:
            continue
        # A field's own name where the API name differs (max_time_s): say the API name.
        aliases = {fo.name: name for cls in OBJECTS.values()
                   for name, fo in keywords_of(cls).items() if fo.name != name}
        close = [aliases[key]] if aliases.get(key) in allowed else \
            difflib.get_close_matches(key, sorted(allowed), n=3, cutoff=0.6)
        hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
        raise TypeError(f"{where}() got an unknown option {key!r}{hint}")


def allowed_for(objects: Collection[str], *, skip: Collection[str] = (),
                extra: Collection[str] = ()) -> set[str]:
    """Every keyword a function taking the option objects named in ``objects`` accepts:
    the objects, their options' API names (but ``skip``), and ``extra``."""
    names = set(objects) | set(extra)
    for obj in objects:
        names |= set(keywords_of(OBJECTS[obj])) - set(skip)
    return names


def apply_keywords(cls: type, base: Any, keywords: dict[str, Any]) -> Any:
    """``base`` (or ``cls()``) with the API keywords of ``cls`` popped from ``keywords``
    applied (in the flag's unit, converted once); None means "not given".

    Raises:
        TypeError: ``base`` is not a ``cls``.
        ConfigError: a value the option refuses (the dataclass's own check).
    """
    if base is not None and not isinstance(base, cls):
        raise TypeError(f"expected a {cls.__name__}, got {type(base).__name__}")
    given: dict[str, Any] = {}
    for name, fo in keywords_of(cls).items():
        value = keywords.pop(name, None)
        if value is None:
            continue
        given[fo.name] = value if fo.opt.negate else to_field_value(fo, value)
    start = base if base is not None else cls()
    return dataclasses.replace(start, **given) if given else start  # type: ignore[type-var]


@dataclass(frozen=True, slots=True)
class CaseOptions:
    """Every option object of a case, resolved once from objects and API keywords."""

    choices: RunChoices
    policy: MeasurementPolicy
    meters: MeterOptions
    topology: Topology
    fast_paths: FastPaths
    settings: DeviceSettings
    sinks: SinkOptions


def resolve(keywords: dict[str, Any], *, default_idle_s: float = 3.0,
            policy: MeasurementPolicy | None = None) -> CaseOptions:
    """The option objects of a case: each object keyword given (or its default; a
    suite's own ``policy`` and idle baseline), with the flat keywords that belong to it
    popped from ``keywords`` and applied on top."""
    objects = {name: keywords.pop(name, None) for name in OBJECTS}
    if objects["policy"] is None:
        objects["policy"] = policy
    if objects["meters"] is None:
        objects["meters"] = MeterOptions(idle_s=default_idle_s)
    return CaseOptions(**{name: apply_keywords(cls, objects[name], keywords)
                          for name, cls in OBJECTS.items()})


def plan_case(workload: str, opts: CaseOptions, *, check_hardware: bool = True) -> Any:
    """The validated :class:`~accelbench.planning.cases.Case` of ``workload`` with the
    option objects ``opts`` (nothing runs)."""
    from accelbench.planning.cases import prepare_case

    return prepare_case(
        workload, opts.choices, policy=opts.policy, meters=opts.meters,
        topology=opts.topology, fast_paths=opts.fast_paths, settings=opts.settings,
        check_hardware=check_hardware)
