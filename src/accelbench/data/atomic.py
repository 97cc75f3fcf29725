"""A dataset folder written whole or not at all: every dataset accelbench writes (``data
generate``'s and ``--data generated``'s, and the to-target datasets of ``train``).

The folder is written into a temporary folder beside its final place and renamed into place
when complete, so a folder that exists is whole: it holds its ``marker`` file, written last,
and only a marker that is a regular file counts. Of two processes writing the same folder
at once, both finish; one rename wins and the other's copy is removed.

Only a missing folder, or an empty real folder, is ever replaced: anything else at the
target (a file, a link, a folder with something in it) is refused in one line and left as
it was.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from accelbench.errors import ConfigError


def is_complete(target: Path, marker: str) -> bool:
    """Whether ``target`` holds its ``marker`` as a regular file (a whole dataset)."""
    return (target / marker).is_file()


def _replaceable(target: Path) -> bool:
    """Missing, or an empty folder that is no link."""
    if target.is_symlink():
        return False
    if not target.exists():
        return True
    return target.is_dir() and not any(target.iterdir())


def write_atomically(target: Path, write: Callable[[Path], None], *, marker: str,
                     taken: str, unwritable: str) -> bool:
    """``write(tmp)`` (which writes ``marker`` last) into a temporary folder beside
    ``target``, renamed into place when complete. Returns whether this call's copy is the
    one in place (False: ``target`` was complete already, or another writer finished
    first).

    Raises:
        ConfigError: ``target`` is taken (``taken`` says what by whom, e.g. "is not a
            dataset accelbench generated"), or its parent cannot be written (``unwritable``:
            what to set instead).
    """
    if is_complete(target, marker):
        return False
    if not _replaceable(target):
        raise ConfigError(f"{target} exists and {taken}; choose an empty or new folder")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    except OSError as exc:
        raise ConfigError(f"cannot write a dataset in {target.parent}: {exc.strerror} "
                          f"({unwritable})") from None
    try:
        write(tmp)
        if target.is_dir() and not target.is_symlink():
            target.rmdir()  # empty (checked above); a file written since makes this fail
        os.replace(tmp, target)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if is_complete(target, marker):  # another process finished it first
            return False
        raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return True
