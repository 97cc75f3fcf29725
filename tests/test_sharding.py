"""``--parallel ddp|fsdp|tp|fsdp+tp``, ``--tp`` and ``--act-ckpt`` (torch): loss parity of
every mode with one device on real gloo ranks, the record of a sharded case, the checks,
the memory estimate and MFU under sharding.

The ranks are real processes started by the project's launcher (torch's elastic_launch);
one launch trains llm tiny in every mode in turn, so the test pays for one start.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from accelbench.errors import ConfigError
from accelbench.planning.cases import prepare_case
from accelbench.planning.memory import estimate_rank_memory, fits
from accelbench.result import Result
from accelbench.spec import MeasurementPolicy, RunChoices, RunSpec, Topology
from accelbench.stats import compute_stats
from accelbench.store import open_store
from tests.conftest import run_cli

RANKS_SCRIPT = str(Path(__file__).parent / "sharding_ranks.py")
TINY = RunChoices(size="tiny")


@pytest.fixture(scope="module")
def mode_losses(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Every mode's losses and shares, and one device's losses, from one launch of 2
    gloo ranks."""
    from accelbench.backends.torch.distributed import launch

    out = tmp_path_factory.mktemp("sharding") / "modes.json"
    outcome = launch(args=[RANKS_SCRIPT, str(out)], nnodes=1, nproc_per_node=2, node_rank=0,
                     rdzv_endpoint=None, run_id="sharding-parity",
                     log_dir=str(out.parent / "logs"), rdzv_timeout_s=120)
    assert not outcome.failures and not outcome.error, outcome
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def mode_losses_4(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """llm tiny's losses and shares in every mode, and one device's, from one launch of 4
    gloo ranks (3 steps, no vit, no profiled collectives: the parity only)."""
    from accelbench.backends.torch.distributed import launch

    out = tmp_path_factory.mktemp("sharding4") / "modes.json"
    outcome = launch(args=[RANKS_SCRIPT, str(out), "3", "--parity-only"], nnodes=1,
                     nproc_per_node=4, node_rank=0, rdzv_endpoint=None,
                     run_id="sharding-parity-4", log_dir=str(out.parent / "logs"),
                     rdzv_timeout_s=120)
    assert not outcome.failures and not outcome.error, outcome
    return json.loads(out.read_text())


def test_every_mode_at_4_ranks_follows_the_single_device_loss_curve(mode_losses_4: dict
                                                                    ) -> None:
    """4 ranks: ddp, fsdp, tp over 4 (llm tiny's 2 key/value heads replicated, each serving
    2 ranks) and fsdp+tp on a 2 x 2 mesh, each step's loss within 1e-3 relative of one
    device's; FSDP and TP ranks hold a share of the parameters."""
    got = dict(mode_losses_4)
    reference = got.pop("one_device")
    got.pop("one_device_batches")  # the data check's (below)
    assert len(reference) == 3 and reference[-1] < reference[0]
    assert set(got) == {"ddp", "fsdp", "tp", "fsdp+tp"}
    for mode, res in got.items():
        assert res["losses"] == pytest.approx(reference, rel=1e-3), mode
    full = got["ddp"]["local_params"]
    assert full == got["ddp"]["params"]
    assert got["fsdp"]["local_params"] == pytest.approx(full / 4, abs=16)
    # TP over 4: the blocks' q, o and MLP by quarters; k and v (replicated), the
    # embeddings and norms whole. fsdp+tp: TP's halves, halved again by FSDP.
    assert full / 4 < got["tp"]["local_params"] < full
    assert got["fsdp+tp"]["local_params"] < full / 2
    assert got["tp"]["sharding"]["mesh"] == {"dp": 1, "tp": 4}
    assert got["fsdp+tp"]["sharding"]["mesh"] == {"dp": 2, "tp": 2}


def test_the_memory_estimate_holds_what_each_rank_really_holds(
        mode_losses: dict, mode_losses_4: dict) -> None:
    """--dry-run's parameters per rank equal what the real ranks held: FSDP splits all,
    TP only its plan's layers (embeddings, norms and row-wise biases whole; llm's k and v
    whole where the degree exceeds its key/value heads), FSDP+TP halves TP's share."""
    def estimated(workload: str, ranks: int, mode: str, params: int) -> float:
        spec = RunSpec(workload=workload, size="tiny", batch_size=8, topology=Topology(
            nproc_per_node=ranks, parallel=mode,  # type: ignore[arg-type]
            tp=2 if mode == "fsdp+tp" else None))
        return estimate_rank_memory(spec, params).params / 4

    for ranks, got in ((2, mode_losses), (4, mode_losses_4)):
        for mode in ("fsdp", "tp", "fsdp+tp"):
            assert estimated("llm", ranks, mode, got[mode]["params"]) == pytest.approx(
                got[mode]["local_params"], abs=16), (ranks, mode)  # FSDP2 pads uneven rows
    for workload in ("vit", "transformer"):
        got = mode_losses[f"{workload}_tp"]
        assert estimated(workload, 2, "tp", got["params"]) == got["local_params"]


def test_every_mode_follows_the_single_device_loss_curve(mode_losses: dict) -> None:
    """Same seed and global gradient: the loss at each step within 1e-3 relative of one
    device's, in ddp, fsdp, tp and fsdp+tp (with activation checkpointing)."""
    reference = mode_losses["one_device"]
    assert reference[-1] < reference[0]  # it trains: the curve is not flat
    modes = {k: v for k, v in mode_losses.items()
             if not k.startswith(("one_device", "vit", "transformer"))}
    assert set(modes) == {"ddp", "fsdp", "tp", "fsdp+tp"}
    for mode, got in modes.items():
        assert got["losses"] == pytest.approx(reference, rel=1e-3), mode


def test_vit_tensor_parallel_splits_the_fused_qkv_by_heads(mode_losses: dict) -> None:
    """ViT's one q, k, v Linear under tp: each rank holds its heads' share of the blocks
    and the loss follows one device's."""
    reference = mode_losses["vit_one_device"]
    got = mode_losses["vit_tp"]
    assert got["losses"] == pytest.approx(reference, rel=1e-3)
    assert got["local_params"] < got["params"]


def test_transformer_tensor_parallel_splits_its_multihead_attentions(mode_losses: dict) -> None:
    """transformer's nn.MultiheadAttentions replaced by split q, k, v, o under tp: without
    dropout the loss follows one device's; each rank holds a share of the layers; the
    parameter count stays the model's; with dropout on (masks drawn per shard) it trains."""
    reference = mode_losses["transformer_one_device"]
    got = mode_losses["transformer_tp"]
    assert reference[-1] < reference[0]
    assert got["losses"] == pytest.approx(reference, rel=1e-3)
    assert got["params"] == 46_848  # transformer tiny's count, not the rank's share
    assert got["local_params"] < got["params"]
    dropout = mode_losses["transformer_tp_dropout"]
    assert dropout[-1] < dropout[0]


def test_split_attention_computes_the_multihead_attentions_function() -> None:
    """transformer's layers with their nn.MultiheadAttentions replaced by SplitAttentions
    (what tp does before its plan) give the same outputs from the same weights, in training
    and in evaluation (the layers' fast path then off), with causal, padding and
    cross-attention masks; the parameter count is unchanged."""
    import copy

    import torch
    from torch import nn

    from accelbench.backends.torch.tp_attention import SplitAttention, split_attention

    torch.manual_seed(0)
    enc = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    dec = nn.TransformerDecoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    x, mem = torch.randn(2, 5, 16), torch.randn(2, 6, 16)
    causal = torch.triu(torch.ones(5, 5, dtype=torch.bool), 1)
    pad = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])

    def run(e: nn.Module, d: nn.Module) -> list[torch.Tensor]:
        return [e(x), e(mem, src_key_padding_mask=pad),
                d(x, mem, tgt_mask=causal, tgt_is_causal=True),
                d(x, mem, tgt_mask=causal, memory_key_padding_mask=pad)]

    split_enc, split_dec = copy.deepcopy(enc), copy.deepcopy(dec)
    split_attention(split_enc)
    split_attention(split_dec)
    assert isinstance(split_dec.multihead_attn, SplitAttention)
    for a, b in zip(run(enc, dec), run(split_enc, split_dec), strict=True):
        torch.testing.assert_close(b, a)
    for m in (enc, dec, split_enc, split_dec):
        m.eval()
    with torch.no_grad():  # the original layers take their fused fast path here
        for a, b in zip(run(enc, dec), run(split_enc, split_dec), strict=True):
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)
    count = [sum(p.numel() for p in m.parameters()) for m in (enc, split_enc)]
    assert count[0] == count[1]


