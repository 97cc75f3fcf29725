"""The child side of an isolated process: its private answer channel and its death with
its parent.

:class:`Channel`: the answers go on a duplicate of stdout, and fd 1 is pointed at stderr so
whatever user code prints cannot corrupt them. :func:`die_with_parent`
(``PR_SET_PDEATHSIG``): a parent killed with SIGKILL leaves no child running.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from typing import Any


class Channel:
    """JSON-lines messages to the parent on a private duplicate of stdout (strict JSON)."""

    def __init__(self) -> None:
        self._stream = os.fdopen(os.dup(1), "w", buffering=1)
        os.dup2(2, 1)  # fd 1 now points at stderr: what user code prints cannot corrupt us

    def send(self, kind: str, **payload: Any) -> None:
        from accelbench.jsonout import dumps

        self._stream.write(dumps({"type": kind, **payload}) + "\n")
        self._stream.flush()


_forked_from: int | None = None


def forked_from(server_pid: int) -> None:
    """This process was forked by the warm server ``server_pid`` for a parent that is not
    its own: :func:`die_with_parent` takes the server as the parent."""
    global _forked_from
    _forked_from = server_pid


def die_with_parent(parent_pid: int) -> None:
    """Ask the kernel to SIGKILL this process when its parent dies; exit now if it already
    has (the parent died between the fork and this call). A child of the warm server
    dies with the server, which dies with the parent."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except OSError:
            pass
    if os.getppid() not in (parent_pid, _forked_from):
        os._exit(1)
