"""The verdicts of a record, decided when it is read: the two noise verdicts (which were
reached, their reasons, and their words) and the input-bound verdict of a case that read
data (:func:`input_bound`). Pure Python (no numpy, no psutil): tables, reports and the CLI
import it.

A record's ``noise`` (:mod:`accelbench.execution.noise` writes it) holds the figures a
verdict rests on, and the rules it was measured under:

- **contention** (:data:`CONTENTION`, worded "busy machine"): in ``host``, the window
  judged (``judged``: ``during`` or ``before``; None when neither was long enough) and its
  other processes' CPU use (``other_cores``) against ``other_cores_max``
  (:data:`OTHER_CORES_MAX` when written), with the load average and the hypervisor's steal
  for the wording; in ``gpu``, other processes on the device (``other_pids``) and the
  throttle reasons read at the end of the window (``end``), of which
  :data:`GPU_SLOWDOWNS` count;
- **unstable timing** (:data:`UNSTABLE`, worded "step times vary"): in ``times``, the
  limits of the case's framework and device kind (``limits``), two modes clustered in
  time and how far they move the mean (``modes``), and the quartile ratio and trimmed-mean
  distance of each group checked (``groups``: the whole series, or each of two modes
  spread through the run).

Records written before verdicts were read (accelbench up to this change) hold the verdict
itself: ``flagged``, then ``kinds`` and ``by_kind`` since the two verdicts, or ``reasons``
only before. A record that holds ``flagged`` is read by its stored words, as it was written
(:func:`stored_by_kind`); its figures are not judged again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from accelbench.input_stats import InputStats

CONTENTION = "contention"
"""Verdict: something else used the case's CPUs or GPU, or the GPU slowed down."""
UNSTABLE = "unstable"
"""Verdict: the step times vary more than a quiet run of the case's kind does."""
KINDS = (CONTENTION, UNSTABLE)
KIND_LABELS = {CONTENTION: "busy machine", UNSTABLE: "step times vary"}
"""How a table or a report names each verdict."""
KIND_PHRASES = {CONTENTION: "measured on a busy machine", UNSTABLE: "step times vary"}
"""How a warning about one case words each verdict."""

OTHER_CORES_MAX = 0.5
"""Cores of CPU time other processes may use during a case before it is flagged (the
record keeps the figure it was measured under: ``host["other_cores_max"]``)."""
STEAL_MENTIONED = 0.05
"""Cores stolen by the hypervisor above which a busy-machine reason mentions the steal."""
GPU_SLOWDOWNS = (
    "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown",
)
"""Throttle reasons that mean the GPU ran slower than it would on a quiet, cool machine."""

_JUDGED_WORDS = {
    "during": "during the measurement",
    "before": "before the measurement (the measured window was too short to judge)",
}
_SHAPE_WORDING = ("step times", "trimmed mean", "q3/q1", "two modes")
"""Words of the shape checks' reasons in records from before ``by_kind``."""


# -- the verdicts from the figures -------------------------------------------------------


def contention_reasons(host: Mapping[str, Any], gpu: Mapping[str, Any]) -> list[str]:
    """The busy-machine reasons of a record's ``host`` and ``gpu`` figures (empty: none)."""
    reasons: list[str] = []
    judged = host.get("judged")
    window = host.get(judged) if judged in _JUDGED_WORDS else None
    other = window.get("other_cores") if isinstance(window, Mapping) else None
    limit = host.get("other_cores_max", OTHER_CORES_MAX)
    if window is not None and other is not None and other > limit:
        load = window.get("load_avg_1m")
        steal = window.get("steal_cores") or 0.0
        extra = f"; load average {load:.2f} on {host.get('cpus')} CPUs" \
            if load is not None else ""
        if steal > STEAL_MENTIONED:
            extra += f"; {steal:.2f} of them stolen by the hypervisor"
        reasons.append(f"other processes used {other:.2f} CPU cores {_JUDGED_WORDS[str(judged)]} "
                       f"(more than {limit:g}){extra}")
    device = gpu.get("device")
    others = sorted(int(p) for p in gpu.get("other_pids") or ())
    if others:
        reasons.append(f"{len(others)} other process(es) used {device} during the case "
                       f"(PIDs {', '.join(str(p) for p in others)})")
    end = gpu.get("end") or {}
    slow = [r for r in end.get("throttle_reasons") or () if r in GPU_SLOWDOWNS]
    if slow:
        reasons.append(f"{device} was slowed down at the end of the window: {', '.join(slow)}")
    return reasons


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def describe_modes(modes: Mapping[str, Any]) -> str:
    """``0.444 ms (60%) and 0.651 ms (40%)``."""
    return (f"{_ms(modes['low_s'])} ({1 - modes['high_share']:.0%}) and "
            f"{_ms(modes['high_s'])} ({modes['high_share']:.0%})")


