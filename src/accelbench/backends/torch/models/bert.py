"""BERT-base masked-LM pretraining in PyTorch.

Post-LayerNorm encoder layers (eps 1e-12) with fused attention
(:func:`torch.nn.functional.scaled_dot_product_attention`, no mask: every
position is a real token), GELU (erf) feed-forward, word + learned position +
token-type embeddings with a LayerNorm, and the masked-LM head (dense + GELU +
LayerNorm, decoder tied to the word embedding, decoder bias). 109,514,298
parameters at the paper size (Hugging Face's ``BertForMaskedLM``, no pooler).
Weights N(0, 0.02), biases 0, as BERT initialises. See
:mod:`accelbench.workloads.bert`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from accelbench.backends.torch.model import TorchModel
from accelbench.workloads.bert import MASK_FRACTION, BertSize
from accelbench.workloads.registry import Batch, implements
from accelbench.workloads.sizes import SizeName

INIT_STD = 0.02
#: Label of positions the loss ignores (torch's cross_entropy default).
IGNORE = -100


class EncoderLayer(nn.Module):
    """Post-LN layer: x = LN(x + attn(x)); x = LN(x + ffn(x))."""

    def __init__(self, cfg: BertSize) -> None:
        super().__init__()
        d = cfg.d_model
        self.heads, self.head_dim = cfg.heads, d // cfg.heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.norm1 = nn.LayerNorm(d, eps=cfg.norm_eps)
        self.up = nn.Linear(d, cfg.ffn)
        self.down = nn.Linear(cfg.ffn, d)
        self.norm2 = nn.LayerNorm(d, eps=cfg.norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, t, _ = x.shape

        # -1 heads, not cfg.heads: under tensor parallelism a rank holds its share of them.
        def heads(y: torch.Tensor) -> torch.Tensor:
            return y.view(n, t, -1, self.head_dim).transpose(1, 2)

        att = F.scaled_dot_product_attention(heads(self.q(x)), heads(self.k(x)), heads(self.v(x)))
        x = self.norm1(x + self.o(att.transpose(1, 2).reshape(n, t, -1)))
        return self.norm2(x + self.down(F.gelu(self.up(x))))


class BertMLM(nn.Module):
    """Embeddings, encoder and masked-LM head.

    Args:
        cfg: The size's configuration.
    """

    def __init__(self, cfg: BertSize) -> None:
        super().__init__()
        d = cfg.d_model
        self.words = nn.Embedding(cfg.vocab, d)
        self.positions = nn.Embedding(cfg.max_positions, d)
        self.token_types = nn.Embedding(cfg.type_vocab, d)
        self.embed_norm = nn.LayerNorm(d, eps=cfg.norm_eps)
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.layers))
        self.transform = nn.Linear(d, d)
        self.transform_norm = nn.LayerNorm(d, eps=cfg.norm_eps)
        self.decoder_bias = nn.Parameter(torch.zeros(cfg.vocab))
        for name, p in self.named_parameters():
            if p.dim() > 1:
                nn.init.normal_(p, 0.0, INIT_STD)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, tokens: torch.Tensor, token_types: torch.Tensor) -> torch.Tensor:
        """MLM logits (N, T, vocab) at every position."""
        t = tokens.shape[1]
        x = self.words(tokens) + self.positions.weight[:t] + self.token_types(token_types)
        x = self.embed_norm(x)
        for layer in self.layers:
            x = layer(x)
        x = self.transform_norm(F.gelu(self.transform(x)))
        return F.linear(x, self.words.weight, self.decoder_bias)


@implements("bert", framework="torch")
class BertImpl(TorchModel):
    """BERT masked-LM pretraining in PyTorch."""

    def build_model(self, size: SizeName) -> nn.Module:
        """BERT at ``size``; 109,514,298 parameters at paper and seq512."""
        return BertMLM(self.workload.config(size))

    def make_batch(
        self, size: SizeName, batch_size: int, device: torch.device, generator: torch.Generator
    ) -> Batch:
        """Masked tokens, token types and labels (N, T); labels ``-100`` where unmasked."""
        self.workload.validate_batch_size(size, batch_size)
        cfg: BertSize = self.workload.config(size)
        shape = (batch_size, cfg.seq_len)
        # The last id stands for [MASK]; the text draws from the others.
        original = torch.randint(0, cfg.vocab - 1, shape, generator=generator)
        masked = torch.rand(shape, generator=generator) < MASK_FRACTION
        masked[:, 0] = True  # at least one prediction per sequence
        tokens = torch.where(masked, torch.full_like(original, cfg.vocab - 1), original)
        labels = torch.where(masked, original, torch.full_like(original, IGNORE))
        # Two segments, as BERT's sentence pairs: the second half is type 1.
        types = (torch.arange(cfg.seq_len) >= cfg.seq_len // 2).long().expand(shape)
        return tokens.to(device), types.contiguous().to(device), labels.to(device)

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        """Cross entropy on the masked positions."""
        tokens, types, labels = batch
        logits = model(tokens, types)
        return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(),
                               ignore_index=IGNORE)
