"""Run one function in an isolated child process, the way ``run`` runs a case.

Commands other than ``run`` also execute code that may crash, hang or exit:
``list`` counts FLOPs by building the models, ``roofline --model`` profiles
training steps, ``peaks`` and ``ops`` run kernels. Any of them, done in the CLI
process, would take the command down with it (a segfault exits 139, a hang never
returns). Here a ``"module:function"`` is called with JSON keyword arguments in
a fresh ``python -m accelbench.isolation.isolate`` child, or one forked by the warm
server of the framework it runs (``warm=``, as a case's worker is):

* in its own session (its process group is killed on timeout, grandchildren too),
  with ``PR_SET_PDEATHSIG`` so that it dies with the parent;
* answers travel on a private channel (a duplicate of the child's stdout; its
  fd 1 is pointed at stderr, so whatever the code prints cannot corrupt them);
* its stderr goes to a temporary log file, removed at the end, whose last line
  goes into the error when the child dies without answering;
* plugins are loaded first, after the framework's ``prepare_process`` where a
  run spec is given.

:func:`call` returns the function's JSON-able return value; :func:`stream`
yields each item of a generator function, with the timeout applying to each
item. Failures raise :class:`IsolatedError` (a :class:`WorkerError`) with a
one-line message; an :class:`AccelbenchError` raised inside the child is raised
again, same class and message, in the parent (a bad workload is still exit 2).
"""

from __future__ import annotations

import importlib
import json
import os
import queue
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

from accelbench.backends.startup import start_case
from accelbench.errors import WorkerError
from accelbench.isolation import channel, child
from accelbench.workloads.registry import load_plugin

FailureKind = Literal["timeout", "crash", "raised"]

_MESSAGE_CHARS = 300


class IsolatedError(WorkerError):
    """An isolated child timed out, died without answering, or raised.

    Attributes:
        detail: The message without the ``what`` prefix (``timed out after 5 s``).
        kind: ``timeout``, ``crash`` (killed by a signal or exited) or ``raised``.
        stderr_tail: The end of the child's stderr (for a stored record, never printed whole).
    """

    def __init__(self, what: str, detail: str, *, kind: FailureKind, stderr_tail: str = ""
                 ) -> None:
        super().__init__(f"{what}: {detail}")
        self.what = what
        self.detail = detail
        self.kind: FailureKind = kind
        self.stderr_tail = stderr_tail


def _one_line(text: str, limit: int = _MESSAGE_CHARS) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _raise_from_child(what: str, msg: dict[str, Any], tail: str) -> None:
    """Raise again, in the parent, what the function raised in the child."""
    cls_name, module = str(msg.get("cls", "")), str(msg.get("module", ""))
    message = _one_line(str(msg.get("message", "")))
    cls = child.accelbench_error(module, cls_name)
    if cls is not None:
        raise cls(message)
    raise IsolatedError(what, f"{cls_name}: {message}" if message else cls_name,
                        kind="raised", stderr_tail=tail)


def _request(target: str, kwargs: Mapping[str, Any] | None, *, stream: bool,
             plugins: Sequence[str], spec: Mapping[str, Any] | None) -> dict[str, Any]:
    """What the child is asked: the function, its arguments, what to import first."""
    return {
        "target": target, "kwargs": dict(kwargs or {}), "stream": stream,
        "plugins": list(plugins), "spec": dict(spec) if spec else None,
        "parent_pid": os.getpid(),
    }


def _session(
    request: dict[str, Any],
    *,
    what: str,
    timeout_s: float,
    env: Mapping[str, str] | None,
    warm: str | None,
) -> Iterator[dict[str, Any]]:
    """Start the child on ``request`` and yield its ``item``/``result`` messages; raise on
    any failure."""
    from accelbench import jsonout

    proc, err_path = child.spawn("accelbench.isolation.isolate",
                                 log_prefix="accelbench-isolated-", env=env, warm=warm)
    try:
        assert proc.stdout is not None  # noqa: S101 - Popen contract
        child.send_request(proc, jsonout.dumps(request))
        q: child.Messages = queue.Queue()
        threading.Thread(target=child.read_messages, args=(proc.stdout, q),
                         daemon=True).start()
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                child.kill_group(proc)
                proc.wait()
                raise IsolatedError(what, f"timed out after {timeout_s:g} s",
                                    kind="timeout", stderr_tail=child.tail(err_path))
            try:
                msg = q.get(timeout=min(0.5, remaining))
            except queue.Empty:
                continue
            if msg is None:  # the channel closed without a final answer
                child.reap(proc, grace_s=10)
                tail = child.tail(err_path)
                last = child.last_line(tail)
                how = child.how_it_died(proc.returncode)
                if not how.startswith("killed"):
                    how += " without an answer"
                raise IsolatedError(
                    what, f"worker {how}" + (f": {_one_line(last)}" if last else ""),
                    kind="crash", stderr_tail=tail)
            kind = msg.get("type")
            if kind == "error":
                _raise_from_child(what, msg, child.tail(err_path))
            elif kind == "item":
                yield msg
                deadline = time.monotonic() + timeout_s  # the timeout is per item
            elif kind in ("result", "done"):
                yield msg
                return
    finally:
        child.reap(proc, grace_s=5)  # it is exiting after its answer
        child.remove_log(err_path)


