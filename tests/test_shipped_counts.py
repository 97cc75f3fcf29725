"""The built-in models' facts shipped with the package: current, equal to a real count, and
what a cold ``accelbench list`` reads without importing a framework."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from accelbench.cachedir import ENV_CACHE_DIR
from accelbench.planning import facts, shipped
from tests.conftest import run_cli

REGENERATE = "run `python scripts/generate_shipped_facts.py` and commit the table"


def _builtin_items() -> list[facts.Item]:
    from accelbench.workloads.registry import list_workloads, workload_origin

    names = [w.name for w in list_workloads() if workload_origin(w.name).startswith("accelbench.")]
    return facts.list_items(names)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(ENV_CACHE_DIR, str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def table_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of the shipped table that a test may edit; the real one is read again after."""
    path = tmp_path / "shipped_facts.json"
    path.write_text(shipped.SHIPPED_PATH.read_text())
    monkeypatch.setattr(shipped, "SHIPPED_PATH", path)
    shipped.reload()
    yield path
    monkeypatch.undo()
    shipped.reload()


def test_the_table_covers_every_builtin_model_with_current_sources() -> None:
    items = _builtin_items()
    assert len(items) >= 58
    stale = [i for i in items if shipped.lookup(*i) is None]
    assert not stale, f"not shipped, or its sources changed since: {stale}; {REGENERATE}"
    entry = shipped.lookup("resnet50", "paper", "torch")
    assert entry is not None and entry["param_count"] == 25_557_032
    assert entry["source"].startswith("shipped table, counted by flop_counter (torch ")


@pytest.mark.slow
def test_shipped_counts_equal_a_real_count(cache: Path) -> None:
    """Every built-in workload x size x framework counted for real (about a minute on 2 CPUs)."""
    items = _builtin_items()
    real = facts.ensure(items, timeout_s=900, use_shipped=False)
    assert facts.cache_path().is_file()  # really counted, not read from anywhere
    differ = {}
    for item in items:
        ours = shipped.lookup(*item)
        theirs = {k: real[item].get(k) for k in facts.FACT_KEYS}
        if ours is None or {k: ours.get(k) for k in facts.FACT_KEYS} != theirs:
            differ[item] = (ours, theirs)
    assert not differ, f"shipped != counted for {sorted(differ)}; {REGENERATE}"


def test_a_cold_list_reads_the_table_without_importing_a_framework(tmp_path: Path) -> None:
    cold = tmp_path / "empty-cache"
    p = run_cli("list", "--json", ACCELBENCH_CACHE_DIR=str(cold), PYTHONPROFILEIMPORTTIME="1")
    assert p.returncode == 0, p.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in p.stderr.splitlines()
                if line.startswith("import time:")}
    assert "accelbench.planning.shipped" in imported  # the profile is real
    assert not imported & {"torch", "jax", "flax", "optax"}
    assert not cold.exists()  # nothing counted, so nothing cached
    infos = {w["name"]: w for w in json.loads(p.stdout)}
    lstm = infos["lstm"]["sizes"]["tiny"]
    assert lstm["param_count"] == 20196
    assert lstm["facts_source"].startswith("shipped table, counted by flop_counter+analytic")
    assert lstm["frameworks"]["jax"]["flop_method"] == "jaxpr"


def test_a_model_missing_from_the_table_is_counted(cache: Path, table_path: Path) -> None:
    data = json.loads(table_path.read_text())
    shipped_entry = data["facts"].pop("lstm|tiny|torch")
    table_path.write_text(json.dumps(data))
    shipped.reload()
    items: list[facts.Item] = [("lstm", "tiny", "torch"), ("lstm", "tiny", "jax")]
    assert facts.uncached(items) == [items[0]]
    out = facts.ensure(items)
    assert "source" not in out[items[0]]  # counted in a child, then cached
    assert {k: out[items[0]][k] for k in facts.FACT_KEYS} == shipped_entry
    assert facts.lookup("lstm", "tiny", "torch") == {k: shipped_entry[k] for k in facts.FACT_KEYS}
    assert out[items[1]]["source"].startswith("shipped table")
    info = facts.describe_workloads(["lstm"])[0]["sizes"]["tiny"]
    assert info["facts_source"] == facts.COUNTED_HERE  # the first framework's: counted


def test_an_entry_of_edited_sources_is_not_used(table_path: Path, cache: Path) -> None:
    assert shipped.lookup("resnet50", "tiny", "torch") is not None
    data = json.loads(table_path.read_text())
    data["fingerprints"]["torch"] = "0" * 16  # the models changed since the table was made
    table_path.write_text(json.dumps(data))
    shipped.reload()
    assert shipped.lookup("resnet50", "tiny", "torch") is None
    assert shipped.lookup("resnet50", "tiny", "jax") is not None
    assert shipped.lookup("resnet50", "tiny", "toyfw") is None  # a plugin's framework
    assert facts.uncached([("resnet50", "tiny", "torch")]) == [("resnet50", "tiny", "torch")]


def test_a_plugin_workload_is_never_served_from_the_table(table_path: Path, cache: Path) -> None:
    from accelbench.workloads import load_plugin
    from tests.conftest import FAULTY_PLUGIN

    load_plugin(FAULTY_PLUGIN)
    data = json.loads(table_path.read_text())
    data["facts"]["test_mlp|tiny|torch"] = data["facts"]["lstm|tiny|torch"]
    table_path.write_text(json.dumps(data))
    shipped.reload()
    assert shipped.lookup("test_mlp", "tiny", "torch") is not None  # in the table...
    assert facts.uncached([("test_mlp", "tiny", "torch")])  # ...but a plugin is counted
