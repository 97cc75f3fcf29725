"""What ``ops``, ``peaks`` and ``roofline`` share: operator names, list types, number
formats, the store and the precisions of a device. Every measurement runs in an isolated
worker (:mod:`accelbench.isolation.isolate`); heavy imports happen inside the handlers.
"""


from __future__ import annotations

import argparse
from typing import Any

from accelbench.cli.args import (
    options_from_args,
    parse_int,
)

OPS = ("matmul", "conv2d", "lstm", "attention")



PASSES = ("forward", "forward_backward")



#: Largest matmul side or shape value accepted (2**20: a square fp32 matrix of 4 TiB).
MAX_DIM = 1 << 20
#: ``--device`` and ``--precision`` of ``ops`` and ``peaks``: one declaration, a field of
#: each command's options (``option(**OP_DEVICE)``).
OP_DEVICE: dict[str, Any] = {
    "default": "cpu", "flag": "--device", "nonempty": True, "fold": True, "track": True,
    "default_text": "", "help": "cpu, cuda:N, tpu:N"}
OP_PRECISIONS: dict[str, Any] = {
    "default": (), "flag": "--precision", "many": True, "nonempty": True, "fold": True,
    "help": "fp32, tf32, fp16, bf16 (repeatable; default: all the device supports)"}



#: Largest bandwidth copy buffer (MiB).
MAX_COPY_MIB = 1 << 20



def int_list(text: str) -> list[int]:
    try:
        values = [parse_int(v) for v in text.replace("x", ",").split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected integers separated by commas, got {text!r}"
        ) from None
    if not values or any(not 1 <= v <= MAX_DIM for v in values):
        raise argparse.ArgumentTypeError(
            f"expected integers between 1 and {MAX_DIM}, got {text!r}")
    return values



def mnk(text: str) -> tuple[int, int, int]:
    values = int_list(text)
    if len(values) != 3:
        raise argparse.ArgumentTypeError(f"--mnk takes M,N,K, got {text!r}")
    return values[0], values[1], values[2]



def policy_from_args(args: argparse.Namespace, base: Any = None) -> Any:
    from accelbench.spec import MeasurementPolicy

    return options_from_args(MeasurementPolicy, args, base)



def fmt_flops(value: float | None) -> str:
    from accelbench.roofline.plot import fmt_si

    return fmt_si(value, "FLOP/s")



def fmt_pct(value: float | None) -> str:
    return f"{value:.1f}%" if value is not None else "-"



def fmt_ms(value: float | None) -> str:
    if value is None:
        return "-"
    ms = value * 1e3
    return f"{ms:.3g}" if ms < 100 else f"{ms:,.0f}"



def open_store_of(args: argparse.Namespace, *, write: bool = False) -> Any:
    """The store of ``--db``; with ``write``, checked writable and sound before anything
    is measured (:meth:`~accelbench.store.db.Store.check_writable`)."""
    from accelbench.cli.store_args import store_named
    from accelbench.store import open_store

    # A read (ops --list, peaks, roofline without --model) never creates a named store.
    store = open_store(args.db, create=write or not store_named(args.db))
    if write:
        try:
            store.check_writable()
        except BaseException:
            store.close()
            raise
    return store



def op_precisions(device: str, requested: list[str], framework: str) -> list[str]:
    from accelbench.execution.opbench import check_op_precision, op_precisions
    from accelbench.opbench.precision import op_precision

    if not requested:
        return list(op_precisions(device, framework))
    out = []
    for p in requested:
        check_op_precision(device, p, framework)
        out.append(op_precision(p))
    return list(dict.fromkeys(out))


def check_op_device(args: argparse.Namespace) -> str:
    """``--device`` checked for ``--framework`` (one line, exit 2 when absent)."""
    from accelbench.isolation.ask import check_device

    return check_device(args.framework, args.device)
