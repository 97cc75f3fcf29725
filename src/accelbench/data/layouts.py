"""What a workload reads from disk with ``--data generated|PATH``.

Three layouts: images in class folders (torchvision's ImageFolder layout) decoded and
augmented to the workload's resolution, token shards (nanoGPT's layout: flat
little-endian ``uint16`` or ``uint32`` files and a small ``meta.json``) read as random
windows, and speech (16-bit PCM WAV files, each with its transcript beside it as
``NAME.txt``) turned into log-mel features. A workload with none (a plugin's without its
own dataset) is refused in one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from accelbench.errors import ConfigError

if TYPE_CHECKING:
    pass

#: ``--data``'s two named sources; anything else is a PATH.
SYNTHETIC, GENERATED = "synthetic", "generated"
Source = Literal["synthetic", "generated", "path"]
TokenKind = Literal["causal", "masked", "pairs"]
"""How a token window becomes a batch: next-token (llm, lstm), masked-LM (bert), or a
source and target pair (transformer)."""

#: Token workloads and how their windows are cut.
TOKEN_KINDS: dict[str, TokenKind] = {
    "llm": "causal", "lstm": "causal", "bert": "masked", "transformer": "pairs",
}
#: Class folders of a generated image dataset (at most the model's classes).
GENERATED_CLASSES = 10


@dataclass(frozen=True, slots=True)
class ImageLayout:
    """Images in class folders, trained at ``side`` x ``side`` with ``classes`` outputs."""

    side: int
    classes: int
    name: str = "imagefolder"

    def key(self) -> str:
        """The generated dataset's folder name (shared by workloads of one resolution)."""
        return f"images-{self.side}px-{min(self.classes, GENERATED_CLASSES)}c"


@dataclass(frozen=True, slots=True)
class TokenLayout:
    """Token shards for a model of ``vocab`` tokens reading ``seq_len``-token sequences."""

    vocab: int
    seq_len: int
    kind: TokenKind
    name: str = "token_shards"

    @property
    def window(self) -> int:
        """Tokens one sample reads: a sequence and its next token (causal), a sequence
        (masked), a source and a target one token longer (pairs)."""
        return {"causal": self.seq_len + 1, "masked": self.seq_len,
                "pairs": 2 * self.seq_len + 1}[self.kind]

    @property
    def max_token(self) -> int:
        """Largest token id the model takes from the text (bert keeps its last id as the
        mask token)."""
        return self.vocab - 2 if self.kind == "masked" else self.vocab - 1

    def key(self) -> str:
        return f"tokens-v{self.vocab}"


#: Sample rate of speech datasets (deepspeech.pytorch's 16 kHz).
SAMPLE_RATE = 16_000
#: The alphabet of speech transcripts: ids 1.. (0 is the CTC blank), deepspeech.pytorch's
#: English labels.
SPEECH_ALPHABET = "' abcdefghijklmnopqrstuvwxyz"


@dataclass(frozen=True, slots=True)
class SpeechLayout:
    """WAV files with transcripts for a speech model reading ``bins`` x ``frames`` log-mel
    features and ``target_len``-symbol transcripts."""

    bins: int
    frames: int
    target_len: int
    sample_rate: int = SAMPLE_RATE
    name: str = "wav_transcripts"

    #: The analysis window and hop in samples (25 ms and 10 ms at 16 kHz) and the FFT's
    #: size (1024: every one of the mel filters holds at least one FFT bin).
    win: int = 400
    hop: int = 160
    n_fft: int = 1024

    @property
    def samples_per_utterance(self) -> int:
        """Audio samples that make ``frames`` feature frames."""
        return (self.frames - 1) * self.hop + self.win

    def key(self) -> str:
        return f"speech-{self.sample_rate // 1000}k-{self.frames}f-{self.target_len}t"


Layout = ImageLayout | TokenLayout | SpeechLayout


def source_of(data: str) -> Source:
    """``synthetic``, ``generated`` or ``path`` for a ``--data`` value."""
    if data == SYNTHETIC:
        return "synthetic"
    return "generated" if data == GENERATED else "path"


def layout_of(workload: Any, size: str) -> Layout:
    """The layout ``workload`` (a registered :class:`Workload`) reads at ``size``.

    Raises:
        ConfigError: the workload has no on-disk layout yet.
    """
    cfg: Any = workload.config(size) if hasattr(workload, "config") else None
    if workload.sample_unit == "image" and hasattr(cfg, "image") and hasattr(cfg, "classes"):
        return ImageLayout(side=int(cfg.image), classes=int(cfg.classes))
    kind = TOKEN_KINDS.get(workload.name)
    if kind is not None and hasattr(cfg, "vocab") and hasattr(cfg, "seq_len"):
        return TokenLayout(vocab=int(cfg.vocab), seq_len=int(cfg.seq_len), kind=kind)
    if workload.sample_unit == "utterance" and all(
            hasattr(cfg, k) for k in ("bins", "frames", "target_len")):
        return SpeechLayout(bins=int(cfg.bins), frames=int(cfg.frames),
                            target_len=int(cfg.target_len))
    raise ConfigError(f"--data: {workload.name} has no on-disk dataset layout yet (images: "
                      f"the cnn workloads and vit; tokens: {', '.join(sorted(TOKEN_KINDS))}; "
                      "speech: deepspeech2); use --data synthetic")


def samples_for(layout: Layout, size: str) -> int:
    """How many samples a generated dataset holds: images, or tokens of the shards. Tiny
    sets stay tiny (tests); larger sizes hold enough that a measured window of 1,000 steps
    reads each sample a few times at most."""
    if isinstance(layout, ImageLayout):
        return {"tiny": 256, "small": 8192}.get(size, 32768)
    if isinstance(layout, SpeechLayout):
        return {"tiny": 64, "small": 2048}.get(size, 8192)
    return {"tiny": 1 << 16, "small": 1 << 22}.get(size, 1 << 26)


def loader_batch(workload: Any, layout: Layout, batch_size: int) -> int:
    """Samples the loader batches: sequences where the workload counts tokens."""
    if isinstance(layout, TokenLayout) and workload.sample_unit == "token":
        return batch_size // layout.seq_len
    return batch_size
