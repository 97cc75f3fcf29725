"""What every sink shares: the :class:`Sink` interface, the :class:`SinkSet` that hands each
stored result to the open sinks, and the fields trackers record of a case. The sinks are
opened by :mod:`accelbench.sinks.factory`; this module imports no sink."""

from __future__ import annotations

import warnings
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from accelbench import jsonout
from accelbench.errors import AccelbenchWarning
from accelbench.result import ONE_RUN_SCOPE, Result


def case_metrics(result: Result) -> dict[str, float]:
    """The case's figures the trackers (MLflow, W&B) keep as metrics (only those known)."""
    st = result.stats
    ci = st.samples_per_s_ci95 if st else None
    values: dict[str, float | None] = {
        "samples_per_s": st.samples_per_s if st else None,
        "samples_per_s_ci95_low": ci[0] if ci else None,
        "samples_per_s_ci95_high": ci[1] if ci else None,
        "ci_rel_halfwidth": st.ci_rel_halfwidth if st else None,
        "step_time_median_s": st.median_s if st else None,
        "iterations": float(st.n) if st else None,
        "energy_j_per_sample": result.energy_j_per_sample,
        "avg_power_w": result.avg_power_w,
        "mfu": result.mfu,
        "peak_memory_bytes": float(result.peak_memory_bytes)
        if result.peak_memory_bytes is not None else None,
        "compile_s": result.compile_s,
    }
    return {k: float(v) for k, v in jsonout.jsonable(values).items() if v is not None}


def case_tags(result: Result, store_label: str | None) -> dict[str, str]:
    """The tags of a case's tracker run (suite id, noise, status, boundary, store)."""
    st = result.stats
    return {
        "accelbench.result_id": result.id,
        "accelbench.suite_id": result.suite_id or "",
        "accelbench.status": result.status,
        "accelbench.noisy": str(result.noisy).lower(),
        "accelbench.noise_reasons": "; ".join(result.noise_reasons),
        "accelbench.ci_scope": ONE_RUN_SCOPE if st and st.samples_per_s_ci95 else "",
        "accelbench.energy_boundary": result.energy_boundary,
        "accelbench.energy_source": result.energy_source,
        "accelbench.sample_unit": result.sample_unit,
        "accelbench.store": store_label or "",
        "accelbench.version": result.accelbench_version,
    }


def epoch_ms(stamp: str | None) -> int | None:
    """A record's ISO time stamp as milliseconds since the epoch (None if unreadable)."""
    try:
        return int(datetime.fromisoformat(stamp).timestamp() * 1000)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


class Sink(Protocol):
    """One destination of finished cases."""

    name: str
    """Its flag, for messages (``--mllog``)."""

    def write(self, result: Result) -> None:
        """Send one stored result."""

    def close(self) -> None:
        """Flush and let go (after the last case)."""


class SinkSet:
    """The open sinks of one command: :meth:`emit` sends a stored result to each. A sink
    that fails says so in one warning line; the result stays stored and the other sinks
    and cases go on."""

    def __init__(self, sinks: list[Sink]) -> None:
        self.sinks = sinks

    def __bool__(self) -> bool:
        return bool(self.sinks)

    def emit(self, result: Result) -> None:
        for sink in self.sinks:
            try:
                sink.write(result)
            except Exception as exc:  # noqa: BLE001 - a sink never ends a suite
                warnings.warn(f"{sink.name}: case {result.id[:8]} not sent: "
                              f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}",
                              AccelbenchWarning, stacklevel=2)

    def close(self) -> None:
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as exc:  # noqa: BLE001
                warnings.warn(f"{sink.name}: {type(exc).__name__}: {exc}", AccelbenchWarning,
                              stacklevel=2)


def store_files_of(label: str | None) -> list[Path]:
    """The results store's file that ``label`` (:func:`store_label`: a SQLite store shows
    as its path, a server as a URL) names, as a write check's ``protected``."""
    if not label or "://" in label:
        return []
    return [Path(label)]


def store_label(store: Any, db: str | None = None) -> str | None:
    """The store an API call's ``store=``/``db=`` name as people see it (``display_url``:
    never a password), or None where nothing is stored."""
    from accelbench.errors import StoreError
    from accelbench.store import Store
    from accelbench.store.base import display_url, resolve_db_url

    if isinstance(store, Store):
        return display_url(store.url)
    if store is False or store is None:
        return None
    try:
        return display_url(resolve_db_url(store if isinstance(store, str) else db))
    except StoreError:
        return None
