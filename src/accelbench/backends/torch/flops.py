"""FLOPs per sample of a torch workload implementation, forward and forward+backward.

Counting runs the workload's real ``loss(model, batch)`` and ``backward()``
under :class:`torch.utils.flop_counter.FlopCounterMode` on the **meta**
device: shapes propagate, nothing is allocated or computed, so even VGG-16
at paper size is counted in well under a second.

``FlopCounterMode`` counts matrix multiplies, convolutions and attention
(each multiply-add = 2 FLOPs; elementwise work, normalisation and losses
count 0). It does not count recurrent layers on real devices (the fused
``mkldnn_rnn_layer`` / ``_cudnn_rnn`` kernels have no formula), so every
``nn.LSTM``, ``nn.GRU`` and ``nn.RNN`` is counted analytically instead, with
:func:`accelbench.opbench.formulas.rnn_flops`: per time step, layer, direction and
sample ``2 * G * H * (I + H)`` (G = 4 gates for an LSTM), no elementwise
terms (the same convention as every other layer; an LSTM's elementwise work,
17 FLOPs per hidden unit and step, is under 0.1% at the paper sizes), and
backward = 2 x forward. During counting the recurrent module is replaced by
a stand-in that returns correctly shaped outputs connected to its input, so
the layers before it still see their gradients.

The optimizer step is not counted (elementwise). Backward counts what
autograd actually runs: the first layer of a CNN computes no input gradient,
so its training FLOPs are a little under 3 x forward.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from accelbench.backends.base import FlopCount
from accelbench.errors import ConfigError
from accelbench.opbench.formulas import rnn_flops
from accelbench.workloads.analytic import with_analytic

if TYPE_CHECKING:
    import torch

    from accelbench.backends.torch.model import TorchModel

class _RnnTally:
    """Analytic FLOPs of the recurrent layers run while counting."""

    def __init__(self) -> None:
        self.forward = 0
        self.backward = 0


def _rnn_mode(module: torch.nn.Module) -> str:
    import torch

    if isinstance(module, torch.nn.LSTM):
        return "LSTM"
    if isinstance(module, torch.nn.GRU):
        return "GRU"
    return str(getattr(module, "mode", "RNN_TANH"))


def _rnn_stand_in(module: torch.nn.RNNBase, tally: _RnnTally) -> Any:
    """A forward for ``module`` that counts analytically and returns shaped placeholders."""
    import torch
    from torch.nn.utils.rnn import PackedSequence

    def forward(x: Any, hx: Any = None) -> Any:
        if isinstance(x, PackedSequence):
            raise ConfigError(
                "FLOP counting of packed sequences is not supported; use padded tensors"
            )
        batched = x.dim() == 3
        if batched:
            batch, seq = (x.shape[0], x.shape[1]) if module.batch_first else (
                x.shape[1], x.shape[0]
            )
        else:
            batch, seq = 1, x.shape[0]
        mode = _rnn_mode(module)
        proj = int(getattr(module, "proj_size", 0) or 0)
        flops = rnn_flops(
            mode=mode, batch=int(batch), seq_len=int(seq), input_size=module.input_size,
            hidden_size=module.hidden_size, num_layers=module.num_layers,
            bidirectional=module.bidirectional, proj_size=proj,
        )
        tally.forward += flops
        tally.backward += 2 * flops
        directions = 2 if module.bidirectional else 1
        h_out = proj or module.hidden_size
        out_shape = (*x.shape[:-1], directions * h_out)
        # Zero FLOPs in the counter's eyes, but differentiable w.r.t. the input,
        # so the layers before the RNN get their backward pass counted.
        link = x.sum() * 0
        out = torch.zeros(out_shape, dtype=x.dtype, device=x.device) + link
        state_shape = (module.num_layers * directions, *((batch,) if batched else ()))
        h_n = torch.zeros((*state_shape, h_out), dtype=x.dtype, device=x.device) + link
        if mode == "LSTM":
            c_n = torch.zeros(
                (*state_shape, module.hidden_size), dtype=x.dtype, device=x.device
            ) + link
            return out, (h_n, c_n)
        return out, h_n

    return forward


@contextlib.contextmanager
def _analytic_rnns(model: torch.nn.Module, tally: _RnnTally) -> Iterator[int]:
    """Swap every recurrent module's forward for an analytic stand-in; yields how many."""
    import torch

    swapped = []
    for m in model.modules():
        if isinstance(m, torch.nn.RNNBase):
            m.forward = _rnn_stand_in(m, tally)
            swapped.append(m)
    try:
        yield len(swapped)
    finally:
        for m in swapped:
            del m.forward


