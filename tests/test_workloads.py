"""Tests of the built-in training workloads, parametrised over every registered one.

Everything runs at size ``tiny`` except the parameter counts, which build the
paper models on the meta device (no memory, no initialisation cost).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

import accelbench.workloads.registry as registry
from accelbench.backends.torch.models.inception import Inception3
from accelbench.errors import ConfigError
from accelbench.spec import SIZES
from accelbench.workloads import Workload, get_implementation, get_workload, list_workloads

WORKLOADS = list_workloads()
CPU = torch.device("cpu")

#: Paper-size parameter counts: exact where torchvision or arithmetic fixes them.
EXACT_PARAMS = {
    "resnet50": 25_557_032,
    "vgg16": 138_357_544,
    "inception_v3": 23_834_568,  # torchvision without the aux head
    "lstm": 51_034_000,  # 15,000,000 + 2 x 18,012,000 + 10,000
    "deepspeech2": 86_618_400,
    "transformer": 60_915_712,
}
#: Ranges from the paper (Table 6) and the issue, so the exact numbers above are
#: also checked against what the paper reports.
PARAM_RANGES = {
    "resnet50": (25.3e6, 25.8e6),
    "vgg16": (137e6, 139.7e6),
    "inception_v3": (23.6e6, 27.5e6),
    "lstm": (50.5e6, 51.5e6),
    "deepspeech2": (85.7e6, 87.5e6),
    "transformer": (60e6, 66e6),
}


def impl(workload: Workload) -> Any:
    """The workload's torch implementation."""
    return get_implementation(workload.name, "torch")


def _tiny_setup(workload: Workload, seed: int = 0) -> tuple[torch.nn.Module, registry.Batch]:
    torch.manual_seed(seed)
    model = impl(workload).build_model("tiny")
    model.train()
    generator = torch.Generator().manual_seed(seed)
    batch_size = workload.default_batch_sizes["tiny"][0]
    batch = impl(workload).make_batch("tiny", batch_size, CPU, generator)
    return model, batch


def _sgd(model: torch.nn.Module, lr: float) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)


by_name = pytest.mark.parametrize("workload", WORKLOADS, ids=lambda w: w.name)


@by_name
def test_a_training_step_updates_every_parameter_and_the_loss_falls(
        workload: Workload) -> None:
    """The first step: a scalar finite loss, a finite gradient for every parameter, and
    parameters changed by the optimiser; then, over 8 steps on a fixed batch at the
    workload's own learning rate (seeded: deterministic on a given machine), the loss
    falls. (One model build for both checks: tiny Inception's build and steps cost tens
    of seconds on a busy 2-core machine.)"""
    model, batch = _tiny_setup(workload)
    before = [p.detach().clone() for p in model.parameters()]
    opt = _sgd(model, workload.learning_rate)
    losses = []
    for i in range(8):
        opt.zero_grad()
        loss = impl(workload).loss(model, batch)
        loss.backward()
        if i == 0:
            assert loss.dim() == 0
            assert math.isfinite(loss.item())
            for name, p in model.named_parameters():
                assert p.grad is not None, f"no gradient for {name}"
                assert torch.isfinite(p.grad).all(), f"non-finite gradient for {name}"
        opt.step()
        if i == 0:
            changed = sum(not torch.equal(b, p)
                          for b, p in zip(before, model.parameters(), strict=True))
            assert changed > 0
            del before
        losses.append(loss.item())
    assert all(math.isfinite(x) for x in losses), losses
    assert losses[-1] < losses[0], losses


@by_name
def test_training_step_under_cpu_autocast_bf16(workload: Workload) -> None:
    model, batch = _tiny_setup(workload)
    opt = _sgd(model, workload.learning_rate)
    opt.zero_grad()
    try:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            loss = impl(workload).loss(model, batch)
    except RuntimeError as exc:
        if "could not create a primitive descriptor" not in str(exc):
            raise
        pytest.skip(f"this CPU's oneDNN has no bf16 primitive for {workload.name} "
                    "(no AVX-512 BF16); a run records it as an error")
    assert math.isfinite(loss.item())
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())
    opt.step()


