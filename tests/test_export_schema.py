"""The published record schema: ``export --format json`` validates against the shipped
JSON Schema, which is generated from the code (cannot drift) and names units."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jsonschema
import pytest

from accelbench import api
from accelbench.report.export import CASE_COLUMNS, EXPORT_FORMAT_VERSION, to_json
from accelbench.report.schema import SCHEMA_FILE, export_schema, schema_text, shipped_schema
from accelbench.result import Result
from tests.conftest import FAULTY_PLUGIN, run_cli
from tests.test_compare import make_result

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _validator() -> jsonschema.protocols.Validator:
    schema = json.loads(shipped_schema())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)  # a valid draft 2020-12 schema
    return cls(schema)


def test_shipped_schemas_are_the_generated_one() -> None:
    # After a field is added: python -m accelbench.report.schema > FILE, for both copies.
    how = f"regenerate both copies: python -m accelbench.report.schema > ... {SCHEMA_FILE}"
    assert shipped_schema() == schema_text(), how
    assert (DOCS / SCHEMA_FILE).read_text("utf-8") == schema_text(), how
    assert f"v{EXPORT_FORMAT_VERSION}" in SCHEMA_FILE


def test_every_result_field_and_column_is_in_the_schema() -> None:
    schema = export_schema()
    defs = schema["$defs"]
    assert list(defs["Result"]["properties"]) == [f.name for f in dataclasses.fields(Result)]
    for name in ("RunSpec", "Stats", "EnergyReading", "MeasurementPolicy", "MeterOptions"):
        assert name in defs, name
    assert list(defs["case"]["properties"]) == list(CASE_COLUMNS)


def test_every_numeric_column_names_its_unit() -> None:
    props = export_schema()["$defs"]["case"]["properties"]
    numeric = {c: p for c, p in props.items() if {"number", "integer"} & set(p["type"])}
    assert {"samples_per_s", "avg_power_w", "energy_j_per_sample", "step_time_s"} <= set(numeric)
    assert [c for c, p in numeric.items() if not p.get("x-unit")] == []
    assert props["avg_power_w"]["x-unit"] == "W"
    assert props["energy_j_per_sample"]["x-unit"] == "J/sample"
    assert props["peak_memory_bytes"]["x-unit"] == "By"


def test_a_real_export_validates(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    real = api.run("test_mlp", size="tiny", max_time=0.3, plugins=[FAULTY_PLUGIN], db=str(db))
    assert real.status == "ok"
    from accelbench.store import open_store

    timeline = {"cuda:0": {"t_s": [0.0, 0.5, 1.0], "power_w": [250.0, 251.0, 249.0]}}
    with open_store(str(db)) as st:
        st.save(make_result("gpu1", avg_power_w=250.0, timeline=timeline,
                            finished="2020-01-01T00:00:00+00:00"))
        st.save(make_result("div1", status="diverged", final_loss=float("nan"),
                            finished="2020-01-01T00:00:01+00:00"))
        st.save(make_result("oom1", status="oom", finished="2020-01-01T00:00:02+00:00"))
    proc = run_cli("export", "--format", "json", db=db)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["schema_version"] == EXPORT_FORMAT_VERSION == 2
    assert doc["format"] == f"accelbench-export-v{EXPORT_FORMAT_VERSION}"
    _validator().validate(doc)
    by_id = {r["id"]: r for r in doc["records"]}
    assert set(by_id) == {real.id, "gpu1", "div1", "oom1"}
    assert by_id["gpu1"]["power_timeline"] == timeline
    assert by_id["div1"]["final_loss"] is None  # NaN: null, never NaN
    # An export made before format 2 gained phases, the samples' steps and the stats'
    # block_steps still validates.
    from accelbench.report.schema import ADDED_IN_V2

    for row in doc["cases"]:
        for key in [k for k in row if k.startswith("phase")]:
            del row[key]
        for key in ("data_source", "loader_workers", "input_wait_median_s",
                    "input_stall_fraction", "energy_rel_u95"):
            del row[key]
    for row in doc["samples"]:
        del row["steps"]
    for rec in doc["records"]:
        del rec["phases"]
        if rec["stats"] is not None:
            del rec["stats"]["block_steps"]
    # --data's fields are written only for a case that read data: these synthetic records
    # leave them out, and still validate.
    assert all("input" not in rec and "data" not in rec["spec"]
               and "loader_workers" not in rec["spec"] and "input_analysis" not in rec["spec"]
               for rec in doc["records"])
    assert {"phases", "steps", "block_steps", "input", "data", "loader_workers",
            "data_source", "input_wait_median_s", "input_stall_fraction",
            "input_analysis", "input_prep_stall", "input_fetch_stall",
            "input_loader_j_per_sample", "input_loader_energy_source",
            "totarget_runs", "totarget_points", "energy_rel_u95",
            "energy_window_samples_per_s", "parallel", "tp",
            "act_ckpt", "devices", "cooldown_s", "collectives",
            "collectives_method"} == ADDED_IN_V2
    # --cooldown-s is written only where given: these records leave it out, and validate.
    assert all("cooldown_s" not in rec["spec"]["meters"] for rec in doc["records"])
    # --parallel's fields are written only for a sharded case (docs/sharding.md).
    assert all(not {"parallel", "tp", "act_ckpt", "devices"} & set(rec["spec"]["topology"])
               for rec in doc["records"])
    _validator().validate(doc)
    del doc["records"][0]["stats"]  # a field format 2 always had is still required
    with pytest.raises(jsonschema.ValidationError):
        _validator().validate(doc)


def test_the_schema_refuses_a_wrong_record() -> None:
    doc = json.loads(to_json([make_result("gpu1", avg_power_w=250.0)]))
    validator = _validator()
    validator.validate(doc)
    bad = json.loads(json.dumps(doc))
    bad["cases"][0]["samples_per_s"] = "fast"
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(bad)
    bad = json.loads(json.dumps(doc))
    del bad["records"][0]["spec"]["batch_size"]
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(bad)
    bad = json.loads(json.dumps(doc))
    bad["records"][0]["status"] = "fine"
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(bad)
