"""A suite's plan: its name and every option that shapes its cases.

Stored when the suite starts (``suite_plans``), so that ``accelbench suite resume ID``
(or the same command with ``--suite-id ID``) runs the remaining cases exactly as planned:
the options given again must agree with it (:meth:`SuitePlan.resumed_with`), the others
are taken from it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from accelbench.backends.registry import DEFAULT_FRAMEWORK
from accelbench.errors import ConfigError
from accelbench.spec import FastPaths, MeasurementPolicy, MeterOptions, Topology

#: The option objects of a plan, by attribute name.
OPTION_OBJECTS: dict[str, type] = {
    "policy": MeasurementPolicy, "meters": MeterOptions, "topology": Topology,
    "fast_paths": FastPaths,
}
#: The plan's own choices (what ``plan_suite`` takes beside the option objects).
CHOICES = ("workloads", "precisions", "size", "device", "framework", "threads", "tag",
           "max_ranks", "data", "loader_workers")
#: Choices a plan's dict leaves out at their default, so that a suite without them stores
#: the plan an earlier accelbench stored (synthetic data: no data, no loader).
OMITTED_AT_DEFAULT = {"data": "synthetic", "loader_workers": None}
#: Topology fields a plan's dict leaves out at their default (``--parallel`` and its
#: kin): a plan without them is stored as an earlier accelbench stored it.
TOPOLOGY_OMITTED_AT_DEFAULT = {"parallel": "ddp", "tp": None, "act_ckpt": False,
                               "devices": None}
#: How one node joins a multi-node case, not what is measured: free to differ on resume.
PER_NODE = frozenset({"topology.node_rank", "topology.rdzv_endpoint"})
#: Options a resume may raise (more runs of each case: the suite is extended).
EXTENDABLE = frozenset({"policy.repeats"})
#: Longest suite id (the store's column).
MAX_SUITE_ID = 128


def check_suite_id(suite_id: str) -> str:
    """``suite_id`` if it can name a suite: not blank, at most :data:`MAX_SUITE_ID`
    characters, no control characters (it is printed in one-line messages).

    Raises:
        ConfigError: it cannot.
    """
    if not isinstance(suite_id, str) or not suite_id.strip():
        raise ConfigError("--suite-id must not be empty")
    if len(suite_id) > MAX_SUITE_ID:
        raise ConfigError(f"--suite-id must be at most {MAX_SUITE_ID} characters, got "
                          f"{len(suite_id)}")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in suite_id):
        raise ConfigError(f"--suite-id must not hold control characters, got {suite_id!r}")
    return suite_id


def canonical_name(kind: str, value: str) -> str:
    """The canonical form ``run`` stores for a name of ``kind`` (``workload``, ``size``,
    ``precision``, ``framework`` or ``device``): ``BF16`` -> ``amp_bf16``, ``CUDA`` ->
    ``cuda:0``. The one rule for plans, suites and the result filters.

    Raises:
        ConfigError: a name ``run`` would refuse, with the close matches where known.
    """
    from accelbench.backends import get_backend
    from accelbench.backends.registry import framework_names
    from accelbench.names import fold
    from accelbench.spec import check_size, normalize_framework, normalize_precision
    from accelbench.workloads.registry import get_workload

    value = fold(value)
    if kind == "workload":
        return get_workload(value).name
    if kind == "size":
        return check_size(value)
    if kind == "precision":
        return normalize_precision(value)
    if kind == "framework":
        return normalize_framework(value)
    if kind != "device":
        raise ValueError(f"no canonical form for {kind!r}")
    problems = []
    for fw in framework_names():
        try:
            return get_backend(fw).normalize_device(value)
        except ConfigError as exc:
            problems.append(str(exc))
    raise ConfigError(problems[0] if problems else f"unknown device {value!r}")


def _canonical_workloads(names: Any) -> tuple[str, ...]:
    return tuple(sorted({canonical_name("workload", w) for w in names}))


def _canonical_precisions(names: Any) -> tuple[str, ...]:
    return tuple(dict.fromkeys(canonical_name("precision", p) for p in names))


def _canonical(key: str, value: Any) -> Any:
    """``value`` of option ``key`` in the form a plan stores (registry names, canonical
    precisions and framework)."""
    if key == "workloads":
        return _canonical_workloads(value)
    if key == "precisions":
        return _canonical_precisions(value)
    if key == "framework":
        return canonical_name("framework", value)
    if key == "data" and value not in ("synthetic", "generated"):
        import os

        return os.path.abspath(os.path.expanduser(str(value)))  # a PATH: resumable anywhere
    return value


@dataclass(frozen=True, kw_only=True, slots=True)
class SuitePlan:
    """A suite's name and every option that shapes its cases (the arguments of
    :func:`accelbench.planning.suites.plan_suite`), canonical: workloads by registry
    name and sorted, precisions canonical, the framework by its registry key."""

    name: str
    workloads: tuple[str, ...] = ()
    precisions: tuple[str, ...] = ()
    size: str | None = None
    device: str = "cpu"
    framework: str = DEFAULT_FRAMEWORK
    threads: int | None = None
    tag: str = ""
    max_ranks: int | None = None
    data: str = "synthetic"
    loader_workers: int | None = None
    policy: MeasurementPolicy = field(default_factory=MeasurementPolicy)
    meters: MeterOptions = field(default_factory=MeterOptions)
    topology: Topology = field(default_factory=Topology)
    fast_paths: FastPaths = field(default_factory=FastPaths)

    @classmethod
    def fresh(cls, name: str, given: dict[str, tuple[str, Any]] | None = None) -> SuitePlan:
        """The plan of a new run of suite ``name``: its own policy and idle baseline with
        the ``given`` options (key -> (flag, value); keys as :meth:`flat` names them)."""
        from accelbench.planning.suites import get_suite

        definition = get_suite(name)
        base = cls(name=name, policy=definition.policy,
                   meters=MeterOptions(idle_s=definition.idle_s))
        return base.with_values({k: v for k, (_flag, v) in (given or {}).items()})

    def with_values(self, values: dict[str, Any]) -> SuitePlan:
        """This plan with ``values`` (flat keys) applied, canonical and validated by the
        option dataclasses themselves."""
        top: dict[str, Any] = {}
        nested: dict[str, dict[str, Any]] = {}
        for key, value in values.items():
            obj, _, name = key.partition(".")
            if name:
                nested.setdefault(obj, {})[name] = value
            elif key not in CHOICES:
                raise ConfigError(f"unknown suite option {key!r}")
            else:
                top[key] = _canonical(key, value)
        for obj, fields in nested.items():
            if obj not in OPTION_OBJECTS:
                raise ConfigError(f"unknown suite option {obj!r}")
            top[obj] = dataclasses.replace(getattr(self, obj), **fields)
        plan = dataclasses.replace(self, **top)
        plan = dataclasses.replace(plan, workloads=_canonical_workloads(plan.workloads),
                                   precisions=_canonical_precisions(plan.precisions))
        if plan.loader_workers is None and plan.reads_data():
            # Fixed in the plan, not per machine: every node (and a resume) plans the same
            # cases, keys included.
            from accelbench.spec import DEFAULT_LOADER_WORKERS, max_threads

            plan = dataclasses.replace(
                plan, loader_workers=min(max_threads(), DEFAULT_LOADER_WORKERS))
        return plan

    def reads_data(self) -> bool:
        """Whether any of the suite's cases reads a dataset (``--data``, or a suite that
        sets its cases' data itself)."""
        from accelbench.planning.suites import get_suite

        return self.data != "synthetic" or get_suite(self.name).sets_data

    def flat(self) -> dict[str, Any]:
        """Every option by one key: the choices by name, the option objects' fields as
        ``policy.max_time_s`` and so on."""
        out: dict[str, Any] = {k: getattr(self, k) for k in CHOICES}
        for obj in OPTION_OBJECTS:
            value = getattr(self, obj)
            for f in dataclasses.fields(value):
                out[f"{obj}.{f.name}"] = getattr(value, f.name)
        return out

    def keywords(self) -> dict[str, Any]:
        """The keywords of :func:`accelbench.planning.suites.plan_suite` (but the name)."""
        return {"workloads": self.workloads, "precisions": self.precisions, "size": self.size,
                "device": self.device, "framework": self.framework, "threads": self.threads,
                "tag": self.tag, "max_ranks": self.max_ranks, "data": self.data,
                "loader_workers": self.loader_workers, "policy": self.policy,
                "meters": self.meters, "topology": self.topology,
                "fast_paths": self.fast_paths}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the choices, and each option object as a dict of its fields."""
        out: dict[str, Any] = {"name": self.name}
        for k in CHOICES:
            value = getattr(self, k)
            if k in OMITTED_AT_DEFAULT and value == OMITTED_AT_DEFAULT[k]:
                continue
            out[k] = list(value) if isinstance(value, tuple) else value
        for obj in OPTION_OBJECTS:
            out[obj] = dataclasses.asdict(getattr(self, obj))
        for name, default in TOPOLOGY_OMITTED_AT_DEFAULT.items():
            if out["topology"][name] == default:  # plans without them keep their bytes
                del out["topology"][name]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SuitePlan:
        """A plan read back from :meth:`to_dict`; fields a later accelbench added and
        this one lacks are refused (ConfigError), those it lacks take their defaults.

        Raises:
            ConfigError: a malformed plan.
        """
        try:
            kwargs: dict[str, Any] = {"name": str(data["name"])}
            for k in CHOICES:
                if k in data:
                    value = data[k]
                    kwargs[k] = tuple(value) if k in ("workloads", "precisions") else value
            for obj, kind in OPTION_OBJECTS.items():
                if obj in data:
                    kwargs[obj] = kind(**dict(data[obj]))
            return cls(**kwargs)
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"the stored suite plan cannot be read: {exc}") from None

    def resumed_with(self, given: dict[str, tuple[str, Any]], suite_id: str) -> SuitePlan:
        """This (stored) plan with the options given again: each must agree with it,
        except how a node joins (:data:`PER_NODE`) and more ``--repeats``
        (:data:`EXTENDABLE`).

        Raises:
            ConfigError: a given option contradicts the plan (one line naming it).
        """
        mine = self.flat()
        changes: dict[str, Any] = {}
        for key, (flag, value) in given.items():
            now = _canonical(key, value)
            had = mine[key]
            if key in PER_NODE or (key in EXTENDABLE and now >= had):
                changes[key] = value
            elif now != had:
                raise ConfigError(
                    f"{_shown(flag, value)} contradicts the stored plan of suite "
                    f"{suite_id!r} ({_plan_value(key, had)}); leave it out to resume the "
                    "suite as planned, or start a new suite (no --suite-id)")
        return self.with_values(changes) if changes else self

    def conflicts(self, other: SuitePlan) -> list[str]:
        """Where ``other`` differs from this plan in more than :data:`PER_NODE` and
        :data:`EXTENDABLE` (raised): ``key: this -> other``."""
        if other.name != self.name:
            return [f"suite: {self.name} -> {other.name}"]
        mine, theirs = self.flat(), other.flat()
        return [f"{k}: {mine[k]!r} -> {theirs[k]!r}" for k in mine
                if k not in PER_NODE and mine[k] != theirs[k]
                and not (k in EXTENDABLE and theirs[k] >= mine[k])]


def _shown(flag: str, value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return flag
    if flag.endswith("-ms") and isinstance(value, float):
        return f"{flag} {value * 1e3:g}"  # the flag's unit, not the field's seconds
    if isinstance(value, (tuple, list)):
        return " ".join(f"{flag} {v}" for v in value) or flag
    return f"{flag} {value}"


def _plan_value(key: str, value: Any) -> str:
    name = key.split(".")[-1]
    if isinstance(value, (tuple, list)):
        return f"{name}: {', '.join(map(str, value)) or 'all'}"
    return f"{name}: {value!r}"
