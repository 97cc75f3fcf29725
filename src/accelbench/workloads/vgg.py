"""VGG-16 (Simonyan & Zisserman 2015), configuration D without BatchNorm, torchvision layout."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from accelbench.spec import SizeName
from accelbench.workloads.registry import register_workload
from accelbench.workloads.resnet import ImageClassificationWorkload

#: Configuration D: output channels of each 3x3 conv, 0 for a 2x2 max pool.
# fmt: off
_CFG_D: tuple[int, ...] = (
    64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0,
)
# fmt: on


class VGG16(nn.Module):
    """VGG-16: 13 3x3 convs with ReLU, 5 max pools, 7x7 adaptive pool, 3 linear layers.

    Args:
        num_classes: Output classes (1000 for ImageNet).
        width_divisor: Divides every conv's channel count (1 in the paper model).
        hidden: Width of the two hidden classifier layers (4096 in the paper model).
        dropout: Dropout before the second and third linear layers.
    """

    def __init__(
        self,
        num_classes: int = 1000,
        width_divisor: int = 1,
        hidden: int = 4096,
        dropout: float = 0.5,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        in_ch = 3
        for out in _scaled(_CFG_D, width_divisor):
            if out == 0:
                layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
            else:
                layers += [nn.Conv2d(in_ch, out, kernel_size=3, padding=1), nn.ReLU(inplace=True)]
                in_ch = out
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(in_ch * 7 * 7, hidden),
            nn.ReLU(inplace=True),
            nn.Dropout(dropout),
            nn.Linear(hidden, hidden),
            nn.ReLU(inplace=True),
            nn.Dropout(dropout),
            nn.Linear(hidden, num_classes),
        )
        # torchvision's initialisation: without BN, VGG only trains from a careful start.
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0.0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


def _scaled(cfg: Sequence[int], divisor: int) -> list[int]:
    return [c if c == 0 else max(1, c // divisor) for c in cfg]


@dataclass(frozen=True)
class _VGGSize:
    width_divisor: int
    hidden: int
    image: int
    classes: int


_SIZES: Mapping[SizeName, _VGGSize] = {
    "tiny": _VGGSize(width_divisor=16, hidden=64, image=32, classes=10),
    "small": _VGGSize(width_divisor=4, hidden=1024, image=112, classes=1000),
    "paper": _VGGSize(width_divisor=1, hidden=4096, image=224, classes=1000),
}


@register_workload
class VGG16Workload(ImageClassificationWorkload):
    """VGG-16 on synthetic ImageNet-shaped images."""

    name: ClassVar[str] = "vgg16"
    description: ClassVar[str] = (
        "VGG-16 (no BN, torchvision layout), ImageNet 224x224x3, 1000 classes"
    )
    default_batch_sizes: ClassVar[Mapping[SizeName, tuple[int, ...]]] = {
        "tiny": (4,),
        "small": (16,),
        "paper": (64, 128),
    }
    # torchvision's reference rate for VGG (BN-free VGG diverges at ResNet's 0.1).
    learning_rate: ClassVar[float] = 0.01

    def build_model(self, size: SizeName) -> nn.Module:
        """VGG-16 at ``size``; the paper size has 138,357,544 parameters."""
        cfg = _SIZES[size]
        return VGG16(num_classes=cfg.classes, width_divisor=cfg.width_divisor, hidden=cfg.hidden)

    def image_size(self, size: SizeName) -> int:
        return _SIZES[size].image

    def num_classes(self, size: SizeName) -> int:
        return _SIZES[size].classes

    def size_notes(self, size: SizeName) -> str:
        cfg = _SIZES[size]
        return (
            f"input {cfg.image}x{cfg.image}x3, conv widths {64 // cfg.width_divisor}-"
            f"{512 // cfg.width_divisor}, classifier {cfg.hidden}-{cfg.hidden}-{cfg.classes} "
            "with dropout 0.5"
        )
