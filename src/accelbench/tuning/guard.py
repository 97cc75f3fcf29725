"""Apply a case's device settings safely: originals saved first, restored always.

Order of every change: read the knob's original, write it to the store's
``pending_restores``, then change the knob. After the case (success, an exception,
Ctrl-C, SIGTERM turned into an exception) the originals go back in reverse order and
their rows are deleted. A process killed with SIGKILL cannot do that: the next
accelbench process on the host calls :func:`restore_orphans`, which puts back every
pending original whose owner process is gone. Each restore is one line on stderr.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from accelbench.errors import AccelbenchError, ConfigError, UnsupportedError
from accelbench.spec import DeviceSettings
from accelbench.store import Store
from accelbench.store import restores as rs
from accelbench.store.base import pid_alive
from accelbench.tuning.base import GPU_KNOBS, Knob, knob_for

Log = Callable[[str], None]


def stderr_line(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@dataclass(frozen=True, kw_only=True, slots=True)
class Target:
    """Where each kind of knob lives: the GPU's vendor device string, e.g. ``nvidia:0``."""

    gpu: str | None = None

    def device_of(self, knob: str) -> str:
        if knob in GPU_KNOBS:
            if self.gpu is None:
                raise ConfigError(f"{knob} needs a GPU to tune (--gpu N)")
            return self.gpu
        return "cpu" if knob == "cpu_max_freq_khz" else "rapl"


def knobs_of(settings: DeviceSettings, target: Target) -> list[tuple[Knob, float]]:
    """The knobs ``settings`` sets, with their values, in field order."""
    return [(knob_for(target.device_of(name), name), float(value))
            for name, value in settings.given().items()]


def check_privileges(knobs: Sequence[Knob]) -> None:
    """Raise :class:`~accelbench.tuning.base.PrivilegeError` (or UnsupportedError) for the
    first knob that cannot be changed; nothing changes."""
    for knob in knobs:
        knob.check_writable()


@contextlib.contextmanager
def applied(store: Store, settings: DeviceSettings, target: Target, *,
            log: Log = stderr_line) -> Iterator[None]:
    """Set ``settings`` for the body of the ``with``; the originals come back after it
    whatever happens (and stay in ``pending_restores`` until they are back)."""
    knobs = knobs_of(settings, target)
    _refuse_if_busy(store, [k for k, _ in knobs])
    done: list[tuple[Knob, rs.PendingRestore]] = []
    try:
        for knob, value in knobs:
            original = knob.read()
            row = rs.add(store, device=knob.device, knob=knob.name, original=original)
            done.append((knob, row))
            knob.apply(value)
        yield
    finally:
        _put_back(store, done, log)


def _refuse_if_busy(store: Store, knobs: Sequence[Knob]) -> None:
    """Two sweeps changing one knob at once would each take the other's setting for the
    original: refuse while another live process on this host holds a pending restore."""
    mine = {(k.device, k.name) for k in knobs}
    for row in rs.pending(store):
        if ((row.device, row.knob) in mine and row.owner_pid != os.getpid()
                and pid_alive(row.owner_pid)):
            raise UnsupportedError(
                f"{row.device} {row.knob} is being changed by another accelbench process "
                f"(pid {row.owner_pid}); wait for it to finish"
            )


def _put_back(store: Store, done: list[tuple[Knob, rs.PendingRestore]], log: Log) -> None:
    failures = []
    for knob, row in reversed(done):
        try:
            knob.restore(row.original)
        except AccelbenchError as exc:  # keep the row: the next accelbench tries again
            failures.append(f"{knob.device} {knob.name}: {exc}")
            continue
        rs.remove(store, row.id)
        log(f"accelbench: restored {knob.device} {knob.name} to {knob.describe(row.original)}")
    for f in failures:
        log(f"accelbench: warning: could not restore {f} (kept as pending; the next "
            "accelbench command on this host retries)")


def restore_orphans(store: Store, *, log: Log = stderr_line) -> int:
    """Put back what killed processes on this host left changed; returns how many."""
    count = 0
    for row in rs.orphaned(store):
        try:
            knob = knob_for(row.device, row.knob)
            knob.restore(row.original)
        except AccelbenchError as exc:
            log(f"accelbench: warning: could not restore {row.device} {row.knob} left by "
                f"pid {row.owner_pid}: {exc}")
            continue
        rs.remove(store, row.id)
        count += 1
        log(f"accelbench: restored {row.device} {row.knob} to {knob.describe(row.original)} "
            f"(left changed by pid {row.owner_pid}, which is gone)")
    return count


def restore_at_startup(db: str | None, *, log: Log = stderr_line) -> int:
    """:func:`restore_orphans` on the store at ``db`` when it has anything pending for this
    host (cheap otherwise: no store is created or migrated)."""
    if not rs.host_has_pending(db):
        return 0
    from accelbench.store import open_store

    with open_store(db) as st:
        return restore_orphans(st, log=log)
