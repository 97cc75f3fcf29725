"""Model facts (parameters, FLOPs per sample): counted once in a child process, then cached."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelbench.cachedir import ENV_CACHE_DIR
from accelbench.errors import AccelbenchWarning, ConfigError
from accelbench.planning import facts
from tests.conftest import FAULTY_PLUGIN


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(ENV_CACHE_DIR, str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_counted_once_then_served_from_the_cache(cache: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    items = [("lstm", "tiny", "torch"), ("lstm", "tiny", "jax")]
    first = facts.ensure(items, use_shipped=False)  # type: ignore[arg-type]
    assert first[items[0]]["param_count"] == first[items[1]]["param_count"] == 20196
    assert first[items[0]]["flop_method"] == "flop_counter+analytic"
    assert first[items[1]]["flop_method"] == "jaxpr"
    assert facts.cache_path().is_file() and facts.cache_path().parent == cache

    def no_child(*args: object, **kwargs: object) -> None:
        raise AssertionError("a warm lookup must not start a counting process")

    monkeypatch.setattr(facts, "_count_in_child", no_child)
    again = facts.ensure(items)  # type: ignore[arg-type]
    assert again == {k: {f: v.get(f) for f in facts.FACT_KEYS} for k, v in first.items()}
    assert facts.lookup("lstm", "tiny", "jax") == again[items[1]]


def test_a_damaged_cache_is_recounted_not_fatal(cache: Path) -> None:
    cache.mkdir(parents=True)
    facts.cache_path().write_text("{not json")
    out = facts.ensure([("transformer", "tiny", "torch")], use_shipped=False)
    assert out[("transformer", "tiny", "torch")]["param_count"] == 46848
    assert json.loads(facts.cache_path().read_text())  # rewritten whole


def test_plugin_facts_are_keyed_by_the_plugin_source(cache: Path, tmp_path: Path) -> None:
    from accelbench.workloads import load_plugin

    load_plugin(FAULTY_PLUGIN)
    key = facts.item_key(("test_mlp", "tiny", "torch"))
    assert key.startswith("test_mlp|tiny|torch|") and not key.endswith("builtin")
    out = facts.ensure([("test_mlp", "tiny", "torch")], plugins=[FAULTY_PLUGIN])
    assert out[("test_mlp", "tiny", "torch")]["param_count"] == 676


def test_a_model_that_cannot_be_counted_says_why(cache: Path) -> None:
    from accelbench.workloads import load_plugin

    load_plugin(FAULTY_PLUGIN)
    # The segfaulting workload crashes only in its loss: parameters count, FLOPs do not.
    items = [("test_segfault", "tiny", "torch"), ("test_mlp", "tiny", "torch")]
    with pytest.warns(AccelbenchWarning, match="test_segfault .*SIGSEGV"):
        out = facts.ensure(items, plugins=[FAULTY_PLUGIN], timeout_s=120)  # type: ignore[arg-type]
    entry = out[items[0]]
    assert "not counted" in entry["flop_method"] and "SIGSEGV" in entry["flop_method"]
    assert facts.lookup("test_segfault", "tiny", "torch") is None  # failures are not cached
    # The crash took only its own item: the next one was counted by a fresh child.
    assert out[items[1]]["param_count"] == 676 and out[items[1]]["flop_per_sample"] > 0


def test_a_hanging_model_times_out_and_the_others_are_counted(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from accelbench.workloads import load_plugin

    load_plugin(FAULTY_PLUGIN)
    monkeypatch.setenv(facts.ENV_COUNT_TIMEOUT, "")  # empty: unset, the default
    assert facts.count_timeout_s() == facts.COUNT_TIMEOUT_S
    for bad in ("nan", "abc", "-1", "0", "inf"):  # refused, never ignored (issue 23)
        monkeypatch.setenv(facts.ENV_COUNT_TIMEOUT, bad)
        with pytest.raises(ConfigError, match="ACCELBENCH_COUNT_TIMEOUT_S"):
            facts.count_timeout_s()
    # The timeout runs from the child's start: a fork of the warm server (the framework
    # imported once, before it), so the hang is cut after 6 s of counting.
    monkeypatch.setenv(facts.ENV_COUNT_TIMEOUT, "6")
    assert facts.count_timeout_s() == 6.0
    items = [("test_hang", "tiny", "torch"), ("test_hang", "small", "torch"),
             ("test_mlp", "tiny", "torch")]
    with pytest.warns(AccelbenchWarning, match="test_hang .*timed out after 6 s") as rec:
        out = facts.ensure(items, plugins=[FAULTY_PLUGIN])  # type: ignore[arg-type]
    assert len([w for w in rec if "test_hang" in str(w.message)]) == 1  # one per workload
    # The other size of the hanging workload is not tried again (same code, same hang).
    assert out[items[0]]["param_count"] is None and out[items[1]]["param_count"] is None
    assert "timed out" in out[items[1]]["flop_method"]
    assert out[items[2]]["param_count"] == 676
