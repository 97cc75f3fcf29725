"""``--data generated|PATH``: real datasets on disk, a torch DataLoader feeding real training
steps in real workers, the wait for each batch timed and stored (issue 41's first slice).

Every case runs the real CLI in its own process at tiny size; datasets are tiny. The one
timing check (the sleeping dataset) asserts the lower bound tightly (a sleep never ends
early) and the upper bound loosely (a busy machine only makes waits longer)."""

from __future__ import annotations

import json
import math
import os
import sqlite3
import statistics
from pathlib import Path

import numpy as np
import pytest

from accelbench.data.layouts import ImageLayout, SpeechLayout, TokenLayout, layout_of
from accelbench.errors import ConfigError
from accelbench.spec import RunSpec
from accelbench.workloads.registry import list_workloads
from tests.conftest import TESTS, run_cli, run_cli_many, seed_store

IMAGE_WORKLOADS = ("inception_v3", "resnet50", "vgg16", "vit")
TOKEN_WORKLOADS = ("bert", "llm", "lstm", "transformer")
SLEEPY = str(TESTS / "plugins" / "sleepy_data.py")
ITEM_SLEEP_S, STEP_SLEEP_S, BATCH = 0.025, 0.04, 2  # tests/plugins/sleepy_data.py's
QUICK = ("--size", "tiny", "--iterations", "3", "--no-energy", "--loader-workers", "0")


def _records(db: Path) -> list[dict]:
    with sqlite3.connect(db) as con:
        return [json.loads(j) for (j,) in con.execute("select record_json from results")]


def _data_env(tmp_path: Path) -> dict[str, str]:
    return {"ACCELBENCH_DATA_DIR": str(tmp_path / "data")}


def test_the_layouts_cover_exactly_the_image_and_token_workloads() -> None:
    """The training test below is parametrised over these (speech: tests/test_data_speech.py):
    a new workload with a layout must join it, one without is refused in one line."""
    images, tokens, speech, refused = [], [], [], []
    for wl in list_workloads():
        name = wl.name
        if not type(wl).__module__.startswith("accelbench."):
            continue  # a test plugin another test in this process loaded
        try:
            layout = layout_of(wl, "tiny")
        except ConfigError as exc:
            assert str(exc).count("\n") == 0 and "use --data synthetic" in str(exc)
            refused.append(name)
            continue
        (images if isinstance(layout, ImageLayout) else tokens if
         isinstance(layout, TokenLayout) else speech).append(name)
        assert isinstance(layout, (ImageLayout, TokenLayout, SpeechLayout))
    assert tuple(sorted(images)) == IMAGE_WORKLOADS
    assert tuple(sorted(tokens)) == TOKEN_WORKLOADS
    assert speech == ["deepspeech2"] and refused == []


