from __future__ import annotations

import argparse

import pytest

from accelbench.errors import ConfigError
from accelbench.spec import MeasurementPolicy, RunSpec, normalize_precision


def test_spec_round_trip_and_case_key() -> None:
    spec = RunSpec(workload="lstm", size="tiny", batch_size=4, precision="amp_bf16", tag="x")
    again = RunSpec.from_dict(spec.to_dict())
    assert again == spec
    # The tag and policy do not change which case it is; the batch size does.
    assert RunSpec(workload="lstm", size="tiny", batch_size=4, precision="amp_bf16",
                   policy=MeasurementPolicy(iterations=3)).case_key() == spec.case_key()
    assert RunSpec(workload="lstm", size="tiny", batch_size=8,
                   precision="amp_bf16").case_key() != spec.case_key()


def test_from_dict_ignores_unknown_keys_from_newer_versions() -> None:
    data = RunSpec(workload="lstm", batch_size=2).to_dict()
    data["future_field"] = 1
    data["policy"]["future_policy"] = 2
    assert RunSpec.from_dict(data).batch_size == 2


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"batch_size": 0}, "batch size must be between 1 and"),
        ({"batch_size": -3}, "batch size must be between 1 and"),
        ({"batch_size": 2**31}, "batch size must be between 1 and 2147483647"),
        ({"batch_size": 2, "threads": 10**6}, "--threads must be between 1 and 65536"),
        ({"batch_size": 2, "seed": -1}, "seed must be between 0"),
        ({"batch_size": True}, "must be an integer"),
        ({"batch_size": 2, "size": "huge"}, "unknown size"),
        ({"batch_size": 2, "precision": "fp8"}, "unknown precision"),
        ({"batch_size": 2, "threads": 0}, "--threads"),
        ({"batch_size": 2, "workload": ""}, "must not be empty"),
    ],
)
def test_spec_rejects_bad_input(kwargs: dict, message: str) -> None:
    args = {"workload": "lstm", **kwargs}
    with pytest.raises(ConfigError, match=message):
        RunSpec(**args)


@pytest.mark.parametrize(
    "kwargs",
    [{"iterations": 0}, {"target_ci": 0.0}, {"target_ci": 1.5}, {"max_time_s": 0},
     {"trim_fraction": 0.5}, {"timeout_s": -1}, {"warmup_min": 5, "warmup_max": 2},
     # Non-finite values: a NaN timeout compares false with everything and would disable it.
     {"timeout_s": float("nan")}, {"timeout_s": float("inf")}, {"max_time_s": float("nan")},
     {"target_ci": float("nan")}, {"warmup_max_time_s": float("inf")},
     {"iterations": 10**23}, {"min_iterations": 1}, {"max_iterations": 5},
     {"iterations": True}],
)
def test_policy_rejects_bad_values(kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        MeasurementPolicy(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [{"interval_s": float("nan")}, {"counter_poll_s": float("inf")}, {"idle_s": float("nan")},
     {"idle_s": -1.0}, {"cpu_tdp_w": float("nan")}, {"cpu_tdp_w": 0.0},
     {"enabled": False, "cpu_tdp_w": 65.0}],
)
def test_meter_options_reject_bad_values(kwargs: dict) -> None:
    from accelbench.spec import MeterOptions

    with pytest.raises(ConfigError):
        MeterOptions(**kwargs)


def test_precision_aliases() -> None:
    assert normalize_precision("bf16") == "amp_bf16"
    assert normalize_precision("fp16") == "amp_fp16"
    with pytest.raises(ConfigError, match="choose one of"):
        normalize_precision("int8")


def _parse(*argv: str) -> argparse.Namespace:
    from accelbench.cli import build_parser

    return build_parser().parse_args(["run", "lstm", *argv])


def test_cli_options_come_from_the_fields() -> None:
    from accelbench.cli.args import options_from_args
    from accelbench.spec import MeterOptions

    # The flag's unit is converted once, by the declaration (ms -> s); absent options keep
    # the base object's values (a suite's own idle baseline here).
    args = _parse("--meter-interval-ms", "5", "--max-time", "2", "--strict-max-time")
    meters = options_from_args(MeterOptions, args, MeterOptions(idle_s=1.5))
    assert (meters.interval_s, meters.idle_s) == (0.005, 1.5)
    policy = options_from_args(MeasurementPolicy, args)
    assert (policy.max_time_s, policy.strict_max_time, policy.target_ci) == (2, True, 0.02)
    assert options_from_args(MeterOptions, _parse("--no-idle")).idle_s == 0.0
    assert options_from_args(MeterOptions, _parse("--no-energy")).enabled is False


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--iterations", "5", "--target-ci", "0.1"],
         "--target-ci conflicts with --iterations (an exact count)"),
        (["--strict-max-time"], "--strict-max-time needs --max-time"),
        (["--no-energy", "--settle-s", "3"],
         "--settle-s conflicts with --no-energy (nothing is measured)"),
        (["--no-idle", "--idle-s", "2"], "--idle-s conflicts with --no-idle"),
        (["--no-energy", "--cooldown-s", "3"],
         "--cooldown-s conflicts with --no-energy (nothing is measured)"),
        (["--cooldown-s", "3"],
         "--cooldown-s waits between energy trials: it needs --energy-trials 2 or more"),
    ],
)
def test_declared_conflicts_are_refused(argv: list[str], message: str) -> None:
    from accelbench.cli.args import options_from_args
    from accelbench.spec import MeterOptions

    args = _parse(*argv)
    with pytest.raises(ConfigError) as info:
        options_from_args(MeasurementPolicy, args)
        options_from_args(MeterOptions, args)
    assert str(info.value) == message


def test_cooldown_is_in_the_record_only_where_given() -> None:
    from accelbench.spec import MeterOptions, RunSpec

    plain = RunSpec(workload="lstm", size="tiny", batch_size=4)
    assert "cooldown_s" not in plain.to_dict()["meters"]  # other records keep their bytes
    cooled = RunSpec(workload="lstm", size="tiny", batch_size=4,
                     meters=MeterOptions(energy_trials=3, cooldown_s=30.0))
    assert cooled.to_dict()["meters"]["cooldown_s"] == 30.0
    assert RunSpec.from_dict(cooled.to_dict()) == cooled
    assert RunSpec.from_dict(plain.to_dict()).meters.cooldown_s == 0.0
