"""Operator benchmarks: matmul, conv2d, an LSTM layer and attention.

:mod:`~accelbench.opbench.formulas` holds the FLOP and minimum-byte formulas,
:mod:`~accelbench.opbench.cases` the shapes (the paper's by default),
:mod:`~accelbench.opbench.run` runs cases in-process with the common
measurement loop. Importing this package does not import torch.
"""

from accelbench.opbench.cases import OP_NAMES, PAPER_CONV_SHAPES, OpCase, default_cases
from accelbench.opbench.result import OpResult
from accelbench.opbench.run import op_precision, op_precisions, run_case, run_cases

__all__ = [
    "OP_NAMES",
    "PAPER_CONV_SHAPES",
    "OpCase",
    "OpResult",
    "default_cases",
    "op_precision",
    "op_precisions",
    "run_case",
    "run_cases",
]
