"""What a measurement produced: :class:`Result`, :class:`Stats`, :class:`EnergyReading`.

Units are SI and live in the field names: seconds (``_s``), joules (``_j``),
watts (``_w``), FLOP and bytes.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import UnionType
from typing import Any, Literal, Union, cast, get_args, get_origin, get_type_hints

from accelbench.input_stats import InputStats
from accelbench.phase_summary import summary_entries
from accelbench.phases import Phases
from accelbench.spec import RunSpec, StopReason
from accelbench.verdicts import InputVerdict, input_bound, is_flagged, kinds_of, reasons_of

Status = Literal["ok", "oom", "error", "timeout", "diverged", "insufficient"]
STATUSES: tuple[str, ...] = get_args(Status)

#: A CI whose half-width exceeds the estimate itself (relative half-width above this)
#: says nothing a reader can use: tables show it as "unreliable (n iterations)".
UNRELIABLE_REL_HALFWIDTH = 1.0
ONE_RUN_SCOPE = "iterations of 1 run"
"""What one result's CI covers: the spread of its own iterations, not between runs."""
"""``ok``; ``oom`` (out of memory at this batch size); ``error`` (the case failed);
``timeout`` (killed at its wall-clock limit); ``diverged`` (the loss became NaN or Inf:
measured, but kept out of every aggregate); ``insufficient`` (fewer measured iterations
than the policy's minimum under a hard time cap: stored without a CI)."""
EnergySource = Literal["counter", "integrated_samples", "estimate", "unavailable"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Stats:
    """Statistics of the measured iteration times of one case."""

    n: int
    """Number of measured iterations (training steps), however they were timed."""
    median_s: float
    mean_s: float
    trimmed_mean_s: float
    """Mean after dropping ``trim_fraction`` of the iterations at each end."""
    trim_fraction: float
    std_s: float
    min_s: float
    max_s: float
    samples_per_s: float
    """Throughput at the median step time."""
    samples_per_s_ci95: tuple[float, float] | None
    """95% bootstrap confidence interval of :attr:`samples_per_s`; None from fewer than
    3 iterations (no CI is ever given from fewer)."""
    ci_rel_halfwidth: float | None
    """Half-width of the CI relative to :attr:`samples_per_s` (None without a CI)."""
    stop_reason: StopReason
    steps_per_block: int = 1
    """Steps behind each stored iteration time: above 1, each time is the per-step mean of
    a block of this many steps timed with one wait for the device, and the statistics are
    of those means (the last block of a count may be shorter)."""
    timing: str = ""
    """How the times were taken, in words (``""``: every step on its own, older records)."""
    block_steps: tuple[int, ...] = ()
    """The steps behind each stored iteration time of a block-timed record (``k``, or fewer
    for a block that landed on an exact count or cap; records from before blocks were
    timed off the loop hold ``k - 1`` for a first block that started with the device idle
    and one more for the last, which drained a step left in flight); ``()`` where every
    time is one step, or in older records (their blocks follow :attr:`steps_per_block`'s
    rule)."""

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["samples_per_s_ci95"] = (
            list(self.samples_per_s_ci95) if self.samples_per_s_ci95 is not None else None
        )
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Stats:
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in names}
        ci = kwargs.get("samples_per_s_ci95")
        kwargs["samples_per_s_ci95"] = tuple(ci) if ci is not None else None
        kwargs.setdefault("ci_rel_halfwidth", None)
        kwargs["block_steps"] = tuple(kwargs.get("block_steps") or ())
        return cls(**kwargs)


