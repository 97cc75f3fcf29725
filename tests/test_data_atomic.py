"""The one writer of dataset folders (data/atomic.py): whole or not at all, a complete
folder left alone, and only a missing or empty real folder ever replaced."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelbench.data.atomic import write_atomically
from accelbench.errors import ConfigError

MARK = "done.json"


def _write(tmp: Path) -> None:
    (tmp / "a.bin").write_bytes(b"x")
    (tmp / MARK).write_text("{}")


def _put(target: Path) -> bool:
    return write_atomically(target, _write, marker=MARK, taken="is not ours",
                            unwritable="set X")


def test_written_whole_then_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "d"
    assert _put(target) and sorted(p.name for p in target.iterdir()) == ["a.bin", MARK]
    stamp = (target / MARK).stat().st_mtime_ns
    assert not _put(target)  # complete: not written again
    assert (target / MARK).stat().st_mtime_ns == stamp
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _put(empty) and (empty / MARK).is_file()  # an empty folder is replaced
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_failed_write_leaves_nothing(tmp_path: Path) -> None:
    def broken(tmp: Path) -> None:
        (tmp / "half.bin").write_bytes(b"x")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomically(tmp_path / "d", broken, marker=MARK, taken="t", unwritable="u")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("what", ["file", "full", "link", "marker-dir"])
def test_only_a_missing_or_empty_real_folder_is_replaced(tmp_path: Path, what: str) -> None:
    target = tmp_path / "d"
    if what == "file":
        target.write_text("mine")
    elif what == "full":
        target.mkdir()
        (target / "mine.txt").write_text("mine")
    elif what == "link":
        (tmp_path / "elsewhere").mkdir()
        target.symlink_to(tmp_path / "elsewhere")
    else:  # a marker that is no regular file does not make a folder complete
        (target / MARK).mkdir(parents=True)
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    with pytest.raises(ConfigError, match=r"exists and is not ours; choose an empty or new"):
        _put(target)
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


def test_an_unwritable_parent_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ConfigError, match=r"cannot write a dataset in .*afile: .* \(set X\)"):
        _put(tmp_path / "afile" / "d")
