"""Training to a target in JAX (``accelbench train --framework jax``): a real tiny
Transformer run through the CLI, reading the generated dataset from files (the default
feed), that reaches a loose target over two seeds and is stored with framework jax, an
absurd learning rate that diverges at once, a cap that keeps the best metric, a real tiny
bert run through files with a spawned loader worker, the data (files: torch's held-out
split, a loader batch not lost to the compile; memory: the sources' draws, bert's masks as
torch draws them), speech read from torch's files and scored by greedy CTC, and the pure
pieces (the optimizer against torch's, the divergence rule, the thread pool's one size per
process).

The transformer runs share one compiled step and evaluation (the trainer compiles once per
recipe and process; the learning rate is an argument of the program), so together they cost
one compile of the tiny Transformer."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("jax")

from accelbench.backends.jax import totarget as jt  # noqa: E402
from accelbench.cli import main  # noqa: E402
from accelbench.errors import ConfigError  # noqa: E402
from accelbench.store import open_store  # noqa: E402
from accelbench.totarget.recipes import recipe_for  # noqa: E402


def _threads() -> str:
    """The thread count this process's XLA pool has or would have by default: the tests
    never shrink the pool other tests of this process use."""
    have = jt.xla_cpu_threads()
    return str(have if have is not None else len(os.sched_getaffinity(0)))


def _train(db: Path, *extra: str) -> int:
    return main(["--db", str(db), "train", "transformer", "--framework", "jax",
                 "--threads", _threads(), *extra])


def test_jax_transformer_reaches_a_target_over_two_seeds_stored_as_jax(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.db"
    rc = _train(db, "--seeds", "2", "--target", "2.0", "--eval-every", "128",
                "--max-time", "300", "--cpu-tdp-w", "10")
    out = capsys.readouterr().out
    assert rc == 0 and "seed 0: reached" in out and "seed 1: reached" in out
    with open_store(str(db), create=False) as st:
        recs = st.totarget_runs()
    assert [r.outcome.seed for r in recs] == [0, 1] and {r.framework for r in recs} == {"jax"}
    for rec in recs:
        o = rec.outcome
        assert o.status == "reached" and o.points[-1].metric <= 2.0
        assert all(p.metric > 2.0 for p in o.points[:-1])
        assert [p.samples for p in o.points] == [128 * (i + 1) for i in range(len(o.points))]
        assert o.time_s >= o.points[-1].time_s >= o.eval_s > 0 and o.startup_s > 0
        assert rec.samples_to_target == o.samples == o.points[-1].samples
        assert rec.energy.joules(o.time_s) == pytest.approx(10 * o.time_s)
    # The seeds draw different initialisations and batches.
    assert [p.metric for p in recs[0].outcome.points] != [p.metric for p in recs[1].outcome.points]


def test_jax_absurd_learning_rate_ends_diverged_at_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.db"
    rc = _train(db, "--lr", "1000", "--eval-every", "64")
    out = capsys.readouterr().out
    assert rc == 1 and "diverged" in out and "training loss" in out
    with open_store(str(db), create=False) as st:
        (rec,) = st.totarget_runs()
    assert rec.framework == "jax" and rec.outcome.status == "diverged"
    assert rec.outcome.samples <= 256 and rec.recipe.lr == 1000


def test_jax_cap_ends_not_reached_with_the_best_metric_kept(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.db"
    rc = _train(db, "--max-samples", "96", "--eval-every", "32")
    out = capsys.readouterr().out
    assert rc == 1 and "not_reached" in out and "--max-samples 96" in out
    with open_store(str(db), create=False) as st:
        (rec,) = st.totarget_runs()
    o = rec.outcome
    assert o.status == "not_reached" and len(o.points) == 3 and o.samples == 96
    assert o.best(lower_is_better=True) == min(p.metric for p in o.points)
    assert f"best loss {o.best(lower_is_better=True):.4g}" in out


def test_a_second_thread_count_in_one_process_is_refused_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    jt.cpu_device(int(_threads()))  # the pool exists from here on
    jt.check_threads(int(_threads()))  # the size it has is accepted
    other = str(int(_threads()) + 1)
    db = tmp_path / "s.db"
    rc = main(["--db", str(db), "train", "transformer", "--framework", "jax",
               "--threads", other])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and f"--threads {other}" in err and "new process" in err
    assert len(err.splitlines()) == 1
    assert not db.exists()
    with pytest.raises(ConfigError, match="once per process"):
        jt.cpu_device(int(other))


@pytest.mark.parametrize("name", ["adam", "sgd"])
def test_optimizer_and_warmup_follow_torchs(name: str) -> None:
    """Five updates of a small quadratic: optax's recipe optimizer and torch's (Adam or SGD
    momentum 0.9 under LambdaLR's linear warm-up) move the parameters the same way."""
    torch = pytest.importorskip("torch")
    import dataclasses

    import jax.numpy as jnp
    import optax

    recipe = dataclasses.replace(recipe_for("lstm", "tiny"), optimizer=name, lr=0.05,
                                 warmup_steps=3)
    x0 = np.array([1.0, -2.0, 0.5], np.float32)
    w = torch.tensor(x0, requires_grad=True)
    opt = (torch.optim.SGD([w], lr=recipe.lr, momentum=0.9) if name == "sgd"
           else torch.optim.Adam([w], lr=recipe.lr))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 3))
    tx = jt.optimizer(recipe)
    p = jnp.asarray(x0)
    state = tx.init(p)
    scale = np.array([1.0, 3.0, 0.3], np.float32)
    for _ in range(5):
        opt.zero_grad()
        (torch.tensor(scale) * w**2).sum().backward()
        opt.step()
        sched.step()
        updates, state = tx.update(2 * jnp.asarray(scale) * p, state, p)
        p = optax.apply_updates(p, updates)
    np.testing.assert_allclose(np.asarray(p), w.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("workload", ["resnet50", "transformer"])
def test_a_seeds_batches_are_the_sources_draws_in_the_jax_layout(workload: str) -> None:
    """The batches (and the held-out split) are the learnable sources' draws in the order the
    torch trainer draws them, images NHWC and tokens int32: a seed sees the same data in
    both frameworks."""
    import dataclasses

    recipe = dataclasses.replace(recipe_for(workload, "tiny"), feed="memory")
    got = jt.Batches(recipe, seed=7)
    first, second = got.batch(), got.batch()
    rng = np.random.default_rng(7)
    if workload == "resnet50":
        src = recipe.images(classes=10, side=64)
        for b in (first, second):
            x, y = src.sample(recipe.batch_size, rng)
            assert b[0].shape == (recipe.batch_size, 64, 64, 3) and b[1].dtype == np.int32
            np.testing.assert_array_equal(b[0], x.transpose(0, 2, 3, 1))
            np.testing.assert_array_equal(b[1], y)
        assert len(got.held_out[1]) == recipe.eval_sequences
        return
    chain, n = recipe.markov(), got.seq_len
    for b in (first, second):
        seq = chain.sample(recipe.batch_size, 2 * n, rng)
        assert all(part.dtype == np.int32 for part in b)
        np.testing.assert_array_equal(b[0], seq[:, :n])
        np.testing.assert_array_equal(b[1], seq[:, n - 1:-1])
        np.testing.assert_array_equal(b[2], seq[:, n:])
    held = chain.sample(recipe.eval_sequences, 2 * n, np.random.default_rng(recipe.data_seed + 1))
    np.testing.assert_array_equal(got.held_out[2], held[:, n:])


def test_files_feed_reads_torchs_held_out_split_and_keeps_the_compile_batch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through files (the default feed) the held-out split is the torch trainer's, window
    for window, as int32; the batch taken for the compile's shapes is the first trained;
    the training batches are the torch trainer's for the same seed, window for window."""
    pytest.importorskip("torch")
    from accelbench.backends.torch.totarget import split_datasets
    from accelbench.totarget.ondisk import ensure_dataset, totarget_layout
    from accelbench.workloads.registry import get_workload

    monkeypatch.setenv("ACCELBENCH_DATA_DIR", str(tmp_path))
    recipe = recipe_for("transformer", "tiny")
    assert jt.fit_recipe(recipe).feed == "files"
    got = jt.Batches(recipe, seed=3)
    try:
        disk = ensure_dataset(recipe, totarget_layout(get_workload("transformer"), recipe))
        _, held = split_datasets(disk, recipe)
        assert len(got.held_out[0]) == recipe.eval_sequences
        for k, part in enumerate(got.held_out):
            assert part.dtype == np.int32
            want = np.stack([held[i][k].numpy() for i in range(recipe.eval_sequences)])
            np.testing.assert_array_equal(part, want)
        first = got.first()
        assert got.first() is first and got.batch() is first
        second = got.batch()
        assert second[0].shape == (recipe.batch_size, got.held_out[0].shape[1])
        assert not np.array_equal(first[0], second[0])
        # torch's trainer reads the same seed's batches: its DataLoader's order, and with no
        # loader workers the same windows' offsets (the order over epochs:
        # tests/test_totarget_order.py)
        from accelbench.backends.torch.totarget import _Data

        theirs = _Data(recipe, seed=3)
        for mine in (first, second, got.batch()):
            want = theirs.batch()
            assert len(mine) == len(want) == 3
            for a, b in zip(mine, want, strict=True):
                np.testing.assert_array_equal(a, b.numpy())
    finally:
        got.close()


def test_bert_memory_batches_are_torchs_masked_draws() -> None:
    """bert's in-memory batches are the torch trainer's draws (the same windows and masks
    per seed), int32, labels IGNORE where unmasked."""
    pytest.importorskip("torch")
    import dataclasses

    from accelbench.backends.torch.totarget import _Data
    from accelbench.data.transforms import IGNORE

    recipe = dataclasses.replace(recipe_for("bert", "tiny"), feed="memory")
    got, want = jt.Batches(recipe, seed=5), _Data(recipe, seed=5)
    for mine, theirs in ((got.held_out, want.held_out), (got.batch(), want.batch())):
        assert all(a.dtype == np.int32 for a in mine)
        for a, b in zip(mine, theirs, strict=True):
            np.testing.assert_array_equal(a, b.numpy())
        _, _, labels = mine
        assert (labels[:, 0] != IGNORE).all() and (labels == IGNORE).any()


def test_speech_reads_torchs_files_and_scores_greedy_ctc(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """deepspeech2 in JAX reads the torch trainer's WAV files into the same log-mel
    features (a trailing channel axis here), int32 transcripts; its held-out score is the
    CER of greedy CTC decoding; speech from memory is refused in one line."""
    pytest.importorskip("torch")
    import dataclasses

    from accelbench.backends.torch.totarget import split_datasets
    from accelbench.totarget.ondisk import ensure_dataset, totarget_layout
    from accelbench.workloads.registry import get_workload

    monkeypatch.setenv("ACCELBENCH_DATA_DIR", str(tmp_path))
    recipe = dataclasses.replace(recipe_for("deepspeech2", "tiny"), train_samples=8,
                                 eval_sequences=4, batch_size=4)
    assert jt.fit_recipe(recipe) is recipe
    with pytest.raises(ConfigError, match="disk only"):
        jt.fit_recipe(dataclasses.replace(recipe, feed="memory"))
    got = jt.Batches(recipe, seed=1)
    try:
        disk = ensure_dataset(recipe, totarget_layout(get_workload("deepspeech2"), recipe))
        _, held = split_datasets(disk, recipe)
        features, labels = got.held_out
        assert features.shape[0] == len(held) == 4 and labels.dtype == np.int32
        for i in range(4):
            want_x, want_y = held[i]
            np.testing.assert_array_equal(features[i, ..., 0], want_x.numpy()[0])
            np.testing.assert_array_equal(labels[i], want_y.numpy())
        x, y = got.first()
        assert x.shape == (recipe.batch_size, *features.shape[1:]) and x.dtype == np.float32
        assert y.shape == (recipe.batch_size, labels.shape[1])
    finally:
        got.close()
    # best symbol per step: repeats merged, blanks (0) dropped, edits over reference chars
    best = np.array([[0, 3, 3, 0, 4, 4, 0, 5], [1, 1, 0, 1, 2, 2, 0, 0]])
    refs = np.array([[3, 4, 5], [1, 2, 2]], dtype=np.int32)
    assert jt._speech_cer(best, refs) == pytest.approx(1 / 6)


def test_jax_bert_trains_through_files_with_a_loader_worker(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A real tiny bert run in JAX: the generated token files read by one spawned loader
    worker, the masked-token loss trained and the held-out masked loss evaluated."""
    db = tmp_path / "s.db"
    rc = main(["--db", str(db), "train", "bert", "--framework", "jax", "--threads",
               _threads(), "--max-samples", "256", "--eval-every", "128",
               "--loader-workers", "1"])
    out = capsys.readouterr().out
    assert rc == 1 and "--max-samples 256" in out
    with open_store(str(db), create=False) as st:
        (rec,) = st.totarget_runs()
    o = rec.outcome
    assert rec.framework == "jax" and rec.recipe.feed == "files"
    assert rec.recipe.loader_workers == 1 and o.samples == 256
    assert [p.samples for p in o.points] == [128, 256]
    # the untrained model's masked loss is about ln(vocab); training lowers it
    assert all(math.isfinite(p.metric) and p.metric > 0 for p in o.points)
    assert o.points[1].metric < o.points[0].metric
    # the step's wait for each batch, timed as run --data times JAX's (the same timer)
    assert "input generated, 1 loader worker: waited " in out
    assert o.input is not None and o.input.loader_workers == 1
    assert o.input.stall_fraction is not None and 0 <= o.input.stall_fraction <= 1


def test_a_users_image_folder_is_read_as_torch_reads_it_in_nhwc(tmp_path: Path) -> None:
    """--data PATH with images: the held-out split is torch's images (ImageNet's
    normalisation) transposed to NHWC, labels int32; the loader's batches come from the
    training split, whole batches only."""
    pytest.importorskip("torch")
    pytest.importorskip("PIL")
    from PIL import Image

    from accelbench.backends.torch.totarget import split_datasets
    from accelbench.totarget.ondisk import ensure_dataset, totarget_layout
    from accelbench.workloads.registry import get_workload

    rng = np.random.default_rng(0)
    for split, count in (("train", 6), ("val", 2)):
        for c in range(2):
            folder = tmp_path / split / f"c{c}"
            folder.mkdir(parents=True)
            for i in range(count):
                px = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)
                Image.fromarray(px).save(folder / f"{i}.png")
    recipe = jt.fit_recipe(recipe_for("resnet50", "tiny").with_overrides(
        data=str(tmp_path), batch_size=4))
    got = jt.Batches(recipe, seed=1)
    try:
        disk = ensure_dataset(recipe, totarget_layout(get_workload("resnet50"), recipe))
        _, held = split_datasets(disk, recipe)
        x, y = got.held_out
        assert x.shape == (4, 64, 64, 3) and x.dtype == np.float32 and y.dtype == np.int32
        want = np.stack([held[i][0].numpy().transpose(1, 2, 0) for i in range(len(held))])
        np.testing.assert_array_equal(x, want)
        assert y.tolist() == [held[i][1] for i in range(len(held))] == [0, 0, 1, 1]
        for _ in range(4):  # 12 training images: 3 whole batches an epoch, reshuffled
            bx, by = got.batch()
            assert bx.shape == (4, 64, 64, 3) and set(by.tolist()) <= {0, 1}
    finally:
        got.close()
    too_big = recipe_for("resnet50", "tiny").with_overrides(data=str(tmp_path), batch_size=16)
    with pytest.raises(ConfigError, match="12 training samples, fewer than one batch of 16"):
        jt.Batches(too_big, seed=1)
