"""Per-operator breakdown of one training step: FLOPs, bytes and time by op kind.

The backend counts and times the operators of real training steps (for
torch: :mod:`accelbench.backends.torch.breakdown`, a dispatch-level counter
and the profiler, which name each operator's kind by :mod:`accelbench.backends.opkinds`);
this module aggregates them by kind and stores them.

Operators are aggregated by kind (conv, matmul, rnn, attention, norm, ...), so
the roofline shows which kinds of layers of a model are memory-bound. The kinds
account for the whole step: the step time is the wall time of the same profiled
steps the operator times come from, and what no operator covers (Python, the
autograd engine, launch gaps, the profiler's own overhead) is an explicit
``unattributed`` kind, so the kinds sum to the step time.

The step is run and profiled by :mod:`accelbench.execution.breakdown` (in an isolated
worker with a timeout for ``accelbench roofline --model``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from accelbench.store.db import Store

#: Kinds whose FLOPs are estimated as 1 per output element for the roofline.
ESTIMATED_KINDS = frozenset(
    {"elementwise", "activation", "norm", "pool", "softmax/loss", "dropout", "optimizer"}
)
#: The kind of the step time no operator accounts for.
UNATTRIBUTED = "unattributed"
#: How the step time of a breakdown is measured (stored and shown with it).
STEP_TIME_METHOD = ("mean wall time of the profiled steps (the steps the operator times come "
                    "from; the profiler's overhead included)")
@dataclass(frozen=True)
class OpStats:
    """One aten operator's share of a training step."""

    name: str
    kind: str
    n_calls: int
    flops: float
    bytes: float
    time_s: float
    """Time per step (profiler)."""
    output_elements: float = 0.0
    """Elements written per step (the elementwise FLOP estimate; see :attr:`roofline_flops`)."""

    @property
    def roofline_flops(self) -> float:
        """FLOPs placing the operator on the roofline.

        The counted FLOPs where there are any; otherwise, for arithmetic kinds
        (elementwise, activation, norm, pool, softmax/loss, dropout, optimizer),
        1 FLOP per output element, so memory-bound layers that the MFU
        convention counts as 0 FLOPs still appear on the chart.
        """
        if self.flops > 0:
            return self.flops
        return self.output_elements if self.kind in ESTIMATED_KINDS else 0.0

    @property
    def intensity_flop_per_byte(self) -> float | None:
        f = self.roofline_flops
        return f / self.bytes if self.bytes and f else None

    @property
    def achieved_flop_per_s(self) -> float | None:
        f = self.roofline_flops
        return f / self.time_s if self.time_s > 0 and f else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "kind": self.kind, "n_calls": self.n_calls,
            "flops": self.flops, "roofline_flops": self.roofline_flops,
            "flops_estimated": self.flops == 0 and self.roofline_flops > 0,
            "bytes": self.bytes, "time_s": self.time_s,
            "output_elements": self.output_elements,
            "intensity_flop_per_byte": self.intensity_flop_per_byte,
            "achieved_flop_per_s": self.achieved_flop_per_s,
        }


