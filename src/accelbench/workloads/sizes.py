"""Size names: the sizes every workload has (a leaf module, imported by the spec and the
workload registry alike)."""

from __future__ import annotations

SizeName = str
"""A size name: one of :data:`SIZES` (every workload has them) or a size a workload
declares itself (``gpt2`` of ``llm``); checked per workload where a case is prepared."""

#: The sizes every workload has.
SIZES: tuple[str, ...] = ("tiny", "small", "paper")