def test_fsdp_ranks_time_their_all_gathers_and_reduce_scatters(mode_losses: dict) -> None:
    """One profiled step per mode on the real gloo ranks: FSDP all-gathers and
    reduce-scatters (no all-reduce), TP all-reduces, DDP has no collective record."""
    fsdp = mode_losses["fsdp"]["collectives"]
    assert fsdp["all_gather_s"] > 0 and fsdp["reduce_scatter_s"] > 0
    assert fsdp["calls"]["all_gather"] >= 3 and fsdp["calls"]["reduce_scatter"] >= 3
    assert fsdp["calls"]["all_reduce"] == 0
    assert mode_losses["tp"]["collectives"]["all_reduce_s"] > 0
    # 2 ranks: fsdp+tp is dp 1 x tp 2, so FSDP has nobody to gather from
    assert mode_losses["fsdp+tp"]["collectives"]["calls"]["all_reduce"] > 0
    assert mode_losses["ddp"]["collectives"] is None


def test_fsdp_exposes_part_of_its_collective_time(mode_losses: dict) -> None:
    """The same profiled step: the exposed time (collectives no compute overlapped,
    tests/test_exposed_comm.py) is above 0 and at most the collectives' total."""
    from accelbench.phase_text import collective_total_s

    fsdp = mode_losses["fsdp"]["collectives"]
    total = collective_total_s(fsdp)
    assert total is not None
    # the kinds are summed after dividing by the steps: equal totals may differ in a last bit
    assert 0 < fsdp["exposed_s"] <= total * (1 + 1e-9), fsdp


