"""Axes: which fields ``accelbench compare`` compares across, and why a case is unpaired.

An axis (device, precision, framework) is compared across when both selectors name it
with different values (``framework=torch framework=jax``). An axis the selectors do not
name is compared across only where each side holds exactly one value of it and the two
differ (two suites run on two devices); otherwise it is matched on, like workload and
size, so a case pairs only with its like (torch fp32 with JAX fp32, never with torch
amp_bf16). Each result left without a partner is listed with the reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from accelbench.result import Result

AXES = ("device", "precision", "framework")


def spec_value(r: Result, name: str) -> Any:
    """A match field's value; a data-parallel case's device carries its topology
    (``cuda:0 1x8``), so cases on different rank counts never pair silently."""
    from accelbench.report.rows import topology_text

    value = getattr(r.spec, name)
    if name == "fast_paths":
        return "+".join(value.enabled())
    if name == "settings":
        return " ".join(f"{k}={v:g}" for k, v in value.given().items())
    if name == "device":
        topo = r.spec.topology
        value = f"{value}{topology_text(topo.nnodes, topo.nproc_per_node, lead=' ')}"
    return value


def _values(results: Iterable[Result], name: str) -> list[str]:
    return sorted({str(spec_value(r, name)) for r in results})


def choose_axes(
    a: Sequence[Result], b: Sequence[Result],
    named: Mapping[str, tuple[str | None, str | None]],
) -> tuple[tuple[str, ...], list[dict[str, Any]]]:
    """The axes compared across, and per axis whose values differ between the sides a
    JSON-ready record: ``axis``, the values ``a`` and ``b`` hold, ``how`` (``named``:
    the selectors name two values; ``one each``: each side holds one value, not named;
    ``matched``: matched on although the sides hold different sets) and a ``note``."""
    axes: list[str] = []
    detail: list[dict[str, Any]] = []
    for ax in AXES:
        va, vb = _values(a, ax), _values(b, ax)
        na, nb = named.get(ax, (None, None))
        how: str | None
        if na is not None and nb is not None and na != nb:
            how = "named"
        elif va == vb:
            how = None
        elif len(va) == 1 and len(vb) == 1:
            how = "one each"
        else:
            how = "matched"
        if how is None:
            continue
        if how != "matched":
            axes.append(ax)
            why = ("named by the selectors" if how == "named"
                   else "each side holds one value; not named by the selectors")
            note = f"{ax}: {'/'.join(va) or '-'} (A) vs {'/'.join(vb) or '-'} (B), {why}"
        else:
            note = (f"{ax} matched on, not compared: A holds {', '.join(va) or 'nothing'}, "
                    f"B holds {', '.join(vb) or 'nothing'}; to compare across it, name it "
                    f"in both selectors (e.g. {ax}={(va or ['X'])[0]} "
                    f"{ax}={(vb or ['Y'])[-1]})")
        detail.append({"axis": ax, "a": va, "b": vb, "how": how, "note": note})
    return tuple(axes), detail


@dataclass(frozen=True, kw_only=True, slots=True)
class Unpaired:
    """A case one side holds and the other does not, with the reason."""

    side: Literal["A", "B"]
    key: dict[str, Any]
    """The case's matched fields."""
    result_ids: tuple[str, ...]
    reason: str
    """``B has no result with precision=amp_bf16``."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"side": self.side, "case": dict(self.key), "result_ids": list(self.result_ids),
                "reason": self.reason}


def _shown(value: Any) -> str:
    return "none" if value == "" else str(value)


def why_unpaired(key: Mapping[str, Any], other: Sequence[Result], match_on: Sequence[str],
                 other_label: str) -> str:
    """Why a case of one side found no partner among ``other`` (the other side's
    results): the first matched fields whose values the other side never holds, else the
    combination it lacks."""
    if not other:
        return f"{other_label} holds no results"
    missing = [f for f in match_on
               if key[f] not in {spec_value(r, f) for r in other}]
    fields = missing or list(match_on)
    what = ", ".join(f"{f}={_shown(key[f])}" for f in fields)
    return f"{other_label} has no result with {what}" if missing else \
        f"{other_label} has no result with this combination ({what})"


def sorted_keys(keys: Iterable[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Case keys in a stable order (their values as text)."""
    return sorted(keys, key=lambda k: tuple(map(str, k)))
