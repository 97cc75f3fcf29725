"""Speech for ``--data generated|PATH`` (deepspeech2, issue 41): WAV files with
transcripts, generated (synthesised per character) or the user's, decoded with ``wave``
and turned into log-mel features in numpy, in both frameworks. Real runs of the CLI at
tiny size; datasets are tiny."""

from __future__ import annotations

import json
import math
import random
import sqlite3
import wave
from pathlib import Path

import numpy as np
import pytest

from accelbench.data.generate import ensure_generated
from accelbench.data.layouts import SpeechLayout, layout_of
from accelbench.data.speech import LogMel, mel_filterbank, speech_files
from accelbench.workloads.registry import get_workload
from tests.conftest import TESTS, run_cli, run_cli_many, seed_store

QUICK = ("--size", "tiny", "--iterations", "3", "--no-energy")


def _layout() -> SpeechLayout:
    layout = layout_of(get_workload("deepspeech2"), "tiny")
    assert isinstance(layout, SpeechLayout)
    return layout


def _records(db: Path) -> list[dict]:
    with sqlite3.connect(db) as con:
        return [json.loads(j) for (j,) in con.execute("select record_json from results")]


def _wav(path: Path, pcm: np.ndarray, rate: int = 16000, channels: int = 1,
         width: int = 2) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(rate)
        dtype = "<i2" if width == 2 else "u1"
        w.writeframes(pcm.astype(dtype).tobytes())


