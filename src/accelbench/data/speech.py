"""Speech for ``--data generated|PATH`` (deepspeech2), framework-neutral (numpy and the
standard library's :mod:`wave`).

The layout: ``PATH/**/NAME.wav`` (16-bit PCM, mono or several channels mixed down, at
:data:`~accelbench.data.layouts.SAMPLE_RATE`), each with its transcript ``NAME.txt``
beside it. One sample: the WAV decoded, a random stretch of the utterance's length (a
shorter one is padded with silence), log-mel features (a 25 ms Hann window every 10 ms,
a 1024-point FFT, as many mel bands as the model's input has bins, the log of their
power, normalised per utterance), and the transcript's first ``target_len`` characters as
label ids (1.. over :data:`~accelbench.data.layouts.SPEECH_ALPHABET`; 0 is CTC's blank).

A generated utterance is synthesised from its transcript, one stretch per character: a
letter is two formant tones (its own pair of frequencies) over a glottal pulse train, a
space is silence, each with a smooth envelope and a little noise, so that it has speech's
structure (voiced segments, pauses, formants) rather than noise's.
"""

from __future__ import annotations

import math
import random
import wave
from pathlib import Path
from typing import Any

import numpy as np

from accelbench.data.layouts import SPEECH_ALPHABET, SpeechLayout

Rng = Any
#: Characters a transcript keeps (lowercased), and their ids.
IDS = {ch: i + 1 for i, ch in enumerate(SPEECH_ALPHABET)}


def speech_files(path: Path) -> list[tuple[str, str]]:
    """(WAV, transcript) of every ``*.wav`` under ``path`` with a ``.txt`` beside it,
    sorted."""
    out = []
    for wav in sorted(path.rglob("*.wav")):
        txt = wav.with_suffix(".txt")
        if wav.is_file() and txt.is_file():
            out.append((str(wav), str(txt)))
    return out


