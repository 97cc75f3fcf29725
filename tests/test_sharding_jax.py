"""``--parallel``/``--devices``/``--act-ckpt`` in JAX (``jax.sharding``): loss parity of
every mode over 2 processes x 2 XLA host devices through jax.distributed (one launch;
the reference is one device of rank 0's), vit's and the transformer's fused q|k|v under tp
on one process's 4 host devices, the parameter rule, the checks, the memory
estimate and MFU over a process's devices."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from accelbench.backends.jax.sharding import param_spec
from accelbench.errors import ConfigError
from accelbench.planning.cases import prepare_case
from accelbench.result import Result
from accelbench.spec import RunChoices, RunSpec, Topology
from accelbench.stats import compute_stats

JAX_TINY = RunChoices(size="tiny", framework="jax")

#: One process's mesh of 4 host devices (llm's every mode runs across 2 processes x 2
#: devices in the launch below; the script at --steps 50 runs every mode on one process:
#: docs/sharding.md): vit tiny (with --act-ckpt) and transformer tiny (dropout on: the same
#: keys and, the batch being whole on every device, the same masks) on one device and under
#: tp on 4 devices (one head each): their fused q|k|v laid out by device, and the
#: collectives in the tp step's program.
PARITY = """
import json, os, sys
# XLA's cheaper compile (both builds alike).
os.environ["XLA_FLAGS"] = ("--xla_force_host_platform_device_count=4 "
                           "--xla_backend_optimization_level=0 "
                           "--xla_llvm_disable_expensive_passes=true")
from accelbench.backends.jax.backend import JaxTrainStep
from accelbench.backends.jax.phases import collective_counts
from accelbench.backends.jax.runtime import import_jax
from accelbench.spec import RunSpec, Topology
from accelbench.workloads.registry import get_implementation
jax = import_jax()
tp4 = Topology(devices=4, parallel="tp")
out = {}
for name, workload, batch, topo in (
        ("vit", "vit", 4, Topology()),
        ("vit tp", "vit", 4, Topology(devices=4, parallel="tp", act_ckpt=True)),
        ("transformer", "transformer", 64, Topology()),
        ("transformer tp", "transformer", 64, tp4)):
    step = JaxTrainStep(get_implementation(workload, "jax"),
                        RunSpec(workload=workload, size="tiny", batch_size=batch,
                                topology=topo))
    losses = []
    for _ in range(3):
        step.step()
        losses.append(step.loss_value())
    out[name] = {"losses": losses, "params": step.param_count,
                 "device0": sum(x.addressable_shards[0].data.size
                                for x in jax.tree.leaves(step.state[0])),
                 "batch_rows": int(step.batch[0].shape[0]),
                 "collectives": collective_counts(step._compiled.as_text()),
                 "extra": step.extra(), "memory": step.peak_memory()}
