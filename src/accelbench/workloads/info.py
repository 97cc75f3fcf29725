"""Descriptions of workloads for ``accelbench list``."""

from __future__ import annotations

import functools
from typing import Any

from accelbench.spec import SIZES, SizeName, check_size
from accelbench.workloads.registry import Workload


@functools.cache
def param_count(workload: Workload, size: SizeName) -> int:
    """Trainable parameters at ``size``, counted on the meta device (no memory used)."""
    import torch

    with torch.device("meta"):
        model = workload.build_model(size)
    return sum(p.numel() for p in model.parameters())


def _flops(workload: Workload, size: SizeName) -> dict[str, Any]:
    from accelbench.roofline.flops import workload_flops

    try:
        fc = workload_flops(workload.name, size, workload.default_batch_sizes[size][0])
    except Exception as exc:  # a user's model the counter cannot trace
        return {"forward_flop_per_sample": None, "train_flop_per_sample": None,
                "flop_method": f"not counted: {exc}"}
    return {"forward_flop_per_sample": fc.forward_flop_per_sample,
            "train_flop_per_sample": fc.train_flop_per_sample, "flop_method": fc.method}


def workload_info(workload: Workload) -> dict[str, Any]:
    """Name, family, sample unit and, per size, parameters, FLOPs, batch sizes and notes."""
    return {
        "name": workload.name,
        "family": workload.family,
        "sample_unit": workload.sample_unit,
        "description": workload.description,
        "sizes": {
            size: {
                "param_count": param_count(workload, size),
                "default_batch_sizes": list(workload.default_batch_sizes[size]),
                "notes": workload.size_notes(size),
                **_flops(workload, size),
            }
            for size in map(check_size, SIZES)
        },
    }
