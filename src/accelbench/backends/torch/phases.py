"""``--phases`` for PyTorch: the pieces of a
:class:`~accelbench.backends.torch.step.TorchTrainStep` (its model, batch,
optimizer, autocast and loss scaler), used after the measured window by
:mod:`accelbench.execution.phases`. The headline step is never changed.

Direct attribution: one full step cut at the phase boundaries. On a CPU each boundary
synchronises and reads the host clock; on CUDA an event is recorded at each boundary and
the host waits once, at the end of the step (:func:`time_segments`; its logic is tested on
a fake clock). In a data-parallel (DDP) case the forward and backward run under
``no_sync()`` and the gradients are then all-reduced explicitly (one flattened buffer,
averaged as DDP does), timed as ``communication``. In a sharded case (``--parallel``
fsdp/tp/fsdp+tp) the collectives live inside forward and backward (FSDP2's hooks, DTensor's
functional collectives), so :meth:`TorchPhaseSteps.collective_times` profiles a few full
steps (torch.profiler) and sums each collective kind's time (:func:`collective_seconds`).
torch is imported inside functions only.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch

    from accelbench.spec import RunSpec


class StepParts(Protocol):
    """What the pieces read of a built step
    (:class:`~accelbench.backends.torch.step.TorchTrainStep`, which imports this module)."""

    model: Any
    optimizer: Any
    scaler: Any
    device: Any
    spec: RunSpec
    batch: tuple[Any, ...]
    last_loss: Any

    def forward_loss(self) -> torch.Tensor: ...

    def compute_step(self) -> None: ...

    def step(self) -> None: ...

    def synchronize(self) -> None: ...


def time_segments(
    segments: Sequence[tuple[str, Callable[[], None]]], *, synchronize: Callable[[], None],
    new_event: Callable[[], Any] | None = None, stream: Any = None,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, float]:
    """Seconds of each named segment of one step, run in order.

    Without ``new_event``: the device is synchronised before the step and after each
    segment, each timed on ``clock``. With ``new_event`` (``torch.cuda.Event`` with timing):
    an event before the first segment and after each, recorded on ``stream``, one wait on
    the last; a segment's time is the span between its events (milliseconds -> seconds).
    """
    if new_event is None:
        out: dict[str, float] = {}
        synchronize()
        for name, run in segments:
            t0 = clock()
            run()
            synchronize()
            out[name] = clock() - t0
        return out
    events = [new_event() for _ in range(len(segments) + 1)]
    events[0].record(stream)
    for i, (_, run) in enumerate(segments):
        run()
        events[i + 1].record(stream)
    events[-1].synchronize()
    return {name: events[i].elapsed_time(events[i + 1]) / 1e3
            for i, (name, _) in enumerate(segments)}


#: How a sharded case's collectives are timed (``Phases.collectives_method``).
COLLECTIVES_METHOD = (
    "torch.profiler over {steps} full step(s) after the measured window, per rank: gloo "
    "(CPU): the span of each collective on gloo's worker thread (its kind from the c10d op "
    "that queued it: gloo runs a reduce-scatter as an all-reduce), NCCL (CUDA): each NCCL "
    "kernel's device time. This is the time the collective ran, waiting for the slowest "
    "peer included, not the time the step waited for it: on CUDA FSDP2 prefetches the "
    "next block's all-gather and reduce-scatters while backward goes on, so these overlap "
    "with compute (on a CPU it waits for each: no streams to overlap on; TP's all-reduces "
    "sit between a block's matmuls and mostly do not); the "
    "figures are not part of the forward/backward/optimizer sum. exposed: the length of "
    "the union of the collectives' intervals less its overlap with compute (gloo: the "
    "main thread's aten ops outside its waits; NCCL: the other kernels), per step "
    "(docs/sharding.md)")

#: c10d op name (lower case, without ``c10d::`` and underscores) prefix -> kind.
_C10D_KINDS = (("allgather", "all_gather"), ("reducescatter", "reduce_scatter"),
               ("allreduce", "all_reduce"))


def _kind(name: str) -> str:
    """``all_gather``, ``reduce_scatter``, ``all_reduce`` or ``other`` of a c10d op, gloo
    event or NCCL kernel name (``c10d::_allgather_base_``, ``gloo:all_reduce``,
    ``ncclDevKernel_ReduceScatter_Sum_f32_RING_LL``)."""
    flat = name.lower().split(":")[-1].replace("_", "")
    for stem, kind in _C10D_KINDS:
        if stem in flat:
            return kind
    return "other"


def collective_seconds(events: Sequence[tuple[str, float, float, bool]], steps: int
                       ) -> dict[str, Any]:
    """Seconds per step in each collective kind from a profile's events ``(name, start_us,
    duration_us, on_device)``.

    NCCL kernels (on the device) are classified by their names; gloo's worker-thread
    events (``gloo:...``) by the c10d ops that queued them, paired in start order where
    the counts match (gloo names a reduce-scatter's work ``all_reduce``), else by their own
    names (said in ``note``). Host-side c10d ops are only enqueues and are not summed.
    """
    from accelbench.phases import COLLECTIVE_KINDS

    steps = max(1, steps)
    device = sorted((e for e in events if e[3] and "nccl" in e[0].lower()),
                    key=lambda e: e[1])
    gloo = sorted((e for e in events if not e[3] and e[0].lower().startswith("gloo:")),
                  key=lambda e: e[1])
    ops = sorted((e for e in events if not e[3] and e[0].startswith("c10d::")
                  and _kind(e[0]) != "other"), key=lambda e: e[1])
    note = ""
    timed: list[tuple[str, float]] = [(_kind(n), d) for n, _, d, _ in device]
    if gloo:
        if len(ops) == len(gloo):
            timed += [(_kind(op[0]), g[2]) for op, g in zip(ops, gloo, strict=True)]
        else:
            timed += [(_kind(g[0]), g[2]) for g in gloo]
            note = (f"{len(gloo)} gloo collectives against {len(ops)} queued c10d ops: "
                    "kinds from gloo's own names (a reduce-scatter counts as all_reduce)")
    out: dict[str, Any] = {}
    calls: dict[str, float] = {}
    for kind in COLLECTIVE_KINDS:
        mine = [d for k, d in timed if k == kind]
        out[f"{kind}_s"] = sum(mine) / 1e6 / steps
        calls[kind] = len(mine) / steps
    other = [d for k, d in timed if k == "other"]
    if other:
        out["other_s"] = sum(other) / 1e6 / steps
        calls["other"] = len(other) / steps
    out["calls"] = calls
    if not timed:
        out = {f"{kind}_s": None for kind in COLLECTIVE_KINDS}
        note = ("no collective in the profile (no gloo worker events nor NCCL kernels "
                "were recorded)")
    if note:
        out["note"] = note
    return out


Interval = tuple[float, float]


def merged(intervals: Iterable[Interval]) -> list[Interval]:
    """The union of ``(start, end)`` intervals as sorted, disjoint intervals (empty and
    reversed ones dropped; touching ones joined)."""
    out: list[Interval] = []
    for start, end in sorted(i for i in intervals if i[1] > i[0]):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def covered(intervals: Iterable[Interval]) -> float:
    """The length of the union of ``intervals`` (overlaps counted once)."""
    return sum(end - start for start, end in merged(intervals))


def overlap(a: Iterable[Interval], b: Iterable[Interval]) -> float:
    """The length of (union of ``a``) intersected with (union of ``b``)."""
    ma, mb = merged(a), merged(b)
    i = j = 0
    total = 0.0
    while i < len(ma) and j < len(mb):
        total += max(0.0, min(ma[i][1], mb[j][1]) - max(ma[i][0], mb[j][0]))
        if ma[i][1] < mb[j][1]:
            i += 1
        else:
            j += 1
    return total


def minus(a: Iterable[Interval], b: Iterable[Interval]) -> list[Interval]:
    """(union of ``a``) without (union of ``b``), as sorted disjoint intervals."""
    out: list[Interval] = []
    holes = merged(b)
    for start, end in merged(a):
        cursor = start
        for h0, h1 in holes:
            if h1 <= cursor or h0 >= end:
                continue
            if h0 > cursor:
                out.append((cursor, h0))
            cursor = max(cursor, h1)
        if cursor < end:
            out.append((cursor, end))
    return out


#: Substrings of a host event's name that mark it as communication or a wait for it, not
#: compute (c10d ops, functional collectives' ``wait_tensor``, ``record_param_comms``).
_COMM_MARKS = ("c10d", "wait", "record_param_comms", "gloo", "nccl")


def _unavailable(why: str) -> dict[str, Any]:
    return {"exposed_s": None, "exposed_note": why}


def exposed_seconds(events: Sequence[tuple[str, float, float, bool, int]], steps: int
                    ) -> dict[str, Any]:
    """Seconds per step of collective time that no compute overlaps, from a profile's
    events ``(name, start_us, duration_us, on_device, thread)``: ``{"exposed_s": x}``, or
    ``{"exposed_s": None, "exposed_note": why}`` where the profile cannot tell.

    exposed = |C| - |C intersected with K|, C the union of the collectives' intervals, K
    that of compute's. NCCL (device): C = NCCL kernels, K = every other kernel (memcpy
    and memset left out), all streams. gloo (host): C = the ``gloo:`` events on gloo's
    worker threads; K = the ``aten::`` ops of the main thread (the one that queued the
    c10d ops) less the time inside its communication events (c10d ops, ``wait_tensor``:
    an op that waits for a collective inside it is not compute while it waits).
    """
    steps = max(1, steps)
    nccl = [(s, s + d) for n, s, d, dev, _ in events if dev and "nccl" in n.lower()]
    if nccl:
        kernels = [(s, s + d) for n, s, d, dev, _ in events
                   if dev and "nccl" not in n.lower()
                   and not n.lower().startswith(("memcpy", "memset"))]
        if not kernels:
            return _unavailable("the profile holds NCCL kernels but no compute kernel to "
                                "overlap them with")
        return {"exposed_s": _exposed(nccl, kernels, [d for n, _, d, dev, _ in events
                                                      if dev and "nccl" in n.lower()], steps)}
    host = [e for e in events if not e[3]]
    gloo = [e for e in host if e[0].lower().startswith("gloo:")]
    if not gloo:
        return _unavailable("no collective in the profile (no gloo worker events nor NCCL "
                            "kernels were recorded)")
    main = _main_thread(host)
    if main is None or main in {e[4] for e in gloo}:
        return _unavailable("the main thread could not be told from gloo's worker threads "
                            "(no c10d op queued outside them)")
    ops = [(s, s + d) for n, s, d, _, t in host if t == main and n.startswith("aten::")]
    if not ops:
        return _unavailable("no aten op was recorded on the main thread")
    waits = [(s, s + d) for n, s, d, _, t in host
             if t == main and any(m in n.lower() for m in _COMM_MARKS)]
    spans = [(s, s + d) for _, s, d, _, _ in gloo]
    return {"exposed_s": _exposed(spans, minus(ops, waits), [e[2] for e in gloo], steps)}


def _exposed(comm: list[Interval], compute: list[Interval], durations: list[float],
             steps: int) -> float:
    """|comm| - |comm and compute| in seconds per step, never above the collectives'
    summed durations (the total it is a part of): an interval's end less its start can
    round a float's last bit above its duration, and an exposed time equal to the total
    (nothing overlapped) must not read as more than it."""
    exposed = covered(comm) - overlap(comm, compute)
    return max(0.0, min(exposed, sum(durations))) / 1e6 / steps


def _main_thread(host: Sequence[tuple[str, float, float, bool, int]]) -> int | None:
    """The thread that queued the most c10d ops (the training loop's), or None."""
    counts: dict[int, int] = {}
    for name, _, _, _, thread in host:
        if name.startswith("c10d::"):
            counts[thread] = counts.get(thread, 0) + 1
    return max(counts, key=lambda t: counts[t]) if counts else None


def _ddp_of(model: Any) -> Any:
    """The DistributedDataParallel wrapper of the step's model (under a compiled one), or
    None in a single-process case."""
    from torch.nn.parallel import DistributedDataParallel

    inner = getattr(model, "_orig_mod", model)
    return inner if isinstance(inner, DistributedDataParallel) else None


class TorchPhaseSteps:
    """:class:`~accelbench.backends.base.PhaseSteps` over a built
    :class:`~accelbench.backends.torch.step.TorchTrainStep`."""

    def __init__(self, step: StepParts) -> None:
        import torch

        self._step = step
        self._ddp = _ddp_of(step.model)
        self._sharded = step.spec.topology.parallel != "ddp"
        self._params = [p for g in step.optimizer.param_groups for p in g["params"]]
        self._cuda = step.device.type == "cuda"
        self._new_event: Callable[[], Any] | None = None
        self._stream: Any = None
        if self._cuda:
            self._stream = torch.cuda.current_stream(step.device)

            def new_event() -> Any:
                return torch.cuda.Event(enable_timing=True)

            self._new_event = new_event
        clock = ("CUDA events at the phase boundaries, one host wait per step"
                 if self._cuda else "host timers, the device synchronised at each phase "
                 "boundary")
        parts = [f"{clock} (an attribution pass after the measured window); the optimizer "
                 "phase includes the loss scaler's unscale/check/update where used, "
                 "zeroing the gradients (set to None) is in forward"]
        if self._ddp is not None:
            parts.append("data parallel: forward and backward under DDP's no_sync(), then "
                         "one all-reduce of the flattened gradients (averaged, as DDP does) "
                         "timed as communication; the real step overlaps it with backward")
        if self._sharded:
            parts.append(f"sharded ({step.spec.topology.parallel}): its collectives run "
                         "inside forward and backward (FSDP2's all-gathers and "
                         "reduce-scatters, TP's all-reduces) and are timed there; each "
                         "kind's own time per rank is under collectives")
        if step.spec.fast_paths.compile:
            parts.append("--compile: the compiled model's forward and backward used as they "
                         "are (the loss and optimizer eager)")
        self.method = "; ".join(parts)
        self.collectives_method = ""

    # -- pieces -----------------------------------------------------------------------------

    def _no_sync(self) -> contextlib.AbstractContextManager[Any]:
        return self._ddp.no_sync() if self._ddp is not None else contextlib.nullcontext()

    def _forward(self) -> torch.Tensor:
        s = self._step
        s.optimizer.zero_grad(set_to_none=True)
        loss = s.forward_loss()
        return s.scaler.scale(loss) if s.scaler is not None else loss

    def _optimize(self) -> None:
        s = self._step
        if s.scaler is not None:
            s.scaler.step(s.optimizer)
            s.scaler.update()
        else:
            s.optimizer.step()

    def _all_reduce(self) -> None:
        import torch
        import torch.distributed as dist

        grads = [p.grad for p in self._params if p.grad is not None]
        if not grads:
            return
        flat = torch.cat([g.reshape(-1) for g in grads])
        flat.div_(dist.get_world_size())
        dist.all_reduce(flat)
        offset = 0
        for g in grads:
            g.copy_(flat[offset:offset + g.numel()].view_as(g))
            offset += g.numel()

    def _full_step(self) -> None:
        # The headline step on the batch it holds (with --data, without the wait for the
        # next: that is the input phase); its last loss stays the measured window's.
        s = self._step
        last = s.last_loss
        s.compute_step()
        s.last_loss = last

    # -- PhaseSteps -------------------------------------------------------------------------

    def timed_step(self) -> dict[str, float]:
        held: dict[str, Any] = {}

        def forward() -> None:
            held["loss"] = self._forward()

        def backward() -> None:
            held.pop("loss").backward()

        segments: list[tuple[str, Callable[[], None]]] = [
            ("forward", forward), ("backward", backward)]
        if self._ddp is not None:
            segments.append(("communication", self._all_reduce))
        segments.append(("optimizer", self._optimize))
        # no_sync() only stops DDP's own all-reduce in backward; the explicit one and the
        # optimizer do not look at it.
        with self._no_sync():
            return time_segments(segments, synchronize=self._step.synchronize,
                                 new_event=self._new_event, stream=self._stream)

    def loops(self) -> dict[str, Callable[[], None]]:
        def forward() -> None:
            with self._no_sync():
                loss = self._forward()
            del loss  # the graph is built, then dropped

        def forward_backward() -> None:
            with self._no_sync():
                self._forward().backward()

        out = {"forward": forward, "forward_backward": forward_backward,
               "step": self._full_step}
        if self._ddp is not None:
            def step_no_sync() -> None:
                with self._no_sync():
                    self._full_step()

            out["step_no_sync"] = step_no_sync
        return out

    def synchronize(self) -> None:
        self._step.synchronize()

    def collective_times(self, steps: int = 3) -> dict[str, Any] | None:
        """A sharded case: seconds per step in all-gather, reduce-scatter and all-reduce on
        this rank over ``steps`` profiled full steps (:func:`collective_seconds`), and the
        part of them no compute overlapped (:func:`exposed_seconds`, same profile); None in
        a case without a sharded mode (DDP's all-reduce is the communication phase)."""
        if not self._sharded:
            return None
        from torch.profiler import ProfilerActivity, profile

        from accelbench.phases import COLLECTIVE_KINDS

        activities = [ProfilerActivity.CPU]
        if self._cuda:
            activities.append(ProfilerActivity.CUDA)
        self.collectives_method = COLLECTIVES_METHOD.format(steps=steps)
        self.synchronize()
        with profile(activities=activities) as prof:
            for _ in range(steps):  # every rank runs them: the collectives match
                self._full_step()
            self.synchronize()
        try:  # reading the profile is this rank's own business: it says why, never raises
            events = [(e.name, float(e.time_range.start), float(e.time_range.elapsed_us()),
                       "cuda" in str(getattr(e, "device_type", "")).lower(),
                       int(getattr(e, "thread", 0) or 0))
                      for e in prof.events()]
        except Exception as exc:  # noqa: BLE001 - a profiler's failure is a missing figure
            why = f"the profile could not be read: {type(exc).__name__}: {exc}"
            return {**{f"{k}_s": None for k in COLLECTIVE_KINDS}, "note": why,
                    **_unavailable(why)}
        return {**collective_seconds([e[:4] for e in events], steps),
                **exposed_seconds(events, steps)}

    def input_copy(self) -> Callable[[], None] | None:
        """CUDA: the batch from pinned host memory, copied non-blocking; elsewhere, and
        where the step reads data (its input phase is its measured wait), None."""
        import torch

        if not self._cuda or getattr(self._step, "input_timer", None) is not None:
            return None
        device = self._step.device
        host = tuple(t.detach().cpu().pin_memory() if isinstance(t, torch.Tensor) else t
                     for t in self._step.batch)

        def copy() -> None:
            for t in host:
                if isinstance(t, torch.Tensor):
                    t.to(device, non_blocking=True)

        return copy