def test_every_image_and_token_workload_trains_on_generated_data(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    env = _data_env(tmp_path)
    names = IMAGE_WORKLOADS + TOKEN_WORKLOADS
    done = run_cli_many([(("run", w, *QUICK, "--data", "generated", "--json"), env)
                         for w in names], db=db, workers=4)
    for name, p in zip(names, done, strict=True):
        assert p.returncode == 0, (name, p.stderr[-2000:])
        summary = json.loads(p.stdout)
        assert summary["input_source"] == "generated" and summary["loader_workers"] == 0
        assert 0 < summary["input_stall_fraction"] < 1
    records = {r["spec"]["workload"]: r for r in _records(db)}
    assert sorted(records) == sorted(names)
    for name, r in records.items():
        assert r["status"] == "ok" and math.isfinite(r["final_loss"]), name
        inp = r["input"]
        assert inp["source"] == "generated" and inp["loader_workers"] == 0
        assert len(inp["wait_s"]) == r["stats"]["n"] == 3
        assert all(w >= 0 for w in inp["wait_s"])
        # The step time includes the wait: each measured step lasted at least its wait.
        assert all(t >= w for t, w in zip(r["iteration_times_s"], inp["wait_s"], strict=True))
        assert r["spec"]["data"] == "generated" and r["spec"]["loader_workers"] == 0
        assert Path(inp["path"]).parent == tmp_path / "data"
    layouts = {records[n]["input"]["layout"] for n in IMAGE_WORKLOADS}
    assert layouts == {"imagefolder"}
    assert {records[n]["input"]["layout"] for n in TOKEN_WORKLOADS} == {"token_shards"}
    # Written once per layout and size: the cnn workloads at 64 px share nothing else.
    folders = sorted(p.name for p in (tmp_path / "data").iterdir() if not p.name.startswith("."))
    assert "tokens-v128-tiny" in folders and "images-64px-10c-tiny" in folders


def test_data_generate_refuses_a_folder_it_cannot_use(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "mine.txt").write_text("x")
    (tmp_path / "afile").write_text("x")
    for out, said in ((tmp_path / "taken", "is not a dataset accelbench generated"),
                      (tmp_path / "afile" / "d", "cannot write a dataset in")):
        p = run_cli("data", "generate", "lstm", "--size", "tiny", "--out", str(out))
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and said in p.stderr, p.stderr
    assert sorted(f.name for f in (tmp_path / "taken").iterdir()) == ["mine.txt"]


def test_data_generate_writes_the_layout_and_says_its_size(tmp_path: Path) -> None:
    img, tok = tmp_path / "img", tmp_path / "tok"
    p1, p2 = run_cli_many([(("data", "generate", "vgg16", "--size", "tiny", "--out", str(img)),
                            {}),
                           (("data", "generate", "llm", "--size", "tiny", "--out", str(tok)),
                            {})])
    assert p1.returncode == 0 and p2.returncode == 0, (p1.stderr, p2.stderr)
    classes = sorted(d.name for d in img.iterdir() if d.is_dir())
    assert classes == [f"class_{c:03d}" for c in range(10)]
    jpegs = list(img.glob("class_*/*.jpg"))
    assert len(jpegs) == 256
    from PIL import Image

    with Image.open(jpegs[0]) as im:
        assert im.format == "JPEG" and im.size == (32, 32)  # vgg16 tiny's resolution
    size = sum(f.stat().st_size for f in img.rglob("*") if f.is_file())
    from accelbench.render import fmt_bytes

    assert f"{fmt_bytes(size)} on disk" in p1.stdout and "256 images" in p1.stdout
    assert "writing vgg16 tiny: 256/256 images" in p1.stderr
    meta = json.loads((tok / "meta.json").read_text())
    assert meta["dtype"] == "uint16" and meta["tokens"] == 65536
    tokens = np.fromfile(tok / meta["shards"][0], dtype="<u2")
    assert tokens.size == 65536 and tokens.max() < 127  # the last id is bert's mask token
    tok_size = sum(f.stat().st_size for f in tok.rglob("*") if f.is_file())
    assert "65536 tokens" in p2.stdout and f"{fmt_bytes(tok_size)} on disk" in p2.stdout
    again = run_cli("data", "generate", "llm", "--size", "tiny", "--out", str(tok))
    assert again.returncode == 0 and "already there" in again.stdout


def _user_images(root: Path) -> Path:
    """A user's own ImageFolder: two classes of PNG and JPEG files of assorted sizes."""
    from PIL import Image

    rng = np.random.default_rng(1)
    for c, (w, h) in enumerate([(80, 50), (41, 97)]):
        (root / f"kind{c}").mkdir(parents=True)
        for i in range(6):
            pixels = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / f"kind{c}" / f"{i}.{'png' if i % 2 else 'jpg'}")
    return root


def _user_tokens(root: Path) -> Path:
    """A user's own uint32 shards (nanoGPT's layout) with meta.json, for lstm's vocab 100."""
    root.mkdir(parents=True)
    rng = np.random.default_rng(2)
    for i in range(2):
        rng.integers(0, 100, 5000).astype("<u4").tofile(root / f"train_{i}.bin")
    (root / "meta.json").write_text(json.dumps({"dtype": "uint32", "vocab_size": 100}))
    return root


