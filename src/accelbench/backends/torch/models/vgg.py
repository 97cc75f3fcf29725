"""VGG-16 in PyTorch (Simonyan & Zisserman 2015): configuration D without BatchNorm."""

from __future__ import annotations

import torch
from torch import nn

from accelbench.backends.torch.models.resnet import ImageClassificationImpl
from accelbench.workloads.images import VGG_SIZES, vgg_widths
from accelbench.workloads.registry import implements
from accelbench.workloads.sizes import SizeName


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
        for out in vgg_widths(width_divisor):
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


@implements("vgg16", framework="torch")
class VGG16Impl(ImageClassificationImpl):
    """VGG-16 in PyTorch."""

    def build_model(self, size: SizeName) -> nn.Module:
        """VGG-16 at ``size``; the paper size has 138,357,544 parameters."""
        cfg = VGG_SIZES[size]
        return VGG16(num_classes=cfg.classes, width_divisor=cfg.width_divisor, hidden=cfg.hidden)
