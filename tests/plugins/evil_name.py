"""A plugin whose workload name carries markup: loading it must fail, naming the plugin."""

from __future__ import annotations

from accelbench.workloads.registry import Workload, register_workload


@register_workload
class EvilName(Workload):
    name = "evil<script>alert(1)</script>"
    family = "test"
    sample_unit = "sample"
    default_batch_sizes = {"tiny": (8,), "small": (32,), "paper": (64,)}
