"""Named suites: matrices of cases, resumable by suite id."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from accelbench.backends.registry import DEFAULT_FRAMEWORK, backend_fact, framework_names
from accelbench.errors import ConfigError
from accelbench.spec import FastPaths, MeasurementPolicy, MeterOptions, RunChoices, Topology

if TYPE_CHECKING:
    from accelbench.planning.cases import Case


class SuiteCase(NamedTuple):
    """One case of a suite, before validation. ``topology`` set here belongs to the case (a
    scaling suite's rank counts; None takes the user's). ``fast_paths`` set here replaces
    the suite's (None takes the suite's); the user's flags replace both."""

    workload: str
    size: str
    batch_size: int
    precision: str
    framework: str
    topology: Topology | None = None
    fast_paths: FastPaths | None = None
    data: str | None = None
    """The case's ``--data`` (None takes the user's; the ``data`` suite sets each case's:
    ``synthetic``, or ``generated``, which the user's ``--data`` replaces)."""


#: Kept for code written against the plain 5-tuple (SuiteCase is one).
CaseTuple = SuiteCase


@dataclass(frozen=True, slots=True)
class SuiteContext:
    """What a suite's case list depends on."""

    device: str
    frameworks: tuple[str, ...]
    """The frameworks to measure (``--framework``; every installed one for ``frameworks``)."""
    supported: Mapping[str, Sequence[str]]
    """Precisions each framework supports on the device."""
    size: str | None = None
    """``--size``, for suites whose size is a choice."""
    workloads: tuple[str, ...] = ()
    """``--workload`` names (registered spelling); empty when none was given."""
    device_count: int = 1
    """Devices of the chosen kind on this node (GPUs via the probe; 1 for a CPU)."""
    max_ranks: int | None = None
    """``--max-ranks``: the most ranks a scaling suite goes to."""


@dataclass(frozen=True, slots=True)
class SuiteDef:
    """A named suite: how to enumerate its cases and how to time them."""

    name: str
    description: str
    cases: Callable[[SuiteContext], list[CaseTuple]]
    policy: MeasurementPolicy
    idle_s: float = 3.0
    """Default idle baseline per case (where a power sensor exists)."""
    default_size: str | None = None
    """The size when the suite takes ``--size`` (None: the suite fixes its sizes)."""
    all_frameworks: bool = False
    """Measure every installed framework rather than the chosen one."""
    fast_paths: FastPaths | None = None
    """The suite's fast paths (``modern``: compile on); the user's flags replace them."""
    takes_max_ranks: bool = False
    """Whether ``--max-ranks`` shapes the suite's cases (``scaling``)."""
    sets_data: bool = False
    """Whether the suite sets its cases' ``--data`` itself (``data``)."""


def _implemented(name: str, fw: str) -> bool:
    from accelbench.workloads.registry import implementation_frameworks

    return fw in implementation_frameworks(name)


def _quick(ctx: SuiteContext) -> list[CaseTuple]:
    from accelbench.workloads.registry import list_workloads

    out: list[CaseTuple] = []
    for fw in ctx.frameworks:
        precisions = [p for p in ("fp32", "amp_bf16") if p in ctx.supported[fw]]
        out += [
            SuiteCase(wl.name, "tiny", wl.default_batch_sizes["tiny"][0], p, fw)
            for wl in list_workloads() if _implemented(wl.name, fw)
            for p in precisions
        ]
    return out


def _small(ctx: SuiteContext) -> list[CaseTuple]:
    from accelbench.workloads.registry import list_workloads

    return [
        SuiteCase(wl.name, "small", wl.default_batch_sizes["small"][0], "fp32", fw)
        for fw in ctx.frameworks
        for wl in list_workloads() if _implemented(wl.name, fw)
    ]


#: The paper's models and batch sizes (Wang et al. 2020, Table 10).
PAPER_MATRIX: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("resnet50", (64, 128)),
    ("vgg16", (64, 128)),
    ("inception_v3", (64, 128)),
    ("lstm", (64, 128, 256)),
    ("deepspeech2", (8, 16, 32)),
    ("transformer", (1024, 2048, 4096)),
)


def _paper(ctx: SuiteContext) -> list[CaseTuple]:
    out: list[CaseTuple] = []
    for fw in ctx.frameworks:
        # The paper ran fp32 everywhere and mixed precision (fp16 tensor cores) on the V100.
        precisions = ["fp32"]
        if ctx.device.startswith("cuda") and "amp_fp16" in ctx.supported[fw]:
            precisions.append("amp_fp16")
        out += [
            SuiteCase(name, "paper", bs, p, fw)
            for name, sizes in PAPER_MATRIX for p in precisions for bs in sizes
            if _implemented(name, fw)
        ]
    return out