def test_collective_kinds_come_from_the_op_that_queued_them() -> None:
    """gloo names a reduce-scatter's work all_reduce: the c10d op (paired in start order)
    says what it was; NCCL kernels say it themselves; nothing recorded is unavailable."""
    from accelbench.backends.torch.phases import collective_seconds

    gloo = [("c10d::_allgather_base_", 0, 5, False),
            ("c10d::_reduce_scatter_base_", 10, 5, False),
            ("gloo:all_gather", 1, 2000, False), ("gloo:all_reduce", 11, 4000, False),
            ("aten::mm", 3, 9000, False)]
    got = collective_seconds(gloo, 2)
    assert got["all_gather_s"] == pytest.approx(1e-3)
    assert got["reduce_scatter_s"] == pytest.approx(2e-3) and got["all_reduce_s"] == 0
    assert got["calls"] == {"all_gather": 0.5, "reduce_scatter": 0.5, "all_reduce": 0.0}
    unpaired = collective_seconds(gloo[1:], 1)
    assert unpaired["all_reduce_s"] == pytest.approx(4e-3)
    assert "gloo's own names" in unpaired["note"]
    nccl = [("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL", 0, 300, True),
            ("ncclDevKernel_AllGather_RING_LL", 5, 100, True),
            ("c10d::allgather_", 0, 1, False)]
    got = collective_seconds(nccl, 1)
    assert got["reduce_scatter_s"] == pytest.approx(3e-4)
    assert got["all_gather_s"] == pytest.approx(1e-4)
    none = collective_seconds([("aten::mm", 0, 10, False)], 1)
    assert none["all_gather_s"] is None and "no collective" in none["note"]


