"""Transformer-base (Vaswani et al. 2017) encoder-decoder for translation: description, sizes.

Post-LayerNorm layers, sinusoidal positions, one vocabulary of 32,768 tokens
shared by source and target, with the source embedding, target embedding and
output projection all one matrix (no output bias), so the paper model has
60,915,712 parameters. As in the original model there is no final LayerNorm
after either stack.

The batch size counts tokens, as the paper does: every sentence pair has a
fixed ``seq_len`` source tokens and ``seq_len`` target tokens, so a batch of
``B`` tokens holds ``B // seq_len`` pairs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from accelbench.workloads.registry import Workload, check_token_batch, register_workload
from accelbench.workloads.sizes import SizeName

LABEL_SMOOTHING = 0.1
DROPOUT = 0.1


@dataclass(frozen=True)
class TransformerSize:
    """Transformer configuration; ``layers`` each for the encoder and the decoder."""

    vocab: int
    d_model: int
    heads: int
    ffn: int
    layers: int
    seq_len: int


TRANSFORMER_SIZES: Mapping[SizeName, TransformerSize] = {
    "tiny": TransformerSize(vocab=128, d_model=32, heads=4, ffn=64, layers=2, seq_len=8),
    "small": TransformerSize(vocab=8192, d_model=256, heads=4, ffn=1024, layers=3, seq_len=16),
    "paper": TransformerSize(vocab=32_768, d_model=512, heads=8, ffn=2048, layers=6, seq_len=32),
}


@register_workload
class Transformer(Workload):
    """Translation with label-smoothed cross entropy on random sentence pairs."""

    name: ClassVar[str] = "transformer"
    family: ClassVar[str] = "transformer"
    sample_unit: ClassVar[str] = "token"
    description: ClassVar[str] = (
        "Transformer-base (6+6 layers, d 512, 8 heads), vocab 32768 tied, batch in tokens"
    )
    default_batch_sizes: ClassVar[Mapping[SizeName, tuple[int, ...]]] = {
        "tiny": (64,),
        "small": (512,),
        "paper": (1024, 2048, 4096),
    }
    # The reference recipe uses Adam with warm-up; the runner's optimizer is SGD with
    # momentum 0.9, and 0.1 trains this model stably at every size.
    learning_rate: ClassVar[float] = 0.1
    loss_kind: ClassVar[str] = "label_smoothed_cross_entropy"

    def config(self, size: SizeName) -> TransformerSize:
        return TRANSFORMER_SIZES[size]

    def tp_split_params(self, size: SizeName, degree: int) -> int | None:
        """Each encoder layer's attention (in- and out-projection) and feed-forward; each
        decoder layer's self- and cross-attention and feed-forward."""
        c = self.config(size)
        d = c.d_model
        ff = 2 * d * c.ffn + c.ffn  # linear1's bias split, linear2's whole
        return c.layers * (4 * d * d + 3 * d + ff) + c.layers * (8 * d * d + 6 * d + ff)

    def seq_len(self, size: SizeName) -> int:
        """Tokens per sentence, on each side, at ``size``."""
        return TRANSFORMER_SIZES[size].seq_len

    def validate_batch_size(self, size: SizeName, batch_size: int) -> None:
        """The batch, in tokens, must be a positive multiple of the sequence length."""
        check_token_batch(self.name, size, batch_size, TRANSFORMER_SIZES[size].seq_len)

    def size_notes(self, size: SizeName) -> str:
        cfg = TRANSFORMER_SIZES[size]
        return (
            f"{cfg.layers}+{cfg.layers} layers, d_model {cfg.d_model}, {cfg.heads} heads, "
            f"FFN {cfg.ffn}, vocab {cfg.vocab} (tied), seq len {cfg.seq_len} tokens per side; "
            f"batch size = tokens, pairs = batch // {cfg.seq_len}"
        )
