"""One API keyword per option, and an unknown one refused at the call.

Each function of :mod:`accelbench.api` that takes options refuses a keyword that is no
option when it is called: before a plugin is imported, a store is opened or created, or
a worker starts; the message names the closest options (``difflib``). A field's own name
where the option's API name differs (``max_time_s`` for ``max_time``) is refused the
same way, pointing to the one name.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import accelbench
from accelbench import api
from accelbench.keywords import OBJECTS, keywords_of

MARKER_PLUGIN = '''
import os
open(os.environ["ACCELBENCH_TEST_MARKER"], "w").write("imported")
'''


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    """A plugin that leaves a file behind when it is imported."""
    marker = tmp_path / "imported"
    path = tmp_path / "marker_plugin.py"
    path.write_text(MARKER_PLUGIN)
    monkeypatch.setenv("ACCELBENCH_TEST_MARKER", str(marker))
    return str(path), marker


def test_a_misspelt_keyword_is_refused_at_the_call_with_a_close_match(
        tmp_path: Path, plugin: tuple[str, Path]) -> None:
    db = tmp_path / "r.db"
    started = time.monotonic()
    with pytest.raises(TypeError, match=r"^run\(\) got an unknown option 'precison' "
                                        r"\(did you mean 'precision'\?\)$"):
        accelbench.run("lstm", size="tiny", precison="bf16", db=str(db),
                       plugins=[plugin[0]])
    # Nothing happened: no plugin imported, no store created, no worker started.
    assert not plugin[1].exists() and not db.exists()
    assert time.monotonic() - started < 60  # generous: a worker would import torch
    with pytest.raises(TypeError, match=r"unknown option 'iteratons' \(did you mean "
                                        r"'iterations'"):
        api.suite("quick", iteratons=3, db=str(db), plugins=[plugin[0]])
    with pytest.raises(TypeError, match=r"^plan_run\(\) got an unknown option 'epochs'$"):
        api.plan_run("lstm", size="tiny", epochs=3)  # nothing close: no guess
    with pytest.raises(TypeError, match=r"sweep\(\) got an unknown option 'power_limit' "
                                        r"\(did you mean 'power_limits'"):
        api.sweep("lstm", power_limit=[200], db=str(db), plugins=[plugin[0]])
    with pytest.raises(TypeError, match=r"export\(\) got an unknown option 'worklaod' "
                                        r"\(did you mean 'workload'"):
        api.export("csv", db=str(db), worklaod="lstm")
    with pytest.raises(TypeError, match=r"report\(\) got an unknown option 'price_per_hr' "
                                        r"\(did you mean 'price_per_hour'"):
        api.report(tmp_path / "rep", db=str(db), price_per_hr=2.0)
    with pytest.raises(TypeError, match=r"make_policy\(\) got an unknown option 'max_tme'"):
        api.make_policy(max_tme=2)
    assert not plugin[1].exists() and not db.exists()
    assert not (tmp_path / "rep").exists()


def test_one_name_per_option() -> None:
    # A field's name where its flag's differs is refused, pointing to the flag's name.
    with pytest.raises(TypeError, match=r"unknown option 'max_time_s' \(did you mean "
                                        r"'max_time'\?\)"):
        api.plan_run("lstm", size="tiny", max_time_s=2.0)
    with pytest.raises(TypeError, match=r"unknown option 'no_energy' \(did you mean "
                                        r"'energy'"):
        api.plan_run("lstm", size="tiny", no_energy=True)
    case = api.plan_run("lstm", size="tiny", max_time=2.0, energy=False,
                        meter_interval_ms=5)
    assert (case.spec.policy.max_time_s, case.spec.meters.enabled,
            case.spec.meters.interval_s) == (2.0, False, 0.005)
    # No two options (of all the objects a case takes) share an API name.
    names = [name for cls in OBJECTS.values() for name in keywords_of(cls)]
    assert sorted({n for n in names if names.count(n) > 1}) == []


def test_a_bad_value_is_refused_at_the_call_naming_the_option(tmp_path: Path) -> None:
    from accelbench.errors import ConfigError

    db = tmp_path / "r.db"
    with pytest.raises(ConfigError, match="--iterations must be between"):
        accelbench.run("lstm", size="tiny", iterations=0, db=str(db))
    with pytest.raises(ConfigError, match="--limit must be between 1"):
        api.export("csv", db=str(db), limit=0)
    with pytest.raises(ConfigError, match="--max-slowdown must be <= 0.999"):
        api.sweep("lstm", size="tiny", cpu_max_freqs=[2e6], max_slowdown=2.0, db=str(db))
    with pytest.raises(ConfigError, match="--power-limits: 'x' is not a number"):
        api.sweep("lstm", size="tiny", power_limits="200,x", db=str(db))
    assert not db.exists()