@dataclass(frozen=True, kw_only=True, slots=True)
class EnergyReading:
    """Energy of one device (or domain) over the measured window, with provenance."""

    device: str
    """Device the reading belongs to: ``cuda:0``, ``cpu``, ``package-0`` ..."""
    scope: str
    """What the sensor covers: ``gpu``, ``cpu-package``, ``dram``."""
    source: EnergySource
    """``counter``, ``integrated_samples``, ``estimate`` or ``unavailable``."""
    energy_j: float | None = None
    avg_power_w: float | None = None
    peak_power_w: float | None = None
    energy_j_per_sample: float | None = None
    window_s: float | None = None
    interval_s: float | None = None
    """Sampling interval achieved (mean), for sampled sources."""
    n_samples: int | None = None
    resolution_j: float | None = None
    """Counter resolution, where known."""
    idle_power_w: float | None = None
    dynamic_energy_j_per_sample: float | None = None
    cross_check_rel_diff: float | None = None
    """Relative difference of counter energy and integrated samples, where both exist."""
    note: str = ""
    """Why a reading is unavailable, how an estimate was made, warnings."""
    details: dict[str, Any] = field(default_factory=dict)
    """Source-specific extras (power limit, clocks, throttle reasons ...)."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EnergyReading:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


HOST_SCOPES = ("cpu-package", "dram", "cpu")
"""Scopes of the host's own readings (RAPL package and DRAM, or a CPU estimate)."""


def boundary_readings(
    energy: Sequence[EnergyReading], device: str, boundary: str, *, distributed: bool = False
) -> tuple[EnergyReading, ...]:
    """The readings an energy figure of ``boundary`` adds up.

    ``device``: the training device's (for a CPU case its packages and DRAM);
    ``device+host``: those and the host's CPU packages and DRAM (the same for a CPU case);
    ``node``: the node meter's. In a ``distributed`` case the training devices are every
    rank's GPU (each read once), and host and node readings are one per node.
    """
    if boundary == "node":
        return tuple(e for e in energy if e.scope == "node")
    host = tuple(e for e in energy if e.scope in HOST_SCOPES)
    if device == "cpu":
        return host
    if distributed:
        dev = tuple(e for e in energy if e.scope not in HOST_SCOPES and e.scope != "node")
    else:
        dev = tuple(e for e in energy if e.device == device)
    return dev + host if boundary == "device+host" else dev


def _boundary_sum(result: Result, field_name: str) -> float | None:
    readings = result.primary_energy
    parts = [readings]
    if result.energy_boundary == "device+host" and result.spec.device != "cpu":
        parts = [tuple(e for e in readings if e.scope not in HOST_SCOPES),
                 tuple(e for e in readings if e.scope in HOST_SCOPES)]
    total = 0.0
    for part in parts:
        values = [v for e in part if (v := getattr(e, field_name)) is not None]
        if not values:
            return None
        total += sum(values)
    return total


def energy_rel_bound(readings: tuple[EnergyReading, ...]) -> float | None:
    """The 95% relative bound of the readings' summed energy per sample: each reading's
    ``details["uncertainty"]["rel_95"]`` (:mod:`accelbench.meters.uncertainty`) weighted by
    its figure, the half-widths added (worst case); None where a figure has no bound (a
    record written before bounds existed, or a sensor too little is known of)."""
    total = half = 0.0
    for e in readings:
        if e.energy_j_per_sample is None:
            continue
        rel = ((e.details or {}).get("uncertainty") or {}).get("rel_95")
        if not isinstance(rel, (int, float)):
            return None
        total += e.energy_j_per_sample
        half += abs(e.energy_j_per_sample) * float(rel)
    return half / total if total > 0 else None