@pytest.mark.parametrize(("parallel", "tp", "ranks", "replicas"), [
    ("ddp", None, 4, [(0, 4), (1, 4), (2, 4), (3, 4)]),
    ("fsdp", None, 4, [(0, 4), (1, 4), (2, 4), (3, 4)]),
    ("tp", None, 4, [(0, 1)] * 4),
    ("fsdp+tp", 2, 4, [(0, 2), (0, 2), (1, 2), (1, 2)]),
    ("fsdp+tp", 2, 8, [(0, 4), (0, 4), (1, 4), (1, 4), (2, 4), (2, 4), (3, 4), (3, 4)]),
    ("fsdp+tp", 4, 8, [(0, 2)] * 4 + [(1, 2)] * 4),
])
def test_a_ranks_data_replica_is_its_data_parallel_coordinate(
        parallel: str, tp: int | None, ranks: int, replicas: list) -> None:
    """--data's sampler shards by (replica, replicas): every rank its own under ddp and
    fsdp, one per tensor-parallel group (rank // tp, row-major as init_device_mesh lays the
    ranks out: the launches below check it against the real mesh)."""
    from accelbench.backends.torch.sharding import data_replica

    spec = RunSpec(workload="llm", size="tiny", batch_size=64, topology=Topology(
        nproc_per_node=ranks, parallel=parallel, tp=tp))  # type: ignore[arg-type]
    assert [data_replica(spec, r) for r in range(ranks)] == replicas


def test_data_is_planned_by_data_parallel_replica_and_refused_for_jax_processes() -> None:
    """--data with a sharded torch mode is planned: one step trains a batch per replica and
    the dataset must hold one per replica's shard (llm tiny's generated set: 3855 windows;
    a batch of 2000 fits one replica, not two); JAX's processes keep their one-line
    refusal."""
    big = dataclasses.replace(TINY, data="generated", batch_size=2000 * 16)  # 2000 windows
    tp4 = prepare_case("llm", big, topology=Topology(nproc_per_node=4, parallel="tp"))
    assert tp4.samples_per_step == big.batch_size  # the 4 ranks read one batch
    grid = prepare_case("llm", dataclasses.replace(big, batch_size=64), topology=Topology(
        nproc_per_node=4, parallel="fsdp+tp", tp=2))
    assert grid.samples_per_step == 2 * 64 and grid.spec.data == "generated"
    for topo, says in ((Topology(nproc_per_node=4, parallel="fsdp+tp", tp=2),
                        "3855 samples (2 data-parallel replicas' shards of 1927), fewer than "
                        "one batch of 2000"),
                       (Topology(nproc_per_node=4, parallel="fsdp"),
                        "3855 samples (4 ranks' shards of 963), fewer than one batch of 2000")):
        with pytest.raises(ConfigError, match=re.escape(says)):
            prepare_case("llm", big, topology=topo)
    jax = dataclasses.replace(TINY, framework="jax", data="generated")
    with pytest.raises(ConfigError, match="with JAX processes") as exc:
        prepare_case("llm", jax, topology=Topology(nproc_per_node=2, parallel="fsdp"))
    assert "\n" not in str(exc.value)


