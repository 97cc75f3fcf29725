"""Output files and folders of every command (``export``, ``report``, ``roofline``, and
the sinks' targets: ``--mllog``, ``--mlflow``'s store, W&B's folder): never written over
by surprise, never half written, never the results store, never a special file.

- :func:`check_target`: THE check every path accelbench writes goes through: the results
  store (through symbolic and hard links) and anything but a regular file or a folder (a
  device, a FIFO, a socket) are refused, whatever ``--force`` says.
- :func:`store_of_uri`: the SQLite file of a ``sqlite:///`` URL (another tool's store,
  e.g. MLflow's), for :func:`check_target`.
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
import stat
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


def kind_of(path: Path) -> str | None:
    """What ``path`` is when it is neither a regular file nor a directory (links
    followed): ``a character device``, ``a FIFO`` ...; None for those two or nothing."""
    try:
        mode = os.stat(path).st_mode
    except OSError:  # missing (or a dangling link: writing creates its target)
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    for test, name in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "a special file"


def check_target(target: Path, *, protected: Sequence[Path] = (), flag: str = "--out",
                 folder: bool = False) -> None:
    """Refuse a path accelbench is about to write (a file, or with ``folder`` a folder it
    writes into) that is, or holds, a ``protected`` file (the results store; symbolic and
    hard links seen through), or that is no regular file or folder (a device such as
    ``/dev/full``, a FIFO, a socket): only regular files are ever replaced or appended to.
    ``--force`` changes none of this.

    Raises:
        ConfigError: one line naming ``flag``, the path and the way out.
    """
    force = ", even with --force" if flag == "--out" else ""
    for keep in protected:
        inside = folder and _holds(target, keep)
        if same_file(target, keep) or inside:
            what = "holds" if inside else "is"
            raise ConfigError(f"{flag} {target} {what} the results store {keep}; choose "
                              f"another {flag} (nothing is ever written over the store{force})")
    kind = kind_of(target)
    if kind is not None:
        raise ConfigError(f"{flag} {target} is {kind}, not a regular file; choose another "
                          f"{flag} (only regular files are written{force})")


def _holds(folder: Path, keep: Path) -> bool:
    try:
        return folder.resolve() in keep.resolve().parents
    except (OSError, RuntimeError):
        return False


def store_of_uri(uri: str) -> Path | None:
    """The file a ``sqlite:`` URL names (None for any other URL, or an in-memory one), as
    :func:`check_target` takes it."""
    from accelbench.store.base import local_file_of

    return local_file_of(uri) if uri.lower().startswith("sqlite:") else None


def _refuse_store(target: Path, protected: Sequence[Path]) -> None:
    check_target(target, protected=protected)


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
    for path in paths:  # the last line of defence: a device or FIFO is never replaced
        check_target(path)
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
