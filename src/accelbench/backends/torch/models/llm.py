"""A decoder-only language model in PyTorch: Llama style, or the GPT-2 block.

``style="llama"`` (TinyLlama-1.1B at the paper size, 1,100,048,384 parameters):
pre-norm RMSNorm, rotary positions, grouped-query causal attention through
:func:`torch.nn.functional.scaled_dot_product_attention`, SwiGLU MLP, no biases,
untied output projection. ``style="gpt2"`` (GPT-2 small, 124,439,808
parameters): learned positions, pre-LayerNorm, GELU (tanh) MLP with biases,
output projection tied to the token embedding. Weights N(0, 0.02), biases 0.
See :mod:`accelbench.workloads.llm` for the sizes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from accelbench.backends.torch.model import TorchModel
from accelbench.workloads.llm import LLMSize
from accelbench.workloads.registry import Batch, implements
from accelbench.workloads.sizes import SizeName

#: Standard deviation of the initial weights (GPT-2's and Llama's).
INIT_STD = 0.02


def rotary_tables(seq_len: int, head_dim: int, base: float = 10_000.0
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables (seq_len, head_dim) of rotary positions (Llama's half layout)."""
    inv = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos(), angles.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` (N, heads, T, head_dim) by the position tables (T, head_dim)."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos.to(x.dtype) + rotated * sin.to(x.dtype)


class Attention(nn.Module):
    """Causal self-attention; grouped-query when ``kv_heads < heads``."""

    def __init__(self, cfg: LLMSize) -> None:
        super().__init__()
        bias = cfg.style == "gpt2"
        self.heads, self.kv_heads, self.head_dim = cfg.heads, cfg.kv_heads, cfg.head_dim
        kv = cfg.kv_heads * cfg.head_dim
        self.q = nn.Linear(cfg.d_model, cfg.d_model, bias=bias)
        self.k = nn.Linear(cfg.d_model, kv, bias=bias)
        self.v = nn.Linear(cfg.d_model, kv, bias=bias)
        self.o = nn.Linear(cfg.d_model, cfg.d_model, bias=bias)
        self.rotary = cfg.style == "llama"

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        n, t, _ = x.shape
        q = self.q(x).view(n, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(x).view(n, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(x).view(n, t, self.kv_heads, self.head_dim).transpose(1, 2)
        if self.rotary:
            q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        if self.kv_heads != self.heads:
            # Each key/value head serves heads // kv_heads query heads (Llama's repeat_kv).
            rep = self.heads // self.kv_heads
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        # -1, not d_model: under tensor parallelism a rank holds its share of the heads.
        return self.o(out.transpose(1, 2).reshape(n, t, -1))


class MLP(nn.Module):
    """SwiGLU (llama) or GELU-tanh 4x (gpt2) feed-forward."""

    def __init__(self, cfg: LLMSize) -> None:
        super().__init__()
        self.swiglu = cfg.style == "llama"
        bias = not self.swiglu
        self.up = nn.Linear(cfg.d_model, cfg.ffn, bias=bias)
        self.gate = nn.Linear(cfg.d_model, cfg.ffn, bias=False) if self.swiglu else None
        self.down = nn.Linear(cfg.ffn, cfg.d_model, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gate is not None:
            return self.down(F.silu(self.gate(x)) * self.up(x))
        return self.down(F.gelu(self.up(x), approximate="tanh"))


def _norm(cfg: LLMSize) -> nn.Module:
    if cfg.style == "llama":
        return nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
    return nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps)


class Block(nn.Module):
    """Pre-norm decoder layer."""

    def __init__(self, cfg: LLMSize) -> None:
        super().__init__()
        self.norm1, self.attn = _norm(cfg), Attention(cfg)
        self.norm2, self.mlp = _norm(cfg), MLP(cfg)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), cos, sin)
        return x + self.mlp(self.norm2(x))


class LLMModel(nn.Module):
    """Token embedding, decoder layers, final norm, output projection.

    Args:
        cfg: The size's configuration.
    """

    def __init__(self, cfg: LLMSize) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.d_model)
        self.positions = (nn.Embedding(cfg.seq_len, cfg.d_model)
                          if cfg.style == "gpt2" else None)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.norm = _norm(cfg)
        self.head = None if cfg.tied else nn.Linear(cfg.d_model, cfg.vocab, bias=False)
        # Buffers, not parameters: fixed tables that follow .to(device), made once.
        cos, sin = rotary_tables(cfg.seq_len, cfg.head_dim)
        self.register_buffer("rot_cos", cos, persistent=False)
        self.register_buffer("rot_sin", sin, persistent=False)
        for name, p in self.named_parameters():
            if p.dim() > 1:
                nn.init.normal_(p, 0.0, INIT_STD)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits (N, T, vocab) for tokens (N, T)."""
        t = tokens.shape[1]
        x = self.embed(tokens)
        if self.positions is not None:
            x = x + self.positions.weight[:t]
        cos: torch.Tensor = self.rot_cos[:t]  # type: ignore[index]
        sin: torch.Tensor = self.rot_sin[:t]  # type: ignore[index]
        for block in self.blocks:
            x = block(x, cos, sin)
        x = self.norm(x)
        weight = self.embed.weight if self.head is None else self.head.weight
        return F.linear(x, weight)


@implements("llm", framework="torch")
class LLMImpl(TorchModel):
    """The decoder-only LM in PyTorch."""

    def build_model(self, size: SizeName) -> nn.Module:
        """The model at ``size``; paper: 1,100,048,384 parameters, gpt2: 124,439,808."""
        return LLMModel(self.workload.config(size))

    def make_batch(
        self, size: SizeName, batch_size: int, device: torch.device, generator: torch.Generator
    ) -> Batch:
        """Tokens (S, T) and next tokens (S, T) for S = batch_size // T sequences."""
        self.workload.validate_batch_size(size, batch_size)
        cfg: LLMSize = self.workload.config(size)
        seqs = batch_size // cfg.seq_len
        data = torch.randint(0, cfg.vocab, (seqs, cfg.seq_len + 1), generator=generator)
        data = data.to(device)
        return data[:, :-1].contiguous(), data[:, 1:].contiguous()

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        """Cross entropy of the next token, averaged over tokens."""
        tokens, labels = batch
        logits = model(tokens)
        return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())
