"""The published JSON Schema of ``accelbench export --format json``.

Generated, never hand-written: the case table from :data:`export.CASE_COLUMNS` (with the
column types the Parquet export uses), the sample table from :data:`export.SAMPLE_COLUMNS`,
and the full record (``records``) from :class:`~accelbench.result.Result`'s dataclass
fields and type hints, recursively. The shipped copies (``report/schema/`` in the package
and ``docs/``) are this function's output: ``python -m accelbench.report.schema`` prints
it, and a test proves the shipped files equal it, so the schema cannot drift from the code.

Units are in the field names (``_s`` seconds, ``_j`` joules, ``_w`` watts, ``_bytes``,
``_per_s``, ``_per_sample``); each numeric case column also states its unit as ``x-unit``.
"""

from __future__ import annotations

import dataclasses
import json
import types
from importlib import resources
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from accelbench.report import totarget_export
from accelbench.report.export import (
    CASE_COLUMNS,
    EXPORT_FORMAT_VERSION,
    SAMPLE_COLUMNS,
    SCHEMA_ID,
    column_kind,
)
from accelbench.result import Result

SCHEMA_FILE = f"accelbench-export-v{EXPORT_FORMAT_VERSION}.schema.json"

#: Unit of a numeric column by the end of its name, longest first.
UNIT_SUFFIXES = (
    ("_j_per_sample", "J/sample"), ("_flop_per_s", "FLOP/s"), ("flop_per_sample", "FLOP/sample"),
    ("samples_per_s", "samples/s"), ("_per_step", "samples/step"), ("_bytes", "By"),
    ("_s", "s"), ("_j", "J"), ("_w", "W"),
)
#: What format 2 gained after its first release (--phases, the samples' steps, the stats'
#: block_steps): written in every new export, optional in the schema, so that exports made
#: before them still validate: an addition, not a new version. The record's ``input`` and the
#: spec's ``data`` and ``loader_workers`` (``--data``) are written only for a case that read
#: data, so they are optional too; so is the spec's ``input_analysis`` (written only when on).
ADDED_IN_V2 = frozenset({"phases", "steps", "block_steps", "input", "data", "loader_workers",
                         "data_source", "input_wait_median_s", "input_stall_fraction",
                         "input_analysis", "input_prep_stall", "input_fetch_stall",
                         "input_loader_j_per_sample", "input_loader_energy_source",
                         "totarget_runs", "totarget_points", "energy_rel_u95",
                         "energy_window_samples_per_s",
                         # the spec's topology of a sharded case only (docs/sharding.md)
                         "parallel", "tp", "act_ckpt", "devices",
                         # the spec's --cooldown-s, written only where given
                         "cooldown_s",
                         # a sharded case's --phases only: time per collective per rank
                         "collectives", "collectives_method"})
"""``totarget_runs`` and ``totarget_points``: the tables of ``export --to-target`` (runs to a
target and their evaluation points), present only in such an export. ``energy_rel_u95``: the
95% relative bound of ``energy_j_per_sample`` (issue 44), null for a record stored before
bounds existed. ``energy_window_samples_per_s``: the energy window's own throughput
(``avg_power_w`` over ``energy_j_per_sample``; the headline ``samples_per_s`` is the median
step's). ``parallel``, ``tp``, ``act_ckpt`` and ``devices``: a sharded case's topology fields.
``collectives`` and ``collectives_method``: a sharded case's phases (its time per
collective kind per rank)."""


def _required(names: Any) -> list[str]:
    from accelbench.phase_summary import PHASE_EXPORT_COLUMNS

    added = ADDED_IN_V2 | set(PHASE_EXPORT_COLUMNS)
    return [n for n in names if n not in added]


#: Numeric columns without a physical unit: counts and ratios.
DIMENSIONLESS = {
    "batch_size": "count", "threads": "count", "nnodes": "count", "nproc_per_node": "count",
    "world_size": "count", "iterations": "count", "param_count": "count",
    "ci_rel_halfwidth": "ratio", "mfu": "ratio", "final_loss": "loss (model units)",
    "phases_sum_rel_diff": "ratio", "loader_workers": "count",
    "input_stall_fraction": "ratio", "input_prep_stall": "ratio", "input_fetch_stall": "ratio",
    "energy_rel_u95": "ratio",
}


def column_unit(name: str) -> str | None:
    """The unit of a numeric column, from its name (None: no unit is known)."""
    if name in DIMENSIONLESS:
        return DIMENSIONLESS[name]
    if name.endswith("_rel_u95"):  # a phase's energy bound (phase_forward_energy_rel_u95)
        return "ratio"
    unit = next((unit for suffix, unit in UNIT_SUFFIXES if name.endswith(suffix)), None)
    # A phase's time and energy (``phase_forward_s``, ``phase_forward_energy_j``) are per
    # training step.
    return f"{unit}/step" if unit and name.startswith("phase_") else unit


_JSON_KIND = {"int": "integer", "bool": "boolean", "str": "string", "float": "number"}


def _column(name: str) -> dict[str, Any]:
    kind = _JSON_KIND[column_kind(name)]
    prop: dict[str, Any] = {"type": [kind, "null"]}
    if kind in ("integer", "number"):
        prop["x-unit"] = column_unit(name)
    return prop


