"""The standard analytic FLOP count of a transformer's training step (framework-neutral).

PaLM (Chowdhery et al. 2022, appendix B): a decoder of ``N`` matmul parameters,
``L`` layers, ``H`` heads of dimension ``Q``, trained on sequences of ``T`` tokens,
costs per token

    6 * N + 12 * L * H * Q * T

FLOPs for a training step (forward + backward), and one third of it for the
forward: every matmul weight does one multiply-add per token forward (2 FLOPs)
and two backward (input and weight gradients), and the attention scores
``Q K^T`` and their use ``A V`` cost ``2 * 2 * H * Q * T`` per token and layer
forward. ``N`` counts only the parameters that take part in a matmul: the
input embedding lookup and learned position tables are gathers and are left
out, a tied output projection is a matmul and counts once; norms' scales and
biases are elementwise and left out. Attention is counted in full even when
causal, as the flop counters do (half of it is masked, not skipped).

Elementwise work (norms, softmax, activations, rotary positions, the loss) is
not counted, which is the convention of both backends' flop counters too
(``torch.utils.flop_counter`` and the jaxpr walk), so the two agree closely.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TypeVar

#: The ``method`` of a record whose FLOPs come from :func:`palm_flops`.
METHOD = "analytic_palm"

#: The count type (``accelbench.backends.base.FlopCount``; not imported: no backend here).
C = TypeVar("C")


@dataclass(frozen=True, kw_only=True, slots=True)
class MatmulGroup:
    """Matmul weights applied to ``tokens`` positions of each sample."""

    params: int
    """Matmul parameters (weights of the linear or convolution layers of the group)."""
    tokens: int
    """Positions each sample applies them to (tokens, patches, or 1 for a class head)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class AnalyticFlops:
    """An analytic FLOP count of one sample of a workload (its sample unit)."""

    forward_flop_per_sample: float
    """Forward pass (one third of the training step)."""
    train_flop_per_sample: float
    """Forward + backward."""
    matmul_params: int
    """``N``: the parameters that take part in matmuls, summed over the groups."""
    method: str = METHOD
    """How it was counted."""


def attention_flops_per_token(*, layers: int, heads: int, head_dim: int, seq_len: int) -> float:
    """Training FLOPs per token of the attention scores and their use: ``12 L H Q T``.

    Args:
        layers: Transformer layers ``L``.
        heads: Query heads ``H`` (grouped key/value heads change only ``N``).
        head_dim: Head dimension ``Q``.
        seq_len: Tokens each token attends over ``T``.
    """
    return 12.0 * layers * heads * head_dim * seq_len


def palm_flops(
    *, groups: tuple[MatmulGroup, ...], layers: int, heads: int, head_dim: int, seq_len: int,
    samples_per_sequence: float = 1.0,
) -> AnalyticFlops:
    """The PaLM count for one sample.

    Per sequence: ``6 * sum(params * tokens)`` over the matmul groups plus
    ``12 L H Q T`` for each of the ``T`` positions; the forward is one third.

    Args:
        groups: The matmul weights and how many positions of one sequence each sees.
        layers: Transformer layers.
        heads: Attention heads.
        head_dim: Head dimension.
        seq_len: Positions of one sequence (attention length).
        samples_per_sequence: Samples in one sequence: ``seq_len`` when the sample unit
            is a token, 1 for a sequence or an image.
    """
    matmul = sum(6.0 * g.params * g.tokens for g in groups)
    attention = seq_len * attention_flops_per_token(
        layers=layers, heads=heads, head_dim=head_dim, seq_len=seq_len)
    train = (matmul + attention) / samples_per_sequence
    return AnalyticFlops(
        forward_flop_per_sample=train / 3.0,
        train_flop_per_sample=train,
        matmul_params=sum(g.params for g in groups),
    )


def with_analytic(counted: C, analytic: AnalyticFlops | None) -> C:
    """``counted`` with the analytic figures in place of the counter's, when there are any.

    The record's FLOPs (hence MFU) are then the analytic ones, and ``method`` names both
    (``analytic_palm; flop_counter 1.234e+06/sample train (-0.1%)``); ``by_operator``
    keeps the counter's breakdown, whose sum is its training figure.

    Args:
        counted: The flop counter's (or jaxpr walk's) count, a
            :class:`accelbench.backends.base.FlopCount`.
        analytic: The workload's analytic count, or None.
    """
    if analytic is None:
        return counted
    train = analytic.train_flop_per_sample
    counter = counted.train_flop_per_sample  # type: ignore[attr-defined]
    diff = counter / train - 1.0 if train else 0.0
    method = (f"{analytic.method}; {counted.method} "  # type: ignore[attr-defined]
              f"{counter:.4g}/sample train ({diff:+.1%})")
    return dataclasses.replace(  # type: ignore[type-var]
        counted,
        forward_flop_per_sample=analytic.forward_flop_per_sample,
        train_flop_per_sample=train,
        method=method,
        analytic_forward_flop_per_sample=analytic.forward_flop_per_sample,
    )
