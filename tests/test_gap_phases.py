"""Issue 46: the phases record by value: every field round-trips through the stored form,
old records missing fields read with the documented defaults, and the sum check sits at
its 10% tolerance from both sides."""

from __future__ import annotations

import json

from accelbench.phases import (
    SUM_TOLERANCE_REL,
    Difference,
    Loop,
    Phase,
    Phases,
)


def _full() -> Phases:
    fwd = Phase(name="forward", time_s=0.004, time_ci95_s=(0.0038, 0.0042),
                diff_time=Difference(value=0.0041, ci95=(0.0039, 0.0043), status="measured",
                                     note="t"),
                energy=Difference(value=0.2, ci95=(-0.01, 0.4), status="indistinguishable",
                                  note="e"),
                in_step=True, agrees=True, note="n1")
    inp = Phase(name="input", time_s=None, in_step=False, agrees=False, note="n2",
                energy=Difference(value=None, note="no sensor"))
    return Phases(
        phases=(inp, fwd), method="host timers", attribution_steps=20, step_time_s=0.01,
        sum_rel_diff=-0.05,
        loops=(Loop(name="forward", iterations=(10, 12), time_s=(0.004, 0.0041),
                    energy_j=(0.2, None)),),
        energy_source="counter", energy_note="bounded by trials", notes=("a", "b"))


def test_every_field_survives_the_stored_form() -> None:
    p = _full()
    stored = json.loads(json.dumps(p.to_dict()))
    assert Phases.from_dict(stored) == p
    assert stored["phases"][1]["time_ci95_s"] == [0.0038, 0.0042]
    assert stored["phases"][1]["energy"] == {"value": 0.2, "ci95": [-0.01, 0.4],
                                             "status": "indistinguishable", "note": "e"}
    assert stored["phases"][0]["in_step"] is False and stored["phases"][0]["agrees"] is False
    assert stored["loops"] == [{"name": "forward", "iterations": [10, 12],
                                "time_s": [0.004, 0.0041], "energy_j": [0.2, None]}]
    assert stored["notes"] == ["a", "b"] and stored["attribution_steps"] == 20
    assert p.get("forward") is p.phases[1] and p.get("backward") is None
    assert p.phases[1].energy_j == 0.2 and p.phases[0].energy_j is None
    assert Phase(name="backward", time_s=0.1).energy_j is None


def test_an_old_record_reads_with_the_defaults() -> None:
    p = Phases.from_dict({"phases": [{"name": "forward"}]})
    assert p.method == "" and p.attribution_steps == 0 and p.step_time_s is None
    assert p.energy_source == "unavailable" and p.energy_note == "" and p.notes == ()
    assert p.loops == ()
    [f] = p.phases
    assert f.time_s is None and f.time_ci95_s is None and f.diff_time is None
    assert f.in_step is True and f.agrees is None and f.note == ""
    d = Difference.from_dict({})
    assert d.value is None and d.status == "unavailable" and d.ci95 is None and d.note == ""
    assert Loop.from_dict({"name": "step"}) == Loop(name="step", iterations=(), time_s=())


def test_the_sum_check_is_ten_percent_either_way() -> None:
    assert SUM_TOLERANCE_REL == 0.10

    def within(rel: float | None) -> bool | None:
        return Phases(phases=(), method="", attribution_steps=0, step_time_s=1.0,
                      sum_rel_diff=rel).sum_within_tolerance

    assert within(0.10) is True and within(-0.10) is True
    assert within(0.1001) is False and within(-0.1001) is False
    assert within(0.0) is True and within(None) is None