#: The JSON Schema of each plain type (a non-finite float is exported as null).
_PLAIN: dict[Any, dict[str, Any]] = {
    dict: {"type": "object"}, bool: {"type": "boolean"}, int: {"type": "integer"},
    float: {"type": ["number", "null"]}, str: {"type": "string"},
}


def _hint_schema(hint: Any, defs: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema of a Python type hint (the encoding of ``Result.to_dict``)."""
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        name = hint.__name__
        if name not in defs:
            defs[name] = {}  # reserve: recursion stops here
            defs[name] = _dataclass_schema(hint, defs)
        return {"$ref": f"#/$defs/{name}"}
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        alts = [_hint_schema(a, defs) for a in inner]
        if len(inner) < len(args):
            alts.append({"type": "null"})
        return alts[0] if len(alts) == 1 else {"anyOf": alts}
    if origin is Literal:
        return {"enum": list(args)}
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": _hint_schema(args[0], defs)}
        return {"type": "array", "prefixItems": [_hint_schema(a, defs) for a in args],
                "minItems": len(args), "maxItems": len(args)}
    plain = _PLAIN.get(dict if origin is dict else hint)
    return dict(plain) if plain is not None else {}


def _dataclass_schema(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    """A dataclass's JSON object. A field whose metadata says ``json: "spread"`` is spread
    into the object (keys carried through, not a property); one that says ``json:
    "optional"`` is written only where known (not required)."""
    hints = get_type_hints(cls)
    props: dict[str, Any] = {}
    fields = [f for f in dataclasses.fields(cls) if f.metadata.get("json") != "spread"]
    for f in fields:
        prop = _hint_schema(hints[f.name], defs)
        doc = _field_doc(cls, f.name)
        props[f.name] = {**prop, "description": doc} if doc and "$ref" not in prop else prop
    return {"type": "object", "properties": props,
            "required": _required(f.name for f in fields
                                  if f.metadata.get("json") != "optional")}


def _field_doc(cls: type, name: str) -> str:
    """The docstring under a dataclass field, where the source has one."""
    import ast
    import inspect
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):
        return ""
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    for stmt, nxt in zip(body, body[1:], strict=False):
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                and stmt.target.id == name and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str)):
            return " ".join(nxt.value.value.split())
    return ""


def export_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) every ``export --format json`` document follows."""
    defs: dict[str, Any] = {}
    record = _hint_schema(Result, defs)
    case = {"type": "object", "properties": {c: _column(c) for c in CASE_COLUMNS},
            "required": _required(CASE_COLUMNS), "additionalProperties": False}
    sample = {
        "type": "object", "required": _required(SAMPLE_COLUMNS), "additionalProperties": False,
        "properties": {"result_id": {"type": "string"},
                       "phase": {"enum": ["warmup", "measured"]},
                       "index": {"type": "integer", "minimum": 0},
                       "time_s": {"type": ["number", "null"], "x-unit": "s"},
                       "steps": {"type": ["integer", "null"], "minimum": 1,
                                 "description": "training steps behind the row: a "
                                 "block-timed record's time is the per-step mean of a block "
                                 "of this many steps (weight rows by it); 1 otherwise"}},
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": f"accelbench export, format version {EXPORT_FORMAT_VERSION}",
        "description": "accelbench export --format json: one row per case (cases), one row "
        "per iteration (samples) and the full stored record of each case (records). SI "
        "units in the field names; null where a value is unknown or not finite.",
        "type": "object",
        "required": _required(["format", "schema_version", "cases", "samples", "records",
                               "totarget_runs", "totarget_points"]),
        "properties": {
            "format": {"const": f"accelbench-export-v{EXPORT_FORMAT_VERSION}"},
            "schema_version": {"const": EXPORT_FORMAT_VERSION},
            "schema": {"const": SCHEMA_ID},
            "cases": {"type": "array", "items": {"$ref": "#/$defs/case"}},
            "samples": {"type": "array", "items": {"$ref": "#/$defs/sample"}},
            "records": {"type": "array", "items": record},
            "totarget_runs": {"type": "array", "items": {"$ref": "#/$defs/totarget_run"},
                              "description": "export --to-target: one row per run to a "
                              "target (accelbench train)"},
            "totarget_points": {"type": "array",
                                "items": {"$ref": "#/$defs/totarget_point"},
                                "description": "export --to-target: one row per evaluation "
                                "point of those runs"},
        },
        "$defs": {"case": case, "sample": sample,
                  **dict(sorted({**defs, **totarget_export.schema_defs()}.items()))},
    }


def schema_text() -> str:
    """:func:`export_schema` as the shipped file holds it."""
    return json.dumps(export_schema(), indent=2) + "\n"


def shipped_schema() -> str:
    """The schema file shipped in the package."""
    return (resources.files("accelbench.report") / "schema" / SCHEMA_FILE).read_text("utf-8")


if __name__ == "__main__":  # pragma: no cover - regenerates the shipped files
    import sys

    sys.stdout.write(schema_text())
