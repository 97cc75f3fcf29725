"""A decoder-only language model (Llama style, or the GPT-2 block): description, sizes.

The reference size (``paper``) is TinyLlama-1.1B (Zhang et al. 2024,
"TinyLlama: An Open-Source Small Language Model"; the Llama-2 architecture):
22 layers, d 2048, 32 query heads sharing 4 key/value heads (grouped-query
attention), SwiGLU MLP of width 5632, RMSNorm (pre-norm, eps 1e-5), rotary
positions, no biases, vocabulary 32,000 with an untied output projection, at
sequence length 2048: 1,100,048,384 parameters.

The size ``gpt2`` is GPT-2 small (Radford et al. 2019) built as GPT-2 itself
(``style="gpt2"``): learned positions (1024), pre-LayerNorm (eps 1e-5), a
4x GELU (tanh) MLP, biases, 12 layers, d 768, 12 heads, vocabulary 50,257 with
the output projection tied to the token embedding, at sequence 1024:
124,439,808 parameters counting the tied matrix once, so published GPT-2
throughputs compare.

Attention is causal and goes through the framework's fused attention
(``scaled_dot_product_attention`` / ``jax.nn.dot_product_attention``). No
dropout, as in today's pretraining recipes. The batch size counts tokens
(sequences x ``seq_len``), like the transformer workload; every sequence is
random tokens and the model predicts each next one (cross entropy).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Literal

from accelbench.workloads.analytic import AnalyticFlops, MatmulGroup, palm_flops
from accelbench.workloads.registry import Workload, check_token_batch, register_workload
from accelbench.workloads.sizes import SizeName


@dataclass(frozen=True, kw_only=True, slots=True)
class LLMSize:
    """Decoder-only configuration."""

    vocab: int
    d_model: int
    layers: int
    heads: int
    kv_heads: int
    """Key/value heads (grouped-query attention when fewer than ``heads``)."""
    ffn: int
    """MLP inner width (SwiGLU: the width of each of the gate and up projections)."""
    seq_len: int
    style: Literal["llama", "gpt2"] = "llama"
    """``llama``: RMSNorm, rotary, SwiGLU, no biases, untied output; ``gpt2``: LayerNorm,
    learned positions, GELU MLP, biases, tied output."""
    norm_eps: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.d_model // self.heads

    @property
    def tied(self) -> bool:
        """Whether the output projection is the token embedding."""
        return self.style == "gpt2"


LLM_SIZES: Mapping[SizeName, LLMSize] = {
    "tiny": LLMSize(vocab=128, d_model=32, layers=2, heads=4, kv_heads=2, ffn=64, seq_len=16),
    "small": LLMSize(vocab=2048, d_model=128, layers=4, heads=4, kv_heads=2, ffn=352,
                     seq_len=64),
    "paper": LLMSize(vocab=32_000, d_model=2048, layers=22, heads=32, kv_heads=4, ffn=5632,
                     seq_len=2048),
    "gpt2": LLMSize(vocab=50_257, d_model=768, layers=12, heads=12, kv_heads=12, ffn=3072,
                    seq_len=1024, style="gpt2"),
}


def matmul_params(cfg: LLMSize) -> int:
    """``N`` of the PaLM count: every projection weight plus the output projection."""
    kv = cfg.kv_heads * cfg.head_dim
    attn = 2 * cfg.d_model * cfg.d_model + 2 * cfg.d_model * kv
    mlp = (3 if cfg.style == "llama" else 2) * cfg.d_model * cfg.ffn
    return cfg.layers * (attn + mlp) + cfg.vocab * cfg.d_model


@register_workload
class LLM(Workload):
    """Next-token prediction on random token sequences."""

    name: ClassVar[str] = "llm"
    family: ClassVar[str] = "transformer"
    sample_unit: ClassVar[str] = "token"
    description: ClassVar[str] = (
        "Decoder-only LM, Llama style (TinyLlama-1.1B, seq 2048); size gpt2 = GPT-2 small"
    )
    default_batch_sizes: ClassVar[Mapping[SizeName, tuple[int, ...]]] = {
        "tiny": (64,),
        "small": (512,),
        "paper": (8192, 16384, 32768),
        "gpt2": (8192, 16384, 32768),
    }
    learning_rate: ClassVar[float] = 1e-3
    optimizer: ClassVar[str] = "adamw"
    weight_decay: ClassVar[float] = 0.1
    loss_kind: ClassVar[str] = "cross_entropy"

    def config(self, size: SizeName) -> LLMSize:
        return LLM_SIZES[self.check_size(size)]

    def tp_split_params(self, size: SizeName, degree: int) -> int | None:
        """q, o and the MLP of every layer; k and v too unless the degree exceeds the
        key/value heads (then each is replicated whole)."""
        c = self.config(size)
        bias = 0 if c.style == "llama" else 1  # gpt2: biases, the column-wise ones split
        q, kv = c.heads * c.head_dim, 0 if degree > c.kv_heads else 2 * c.kv_heads * c.head_dim
        mlp = (3 if c.style == "llama" else 2) * c.d_model * c.ffn + bias * c.ffn
        return c.layers * (2 * c.d_model * q + kv * c.d_model + bias * (q + kv) + mlp)

    def validate_batch_size(self, size: SizeName, batch_size: int) -> None:
        """The batch, in tokens, must be a positive multiple of the sequence length."""
        check_token_batch(self.name, size, batch_size, self.config(size).seq_len)

    def size_notes(self, size: SizeName) -> str:
        c = self.config(size)
        if c.style == "gpt2":
            body = "GPT-2 block (LayerNorm, learned positions, GELU MLP, biases), tied output"
        else:
            body = f"{c.kv_heads} KV heads, SwiGLU, RMSNorm, rotary, untied output"
        return (f"{c.layers} layers, d {c.d_model}, {c.heads} heads, FFN {c.ffn}, "
                f"vocab {c.vocab}, seq {c.seq_len}; {body}; batch size = tokens")

    def analytic_flops(self, size: SizeName, batch_size: int) -> AnalyticFlops:
        """PaLM's count per token (the sample unit): ``6 N + 12 L H Q T``."""
        self.validate_batch_size(size, batch_size)
        c = self.config(size)
        return palm_flops(
            groups=(MatmulGroup(params=matmul_params(c), tokens=c.seq_len),),
            layers=c.layers, heads=c.heads, head_dim=c.head_dim, seq_len=c.seq_len,
            samples_per_sequence=c.seq_len,
        )
