"""2-layer LSTM language model (Zaremba et al. 2014, PTB "large"): description and sizes.

At paper size: vocabulary 10,000, embedding = hidden = 1500, 2 layers, dropout
0.65, sequence length 20, decoder weight tied to the embedding, so
15,000,000 + 2 x 18,012,000 + 10,000 = 51,034,000 parameters (each LSTM layer
has two bias vectors, as cuDNN and PyTorch do).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from accelbench.workloads.registry import Workload, register_workload
from accelbench.workloads.sizes import SizeName

LSTM_LAYERS = 2
#: Weights are drawn from U(-INIT_RANGE, INIT_RANGE), as in the PTB setup.
INIT_RANGE = 0.04


@dataclass(frozen=True)
class LSTMSize:
    """LSTM LM configuration: vocabulary, hidden (= embedding), tokens per sentence, dropout."""

    vocab: int
    hidden: int
    seq_len: int
    dropout: float


LSTM_SIZES: Mapping[SizeName, LSTMSize] = {
    "tiny": LSTMSize(vocab=100, hidden=32, seq_len=8, dropout=0.1),
    # The PTB "medium" configuration.
    "small": LSTMSize(vocab=10_000, hidden=650, seq_len=20, dropout=0.5),
    "paper": LSTMSize(vocab=10_000, hidden=1500, seq_len=20, dropout=0.65),
}


@register_workload
class LSTMLanguageModel(Workload):
    """Word-level language modelling on random token sequences."""

    name: ClassVar[str] = "lstm"
    family: ClassVar[str] = "rnn"
    sample_unit: ClassVar[str] = "sentence"
    description: ClassVar[str] = (
        "2-layer LSTM LM, hidden 1500, vocab 10k, tied embeddings, seq len 20 (PTB large)"
    )
    default_batch_sizes: ClassVar[Mapping[SizeName, tuple[int, ...]]] = {
        "tiny": (4,),
        "small": (32,),
        "paper": (64, 128, 256),
    }
    # With momentum 0.9 this is the PTB recipe's plain-SGD rate 1.0 (lr / (1 - momentum)).
    learning_rate: ClassVar[float] = 0.1
    loss_kind: ClassVar[str] = "cross_entropy"

    def config(self, size: SizeName) -> LSTMSize:
        return LSTM_SIZES[size]

    def size_notes(self, size: SizeName) -> str:
        cfg = LSTM_SIZES[size]
        return (
            f"2 LSTM layers, hidden = embedding {cfg.hidden}, vocab {cfg.vocab}, "
            f"seq len {cfg.seq_len}, dropout {cfg.dropout}, tied embeddings"
        )