def test_each_rank_reads_its_data_parallel_replicas_batches(mode_losses: dict,
                                                            mode_losses_4: dict) -> None:
    """The step's feed of --data generated on real gloo ranks: a tensor-parallel group's
    ranks read the same batches (tp over every rank: one device's), data-parallel replicas
    disjoint shards; the replica is the rank's dp coordinate on the step's own mesh."""
    one = mode_losses["one_device_batches"]
    assert len(one) == 3 and len(set(one)) == 3
    two, four = ({m: r["data"] for m, r in got.items() if m in ("ddp", "fsdp", "tp", "fsdp+tp")}
                 for got in (mode_losses, mode_losses_4))
    for mode in ("ddp", "fsdp"):  # each rank its own replica: shards, no batch shared
        for got, n in ((two, 2), (four, 4)):
            assert got[mode]["replica"] == [[r, n] for r in range(n)]
            batches = [b for rank in got[mode]["batches"] for b in rank]
            assert len(set(batches)) == len(batches), mode
    assert four["fsdp"]["coordinate"] == [[r] for r in range(4)]
    # tp over every rank, and fsdp+tp on a 1 x 2 mesh: one replica, one device's batches
    for data in (two["tp"], four["tp"], two["fsdp+tp"]):
        assert all(b == one for b in data["batches"])
        assert all(r == [0, 1] for r in data["replica"])
    assert two["fsdp+tp"]["coordinate"] == [[0, 0], [0, 1]]
    # fsdp+tp on 2 x 2: ranks 0, 1 are replica 0 and 2, 3 replica 1 (the mesh's dp
    # coordinate); each pair reads what 2 data-parallel ranks read
    grid = four["fsdp+tp"]
    assert grid["coordinate"] == [[0, 0], [0, 1], [1, 0], [1, 1]]
    assert [r[0] for r in grid["replica"]] == [c[0] for c in grid["coordinate"]]
    assert grid["batches"][0] == grid["batches"][1] == two["ddp"]["batches"][0]
    assert grid["batches"][2] == grid["batches"][3] == two["ddp"]["batches"][1]
    assert grid["batches"][0] != grid["batches"][2]


def test_sharded_modes_hold_a_share_of_the_parameters(mode_losses: dict) -> None:
    """The parity is not DDP four times: FSDP holds half of the parameters per rank, TP the
    blocks' linear layers by half (embeddings and norms whole), and the record says so."""
    full = mode_losses["ddp"]["local_params"]
    assert full == mode_losses["ddp"]["params"]
    assert mode_losses["fsdp"]["local_params"] == pytest.approx(full / 2, abs=8)
    assert full / 2 < mode_losses["tp"]["local_params"] < full
    assert mode_losses["fsdp+tp"]["local_params"] < full
    assert mode_losses["fsdp+tp"]["sharding"]["mesh"] == {"dp": 1, "tp": 2}
    assert mode_losses["fsdp+tp"]["sharding"]["act_ckpt"] is True
    assert mode_losses["ddp"]["sharding"] is None


