"""Deep Speech 2 (Amodei et al. 2016) in the layout of deepspeech.pytorch: description, sizes.

Two 2-D convolutions over a 161-bin spectrogram, five bidirectional LSTM
layers whose two directions are summed, BatchNorm before every LSTM layer but
the first, then BatchNorm + a bias-free linear layer to a 29-symbol alphabet
(blank, apostrophe, space, a-z), trained with CTC. Every utterance has the
same length (no padding).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from accelbench.errors import ConfigError
from accelbench.workloads.registry import Workload, check_positive_batch_size, register_workload
from accelbench.workloads.sizes import SizeName

#: CTC blank plus the 28 characters of deepspeech.pytorch's English labels.
NUM_SYMBOLS = 29
BLANK = 0
DS2_LAYERS = 5


def conv_output_frames(frames: int) -> int:
    """Output time steps of the two convs for ``frames`` input frames (time stride 2, then 1)."""
    return (frames + 2 * 5 - 11) // 2 + 1


def conv_output_bins(bins: int) -> int:
    """Frequency bins left after the two convs (frequency stride 2, then 2)."""
    bins = (bins + 2 * 20 - 41) // 2 + 1
    return (bins + 2 * 10 - 21) // 2 + 1


@dataclass(frozen=True)
class DS2Size:
    """Deep Speech 2 configuration: spectrogram bins and frames, transcript length, widths."""

    bins: int
    frames: int
    target_len: int
    hidden: int
    conv_channels: int


DS2_SIZES: Mapping[SizeName, DS2Size] = {
    "tiny": DS2Size(bins=161, frames=40, target_len=6, hidden=32, conv_channels=8),
    "small": DS2Size(bins=161, frames=200, target_len=27, hidden=256, conv_channels=32),
    # 300 frames = 3 s at a 10 ms hop, inside the paper's 100-400 (AN4); 150 CTC steps
    # after the convs, and 40 characters, a plausible transcript for 3 s of speech.
    "paper": DS2Size(bins=161, frames=300, target_len=40, hidden=1024, conv_channels=32),
}


@register_workload
class DeepSpeech2(Workload):
    """Speech recognition with CTC on random spectrograms and random transcripts."""

    name: ClassVar[str] = "deepspeech2"
    family: ClassVar[str] = "speech"
    sample_unit: ClassVar[str] = "utterance"
    description: ClassVar[str] = (
        "Deep Speech 2 (deepspeech.pytorch), 2 conv + 5 BiLSTM-1024, CTC, 300-frame utterances"
    )
    default_batch_sizes: ClassVar[Mapping[SizeName, tuple[int, ...]]] = {
        "tiny": (2,),
        "small": (4,),
        "paper": (8, 16, 32),
    }
    # deepspeech.pytorch's default SGD learning rate (momentum 0.9).
    learning_rate: ClassVar[float] = 3e-4
    loss_kind: ClassVar[str] = "ctc"

    def config(self, size: SizeName) -> DS2Size:
        return DS2_SIZES[size]

    def validate_batch_size(self, size: SizeName, batch_size: int) -> None:
        """Any positive number of utterances works."""
        check_positive_batch_size(self.name, batch_size)
        cfg = DS2_SIZES[size]
        if cfg.target_len * 2 > conv_output_frames(cfg.frames):
            # Guard against a size table edit that makes CTC alignment impossible.
            raise ConfigError(f"{self.name}: transcripts too long for {cfg.frames} frames")

    def size_notes(self, size: SizeName) -> str:
        cfg = DS2_SIZES[size]
        return (
            f"spectrogram {cfg.bins} bins x {cfg.frames} frames "
            f"({conv_output_frames(cfg.frames)} CTC steps), conv channels {cfg.conv_channels}, "
            f"5 BiLSTM layers hidden {cfg.hidden} (directions summed), "
            f"{NUM_SYMBOLS} symbols, transcripts of {cfg.target_len}"
        )