json.dump(out, sys.stdout)
"""


@pytest.fixture(scope="module")
def parity() -> dict:
    p = subprocess.run([sys.executable, "-c", PARITY], capture_output=True, text=True,
                       timeout=600, cwd=Path(__file__).parent.parent)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("workload", ["vit", "transformer"])
def test_fused_qkv_under_tp_follows_one_devices_curve_with_no_reshuffle(
        parity: dict, workload: str) -> None:
    """vit's qkv and the transformer's in-projections, laid out by device, split column-wise
    over 4 devices: the same losses as one device's, and no collective moves q, k or v
    between the projection and attention (a plain split of the fused axis makes XLA
    all-gather or permute them: 4 all-gathers in vit tiny's step, 36 all-gathers and 84
    collective-permutes in transformer tiny's, by hand); the row-wise layers' all-reduces
    remain."""
    one, tp = parity[workload], parity[f"{workload} tp"]
    assert one["losses"][-1] < one["losses"][0]
    assert tp["losses"] == pytest.approx(one["losses"], rel=1e-3)
    assert tp["params"] == one["params"] and tp["device0"] < one["params"]
    moved = tp["collectives"]
    assert moved["all-reduce"] > 0
    assert moved["all-gather"] == moved["all-to-all"] == moved["collective-permute"] == 0
    assert tp["extra"]["sharding"]["mesh"] == {"dp": 1, "tp": 4}
    assert tp["batch_rows"] == one["batch_rows"]  # tp: the batch whole on every device


RANKS_SCRIPT = str(Path(__file__).parent / "sharding_ranks_jax.py")


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """2 processes x 2 CPU host devices each, started by the backend's launcher and joined
    through jax.distributed (gloo), each training llm tiny 3 steps in every mode (rank 0
    also on one device of its own: the reference); what rank 0 wrote."""
    from accelbench.backends.jax.distributed import JaxDistributed

    tmp = tmp_path_factory.mktemp("jax-ranks")
    out = tmp / "ranks.json"
    outcome = JaxDistributed().launch(
        args=[RANKS_SCRIPT, str(out)], nnodes=1, nproc_per_node=2, node_rank=0,
        rdzv_endpoint=None, run_id="jax-sharding-parity", log_dir=str(tmp / "logs"),
        rdzv_timeout_s=120)
    assert not outcome.failures and not outcome.error, outcome
    return json.loads(out.read_text())


def test_every_mode_over_two_jax_processes_follows_one_devices_loss_curve(
        ranks: dict) -> None:
    """ddp, fsdp and fsdp+tp (--act-ckpt) on one mesh over all 4 host devices of both
    processes, tp over one device of each: each mode the same loss at each step as one
    device's (same seed and batch)."""
    one = ranks["modes"]["one"]
    modes = {mode: m for mode, m in ranks["modes"].items() if mode != "one"}
    assert one["losses"][-1] < one["losses"][0]  # it trains: the curve is not flat
    assert list(modes) == ["ddp", "fsdp", "tp", "fsdp+tp"]
    for mode, m in modes.items():
        assert m["losses"] == pytest.approx(one["losses"], rel=1e-3), mode
        assert m["params"] == one["params"], mode
    procs = ranks["ranks"]
    assert [r["rank"] for r in procs] == [0, 1] and {r["devices"] for r in procs} == {4}
    assert all(r["max"] == [1.0, -1.0] for r in procs)  # the worker's MAX over processes
    # Each process holds its share: its 2 devices' whole copies under ddp, under one whole
    # model where the parameters are split (llm tiny: 26,784; device 0 holds 6,696 under
    # fsdp, 8,784 under fsdp+tp, 17,568 under tp: embeddings and norms whole).
    assert procs[0]["local_params"]["one"] == one["params"]
    for r in procs:
        local = r["local_params"]
        assert local["ddp"] == 2 * one["params"]
        assert local["fsdp"] < one["params"] and local["fsdp+tp"] < one["params"]
        assert local["tp"] < one["params"]
    # The global batch: every data-parallel replica's rows (tp: one replica).
    rows = {mode: m["rows"] for mode, m in modes.items()}
    b = one["rows"]
    assert rows == {"ddp": 4 * b, "fsdp": 4 * b, "tp": b, "fsdp+tp": 2 * b}
    meshes = {mode: (m["extra"]["sharding"]["mode"], m["extra"]["sharding"]["axes"],
                     m["extra"]["sharding"]["processes"],
                     m["extra"]["sharding"]["devices_per_process"])
              for mode, m in modes.items()}
    assert meshes == {
        "ddp": ("ddp", {"data": 4, "fsdp": 1, "tensor": 1}, 2, 2),
        "fsdp": ("fsdp", {"data": 1, "fsdp": 4, "tensor": 1}, 2, 2),
        "tp": ("tp", {"data": 1, "fsdp": 1, "tensor": 2}, 2, 1),
        "fsdp+tp": ("fsdp+tp", {"data": 1, "fsdp": 2, "tensor": 2}, 2, 2)}


def test_the_record_states_the_mesh_and_why_per_device_memory_is_missing(ranks: dict) -> None:
    mesh, one = ranks["modes"]["fsdp+tp"], ranks["modes"]["one"]
    extra = mesh["extra"]
    sharding = extra["sharding"]
    assert sharding["mode"] == "fsdp+tp" and sharding["mesh"] == {"dp": 2, "tp": 2}
    assert sharding["devices"] == 4 and sharding["act_ckpt"] is True
    assert sharding["remat_blocks"] == 2  # llm tiny's 2 decoder blocks
    assert sharding["memory_per_device"].startswith("unavailable: XLA keeps no memory")
    assert "xla_flop_per_sample" not in extra  # a mesh's program is one device's share
    assert "sharding" not in one["extra"]  # an unsharded record keeps its bytes
    peak, source = mesh["memory"]
    assert peak > 0 and "peak RSS" in source


def test_parameter_rule_splits_planned_layers_then_the_largest_axis() -> None:
    sizes = {"data": 1, "fsdp": 2, "tensor": 2}
    q = ["blocks", "0", "attn", "q", "kernel"]
    assert param_spec((32, 64), q, "llm", sizes) == ("fsdp", "tensor")  # column-wise
    o = ["blocks", "0", "attn", "o", "kernel"]
    assert param_spec((64, 32), o, "llm", sizes) == ("tensor", "fsdp")  # row-wise
    embed = ["embed", "embedding"]
    assert param_spec((128, 32), embed, "llm", sizes) == ("fsdp", None)
    assert param_spec((3,), ["norm", "scale"], "llm", sizes) == (None,)  # nothing divides
    bert_up = ["layers", "1", "up", "bias"]
    assert param_spec((64,), bert_up, "bert", {"data": 1, "fsdp": 1, "tensor": 2}) == \
        ("tensor",)
    # vit's fused qkv splits as a column-wise layer; the transformer's in_kernel/in_bias
    # are the kernel/bias of its attention's layer "in"; out_proj row-wise.
    assert param_spec((32, 96), ["blocks", "1", "qkv", "kernel"], "vit", sizes) == \
        ("fsdp", "tensor")
    tp2 = {"data": 1, "fsdp": 1, "tensor": 2}
    attn = ["decoder", "0", "cross_attn"]
    assert param_spec((32, 96), [*attn, "in_kernel"], "transformer", tp2) == (None, "tensor")
    assert param_spec((96,), [*attn, "in_bias"], "transformer", tp2) == ("tensor",)
    assert param_spec((32, 32), [*attn, "out_proj", "kernel"], "transformer", tp2) == \
        ("tensor", None)
    assert param_spec((32,), [*attn, "out_proj", "bias"], "transformer", tp2) == (None,)
    assert param_spec((64, 32), ["encoder", "1", "ff", "linear2", "kernel"], "transformer",
                      tp2) == ("tensor", None)
    # fsdp alone: any workload, the largest axis
    assert param_spec((3, 3, 16, 64), ["conv", "kernel"], "resnet50",
                      {"data": 1, "fsdp": 4, "tensor": 1}) == (None, None, None, "fsdp")


def test_a_fused_projection_laid_out_by_device_gives_each_device_its_heads_q_k_v() -> None:
    """``[q | k | v]`` by 4 heads of width 1, 2 devices: device 0's half is q, k and v of
    heads 0 and 1, device 1's of heads 2 and 3; a kernel's rows stay as they are."""
    import numpy as np

    from accelbench.backends.jax.sharding import by_device

    q, k, v = ["q0", "q1", "q2", "q3"], ["k0", "k1", "k2", "k3"], ["v0", "v1", "v2", "v3"]
    bias = np.array(q + k + v)
    assert by_device(bias, 2).tolist() == ["q0", "q1", "k0", "k1", "v0", "v1",
                                           "q2", "q3", "k2", "k3", "v2", "v3"]
    assert by_device(bias, 1).tolist() == bias.tolist()
    kernel = np.stack([bias, np.char.upper(bias)])  # (in 2, out 12)
    assert by_device(kernel, 4)[1].tolist() == ["Q0", "K0", "V0", "Q1", "K1", "V1",
                                                "Q2", "K2", "V2", "Q3", "K3", "V3"]


@pytest.mark.parametrize(("workload", "topo", "says"), [
    ("resnet50", {"parallel": "tp", "devices": 2}, "no tensor-parallel plan"),
    ("vit", {"parallel": "tp", "devices": 8}, "must divide the heads"),
    ("llm", {"parallel": "tp", "devices": 4}, "must divide the heads"),
    ("llm", {"parallel": "fsdp", "nproc_per_node": 2, "dist_backend": "nccl"},
     "talk through gloo"),
    ("resnet50", {"act_ckpt": True}, "has none"),
])
def test_jax_modes_a_case_cannot_run_are_refused_in_one_line(workload: str, topo: dict,
                                                             says: str) -> None:
    with pytest.raises(ConfigError, match=says) as exc:
        prepare_case(workload, JAX_TINY, topology=Topology(**topo), check_hardware=False)
    assert "\n" not in str(exc.value)


def test_jax_processes_on_a_gpu_are_refused_and_one_node_hands_its_coordinator_down(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from accelbench.backends.jax.distributed import (
        COORDINATOR_ENV,
        JaxDistributed,
        coordinator_address,
    )
    from accelbench.backends.ranks import RankInfo

    gpu = RunSpec(workload="llm", size="tiny", batch_size=32, framework="jax",
                  device="cuda:0", topology=Topology(nproc_per_node=2))
    with pytest.raises(ConfigError, match="not yet") as exc:
        JaxDistributed().check(gpu)
    assert "\n" not in str(exc.value)
    monkeypatch.setenv(COORDINATOR_ENV, "127.0.0.1:4321")
    info = RankInfo(rank=1, local_rank=1, world_size=2, local_world_size=2, group_rank=0)
    assert coordinator_address(info) == "127.0.0.1:4321"
    monkeypatch.delenv(COORDINATOR_ENV)
    monkeypatch.setenv("MASTER_ADDR", "10.0.0.7")
    monkeypatch.setenv("MASTER_PORT", "29500")
    monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    assert coordinator_address(info) == "10.0.0.7:29500"  # a launcher that only names it


def test_a_mesh_refuses_phases_and_data_across_processes_saying_why() -> None:
    """One process's mesh takes --data and --phases (tests/test_phases_jax.py runs the
    latter); across JAX processes both are refused in one line."""
    from accelbench.backends.jax.sharding import check
    from accelbench.spec import MeasurementPolicy

    mesh = Topology(devices=2, parallel="fsdp")
    check(RunSpec(workload="llm", size="tiny", batch_size=32, framework="jax",
                  data="/some/tokens", topology=mesh))  # one process feeds its mesh
    check(RunSpec(workload="llm", size="tiny", batch_size=32, framework="jax",
                  policy=MeasurementPolicy(phases=True), topology=mesh))
    with pytest.raises(ConfigError, match="each process would need its own shard"):
        check(RunSpec(workload="llm", size="tiny", batch_size=32, framework="jax",
                      data="/some/tokens", topology=Topology(nproc_per_node=2)))
    with pytest.raises(ConfigError, match="--phases with JAX processes") as exc:
        check(RunSpec(workload="llm", size="tiny", batch_size=32, framework="jax",
                      policy=MeasurementPolicy(phases=True),
                      topology=Topology(nproc_per_node=2, parallel="fsdp")))
    assert "one process's mesh" in str(exc.value) and "\n" not in str(exc.value)


def test_each_jax_process_on_gpus_names_its_own_local_devices() -> None:
    """What jax.distributed.initialize gets (the GPU path itself stays refused: above):
    local rank r drives GPU r of its node, or GPUs r*k..r*k+k-1 with k devices each."""
    from accelbench.backends.jax.distributed import RDZV_TIMEOUT_S, initialize_args
    from accelbench.backends.ranks import RankInfo

    info = RankInfo(rank=5, local_rank=1, world_size=8, local_world_size=4, group_rank=1)
    cpu = initialize_args(info, "cpu", "h:1")
    assert cpu == {"coordinator_address": "h:1", "num_processes": 8, "process_id": 5,
                   "initialization_timeout": RDZV_TIMEOUT_S}
    assert initialize_args(info, "cuda:0", "h:1") == {**cpu, "local_device_ids": [1]}
    assert initialize_args(info, "cuda:0", "h:1", 2)["local_device_ids"] == [2, 3]
    with pytest.raises(ConfigError, match="use cuda:0"):
        initialize_args(info, "cuda:1", "h:1")


def test_devices_is_refused_where_a_rank_drives_one_device() -> None:
    with pytest.raises(ConfigError, match="--devices: framework torch runs one device per"):
        prepare_case("llm", RunChoices(size="tiny"), topology=Topology(devices=2))


def test_devices_is_in_the_key_only_where_given() -> None:
    plain = prepare_case("llm", JAX_TINY, check_hardware=False).spec
    mesh = prepare_case("llm", JAX_TINY, topology=Topology(devices=4, parallel="fsdp"),
                        check_hardware=False).spec
    assert "devices" not in plain.to_dict()["topology"]
    assert mesh.to_dict()["topology"]["devices"] == 4
    assert mesh.case_key() != plain.case_key()
    assert RunSpec.from_dict(mesh.to_dict()) == mesh
    topo = Topology(devices=4, parallel="fsdp+tp", tp=2)
    assert (topo.mesh_size, topo.dp_degree, topo.tp_degree) == (4, 2, 2)
    assert Topology(devices=4, parallel="tp").tp_degree == 4


def test_dry_run_estimates_a_jax_mesh_per_device(capsys: pytest.CaptureFixture[str]) -> None:
    from rich.console import Console

    from accelbench.cli.run import dry_run

    one = prepare_case("llm", JAX_TINY, topology=Topology(devices=1, parallel="fsdp"),
                       check_hardware=False).spec
    four = dataclasses.replace(one, topology=Topology(devices=4, parallel="fsdp"))
    assert dry_run(one, Console(), as_json=True) == 0
    whole = json.loads(capsys.readouterr().out)
    assert dry_run(four, Console(), as_json=True) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mesh"] == {"dp": 4, "tp": 1}
    assert out["per_rank_bytes"]["params"] == whole["per_rank_bytes"]["params"] // 4


def _measured(spec: RunSpec) -> Result:
    stats = compute_stats([1.0, 1.0, 1.0], 1000, trim_fraction=0.0, stop_reason="iterations")
    return Result(id="x", spec=spec, status="ok", samples_per_step=1000,
                  sample_unit="tokens", stats=stats, flop_per_sample=1e9,
                  flop_method="analytic", peak_flop_per_s=1e13)


def test_mfu_counts_a_gpu_mesh_once_and_a_cpus_host_devices_as_one_cpu() -> None:
    """1e9 FLOP/token x 1000 tokens/s over 4 GPUs of 1e13: 2.5%; 4 host devices are one
    CPU's cores: 10%."""
    topo = Topology(devices=4, parallel="fsdp")
    gpu = _measured(RunSpec(workload="llm", size="tiny", batch_size=32, framework="jax",
                            device="cuda:0", topology=topo))
    cpu = _measured(RunSpec(workload="llm", size="tiny", batch_size=32, framework="jax",
                            topology=topo))
    assert gpu.mfu == pytest.approx(0.025) and cpu.mfu == pytest.approx(0.1)
    assert cpu.summary()["global_batch_size"] == 4 * 32  # 4 replicas of --batch-size


def test_report_rows_tell_meshes_of_different_sizes_apart() -> None:
    from accelbench.report.rows import case_row

    def row(devices: int) -> str | None:
        spec = RunSpec(workload="llm", size="tiny", batch_size=32, framework="jax",
                       topology=Topology(devices=devices, parallel="fsdp"))
        return case_row(_measured(spec)).parallel

    assert row(4) == "fsdp devices4" and row(2) == "fsdp devices2"

