"""Operator benchmarks: matmul, conv2d, an LSTM layer and attention.

:mod:`~accelbench.opbench.formulas` holds the FLOP and minimum-byte formulas,
:mod:`~accelbench.opbench.cases` the shapes (the paper's by default),
:mod:`~accelbench.opbench.precision` the GEMM precision a training precision maps to;
:mod:`accelbench.execution.opbench` runs cases (in-process, or in an isolated worker) with
the common measurement loop. Importing this package does not import torch.
"""

from accelbench.opbench.cases import OP_NAMES, PAPER_CONV_SHAPES, OpCase, default_cases
from accelbench.opbench.precision import op_precision
from accelbench.opbench.result import OpResult

__all__ = [
    "OP_NAMES",
    "PAPER_CONV_SHAPES",
    "OpCase",
    "OpResult",
    "default_cases",
    "op_precision",
]
