"""A stored result record: the checks it must pass to be read back, and the read itself
(what :mod:`~accelbench.store.results` and ``accelbench store check`` both need)."""

from __future__ import annotations

import json

from accelbench.result import STATUSES, Result
from accelbench.store.base import unreadable_why


def _is_num(value: object, *, optional: bool = True) -> bool:
    if value is None:
        return optional
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_stats(r: Result) -> None:
    st = r.stats
    if st is None:
        return
    for name in ("median_s", "mean_s", "trimmed_mean_s", "trim_fraction", "std_s",
                 "min_s", "max_s", "samples_per_s"):
        if not _is_num(getattr(st, name), optional=False):
            raise TypeError(f"stats.{name} is not a number: {getattr(st, name)!r}")
    if isinstance(st.n, bool) or not isinstance(st.n, int):
        raise TypeError(f"stats.n is not an integer: {st.n!r}")
    ci = st.samples_per_s_ci95
    if ci is not None and (len(ci) != 2 or not all(_is_num(v, optional=False) for v in ci)):
        raise TypeError("stats.samples_per_s_ci95 is not a pair of numbers")
    if not _is_num(st.ci_rel_halfwidth):
        raise TypeError("stats.ci_rel_halfwidth is not a number")


def check_result(r: Result) -> None:
    """Types of what readers compute with; ``from_dict`` builds whatever it is given.

    Raises:
        TypeError, ValueError: the record's field named in the message is wrong.
    """
    _check_figures(r)
    _check_fields(r)
    _check_stats(r)
    _check_energy(r)


def _check_figures(r: Result) -> None:
    """Identity, status, units and the record's single figures."""
    if not isinstance(r.id, str) or not r.id:
        raise TypeError("id is not a non-empty string")
    if r.status not in STATUSES:
        raise ValueError(f"unknown status {r.status!r}")
    if not isinstance(r.sample_unit, str):
        raise TypeError("sample_unit is not a string")
    if isinstance(r.samples_per_step, bool) or not isinstance(r.samples_per_step, int):
        raise TypeError(f"samples_per_step is not an integer: {r.samples_per_step!r}")
    if r.param_count is not None and (
        isinstance(r.param_count, bool) or not isinstance(r.param_count, int)
    ):
        raise TypeError(f"param_count is not an integer: {r.param_count!r}")
    for name in ("build_time_s", "compile_s", "final_loss", "forward_flop_per_sample",
                 "flop_per_sample", "peak_flop_per_s"):
        if not _is_num(getattr(r, name)):
            raise TypeError(f"{name} is not a number: {getattr(r, name)!r}")


def _check_fields(r: Result) -> None:
    """The step times, the record's objects, its times and suite id."""
    for name in ("iteration_times_s", "warmup_times_s"):
        # A set of the values' types: one pass in C over a long list of step times.
        if not {type(v) for v in getattr(r, name)} <= {int, float}:
            raise TypeError(f"{name} holds a value that is not a number")
    for name in ("machine", "noise", "backend_extra", "power_timeline"):
        if not isinstance(getattr(r, name), dict):
            raise TypeError(f"{name} is not an object")
    for name in ("started_at", "finished_at"):
        if not isinstance(getattr(r, name), str):
            raise TypeError(f"{name} is not a string")
    if r.suite_id is not None and not isinstance(r.suite_id, str):
        raise TypeError("suite_id is not a string")


def _check_energy(r: Result) -> None:
    """Each energy reading's figures, source and device."""
    for e in r.energy:
        for name in ("energy_j", "avg_power_w", "peak_power_w", "energy_j_per_sample",
                     "window_s", "idle_power_w", "dynamic_energy_j_per_sample",
                     "cross_check_rel_diff"):
            if not _is_num(getattr(e, name)):
                raise TypeError(f"energy.{name} is not a number: {getattr(e, name)!r}")
        if not isinstance(e.source, str) or not isinstance(e.device, str):
            raise TypeError("energy source or device is not a string")



def read_record(rid: object, blob: object) -> tuple[Result | None, str | None]:
    """The result the ``results`` row ``rid`` with ``record_json`` ``blob`` holds and
    None, or None and why it cannot be read back (what every reader needs of it)."""
    try:
        if not isinstance(blob, str):
            raise TypeError(f"record_json is {type(blob).__name__}, not text")
        data = json.loads(blob)
        if not isinstance(data, dict):
            raise TypeError(f"record is a JSON {type(data).__name__}, not an object")
        # Result.from_dict tolerates records of older schema versions (missing keys).
        result = Result.from_dict(data)
        check_result(result)
    except Exception as exc:  # noqa: BLE001 - any failure is the record's
        return None, f"record {rid}: {unreadable_why(exc)}"
    return result, None
