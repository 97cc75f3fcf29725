"""The workloads people train today (issue 13): llm, bert and vit, in torch and JAX.

Training runs through each backend's real step (its own optimizer, AdamW for these);
parameter counts at the reference sizes are taken on the meta device (torch) and by
``nnx.eval_shape`` (JAX), so no 1B model is ever allocated; FLOPs compare the
analytic (PaLM) count with both frameworks' counters.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from accelbench import api
from accelbench.backends import get_backend
from accelbench.errors import ConfigError
from accelbench.planning.cases import prepare_case
from accelbench.planning.facts import count_here, list_items
from accelbench.planning.suites import SuiteContext, get_suite
from accelbench.spec import SIZES, RunChoices, RunSpec, check_size
from accelbench.workloads import get_implementation, get_workload, list_workloads
from accelbench.workloads.analytic import palm_flops
from tests.conftest import run_cli, train_losses

NEW = ("llm", "bert", "vit")
FRAMEWORKS = ("torch", "jax")

#: Published parameter counts: (size, exact count, published figure the count is within 1%
#: of). TinyLlama-1.1B (Zhang et al. 2024); GPT-2 small (Radford et al. 2019) counting the
#: tied embedding once; BERT-base's 110M (Devlin et al. 2019), here the masked-LM model
#: without pooler (Hugging Face BertForMaskedLM: 109,514,298); ViT-B/16 (Dosovitskiy et al.
#: 2021; timm vit_base_patch16_224).
PUBLISHED = [
    ("llm", "paper", 1_100_048_384, 1.1e9),
    ("llm", "gpt2", 124_439_808, 124e6),
    ("bert", "paper", 109_514_298, 110e6),
    ("bert", "seq512", 109_514_298, 110e6),
    ("vit", "paper", 86_567_656, 86.6e6),
]


# JAX: tests/test_phases_jax.py::test_the_step_trains_at_tiny_size runs the same check over
# the registry (the backend's step, so AdamW for these), at the cost of an XLA compile each.
@pytest.mark.parametrize("framework", ["torch"])
@pytest.mark.parametrize("name", NEW)
def test_tiny_size_trains_with_the_backends_step(name: str, framework: str) -> None:
    """The backend's real training step on the CPU, its optimizer: the loss falls."""
    wl = get_workload(name)
    spec = RunSpec(workload=name, size="tiny", framework=framework,
                   batch_size=wl.default_batch_sizes["tiny"][0], threads=1)
    step = get_backend(framework).build_step(spec, get_implementation(name, framework))
    losses = train_losses(step, 6)
    # The same batch every step: the model must fit it, visibly.
    assert losses[-1] < 0.97 * losses[0], losses


def test_new_workloads_train_with_adamw_in_jax() -> None:
    import jax.numpy as jnp

    from accelbench.backends.jax.backend import make_optimizer

    params = {"w": jnp.ones((2,))}
    for name in NEW:
        wl = get_workload(name)
        assert wl.optimizer == "adamw" and wl.weight_decay > 0 and wl.learning_rate > 0
        assert wl.family == "transformer"
        state = make_optimizer(wl).init(params)
        # optax.adamw's state carries the first and second moments; sgd's has no nu.
        assert "nu" in repr(state), name
    assert "nu" not in repr(make_optimizer(get_workload("resnet50")).init(params))


@pytest.mark.parametrize(("name", "size", "exact", "published"), PUBLISHED)
def test_reference_parameter_counts(name: str, size: str, exact: int, published: float) -> None:
    counts = {fw: get_backend(fw).param_count(get_implementation(name, fw), size)
              for fw in FRAMEWORKS}
    assert counts["torch"] == counts["jax"] == exact
    assert abs(exact - published) / published < 0.01


def test_analytic_count_by_hand_at_the_reference_sizes() -> None:
    """PaLM's 6N + 12LHQT from the published configurations, worked out by hand."""
    # TinyLlama: per layer q, o 2048^2; k, v 2048 x 256 (4 KV heads of 64);
    # SwiGLU 3 x 2048 x 5632; plus the untied output 32000 x 2048.
    n = 22 * (2 * 2048**2 + 2 * 2048 * 256 + 3 * 2048 * 5632) + 32_000 * 2048
    per_token = 6 * n + 12 * 22 * 32 * 64 * 2048
    got = get_workload("llm").analytic_flops("paper", 8192)
    assert got.matmul_params == n
    assert got.train_flop_per_sample == per_token
    assert got.forward_flop_per_sample == pytest.approx(per_token / 3)
    # BERT-base per sequence of 128: 12 layers of 4d^2 + 2 d ffn, MLM transform, tied decoder.
    n = 12 * (4 * 768**2 + 2 * 768 * 3072) + 768**2 + 30_522 * 768
    per_seq = 128 * (6 * n + 12 * 12 * 12 * 64 * 128)
    assert get_workload("bert").analytic_flops("paper", 32).train_flop_per_sample == per_seq
    # ViT-B/16 per image: the layers on 197 tokens, the patch embedding on 196 patches,
    # the head on the class token.
    layers = 12 * (4 * 768**2 + 2 * 768 * 3072)
    per_image = (6 * (197 * layers + 196 * 16 * 16 * 3 * 768 + 768 * 1000)
                 + 197 * 12 * 12 * 12 * 64 * 197)
    assert get_workload("vit").analytic_flops("paper", 64).train_flop_per_sample == per_image
    assert palm_flops(groups=(), layers=1, heads=1, head_dim=1, seq_len=1).method == (
        "analytic_palm")


