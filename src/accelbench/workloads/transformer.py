"""Transformer-base (Vaswani et al. 2017) encoder-decoder for translation.

Post-LayerNorm layers from :mod:`torch.nn` (batch first), sinusoidal
positions, one vocabulary of 32,768 tokens shared by source and target, with
the source embedding, target embedding and output projection all one matrix
(no output bias), so the paper model has 60,915,712 parameters. As in the
original model there is no final LayerNorm after either stack.

The batch size counts tokens, as the paper does: every sentence pair has a
fixed ``seq_len`` source tokens and ``seq_len`` target tokens, so a batch of
``B`` tokens holds ``B // seq_len`` pairs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from accelbench.errors import ConfigError
from accelbench.spec import SizeName
from accelbench.workloads.registry import Batch, Workload, register_workload

LABEL_SMOOTHING = 0.1


def sinusoidal_positions(length: int, d_model: int) -> torch.Tensor:
    """The fixed (length, d_model) sine/cosine position table of the original paper."""
    pos = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    freq = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model)
    )
    table = torch.zeros(length, d_model)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq)
    return table


class TransformerModel(nn.Module):
    """Encoder-decoder Transformer with tied embeddings.

    Args:
        vocab: Shared source/target vocabulary size.
        d_model: Model width (512 for Transformer-base).
        heads: Attention heads (8).
        ffn: Feed-forward inner width (2048).
        encoder_layers: Encoder depth (6).
        decoder_layers: Decoder depth (6).
        dropout: Dropout on embeddings, attention and feed-forward (0.1).
        max_len: Longest sequence the position table covers.
    """

    def __init__(
        self,
        vocab: int = 32_768,
        d_model: int = 512,
        heads: int = 8,
        ffn: int = 2048,
        encoder_layers: int = 6,
        decoder_layers: int = 6,
        dropout: float = 0.1,
        max_len: int = 1024,
    ) -> None:
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab, d_model)
        # A buffer, not a parameter: positions are fixed, and it follows .to(device).
        self.register_buffer("positions", sinusoidal_positions(max_len, d_model), persistent=False)
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.ModuleList(
            nn.TransformerEncoderLayer(d_model, heads, ffn, dropout, batch_first=True)
            for _ in range(encoder_layers)
        )
        self.decoder = nn.ModuleList(
            nn.TransformerDecoderLayer(d_model, heads, ffn, dropout, batch_first=True)
            for _ in range(decoder_layers)
        )
        # nn.Transformer's initialisation for the layers; the shared embedding gets
        # N(0, d_model^-0.5) so that, scaled by sqrt(d_model), inputs have unit variance.
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        nn.init.normal_(self.embedding.weight, 0.0, d_model**-0.5)

    def _embed(self, tokens: torch.Tensor) -> torch.Tensor:
        pos: torch.Tensor = self.positions  # type: ignore[assignment]
        x = self.embedding(tokens) * math.sqrt(self.d_model) + pos[: tokens.shape[1]]
        return self.drop(x)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Logits (N, T, vocab) for source tokens (N, S) and shifted target tokens (N, T)."""
        memory = self._embed(src)
        for enc in self.encoder:
            memory = enc(memory)
        t = tgt_in.shape[1]
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool, device=tgt_in.device), 1)
        x = self._embed(tgt_in)
        for dec in self.decoder:
            x = dec(x, memory, tgt_mask=causal, tgt_is_causal=True)
        return F.linear(x, self.embedding.weight)


@dataclass(frozen=True)
class _TransformerSize:
    vocab: int
    d_model: int
    heads: int
    ffn: int
    layers: int
    seq_len: int


_SIZES: Mapping[SizeName, _TransformerSize] = {
    "tiny": _TransformerSize(vocab=128, d_model=32, heads=4, ffn=64, layers=2, seq_len=8),
    "small": _TransformerSize(vocab=8192, d_model=256, heads=4, ffn=1024, layers=3, seq_len=16),
    "paper": _TransformerSize(vocab=32_768, d_model=512, heads=8, ffn=2048, layers=6, seq_len=32),
}


@register_workload
class TransformerWorkload(Workload):
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

    def seq_len(self, size: SizeName) -> int:
        """Tokens per sentence, on each side, at ``size``."""
        return _SIZES[size].seq_len

    def build_model(self, size: SizeName) -> nn.Module:
        """The Transformer at ``size``; the paper size has 60,915,712 parameters."""
        cfg = _SIZES[size]
        return TransformerModel(
            vocab=cfg.vocab,
            d_model=cfg.d_model,
            heads=cfg.heads,
            ffn=cfg.ffn,
            encoder_layers=cfg.layers,
            decoder_layers=cfg.layers,
            max_len=cfg.seq_len,
        )

    def make_batch(
        self, size: SizeName, batch_size: int, device: torch.device, generator: torch.Generator
    ) -> Batch:
        """Source (P, L), decoder input (P, L) and labels (P, L) for P = batch_size // L pairs."""
        self.validate_batch_size(size, batch_size)
        cfg = _SIZES[size]
        pairs = batch_size // cfg.seq_len
        src = torch.randint(0, cfg.vocab, (pairs, cfg.seq_len), generator=generator)
        # One extra target token: the decoder reads tokens 0..L-1 and predicts 1..L.
        tgt = torch.randint(0, cfg.vocab, (pairs, cfg.seq_len + 1), generator=generator)
        src, tgt = src.to(device), tgt.to(device)
        return src, tgt[:, :-1].contiguous(), tgt[:, 1:].contiguous()

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        """Cross entropy with label smoothing 0.1, averaged over target tokens."""
        src, tgt_in, labels = batch
        logits = model(src, tgt_in)
        return F.cross_entropy(
            logits.flatten(0, 1).float(), labels.flatten(), label_smoothing=LABEL_SMOOTHING
        )

    def validate_batch_size(self, size: SizeName, batch_size: int) -> None:
        """The batch, in tokens, must be a positive multiple of the sequence length."""
        seq_len = _SIZES[size].seq_len
        if (
            isinstance(batch_size, bool)
            or not isinstance(batch_size, int)
            or batch_size < seq_len
            or batch_size % seq_len
        ):
            raise ConfigError(
                f"{self.name}: batch size counts tokens and must be a positive multiple of "
                f"the sequence length {seq_len} at size {size!r}, got {batch_size!r}"
            )

    def size_notes(self, size: SizeName) -> str:
        cfg = _SIZES[size]
        return (
            f"{cfg.layers}+{cfg.layers} layers, d_model {cfg.d_model}, {cfg.heads} heads, "
            f"FFN {cfg.ffn}, vocab {cfg.vocab} (tied), seq len {cfg.seq_len} tokens per side; "
            f"batch size = tokens, pairs = batch // {cfg.seq_len}"
        )
