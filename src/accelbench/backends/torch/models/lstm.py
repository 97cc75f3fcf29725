"""2-layer LSTM language model in PyTorch (Zaremba et al. 2014, PTB "large") with tied embeddings.

At paper size: vocabulary 10,000, embedding = hidden = 1500, 2 layers, dropout
0.65, sequence length 20, decoder weight tied to the embedding, so
15,000,000 + 2 x 18,012,000 + 10,000 = 51,034,000 parameters.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from accelbench.backends.torch.model import TorchModel
from accelbench.workloads.lstm import INIT_RANGE, LSTM_LAYERS, LSTM_SIZES
from accelbench.workloads.registry import Batch, implements
from accelbench.workloads.sizes import SizeName


class LSTMLanguageModel(nn.Module):
    """Embedding, dropout, multi-layer LSTM, dropout, linear decoder tied to the embedding.

    Args:
        vocab: Vocabulary size.
        hidden: Embedding and LSTM hidden size (equal, so the weights can be tied).
        layers: Number of stacked LSTM layers.
        dropout: Dropout on the embedding, between layers and before the decoder.
        init_range: Weights are drawn from U(-init_range, init_range), as in the PTB setup.
    """

    def __init__(
        self,
        vocab: int,
        hidden: int,
        layers: int = 2,
        dropout: float = 0.65,
        init_range: float = INIT_RANGE,
    ) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, hidden)
        self.drop = nn.Dropout(dropout)
        self.rnn = nn.LSTM(hidden, hidden, num_layers=layers, dropout=dropout, batch_first=True)
        self.decoder = nn.Linear(hidden, vocab)
        for p in self.parameters():
            nn.init.uniform_(p, -init_range, init_range)
        nn.init.zeros_(self.decoder.bias)
        # Tie after init so the shared matrix keeps the embedding's initialisation.
        self.decoder.weight = self.embedding.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Next-token logits (N, T, vocab) for tokens (N, T); the state starts at zero."""
        out, _ = self.rnn(self.drop(self.embedding(tokens)))
        return self.decoder(self.drop(out))


@implements("lstm", framework="torch")
class LSTMImpl(TorchModel):
    """The LSTM language model in PyTorch."""

    def build_model(self, size: SizeName) -> nn.Module:
        """The LSTM LM at ``size``; the paper size has 51,034,000 parameters."""
        cfg = LSTM_SIZES[size]
        return LSTMLanguageModel(cfg.vocab, cfg.hidden, layers=LSTM_LAYERS, dropout=cfg.dropout)

    def make_batch(
        self, size: SizeName, batch_size: int, device: torch.device, generator: torch.Generator
    ) -> Batch:
        """Random token sequences (N, T+1), split into inputs (N, T) and next tokens (N, T)."""
        self.workload.validate_batch_size(size, batch_size)
        cfg = LSTM_SIZES[size]
        seq = torch.randint(0, cfg.vocab, (batch_size, cfg.seq_len + 1), generator=generator)
        seq = seq.to(device)
        return seq[:, :-1].contiguous(), seq[:, 1:].contiguous()

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        """Mean next-token cross entropy over every position."""
        tokens, targets = batch
        logits = model(tokens)
        return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())
