"""ResNet-50 (He et al. 2016) in PyTorch, the torchvision v1.5 layout, plus the shared image base.

:class:`ImageClassificationImpl` lives here because all three CNN workloads
(ResNet-50, VGG-16, Inception-v3) draw the same synthetic ImageNet-style batch
and use the same cross-entropy loss; only the model and the sizes differ.
"""

from __future__ import annotations

from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from accelbench.backends.torch.model import TorchModel
from accelbench.workloads.images import RESNET_SIZES, ImageClassification
from accelbench.workloads.registry import Batch, implements
from accelbench.workloads.sizes import SizeName


class ImageClassificationImpl(TorchModel):
    """Base of the CNN implementations: random NCHW images, random labels, cross entropy."""

    def make_batch(
        self, size: SizeName, batch_size: int, device: torch.device, generator: torch.Generator
    ) -> Batch:
        """Standard-normal images (N, 3, H, W) and uniform labels (N,), moved to ``device``."""
        wl = self.workload
        assert isinstance(wl, ImageClassification)  # noqa: S101 - registry contract
        wl.validate_batch_size(size, batch_size)
        side = wl.image_size(size)
        images = torch.randn(batch_size, 3, side, side, generator=generator)
        labels = torch.randint(0, wl.num_classes(size), (batch_size,), generator=generator)
        return images.to(device), labels.to(device)

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        """Cross entropy of the logits against the labels."""
        images, labels = batch
        logits = model(images)
        # Under autocast the logits are low precision; the loss is reduced in fp32.
        return F.cross_entropy(logits.float(), labels)


# --------------------------------------------------------------------------- model


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (carries the stride, as torchvision v1.5), 1x1 expand, residual."""

    expansion: ClassVar[int] = 4

    def __init__(self, in_planes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        out_planes = planes * self.expansion
        self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out_planes, kernel_size=1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_planes)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module | None = None
        if stride != 1 or in_planes != out_planes:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(out_planes),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet50(nn.Module):
    """ResNet-50: stem, four stages of (3, 4, 6, 3) bottlenecks, global pool, linear.

    Args:
        num_classes: Output classes (1000 for ImageNet).
        width: Planes of the first stage (64 in the paper model); later stages
            double it, so a smaller width shrinks the whole network uniformly.
    """

    def __init__(self, num_classes: int = 1000, width: int = 64) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        in_planes = width
        stages: list[nn.Module] = []
        for i, blocks in enumerate((3, 4, 6, 3)):
            planes = width * 2**i
            layers: list[nn.Module] = []
            for j in range(blocks):
                stride = 2 if i > 0 and j == 0 else 1
                layers.append(Bottleneck(in_planes, planes, stride))
                in_planes = planes * Bottleneck.expansion
            stages.append(nn.Sequential(*layers))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_planes, num_classes)
        # torchvision's initialisation, so training dynamics match the reference model.
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


# --------------------------------------------------------------------------- implementation


@implements("resnet50", framework="torch")
class ResNet50Impl(ImageClassificationImpl):
    """ResNet-50 in PyTorch."""

    def build_model(self, size: SizeName) -> nn.Module:
        """ResNet-50 at ``size``; the paper size has 25,557,032 parameters."""
        cfg = RESNET_SIZES[size]
        return ResNet50(num_classes=cfg.classes, width=cfg.width)