@pytest.mark.parametrize("size", ["tiny", "small"])
@pytest.mark.parametrize("name", NEW)
def test_analytic_within_5_percent_of_both_counters(name: str, size: str) -> None:
    from accelbench.backends.jax.flops import count_flops as jax_count
    from accelbench.backends.torch.flops import count_on

    wl = get_workload(name)
    batch = wl.default_batch_sizes[size][0]
    analytic = wl.analytic_flops(size, batch)
    counted = count_on(get_implementation(name, "torch"), size, batch)  # the raw counter
    assert counted.forward_flop_per_sample == pytest.approx(
        analytic.forward_flop_per_sample, rel=0.05)
    assert counted.train_flop_per_sample == pytest.approx(
        analytic.train_flop_per_sample, rel=0.05)
    # The JAX record keeps the jaxpr walk's breakdown; its sum is the walk's train count.
    jax_fc = jax_count(get_implementation(name, "jax"), size, batch)
    walked = sum(dict(jax_fc.by_operator).values())
    assert walked == pytest.approx(analytic.train_flop_per_sample, rel=0.05)
    assert jax_fc.train_flop_per_sample == analytic.train_flop_per_sample


def test_record_flops_are_analytic_with_the_counter_as_cross_check() -> None:
    fc = get_backend("torch").count_flops(get_implementation("llm", "torch"), "tiny", 64)
    analytic = get_workload("llm").analytic_flops("tiny", 64)
    assert fc.train_flop_per_sample == analytic.train_flop_per_sample
    assert fc.method.startswith("analytic_palm; flop_counter ")
    assert fc.method.endswith("%)")
    # Other workloads keep the counter's figure.
    assert get_backend("torch").count_flops(
        get_implementation("transformer", "torch"), "tiny", 64).method == "flop_counter"


def test_extra_sizes_are_the_workloads_own() -> None:
    assert get_workload("llm").sizes() == (*SIZES, "gpt2")
    assert get_workload("bert").sizes() == (*SIZES, "seq512")
    assert get_workload("vit").sizes() == SIZES
    assert check_size("gpt2") == "gpt2"
    case = prepare_case("llm", RunChoices(size="gpt2"), check_hardware=False)
    assert case.spec.size == "gpt2" and case.spec.batch_size == 8192
    assert case.sample_unit == "token"
    assert RunSpec.from_dict(case.spec.to_dict()) == case.spec
    with pytest.raises(ConfigError, match="workload 'lstm' has no size 'gpt2'"):
        prepare_case("lstm", RunChoices(size="gpt2"), check_hardware=False)
    with pytest.raises(ConfigError, match="no size 'seq51'.*did you mean seq512"):
        get_workload("bert").check_size("seq51")
    with pytest.raises(ConfigError, match="unknown size 'gpt3'.*gpt2"):
        prepare_case("llm", RunChoices(size="gpt3"), check_hardware=False)
    with pytest.raises(ConfigError):
        get_workload("llm").validate_batch_size("gpt2", 1000)  # not a multiple of 1024
    # A suite at a workload's own size takes only the workloads that have it.
    ctx = SuiteContext(device="cpu", frameworks=FRAMEWORKS, size="seq512",
                       supported={fw: ("fp32",) for fw in FRAMEWORKS})
    planned = get_suite("frameworks").cases(ctx)
    assert planned and {(c[0], c[1]) for c in planned} == {("bert", "seq512")}


def test_list_shows_the_extra_sizes() -> None:
    items = list_items(["llm", "bert", "vit"])
    assert ("llm", "gpt2", "torch") in items and ("llm", "gpt2", "jax") in items
    assert ("bert", "seq512", "torch") in items
    assert not any(size not in SIZES for name, size, _ in items if name == "vit")
    facts = count_here("llm", "gpt2", "torch")
    assert facts["param_count"] == 124_439_808
    assert facts["flop_method"].startswith("analytic_palm")
    assert all(w.sizes()[:3] == SIZES for w in list_workloads())


def test_cli_refuses_another_workloads_size_in_one_line(tmp_path: Path) -> None:
    proc = run_cli("run", "resnet50", "--size", "seq512", db=tmp_path / "r.db", timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "has no size 'seq512'" in lines[0], proc.stderr


def test_run_llm_stores_analytic_flops(db_path: Path) -> None:
    r = api.run("llm", size="tiny", framework="torch", iterations=3, min_iterations=3,
                idle_s=0, energy=False, threads=1)
    assert r.status == "ok", r.error
    assert r.flop_method.startswith("analytic_palm")
    assert r.flop_per_sample == get_workload("llm").analytic_flops(
        "tiny", r.spec.batch_size).train_flop_per_sample
    assert r.peak_memory_bytes is not None and r.peak_memory_bytes > 0
