"""Import the built-in workload modules so that each registers itself.

The registry imports this module lazily (``registry._ensure_builtins``), so
torch is loaded only when a workload is first looked up.
"""

from __future__ import annotations

from accelbench.workloads import (  # noqa: F401  (imported for registration)
    deepspeech,
    inception,
    lstm,
    resnet,
    transformer,
    vgg,
)
