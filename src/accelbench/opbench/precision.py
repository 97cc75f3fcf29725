"""The operator (GEMM) precision a training precision is bounded by: what the backends'
operator sides, the runner (:mod:`accelbench.execution.opbench`) and the roofline share."""

from __future__ import annotations

from accelbench.errors import ConfigError

#: Training precision of accelbench -> the GEMM format whose peak bounds it.
TRAINING_TO_OP_PRECISION: dict[str, str] = {
    "fp32": "fp32",
    "tf32": "tf32",
    "amp_fp16": "fp16",
    "amp_bf16": "bf16",
    "fp16": "fp16",
    "bf16": "bf16",
}


def op_precision(precision: str) -> str:
    """Map a training or operator precision to the operator/GEMM precision.

    ``amp_fp16`` maps to ``fp16`` and ``amp_bf16`` to ``bf16``: mixed-precision
    training is bounded by the half-precision GEMM peak.

    Raises:
        ConfigError: unknown precision.
    """
    try:
        return TRAINING_TO_OP_PRECISION[precision]
    except KeyError:
        raise ConfigError(
            f"unknown precision {precision!r}; choose one of fp32, tf32, fp16, bf16"
        ) from None
