"""The Python API and the workload registry, as a user's code uses them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import accelbench
from accelbench.errors import ConfigError
from accelbench.store import open_store
from accelbench.workloads import Workload, get_workload, list_workloads, register_workload
from tests.conftest import cli_env, run_cli

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "custom_workload.py"


def test_readme_example_runs_as_a_script(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    p = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True,
                       env=cli_env(db), timeout=120, check=False)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("ok ")
    with open_store(str(db)) as st:
        [r] = st.query()
    assert r.spec.workload == "mlp_regressor" and r.status == "ok"
    assert r.param_count == 2 * (64 * 64 + 64) + 64 + 1


def test_example_as_cli_plugin_is_listed(tmp_path: Path) -> None:
    # The plugin imports torch in a child bounded at 120 s; a CI machine under a load of 25
    # took longer than that: the bound is not what this test is about.
    p = run_cli("--plugin", str(EXAMPLE), "list", "--json", timeout=900,
                ACCELBENCH_PLUGIN_TIMEOUT_S="600")
    assert p.returncode == 0, p.stderr
    assert "mlp_regressor" in p.stdout


def test_api_run_returns_and_stores_result(db_path: Path) -> None:
    r = accelbench.run("transformer", size="tiny", iterations=5, tag="api")
    assert isinstance(r, accelbench.Result)
    assert r.status == "ok", r.error
    assert r.sample_unit == "token" and r.spec.batch_size == 64
    assert r.stats is not None and r.stats.n == 5 and r.stats.stop_reason == "iterations"
    assert r.final_loss is not None and r.final_loss > 0
    with open_store(str(db_path)) as st:
        back = st.get(r.id)
    assert back is not None and back.iteration_times_s == r.iteration_times_s


def test_api_run_without_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCELBENCH_DB", str(tmp_path / "never.db"))
    # transformer, not lstm: oneDNN has no bf16 LSTM on CPUs without AVX-512 BF16.
    r = accelbench.run("transformer", size="tiny", iterations=3, store=False,
                       precision="bf16")
    assert r.status == "ok" and r.spec.precision == "amp_bf16"
    assert not (tmp_path / "never.db").exists()


def test_registry_rejects_duplicates_and_suggests_names() -> None:
    with pytest.raises(ConfigError, match="already registered"):

        @register_workload
        class Impostor(Workload):  # noqa: F841 - registration is the point
            name = "resnet50"
            family = "cnn"
            sample_unit = "image"
            default_batch_sizes = {"tiny": (1,), "small": (1,), "paper": (1,)}

            def build_model(self, size):  # type: ignore[no-untyped-def]
                raise NotImplementedError

            def make_batch(self, size, batch_size, device, generator):  # type: ignore[no-untyped-def]
                raise NotImplementedError

            def loss(self, model, batch):  # type: ignore[no-untyped-def]
                raise NotImplementedError

    with pytest.raises(ConfigError, match="did you mean inception_v3"):
        get_workload("inception")
    with pytest.raises(ConfigError, match="default batch sizes"):

        @register_workload
        class Incomplete(Workload):  # noqa: F841
            name = "incomplete"
            family = "x"
            sample_unit = "x"
            default_batch_sizes = {"tiny": (1,)}

    assert "incomplete" not in {w.name for w in list_workloads()}


def test_import_accelbench_is_light() -> None:
    code = (
        "import accelbench, sys; assert 'torch' not in sys.modules; "
        "print(accelbench.__version__)"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stderr


def test_api_takes_the_option_objects_and_the_flags_names() -> None:
    from accelbench import api
    from accelbench.spec import MeasurementPolicy, MeterOptions, RunChoices

    case = api.plan_run("lstm", RunChoices(size="tiny", precision="bf16"),
                        policy=MeasurementPolicy(iterations=7),
                        meters=MeterOptions(idle_s=0.0))
    s = case.spec
    assert (s.size, s.precision, s.policy.iterations, s.meters.idle_s) == (
        "tiny", "amp_bf16", 7, 0.0)
    # Flat keywords are the flags' names (units as the flag's: ms here), one name each.
    flat = api.plan_run("lstm", size="tiny", max_time=2.5, meter_interval_ms=5, energy=False,
                        timeout=30.0, policy=MeasurementPolicy(min_iterations=3))
    p, m = flat.spec.policy, flat.spec.meters
    assert (p.max_time_s, p.timeout_s, p.min_iterations) == (2.5, 30.0, 3)
    assert (m.interval_s, m.enabled) == (0.005, False)
    with pytest.raises(TypeError, match="'epochs'"):
        api.plan_run("lstm", size="tiny", epochs=3)
    with pytest.raises(ConfigError, match="--meter-interval-ms must be >= 0.5"):
        api.plan_run("lstm", size="tiny", meter_interval_ms=0.1)
