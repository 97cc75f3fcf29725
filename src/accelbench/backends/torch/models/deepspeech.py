"""Deep Speech 2 in PyTorch (Amodei et al. 2016) in the layout of deepspeech.pytorch.

Two 2-D convolutions over a 161-bin spectrogram, five bidirectional LSTM
layers of hidden 1024 whose two directions are summed, BatchNorm before
every LSTM layer but the first, then BatchNorm + a bias-free linear layer
to a 29-symbol alphabet (blank, apostrophe, space, a-z), trained with CTC.
Every utterance has the same length (no padding), so the LSTMs run on plain
tensors instead of packed sequences.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from accelbench.backends.torch.model import TorchModel
from accelbench.workloads.deepspeech import (
    BLANK,
    DS2_LAYERS,
    DS2_SIZES,
    NUM_SYMBOLS,
    conv_output_bins,
)
from accelbench.workloads.registry import Batch, implements
from accelbench.workloads.sizes import SizeName


class SequenceBatchNorm(nn.Module):
    """BatchNorm1d over (T, N, H) sequences, treating every time step as a sample."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t, n, h = x.shape
        return self.bn(x.reshape(t * n, h)).reshape(t, n, h)


class BatchRNN(nn.Module):
    """Optional sequence BatchNorm, then a bidirectional LSTM whose directions are summed."""

    def __init__(self, input_size: int, hidden: int, batch_norm: bool) -> None:
        super().__init__()
        self.hidden = hidden
        self.batch_norm = SequenceBatchNorm(input_size) if batch_norm else None
        self.rnn = nn.LSTM(input_size, hidden, bidirectional=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.batch_norm is not None:
            x = self.batch_norm(x)
        x, _ = self.rnn(x)
        t, n, _ = x.shape
        # Summing keeps the next layer's input at `hidden`, as deepspeech.pytorch does.
        return x.view(t, n, 2, self.hidden).sum(2)


class DeepSpeech2(nn.Module):
    """Deep Speech 2 acoustic model.

    Args:
        bins: Spectrogram frequency bins (161 for 20 ms windows at 16 kHz).
        hidden: LSTM hidden size (1024 in the paper model).
        layers: Number of bidirectional LSTM layers (5 in the paper model).
        conv_channels: Channels of both convolutions (32 in the paper model).
        num_classes: Output symbols including the CTC blank.
    """

    def __init__(
        self,
        bins: int = 161,
        hidden: int = 1024,
        layers: int = 5,
        conv_channels: int = 32,
        num_classes: int = NUM_SYMBOLS,
    ) -> None:
        super().__init__()
        c = conv_channels
        self.conv = nn.Sequential(
            nn.Conv2d(1, c, kernel_size=(41, 11), stride=(2, 2), padding=(20, 5)),
            nn.BatchNorm2d(c),
            nn.Hardtanh(0, 20, inplace=True),
            nn.Conv2d(c, c, kernel_size=(21, 11), stride=(2, 1), padding=(10, 5)),
            nn.BatchNorm2d(c),
            nn.Hardtanh(0, 20, inplace=True),
        )
        rnn_input = c * conv_output_bins(bins)
        self.rnns = nn.Sequential(
            *(
                BatchRNN(rnn_input if i == 0 else hidden, hidden, batch_norm=i > 0)
                for i in range(layers)
            )
        )
        self.fc = nn.Sequential(
            SequenceBatchNorm(hidden), nn.Linear(hidden, num_classes, bias=False)
        )

    def forward(self, spectrogram: torch.Tensor) -> torch.Tensor:
        """Logits (T', N, classes) for spectrograms (N, 1, bins, T)."""
        x = self.conv(spectrogram)
        n, c, f, t = x.shape
        x = x.view(n, c * f, t).permute(2, 0, 1).contiguous()  # (T', N, features)
        return self.fc(self.rnns(x))


@implements("deepspeech2", framework="torch")
class DeepSpeech2Impl(TorchModel):
    """Deep Speech 2 in PyTorch."""

    def build_model(self, size: SizeName) -> nn.Module:
        """Deep Speech 2 at ``size``; the paper size has 86,618,400 parameters."""
        cfg = DS2_SIZES[size]
        return DeepSpeech2(
            bins=cfg.bins, hidden=cfg.hidden, layers=DS2_LAYERS, conv_channels=cfg.conv_channels
        )

    def make_batch(
        self, size: SizeName, batch_size: int, device: torch.device, generator: torch.Generator
    ) -> Batch:
        """Spectrograms (N, 1, bins, frames) and transcripts (N, target_len) of symbols 1..28."""
        self.workload.validate_batch_size(size, batch_size)
        cfg = DS2_SIZES[size]
        spec = torch.randn(batch_size, 1, cfg.bins, cfg.frames, generator=generator)
        targets = torch.randint(1, NUM_SYMBOLS, (batch_size, cfg.target_len), generator=generator)
        return spec.to(device), targets.to(device)

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        """CTC loss summed over the batch and divided by its size (deepspeech.pytorch)."""
        spec, targets = batch
        logits = model(spec)
        # CTC on CPU has no half-precision kernel, so the log-probs go to fp32 under autocast.
        log_probs = F.log_softmax(logits.float(), dim=-1)
        steps, n, _ = log_probs.shape
        input_lengths = torch.full((n,), steps, dtype=torch.long, device=targets.device)
        target_lengths = torch.full((n,), targets.shape[1], dtype=torch.long, device=targets.device)
        loss = F.ctc_loss(
            log_probs,
            targets,
            input_lengths,
            target_lengths,
            blank=BLANK,
            reduction="sum",
            zero_infinity=True,
        )
        return loss / n
