"""Transformer-base in PyTorch (Vaswani et al. 2017) encoder-decoder for translation.

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

import torch
import torch.nn.functional as F
from torch import nn

from accelbench.backends.torch.model import TorchModel
from accelbench.workloads.registry import Batch, implements
from accelbench.workloads.sizes import SizeName
from accelbench.workloads.transformer import DROPOUT, LABEL_SMOOTHING, TRANSFORMER_SIZES


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
        dropout: float = DROPOUT,
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


@implements("transformer", framework="torch")
class TransformerImpl(TorchModel):
    """The Transformer in PyTorch."""

    def build_model(self, size: SizeName) -> nn.Module:
        """The Transformer at ``size``; the paper size has 60,915,712 parameters."""
        cfg = TRANSFORMER_SIZES[size]
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
        self.workload.validate_batch_size(size, batch_size)
        cfg = TRANSFORMER_SIZES[size]
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
