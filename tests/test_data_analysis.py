"""Issue 41's second slice: ``--input-analysis`` (synthetic, cached and cold passes of a
real case), the input pipeline's energy against a fake powercap counter at a known power
(the vendor boundary), files that fail to decode mid-run (skipped, or the case stopped),
and a data-parallel case reading its shard of a dataset.

Every case is the real CLI in its own process at tiny size over real files; nothing above
the sysfs counter is faked. Timing asserts are one-sided or loose (a loaded machine)."""

from __future__ import annotations

import json
import math
import os
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from accelbench.data import pagecache
from tests.conftest import TESTS, run_cli
from tests.sink_fakes import powercap_tree

POWER_W = 40.0
SHARD_LOG = str(TESTS / "plugins" / "shard_log.py")


def _records(db: Path) -> list[dict]:
    with sqlite3.connect(db) as con:
        return [json.loads(j) for (j,) in con.execute("select record_json from results")]


def _images(root: Path, per_class: int = 20, broken: tuple[int, ...] = (), side: int = 32
            ) -> Path:
    """Two class folders of ``side`` px JPEGs of noise; the images numbered in ``broken``
    (never a class's first, which the up-front check opens) hold bytes that are no
    image."""
    from PIL import Image

    rng = np.random.default_rng(3)
    n = 0
    for c in range(2):
        (root / f"c{c}").mkdir(parents=True)
        for i in range(per_class):
            f = root / f"c{c}" / f"{i:03d}.jpg"
            if n in broken:
                assert i > 0
                f.write_bytes(b"\xff\xd8 not a jpeg at all" * 20)
            else:
                pixels = rng.integers(0, 256, (side, side, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(f)
            n += 1
    return root


def test_the_page_cache_is_dropped_and_filled_with_evidence(tmp_path: Path) -> None:
    files = pagecache.dataset_files(_images(tmp_path / "d", per_class=4))
    assert len(files) == 8
    assert pagecache.drop(files) is None
    assert pagecache.resident_share(files) == 0.0  # written just now: fsync'd, then evicted
    assert pagecache.warm(files) == sum(f.stat().st_size for f in files)
    assert pagecache.resident_share(files) == 1.0


def test_input_analysis_runs_the_three_passes_of_a_real_case(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    # 40 images of noise at 384 px (milliseconds to decode each): 10 batches of 4
    data = _images(tmp_path / "imgs", side=384)
    p = run_cli("run", "resnet50", "--size", "tiny", "--batch-size", "4", "--iterations", "6",
                "--no-energy", "--loader-workers", "0", "--data", str(data),
                "--input-analysis", db=db)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "data stalls   synthetic " in p.stdout and "prep stall " in p.stdout, p.stdout
    [r] = _records(db)
    assert r["spec"]["input_analysis"] is True
    a = r["input"]["analysis"]
    syn, cached, cold = a["synthetic"], a["cached"], a["cold"]
    for one in (syn, cached, cold):
        assert one["steps"] >= 3 and one["seconds"] > 0, a
        assert one["samples_per_s"] == pytest.approx(one["steps"] * 4 / one["seconds"])
        blocks = one["block_samples_per_s"]  # 3 rounds: the pass's rate lies among them
        assert len(blocks) == 3 and min(blocks) <= one["samples_per_s"] <= max(blocks)
    # The page cache as each pass began, by mincore: full before cached, empty before cold.
    assert cached["resident_share"] >= 0.95 and cold["resident_share"] <= 0.05
    # 6 timed steps a pass, in 3 rounds of 2 (a cold block stays inside one epoch of 10)
    assert syn["steps"] == cached["steps"] == cold["steps"] == 6
    assert a["prep_stall"] == pytest.approx(1 - cached["samples_per_s"] / syn["samples_per_s"])
    assert a["fetch_stall"] == pytest.approx(1 - cold["samples_per_s"] /
                                             cached["samples_per_s"])
    # With no workers each cached step decodes its batch (4 large JPEGs) before computing:
    # slower than the batch held on the device.
    assert cached["samples_per_s"] < syn["samples_per_s"] and a["prep_stall"] > 0
    assert "energy" not in r["input"]  # --no-energy: no meters, no energy figures
    assert math.isfinite(r["final_loss"]) and r["status"] == "ok"


def test_input_analysis_drops_token_shards_read_in_the_training_process(tmp_path: Path
                                                                         ) -> None:
    """With 0 loader workers the step's own process maps the shards: it unmaps them before
    each block, so that the cold pass starts cold."""
    db, root = tmp_path / "r.db", tmp_path / "toks"
    root.mkdir()
    rng = np.random.default_rng(5)
    for i in range(2):
        rng.integers(0, 100, 6000).astype("<u2").tofile(root / f"s{i}.bin")
    p = run_cli("run", "lstm", "--size", "tiny", "--iterations", "6", "--no-energy",
                "--loader-workers", "0", "--data", str(root), "--input-analysis", db=db)
    assert p.returncode == 0, p.stderr[-2000:]
    [r] = _records(db)
    cold = r["input"]["analysis"]["cold"]
    assert cold["samples_per_s"] is not None and cold["resident_share"] <= 0.05, cold
    assert r["input"]["analysis"]["fetch_stall"] is not None


def test_input_analysis_is_refused_without_a_dataset(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    for extra in ((), ("--nproc-per-node", "2", "--data", "generated")):
        p = run_cli("run", "lstm", "--size", "tiny", "--input-analysis", *extra, db=db)
        assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
        assert "--input-analysis" in p.stderr and p.stdout == ""
    assert not db.exists() or not _records(db)
    from accelbench import api
    from accelbench.errors import ConfigError

    for kw in ({"input_analysis": True}, {"loader_workers": 2}):  # the API's keywords too
        with pytest.raises(ConfigError, match="needs --data generated or a PATH"):
            api.plan_run("lstm", size="tiny", check_hardware=False, **kw)
    case = api.plan_run("lstm", size="tiny", data="generated", input_analysis=True,
                        check_hardware=False)
    assert case.spec.input_analysis and case.spec.to_dict()["input_analysis"] is True
    plain = api.plan_run("lstm", size="tiny", data="generated", check_hardware=False)
    assert "input_analysis" not in plain.spec.to_dict()  # a data case without it: as before
    assert plain.spec.case_key() != case.spec.case_key()


def test_the_loaders_energy_against_a_counter_at_a_known_power(tmp_path: Path) -> None:
    """A package counter advancing at POWER_W: the loader's host energy per sample is the
    power times the cached pass's seconds per sample less the synthetic pass's, and the
    device's while waiting is the power times the waits per sample."""
    db = tmp_path / "r.db"
    data = _images(tmp_path / "imgs")
    with powercap_tree(tmp_path, POWER_W) as root:
        p = run_cli("run", "resnet50", "--size", "tiny", "--batch-size", "4", "--threads", "1",
                    "--max-time", "1", "--min-iterations", "3", "--no-idle",
                    "--loader-workers", "0", "--data", str(data), "--input-analysis",
                    db=db, ACCELBENCH_POWERCAP_ROOT=str(root))
    assert p.returncode == 0, p.stderr[-2000:]
    assert "input energy  loader " in p.stdout and "(counter, host)" in p.stdout, p.stdout
    [r] = _records(db)
    inp = r["input"]
    a, e = inp["analysis"], inp["energy"]
    assert a["cached"]["steps"] == a["synthetic"]["steps"]
    host = e["loader_host"]
    assert host["source"] == "counter" and host["boundary"] == "host"
    # the first round's metered blocks: the energy window's minimum, the same steps
    syn, cached = host["details"]["synthetic"], host["details"]["cached"]
    assert cached["steps"] == syn["steps"] >= 32
    per_sample = [POWER_W * one["seconds"] / (one["steps"] * 4) for one in (syn, cached)]
    # A difference of two passes' energies, each read from a counter a thread advances: under
    # load the thread runs late by a few % of each pass (CI at load 6 read 0.018 J against
    # -0.018 J, 7.5% of a pass's 0.48 J/sample), so held to 15% of a pass, not 5%.
    assert host["j_per_sample"] == pytest.approx(per_sample[1] - per_sample[0],
                                                 abs=0.15 * per_sample[1])
    dev = e["device_waiting"]
    assert dev["source"] == "counter" and dev["boundary"] == "device"
    samples = 4 * len(inp["wait_s"])
    assert dev["j_per_sample"] == pytest.approx(POWER_W * sum(inp["wait_s"]) / samples,
                                                rel=0.1)


def test_the_loaders_energy_without_a_sensor_says_unavailable(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    data = _images(tmp_path / "imgs", per_class=6)
    p = run_cli("run", "resnet50", "--size", "tiny", "--batch-size", "4", "--iterations", "3",
                "--no-idle", "--loader-workers", "0", "--data", str(data), "--input-analysis",
                db=db, ACCELBENCH_POWERCAP_ROOT=str(tmp_path / "none"))
    assert p.returncode == 0, p.stderr[-2000:]
    [r] = _records(db)
    for fig in r["input"]["energy"].values():
        if isinstance(fig, dict):
            assert fig["j_per_sample"] is None and fig["source"] == "unavailable"
            assert fig["note"].startswith("unavailable: ") and len(fig["note"]) > 20
    assert "input energy  loader unavailable" in p.stdout


def test_the_loaders_energy_from_a_tdp_estimate_is_labelled_estimate(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    data = _images(tmp_path / "imgs", per_class=6)
    p = run_cli("run", "resnet50", "--size", "tiny", "--batch-size", "4", "--threads", "1",
                "--max-time", "1", "--min-iterations", "3", "--no-idle", "--cpu-tdp-w", "100",
                "--loader-workers", "0", "--data", str(data), "--input-analysis", db=db,
                ACCELBENCH_POWERCAP_ROOT=str(tmp_path / "none"))
    assert p.returncode == 0, p.stderr[-2000:]
    [r] = _records(db)
    e = r["input"]["energy"]
    assert e["loader_host"]["source"] == "estimate" == e["device_waiting"]["source"]
    assert e["loader_host"]["boundary"] == "host" and e["device_waiting"]["boundary"] == "device"
    assert all(math.isfinite(e[k]["j_per_sample"]) for k in ("loader_host", "device_waiting"))
    assert "(estimate, host)" in " ".join(p.stdout.split())
    # The export's case table carries the split and the loader's energy with its source.
    out = tmp_path / "cases.csv"
    x = run_cli("export", "--format", "csv", "--out", str(out), db=db)
    assert x.returncode == 0, x.stderr[-2000:]
    import csv

    [row] = list(csv.DictReader(out.open()))
    a = r["input"]["analysis"]
    for col, want in (("input_prep_stall", a["prep_stall"]),
                      ("input_fetch_stall", a["fetch_stall"]),
                      ("input_loader_j_per_sample", e["loader_host"]["j_per_sample"])):
        assert (row[col] == "") if want is None else float(row[col]) == pytest.approx(want), col
    assert row["input_loader_energy_source"] == "estimate"


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_a_file_that_fails_to_decode_mid_run_is_skipped_and_said(tmp_path: Path,
                                                                  framework: str) -> None:
    db = tmp_path / "r.db"
    data = _images(tmp_path / "imgs", broken=(7,))  # c0/007.jpg, not its class's first
    # 40 images, batches of 4: warm-up and 12 steps read every file at least once.
    p = run_cli("run", "resnet50", "--size", "tiny", "--batch-size", "4", "--iterations", "12",
                "--no-energy", "--loader-workers", "1", "--data", str(data),
                "--framework", framework, db=db)
    assert p.returncode == 0, p.stderr[-2000:]
    [r] = _records(db)
    assert r["status"] == "ok" and math.isfinite(r["final_loss"])
    skipped = r["input"]["skipped"]
    assert skipped["count"] == 1 and skipped["files"] == 40 and skipped["limit"] == 1
    assert skipped["example"] == str(data / "c0" / "007.jpg")
    assert "UnidentifiedImageError" in skipped["error"] or "OSError" in skipped["error"]
    out = " ".join(p.stdout.split())  # the console wraps long lines
    assert out.count(" skipped 1 file failed to decode and was skipped") == 1, out
    assert "c0/007.jpg:" in "".join(p.stdout.split())  # the example file, named


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_too_many_files_that_fail_stop_the_case_with_one_line(tmp_path: Path,
                                                              framework: str) -> None:
    db = tmp_path / "r.db"
    data = _images(tmp_path / "imgs", broken=(3, 5, 9, 24, 31))
    p = run_cli("run", "resnet50", "--size", "tiny", "--batch-size", "4", "--iterations", "12",
                "--no-energy", "--loader-workers", "1", "--data", str(data),
                "--framework", framework, db=db)
    [r] = _records(db)
    assert r["status"] == "error", r["status"]
    assert r["error"].startswith("DataError: ") and "\n" not in r["error"]
    assert "failed to decode while training, more than the 1 (1%, at least one)" in r["error"]
    assert p.returncode != 0


def test_a_clean_dataset_says_it_skipped_nothing(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    p = run_cli("run", "resnet50", "--size", "tiny", "--batch-size", "4", "--iterations", "3",
                "--no-energy", "--loader-workers", "0", "--data",
                str(_images(tmp_path / "imgs", per_class=4)), db=db)
    assert p.returncode == 0, p.stderr[-2000:]
    [r] = _records(db)
    assert r["input"]["skipped"] == {"count": 0, "limit": 1, "files": 8}
    assert "skipped" not in p.stdout and "analysis" not in r["input"]


def test_a_data_parallel_case_reads_each_ranks_shard(tmp_path: Path) -> None:
    """Two gloo ranks over a plugin dataset of 16 samples that logs (rank, index) of every
    read: each rank read its own DistributedSampler shard (8 samples, 4 batches of 2) in
    the sampler's order, pass after pass, the epoch set at each pass (a new order), and
    the two shards of a pass are disjoint."""
    db, log = tmp_path / "r.db", tmp_path / "reads.log"
    n = 16
    p = run_cli("--plugin", SHARD_LOG, "run", "shard_log", "--size", "tiny",
                "--nproc-per-node", "2", "--data", "generated", "--loader-workers", "0",
                "--iterations", "6", "--no-energy", db=db, timeout=600,
                ACCELBENCH_TEST_SHARD_LOG=str(log), ACCELBENCH_TEST_SHARD_SAMPLES=str(n))
    assert p.returncode == 0, p.stderr[-3000:]
    [r] = _records(db)
    assert r["status"] == "ok" and r["input"]["source"] == "generated"
    assert r["input"]["samples"] == n
    reads: dict[int, list[int]] = {0: [], 1: []}
    for line in log.read_text().split():
        rank, index = line.split(":")
        reads[int(rank)].append(int(index))
    from torch.utils.data import DistributedSampler

    passes = []
    for rank, got in reads.items():
        assert len(got) >= 14, (rank, len(got))  # 7+ steps of 2: more than one pass of 8
        sampler = DistributedSampler(range(n), num_replicas=2, rank=rank, shuffle=True,
                                     seed=0, drop_last=True)
        want: list[int] = []
        for epoch in range(len(got) // 8 + 1):
            sampler.set_epoch(epoch)
            want += list(sampler)
        assert got == want[:len(got)], rank  # its shard, pass after pass, each reshuffled
        passes.append(want[:8])
    assert not set(passes[0]) & set(passes[1])  # the first pass's shards are disjoint
    assert sorted(passes[0] + passes[1]) == list(range(n))


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="no posix_fadvise here")
def test_a_cold_pass_that_cannot_drop_says_why(tmp_path: Path) -> None:
    """Pages another process maps stay resident: the evidence (mincore) says so."""
    import mmap

    files = pagecache.dataset_files(_images(tmp_path / "d", per_class=2))
    with open(files[1], "rb") as fh:
        mapped = mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ)
        try:
            mapped.read()  # touch every page
            assert pagecache.drop(files) is None
            got = pagecache.resident(files)
            assert not isinstance(got, str) and got[0] >= 1
        finally:
            mapped.close()


def test_the_image_transform_is_the_formula_for_rgb_and_other_modes(tmp_path: Path) -> None:
    """The loader's normalisation (folded into one scale and shift, in place) gives
    (x / 255 - mean) / std of the cropped, flipped image, for RGB and for greyscale and
    RGBA files (converted to RGB)."""
    import random

    import torch
    from PIL import Image

    from accelbench.backends.torch.input import MEAN, STD, ImageFolderSet, crop_box

    rng = np.random.default_rng(4)
    files = []
    for mode, shape in (("RGB", (40, 56, 3)), ("L", (50, 30)), ("RGBA", (33, 47, 4))):
        f = tmp_path / f"{mode}.png"
        Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8), mode).save(f)
        files.append((str(f), 0))
    ds = ImageFolderSet(files, 24)
    for i, (name, _) in enumerate(files):
        random.seed(i)
        x, label = ds[i]
        random.seed(i)
        img = Image.open(name).convert("RGB")
        img = img.resize((24, 24), Image.Resampling.BILINEAR, box=crop_box(*img.size))
        if random.random() < 0.5:
            img = img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        want = (np.asarray(img, dtype=np.float32) / 255.0 - np.asarray(MEAN)) / np.asarray(STD)
        assert x.shape == (3, 24, 24) and x.dtype == torch.float32 and x.is_contiguous()
        assert np.abs(x.numpy() - want.transpose(2, 0, 1)).max() < 1e-5, name
        assert label == 0


def test_the_stalls_line_says_when_a_stall_is_within_the_blocks_noise() -> None:
    from accelbench.data.analysis import analysis_line

    def one(*rates: float) -> dict:
        return {"steps": 3 * len(rates), "seconds": 1.0, "block_samples_per_s": list(rates),
                "samples_per_s": sum(rates) / len(rates)}

    steady = {"analysis": {"synthetic": one(100, 101, 99), "cached": one(50, 51, 49),
                           "cold": one(49, 50, 48), "prep_stall": 0.5, "fetch_stall": 0.02}}
    line = analysis_line(steady)
    assert line is not None and "prep stall 50.0%)" in line
    assert "fetch stall 2.0%, within the blocks' noise)" in line  # spreads of about 4% > 2%
    noisy = {"analysis": {"synthetic": one(60, 140, 100), "cached": one(50, 51, 49),
                          "cold": {"note": "unavailable: why"}, "prep_stall": 0.5,
                          "fetch_stall": None}}
    line = analysis_line(noisy)
    assert line is not None and "prep stall 50.0%, within the blocks' noise" in line
    assert "cold unavailable (fetch stall unavailable); unavailable: why" in line
