"""The record's ``input`` section: what a case with ``--data generated|PATH`` measured of
its input pipeline (:class:`InputStats`), and the loader workers' CPU use beside the cores
the case could use (:class:`LoaderCpu`).

Plain data (no framework, no I/O): :mod:`accelbench.data.stall` fills it in inside the
worker, the store keeps it inside the record (:meth:`InputStats.to_dict`), and ``run``,
``results show``, ``compare``, the report and the exports read it. The input-bound verdict
is read from these figures (:mod:`accelbench.verdicts`), never stored.

The JSON form is the one the first slice of ``--data`` wrote (a flat object; measured keys
present only when measured), so records written then read back the same; keys this
version does not know (sections added by later versions) are carried through unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any


def _pair(value: Any) -> tuple[float, float] | None:
    return (float(value[0]), float(value[1])) if value is not None else None


@dataclass(frozen=True, kw_only=True, slots=True)
class LoaderCpu:
    """CPU time the input pipeline used over the measured window, beside the cores the
    case's process may use: the evidence behind an input-bound verdict."""

    cpu_s: float | None = None
    """CPU seconds (user + system) the loader spent in the window: the DataLoader worker
    processes' own, or with 0 workers the training process's time waiting for batches
    (it decodes them itself). None where not read (``unavailable`` says why)."""
    wall_s: float | None = None
    """Wall-clock seconds of the window the CPU time covers."""
    cores_available: int | None = None
    """CPUs the case's process may use (its affinity mask), training included."""
    processes: int = 0
    """Worker processes read (0 with ``--loader-workers 0``: the training process)."""
    method: str = ""
    """How the CPU time was read, in words."""
    unavailable: str = ""
    """Why there is no figure (empty where there is one)."""

    @property
    def cores_used(self) -> float | None:
        """Cores the loader kept busy on average over the window."""
        if self.cpu_s is None or not self.wall_s:
            return None
        return self.cpu_s / self.wall_s

    def to_dict(self) -> dict[str, Any]:
        return {"cpu_s": self.cpu_s, "wall_s": self.wall_s,
                "cores_available": self.cores_available, "processes": self.processes,
                "method": self.method, "unavailable": self.unavailable}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoaderCpu:
        return cls(cpu_s=data.get("cpu_s"), wall_s=data.get("wall_s"),
                   cores_available=data.get("cores_available"),
                   processes=int(data.get("processes") or 0),
                   method=str(data.get("method") or ""),
                   unavailable=str(data.get("unavailable") or ""))


_OPTIONAL = {"json": "optional"}
"""A field written only where measured (the export schema does not require it)."""
_FACTS = ("source", "path", "layout", "samples", "loader_workers", "pin_memory",
          "prefetch_factor", "loader", "method", "wait_s")
"""Keys the first slice always wrote, in its order."""
_MEASURED = ("wait_median_s", "wait_median_ci95_s", "wait_mean_s", "stall_fraction",
             "loader_cpu")
"""Keys written only when measured (no batch taken in the window: none of them)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class InputStats:
    """The input pipeline of one case and what it cost the step."""

    source: str
    """``generated`` (accelbench's dataset) or ``path`` (the user's folder)."""
    path: str = ""
    """The folder read (empty for a plugin's own dataset)."""
    layout: str = ""
    """``imagefolder``, ``token_shards`` or ``plugin``."""
    samples: int | None = None
    """Samples in the dataset (images, or token windows)."""
    loader_workers: int | None = None
    pin_memory: bool | None = None
    prefetch_factor: int | None = None
    loader: str = ""
    """The loader, in words (``torch DataLoader``)."""
    method: str = ""
    """How the wait was timed, in words."""
    wait_s: tuple[float, ...] = ()
    """Each measured step's wait for its batch, in order (the measured window only)."""
    wait_median_s: float | None = field(default=None, metadata=_OPTIONAL)
    wait_median_ci95_s: tuple[float, float] | None = field(default=None, metadata=_OPTIONAL)
    """95% bootstrap CI of :attr:`wait_median_s`."""
    wait_mean_s: float | None = field(default=None, metadata=_OPTIONAL)
    stall_fraction: float | None = field(default=None, metadata=_OPTIONAL)
    """The window's waits over its step time: the share of training spent waiting."""
    loader_cpu: LoaderCpu | None = field(default=None, metadata=_OPTIONAL)
    """The loader's CPU use in the window (None in records from before it was read)."""
    extra: dict[str, Any] = field(default_factory=dict, metadata={"json": "spread"})
    """Keys of the JSON this version does not know, carried through as they were."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: the first slice's keys in its order, measured ones only where
        measured, then the keys this version does not know."""
        out: dict[str, Any] = {
            "source": self.source, "path": self.path, "layout": self.layout,
            "samples": self.samples, "loader_workers": self.loader_workers,
            "pin_memory": self.pin_memory, "prefetch_factor": self.prefetch_factor,
            "loader": self.loader, "method": self.method, "wait_s": list(self.wait_s),
        }
        measured = {
            "wait_median_s": self.wait_median_s,
            "wait_median_ci95_s": (list(self.wait_median_ci95_s)
                                   if self.wait_median_ci95_s else None),
            "wait_mean_s": self.wait_mean_s,
        }
        if self.wait_median_s is not None:
            out.update(measured)
            out["stall_fraction"] = self.stall_fraction
        if self.loader_cpu is not None:
            out["loader_cpu"] = self.loader_cpu.to_dict()
        out.update(self.extra)
        return out

    def with_sections(self, **sections: Any) -> InputStats:
        """This record with more keys in its JSON (a section this class does not type
        yet, e.g. ``analysis``), kept through every read and write as given."""
        return replace(self, extra={**self.extra, **sections})

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InputStats:
        cpu = data.get("loader_cpu")
        return cls(
            source=str(data.get("source") or ""), path=str(data.get("path") or ""),
            layout=str(data.get("layout") or ""), samples=data.get("samples"),
            loader_workers=data.get("loader_workers"), pin_memory=data.get("pin_memory"),
            prefetch_factor=data.get("prefetch_factor"),
            loader=str(data.get("loader") or ""), method=str(data.get("method") or ""),
            wait_s=tuple(data.get("wait_s") or ()),
            wait_median_s=data.get("wait_median_s"),
            wait_median_ci95_s=_pair(data.get("wait_median_ci95_s")),
            wait_mean_s=data.get("wait_mean_s"), stall_fraction=data.get("stall_fraction"),
            loader_cpu=LoaderCpu.from_dict(cpu) if cpu else None,
            extra={k: v for k, v in data.items() if k not in _FACTS + _MEASURED},
        )