def clustered_text(modes: Mapping[str, Any]) -> str:
    """The start of the words on two modes clustered in time."""
    return (f"two modes clustered in time, {describe_modes(modes)} (runs test z = "
            f"{modes['arrangement']['z']:.1f}: bursts or a level shift")


def unstable_reasons(times: Mapping[str, Any]) -> list[str]:
    """The step-times-vary reasons of a record's ``times`` figures (empty: none)."""
    reasons: list[str] = []
    limits = times.get("limits") or {}  # every record with modes or groups has them
    key = limits.get("key")
    modes = times.get("modes")
    if isinstance(modes, Mapping) and not modes["arrangement"]["spread"] \
            and modes["shift"] > limits["shift"]:
        reasons.append(f"{clustered_text(modes)}, moving the mean by about "
                       f"{modes['shift']:.1%})")
    for group in times.get("groups") or ():
        where = f" in the {group['mode']} mode" if group.get("mode") else ""
        ratio, rel = group.get("q3_q1"), group.get("trimmed_rel_diff")
        if ratio is not None and ratio > limits["q3_q1"]:
            reasons.append(f"q3/q1 = {ratio:.2f}{where} (more than {limits['q3_q1']:g}, "
                           f"the limit for {key})")
        if rel is not None and abs(rel) > limits["trimmed"]:
            reasons.append(f"trimmed mean {rel:+.0%} from the median{where} (more than "
                           f"{limits['trimmed']:.0%}): outliers or a second mode")
    return reasons


# -- reading a record ----------------------------------------------------------------------


def stored_by_kind(noise: Mapping[str, Any]) -> dict[str, list[str]]:
    """The verdicts of a record written with them (it holds ``flagged``), as stored: its
    ``by_kind``, or, before the two verdicts, its ``reasons`` sorted by their wording (the
    shape checks' reasons are unstable timing, anything else, host and GPU competition,
    which is what "noisy" meant then, contention)."""
    if not noise.get("flagged"):
        return {}
    stored = noise.get("by_kind")
    if isinstance(stored, Mapping):
        return {k: [str(r) for r in stored.get(k) or ()] for k in KINDS if stored.get(k)}
    out: dict[str, list[str]] = {}
    for reason in (str(r) for r in noise.get("reasons") or ()):
        kind = UNSTABLE if any(w in reason for w in _SHAPE_WORDING) else CONTENTION
        out.setdefault(kind, []).append(reason)
    if not out:  # flagged without a reason line: competition is what 0.3 meant
        out[CONTENTION] = []
    return {k: out[k] for k in KINDS if k in out}


def written_with_verdict(noise: Mapping[str, Any]) -> bool:
    """Whether a record holds its verdict (written before verdicts were read)."""
    return "flagged" in noise


def reasons_by_kind(noise: Mapping[str, Any]) -> dict[str, list[str]]:
    """A record's reason lines by verdict, in :data:`KINDS` order (only the verdicts
    reached): judged from its figures, or as stored in an older record."""
    if written_with_verdict(noise):
        return stored_by_kind(noise)
    by_kind = {CONTENTION: contention_reasons(noise.get("host") or {}, noise.get("gpu") or {}),
               UNSTABLE: unstable_reasons(noise.get("times") or {})}
    return {k: by_kind[k] for k in KINDS if by_kind[k]}


def is_flagged(noise: Mapping[str, Any]) -> bool:
    """Whether either verdict was reached (an older record: its stored ``flagged``)."""
    if written_with_verdict(noise):
        return bool(noise.get("flagged"))
    return bool(reasons_by_kind(noise))


def kinds_of(noise: Mapping[str, Any]) -> tuple[str, ...]:
    """The verdicts a record reached (empty for a clean or unprobed case)."""
    return tuple(reasons_by_kind(noise))


