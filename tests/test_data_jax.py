"""``--data generated|PATH`` in JAX: the same datasets and the same work as torch's
pipeline (:mod:`accelbench.data.transforms`), batched by :mod:`accelbench.data.loader`
(spawned worker processes) into ``jax.device_put``, the wait timed by the same
``InputTimer`` so the record's ``input`` has torch's fields.

The runs are the real CLI at tiny size in processes of their own; datasets are tiny."""

from __future__ import annotations

import json
import math
import random
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from accelbench.data.generate import ensure_generated
from accelbench.data.layouts import layout_of
from accelbench.data.loader import BatchLoader
from accelbench.workloads.registry import get_workload
from tests.conftest import run_cli_many

pytest.importorskip("jax")

QUICK = ("--size", "tiny", "--iterations", "4", "--no-energy", "--data", "generated")
#: One workload per input path beside vit's and llm's (speech: tests/test_data_speech.py): a
#: CNN with BatchNorm (resnet50; vgg16 and inception_v3 read the same image folders), masked
#: tokens (bert) and source/target pairs (transformer; lstm reads llm's token shards). Every
#: workload's JAX run on generated data is measured in docs/benchmarks.md ("The data suite in
#: JAX").
OTHERS = ("bert", "resnet50", "transformer")


def _records(db: Path) -> list[dict]:
    with sqlite3.connect(db) as con:
        return [json.loads(j) for (j,) in con.execute("select record_json from results")]


