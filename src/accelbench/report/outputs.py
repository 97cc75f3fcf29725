"""Output files and folders of every command (``export``, ``report``, ``roofline``):
never written over by surprise, never half written.

- :func:`check_out_files`: the files a command is about to write. One that is the
  results store is refused even with ``--force``; any other existing file unless
  ``--force``.
- :func:`check_out_dir`: a directory output. A file there, or the store, is refused; a
  non-empty directory unless ``--force``; with ``--force`` the files it writes are still
  checked against the store.
- :func:`atomic_write_text`, :func:`atomic_write_bytes`, :func:`atomic_paths`: each file
  is written to a temporary file in its own folder and renamed into place, so a write
  that fails (disk full, killed) leaves the old file as it was.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from accelbench.errors import ConfigError


def same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one existing file (links and ``..`` seen through)."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (or cannot be looked at)
        return False


def _refuse_store(target: Path, protected: Sequence[Path]) -> None:
    for keep in protected:
        if same_file(target, keep):
            raise ConfigError(f"{target} is the results store; choose another --out "
                              "(no output is ever written over its store, even with --force)")


def check_out_files(targets: Sequence[Path], *, protected: Sequence[Path] = (),
                    force: bool = False) -> None:
    """Refuse to write over what the user keeps: a ``protected`` file (the results store),
    whatever ``force`` says, and any existing file unless ``force``.

    Raises:
        ConfigError: one line naming the file and the way out.
    """
    for target in targets:
        _refuse_store(target, protected)
        if target.exists() and not force:
            kind = "a directory" if target.is_dir() else "an existing file"
            raise ConfigError(f"{target} is {kind}; choose another --out, or pass --force "
                              "to replace it")


def check_out_dir(out_dir: Path, files: Sequence[str] = (), *,
                  protected: Sequence[Path] = (), force: bool = False) -> None:
    """Refuse a directory output ``out_dir`` that is a file (or the store), or a non-empty
    directory unless ``force``; ``files`` (relative to ``out_dir``) are what the command
    writes there (``name/`` for a folder of its own), each refused when it is, or holds,
    the store, whatever ``force`` says.

    Raises:
        ConfigError: one line naming the path and the way out.
    """
    _refuse_store(out_dir, protected)
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"--out {out_dir} is a file, not a directory: choose a directory "
                          "(it is created if missing)")
    for name in files:
        if name.endswith("/"):  # a folder the command clears of its own old files
            folder = (out_dir / name).resolve()
            for keep in protected:
                if folder in keep.resolve().parents:
                    raise ConfigError(f"the results store {keep} is inside {out_dir / name}, "
                                      "which this command writes; choose another --out")
        else:
            _refuse_store(out_dir / name, protected)
    try:
        nonempty = out_dir.is_dir() and any(out_dir.iterdir())
    except OSError as exc:
        raise ConfigError(f"--out {out_dir} cannot be read: {exc.strerror or exc}") from None
    if nonempty and not force:
        raise ConfigError(f"--out {out_dir} is a directory that is not empty; choose another "
                          "--out, or pass --force to write into it (files of the same names "
                          "are replaced)")


def _mode_for(path: Path) -> int:
    """The permissions the file should have: the old file's, else what the umask allows
    (a temporary file starts private)."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


@contextmanager
def atomic_paths(paths: Sequence[Path]) -> Iterator[list[Path]]:
    """Temporary paths beside ``paths`` (same suffix, so writers that go by it still do),
    each renamed onto its path when the block ends without an error; removed otherwise."""
    temps: list[Path] = []
    try:
        for path in paths:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.",
                                        suffix=f".tmp{path.suffix}")
            os.close(fd)
            temps.append(Path(name))
            os.chmod(name, _mode_for(path))
        yield list(temps)
        for temp, path in zip(temps, paths, strict=True):
            os.replace(temp, path)
    finally:
        for temp in temps:
            temp.unlink(missing_ok=True)


def atomic_write_bytes(path: Path, blob: bytes) -> None:
    """Write ``blob`` to ``path`` through a temporary file renamed into place."""
    with atomic_paths([path]) as (tmp,):
        tmp.write_bytes(blob)


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` through a temporary file renamed into place, so a
    failed write leaves the old file as it was."""
    atomic_write_bytes(path, text.encode("utf-8"))
