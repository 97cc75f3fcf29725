"""Operator cases: what ``accelbench ops`` measures, at which shapes.

An :class:`OpCase` is one operator at one shape, precision and pass. The
default sets follow the paper: square GEMMs of 2048, 4096 and 8192, the three
ResNet-50 convolutions (NHWC, VALID padding), the LSTM workload's layer and
the Transformer's attention. Sizes ``small`` and ``tiny`` scale the GEMM side
and the convolution batch down for small machines; FLOPs are always computed
from the shape actually run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, get_args

from accelbench.errors import ConfigError
from accelbench.opbench import formulas as fm

OpName = Literal["matmul", "conv2d", "lstm", "attention"]
OP_NAMES: tuple[str, ...] = get_args(OpName)

#: Square GEMM sides per size; paper = the paper's 2048, 4096, 8192.
MATMUL_SIDES: Mapping[str, tuple[int, ...]] = MappingProxyType(
    {"tiny": (256, 512), "small": (1024, 2048), "paper": (2048, 4096, 8192)}
)


@dataclass(frozen=True)
class ConvShape:
    """An NHWC convolution, VALID padding: input (n, h, w, c_in), kernel kh x kw x c_in x c_out."""

    n: int
    h: int
    w: int
    c_in: int
    kh: int
    kw: int
    c_out: int
    stride: int


#: The paper's three ResNet-50 convolutions at their paper batch sizes.
PAPER_CONV_SHAPES: tuple[ConvShape, ...] = (
    ConvShape(n=256, h=224, w=224, c_in=3, kh=7, kw=7, c_out=64, stride=2),  # 5.72e10 FLOPs
    ConvShape(n=128, h=112, w=112, c_in=64, kh=3, kw=3, c_out=128, stride=1),  # 2.28e11
    ConvShape(n=256, h=56, w=56, c_in=128, kh=3, kw=3, c_out=256, stride=1),  # 4.40e11
)
#: Divisor of the paper batch per size (at least 1 image).
CONV_BATCH_DIVISOR: Mapping[str, int] = MappingProxyType({"tiny": 256, "small": 16, "paper": 1})

#: Operators whose forward+backward is benchmarked (a GEMM's backward is two GEMMs).
_FORWARD_ONLY = frozenset({"matmul"})


@dataclass(frozen=True)
class OpCase:
    """One operator at one shape, precision and pass.

    Attributes:
        op: ``matmul``, ``conv2d``, ``lstm`` or ``attention``.
        shape: The operator's dimensions (see :func:`flops_of`).
        precision: ``fp32``, ``tf32``, ``fp16`` or ``bf16``.
        pass_: ``forward`` or ``forward_backward``.
    """

    op: str
    shape: Mapping[str, int] = field(hash=False)
    precision: str = "fp32"
    pass_: str = "forward"

    def __post_init__(self) -> None:
        if self.op not in OP_NAMES:
            raise ConfigError(f"unknown operator {self.op!r}; choose one of {', '.join(OP_NAMES)}")
        if self.precision not in fm.OP_PRECISIONS:
            raise ConfigError(
                f"unknown operator precision {self.precision!r}; "
                f"choose one of {', '.join(fm.OP_PRECISIONS)}"
            )
        if self.pass_ not in fm.PASSES:
            raise ConfigError(f"unknown pass {self.pass_!r}; choose one of {', '.join(fm.PASSES)}")
        if self.pass_ != "forward" and self.op in _FORWARD_ONLY:
            raise ConfigError(f"{self.op} is benchmarked forward only")
        for key, value in self.shape.items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{self.op} {key} must be a positive integer, got {value!r}")
        object.__setattr__(self, "shape", MappingProxyType(dict(self.shape)))
        # Formulas validate the shape keys and geometry early, not inside a run.
        try:
            self.flops  # noqa: B018
        except (KeyError, ValueError) as exc:
            raise ConfigError(f"invalid {self.op} shape {dict(self.shape)}: {exc}") from exc

    @property
    def bytes_per_element(self) -> int:
        return fm.BYTES_PER_ELEMENT[self.precision]

    @property
    def flops(self) -> int:
        """FLOPs of one execution of the case."""
        return flops_of(self.op, self.shape, self.pass_)

    @property
    def min_bytes(self) -> int:
        """Minimum bytes moved by one execution (inputs read once, outputs written once)."""
        return min_bytes_of(self.op, self.shape, self.pass_, self.bytes_per_element)

    @property
    def intensity_flop_per_byte(self) -> float:
        return self.flops / self.min_bytes

    @property
    def shape_text(self) -> str:
        """Short human form of the shape."""
        s = self.shape
        if self.op == "matmul":
            return f"{s['m']}x{s['k']} @ {s['k']}x{s['n']}"
        if self.op == "conv2d":
            return (
                f"({s['n']},{s['h']},{s['w']},{s['c_in']}) * "
                f"{s['kh']}x{s['kw']}x{s['c_in']}x{s['c_out']} /{s['stride']}"
            )
        if self.op == "lstm":
            return (
                f"N={s['batch']} T={s['seq_len']} I={s['input_size']} H={s['hidden_size']}"
            )
        return (
            f"B={s['batch']} h={s['heads']} L={s['q_len']} S={s['kv_len']} d={s['head_dim']}"
        )

    @property
    def short_label(self) -> str:
        """A compact label for charts: ``conv 3x3/1 n1 bf16 fwd+bwd``."""
        s = self.shape
        if self.op == "matmul":
            dims = (f"N={s['m']}" if s["m"] == s["n"] == s["k"]
                    else f"{s['m']}x{s['n']}x{s['k']}")
            text = f"mm {dims}"
        elif self.op == "conv2d":
            text = f"conv {s['kh']}x{s['kw']}x{s['c_in']}x{s['c_out']}/{s['stride']} n{s['n']}"
        elif self.op == "lstm":
            text = f"lstm H={s['hidden_size']} n{s['batch']}"
        else:
            text = f"attn L={s['q_len']} d={s['head_dim']}"
        short = {"forward": "fwd", "forward_backward": "fwd+bwd"}[self.pass_]
        return f"{text} {self.precision} {short}"

    @property
    def label(self) -> str:
        """``op shape precision pass``, unique within a run."""
        short = {"forward": "fwd", "forward_backward": "fwd+bwd"}[self.pass_]
        return f"{self.op} {self.shape_text} {self.precision} {short}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "shape": dict(self.shape),
            "precision": self.precision,
            "pass": self.pass_,
        }


def flops_of(op: str, shape: Mapping[str, int], pass_: str) -> int:
    """FLOPs of operator ``op`` at ``shape`` for ``pass_``
    (see :mod:`accelbench.opbench.formulas`)."""
    s = shape
    if op == "matmul":
        return fm.matmul_flops(s["m"], s["n"], s["k"])
    if op == "conv2d":
        return fm.conv2d_flops(
            s["n"], s["h"], s["w"], s["c_in"], s["kh"], s["kw"], s["c_out"], s["stride"], pass_
        )
    if op == "lstm":
        return fm.lstm_layer_flops(
            s["batch"], s["seq_len"], s["input_size"], s["hidden_size"], pass_
        )
    if op == "attention":
        return fm.attention_flops(
            s["batch"], s["heads"], s["q_len"], s["kv_len"], s["head_dim"], pass_
        )
    raise ConfigError(f"unknown operator {op!r}")


def min_bytes_of(op: str, shape: Mapping[str, int], pass_: str, bytes_per_element: int) -> int:
    """Minimum bytes of operator ``op`` at ``shape`` for ``pass_``."""
    s, b = shape, bytes_per_element
    if op == "matmul":
        return fm.matmul_min_bytes(s["m"], s["n"], s["k"], b)
    if op == "conv2d":
        return fm.conv2d_min_bytes(
            s["n"], s["h"], s["w"], s["c_in"], s["kh"], s["kw"], s["c_out"], s["stride"], b, pass_
        )
    if op == "lstm":
        return fm.lstm_layer_min_bytes(
            s["batch"], s["seq_len"], s["input_size"], s["hidden_size"], b, pass_
        )
    if op == "attention":
        return fm.attention_min_bytes(
            s["batch"], s["heads"], s["q_len"], s["kv_len"], s["head_dim"], b, pass_
        )
    raise ConfigError(f"unknown operator {op!r}")


# --------------------------------------------------------------------------- shapes


def matmul_shape(m: int, n: int, k: int) -> dict[str, int]:
    return {"m": m, "n": n, "k": k}


def conv_shape(c: ConvShape, batch: int | None = None) -> dict[str, int]:
    return {
        "n": c.n if batch is None else batch, "h": c.h, "w": c.w, "c_in": c.c_in,
        "kh": c.kh, "kw": c.kw, "c_out": c.c_out, "stride": c.stride,
    }


def conv_shapes(size: str) -> list[dict[str, int]]:
    """The paper's conv shapes with the batch divided for ``size`` (at least 1)."""
    div = CONV_BATCH_DIVISOR[size]
    return [conv_shape(c, max(1, c.n // div)) for c in PAPER_CONV_SHAPES]


def lstm_shape(size: str) -> dict[str, int]:
    """The layer shape of the ``lstm`` workload at ``size``, at its default batch size.

    Read from the workload's framework-neutral configuration, so the operator
    follows any change of the workload.
    """
    from accelbench.workloads import get_workload
    from accelbench.workloads.lstm import LSTM_SIZES

    cfg = LSTM_SIZES[size]
    batch = get_workload("lstm").default_batch_sizes[size][0]
    return {"batch": batch, "seq_len": cfg.seq_len, "input_size": cfg.hidden,
            "hidden_size": cfg.hidden}


def attention_shape(size: str) -> dict[str, int]:
    """Self-attention of the ``transformer`` workload at ``size``, at its default batch.

    The batch counts sentence pairs (tokens // sequence length).
    """
    from accelbench.workloads import get_workload
    from accelbench.workloads.transformer import TRANSFORMER_SIZES

    cfg = TRANSFORMER_SIZES[size]
    tokens = get_workload("transformer").default_batch_sizes[size][0]
    return {"batch": tokens // cfg.seq_len, "heads": cfg.heads, "q_len": cfg.seq_len,
            "kv_len": cfg.seq_len, "head_dim": cfg.d_model // cfg.heads}


def _check_names(size: str, ops: Sequence[str], passes: Sequence[str]) -> None:
    """Refuse an unknown size, operator or pass (:class:`ConfigError`, the known ones)."""
    if size not in MATMUL_SIDES:
        raise ConfigError(f"unknown size {size!r}; choose one of {', '.join(MATMUL_SIDES)}")
    for op in ops:
        if op not in OP_NAMES:
            raise ConfigError(f"unknown operator {op!r}; choose one of {', '.join(OP_NAMES)}")
    for p in passes:
        if p not in fm.PASSES:
            raise ConfigError(f"unknown pass {p!r}; choose one of {', '.join(fm.PASSES)}")


def _shapes(size: str, ops: Sequence[str], extra_mnk: Sequence[tuple[int, int, int]],
            matmul_sides: Sequence[int] | None) -> dict[str, list[dict[str, int]]]:
    """The shapes of each operator of ``ops`` at ``size`` (the workloads' own layers)."""
    shapes: dict[str, list[dict[str, int]]] = {}
    if "matmul" in ops:
        sides = tuple(matmul_sides) if matmul_sides else MATMUL_SIDES[size]
        shapes["matmul"] = [matmul_shape(n, n, n) for n in sides]
        shapes["matmul"] += [matmul_shape(m, n, k) for m, n, k in extra_mnk]
    if "conv2d" in ops:
        shapes["conv2d"] = conv_shapes(size)
    if "lstm" in ops:
        shapes["lstm"] = [lstm_shape(size)]
    if "attention" in ops:
        shapes["attention"] = [attention_shape(size)]
    return shapes


def default_cases(
    size: str,
    precisions: Sequence[str],
    *,
    ops: Sequence[str] = OP_NAMES,
    passes: Sequence[str] = fm.PASSES,
    extra_mnk: Sequence[tuple[int, int, int]] = (),
    matmul_sides: Sequence[int] | None = None,
) -> list[OpCase]:
    """The operator cases of ``accelbench ops`` at ``size``.

    Args:
        size: ``tiny``, ``small`` or ``paper``.
        precisions: Operator precisions to run (``fp32``, ``tf32``, ``fp16``, ``bf16``).
        ops: Operators to include.
        passes: Passes to include (matmul is forward only).
        extra_mnk: Additional (M, N, K) GEMMs.
        matmul_sides: Replace the size's square GEMM sides.

    Raises:
        ConfigError: unknown size, operator, precision or pass.
    """
    _check_names(size, ops, passes)
    shapes = _shapes(size, ops, extra_mnk, matmul_sides)
    return [OpCase(op=op, shape=shape, precision=precision, pass_=p)
            for op in OP_NAMES for shape in shapes.get(op, []) for precision in precisions
            for p in passes if p == "forward" or op not in _FORWARD_ONLY]