def test_a_sharded_run_records_its_mode_mesh_and_memory_per_rank(tmp_path: Path) -> None:
    """``run --parallel tp --phases --data generated``: the record states mode and mesh;
    each rank's peak memory and step times are kept; the global batch counts data-parallel
    replicas (one here: both ranks read one batch a step); the input section is rank 0's
    waits, their phase the step's input; each rank's time in TP's all-reduces is stored and
    printed."""
    db = tmp_path / "r.db"
    p = run_cli("run", "llm", "--size", "tiny", "--parallel", "tp", "--nproc-per-node", "2",
                "--iterations", "3", "--no-energy", "--phases", "--data", "generated",
                "--loader-workers", "0", db=db)
    assert p.returncode == 0, p.stderr
    assert "tp, mesh dp 1 x tp 2" in p.stdout and "memory/rank   0: " in p.stdout
    with open_store(str(db)) as st:
        [r] = st.query()
    assert r.status == "ok", r.error
    assert r.ranks["parallel"] == "tp" and r.ranks["mesh"]["tp"] == 2
    assert r.samples_per_step == r.spec.batch_size  # one replica: TP ranks share a batch
    assert r.summary()["global_batch_size"] == r.spec.batch_size
    assert r.stats is not None
    assert r.stats.samples_per_s == pytest.approx(r.spec.batch_size / r.stats.median_s,
                                                  rel=1e-6)
    assert r.input is not None and r.input.source == "generated"
    assert len(r.input.wait_s) == 3 and 0 < r.input.stall_fraction < 1
    assert "input" in [ph.name for ph in r.phases.phases]
    per_rank = r.ranks["per_rank"]
    assert [x["rank"] for x in per_rank] == [0, 1]
    assert all(x["peak_memory_bytes"] and len(x["iteration_times_s"]) == 3 for x in per_rank)
    assert r.backend_extra["sharding"]["mode"] == "tp"
    assert r.phases is not None
    coll = r.phases.collectives
    assert [c["rank"] for c in coll] == [0, 1]
    for c in coll:  # TP: two all-reduces per block forward (row-wise o and down), none else
        assert c["all_reduce_s"] > 0 and c["calls"]["all_reduce"] >= 4
        assert c["all_gather_s"] == 0 and c["calls"]["all_gather"] == 0
    assert "torch.profiler" in r.phases.collectives_method
    assert "collectives   per rank" in p.stdout and "rank 1: all_gather 0.00 ms" in p.stdout
    assert all(c["exposed_s"] is not None for c in coll) and ", exposed " in p.stdout


def _case(**topo: object) -> RunSpec:
    return prepare_case("llm", TINY, topology=Topology(nproc_per_node=2, **topo)).spec  # type: ignore[arg-type]


@pytest.mark.parametrize(("workload", "topo", "says"), [
    ("resnet50", {"parallel": "tp"}, "no tensor-parallel plan"),
    ("lstm", {"parallel": "fsdp+tp", "tp": 2}, "lstm has no tensor-parallel plan"),
    ("llm", {"parallel": "fsdp+tp"}, "needs --tp N"),
    ("llm", {"parallel": "ddp", "tp": 2}, "--tp needs --parallel tp"),
    ("llm", {"parallel": "tp", "tp": 1}, "use --parallel fsdp+tp"),
    ("resnet50", {"act_ckpt": True}, "has none"),
])
def test_modes_a_case_cannot_run_are_refused_in_one_line(workload: str, topo: dict,
                                                         says: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(says)) as exc:
        prepare_case(workload, TINY, topology=Topology(nproc_per_node=2, **topo))  # type: ignore[arg-type]
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize(("ranks", "says"), [
    (3, "--tp 3 must divide the heads and widths of llm at tiny (4, 64) and divide its 2 "
        "key/value heads or be a multiple of them"),
    (8, "--tp 8 must divide the heads"),
])
def test_a_tp_degree_that_splits_no_heads_is_refused(ranks: int, says: str) -> None:
    """Key/value heads fewer than the degree are replicated (4 ranks over llm tiny's 2 are
    planned); a degree that does not divide the query heads is refused in one line."""
    assert prepare_case("llm", TINY, topology=Topology(nproc_per_node=4, parallel="tp")
                        ).spec.topology.tp_degree == 4
    with pytest.raises(ConfigError, match=re.escape(says)) as exc:
        prepare_case("llm", TINY, topology=Topology(nproc_per_node=ranks, parallel="tp"))
    assert "\n" not in str(exc.value)


