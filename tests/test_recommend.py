"""``accelbench recommend``, and the cost and carbon rates it ranks by."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from accelbench.errors import AccelbenchWarning, ConfigError
from accelbench.report.cost import CostConfig, CostRates, case_cost, load_cost_config
from accelbench.report.recommend import Wanted, recommend
from accelbench.report.rows import case_row
from accelbench.result import Result
from accelbench.store import open_store
from tests.conftest import run_cli
from tests.test_compare import make_result

H100 = "NVIDIA H100 80GB HBM3"


def _options() -> list[Result]:
    # Step times chosen for round throughputs: batch / time.
    return [
        # cpu: slow, estimated energy.
        make_result("cpu32", device="cpu", times=(0.64,) * 5, avg_power_w=100.0,
                    energy_source="estimate"),  # 100 img/s, 1.0 J/img
        # A100 fp32 and amp_bf16 at two batch sizes.
        make_result("a32", times=(0.064,) * 5, avg_power_w=300.0),  # 1000 img/s, 0.3 J/img
        make_result("abf16", precision="amp_bf16", times=(0.032,) * 5,
                    avg_power_w=320.0),  # 2000 img/s, 0.16 J/img
        make_result("abf16b", precision="amp_bf16", batch=128, times=(0.05,) * 5,
                    avg_power_w=400.0),  # 2560 img/s, 0.15625 J/img
        # H100 without a readable sensor.
        make_result("h32", device="cuda:1", gpu_name=H100, times=(0.016,) * 5),  # 4000 img/s
        # Failures and other workloads do not count.
        make_result("oom", batch=256, status="oom"),
        make_result("other", workload="vgg16", times=(0.001,) * 5, avg_power_w=1.0),
    ]


def test_rankings_and_constraints() -> None:
    rec = recommend(_options(), "resnet50")
    assert rec.answerable
    assert [o.result_id for o in rec.by_throughput] == ["h32", "abf16b", "abf16", "a32", "cpu32"]
    assert [o.result_id for o in rec.by_energy] == ["abf16b", "abf16", "a32", "cpu32"]
    assert rec.by_cost == ()
    assert any("no cost ranking" in n for n in rec.notes)
    assert any("without energy data" in n for n in rec.notes)
    assert "Fastest: " + H100 in rec.message

    rec = recommend(_options(), "resnet50", Wanted(min_samples_per_s=1500, precision="amp_bf16"))
    assert [o.result_id for o in rec.by_throughput] == ["abf16b", "abf16"]
    assert all(o.samples_per_s >= 1500 and o.precision == "amp_bf16" for o in rec.by_energy)


def test_cost_ranking_and_max_cost() -> None:
    costs = CostConfig(
        default=CostRates(electricity_price_per_kwh=0.36, currency="EUR"),
        devices={"cuda:0": CostRates(price_per_hour=3.6), H100: CostRates(price_per_hour=36.0)},
    )
    rec = recommend(_options(), "resnet50", costs=costs)
    by_id = {o.result_id: o for o in rec.by_throughput}
    # Machine cost = 3.6 /h / 3600 s/h * 1e6 / 1000 img/s = 1.0; electricity = 0.3 J/img *
    # 1e6 / 3.6e6 J/kWh = 1/12 kWh -> 0.03.
    a32 = by_id["a32"].cost
    assert a32 is not None
    assert a32.machine_cost_per_msample == pytest.approx(1.0)
    assert a32.kwh_per_msample == pytest.approx(1 / 12)
    assert a32.energy_cost_per_msample == pytest.approx(0.03)
    assert a32.cost_per_msample == pytest.approx(1.03)
    assert a32.currency == "EUR"
    # H100: machine cost only (no energy): 36/3600*1e6/4000 = 2.5. CPU: electricity only.
    assert by_id["h32"].cost_per_msample == pytest.approx(2.5)
    assert by_id["cpu32"].cost_per_msample == pytest.approx(1e6 / 3.6e6 * 0.36)
    assert [o.result_id for o in rec.by_cost][:2] == ["cpu32", "abf16b"]

    rec = recommend(_options(), "resnet50", Wanted(max_cost_per_msample=1.0), costs=costs)
    assert {o.result_id for o in rec.by_throughput} == {"cpu32", "abf16", "abf16b"}
    assert all(o.cost_per_msample <= 1.0 for o in rec.by_cost)  # type: ignore[operator]
    reasons = dict((o.result_id, why) for o, why in rec.excluded)
    assert "> 1" in reasons["a32"] and "> 1" in reasons["h32"]

    rec = recommend(_options(), "resnet50", Wanted(max_cost_per_msample=1.0))
    assert not rec.answerable and "No option satisfies" in rec.message
    assert all("cost unknown" in why for _, why in rec.excluded)


def test_carbon_follows_energy_provenance() -> None:
    rates = CostRates(carbon_intensity_g_per_kwh=400.0)
    est = case_cost(case_row(_options()[0]), rates)
    assert est is not None and est.energy_kind == "estimated"
    assert est.gco2_per_msample == pytest.approx(1e6 / 3.6e6 * 400)
    none = case_cost(case_row(_options()[4]), rates)
    assert none is not None and none.gco2_per_msample is None and none.kwh_per_msample is None
    assert case_cost(case_row(_options()[1]), CostRates()) is None


def test_reference_options_and_sizes() -> None:
    results = [make_result("tiny1", size="tiny", times=(0.064,) * 5),
               make_result("small1", size="small", times=(0.064,) * 5)]
    rec = recommend(results, "resnet50")
    assert [o.result_id for o in rec.by_throughput] == ["small1"]
    assert any("largest measured" in n for n in rec.notes)
    rec = recommend([], "resnet50", Wanted(include_reference=True, precision="fp32"))
    assert rec.answerable
    assert rec.by_throughput[0].origin == "published"
    assert rec.by_throughput[0].device == "Tesla V100"  # 334.58 img/s at bs=128
    assert "(published)" in rec.message
    assert [o.device for o in rec.by_energy][0] == "Tesla V100"
    rec = recommend([], "inception_v3", Wanted(include_reference=True))
    assert any("oom" in why for _, why in rec.excluded)


def test_too_little_data_is_said_plainly() -> None:
    rec = recommend([], "resnet50")
    assert not rec.answerable and rec.by_throughput == ()
    assert "Too little data" in rec.message and "holds no results" in rec.message
    assert "accelbench run resnet50" in rec.message
    rec = recommend([make_result("x", status="oom")], "resnet50")
    assert "only failed runs (oom)" in rec.message
    with pytest.raises(ConfigError, match="unknown size"):
        recommend([], "resnet50", Wanted(size="huge"))


def test_cli_empty_store_and_json(tmp_path: Path) -> None:
    db = tmp_path / "rec.db"
    proc = run_cli("recommend", "resnet50", db=db)
    assert proc.returncode == 2 and "does not exist" in proc.stderr  # a named store: a typo
    with open_store(str(db)):
        pass  # an empty store
    proc = run_cli("recommend", "resnet50", db=db)
    assert proc.returncode == 1
    assert "Too little data to recommend anything" in proc.stdout
    with open_store(str(db)) as st:
        for r in _options():
            st.save(r)
    cfg = tmp_path / "config.toml"
    cfg.write_text('[cost]\ncurrency = "USD"\n\n[cost.devices."cuda:0"]\nprice_per_hour = 3.6\n')
    proc = run_cli("recommend", "resnet50", "--config", str(cfg), "--json",
                   "--min-throughput", "500", db=db)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["answerable"] is True
    assert [o["result_id"] for o in doc["by_cost"]] == ["abf16b", "abf16", "a32"]
    assert all(o["samples_per_s"] >= 500 for o in doc["by_throughput"])
    proc = run_cli("recommend", "resnet50", "--electricity-price", "0.3", db=db)
    assert proc.returncode == 0
    assert "by energy per sample" in proc.stdout and "by cost per million" in proc.stdout
    proc = run_cli("recommend", "resnet50", "--config", str(tmp_path / "missing.toml"), db=db)
    assert proc.returncode == 2 and "does not exist" in proc.stderr


def test_config_file_validation(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[cost]\nprice_per_hour = 2.0\n[cost.devices."NVIDIA X"]\n'
                   "price_per_hour = 5.0\ncarbon_intensity_g_per_kwh = 50\n")
    conf = load_cost_config(cfg, overrides=CostRates(carbon_intensity_g_per_kwh=300))
    rates = conf.rates_for("cuda:0", "NVIDIA X")
    assert (rates.price_per_hour, rates.carbon_intensity_g_per_kwh) == (5.0, 300)
    assert conf.rates_for("cpu", "Xeon").price_per_hour == 2.0
    for text, match in (("[cost]\nprice = 1\n", "unknown key"),
                        ("[cost]\nprice_per_hour = -1\n", ">= 0"),
                        ("[cost]\nprice_per_hour = 'a'\n", "must be a number"),
                        ("[cost\n", "not valid TOML")):
        cfg.write_text(text)
        with pytest.raises(ConfigError, match=match):
            load_cost_config(cfg)


def test_noisy_options_warn_are_marked_and_can_be_excluded() -> None:
    quiet = make_result("q32", times=(0.064,) * 5, avg_power_w=300.0,
                        finished="2026-01-01T00:00:00+00:00")
    noisy_new = make_result("n32", times=(0.032,) * 5, avg_power_w=300.0,
                            finished="2026-01-02T00:00:00+00:00",
                            noise_reasons=("load average 2.5 on 2 CPUs",))
    noisy_only = make_result("nbf", precision="amp_bf16", times=(0.016,) * 5,
                             noise_reasons=("GPU shared with pid 4242",))
    # The quiet run of fp32 is used although a newer noisy one exists; the bf16 option
    # has only a noisy run: it is ranked, marked and warned about.
    with pytest.warns(AccelbenchWarning, match=r"1 ranked option\(s\) rest on noisy.*"
                      r"pid 4242.*--exclude-noisy"):
        rec = recommend([quiet, noisy_new, noisy_only], "resnet50")
    assert [(o.result_id, o.noisy) for o in rec.by_throughput] == [("nbf", True),
                                                                   ("q32", False)]
    assert rec.to_dict()["by_throughput"][0]["noise_reasons"] == ["GPU shared with pid 4242"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rec = recommend([quiet, noisy_new, noisy_only], "resnet50", Wanted(exclude_noisy=True))
    assert [o.result_id for o in rec.by_throughput] == ["q32"]
    assert any("--exclude-noisy: left out 2 noisy run(s)" in n for n in rec.notes)


def test_diverged_and_insufficient_runs_are_never_options() -> None:
    runs = [make_result("div", times=(0.01,) * 5, status="diverged", final_loss=float("nan")),
            make_result("ins", precision="amp_bf16", times=(0.01, 0.01), status="insufficient"),
            make_result("ok", times=(0.064,) * 5)]
    rec = recommend(runs, "resnet50")
    assert [o.result_id for o in rec.by_throughput] == ["ok"]
    rec = recommend(runs[:2], "resnet50")
    assert not rec.answerable and "only failed runs (diverged, insufficient)" in rec.message


def test_ranking_shows_cis(tmp_path: Path) -> None:
    db = tmp_path / "ci.db"
    with open_store(str(db)) as st:
        st.save(make_result("a32", times=(0.10, 0.11, 0.10, 0.12, 0.10)))
        st.save(make_result("two", precision="amp_bf16", times=(0.05, 0.06)))
        st.save(make_result("h32", device="cuda:1", gpu_name=H100, times=(0.016,) * 5,
                            noise_reasons=("load",)))
    proc = run_cli("recommend", "resnet50", db=db)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    # The option behind the ranking's CI column: a half-width in percent, "no CI" from 2
    # iterations; the noisy option is marked and warned about.
    rel = recommend([make_result("a32", times=(0.10, 0.11, 0.10, 0.12, 0.10))],
                    "resnet50").by_throughput[0].ci_rel_halfwidth
    assert rel is not None and f"\u00b1{rel * 100:.2g}%" in out
    assert "no CI" in out and "!" in out and "noisy" in proc.stderr
    assert "option(s) have no CI" in out
    # No option has energy: the empty energy ranking is not printed as a table.
    assert "by energy per sample" not in out and "by throughput" in out
    assert "no option has an energy measurement" in out
    doc = json.loads(run_cli("recommend", "resnet50", "--json", db=db).stdout)
    by_id = {o["result_id"]: o for o in doc["by_throughput"]}
    assert by_id["two"]["samples_per_s_ci95"] is None
    assert by_id["a32"]["samples_per_s_ci95"][0] < by_id["a32"]["samples_per_s"]


def test_misspelled_workload_and_bad_numbers_are_refused(tmp_path: Path) -> None:
    db = tmp_path / "typo.db"
    with open_store(str(db)) as st:
        st.save(make_result("a32", times=(0.064,) * 5))
    for args, expect in (
        (("resnt50",), "unknown workload 'resnt50'; did you mean resnet50?"),
        (("nosuchthing",), "unknown workload 'nosuchthing'; known: "),
        (("resnet50", "--top", "0"), "--top"),
        (("resnet50", "--top", "10000000000000000000000"), "--top"),
        (("resnet50", "--price-per-hour", "nan"), "--price-per-hour"),
        (("resnet50", "--electricity-price", "inf"), "--electricity-price"),
        (("resnet50", "--min-throughput", "-1"), "--min-throughput"),
        (("resnet50", "--max-cost-per-msample", "nan"), "--max-cost-per-msample"),
        (("resnet50", "--carbon-intensity", "-5"), "--carbon-intensity"),
        (("",), "workload"),
    ):
        proc = run_cli("recommend", *args, db=db)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and expect in lines[0], (args, proc.stderr)
    # A registered workload the store has no results for is not a typo: exit 1, said plainly.
    proc = run_cli("recommend", "vgg16", db=db)
    assert proc.returncode == 1 and "Too little data" in proc.stdout


def test_energy_of_another_boundary_is_not_ranked_with_the_device() -> None:
    import dataclasses

    from accelbench.result import EnergyReading
    from accelbench.spec import MeterOptions

    node = make_result("node", precision="amp_bf16", batch=32, times=(0.01,) * 5)
    meters = MeterOptions(boundary="node", node_meter_cmd="echo 900")
    node = dataclasses.replace(
        node, spec=dataclasses.replace(node.spec, meters=meters),
        energy=(EnergyReading(device="node", scope="node", source="integrated_samples",
                              energy_j=45.0, avg_power_w=900.0, window_s=0.05,
                              energy_j_per_sample=0.01),))  # the lowest J/sample of all
    rec = recommend([*_options(), node], "resnet50")
    assert "node" not in [o.result_id for o in rec.by_energy]
    assert [o.result_id for o in rec.by_energy] == ["abf16b", "abf16", "a32", "cpu32"]
    assert any("another boundary (node)" in n for n in rec.notes)
    assert "node" in [o.result_id for o in rec.by_throughput]