@dataclass(frozen=True)
class ModelBreakdown:
    """A training step of one workload case, by operator and by operator kind."""

    workload: str
    size: str
    batch_size: int
    precision: str
    device: str
    device_name: str | None
    step_time_s: float
    """Wall time of a step: see :data:`STEP_TIME_METHOD`."""
    ops: tuple[OpStats, ...]
    kinds: tuple[OpStats, ...] = field(default=())
    """Per kind (``name`` = ``kind``), most time first, then :data:`UNATTRIBUTED` (the
    step time no operator covers), so that the kinds' times sum to ``step_time_s``."""
    step_time_method: str = STEP_TIME_METHOD

    @property
    def unattributed_s(self) -> float:
        return sum(k.time_s for k in self.kinds if k.kind == UNATTRIBUTED)

    @property
    def flops(self) -> float:
        return sum(o.flops for o in self.ops)

    @property
    def bytes(self) -> float:
        return sum(o.bytes for o in self.ops)

    @property
    def label(self) -> str:
        return f"{self.workload} {self.size} b{self.batch_size} {self.precision}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload, "size": self.size, "batch_size": self.batch_size,
            "precision": self.precision, "device": self.device,
            "device_name": self.device_name, "step_time_s": self.step_time_s,
            "step_time_method": self.step_time_method, "unattributed_s": self.unattributed_s,
            "flops": self.flops, "bytes": self.bytes,
            "kinds": [k.to_dict() for k in self.kinds],
            "ops": [o.to_dict() for o in self.ops],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelBreakdown:
        """Inverse of :meth:`to_dict` (how a breakdown crosses from its worker)."""

        def stats(d: dict[str, Any]) -> OpStats:
            return OpStats(name=d["name"], kind=d["kind"], n_calls=int(d["n_calls"]),
                           flops=float(d["flops"]), bytes=float(d["bytes"]),
                           time_s=float(d["time_s"]),
                           output_elements=float(d.get("output_elements") or 0.0))

        return cls(
            workload=data["workload"], size=data["size"], batch_size=int(data["batch_size"]),
            precision=data["precision"], device=data["device"],
            device_name=data.get("device_name"), step_time_s=float(data["step_time_s"]),
            ops=tuple(stats(o) for o in data["ops"]),
            kinds=tuple(stats(k) for k in data["kinds"]),
            step_time_method=data.get("step_time_method") or STEP_TIME_METHOD,
        )


def aggregate_by_kind(ops: Sequence[OpStats]) -> tuple[OpStats, ...]:
    """Sum operators of the same kind; most time first."""
    acc: dict[str, list[float]] = {}
    for o in ops:
        e = acc.setdefault(o.kind, [0, 0.0, 0.0, 0.0, 0.0])
        e[0] += o.n_calls
        e[1] += o.flops
        e[2] += o.bytes
        e[3] += o.time_s
        # Elements only of operators without counted FLOPs, so a kind mixing
        # both (rare) is placed by its counted FLOPs plus the estimate.
        e[4] += o.output_elements if o.flops == 0 else 0.0
    kinds = [
        OpStats(name=k, kind=k, n_calls=int(v[0]), flops=v[1], bytes=v[2], time_s=v[3],
                output_elements=v[4])
        for k, v in acc.items()
    ]
    return tuple(sorted(kinds, key=lambda o: -o.time_s))


# --------------------------------------------------------------------------- store


MODEL_OP = "model"
"""``op`` of breakdown rows in ``op_results``."""
TRAIN_STEP_PASS = "train_step"


def save_breakdown(store: Store, bd: ModelBreakdown, *, tag: str = "") -> None:
    """Store one row per op kind (``unattributed`` included) plus a ``total`` row (the step
    time) in ``op_results``."""
    import json
    import socket

    from accelbench.store.opbench import utc_now

    created = utc_now()
    group = f"{bd.label} {bd.device} {created}"
    rows: list[tuple[str, float, float, float, int, list[str], bool]] = [
        (k.kind, k.roofline_flops, k.bytes, k.time_s, k.n_calls,
         sorted(o.name for o in bd.ops if o.kind == k.kind), k.flops == 0)
        for k in bd.kinds
    ]
    rows.append(("total", bd.flops, bd.bytes, bd.step_time_s,
                 sum(o.n_calls for o in bd.ops), [], False))
    for kind, flops, nbytes, time_s, n_calls, names, estimated in rows:
        shape = {
            "workload": bd.workload, "size": bd.size, "batch_size": bd.batch_size,
            "kind": kind, "n_calls": n_calls, "ops": names, "group": group,
            "flops_estimated": estimated and flops > 0,
            "step_time_s": bd.step_time_s, "step_time_method": bd.step_time_method,
        }
        store.save_raw_op_row({
            "op": MODEL_OP,
            "label": f"{bd.workload} {kind}",
            "shape": json.dumps(shape),
            "precision": bd.precision,
            "device": bd.device,
            "device_name": bd.device_name,
            "hostname": socket.gethostname(),
            "pass_": TRAIN_STEP_PASS,
            "status": "ok",
            "flops": flops,
            "min_bytes": nbytes,
            "times": json.dumps([time_s]),
            "median_s": time_s,
            "achieved_flop_per_s": flops / time_s if time_s > 0 else None,
            "tag": tag,
            "machine": json.dumps({}),
            "created_at": created,
        })