def _frameworks(ctx: SuiteContext) -> list[CaseTuple]:
    """Every workload that all the frameworks implement, in each of them, side by side."""
    from accelbench.workloads.registry import list_workloads

    size = ctx.size or "tiny"
    common = [p for p in ("fp32", "amp_bf16")
              if all(p in ctx.supported[fw] for fw in ctx.frameworks)]
    return [
        SuiteCase(wl.name, size, wl.default_batch_sizes[size][0], p, fw)
        for wl in list_workloads()
        # A workload's own size (llm's gpt2) takes only the workloads that have it.
        if size in wl.sizes() and all(_implemented(wl.name, fw) for fw in ctx.frameworks)
        for p in common
        for fw in ctx.frameworks
    ]


#: Ranks the scaling suite goes to on a CPU when --max-ranks is not given: the ranks
#: share the host's cores, so more than two says little on a small machine.
CPU_SCALING_RANKS = 2


def scaling_ranks(ctx: SuiteContext) -> list[int]:
    """1, 2, 4, ... up to the devices present (a CPU: :data:`CPU_SCALING_RANKS`), or up
    to ``--max-ranks``; the largest count itself is included when not a power of two."""
    top = ctx.max_ranks
    if top is None:
        top = CPU_SCALING_RANKS if ctx.device.startswith("cpu") else ctx.device_count
    out, n = [], 1
    while n < top:
        out.append(n)
        n *= 2
    out.append(top)
    return out


def _scaling(ctx: SuiteContext) -> list[CaseTuple]:
    """One workload at 1, 2, 4, ... ranks on this node, the same per-rank batch each
    (weak scaling); the report's scaling section compares them."""
    from accelbench.workloads.registry import get_workload

    if len(ctx.workloads) != 1:
        raise ConfigError(
            "suite 'scaling' measures one workload: give exactly one --workload "
            f"(got {len(ctx.workloads)})"
        )
    wl = get_workload(ctx.workloads[0])
    size = ctx.size or "tiny"
    sizes = wl.default_batch_sizes.get(size)
    if not sizes:
        raise ConfigError(f"workload {wl.name!r} has no size {size!r}")
    out: list[CaseTuple] = []
    for fw in ctx.frameworks:
        if not _implemented(wl.name, fw):
            raise ConfigError(f"workload {wl.name!r} has no {fw} implementation")
        out += [SuiteCase(wl.name, size, sizes[0], "fp32", fw,
                          topology=Topology(nproc_per_node=n))
                for n in scaling_ranks(ctx)]
    return out


#: Workloads the ``sharding`` suite runs tensor parallel (the torch backend's TP plans).
SHARDING_TP = ("llm", "bert", "vit")


def _sharding(ctx: SuiteContext) -> list[CaseTuple]:
    """One workload (default llm) on one rank, then at each rank count of the scaling
    suite in every ``--parallel`` mode: ddp, fsdp, tp (llm, bert, vit, where the ranks divide
    the heads; torch replicates key/value heads fewer than the ranks) and, from 4 ranks,
    fsdp+tp with 2 ranks per tensor-parallel group. The same per-replica batch each."""
    from accelbench.workloads.registry import get_workload

    if len(ctx.workloads) > 1:
        raise ConfigError("suite 'sharding' measures one workload: give at most one "
                          f"--workload (got {len(ctx.workloads)})")
    wl = get_workload(ctx.workloads[0] if ctx.workloads else "llm")
    size = ctx.size or "tiny"
    sizes = wl.default_batch_sizes.get(size)
    if not sizes:
        raise ConfigError(f"workload {wl.name!r} has no size {size!r}")
    cfg = wl.config(size) if callable(getattr(wl, "config", None)) else None
    widths = [int(getattr(cfg, n)) for n in ("heads", "ffn", "mlp")
              if isinstance(getattr(cfg, n, None), int)]
    kv = getattr(cfg, "kv_heads", None)

    def divides(tp: int, fw: str) -> bool:
        """A TP degree must split the heads; key/value heads too, unless the framework
        replicates them over a degree that is a multiple of them (llm tiny's 2 at 4)."""
        kv_ok = not isinstance(kv, int) or kv % tp == 0 or (
            tp % kv == 0 and backend_fact(fw, "tp_replicates_kv_heads", False))
        return wl.name in SHARDING_TP and kv_ok and all(w % tp == 0 for w in widths)

    out: list[CaseTuple] = []
    for fw in ctx.frameworks:
        if not backend_fact(fw, "shards", False):
            which = [f for f in framework_names() if backend_fact(f, "shards", False)]
            raise ConfigError(f"suite 'sharding': framework {fw} has no sharded training yet "
                              f"(--parallel); use --framework {' or '.join(which)}")
        out.append(SuiteCase(wl.name, size, sizes[0], "fp32", fw))
        for n in (r for r in scaling_ranks(ctx) if r > 1):
            modes: list[tuple[str, int | None]] = [("ddp", None), ("fsdp", None)]
            if divides(n, fw):
                modes.append(("tp", None))
            if n >= 4 and n % 2 == 0 and divides(2, fw):
                modes.append(("fsdp+tp", 2))
            out += [SuiteCase(wl.name, size, sizes[0], "fp32", fw, topology=Topology(
                nproc_per_node=n, parallel=mode, tp=tp)) for mode, tp in modes]  # type: ignore[arg-type]
    return out