def test_a_generated_speech_dataset_is_wav_files_with_transcripts(tmp_path: Path) -> None:
    out = tmp_path / "speech"
    p = run_cli("data", "generate", "deepspeech2", "--size", "tiny", "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert "64 utterances (wav_transcripts)" in p.stdout
    layout = _layout()
    pairs = speech_files(out)
    assert len(pairs) == 64
    with wave.open(pairs[0][0], "rb") as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 16000)
        assert w.getnframes() == layout.samples_per_utterance
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    text = Path(pairs[0][1]).read_text().strip()
    assert len(text) == layout.target_len and set(text) <= set("' abcdefghijklmnopqrstuvwxyz")
    # Speech, not noise: loud voiced stretches and near-silent edges between characters.
    frames = pcm[: len(pcm) // 160 * 160].reshape(-1, 160).astype(np.float64)
    rms = np.sqrt((frames ** 2).mean(axis=1))
    assert rms.max() > 8 * np.percentile(rms, 5)  # white noise: about 1.2x


def test_the_features_are_a_log_mel_spectrogram() -> None:
    """A 1 kHz tone peaks in the mel band around 1 kHz in every frame; the filters cover
    the spectrum without an empty one."""
    layout = _layout()
    filters = mel_filterbank(16000, layout.n_fft, layout.bins)
    assert filters.shape == (layout.bins, layout.n_fft // 2 + 1)
    assert (filters.sum(axis=1) > 0).all()
    t = np.arange(layout.samples_per_utterance) / 16000
    features = LogMel(layout)(np.sin(2 * np.pi * 1000 * t).astype(np.float32))
    assert features.shape == (layout.bins, layout.frames) and features.dtype == np.float32
    freqs = np.linspace(0, 8000, layout.n_fft // 2 + 1)
    centre = (filters * freqs).sum(axis=1) / filters.sum(axis=1)
    peak = int(np.argmin(abs(centre - 1000)))
    assert all(abs(int(b) - peak) <= 1 for b in features.argmax(axis=0))
    assert abs(float(features.mean())) < 1e-3 and abs(float(features.std()) - 1) < 1e-2


def test_torch_and_jax_read_the_same_utterance(tmp_path: Path) -> None:
    from accelbench.backends.jax.input import build_samples
    from accelbench.backends.torch.input import build_dataset

    layout = _layout()
    path, _ = ensure_generated(layout, "tiny", out=tmp_path / "s")
    ours, theirs = build_dataset(path, layout), build_samples(path, layout)
    random.seed(3)
    features, ids = ours[5]
    same = theirs.sample(5, random.Random(3))
    assert tuple(features.shape) == (1, layout.bins, layout.frames)
    np.testing.assert_array_equal(features.numpy()[0], same[0])
    text = Path(speech_files(path)[5][1]).read_text().strip()
    alphabet = "' abcdefghijklmnopqrstuvwxyz"
    assert ids.tolist() == [alphabet.index(c) + 1 for c in text][:layout.target_len]


def test_deepspeech2_trains_on_generated_speech_in_both_frameworks(tmp_path: Path) -> None:
    pytest.importorskip("jax")
    db = tmp_path / "r.db"
    env = {"ACCELBENCH_DATA_DIR": str(tmp_path / "data")}
    calls = [(("run", "deepspeech2", *QUICK, "--data", "generated", "--loader-workers", "1",
               "--framework", fw), env) for fw in ("torch", "jax")]
    done = run_cli_many(calls, db=db, timeout=600)
    for p in done:
        assert p.returncode == 0, p.stderr[-2000:]
        assert "input         generated" in p.stdout
    records = {r["spec"]["framework"]: r for r in _records(db)}
    assert sorted(records) == ["jax", "torch"]
    for r in records.values():
        assert r["status"] == "ok" and math.isfinite(r["final_loss"])
        assert r["input"]["layout"] == "wav_transcripts" and r["input"]["samples"] == 64
        assert len(r["input"]["wait_s"]) == 3
    assert records["torch"]["input"]["path"] == records["jax"]["input"]["path"]
    assert Path(records["jax"]["input"]["path"]).name == "speech-16k-40f-6t-tiny"


def test_a_users_speech_folder_trains(tmp_path: Path) -> None:
    """Stereo, longer than the model's window (a random stretch is read), transcripts
    longer than the model's and with characters outside the alphabet (dropped)."""
    root = tmp_path / "mine"
    rng = np.random.default_rng(4)
    for i in range(4):
        pcm = (rng.normal(0, 3000, (32000, 2))).astype(np.int16)
        _wav(root / "spk" / f"u{i}.wav", pcm.reshape(-1), channels=2)
        (root / "spk" / f"u{i}.txt").write_text("Hello, World! it's fine\n")
    db = tmp_path / "r.db"
    p = run_cli("run", "deepspeech2", *QUICK, "--loader-workers", "0", "--data", str(root),
                db=db)
    assert p.returncode == 0, p.stderr[-2000:]
    [r] = _records(db)
    assert r["input"]["source"] == "path" and r["input"]["samples"] == 4
    assert math.isfinite(r["final_loss"])


def _bad(root: Path) -> list[tuple[str, str]]:
    tone = (np.sin(np.arange(8000) / 5) * 9000).astype(np.int16)
    cases = []

    def case(name: str, said: str) -> Path:
        (root / name).mkdir(parents=True)
        cases.append((str(root / name), said))
        return root / name

    case("empty", "no .wav files")
    _wav(case("notxt", "u.wav has no transcript u.txt beside it") / "u.wav", tone)
    d = case("eight", "is not a readable 16-bit PCM WAV file (8-bit samples")
    _wav(d / "u.wav", (tone // 256 + 128).astype(np.uint8), width=1)
    (d / "u.txt").write_text("abcdefgh")
    d = case("rate", "sampled at 8000 Hz, not the 16000 Hz")
    _wav(d / "u.wav", tone, rate=8000)
    (d / "u.txt").write_text("abcdefgh")
    d = case("garbage", "u.wav is not a readable 16-bit PCM WAV file")
    (d / "u.wav").write_bytes(b"RIFF nonsense")
    (d / "u.txt").write_text("abcdefgh")
    d = case("short", "holds 100 samples, fewer than one 400-sample analysis window")
    _wav(d / "u.wav", tone[:100])
    (d / "u.txt").write_text("abcdefgh")
    d = case("words", "holds 3 transcript characters (a-z, ' and space), fewer than the "
                      "model's 6")
    _wav(d / "u.wav", tone)
    (d / "u.txt").write_text("a-b-c!")
    return cases


def test_bad_speech_paths_are_refused_in_one_line_and_nothing_is_written(
        tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    seed_store(db)
    before = db.read_bytes()
    cases = _bad(tmp_path / "bad")
    calls = [(("run", "deepspeech2", *QUICK, "--data", path), {}) for path, _ in cases]
    plugin = str(TESTS.parent / "examples" / "custom_workload.py")
    calls.append((("--plugin", plugin, "run", "mlp_regressor", *QUICK, "--data",
                   "generated"), {"ACCELBENCH_DATA_DIR": str(tmp_path / "data")}))
    said = [s for _, s in cases] + ["no on-disk dataset layout yet"]
    for (args, _env), p, text in zip(calls, run_cli_many(calls, db=db), said, strict=True):
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(lines) == 1, (args, p.stderr)
        assert text in lines[0], (args, lines[0])
    assert db.read_bytes() == before and not (tmp_path / "data").exists()
