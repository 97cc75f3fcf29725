"""The PyTorch backend. Importing this package does not import torch."""

from accelbench.backends.torch.model import TorchModel

__all__ = ["TorchModel"]