def test_key_value_heads_neither_dividing_nor_divided_by_the_degree_are_refused() -> None:
    """check_plans with key/value heads apart (torch's): 6 splits 12 query heads, but 4
    key/value heads neither split 6 ways nor replicate evenly; without them (JAX's) the
    degree must divide every width."""
    from accelbench.backends.sharding_rules import check_plans

    spec = _case(parallel="tp")  # tp over 2 ranks
    six = dataclasses.replace(spec, topology=Topology(nproc_per_node=6, parallel="tp"))
    kw: dict = {"plans": ("llm",), "later": {}, "blocks": ()}
    with pytest.raises(ConfigError, match="divide its 4 key/value heads or be a multiple"):
        check_plans(six, widths=(12,), kv_heads=4, **kw)
    check_plans(six, widths=(12,), kv_heads=2, **kw)  # 3 ranks per key/value head
    check_plans(six, widths=(12,), kv_heads=12, **kw)  # 2 key/value heads per rank
    with pytest.raises(ConfigError, match=r"must divide the heads and widths of llm at tiny "
                                          r"\(12, 2\)$"):
        check_plans(six, widths=(12, 2), **kw)


def test_jax_processes_refuse_what_jax_distributed_does_not_run_here() -> None:
    """JAX's processes join through jax.distributed on CPUs (tests/test_sharding_jax.py);
    its CPU collectives are gloo's, and --phases across JAX processes is not yet."""
    jax = dataclasses.replace(TINY, framework="jax")
    with pytest.raises(ConfigError, match="talk through gloo"):
        prepare_case("llm", jax, topology=Topology(parallel="fsdp", nproc_per_node=2,
                                                   dist_backend="nccl"))
    with pytest.raises(ConfigError, match="--phases with JAX processes"):
        prepare_case("llm", jax, policy=MeasurementPolicy(phases=True),
                     topology=Topology(nproc_per_node=2))


def test_plain_cases_keep_their_key_and_record_bytes() -> None:
    """A DDP (or single-device) spec writes no sharding field; a sharded one is another
    case."""
    plain = _case()
    assert set(plain.to_dict()["topology"]) == {"nnodes", "nproc_per_node", "dist_backend",
                                                "node_rank", "rdzv_endpoint"}
    fsdp = _case(parallel="fsdp")
    assert fsdp.to_dict()["topology"]["parallel"] == "fsdp"
    assert fsdp.case_key() != plain.case_key()
    assert RunSpec.from_dict(fsdp.to_dict()) == fsdp
    assert RunSpec.from_dict(plain.to_dict()) == plain


def test_memory_estimate_shards_by_degree_and_says_what_cannot_fit() -> None:
    n = 1_000_000
    ddp = estimate_rank_memory(_case(), n)
    fsdp = estimate_rank_memory(_case(parallel="fsdp"), n)
    tp = estimate_rank_memory(_case(parallel="tp"), n)
    ckpt = estimate_rank_memory(_case(parallel="fsdp", act_ckpt=True), n)
    assert (ddp.params, ddp.grads, ddp.optimizer) == (4 * n, 4 * n, 8 * n)  # AdamW fp32
    assert (fsdp.params, fsdp.optimizer) == (2 * n, 4 * n)
    assert tp.activations is not None and ddp.activations is not None
    assert tp.activations < ddp.activations  # TP splits the layer's inner activations
    assert ckpt.activations is not None and ckpt.activations < fsdp.activations  # type: ignore[operator]
    assert fits(ddp, ddp.total * 2, 2) is True and fits(ddp, ddp.total * 2 - 1, 2) is False
    assert fits(ddp, None, 1) is None
    resnet = estimate_rank_memory(prepare_case("resnet50", TINY).spec, n)
    assert resnet.activations is None and "not estimated" in resnet.note


def test_dry_run_prints_each_ranks_memory(capsys: pytest.CaptureFixture[str]) -> None:
    """``run --dry-run``'s answer (in-process: it opens no store and starts nothing)."""
    from rich.console import Console

    from accelbench.cli.run import dry_run

    spec = prepare_case("llm", TINY, topology=Topology(nproc_per_node=4, parallel="fsdp+tp",
                                                       tp=2)).spec
    assert dry_run(spec, Console(), as_json=True) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mesh"] == {"dp": 2, "tp": 2} and out["fits"] is True
    assert out["per_rank_bytes"]["total"] > 0 and out["per_rank_bytes"]["activations"] > 0


