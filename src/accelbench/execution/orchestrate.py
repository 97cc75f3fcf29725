"""Measuring planned cases: one case in its worker (FLOPs from the cache), the peak MFU
is computed against, and the cases of a suite run round-robin with claims in the store
(resume, two processes on one suite id, ``accelbench sweep``'s per-case settings).

Shared by :mod:`accelbench.api`, ``accelbench sweep`` and the Slurm launcher's jobs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime, timezone

from accelbench.execution.process import Progress, ProgressCallback, new_result_id, run_case
from accelbench.planning.cases import Case
from accelbench.result import Result
from accelbench.store import Store


def attach_peak(result: Result, st: Store) -> Result:
    """Record the peak MFU is computed against for the result's device and precision.

    The robust peak (:func:`accelbench.roofline.peaks.robust_peak`: best of the quiet
    measured peaks, else the cited theoretical one, else the best measured), never the
    latest, so a later measurement on a loaded machine does not move MFU. Which peak it
    is goes in ``machine["mfu_peak"]`` (``value``, ``kind``, ``source``, ``peak_id``,
    ``measured_at``). Without any, MFU stays None and says nothing it does not know.
    """
    if result.flop_per_sample is None:
        return result
    from accelbench.report.rows import device_name
    from accelbench.roofline.peaks import robust_peak

    peak = robust_peak(st, result.spec.device, result.spec.precision,
                       device_name=device_name(result) or None)
    if peak is None:
        return result
    return dataclasses.replace(result, peak_flop_per_s=peak.value,
                               machine={**result.machine, "mfu_peak": peak.to_dict()})


def measure_case(case: Case, suite_id: str | None, on_progress: ProgressCallback | None
                 ) -> Result:
    """One run of ``case`` in its worker, with the model's FLOPs from the cache (or
    counted by the worker and cached for the next case of this model)."""
    from accelbench.planning import facts
    from accelbench.workloads.registry import worker_plugins

    s = case.spec
    cached = facts.lookup(s.workload, s.size, s.framework)
    known = None if not cached or cached.get("flop_per_sample") is None else {
        k: cached.get(k) for k in facts.FLOP_KEYS}
    result = run_case(s, samples_per_step=case.samples_per_step, sample_unit=case.sample_unit,
                      plugins=worker_plugins(s.workload, s.framework), suite_id=suite_id,
                      on_progress=on_progress, known_flops=known)
    if known is None:
        facts.remember(s.workload, s.size, s.framework,
                       {k: getattr(result, k) for k in facts.FACT_KEYS})
    return result



@dataclass(frozen=True, slots=True)
class SuiteEvent:
    """What :func:`suite` reports to its caller as it goes."""

    kind: str
    """``plan``, ``skip``, ``start``, ``progress`` or ``done``."""
    index: int
    total: int
    case: Case | None = None
    result: Result | None = None
    progress: Progress | None = None


SuiteCallback = Callable[[SuiteEvent], None]


def new_suite_id(name: str) -> str:
    """A new suite (group) id: ``NAME-UTCSTAMP-RANDOM``."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"{name}-{stamp}-{new_result_id()[:6]}"



#: Slack added to a case's timeout for how long its claim holds (build, store, report).
CLAIM_SLACK_S = 300.0


def claim_key(case_key: str, repeat: int) -> str:
    """The claim of one run of a case: the case key for the first (as before repeats)."""
    return case_key if repeat == 0 else f"{case_key}#r{repeat + 1}"


def run_cases(
    st: Store,
    sid: str,
    cases: list[Case],
    force: bool,
    on_event: SuiteCallback | None,
    case_context: Callable[[Case], AbstractContextManager[object]] | None = None,
) -> list[Result]:
    """Run ``cases`` of suite ``sid``; ``case_context(case)``, when given, wraps each
    measurement (``accelbench sweep``: set the case's device settings, restore after)."""
    emit = on_event or (lambda _e: None)
    results: list[Result] = []
    stored = {} if force else st.case_key_counts(sid)
    # Round-robin: run r of every case before run r + 1 of any.
    plan = [(r, i, case) for r in range(max((c.spec.policy.repeats for c in cases), default=1))
            for i, case in enumerate(cases) if r < case.spec.policy.repeats]
    total = len(plan)
    emit(SuiteEvent("plan", 0, total))
    for n, (repeat, _i, case) in enumerate(plan):
        key = case.spec.case_key()
        claim = claim_key(key, repeat)
        if stored.get(key, 0) > repeat:
            emit(SuiteEvent("skip", n, total, case))
            continue
        # Another process running this suite id may hold or have finished the run.
        if not st.claim_case(sid, claim, ttl_s=case.spec.policy.timeout_s + CLAIM_SLACK_S,
                             force=force):
            emit(SuiteEvent("skip", n, total, case))
            continue
        try:
            if not force and st.case_key_counts(sid).get(key, 0) > repeat:
                # Stored by another process between the count above and the claim.
                emit(SuiteEvent("skip", n, total, case))
                continue
            emit(SuiteEvent("start", n, total, case))

            def forward(p: Progress, n: int = n, case: Case = case) -> None:
                emit(SuiteEvent("progress", n, total, case, progress=p))

            with case_context(case) if case_context else nullcontext():
                result = measure_case(case, sid, forward)
            if result.stored_here:  # a node without rank 0: that node stores the case
                result = attach_peak(result, st)
                st.save(result)
        finally:
            st.release_case(sid, claim)
        results.append(result)
        emit(SuiteEvent("done", n, total, case, result=result))
    return results
