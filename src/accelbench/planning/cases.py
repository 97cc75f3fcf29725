"""From user choices to a checked, runnable case.

Everything a user can get wrong is refused here, before a worker starts or
the store is touched: unknown workload, size, framework or precision, a bad
batch size, a workload the framework does not implement, a framework that is
not installed, a device this machine lacks, a precision the device cannot run.
Hardware facts come from the backend's probe (a subprocess), so this module
imports no framework.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from accelbench.names import check_tag
from accelbench.spec import (
    DeviceSettings,
    FastPaths,
    MeasurementPolicy,
    MeterOptions,
    RunChoices,
    RunSpec,
    Topology,
    check_int,
    check_size,
    max_threads,
    normalize_precision,
)
from accelbench.workloads.registry import check_implemented, get_workload


@dataclass(frozen=True, slots=True)
class Case:
    """A validated case: the spec plus what the workload says about its samples."""

    spec: RunSpec
    sample_unit: str
    samples_per_step: int


def prepare_case(
    workload: str,
    choices: RunChoices | None = None,
    *,
    policy: MeasurementPolicy | None = None,
    meters: MeterOptions | None = None,
    topology: Topology | None = None,
    fast_paths: FastPaths | None = None,
    settings: DeviceSettings | None = None,
    check_hardware: bool = True,
) -> Case:
    """Validate the choices (size, batch size, precision, device, framework, threads, tag;
    the defaults of :class:`RunChoices` when None) and build a :class:`Case`.

    Raises:
        ConfigError: bad input (unknown names, invalid numbers).
        UnsupportedError: the device or the precision on it is not available.
    """
    from accelbench.backends import get_backend
    from accelbench.errors import ConfigError
    from accelbench.isolation.ask import check_device, check_precision

    pick = choices or RunChoices()
    if pick.threads is not None:
        check_int("--threads", pick.threads, lo=1, hi=max_threads())
    check_tag(pick.tag)
    wl = get_workload(workload)
    fw = check_implemented(wl.name, pick.framework)  # canonical since its option was read
    prec = normalize_precision(pick.precision)
    dev = get_backend(fw).normalize_device(pick.device)
    size_name = wl.check_size(check_size(pick.size))  # a size this workload has
    batch_size = pick.batch_size
    if batch_size is None:
        batch_size = wl.default_batch_sizes[size_name][0]
    spec = RunSpec(
        workload=wl.name,
        size=size_name,
        batch_size=batch_size,
        precision=prec,
        device=dev,
        framework=fw,
        threads=pick.threads,
        tag=pick.tag,
        policy=policy or MeasurementPolicy(),
        meters=meters or MeterOptions(),
        topology=topology or Topology(),
        fast_paths=fast_paths or FastPaths(),
        settings=settings or DeviceSettings(),
        data=pick.data,
        input_analysis=pick.input_analysis,
    )
    wl.validate_batch_size(spec.size, spec.batch_size)
    if pick.data == "synthetic":  # the API's keywords (the CLI refuses them as it parses)
        for name, flag, given in (("input_analysis", "--input-analysis", pick.input_analysis),
                                  ("loader_workers", "--loader-workers",
                                   pick.loader_workers is not None)):
            if given:
                why = next(f.metadata["option"].applies_why
                           for f in dataclasses.fields(RunChoices) if f.name == name)
                raise ConfigError(f"{flag} {why}")
    else:
        spec = check_data(spec, wl, pick.loader_workers)
    get_backend(fw).check_fast_paths(spec.fast_paths, dev, wl)  # the backend decides
    if spec.policy.phases and not getattr(get_backend(fw), "has_phases", False):
        raise ConfigError(f"--phases: framework {fw} cannot split its step into phases yet; "
                          "drop --phases")
    if spec.meters.enabled and spec.meters.node_meter is not None:
        from accelbench.meters.registry import get_meter_factory

        get_meter_factory(spec.meters.node_meter)  # an unknown name fails here, not mid-run
    check_topology(spec)
    if check_hardware:
        check_device(fw, dev)
        check_precision(fw, dev, prec)
        if spec.topology.distributed and dev.startswith("cuda"):
            # Rank r of each node drives cuda:r: the node needs nproc_per_node GPUs.
            check_device(fw, f"cuda:{spec.topology.nproc_per_node - 1}")
    # Weak scaling: every data-parallel rank steps its own batch, so one step trains
    # dp_degree batches (world_size of them without tensor parallelism: the ranks of a
    # tensor-parallel group share theirs).
    return Case(spec=spec, sample_unit=wl.sample_unit,
                samples_per_step=spec.batch_size * spec.topology.dp_degree)


def check_data(spec: RunSpec, wl: Any, workers: int | None) -> RunSpec:
    """``spec`` with its ``--data`` checked and resolved: the framework has a loader, the
    workload a layout, a user's PATH fits it (absolute in the record), and the loader's
    workers (default: the CPUs this process may use, at most
    :data:`~accelbench.spec.DEFAULT_LOADER_WORKERS`). Nothing is written.

    Raises:
        ConfigError: one line saying what does not fit.
    """
    import dataclasses
    import os

    from accelbench.backends import get_backend
    from accelbench.data.check import check_dataset
    from accelbench.data.layouts import (
        TokenLayout,
        layout_of,
        loader_batch,
        samples_for,
        source_of,
    )
    from accelbench.errors import ConfigError
    from accelbench.spec import DEFAULT_LOADER_WORKERS

    flag = f"--data {spec.data}"
    if not getattr(get_backend(spec.framework), "has_data_loader", False):
        raise ConfigError(f"{flag}: framework {spec.framework} has no input pipeline yet (not "
                          "built); use --framework torch or --data synthetic")
    if spec.topology.distributed and spec.input_analysis:
        raise ConfigError("--input-analysis with --nproc-per-node/--nnodes: not yet (the "
                          "ranks would drop and fill one page cache); use one rank")
    if spec.policy.phases and not getattr(get_backend(spec.framework),
                                          "has_phases_with_data", False):
        raise ConfigError(f"{flag}: --phases does not split a loader's wait with framework "
                          f"{spec.framework} yet; drop --phases (the record's input section "
                          "times the wait)")
    if workers is None:
        workers = min(max_threads(), DEFAULT_LOADER_WORKERS)
    if callable(getattr(wl, "make_dataset", None)):  # a plugin's own dataset
        if source_of(spec.data) == "path":
            raise ConfigError(f"{flag}: {wl.name} brings its own dataset; use --data "
                              "generated")
        return dataclasses.replace(spec, loader_workers=workers)
    layout = layout_of(wl, spec.size)
    data = spec.data
    if source_of(data) == "path":
        data = os.path.abspath(os.path.expanduser(data))
        samples = check_dataset(data, layout).samples
    else:
        samples = samples_for(layout, spec.size)
    if isinstance(layout, TokenLayout):
        samples //= layout.window
    per_batch = loader_batch(wl, layout, spec.batch_size)
    # Each data-parallel replica reads its own shard (DistributedSampler): every rank under
    # ddp and fsdp, each tensor-parallel group (whose ranks read one batch) under tp.
    ranks = spec.topology.dp_degree if spec.topology.distributed else 1
    if samples // ranks < per_batch:
        who = "ranks'" if spec.topology.tp_degree == 1 else "data-parallel replicas'"
        shard = f" ({ranks} {who} shards of {samples // ranks})" if ranks > 1 else ""
        raise ConfigError(f"{flag}: {samples} samples{shard}, fewer than one batch of "
                          f"{per_batch}")
    return dataclasses.replace(spec, data=data, loader_workers=workers)


def check_sharded(spec: RunSpec) -> None:
    """Refuse ``--parallel`` fsdp/tp/fsdp+tp or ``--act-ckpt`` where they cannot act: the
    framework's backend decides for the workload; ``--data`` with a sharded mode needs a
    backend whose ranks read by data-parallel replica (``shards_data``: torch), or one
    process that feeds its own mesh (a backend with ``mesh_devices``: its check decides).

    Raises:
        ConfigError: one line saying what does not fit.
    """
    from accelbench.backends import get_backend
    from accelbench.errors import ConfigError

    topo = spec.topology
    backend = get_backend(spec.framework)
    if topo.devices is not None and not getattr(backend, "mesh_devices", False):
        raise ConfigError(f"--devices: framework {spec.framework} runs one device per rank; "
                          "use --nproc-per-node N")
    # A plugin's backend that is no BaseBackend may lack the hook: then it has no sharding.
    check = getattr(backend, "check_sharding", None)
    if check is None:
        raise ConfigError(f"--parallel {topo.parallel}/--act-ckpt: framework "
                          f"{spec.framework} has no sharded training; use --parallel ddp")
    check(spec)
    if topo.parallel == "ddp":
        return
    # One process that feeds its own mesh (JAX's --devices) splits its batch by replica:
    # its backend's check above decides. Ranks read by data-parallel replica where their
    # backend's sampler shards so (torch).
    one_feed = getattr(backend, "mesh_devices", False) and topo.world_size == 1
    by_replica = getattr(backend, "shards_data", False)
    if spec.data != "synthetic" and not one_feed and not by_replica:
        raise ConfigError(f"--data {spec.data} with --parallel {topo.parallel}: not yet for "
                          f"framework {spec.framework}'s ranks (their sampler shards by rank, "
                          "not by data-parallel replica); use --data synthetic")


def check_topology(spec: RunSpec) -> None:
    """Refuse a case of many ranks that cannot run as asked, before anything runs.

    Raises:
        ConfigError: a framework without data-parallel runs, a device that is not the first
            of its kind, or a measurement option the ranks cannot agree on yet.
    """
    from accelbench.backends import get_backend
    from accelbench.errors import ConfigError

    topo = spec.topology
    if topo.nnodes == 1 and topo.rdzv_endpoint is not None:
        raise ConfigError("--rdzv-endpoint is where several nodes meet; it needs --nnodes "
                          "above 1 (one node uses a local rendezvous)")
    if topo.sharded:
        check_sharded(spec)
    if not topo.distributed:
        return
    # The backend's hooks refuse a framework without data-parallel runs, and a device or
    # a communication backend its ranks cannot use.
    get_backend(spec.framework).distributed().check(spec)
    if spec.meters.enabled and spec.meters.settle_max_s > 0:
        raise ConfigError("--settle-s with --nproc-per-node/--nnodes: not yet for data-parallel "
                          "runs; drop --settle-s")
    if spec.meters.enabled and spec.meters.energy_trials > 1:
        raise ConfigError("--energy-trials with --nproc-per-node/--nnodes: not yet for "
                          "data-parallel runs; drop --energy-trials")
