"""The two noise verdicts of a record, read back: which were reached, their reasons, and
their words. Pure Python (no numpy, no psutil): tables, reports and the CLI import it.

A record's ``noise`` (:mod:`accelbench.execution.noise` writes it) has ``flagged``,
``kinds`` and ``by_kind`` since the two verdicts; records from before have
``flagged`` and ``reasons`` only, and are sorted by their reasons' wording here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CONTENTION = "contention"
"""Verdict: something else used the case's CPUs or GPU, or the GPU slowed down."""
UNSTABLE = "unstable"
"""Verdict: the step times vary more than a quiet run of the case's kind does."""
KINDS = (CONTENTION, UNSTABLE)
KIND_LABELS = {CONTENTION: "busy machine", UNSTABLE: "step times vary"}
"""How a table or a report names each verdict."""
KIND_PHRASES = {CONTENTION: "measured on a busy machine", UNSTABLE: "step times vary"}
"""How a warning about one case words each verdict."""


_SHAPE_WORDING = ("step times", "trimmed mean", "q3/q1", "two modes")
"""Words of the shape checks' reasons in records from before ``by_kind``."""


def reasons_by_kind(noise: Mapping[str, Any]) -> dict[str, list[str]]:
    """A record's reason lines by verdict, in :data:`KINDS` order (only the verdicts
    reached). A record from before the two verdicts is sorted by its wording: the shape
    checks' reasons are unstable timing, anything else (host and GPU competition, which
    is what "noisy" meant then) contention."""
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


def kinds_of(noise: Mapping[str, Any]) -> tuple[str, ...]:
    """The verdicts a record reached (empty for a clean or unprobed case)."""
    return tuple(reasons_by_kind(noise))


def verdict_lines(noise: Mapping[str, Any], words: Mapping[str, str] = KIND_LABELS
                  ) -> list[str]:
    """One line per verdict: ``busy machine: ...`` / ``step times vary: ...`` (``words``:
    :data:`KIND_LABELS` or :data:`KIND_PHRASES`)."""
    return [words[k] + (": " + "; ".join(rs) if rs else "")
            for k, rs in reasons_by_kind(noise).items()]


def verdict_label(noise: Mapping[str, Any]) -> str:
    """``busy machine``, ``step times vary``, both joined by `` and ``, or empty."""
    return " and ".join(KIND_LABELS[k] for k in kinds_of(noise))