def read_wav(name: str) -> tuple[np.ndarray, int]:
    """A WAV file's samples as float32 in [-1, 1) (channels averaged) and its rate.

    Raises:
        ValueError: not 16-bit PCM (``wave`` raises :class:`wave.Error` for what is no
            PCM WAV at all).
    """
    with wave.open(name, "rb") as w:
        if w.getsampwidth() != 2:
            raise ValueError(f"{8 * w.getsampwidth()}-bit samples, not 16-bit PCM")
        channels, rate = w.getnchannels(), w.getframerate()
        raw = w.readframes(w.getnframes())
    pcm = np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32768.0
    if channels > 1:
        pcm = pcm[: len(pcm) // channels * channels].reshape(-1, channels).mean(axis=1)
    return pcm, rate


def write_wav(name: Path, pcm: np.ndarray, rate: int) -> None:
    """``pcm`` (int16) as a mono 16-bit PCM WAV file."""
    with wave.open(str(name), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.astype("<i2").tobytes())


def transcript_ids(text: str) -> np.ndarray:
    """The transcript's characters in the alphabet (lowercased; others dropped) as ids."""
    return np.asarray([IDS[ch] for ch in text.lower() if ch in IDS], dtype=np.int64)


def _hz_to_mel(f: np.ndarray | float) -> Any:
    return 2595.0 * np.log10(1.0 + np.asarray(f) / 700.0)


def _mel_to_hz(m: np.ndarray) -> np.ndarray:
    return 700.0 * (10.0 ** (m / 2595.0) - 1.0)


def mel_filterbank(rate: int, n_fft: int, bands: int) -> np.ndarray:
    """Triangular filters ``(bands, n_fft // 2 + 1)`` evenly spaced on the mel scale (HTK's
    formula) from 0 Hz to half the sample rate, each of unit area."""
    freqs = np.linspace(0.0, rate / 2, n_fft // 2 + 1)
    edges = _mel_to_hz(np.linspace(0.0, float(_hz_to_mel(rate / 2)), bands + 2))
    lo, mid, hi = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    up = (freqs[None, :] - lo) / (mid - lo)
    down = (hi - freqs[None, :]) / (hi - mid)
    weights = np.maximum(0.0, np.minimum(up, down))
    weights *= (2.0 / (hi - lo))  # Slaney's normalisation: each filter of unit area
    return weights.astype(np.float32)


class LogMel:
    """Log-mel features of ``layout``: ``(bins, frames)`` float32 for an utterance of
    :attr:`SpeechLayout.samples_per_utterance` samples."""

    def __init__(self, layout: SpeechLayout) -> None:
        self.layout = layout
        self.window = np.hanning(layout.win + 1)[:-1].astype(np.float32)  # periodic Hann
        self.filters = mel_filterbank(layout.sample_rate, layout.n_fft, layout.bins)

    def __call__(self, audio: np.ndarray) -> np.ndarray:
        lay = self.layout
        starts = np.arange(lay.frames) * lay.hop
        frames = audio[starts[:, None] + np.arange(lay.win)[None, :]] * self.window
        power = np.abs(np.fft.rfft(frames, n=lay.n_fft, axis=1)) ** 2  # (frames, n_fft/2+1)
        mel = np.log(power @ self.filters.T + 1e-6).T  # (bins, frames)
        mel = (mel - mel.mean()) / (mel.std() + 1e-5)
        return mel.astype(np.float32)


class SpeechSamples:
    """(log-mel features ``(bins, frames)`` float32, label ids ``(target_len,)`` int64) of
    a speech dataset's (WAV, transcript) pairs."""

    def __init__(self, files: list[tuple[str, str]], layout: SpeechLayout) -> None:
        self.files, self.layout = files, layout
        self._features: LogMel | None = None  # made in the process that reads

    def __len__(self) -> int:
        return len(self.files)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_features": None}

    def sample(self, index: int, rng: Rng = random) -> tuple[np.ndarray, np.ndarray]:
        if self._features is None:
            self._features = LogMel(self.layout)
        wav, txt = self.files[index]
        audio, rate = read_wav(wav)
        if rate != self.layout.sample_rate:
            raise ValueError(f"{wav}: {rate} Hz, not {self.layout.sample_rate} Hz")
        need = self.layout.samples_per_utterance
        if len(audio) > need:
            start = rng.randint(0, len(audio) - need)
            audio = audio[start:start + need]
        elif len(audio) < need:
            audio = np.pad(audio, (0, need - len(audio)))
        ids = transcript_ids(Path(txt).read_text(encoding="utf-8", errors="replace"))
        if len(ids) < self.layout.target_len:
            raise ValueError(f"{txt}: {len(ids)} characters, fewer than the model's "
                             f"{self.layout.target_len}")
        return self._features(audio), ids[:self.layout.target_len]


# -- synthesis ------------------------------------------------------------------------

WORD_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def random_transcript(length: int, rng: np.random.Generator) -> str:
    """``length`` characters of words (2-7 letters, an apostrophe now and then) between
    single spaces."""
    words: list[str] = []
    while len(" ".join(words)) < length:
        word = "".join(rng.choice(list(WORD_LETTERS), int(rng.integers(2, 8))))
        if rng.random() < 0.05:
            word = word[:-1] + "'" + word[-1]
        words.append(word)
    return " ".join(words)[:length].rstrip().ljust(length, "a")


def synthesise(text: str, layout: SpeechLayout, rng: np.random.Generator) -> np.ndarray:
    """An utterance of :attr:`SpeechLayout.samples_per_utterance` int16 samples speaking
    ``text``: a stretch per character (see the module)."""
    rate, total = layout.sample_rate, layout.samples_per_utterance
    out = np.zeros(total, dtype=np.float32)
    bounds = np.linspace(0, total, len(text) + 1).astype(int)
    pitch = float(rng.uniform(90, 220))  # the speaker's voice
    for ch, a, b in zip(text, bounds[:-1], bounds[1:], strict=True):
        n = b - a
        if ch == " " or n < 4:
            continue
        t = np.arange(n, dtype=np.float32) / rate
        k = IDS.get(ch, 1)
        f1 = 300 + 25 * k  # the character's two formants
        f2 = 900 + 60 * ((7 * k) % 29)
        pulse = np.sign(np.sin(2 * math.pi * pitch * t)) * 0.3  # a buzzing glottis
        voiced = (np.sin(2 * math.pi * f1 * t) + 0.6 * np.sin(2 * math.pi * f2 * t)) \
            * (0.7 + pulse)
        envelope = np.sin(np.linspace(0, math.pi, n)) ** 2
        out[a:b] = voiced * envelope
    out += rng.normal(0, 0.01, total).astype(np.float32)
    peak = float(np.abs(out).max()) or 1.0
    return (out / peak * 0.8 * 32767).astype(np.int16)
