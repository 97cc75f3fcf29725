"""ResNet-50 (He et al. 2016), the torchvision v1.5 layout, plus the shared image base.

:class:`ImageClassificationWorkload` lives here because all three CNN workloads
(ResNet-50, VGG-16, Inception-v3) draw the same synthetic ImageNet-style batch
and use the same cross-entropy loss; only the model and the sizes differ.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from accelbench.errors import ConfigError
from accelbench.spec import SizeName
from accelbench.workloads.registry import Batch, Workload, register_workload


def check_positive_batch_size(name: str, batch_size: int) -> None:
    """Raise :class:`ConfigError` unless ``batch_size`` is a positive int.

    Args:
        name: Workload name, for the message.
        batch_size: The requested batch size.

    Raises:
        ConfigError: ``batch_size`` is not an int >= 1.
    """
    # bool is an int subclass; True as a batch size is certainly a mistake.
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"{name}: batch size must be a positive integer, got {batch_size!r}")


class ImageClassificationWorkload(Workload):
    """Base of the CNN workloads: random images, random labels, cross entropy.

    Subclasses define :meth:`build_model`, :meth:`image_size` and
    :meth:`num_classes`.
    """

    family: ClassVar[str] = "cnn"
    sample_unit: ClassVar[str] = "image"

    @abstractmethod
    def image_size(self, size: SizeName) -> int:
        """Side of the square RGB input image at ``size``."""

    @abstractmethod
    def num_classes(self, size: SizeName) -> int:
        """Number of output classes at ``size``."""

    def make_batch(
        self, size: SizeName, batch_size: int, device: torch.device, generator: torch.Generator
    ) -> Batch:
        """Standard-normal images (N, 3, H, W) and uniform labels (N,), moved to ``device``."""
        self.validate_batch_size(size, batch_size)
        side = self.image_size(size)
        images = torch.randn(batch_size, 3, side, side, generator=generator)
        labels = torch.randint(0, self.num_classes(size), (batch_size,), generator=generator)
        return images.to(device), labels.to(device)

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        """Cross entropy of the logits against the labels."""
        images, labels = batch
        logits = model(images)
        # Under autocast the logits are low precision; the loss is reduced in fp32.
        return F.cross_entropy(logits.float(), labels)

    def validate_batch_size(self, size: SizeName, batch_size: int) -> None:
        """Any positive batch size works."""
        del size
        check_positive_batch_size(self.name, batch_size)


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


# --------------------------------------------------------------------------- workload


@dataclass(frozen=True)
class _ResNetSize:
    width: int
    image: int
    classes: int


_SIZES: Mapping[SizeName, _ResNetSize] = {
    # 64x64 keeps the last stage at 2x2, so BatchNorm has >1 value per channel even at batch 1.
    "tiny": _ResNetSize(width=8, image=64, classes=10),
    "small": _ResNetSize(width=32, image=112, classes=1000),
    "paper": _ResNetSize(width=64, image=224, classes=1000),
}


@register_workload
class ResNet50Workload(ImageClassificationWorkload):
    """ResNet-50 on synthetic ImageNet-shaped images."""

    name: ClassVar[str] = "resnet50"
    description: ClassVar[str] = "ResNet-50 (torchvision v1.5), ImageNet 224x224x3, 1000 classes"
    default_batch_sizes: ClassVar[Mapping[SizeName, tuple[int, ...]]] = {
        "tiny": (4,),
        "small": (16,),
        "paper": (64, 128),
    }
    # The reference 0.1 per 256 images, scaled linearly (Goyal et al. 2017) to the paper's 128.
    learning_rate: ClassVar[float] = 0.05

    def build_model(self, size: SizeName) -> nn.Module:
        """ResNet-50 at ``size``; the paper size has 25,557,032 parameters."""
        cfg = _SIZES[size]
        return ResNet50(num_classes=cfg.classes, width=cfg.width)

    def image_size(self, size: SizeName) -> int:
        return _SIZES[size].image

    def num_classes(self, size: SizeName) -> int:
        return _SIZES[size].classes

    def size_notes(self, size: SizeName) -> str:
        cfg = _SIZES[size]
        return (
            f"input {cfg.image}x{cfg.image}x3, stage widths {cfg.width}-{cfg.width * 8} "
            f"(x4 expansion), blocks 3-4-6-3, {cfg.classes} classes"
        )