def _ctc_stand_in(log_probs: Any, *args: Any, reduction: str = "mean", **kwargs: Any) -> Any:
    # CTC has no meta kernel; its dynamic programme is O(T * L) per sample and
    # is not counted by FlopCounterMode anyway. Shaped like ctc_loss's result.
    del args, kwargs
    if reduction == "none":
        return log_probs.sum(dim=(0, 2)) * 0
    return log_probs.sum() * 0


@contextlib.contextmanager
def _meta_safe_losses() -> Iterator[None]:
    import torch.nn.functional as F

    original = F.ctc_loss
    F.ctc_loss = _ctc_stand_in
    try:
        yield
    finally:
        F.ctc_loss = original


def _by_operator(counts: dict[str, dict[Any, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for op, value in counts.get("Global", {}).items():
        name = str(op).removeprefix("aten.")
        out[name] = out.get(name, 0) + int(value)
    return out


def count_on(
    impl: TorchModel, size: str, batch_size: int, *, device: str = "meta"
) -> FlopCount:
    """Count one forward and one backward of ``impl`` at ``batch_size`` on ``device``.

    Args:
        impl: A workload's torch implementation.
        size: ``tiny``, ``small`` or ``paper``.
        batch_size: Samples per step (the count is divided by it).
        device: ``meta`` (default: nothing is allocated) or ``cpu``.
    """
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    workload = impl.workload
    workload.validate_batch_size(size, batch_size)
    dev = torch.device(device)
    gen = torch.Generator().manual_seed(0)
    tally = _RnnTally()
    with dev:
        model = impl.build_model(size).to(dev).train()
        batch = impl.make_batch(size, batch_size, dev, gen)
    stack = contextlib.ExitStack()
    with stack:
        n_rnn = stack.enter_context(_analytic_rnns(model, tally))
        if device == "meta":
            stack.enter_context(_meta_safe_losses())
        with FlopCounterMode(display=False) as fwd_counter:
            loss = impl.loss(model, batch)
        with FlopCounterMode(display=False) as bwd_counter:
            loss.backward()
    fwd_ops = _by_operator(fwd_counter.get_flop_counts())
    bwd_ops = _by_operator(bwd_counter.get_flop_counts())
    counted_fwd = sum(fwd_ops.values())
    counted_bwd = sum(bwd_ops.values())
    by_op = dict(fwd_ops)
    for k, v in bwd_ops.items():
        by_op[k] = by_op.get(k, 0) + v
    if tally.forward:
        by_op["rnn"] = tally.forward + tally.backward
    forward = counted_fwd + tally.forward
    train = forward + counted_bwd + tally.backward
    method: str
    if n_rnn == 0:
        method = "flop_counter"
    elif counted_fwd == 0:
        method = "analytic"
    else:
        method = "flop_counter+analytic"
    return FlopCount(
        workload=workload.name,
        size=size,
        batch_size=batch_size,
        forward_flop_per_sample=forward / batch_size,
        train_flop_per_sample=train / batch_size,
        method=method,
        analytic_forward_flop_per_sample=tally.forward / batch_size,
        device=device,
        by_operator=tuple(sorted(((k, v / batch_size) for k, v in by_op.items()),
                                 key=lambda kv: -kv[1])),
        param_count=sum(p.numel() for p in model.parameters()),
    )


def count_flops(impl: TorchModel, size: str, batch_size: int) -> FlopCount:
    """FLOPs per sample of ``impl``, forward and forward+backward.

    Counts on the meta device (no memory, well under a second at paper size);
    falls back to a real CPU count when an operator of the workload has no
    meta kernel. A workload with an analytic count (``Workload.analytic_flops``:
    the transformers' PaLM count) gets that figure, with the counter's kept as
    the cross-check (:func:`accelbench.workloads.analytic.with_analytic`).

    Raises:
        ConfigError: an invalid batch size or size.
    """
    impl.workload.check_size(size)
    try:
        counted = count_on(impl, size, batch_size, device="meta")
    except ConfigError:
        raise
    except Exception:  # a user's model may do anything that meta tensors cannot
        # An operator without a meta kernel, or data-dependent code (.item()): count for real.
        counted = count_on(impl, size, batch_size, device="cpu")
    return with_analytic(counted, impl.workload.analytic_flops(size, batch_size))