#: The ``modern`` suite's batch sizes at reference size, sized for an H200 (141 GB) in bf16
#: with torch.compile: each workload's smallest first and its largest last, which may not
#: fit (an OOM is recorded as ``oom`` and the suite goes on). llm counts tokens (multiples
#: of its 2048-token sequence; at 65536 tokens the 1.1B model's activations and fp32 logits
#: exceed 141 GB); bert counts sequences of 128 tokens; vit counts 224 x 224 images.
MODERN_BATCHES: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("llm", (8192, 16384, 32768, 65536)),
    ("bert", (64, 128, 256, 512)),
    ("vit", (64, 128, 256, 512)),
)


def _modern(ctx: SuiteContext) -> list[CaseTuple]:
    """The transformers trained today at --size (default ``paper``) in bf16 autocast (fp32
    where the device has no bf16). Round-robin over workloads by batch size, so that a
    time-capped run measures every workload at its smallest batch before any larger one.
    JAX cases carry no fast path: JAX always compiles, and its optimizer and layouts are
    XLA's."""
    from accelbench.backends import get_backend
    from accelbench.workloads.registry import list_workloads

    size = ctx.size or "paper"
    # Skipped until registered: the suite exists before its workloads do.
    registered = {wl.name: wl for wl in list_workloads()}
    out: list[CaseTuple] = []
    for fw in ctx.frameworks:
        precision = "amp_bf16" if "amp_bf16" in ctx.supported[fw] else "fp32"
        fast = None if get_backend(fw).has_fast_paths else FastPaths()  # backend decides
        lists = [
            (name, batches if size == "paper"
             else registered[name].default_batch_sizes.get(size, ()))
            for name, batches in MODERN_BATCHES
            if name in registered and _implemented(name, fw)
        ]
        for i in range(max((len(b) for _, b in lists), default=0)):
            out += [SuiteCase(name, size, b[i], precision, fw, fast_paths=fast)
                    for name, b in lists if i < len(b)]
    return out


def reads_data(workload: object, size: str) -> bool:
    """Whether ``workload`` can train on a dataset at ``size``: an on-disk layout, or a
    plugin's own dataset."""
    from accelbench.data.layouts import layout_of

    if callable(getattr(workload, "make_dataset", None)):
        return True
    try:
        layout_of(workload, size)
    except ConfigError:
        return False
    return True


def _data(ctx: SuiteContext) -> list[CaseTuple]:
    """Each workload that can read a dataset at --size (default tiny), fp32, with
    synthetic and with generated data (the user's --data in its place), side by side."""
    from accelbench.data.layouts import GENERATED, SYNTHETIC
    from accelbench.workloads.registry import list_workloads

    size = ctx.size or "tiny"
    return [
        SuiteCase(wl.name, size, wl.default_batch_sizes[size][0], "fp32", fw, data=data)
        for fw in ctx.frameworks
        for wl in list_workloads()
        if size in wl.sizes() and _implemented(wl.name, fw) and reads_data(wl, size)
        for data in (SYNTHETIC, GENERATED)
    ]


#: The measurement of a case at several ranks (the scaling and sharding suites): up to 5 s
#: of steps, a 900 s timeout for the launch.
RANKS_POLICY = MeasurementPolicy(
    warmup_min=3, warmup_max=20, warmup_max_time_s=5.0, target_ci=0.05,
    min_iterations=10, max_time_s=5.0, timeout_s=900.0,
)

