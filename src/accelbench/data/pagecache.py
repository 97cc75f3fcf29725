"""A dataset's files in the page cache: read them all in (warm), drop their pages (cold),
and count how many of their pages are resident (``mincore(2)``, the evidence that a drop
or a warm-up took effect). Used by ``--input-analysis`` (:mod:`accelbench.data.analysis`).

Dropping uses ``fsync`` then ``posix_fadvise(POSIX_FADV_DONTNEED)`` on each file, which
needs no privilege and evicts a file's clean pages that no process has mapped; where it cannot
(no ``posix_fadvise`` on this platform, a file system that keeps files in memory such as
tmpfs, pages mapped by a live process), the count says so and the caller reports the
cold pass unavailable with the reason.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from collections.abc import Iterable
from pathlib import Path

#: Bytes read per call when warming a file.
CHUNK = 1 << 20


def dataset_files(root: str | Path) -> list[Path]:
    """Every regular file under ``root`` (the dataset's images or shards, its meta.json),
    in sorted order."""
    return sorted(p for p in Path(root).rglob("*") if p.is_file())


def warm(files: Iterable[Path]) -> int:
    """Read every file once from start to end (into the page cache); returns the bytes
    read."""
    total = 0
    for f in files:
        with open(f, "rb", buffering=0) as fh:
            while chunk := fh.read(CHUNK):
                total += len(chunk)
    return total


def drop(files: Iterable[Path]) -> str | None:
    """Ask the kernel to evict each file's pages (``POSIX_FADV_DONTNEED``); None when every
    call succeeded, else why not (one line)."""
    advise = getattr(os, "posix_fadvise", None)
    flag = getattr(os, "POSIX_FADV_DONTNEED", None)
    if advise is None or flag is None:
        return "this platform has no posix_fadvise(POSIX_FADV_DONTNEED)"
    for f in files:
        try:
            fd = os.open(f, os.O_RDONLY)
        except OSError as exc:
            return f"cannot open {f}: {exc.strerror}"
        try:
            os.fsync(fd)  # a page still to be written back is never evicted
            advise(fd, 0, 0, flag)
        except OSError as exc:
            return f"posix_fadvise(POSIX_FADV_DONTNEED) failed on {f}: {exc.strerror}"
        finally:
            os.close(fd)
    return None


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name, use_errno=True)
    except OSError:
        return None
    if not all(hasattr(libc, f) for f in ("mmap", "munmap", "mincore")):
        return None
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long)
    libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
    libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
    return libc


def resident(files: Iterable[Path]) -> tuple[int, int] | str:
    """(resident pages, pages) of the files, by ``mincore(2)`` on a read-only mapping of
    each (mapping a file reads none of it in), or why they cannot be counted."""
    libc = _libc()
    if libc is None:
        return "no mmap/mincore in this platform's C library"
    page = mmap.PAGESIZE
    have = total = 0
    failed = ctypes.c_void_p(-1).value
    for f in files:
        size = f.stat().st_size
        if size == 0:
            continue
        n = (size + page - 1) // page
        fd = os.open(f, os.O_RDONLY)
        try:
            addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
            if addr is None or addr == failed:
                return f"mmap of {f} failed: {os.strerror(ctypes.get_errno())}"
            try:
                vec = (ctypes.c_ubyte * n)()
                if libc.mincore(ctypes.c_void_p(addr), size, vec) != 0:
                    return f"mincore of {f} failed: {os.strerror(ctypes.get_errno())}"
                have += sum(b & 1 for b in vec)
                total += n
            finally:
                libc.munmap(ctypes.c_void_p(addr), size)
        finally:
            os.close(fd)
    return have, total


def resident_share(files: Iterable[Path]) -> float | str:
    """The share of the files' pages in the page cache (0-1), or why it cannot be read."""
    got = resident(files)
    if isinstance(got, str):
        return got
    have, total = got
    return have / total if total else 0.0