@dataclass(frozen=True, kw_only=True, slots=True)
class Result:
    """The record of one case, as stored.

    The fields are the record: :meth:`to_dict` and :meth:`from_dict` follow them, in this
    order (the order of a stored record's keys), so a new field is one line here.
    """

    id: str
    suite_id: str | None = None
    status: Status
    error: str | None = None
    spec: RunSpec
    sample_unit: str
    samples_per_step: int
    """Samples processed by one training step (the batch size in the workload's unit)."""
    param_count: int | None = None
    stats: Stats | None = None
    iteration_times_s: tuple[float, ...] = ()
    warmup_times_s: tuple[float, ...] = ()
    build_time_s: float | None = None
    compile_s: float | None = None
    """Seconds of the first step's trace and compile (JAX/XLA); never part of throughput."""
    peak_memory_bytes: int | None = None
    """Peak memory of the case: device memory the framework allocated (CUDA, XLA), or the
    worker's peak host RSS on a CPU; None where not reported."""
    peak_memory_source: str = ""
    """What :attr:`peak_memory_bytes` counts, or why it is missing."""
    final_loss: float | None = None
    energy: tuple[EnergyReading, ...] = ()
    power_timeline: dict[str, Any] = field(default_factory=dict)
    """Downsampled power samples per sensor: ``{sensor: {"t_s": [...], "power_w": [...]}}``."""
    phases: Phases | None = None
    """Where the step's time and energy go (``--phases``); None where not asked (and in
    records from before phases existed)."""
    input: InputStats | None = None
    """The input pipeline of ``--data generated|PATH`` (:class:`InputStats`, measured by
    :mod:`accelbench.data.stall`): the loader's settings, each measured step's wait for
    its batch, their median with its 95% CI, the stall fraction (waits over step time) and
    the loader's CPU use. None with synthetic data (and in records from before it existed),
    where it is left out of the JSON."""
    forward_flop_per_sample: float | None = None
    flop_per_sample: float | None = None
    """FLOPs of one training step (forward + backward) per sample; optimizer not counted."""
    flop_method: str = ""
    """How FLOPs were counted: ``flop_counter``, ``analytic`` or both, or why not."""
    peak_flop_per_s: float | None = None
    """Measured GEMM peak of the device at this precision, used for :attr:`mfu`."""
    backend_extra: dict[str, Any] = field(default_factory=dict)
    """The backend's own facts, e.g. XLA's FLOP estimate of the compiled step and a note
    where it differs from :attr:`flop_per_sample` by more than 10%."""
    noise: dict[str, Any] = field(default_factory=dict)
    """What competed with the case for its device: ``host`` (load average, other
    processes' CPU time, the worker's own CPU share before and during, the window judged),
    ``gpu`` (other processes, clocks, throttle reasons where NVML has them), ``times``
    (shape checks of the raw step times), ``described`` and ``measure_notes``. The
    verdicts are read from these figures (:mod:`accelbench.verdicts`); older records hold
    their verdict instead (``flagged``, ``reasons``, and ``kinds``/``by_kind``), read as
    stored. A JSON export's records carry the verdict in those keys whichever version
    wrote them. Empty for records older than 0.3."""
    machine: dict[str, Any] = field(default_factory=dict)
    ranks: dict[str, Any] = field(default_factory=dict)
    """A case of many ranks (empty for one device): ``world_size``, ``nnodes``,
    ``nproc_per_node``, ``backend``, ``iteration_time`` (how the stored series is derived
    from the ranks' own times), ``per_rank`` (rank, local rank, node, host, device, its UUID,
    its own raw warm-up and iteration times), ``energy_readers`` (which rank read which
    sensor) and ``energy_rule``; a failed case has ``failures`` (rank, pid, how it died, its
    own report). ``stored_elsewhere`` marks the answer of a node that does not hold rank 0
    (that node stores nothing)."""
    started_at: str = ""
    """UTC ISO-8601 timestamp."""
    finished_at: str = ""
    accelbench_version: str = ""
    schema_version: int = 0

    @property
    def samples_per_s(self) -> float | None:
        return self.stats.samples_per_s if self.stats else None

    @property
    def world_size(self) -> int:
        """Ranks the case ran on (1 for a single-device case)."""
        return int(self.ranks.get("world_size") or self.spec.topology.world_size)

    @property
    def stored_here(self) -> bool:
        """False for the answer of a node that does not hold rank 0 of a case of several
        nodes: the node holding rank 0 stores the record."""
        return not self.ranks.get("stored_elsewhere")

    @property
    def input_verdict(self) -> InputVerdict | None:
        """The input-bound verdict of a case that read data (stall fraction over
        :data:`accelbench.verdicts.INPUT_BOUND_STALL`), read from its ``input``; None
        otherwise."""
        return input_bound(self.input)

    @property
    def noisy(self) -> bool:
        """True when a verdict flagged the case: contention (a busy machine) or unstable
        timing (step times vary); :attr:`noise_kinds` says which."""
        return is_flagged(self.noise)

    @property
    def noise_kinds(self) -> tuple[str, ...]:
        """The verdicts reached: ``contention`` and/or ``unstable``, read from the record's
        figures (records written with their verdict: as stored)."""
        return kinds_of(self.noise)

    @property
    def noise_described(self) -> tuple[str, ...]:
        """Behaviour of the step times seen but not flagged (a runtime's two modes)."""
        return tuple(str(r) for r in self.noise.get("described") or ())

    @property
    def noise_reasons(self) -> tuple[str, ...]:
        """Why the case is flagged noisy (empty when it is not)."""
        return reasons_of(self.noise)

    @property
    def precision_note(self) -> str:
        """Why the case's precision is emulated on its device (``amp_bf16`` on a CPU
        without bf16 instructions: converted to fp32 around each operation, often far
        slower than fp32); ``""`` where it is native or not known. Records keep the answer
        in ``machine["precision_support"]``; older CPU records are judged by the vector
        extensions they list (``machine["cpu"]["isa"]``, x86 only)."""
        support = (self.machine or {}).get("precision_support")
        if support is None and self.spec.device == "cpu":
            cpu = (self.machine or {}).get("cpu") or {}
            if isinstance(cpu, dict) and cpu.get("arch") in ("x86_64", "AMD64") \
                    and isinstance(cpu.get("isa"), list):
                from accelbench.devices.discovery import precision_support

                support = precision_support(self.spec.precision, set(cpu["isa"]))
        if not isinstance(support, dict) or support.get("native", True):
            return ""
        return str(support.get("note") or f"{self.spec.precision} is emulated on this device")

    @property
    def precision_label(self) -> str:
        """The precision as tables show it: ``amp_bf16 (emulated)`` where
        :attr:`precision_note` says so, else the precision's name."""
        return self.spec.precision + (" (emulated)" if self.precision_note else "")

    @property
    def achieved_flop_per_s(self) -> float | None:
        """Model FLOP/s achieved: training FLOPs per sample x samples per second."""
        if self.flop_per_sample is None or self.stats is None:
            return None
        return self.flop_per_sample * self.stats.samples_per_s

    @property
    def mfu(self) -> float | None:
        """Model FLOP utilisation: achieved FLOP/s / the peak of this precision on every
        device of the case (one device's peak x the ranks). The model's FLOPs count once per
        sample of the global batch (a tensor-parallel group shares its samples: never once
        per rank). A figure above 100% is refused (None; :attr:`mfu_refused` says why)."""
        raw = self._mfu_raw()
        return None if raw is None or raw > 1.0 else raw

    @property
    def mfu_refused(self) -> str:
        """Why MFU is not given although its parts are (above 100%); ``""`` otherwise."""
        raw = self._mfu_raw()
        if raw is None or raw <= 1.0:
            return ""
        return (f"MFU would be {raw:.0%}, above 100%: the model's FLOP count "
                f"({self.flop_method or 'unknown method'}) or the peak it is against is "
                "wrong for this case, so it is not reported")

    def _mfu_raw(self) -> float | None:
        achieved = self.achieved_flop_per_s
        if achieved is None or not self.peak_flop_per_s:
            return None
        return achieved / (self.peak_flop_per_s * self.peak_devices)

    @property
    def peak_devices(self) -> int:
        """The devices MFU's peak counts: the ranks, times a JAX process's ``--devices``
        mesh on accelerators (a CPU's XLA host devices share its cores: one CPU's peak)."""
        devices = self.spec.topology.devices
        if devices and self.spec.device != "cpu":
            return self.world_size * devices
        return self.world_size

    @property
    def energy_boundary(self) -> str:
        """What the energy figures cover: ``device``, ``device+host`` or ``node``."""
        return self.spec.meters.boundary

    @property
    def primary_energy(self) -> tuple[EnergyReading, ...]:
        """Readings inside the energy boundary (:func:`boundary_readings`): by default the
        device that trains (the GPU for a GPU case, as the paper reports; CPU packages and
        DRAM for a CPU case). Readings outside it stay in :attr:`energy` but are not added
        in, so boundaries, measured and estimated never mix silently."""
        return boundary_readings(self.energy, self.spec.device, self.energy_boundary,
                                 distributed=self.spec.topology.distributed)

    @property
    def energy_j_per_sample(self) -> float | None:
        """Energy per sample inside the energy boundary, or None when any part of the
        boundary (the device; the host too for ``device+host``) has no figure."""
        return _boundary_sum(self, "energy_j_per_sample")

    @property
    def energy_rel_u95(self) -> float | None:
        """95% relative bound of :attr:`energy_j_per_sample` (``0.021``: +-2.1%), or None
        where any part of it has none (:func:`energy_rel_bound`)."""
        if self.energy_j_per_sample is None:
            return None
        return energy_rel_bound(self.primary_energy)

    @property
    def avg_power_w(self) -> float | None:
        """Average power inside the energy boundary over the window, or None."""
        return _boundary_sum(self, "avg_power_w")

    @property
    def energy_window_samples_per_s(self) -> float | None:
        """The energy window's own throughput: its samples over its time, which is average
        power over energy per sample (both are the window's energy, over its time and over
        its samples). The headline :attr:`samples_per_s` is the median step's; with uneven
        steps the two differ, and only this one times J/sample gives the average power."""
        e, p = self.energy_j_per_sample, self.avg_power_w
        return p / e if e and p is not None else None

    @property
    def energy_source(self) -> str:
        """How the training device's energy was obtained: ``counter``, ``integrated_samples``,
        ``estimate``, ``unavailable``, or a ``+``-joined mix (e.g. package counter and an
        unavailable DRAM domain)."""
        sources = sorted({e.source for e in self.primary_energy})
        return "+".join(sources) if sources else "unavailable"

    def to_dict(self) -> dict[str, Any]:
        """Full JSON-ready record: every field, in field order (what a worker sends, what
        the store keeps)."""
        return {f.name: _encode(getattr(self, f.name)) for f in dataclasses.fields(self)
                if f.name != "input" or self.input is not None}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        """The record :meth:`to_dict` wrote, or an older one: a missing field takes its
        default (a missing required one raises ``KeyError``), an unknown key is ignored."""
        kwargs: dict[str, Any] = {}
        for f, decode in _field_decoders():
            if f.name in data:
                kwargs[f.name] = decode(data[f.name])
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise KeyError(f.name)
        return cls(**kwargs)

    def summary(self) -> dict[str, Any]:
        """The flat object ``accelbench run --json`` prints."""
        st = self.stats
        return {
            "id": self.id,
            "suite_id": self.suite_id,
            "status": self.status,
            "workload": self.spec.workload,
            "size": self.spec.size,
            "batch_size": self.spec.batch_size,
            "precision": self.spec.precision,
            "precision_note": self.precision_note or None,  # set where it is emulated
            "device": self.spec.device,
            "framework": self.spec.framework,
            "threads": self.spec.threads,
            "nnodes": self.spec.topology.nnodes,
            "nproc_per_node": self.spec.topology.nproc_per_node,
            "world_size": self.world_size,
            "dist_backend": self.ranks.get("backend") or (
                self.spec.topology.dist_backend if self.spec.topology.distributed else None),
            "global_batch_size": self.spec.batch_size * (
                self.world_size * (self.spec.topology.devices or 1)
                // self.spec.topology.tp_degree),
            "stored_here": self.stored_here,
            "tag": self.spec.tag,
            "fast_paths": list(self.spec.fast_paths.enabled()),
            "sample_unit": self.sample_unit,
            "samples_per_s": st.samples_per_s if st else None,
            "samples_per_s_ci95": list(st.samples_per_s_ci95)
            if st and st.samples_per_s_ci95 is not None else None,
            # What the CI covers: one result's CI is over its own iterations only (a
            # --repeats group's CI, over its runs, is in `run --repeats --json`'s group).
            "ci_scope": ONE_RUN_SCOPE if st and st.samples_per_s_ci95 is not None else None,
            "ci_unreliable": bool(st and st.samples_per_s_ci95 is not None
                                  and st.ci_rel_halfwidth is not None
                                  and st.ci_rel_halfwidth > UNRELIABLE_REL_HALFWIDTH),
            "iterations": st.n if st else 0,
            "stop_reason": st.stop_reason if st else None,
            "step_time_s": st.median_s if st else None,
            "step_time_trimmed_mean_s": st.trimmed_mean_s if st else None,
            "param_count": self.param_count,
            "compile_s": self.compile_s,
            "peak_memory_bytes": self.peak_memory_bytes,
            "peak_memory_source": self.peak_memory_source,
            "flop_per_sample": self.flop_per_sample,
            "achieved_flop_per_s": self.achieved_flop_per_s,
            "mfu": self.mfu,
            "mfu_peak": (self.machine or {}).get("mfu_peak"),
            "energy_j_per_sample": self.energy_j_per_sample,
            "energy_rel_u95": self.energy_rel_u95,
            "avg_power_w": self.avg_power_w,
            # The window's throughput: avg_power_w = energy_j_per_sample x this (the
            # headline samples_per_s is the median step's).
            "energy_window_samples_per_s": self.energy_window_samples_per_s,
            "energy_source": self.energy_source,
            "energy_boundary": self.energy_boundary,
            "energy_notes": [e.note for e in self.primary_energy if e.note],
            "energy_cross_check_rel_diff": next(
                (e.cross_check_rel_diff for e in self.primary_energy
                 if e.cross_check_rel_diff is not None), None,
            ),
            # Where the step's time and energy go (--phases): one flat object a phase.
            **summary_entries(self.phases, self.samples_per_step),
            **input_entries(self.input),
            "noisy": self.noisy,
            "noise_reasons": list(self.noise_reasons),
            "noise_kinds": list(self.noise_kinds),
            "error": self.error,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
        }


def input_entries(record: InputStats | None) -> dict[str, Any]:
    """The summary's input fields (``--data generated|PATH``); none with synthetic data."""
    if record is None:
        return {}
    cpu = record.loader_cpu
    verdict = input_bound(record)
    return {"input_source": record.source, "input_path": record.path,
            "loader_workers": record.loader_workers,
            "input_wait_median_s": record.wait_median_s,
            "input_wait_median_ci95_s": list(record.wait_median_ci95_s)
            if record.wait_median_ci95_s else None,
            "input_stall_fraction": record.stall_fraction,
            "input_loader_cores_used": cpu.cores_used if cpu else None,
            "input_cores_available": cpu.cores_available if cpu else None,
            "input_bound": verdict is not None,
            "input_verdict": verdict.line if verdict else None}

def _encode(value: Any) -> Any:
    """A field's value as JSON: nested records by their ``to_dict``, tuples as lists."""
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    to_dict = getattr(value, "to_dict", None)
    return to_dict() if to_dict is not None else value


def _decoder(hint: Any) -> Callable[[Any], Any]:
    """How a field of type ``hint`` is read back from JSON (the inverse of :func:`_encode`;
    a null container reads as an empty one, as records older than the field have it)."""
    if hasattr(hint, "from_dict"):
        return cast(Callable[[Any], Any], hint.from_dict)
    origin, args = get_origin(hint), [a for a in get_args(hint) if a is not type(None)]
    if origin in (Union, UnionType) and len(args) == 1 and hasattr(args[0], "from_dict"):
        inner = args[0].from_dict
        return lambda v: inner(v) if v else None
    if origin is tuple:
        if args[0] in (float, int, str):  # plain values: no per-item call (step times)
            return lambda v: tuple(v or ())
        item = _decoder(args[0])
        return lambda v: tuple(item(x) for x in v or ())
    if origin is dict:
        return lambda v: v or {}
    return lambda v: v


@functools.cache
def _field_decoders() -> tuple[tuple[dataclasses.Field[Any], Callable[[Any], Any]], ...]:
    hints = get_type_hints(Result)
    return tuple((f, _decoder(hints[f.name])) for f in dataclasses.fields(Result))
