"""Files that fail to decode while a case trains (the up-front check opens only the first
image of each class): each is counted, skipped (the next sample takes its place) and said
in the record (``input["skipped"]``) and in ``run``'s output; more than
:data:`MAX_SKIP_SHARE` of the dataset's files (at least one is always tolerated) stops
the case with status ``error`` and a one-line reason.

The loader's workers are separate processes: each failure is appended as one line to a
log file the feed's process reads (one ``write`` of a short line to a file opened with
``O_APPEND``, atomic on a local file system), so the count is the workers' together.
"""

from __future__ import annotations

import atexit
import contextlib
import math
import os
import tempfile
from typing import Any

from accelbench.errors import AccelbenchError

#: The share of a dataset's files that may fail to decode before the case stops.
MAX_SKIP_SHARE = 0.01
#: What a failed decode raises (Pillow: OSError for a truncated or unknown file,
#: SyntaxError/ValueError for some broken headers).
DECODE_ERRORS = (OSError, ValueError, SyntaxError)


class DataError(AccelbenchError):
    """Too many of a dataset's files failed to decode while the case trained."""


def limit_for(files: int) -> int:
    """Failed files tolerated in a dataset of ``files``: 1% of them, at least one."""
    return max(1, math.floor(MAX_SKIP_SHARE * files))


class SkipLog:
    """The failures of one case, one ``file<TAB>error`` line each, shared by processes."""

    def __init__(self) -> None:
        fd, self.path = tempfile.mkstemp(prefix="accelbench-skipped-", suffix=".log")
        os.close(fd)
        self._owner = os.getpid()
        atexit.register(self._remove)

    def _remove(self) -> None:
        if os.getpid() == self._owner:
            with contextlib.suppress(OSError):
                os.unlink(self.path)

    def add(self, name: str, exc: BaseException) -> None:
        text = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
        line = f"{name}\t{text}\n".encode(errors="replace")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def read(self) -> dict[str, str]:
        """Each failed file (in the order first seen) and its error."""
        out: dict[str, str] = {}
        try:
            with open(self.path, encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    name, _, err = line.rstrip("\n").partition("\t")
                    out.setdefault(name, err)
        except OSError:
            pass
        return out

    def size(self) -> int:
        try:
            return os.stat(self.path).st_size
        except OSError:
            return 0


class SkippingSet:
    """A map-style dataset of files (``inner.files[i][0]`` names sample i's file) whose
    samples that fail to decode are replaced by the next sample that does."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.files = inner.files
        self.limit = limit_for(len(inner))
        self.skips = SkipLog()

    def __len__(self) -> int:
        return len(self.inner)

    def __getitem__(self, index: int) -> Any:
        return self._first_good(index, self.inner.__getitem__)

    def sample(self, index: int, rng: Any) -> Any:
        """The framework-neutral form (:func:`accelbench.data.loader.sample_of`): sample
        ``index`` drawn with ``rng``, the next good one in its place where it fails."""
        return self._first_good(index, lambda j: self.inner.sample(j, rng))

    def _first_good(self, index: int, read: Any) -> Any:
        n = len(self.inner)
        for k in range(n):
            j = (index + k) % n
            try:
                return read(j)
            except DECODE_ERRORS as exc:
                self.skips.add(str(self.files[j][0]), exc)
                failed = self.skips.read()
                if len(failed) > self.limit:
                    raise DataError(stop_reason(failed, n, self.limit)) from None
        raise DataError(stop_reason(self.skips.read(), n, self.limit))

    def skipped(self) -> dict[str, Any]:
        """The record's ``input["skipped"]``: how many files failed, the first one and its
        error, and how many the case tolerates."""
        failed = self.skips.read()
        first = next(iter(failed.items()), None)
        out: dict[str, Any] = {"count": len(failed), "limit": self.limit,
                               "files": len(self.inner)}
        if first is not None:
            out["example"], out["error"] = first
        return out


def stop_reason(failed: dict[str, str], files: int, limit: int) -> str:
    """One line: how many files failed, the threshold, and one example."""
    name, err = next(iter(failed.items()), ("", ""))
    return (f"{len(failed)} of the dataset's {files} files failed to decode while training, "
            f"more than the {limit} ({MAX_SKIP_SHARE:.0%}, at least one) a case skips; "
            f"e.g. {name}: {err}; fix or remove them (--data PATH)")


def skipped_line(record: dict[str, Any] | None) -> str | None:
    """``2 files failed to decode and were skipped (at most 2 of 256 tolerated), e.g.
    PATH: error``: ``run``'s line, or None where nothing was skipped."""
    raw = (record or {}).get("skipped")
    if not isinstance(raw, dict) or not raw.get("count"):
        return None
    n = raw["count"]
    return (f"{n} file{'' if n == 1 else 's'} failed to decode and "
            f"{'was' if n == 1 else 'were'} skipped (the next sample in its place; at most "
            f"{raw.get('limit')} of {raw.get('files')} tolerated), e.g. {raw.get('example')}: "
            f"{raw.get('error')}")
