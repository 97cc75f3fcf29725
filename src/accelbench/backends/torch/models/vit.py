"""ViT-B/16 in PyTorch (86,567,656 parameters at 224 x 224, 1000 classes).

Patch embedding by a strided convolution with bias, class token, learned
positions, pre-LayerNorm layers (eps 1e-6) with fused attention
(:func:`torch.nn.functional.scaled_dot_product_attention`) and GELU (erf)
MLPs, final LayerNorm, linear head on the class token. Weights N(0, 0.02),
biases and class token 0. See :mod:`accelbench.workloads.vit`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from accelbench.backends.torch.model import TorchModel
from accelbench.workloads.registry import Batch, implements
from accelbench.workloads.sizes import SizeName
from accelbench.workloads.vit import ViTSize

INIT_STD = 0.02


class Block(nn.Module):
    """Pre-LN layer: x += attn(LN(x)); x += mlp(LN(x))."""

    def __init__(self, cfg: ViTSize) -> None:
        super().__init__()
        d = cfg.d_model
        self.heads = cfg.heads
        self.norm1 = nn.LayerNorm(d, eps=cfg.norm_eps)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.norm2 = nn.LayerNorm(d, eps=cfg.norm_eps)
        self.fc1 = nn.Linear(d, cfg.mlp)
        self.fc2 = nn.Linear(cfg.mlp, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, t, d = x.shape
        qkv = self.qkv(self.norm1(x)).view(n, t, 3, self.heads, d // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        att = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(att.transpose(1, 2).reshape(n, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class ViTModel(nn.Module):
    """Vision transformer classifier.

    Args:
        cfg: The size's configuration.
    """

    def __init__(self, cfg: ViTSize) -> None:
        super().__init__()
        d = cfg.d_model
        self.patch = nn.Conv2d(cfg.channels, d, cfg.patch, stride=cfg.patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.positions = nn.Parameter(torch.zeros(1, cfg.tokens, d))
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.norm = nn.LayerNorm(d, eps=cfg.norm_eps)
        self.head = nn.Linear(d, cfg.classes)
        for name, p in self.named_parameters():
            if name == "cls" or name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() > 1:
                nn.init.normal_(p, 0.0, INIT_STD)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Logits (N, classes) for images (N, C, H, W)."""
        x = self.patch(images).flatten(2).transpose(1, 2)
        x = torch.cat((self.cls.expand(x.shape[0], -1, -1), x), dim=1) + self.positions
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x[:, 0]))


@implements("vit", framework="torch")
class ViTImpl(TorchModel):
    """ViT in PyTorch."""

    def build_model(self, size: SizeName) -> nn.Module:
        """ViT at ``size``; 86,567,656 parameters at paper size."""
        return ViTModel(self.workload.config(size))

    def make_batch(
        self, size: SizeName, batch_size: int, device: torch.device, generator: torch.Generator
    ) -> Batch:
        """Random images (N, C, H, W) and class labels (N,)."""
        self.workload.validate_batch_size(size, batch_size)
        cfg: ViTSize = self.workload.config(size)
        images = torch.randn(batch_size, cfg.channels, cfg.image, cfg.image, generator=generator)
        labels = torch.randint(0, cfg.classes, (batch_size,), generator=generator)
        return images.to(device), labels.to(device)

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        """Cross entropy over the classes."""
        images, labels = batch
        return F.cross_entropy(model(images).float(), labels)