def test_jax_trains_every_image_and_token_workload_on_generated_data(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    env = {"ACCELBENCH_DATA_DIR": str(tmp_path / "data")}
    calls = [
        (("run", "vit", "--framework", "jax", *QUICK, "--loader-workers", "2", "--json"), env),
        # llm on a one-process mesh: one loaded batch per replica, split over 2 devices.
        (("run", "llm", "--framework", "jax", *QUICK, "--loader-workers", "0", "--devices",
          "2", "--parallel", "fsdp", "--json"), env),
        (("run", "llm", *QUICK, "--loader-workers", "0", "--json"), env),  # torch's twin
    ]
    calls += [(("run", name, "--framework", "jax", *QUICK, "--loader-workers", "0",
                "--json"), env) for name in OTHERS]
    done = run_cli_many(calls, db=db, workers=4, timeout=900)
    for (args, _env), p in zip(calls, done, strict=True):
        assert p.returncode == 0, (args, p.stderr[-2000:])
        summary = json.loads(p.stdout)
        assert summary["input_source"] == "generated"
        assert 0 < summary["input_stall_fraction"] < 1
    records = {(r["spec"]["workload"], r["spec"]["framework"]): r for r in _records(db)}
    assert sorted(records) == sorted([("llm", "torch"), ("vit", "jax"), ("llm", "jax"),
                                      *((name, "jax") for name in OTHERS)])
    torch_input = records["llm", "torch"]["input"]
    for key in (("vit", "jax"), ("llm", "jax"), *((name, "jax") for name in OTHERS)):
        r = records[key]
        assert r["status"] == "ok" and math.isfinite(r["final_loss"]), key
        inp = r["input"]
        # The same section as torch's: the same fields, the same meaning; an image
        # dataset's also counts the files that failed to decode (none here), as torch's.
        images = inp["layout"] == "imagefolder"
        assert sorted(inp) == sorted([*torch_input, *(["skipped"] if images else [])]), key
        assert not images or inp["skipped"]["count"] == 0, key
        assert inp["source"] == "generated" and len(inp["wait_s"]) == r["stats"]["n"] == 4
        assert all(w >= 0 for w in inp["wait_s"])
        # JAX's steps are timed in blocks (asynchronous dispatch): the window's waits fit
        # in its time, as each torch step's wait fits in that step.
        times, blocks = r["iteration_times_s"], r.get("block_steps") or ()
        total = sum(t * k for t, k in zip(times, blocks, strict=True)) if blocks else sum(times)
        assert 0 < sum(inp["wait_s"]) < total
        assert inp["stall_fraction"] == pytest.approx(sum(inp["wait_s"]) / total)
        assert "jax.device_put" in inp["loader"]
        assert Path(inp["path"]).parent == tmp_path / "data"
    assert records["vit", "jax"]["input"]["loader_workers"] == 2
    assert records["vit", "jax"]["input"]["prefetch_factor"] == 2
    assert records["vit", "jax"]["input"]["layout"] == "imagefolder"
    llm = records["llm", "jax"]["input"]
    assert llm["layout"] == "token_shards" and llm["loader_workers"] == 0
    # The mesh's global batch: 2 replicas' loader batches, distinct samples for each.
    mesh = records["llm", "jax"]
    assert mesh["backend_extra"]["sharding"]["axes"] == {"data": 1, "fsdp": 2, "tensor": 1}
    assert mesh["spec"]["topology"]["devices"] == 2
    assert done[1].returncode == 0 and json.loads(done[1].stdout)["global_batch_size"] == \
        2 * mesh["spec"]["batch_size"]
    # One dataset on disk for both frameworks' llm.
    assert llm["path"] == torch_input["path"] and llm["samples"] == torch_input["samples"]


def test_torch_and_jax_read_the_same_sample_for_one_index(tmp_path: Path) -> None:
    """Given the same random draws, both frameworks' datasets make the same sample:
    torch's in CHW tensors, JAX's (numpy) in HWC."""
    from accelbench.backends.jax.input import build_samples
    from accelbench.backends.torch.input import build_dataset

    for name in ("resnet50", "bert", "transformer"):
        layout = layout_of(get_workload(name), "tiny")
        path, _ = ensure_generated(layout, "tiny", out=tmp_path / name)
        ours, theirs = build_dataset(path, layout), build_samples(path, layout)
        assert len(ours) == len(theirs) > 0
        for index in (0, len(ours) - 1):
            random.seed(11)  # torch's DataLoader seeds Python's generator in each worker
            from_torch = ours[index]
            from_jax = theirs.sample(index, random.Random(11))
            assert len(from_torch) == len(from_jax)
            if name == "resnet50":
                chw, label = from_torch
                hwc, jax_label = from_jax
                assert hwc.shape == (layout.side, layout.side, 3) and hwc.dtype == np.float32
                np.testing.assert_array_equal(chw.numpy().transpose(1, 2, 0), hwc)
                assert label == jax_label
                assert abs(float(hwc.mean())) < 3  # normalised, not raw pixels
            else:
                for t, a in zip(from_torch, from_jax, strict=True):
                    np.testing.assert_array_equal(t.numpy(), a)
            # Another draw: another crop or window (the sample is augmented, not fixed).
            again = theirs.sample(index, random.Random(12))
            assert any(not np.array_equal(np.asarray(a), np.asarray(b))
                       for a, b in zip(from_jax, again, strict=True)), name


class Numbered:
    """Sample i is (i, i squared): the loader's order is visible in its batches."""

    def __len__(self) -> int:
        return 50

    def sample(self, index: int, rng: random.Random) -> tuple[int, int]:
        return index, index * index


class Broken(Numbered):
    def sample(self, index: int, rng: random.Random) -> tuple[int, int]:
        raise OSError(f"sample {index} unreadable")


def test_the_loader_gives_the_same_batches_with_and_without_workers() -> None:
    """Workers prepare batches ahead but hand them back in the order asked; each epoch
    visits every sample once in a new order and drops the partial batch."""
    serial = BatchLoader(Numbered(), 8, 0, 2, seed=3)
    parallel = BatchLoader(Numbered(), 8, 2, 2, seed=3)
    try:
        a = [next(serial) for _ in range(12)]  # two epochs of 6 batches (50 // 8)
        b = [next(parallel) for _ in range(12)]
    finally:
        parallel.close()
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x[0], y[0])
        np.testing.assert_array_equal(x[1], x[0] ** 2)
    first, second = (np.concatenate([x[0] for x in a[k:k + 6]]) for k in (0, 6))
    assert len(set(first.tolist())) == 48 and len(set(second.tolist())) == 48
    assert first.tolist() != second.tolist()  # reshuffled each epoch


def test_the_loader_refuses_a_batch_larger_than_its_dataset() -> None:
    with pytest.raises(ValueError, match="a batch of 51 from 50 samples"):
        BatchLoader(Numbered(), 51, 0, 2, seed=0)


def test_a_worker_that_fails_says_why_in_the_step() -> None:
    loader = BatchLoader(Broken(), 4, 1, 1, seed=0)
    try:
        with pytest.raises(RuntimeError, match="loader worker: OSError: sample .* unreadable"):
            next(loader)
    finally:
        loader.close()
