"""Noise verdicts are decided when a record is read, from the figures it stores; records
written with their verdict (before) read back with the verdict they stored.

``tests/data/noise_written.json`` is the ``noise`` the previous version wrote for each
measurement of :mod:`tests.noise_scenarios` (made by running that module against it):
the verdict (``flagged``, ``kinds``, ``by_kind``, ``reasons``) beside the figures. Each is
stored in a real SQLite store and read back; and the same measurement made now stores the
figures only, from which the same verdict is read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from accelbench.render import noise_text
from accelbench.result import Result
from accelbench.spec import RunSpec
from accelbench.store import open_store
from accelbench.verdicts import (
    KIND_PHRASES,
    read_verdict,
    reasons_by_kind,
    verdict_label,
    verdict_lines,
)
from tests.noise_scenarios import SCENARIOS, measure

WRITTEN: dict[str, dict[str, Any]] = json.loads(
    (Path(__file__).parent / "data" / "noise_written.json").read_text())
VERDICT_KEYS = ("flagged", "kinds", "by_kind", "reasons")


def _record(rid: str, noise: dict[str, Any]) -> Result:
    return Result(id=rid, spec=RunSpec(workload="lstm", size="tiny", batch_size=4),
                  status="ok", sample_unit="sequence", samples_per_step=4, noise=noise,
                  finished_at="2026-12-01T00:00:00.000+00:00")


def _stored_and_read(tmp_path: Path, records: dict[str, dict[str, Any]]) -> dict[str, Result]:
    """Each ``noise`` in a record saved to a real store, then read back from it."""
    ids = {name: f"{i:04d}-{name}" for i, name in enumerate(records)}
    with open_store(str(tmp_path / "r.db")) as st:
        for name, noise in records.items():
            st.save(_record(ids[name], noise))
    with open_store(str(tmp_path / "r.db")) as st:
        back = {name: st.get(ids[name]) for name in records}
    assert all(r is not None for r in back.values())
    return {name: r for name, r in back.items() if r is not None}


def _words(noise: dict[str, Any]) -> list[str]:
    """Every way a verdict is worded: a table's, a warning's and the label."""
    return [*verdict_lines(noise), *verdict_lines(noise, KIND_PHRASES), verdict_label(noise)]


def test_the_fixture_covers_every_verdict_and_wording() -> None:
    assert set(WRITTEN) == set(SCENARIOS)
    kinds = {tuple(w["kinds"]) for w in WRITTEN.values()}
    assert kinds == {(), ("contention",), ("unstable",), ("contention", "unstable")}
    reasons = " | ".join(r for w in WRITTEN.values() for r in w["reasons"])
    for words in ("during the measurement", "before the measurement", "stolen by the",
                  "other process(es) used cuda:0", "was slowed down", "clustered in time",
                  "q3/q1 = 1.45 in the fast mode", "trimmed mean +15%", "limit for jax/cpu"):
        assert words in reasons, words
    assert not WRITTEN["busy_at_the_threshold"]["flagged"]


def test_old_records_read_back_with_the_verdict_they_stored(tmp_path: Path) -> None:
    back = _stored_and_read(tmp_path, WRITTEN)
    for name, old in WRITTEN.items():
        r = back[name]
        assert r.noise == old, name
        assert r.noisy is old["flagged"], name
        assert r.noise_kinds == tuple(old["kinds"]), name
        assert r.noise_reasons == tuple(old["reasons"]), name
        assert reasons_by_kind(r.noise) == old["by_kind"], name
        assert read_verdict(r.noise) == {k: old[k] for k in VERDICT_KEYS}, name
        summary = r.summary()
        assert (summary["noisy"], summary["noise_kinds"], summary["noise_reasons"]) == (
            old["flagged"], old["kinds"], old["reasons"]), name


def test_the_same_measurement_now_stores_figures_and_reads_the_same_verdict(
        tmp_path: Path) -> None:
    now = {name: measure(name) for name in SCENARIOS}
    back = _stored_and_read(tmp_path, now)
    for name, old in WRITTEN.items():
        stored = now[name]
        assert not set(VERDICT_KEYS) & set(stored), name  # the verdict is not stored
        r = back[name]
        assert r.noise == stored, name  # the figures round-trip through the store
        assert read_verdict(r.noise) == {k: old[k] for k in VERDICT_KEYS}, name
        assert (r.noisy, r.noise_kinds, r.noise_reasons) == (
            old["flagged"], tuple(old["kinds"]), tuple(old["reasons"])), name
        assert _words(r.noise) == _words(old), name
        assert noise_text(r) == noise_text(_record(name, old)), name
        # The rest of the record is what it was: the same figures, the same descriptions.
        assert stored["described"] == old["described"], name
        assert stored["host"] == old["host"], name
        assert {k: v for k, v in stored["times"].items() if k != "groups"} == old["times"]
        assert stored["gpu"].get("other_pids") == old["gpu"].get("other_pids"), name


def test_a_stored_verdict_wins_over_its_figures() -> None:
    """A record written with its verdict keeps it, whatever its figures say now (a
    threshold moved since, say): its words are not judged again."""
    busy = WRITTEN["busy"]
    cleared = {**busy, "flagged": False, "kinds": [], "by_kind": {}, "reasons": []}
    r = _record("c", cleared)
    assert r.noise["host"]["during"]["other_cores"] == pytest.approx(0.9)
    assert not r.noisy and r.noise_kinds == () and r.noise_reasons == ()
    # Its figures alone (the verdict keys dropped) are judged: a busy machine.
    figures = {k: v for k, v in busy.items() if k not in VERDICT_KEYS}
    assert _record("f", figures).noise_kinds == ("contention",)


def test_records_from_0_3_read_by_the_wording_of_their_reasons(tmp_path: Path) -> None:
    """0.3 stored ``flagged`` and ``reasons`` only; the shape checks' reasons are unstable
    timing, any other (and a flag without a reason) contention, as 0.4 read them."""
    old = {
        "mixed": {"flagged": True, "reasons": [
            "step times spread widely: q3/q1 = 1.49 (> 1.25)",
            "other processes used 1.20 CPU cores during the measurement (more than 0.5)"]},
        "bare": {"flagged": True},
        "clean": {"flagged": False, "reasons": []},
        "unprobed": {},
    }
    back = _stored_and_read(tmp_path, old)
    mixed = back["mixed"]
    assert mixed.noisy and mixed.noise_kinds == ("contention", "unstable")
    assert mixed.noise_reasons == tuple(old["mixed"]["reasons"])  # the stored order
    assert verdict_lines(mixed.noise) == [
        "busy machine: other processes used 1.20 CPU cores during the measurement "
        "(more than 0.5)",
        "step times vary: step times spread widely: q3/q1 = 1.49 (> 1.25)"]
    assert back["bare"].noisy and back["bare"].noise_kinds == ("contention",)
    assert verdict_lines(back["bare"].noise) == ["busy machine"]
    for name in ("clean", "unprobed"):
        assert not back[name].noisy and back[name].noise_kinds == () \
            and back[name].noise_reasons == ()


def test_modes_are_worded_in_milliseconds_to_three_figures() -> None:
    from accelbench.verdicts import describe_modes

    assert describe_modes({"low_s": 0.01234, "high_s": 0.000444, "high_share": 0.4}) == \
        "12.3 ms (60%) and 0.444 ms (40%)"


def test_a_gpu_with_no_process_listed_is_not_shared() -> None:
    """NVML lists no process (none has a context yet, or it cannot see them): no other
    process, no remark, no verdict."""
    from tests.noise_scenarios import _gpu_state, _probe, _tight, eight_cpus

    with eight_cpus():
        probe = _probe(0.1, device="cuda:0", gpu=(_gpu_state([], []), _gpu_state([], [])))
        stored = probe.verdict(_tight(), 0.01)
    assert stored["gpu"]["other_pids"] == [] and "pid_remark" not in stored["gpu"]
    assert read_verdict(stored)["flagged"] is False