SUITES: dict[str, SuiteDef] = {
    "quick": SuiteDef(
        "quick",
        "every workload at tiny size, fp32 and bf16 where supported, about 2 s of "
        "measurement per case",
        _quick,
        # At least 2 s measured (tiny steps take well under a millisecond: 10 iterations
        # were 0.02-0.4 s), then the 5% CI target, at most 3 s unless the minimum of 10
        # iterations needs more.
        MeasurementPolicy(
            warmup_min=3, warmup_max=20, warmup_max_time_s=5.0, target_ci=0.05,
            min_iterations=10, min_time_s=2.0, max_time_s=3.0, max_iterations=1_000_000,
            timeout_s=300.0,
        ),
        idle_s=1.0,
    ),
    "small": SuiteDef(
        "small",
        "every workload at small size, fp32",
        _small,
        MeasurementPolicy(max_time_s=20.0, target_ci=0.03, timeout_s=900.0),
    ),
    "paper": SuiteDef(
        "paper",
        "the paper's models, batch sizes and precisions (fp32; plus amp_fp16 on GPUs)",
        _paper,
        # Three runs per case: the paper's results are compared across machines, and one
        # run's CI says nothing about the next worker's (issue 15).
        MeasurementPolicy(max_time_s=60.0, target_ci=0.02, timeout_s=1800.0, repeats=3),
    ),
    "frameworks": SuiteDef(
        "frameworks",
        "every workload in every installed framework (torch, jax) at --size (default tiny), "
        "fp32 and bf16 where all support it",
        _frameworks,
        MeasurementPolicy(
            warmup_min=3, warmup_max=20, warmup_max_time_s=5.0, target_ci=0.05,
            min_iterations=10, max_time_s=2.0, timeout_s=600.0, repeats=3,
        ),
        idle_s=1.0,
        default_size="tiny",
        all_frameworks=True,
    ),
    "scaling": SuiteDef(
        "scaling",
        "one --workload at 1, 2, 4, ... ranks up to the devices present (a CPU: 2, or "
        "--max-ranks), the same per-rank batch; at --size (default tiny)",
        _scaling,
        RANKS_POLICY,
        idle_s=1.0,
        default_size="tiny",
        takes_max_ranks=True,
    ),
    "sharding": SuiteDef(
        "sharding",
        "one --workload (default llm) on one rank, then at 2, 4, ... ranks (a CPU: 2, or "
        "--max-ranks) in each --parallel mode: ddp, fsdp, tp, and fsdp+tp from 4 ranks; "
        "torch; at --size (default tiny)",
        _sharding,
        RANKS_POLICY,
        idle_s=1.0,
        default_size="tiny",
        takes_max_ranks=True,
    ),
    "modern": SuiteDef(
        "modern",
        "llm, bert, vit at --size (default paper) in amp_bf16 (fp32 where the device has "
        "no bf16) with --compile, several batch sizes each, largest last (an OOM is "
        "recorded and the suite goes on)",
        _modern,
        MeasurementPolicy(max_time_s=10.0, target_ci=0.02, timeout_s=1800.0),
        idle_s=2.0,
        default_size="paper",
        fast_paths=FastPaths(compile=True),
    ),
    "data": SuiteDef(
        "data",
        "each workload that reads a dataset at --size (default tiny), fp32, with synthetic "
        "and with generated data (or --data PATH) side by side: the input pipeline's cost",
        _data,
        MeasurementPolicy(
            warmup_min=3, warmup_max=20, warmup_max_time_s=5.0, target_ci=0.05,
            min_iterations=10, min_time_s=2.0, max_time_s=5.0, timeout_s=600.0,
        ),
        idle_s=1.0,
        default_size="tiny",
        sets_data=True,
    ),
}


def get_suite(name: str) -> SuiteDef:
    """The suite called ``name``.

    Raises:
        ConfigError: unknown suite.
    """
    try:
        return SUITES[name]
    except KeyError:
        raise ConfigError(
            f"unknown suite {name!r}; choose one of {', '.join(SUITES)}"
        ) from None


