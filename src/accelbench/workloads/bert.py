"""BERT-base masked-language-model pretraining: description, sizes.

BERT-base (Devlin et al. 2019, "BERT: Pre-training of Deep Bidirectional
Transformers", section 3: "BERT-base (L=12, H=768, A=12, Total Parameters=110M)"):
12 post-LayerNorm layers (eps 1e-12), d 768, 12 heads, FFN 3072 with GELU (erf),
vocabulary 30,522 (uncased WordPiece), 512 learned positions, 2 token types,
and the masked-LM head: a d x d transform with GELU and LayerNorm, a decoder
tied to the word embedding, and a decoder bias. Counted here: embeddings,
encoder and MLM head, without the pooler and the next-sentence head (not
trained by a masked-LM objective), 109,514,298 parameters, the figure of
Hugging Face's ``BertForMaskedLM`` for ``bert-base-uncased`` (within 0.5% of the
published 110M).

The reference size (``paper``) is the pretraining's first phase, sequence 128;
the size ``seq512`` its second phase, sequence 512. The sample unit is one
sequence. Each batch masks a fixed random ~15% of positions (at least one per
sequence), replaces their token by the last vocabulary id (standing for
``[MASK]``) and the loss is cross entropy on those positions only. The MLM head
runs on every position (as Hugging Face's does), so the analytic count and the
flop counter see the same matmuls. No dropout.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from accelbench.workloads.analytic import AnalyticFlops, MatmulGroup, palm_flops
from accelbench.workloads.registry import Workload, register_workload
from accelbench.workloads.sizes import SizeName

#: Fraction of the positions the masked-LM objective predicts.
MASK_FRACTION = 0.15


@dataclass(frozen=True, kw_only=True, slots=True)
class BertSize:
    """BERT configuration."""

    vocab: int
    d_model: int
    layers: int
    heads: int
    ffn: int
    max_positions: int
    seq_len: int
    type_vocab: int = 2
    norm_eps: float = 1e-12

    @property
    def head_dim(self) -> int:
        return self.d_model // self.heads


BERT_SIZES: Mapping[SizeName, BertSize] = {
    "tiny": BertSize(vocab=128, d_model=32, layers=2, heads=4, ffn=64, max_positions=32,
                     seq_len=16),
    "small": BertSize(vocab=2048, d_model=128, layers=2, heads=4, ffn=512, max_positions=64,
                      seq_len=64),
    "paper": BertSize(vocab=30_522, d_model=768, layers=12, heads=12, ffn=3072,
                      max_positions=512, seq_len=128),
    "seq512": BertSize(vocab=30_522, d_model=768, layers=12, heads=12, ffn=3072,
                       max_positions=512, seq_len=512),
}


def matmul_params(cfg: BertSize) -> int:
    """``N``: the layers' projections, the MLM transform and the tied decoder."""
    layer = 4 * cfg.d_model * cfg.d_model + 2 * cfg.d_model * cfg.ffn
    return cfg.layers * layer + cfg.d_model * cfg.d_model + cfg.vocab * cfg.d_model


@register_workload
class Bert(Workload):
    """Masked-LM pretraining on random token sequences."""

    name: ClassVar[str] = "bert"
    family: ClassVar[str] = "transformer"
    sample_unit: ClassVar[str] = "sequence"
    description: ClassVar[str] = "BERT-base masked-LM pretraining (110M), seq 128; seq512 size"
    default_batch_sizes: ClassVar[Mapping[SizeName, tuple[int, ...]]] = {
        "tiny": (4,),
        "small": (8,),
        "paper": (32, 64, 128, 256),
        "seq512": (8, 16, 32, 64),
    }
    learning_rate: ClassVar[float] = 1e-3
    optimizer: ClassVar[str] = "adamw"
    weight_decay: ClassVar[float] = 0.01
    loss_kind: ClassVar[str] = "cross_entropy"

    def config(self, size: SizeName) -> BertSize:
        return BERT_SIZES[self.check_size(size)]

    def tp_split_params(self, size: SizeName, degree: int) -> int | None:
        """Each layer's q, k, v, o and its MLP."""
        c = self.config(size)
        d = c.d_model
        return c.layers * (4 * d * d + 2 * d * c.ffn + 3 * d + c.ffn)  # q, k, v, up biases

    def size_notes(self, size: SizeName) -> str:
        c = self.config(size)
        return (f"{c.layers} layers, d {c.d_model}, {c.heads} heads, FFN {c.ffn}, "
                f"vocab {c.vocab}, seq {c.seq_len}, post-LN, MLM head (tied), "
                f"{MASK_FRACTION:.0%} masked")

    def analytic_flops(self, size: SizeName, batch_size: int) -> AnalyticFlops:
        """PaLM's count for one sequence (the sample unit): ``T (6 N + 12 L H Q T)``."""
        self.validate_batch_size(size, batch_size)
        c = self.config(size)
        return palm_flops(
            groups=(MatmulGroup(params=matmul_params(c), tokens=c.seq_len),),
            layers=c.layers, heads=c.heads, head_dim=c.head_dim, seq_len=c.seq_len,
        )