def test_a_user_path_in_each_layout_trains(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    images, tokens = _user_images(tmp_path / "imgs"), _user_tokens(tmp_path / "toks")
    done = run_cli_many([
        (("run", "resnet50", *QUICK[:-2], "--loader-workers", "1", "--data", str(images)), {}),
        (("run", "lstm", *QUICK, "--data", str(tokens)), {}),
    ], db=db)
    for p in done:
        assert p.returncode == 0, p.stderr[-2000:]
        assert "input         path, " in p.stdout and "stall" in p.stdout
    records = {r["spec"]["workload"]: r for r in _records(db)}
    img, tok = records["resnet50"], records["lstm"]
    assert img["input"]["path"] == str(images) and img["input"]["samples"] == 12
    assert img["input"]["loader_workers"] == 1 and img["input"]["layout"] == "imagefolder"
    assert tok["input"]["path"] == str(tokens) and tok["input"]["layout"] == "token_shards"
    assert tok["input"]["samples"] == 2 * (5000 // 9)  # windows of seq 8 + the next token
    assert all(math.isfinite(r["final_loss"]) and r["input"]["source"] == "path"
               for r in (img, tok))


def _bad_paths(root: Path) -> list[tuple[str, str, str]]:
    """(workload, PATH, what the one line must say) for datasets that do not fit."""
    from PIL import Image

    (root / "empty").mkdir(parents=True)
    (root / "afile").write_text("x")
    (root / "corrupt" / "c0").mkdir(parents=True)
    (root / "corrupt" / "c0" / "a.jpg").write_bytes(b"not a jpeg")
    (root / "noimages" / "c0").mkdir(parents=True)
    (root / "noimages" / "c0" / "notes.txt").write_text("x")
    for c in range(11):  # resnet50 tiny has 10 classes
        (root / "many" / f"c{c}").mkdir(parents=True)
        Image.new("RGB", (8, 8)).save(root / "many" / f"c{c}" / "a.png")
    toks = root / "toks"
    toks.mkdir()
    np.full(100, 500, dtype="<u2").tofile(toks / "a.bin")  # ids beyond lstm's vocab 100
    (root / "short").mkdir()
    np.zeros(5, dtype="<u2").tofile(root / "short" / "a.bin")  # fewer than one window
    (root / "odd").mkdir()
    (root / "odd" / "a.bin").write_bytes(b"\x00" * 101)
    (root / "dtype").mkdir()
    np.zeros(100, dtype="<u2").tofile(root / "dtype" / "a.bin")
    (root / "dtype" / "meta.json").write_text(json.dumps({"dtype": "float32"}))
    cases = [
        ("resnet50", str(root / "missing"), "no such file or directory"),
        ("resnet50", str(root / "afile"), "not a directory"),
        ("resnet50", str(root / "empty"), "no class folders"),
        ("lstm", str(root / "empty"), "no .bin token shards"),
        ("resnet50", str(root / "corrupt"), "c0/a.jpg is not a readable image"),
        ("resnet50", str(root / "noimages"), "hold no images"),
        ("resnet50", str(root / "many"), "11 class folders, more than the model's 10"),
        ("resnet50", str(toks), "no class folders"),  # tokens for an image model
        ("lstm", str(root / "many"), "no .bin token shards"),  # images for a token model
        ("lstm", str(toks), "token ids up to 500, beyond the model's vocabulary"),
        ("lstm", str(root / "short"), "fewer than one sample's 9"),
        ("lstm", str(root / "odd"), "not whole 2-byte tokens"),
        ("lstm", str(root / "dtype"), "meta.json dtype 'float32'"),
    ]
    if os.geteuid() != 0:  # root reads whatever the modes say: no unreadable folder for it
        (root / "locked").mkdir()
        (root / "locked").chmod(0)
        cases.append(("resnet50", str(root / "locked"), "not readable"))
    return cases


def test_bad_paths_are_refused_in_one_line_and_nothing_is_written(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    seed_store(db)
    before = db.read_bytes()
    cases = _bad_paths(tmp_path / "bad")
    more = [("resnet50", ("--loader-workers", "2"), "needs --data generated or a PATH"),
            ("resnet50", ("--data", "generated", "--batch-size", "300"),
             "256 samples, fewer than one batch of 300")]
    calls = [(("run", w, "--size", "tiny", "--no-energy", "--data", path), _data_env(tmp_path))
             for w, path, _ in cases]
    calls += [(("run", w, "--size", "tiny", "--no-energy", *extra), _data_env(tmp_path))
              for w, extra, _ in more]
    done = run_cli_many(calls, db=db)
    for (call, _env), p, said in zip(calls, done, [c[2] for c in cases + more], strict=True):
        assert p.returncode == 2, (call, p.stderr)
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("accelbench: error: "), (call, lines)
        assert said in lines[0], (call, lines[0])
        assert p.stdout == ""
    assert db.read_bytes() == before
    assert not (tmp_path / "data").exists()  # nothing generated for a refused case


def _sleepy_run(db: Path, workers: int) -> dict:
    p = run_cli("--plugin", SLEEPY, "run", "sleepy_data", "--size", "tiny", "--data",
                "generated", "--loader-workers", str(workers), "--iterations", "20",
                "--no-energy", db=db)
    assert p.returncode == 0, p.stderr[-2000:]
    [record] = [r for r in _records(db) if r["spec"]["loader_workers"] == workers]
    return record


def test_the_wait_is_the_datasets_injected_delay_and_workers_hide_it(tmp_path: Path) -> None:
    """A dataset sleeping ITEM_SLEEP_S per sample, a step computing STEP_SLEEP_S: with 0
    workers each step waits for the whole batch (delay x batch size); with 4 workers the
    batches are ready before the step asks (4 x 40 ms of compute hide a 50 ms batch)."""
    text = Path(SLEEPY).read_text()  # the plugin's constants (importing it would register it)
    assert f"ITEM_SLEEP_S = {ITEM_SLEEP_S}\n" in text and f"BATCH = {BATCH}\n" in text
    assert f"STEP_SLEEP_S = {STEP_SLEEP_S}\n" in text
    db = tmp_path / "r.db"
    injected = ITEM_SLEEP_S * BATCH
    serial = _sleepy_run(db, 0)["input"]
    median = statistics.median(serial["wait_s"])
    assert serial["wait_median_s"] == pytest.approx(median)
    assert 0.99 * injected <= median <= 1.25 * injected, (median, injected)
    assert serial["wait_median_ci95_s"][0] <= median <= serial["wait_median_ci95_s"][1]
    # The wait is in the step: its share is about delay / (delay + compute), at least.
    assert serial["stall_fraction"] > 0.8 * injected / (injected + 2 * STEP_SLEEP_S)
    hidden = _sleepy_run(db, 4)["input"]
    # Hidden: well under the injected delay (median 16 ms of 50 ms at a load of 25, where
    # four workers share two cores with the rest; about 1 ms when quiet).
    assert statistics.median(hidden["wait_s"]) < 0.5 * injected
    assert hidden["stall_fraction"] < 0.5 * serial["stall_fraction"]


def test_synthetic_data_leaves_the_spec_and_its_key_as_before() -> None:
    spec = RunSpec(workload="resnet50", size="tiny", batch_size=4)
    data = spec.to_dict()
    assert "data" not in data and "loader_workers" not in data
    assert RunSpec.from_dict(data) == spec
    # The key of a synthetic case is the one every earlier accelbench computed.
    import hashlib

    ident = {"workload": "resnet50", "size": "tiny", "batch_size": 4, "precision": "fp32",
             "device": "cpu", "framework": "torch", "threads": None}
    old = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]
    assert spec.case_key() == old
    real = RunSpec(workload="resnet50", size="tiny", batch_size=4, data="generated",
                   loader_workers=2)
    assert real.case_key() != old and RunSpec.from_dict(real.to_dict()) == real


def test_the_api_takes_data_and_loader_workers_as_keywords(tmp_path: Path) -> None:
    import accelbench
    from accelbench import api
    from accelbench.spec import DEFAULT_LOADER_WORKERS, max_threads

    case = api.plan_run("llm", size="tiny", data="generated", check_hardware=False)
    assert case.spec.data == "generated"
    assert case.spec.loader_workers == min(max_threads(), DEFAULT_LOADER_WORKERS)
    tokens = _user_tokens(tmp_path / "toks")
    [result] = api.run_repeats("lstm", size="tiny", data=str(tokens), loader_workers=0,
                                      iterations=3, energy=False, store=False)
    assert result.status == "ok" and result.input is not None
    assert result.input.source == "path" and len(result.input.wait_s) == 3
    assert result.spec.data == str(tokens) and math.isfinite(result.final_loss or math.nan)
    with pytest.raises(ConfigError, match="no such file or directory"):
        api.plan_run("resnet50", size="tiny", data=str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match="not built for sweeps yet"):
        accelbench.sweep("resnet50", accelbench.RunChoices(size="tiny", data="generated"),
                         power_limits="200")
    assert not (tmp_path / "nope").exists()