def plan_suite(  # noqa: PLR0913
    name: str,
    *,
    device: str = "cpu",
    framework: str = DEFAULT_FRAMEWORK,
    size: str | None = None,
    precisions: Sequence[str] = (),
    workloads: Sequence[str] = (),
    threads: int | None = None,
    tag: str = "",
    policy: MeasurementPolicy | None = None,
    meters: MeterOptions | None = None,
    topology: Topology | None = None,
    fast_paths: FastPaths | None = None,
    max_ranks: int | None = None,
    data: str = "synthetic",
    loader_workers: int | None = None,
) -> list[Case]:
    """The validated cases of suite ``name`` on ``device`` (nothing runs).

    ``max_ranks`` caps the rank counts of the ``scaling`` suite (default: the devices of
    the chosen kind, 2 on a CPU). ``data`` (``generated`` or a PATH) is what every case
    reads, with ``loader_workers``; the ``data`` suite's own cases read synthetic data and
    ``data`` (default: generated) side by side.

    Raises:
        ConfigError: unknown names, or ``size`` for a suite whose sizes are fixed.
        UnsupportedError: the framework or the device is not available.
    """
    from accelbench.backends import get_backend
    from accelbench.backends.registry import framework_names
    from accelbench.errors import UnsupportedError
    from accelbench.isolation.ask import check_device, probe, supported_precisions
    from accelbench.planning.cases import prepare_case
    from accelbench.spec import check_size, normalize_framework, normalize_precision
    from accelbench.workloads.registry import get_workload

    definition = get_suite(name)
    if size is not None and definition.default_size is None:
        takes = [n for n, d in SUITES.items() if d.default_size is not None]
        raise ConfigError(
            f"suite {name!r} fixes its sizes; --size applies to: {', '.join(takes)}"
        )
    size_name = check_size(size) if size is not None else definition.default_size
    if definition.all_frameworks:
        frameworks = tuple(fw for fw in framework_names() if probe(fw).error is None)
        if len(frameworks) < 2:
            missing = [probe(fw).error for fw in framework_names() if probe(fw).error]
            raise UnsupportedError(
                f"suite {name!r} compares frameworks but only {', '.join(frameworks) or 'none'} "
                f"can run here: {'; '.join(str(m) for m in missing)}"
            )
    else:
        frameworks = (normalize_framework(framework),)
    dev = get_backend(frameworks[0]).normalize_device(device)
    for fw in frameworks:
        check_device(fw, dev)
    if max_ranks is not None and not definition.takes_max_ranks:
        takes = [n for n, d in SUITES.items() if d.takes_max_ranks]
        raise ConfigError(f"--max-ranks applies to the {' and '.join(takes)} "
                          f"suite{'s' if len(takes) > 1 else ''} only, not {name!r}")
    if max_ranks is not None and (isinstance(max_ranks, bool) or not isinstance(max_ranks, int)
                                  or max_ranks < 1):
        raise ConfigError(f"--max-ranks must be a positive integer, got {max_ranks!r}")
    names = {get_workload(w).name for w in workloads}
    kind = dev.split(":")[0]
    ctx = SuiteContext(
        device=dev, frameworks=frameworks, size=size_name,
        supported={fw: supported_precisions(fw, dev) for fw in frameworks},
        workloads=tuple(sorted(names)), max_ranks=max_ranks,
        device_count=max(1, sum(d.device.split(":")[0] == kind
                                for d in probe(frameworks[0]).devices)),
    )
    wanted = [normalize_precision(p) for p in precisions]
    tuples = definition.cases(ctx)
    if wanted:
        # The user's precisions replace the suite's own, for every case shape it has.
        shapes = list(dict.fromkeys(t._replace(precision="") for t in tuples))
        tuples = [t._replace(precision=p) for t in shapes for p in wanted]
    if names:
        tuples = [t for t in tuples if t.workload in names]
    datas = [_case_data(t, data) for t in tuples]
    if loader_workers is not None and all(d == "synthetic" for d in datas):
        raise ConfigError("--loader-workers needs --data generated or a PATH (synthetic data "
                          "has no loader)")
    pol = policy or definition.policy
    met = meters or MeterOptions(idle_s=definition.idle_s)
    # The user's fast paths replace the suite's and a case's own (a JAX case then refuses
    # them, in one line, rather than dropping them silently).
    user_fast = fast_paths if fast_paths is not None and fast_paths.enabled() else None
    return [
        prepare_case(t.workload,
                     RunChoices(size=t.size, batch_size=t.batch_size, precision=t.precision,
                                device=dev, framework=t.framework, threads=threads, tag=tag,
                                data=d,
                                loader_workers=loader_workers if d != "synthetic" else None),
                     policy=pol, meters=met, topology=t.topology or topology,
                     fast_paths=user_fast or t.fast_paths or definition.fast_paths)
        for t, d in zip(tuples, datas, strict=True)
    ]


def _case_data(case: SuiteCase, data: str) -> str:
    """What ``case`` reads: the user's ``data`` unless the suite set the case's own (the
    ``data`` suite's synthetic side stays synthetic; its generated side takes a PATH)."""
    if case.data is None or (case.data == "generated" and data != "synthetic"):
        return data
    return case.data