def reasons_of(noise: Mapping[str, Any]) -> tuple[str, ...]:
    """Every reason line of a record, verdict by verdict (an older record's ``reasons`` as
    stored, in their order)."""
    if written_with_verdict(noise):
        return tuple(str(r) for r in noise.get("reasons") or ())
    return tuple(r for rs in reasons_by_kind(noise).values() for r in rs)


def read_verdict(noise: Mapping[str, Any]) -> dict[str, Any]:
    """The verdict in the keys records used to store it: ``flagged`` (either verdict),
    ``kinds``, ``by_kind`` and ``reasons``."""
    by_kind = reasons_by_kind(noise)
    return {"flagged": is_flagged(noise), "kinds": list(by_kind), "by_kind": by_kind,
            "reasons": list(reasons_of(noise))}


def verdict_lines(noise: Mapping[str, Any], words: Mapping[str, str] = KIND_LABELS
                  ) -> list[str]:
    """One line per verdict: ``busy machine: ...`` / ``step times vary: ...`` (``words``:
    :data:`KIND_LABELS` or :data:`KIND_PHRASES`)."""
    return [words[k] + (": " + "; ".join(rs) if rs else "")
            for k, rs in reasons_by_kind(noise).items()]


def verdict_label(noise: Mapping[str, Any]) -> str:
    """``busy machine``, ``step times vary``, both joined by `` and ``, or empty."""
    return " and ".join(KIND_LABELS[k] for k in kinds_of(noise))


# -- input-bound: a case whose step waited for its data ----------------------------------

INPUT_BOUND_STALL = 0.10
"""Stall fraction (the window's waits for batches over its step time) above which a case
that read data is input-bound: more than a tenth of training waited for the loader."""
BUSY_SHARE = 0.8
"""Share of a budget of cores (the cores available, or one per worker) at which the
loader's CPU use counts as using it up."""


@dataclass(frozen=True, slots=True)
class InputVerdict:
    """Why a case is input-bound and what to change."""

    evidence: str
    advice: str

    @property
    def line(self) -> str:
        return f"input-bound: {self.evidence}; {self.advice}"


def input_bound(stats: InputStats | None) -> InputVerdict | None:
    """The input-bound verdict of a case, or None (synthetic data, no stall fraction, or a
    stall fraction at or below :data:`INPUT_BOUND_STALL`)."""
    if stats is None or stats.stall_fraction is None \
            or stats.stall_fraction <= INPUT_BOUND_STALL:
        return None
    from accelbench.durations import fmt_time

    evidence = (f"the step waited for its batch {100 * stats.stall_fraction:.1f}% of the "
                f"time (over {100 * INPUT_BOUND_STALL:.0f}%)")
    if stats.wait_median_s is not None:
        evidence += f", {fmt_time(stats.wait_median_s, 2)} per step (median)"
    return InputVerdict(evidence=evidence, advice=_input_advice(stats))


def _input_advice(stats: InputStats) -> str:
    """What to change, from the loader's CPU use against the cores available."""
    cpu, workers = stats.loader_cpu, int(stats.loader_workers or 0)
    used = cpu.cores_used if cpu is not None else None
    avail = cpu.cores_available if cpu is not None else None
    if workers == 0:
        spent = (f" and kept {used:.3g} cores busy doing it" if used is not None else "")
        return (f"the training process prepares each batch itself (--loader-workers 0){spent}: "
                f"set --loader-workers (this process may use {avail or 'several'} cores)")
    if used is None or not avail:
        why = cpu.unavailable if cpu is not None and cpu.unavailable else "not recorded"
        return (f"loader CPU unavailable ({why}): try more --loader-workers, a faster "
                "decoder, a larger prefetch or a cached dataset")
    busy = f"the {workers} loader workers used {used:.3g} of {avail} cores"
    if used >= BUSY_SHARE * avail:
        return (f"{busy}, all there is, so more workers cannot help: make each sample "
                "cheaper (a faster decoder, e.g. pillow-simd or decoding on the GPU; "
                "lighter augmentation; a dataset cached decoded at the training "
                "resolution) or use more cores per accelerator")
    if used >= BUSY_SHARE * workers:
        return f"{busy}, each worker busy nearly all the time: raise --loader-workers " \
               f"(up to {avail})"
    return (f"{busy}, idle part of the time: the wait is in reading files or handing "
            "batches over, not in decoding; cache the dataset (local disk or page cache) "
            "or prefetch more batches")