def _measured(spec: RunSpec, samples_per_s: int, world: int) -> Result:
    """A record of ``samples_per_s`` (1 s steps of that many samples) on ``world`` ranks."""
    stats = compute_stats([1.0, 1.0, 1.0], samples_per_s, trim_fraction=0.0,
                          stop_reason="iterations")
    return Result(id="x", spec=spec, status="ok", samples_per_step=samples_per_s,
                  sample_unit="tokens", stats=stats, flop_per_sample=1e9,
                  flop_method="analytic", peak_flop_per_s=1e12, ranks={"world_size": world})


def test_mfu_counts_the_models_flops_once_and_refuses_above_100_percent() -> None:
    spec = _case(parallel="tp")
    # 2 ranks at 1 TFLOP/s each; 1e9 FLOP/token x 1000 tokens/s = 1e12 FLOP/s: 50%.
    r = _measured(spec, 1000, 2)
    assert r.mfu == pytest.approx(0.5) and r.mfu_refused == ""
    wrong = _measured(spec, 3000, 2)
    assert wrong.mfu is None
    assert "150%" in wrong.mfu_refused and "above 100%" in wrong.mfu_refused


def test_the_sharding_suite_runs_each_mode_that_fits_the_heads() -> None:
    """llm tiny has 4 heads and 2 key/value heads: TP at 2 ranks and at 4 (each key/value
    head replicated over 2 ranks), fsdp+tp with --tp 2 from 4 ranks."""
    from accelbench.planning.suites import SuiteContext, get_suite

    cases = get_suite("sharding").cases(SuiteContext(
        device="cpu", frameworks=("torch",), supported={"torch": ("fp32",)}, size="tiny",
        max_ranks=4))
    got = [(c.topology.world_size, c.topology.parallel, c.topology.tp) if c.topology
           else (1, "ddp", None) for c in cases]
    assert got == [(1, "ddp", None), (2, "ddp", None), (2, "fsdp", None), (2, "tp", None),
                   (4, "ddp", None), (4, "fsdp", None), (4, "tp", None), (4, "fsdp+tp", 2)]


def test_suite_plans_store_sharding_options_only_where_given() -> None:
    from accelbench.planning.plan import SuitePlan

    plain = SuitePlan(name="scaling").to_dict()["topology"]
    assert "parallel" not in plain and "tp" not in plain and "act_ckpt" not in plain
    fsdp = SuitePlan(name="scaling", topology=Topology(parallel="fsdp")).to_dict()
    assert fsdp["topology"]["parallel"] == "fsdp"
    assert SuitePlan.from_dict(fsdp).topology.parallel == "fsdp"


def test_report_rows_tell_a_sharded_case_from_a_ddp_one() -> None:
    """Rows pair and label within one mode; an unsharded row keeps its keys."""
    from accelbench.report.rows import case_row

    fsdp = case_row(_measured(_case(parallel="fsdp", act_ckpt=True), 1000, 2))
    plain = case_row(_measured(_case(), 1000, 2))
    assert fsdp.parallel == "fsdp act-ckpt" and "fsdp act-ckpt" in fsdp.case_label
    assert plain.parallel is None and "parallel" not in plain.to_dict()


def test_a_cpu_case_that_cannot_fit_the_host_is_warned_before_it_starts() -> None:
    import io

    from rich.console import Console

    from accelbench.cli.run import warn_unfit

    big = prepare_case("llm", RunChoices(size="paper"),
                       topology=Topology(nproc_per_node=64, parallel="fsdp")).spec
    buf = io.StringIO()
    warn_unfit(Console(file=buf, width=200), big)
    assert "64 rank(s)" in buf.getvalue() and "exceed the host's" in buf.getvalue()
    buf = io.StringIO()
    warn_unfit(Console(file=buf, width=200), _case(parallel="fsdp"))  # tiny: fits
    assert buf.getvalue() == ""