def call(
    target: str,
    kwargs: Mapping[str, Any] | None = None,
    *,
    what: str,
    timeout_s: float,
    plugins: Sequence[str] = (),
    spec: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    warm: str | None = None,
) -> Any:
    """``target(**kwargs)`` (``"package.module:function"``) in an isolated child.

    Args:
        target: The function, as ``module:function``; it must return JSON-able data.
        kwargs: Its keyword arguments (JSON-able).
        what: What the user asked for, the prefix of every error message
            (``"roofline --model resnet50"``).
        timeout_s: Wall-clock limit of the whole call.
        plugins: Plugin modules or files to import first.
        spec: A :class:`~accelbench.spec.RunSpec` as a dict: its framework's
            ``prepare_process`` runs before the plugins are imported.
        env: Extra environment variables of the child.
        warm: The framework the function runs: its child is forked by that framework's
            warm server (:mod:`accelbench.isolation.forkserver`, the framework already
            imported, started once per process), with the same isolation; None (or
            ``env``) starts a fresh interpreter.

    Raises:
        IsolatedError: timeout, crash, or an exception that is not accelbench's.
        AccelbenchError: the same class the function raised.
    """
    request = _request(target, kwargs, stream=False, plugins=plugins, spec=spec)
    for msg in _session(request, what=what, timeout_s=timeout_s, env=env, warm=warm):
        if msg.get("type") == "result":
            return msg.get("value")
    raise IsolatedError(what, "the worker gave no answer", kind="crash")  # pragma: no cover


def stream(
    target: str,
    kwargs: Mapping[str, Any] | None = None,
    *,
    what: str,
    timeout_s: float,
    plugins: Sequence[str] = (),
    spec: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    warm: str | None = None,
) -> Iterator[Any]:
    """Each item a generator function ``target(**kwargs)`` yields, from an isolated child.

    ``timeout_s`` applies to each item (from the start, or from the previous item);
    ``warm`` as in :func:`call`.
    Items already yielded stay valid when a later one fails; the caller knows which
    one was being produced. Stopping the iteration early kills the child.
    """
    request = _request(target, kwargs, stream=True, plugins=plugins, spec=spec)
    for msg in _session(request, what=what, timeout_s=timeout_s, env=env, warm=warm):
        if msg.get("type") == "item":
            yield msg.get("value")


# --------------------------------------------------------------------------- child side


def _resolve(target: str) -> Any:
    module, _, name = target.partition(":")
    if not module or not name:
        raise ValueError(f"target must be 'module:function', got {target!r}")
    return getattr(importlib.import_module(module), name)


def main() -> int:
    """Child side: run the requested function and send its answer on the private channel."""
    send = channel.Channel().send

    request = json.loads(sys.stdin.read())
    channel.die_with_parent(int(request.get("parent_pid", os.getppid())))
    try:
        spec = request.get("spec")
        plugins = request.get("plugins") or []
        if spec:
            start_case(spec, plugins)  # the framework is prepared before a plugin imports it
        else:
            for origin in plugins:
                load_plugin(origin)
        value = _resolve(request["target"])(**request.get("kwargs") or {})
        if request.get("stream"):
            for item in value:
                send("item", value=item)
            send("done")
        else:
            send("result", value=value)
    except BaseException as exc:  # the parent needs an answer for every outcome
        traceback.print_exc(file=sys.stderr)
        send("error", cls=type(exc).__name__, module=type(exc).__module__,
             message=str(exc).strip())
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