@by_name
def test_model_and_batch_are_deterministic(workload: Workload) -> None:
    model_a, batch_a = _tiny_setup(workload, seed=3)
    model_b, batch_b = _tiny_setup(workload, seed=3)
    for a, b in zip(model_a.state_dict().values(), model_b.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    for a, b in zip(batch_a, batch_b, strict=True):
        assert a.device == CPU
        assert torch.equal(a, b)


@by_name
def test_paper_parameter_count(workload: Workload) -> None:
    with torch.device("meta"):
        model = impl(workload).build_model("paper")
    count = sum(p.numel() for p in model.parameters())
    assert count > 0
    if workload.name in EXACT_PARAMS:
        assert count == EXACT_PARAMS[workload.name]
        low, high = PARAM_RANGES[workload.name]
        assert low <= count <= high


@by_name
def test_default_batch_sizes_and_notes(workload: Workload) -> None:
    assert workload.description
    for size in SIZES:
        sizes = workload.default_batch_sizes[size]  # type: ignore[index]
        assert sizes, size
        for bs in sizes:
            assert isinstance(bs, int) and not isinstance(bs, bool) and bs > 0
            workload.validate_batch_size(size, bs)  # type: ignore[arg-type]
        assert workload.size_notes(size)  # type: ignore[arg-type]


@by_name
def test_non_positive_batch_size_is_rejected(workload: Workload) -> None:
    for bad in (0, -4):
        with pytest.raises(ConfigError):
            workload.validate_batch_size("tiny", bad)


def test_paper_batch_sizes_match_the_paper() -> None:
    expected = {
        "resnet50": (64, 128),
        "vgg16": (64, 128),
        "inception_v3": (64, 128),
        "lstm": (64, 128, 256),
        "deepspeech2": (8, 16, 32),
        "transformer": (1024, 2048, 4096),
    }
    for name, sizes in expected.items():
        assert tuple(get_workload(name).default_batch_sizes["paper"]) == sizes


def test_transformer_batch_size_counts_tokens() -> None:
    workload = get_workload("transformer")
    with pytest.raises(ConfigError, match="multiple of the sequence length 32"):
        workload.validate_batch_size("paper", 1000)
    with pytest.raises(ConfigError):
        impl(workload).make_batch("paper", 1000, CPU, torch.Generator().manual_seed(0))
    workload.validate_batch_size("paper", 1024)
    gen = torch.Generator().manual_seed(0)
    src, tgt_in, labels = impl(workload).make_batch("tiny", 64, CPU, gen)
    assert src.numel() == tgt_in.numel() == labels.numel() == 64
    # Labels are the decoder input shifted by one (teacher forcing).
    assert torch.equal(tgt_in[:, 1:], labels[:, :-1])


def test_inception_aux_head_matches_torchvision() -> None:
    with torch.device("meta"):
        model = Inception3(aux_logits=True)
    assert sum(p.numel() for p in model.parameters()) == 27_161_264
    # The aux head runs at 299x299; the loss then adds 0.4 x the aux loss.
    torch.manual_seed(0)
    small = Inception3(num_classes=10, aux_logits=True, width_divisor=8)
    images = torch.randn(2, 3, 299, 299)
    labels = torch.tensor([1, 7])
    out = small(images)
    assert isinstance(out, tuple) and len(out) == 2
    loss = impl(get_workload("inception_v3")).loss(small, (images, labels))
    assert math.isfinite(loss.item())
    small.eval()
    assert isinstance(small(images), torch.Tensor)


def test_importing_workloads_does_not_import_torch() -> None:
    src = str(Path(registry.__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    code = "import accelbench.workloads, sys; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], env=env, check=True)


def test_model_files_declare_what_importing_them_registers() -> None:
    """``@implements`` lines are read without importing the model files (``accelbench list``
    imports no framework): importing every one of them afterwards registers nothing more,
    and listing imported no framework."""
    code = """
import importlib, pkgutil, sys
from accelbench.workloads import implementation_frameworks, list_workloads
before = {w.name: implementation_frameworks(w.name) for w in list_workloads()}
assert "torch" not in sys.modules and "jax" not in sys.modules
assert all(fws == ("torch", "jax") for fws in before.values()), before
import accelbench.backends.torch.models as pkg
for info in pkgutil.iter_modules(pkg.__path__):
    importlib.import_module(f"{pkg.__name__}.{info.name}")
after = {w.name: implementation_frameworks(w.name) for w in list_workloads()}
assert after == before, (before, after)
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=False, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
