"""``accelbench results``: the newest results by default with a count of the rest,
``results show ID`` for one result in full, tables within the terminal's width with
every axis on which rows differ, and one footer line saying why energy is missing."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from accelbench.meters.tdp import NO_TDP_NOTE
from accelbench.render import results_table
from accelbench.result import EnergyReading, Result
from accelbench.store import open_store
from tests.conftest import run_cli
from tests.test_compare import make_result


def _stamp(i: int) -> str:
    return f"2026-01-01T{i // 60:02d}:{i % 60:02d}:00.000+00:00"


@pytest.fixture
def store60(tmp_path: Path) -> Path:
    """60 results, r00 oldest ... r59 newest; odd ones JAX."""
    db = tmp_path / "many.db"
    with open_store(str(db)) as st:
        for i in range(60):
            st.save(make_result(f"r{i:02d}{'x' * 6}", framework="jax" if i % 2 else "torch",
                                finished=_stamp(i), avg_power_w=100.0))
    return db


def test_newest_50_by_default_with_the_count_of_the_rest(store60: Path) -> None:
    before = store60.read_bytes()
    proc = run_cli("results", db=store60)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "the newest 50 of 60 result(s); 10 more not shown (--limit N or --all)" in out
    assert "r59xxxxx" in out and "r10xxxxx" in out and "r09xxxxx" not in out
    proc = run_cli("results", "--limit", "3", db=store60)
    assert [w for w in proc.stdout.split() if w.startswith("r") and w.endswith("x")] == \
        ["r59xxxxx", "r58xxxxx", "r57xxxxx"]
    assert "the newest 3 of 60" in proc.stdout
    proc = run_cli("results", "--all", db=store60)
    assert "r00xxxxx" in proc.stdout and "60 result(s) in" in proc.stdout
    assert "more not shown" not in proc.stdout
    assert store60.read_bytes() == before


def test_json_and_csv_respect_the_limit(store60: Path) -> None:
    proc = run_cli("results", "--json", db=store60)
    doc = json.loads(proc.stdout)
    assert len(doc) == 50 and doc[0]["id"] == "r59xxxxxx" and doc[-1]["id"] == "r10xxxxxx"
    assert "10 more not shown" in proc.stderr
    doc = json.loads(run_cli("results", "--json", "--all", db=store60).stdout)
    assert len(doc) == 60 and doc[-1]["id"] == "r00xxxxxx"
    assert doc[1]["framework"] == "torch" and doc[0]["framework"] == "jax"
    doc = json.loads(run_cli("results", "--json", "--limit", "2", "--framework", "torch",
                             db=store60).stdout)
    assert [d["id"] for d in doc] == ["r58xxxxxx", "r56xxxxxx"]
    assert json.loads(run_cli("results", "--json", "--workload", "vgg16",
                              db=store60).stdout) == []
    rows = list(csv.DictReader(io.StringIO(
        run_cli("results", "--csv", "--all", db=store60).stdout)))
    assert len(rows) == 60 and rows[0]["id"] == "r59xxxxxx"


def test_results_show_one_in_full_and_refusals(store60: Path) -> None:
    before = store60.read_bytes()
    proc = run_cli("results", "show", "r59", db=store60)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "framework=jax" in out and "precision=fp32" in out and "id r59xxxxxx" in out
    assert "95% CI" in out and "images/s" in out
    assert "energy" in out and "integrated_samples" in out  # provenance
    assert "machine       gpu-box, Linux 6.1, CPU Test CPU" in out
    assert "A100" in out  # the GPU it ran on
    doc = json.loads(run_cli("results", "show", "r59", "--json", db=store60).stdout)
    assert doc["id"] == "r59xxxxxx"
    for args, said in (
        (("results", "show", "r5"), "ambiguous"),
        (("results", "show", "zz"), "no result id starts with 'zz'"),
        (("results", "show"), "unexpected argument"),
        (("results", "shwo", "r59"), "unexpected argument"),
        (("results", "show", "r59", "--workload", "resnet50"), "--workload"),
        (("results", "show", "r59", "--all"), "--all"),
        (("results", "--all", "--limit", "3"), "--all and --limit"),
    ):
        proc = run_cli(*args, db=store60)
        assert proc.returncode == 2, (args, proc.stdout)
        assert said in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert proc.stdout == ""
    assert store60.read_bytes() == before


def _no_tdp(r: Result, model: str = "AMD EPYC") -> Result:
    reading = EnergyReading(device="cpu", scope="cpu-package", source="unavailable",
                            note=f"{NO_TDP_NOTE} (CPU model '{model}' is not in the TDP table)")
    return dataclasses.replace(r, energy=(reading,),
                               machine={**r.machine, "cpu": {"model": model}})


def _render(table: object, width: int) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(table)
    return console.export_text()


def test_rows_differing_only_in_framework_say_so_and_energy_says_why() -> None:
    rows = [_no_tdp(make_result(f"{fw}0000000", device="cpu", framework=fw))
            for fw in ("torch", "jax")]
    text = _render(results_table(rows, title="suite s"), 80)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    torch_line = next(x for x in lines if x.startswith("torch000"))
    jax_line = next(x for x in lines if x.startswith("jax00000"))
    assert " torch " in torch_line and " jax " in jax_line
    assert ("energy unavailable: no power sensor and no TDP for CPU model 'AMD EPYC'; set "
            "--cpu-tdp-w W") in " ".join(text.split())
    # Only where a row lacks energy: with energy everywhere there is no such line.
    with_energy = [make_result("e1", device="cpu", avg_power_w=50.0)]
    assert "energy unavailable" not in _render(results_table(with_energy), 80)
    # One row without energy among two with: counted.
    mixed = [*rows[:1], make_result("e2", avg_power_w=50.0), make_result("e3", avg_power_w=9.0)]
    assert "energy unavailable in 1 of 3 ok rows: no power sensor" in \
        " ".join(_render(results_table(mixed), 100).split())


@pytest.mark.parametrize("width", [80, 120])
def test_tables_keep_within_the_width_and_never_squeeze_a_column(width: int) -> None:
    rows = [make_result(f"{i:08x}", workload=wl, precision=prec, framework=fw,
                        device=dev, times=(0.05, 0.051, 0.05, 0.052), avg_power_w=120.0,
                        noise_reasons=("load average 3.0 on 2 CPUs",) if i == 1 else ())
            for i, (wl, prec, fw, dev) in enumerate((
                ("inception_v3", "fp32", "torch", "cuda:0"),
                ("inception_v3", "amp_bf16", "jax", "cuda:0"),
                ("transformer", "fp32", "torch", "cpu")))]
    for wide in (False, True):
        text = _render(results_table(rows, wide=wide), width)
        lines = text.splitlines()
        assert max(len(line) for line in lines) <= width
        assert "\u2026" not in text
        header = lines[1] if wide else lines[0]
        # Every column shown has its whole header: none squeezed to a few characters.
        names = ["workload", "status"] + (["throughput /s", "framework", "precision"]
                                          if wide else ["samples/s", "fw", "prec"])
        for name in names:
            assert name in header, (wide, width, header)
        # The axes on which rows differ are never left out; the values are whole.
        for value in ("inception_v3", "amp_bf16", "jax", "cuda:0", "cpu"):
            assert value in text, (wide, width, value)
        if "left out to fit the terminal" in text:
            assert "`accelbench results show ID`" in " ".join(text.split())


def test_list_at_80_columns_is_short_and_names_what_it_left_out() -> None:
    """`list` at 80 columns was 508 lines of columns squeezed to a few characters."""
    from accelbench.cli.list import list_table
    from accelbench.planning.facts import describe_workloads
    from accelbench.workloads.registry import list_workloads, workload_origin

    # The built-ins only: other tests in this process may have registered plugin workloads.
    names = [w.name for w in list_workloads()
             if workload_origin(w.name).startswith("accelbench.")]
    infos = describe_workloads(names, plugins=[])  # the built-ins' shipped facts
    text = _render(list_table(infos), 80)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    rows = sum(len(i["sizes"]) for i in infos)
    assert len(lines) <= rows + 8  # one line a size, the header, the footer
    for name in names:
        assert name in text
    for header in ("workload", "size", "params", "GFLOP/sample (fwd+bwd)"):
        assert header in lines[1]
    assert "left out to fit the terminal: configuration" in " ".join(text.split())
    assert "`accelbench list --json` has every field" in " ".join(text.split())
