"""Inception-v3 in PyTorch (Szegedy et al. 2016), torchvision-equivalent.

Decision on the auxiliary classifier: the workload trains WITHOUT it
(23,834,568 parameters at paper size). The paper fed every CNN 224x224x3
images; at 224 the Mixed_6e map is 12x12, the aux head's 5x5/3 average pool
leaves 3x3, and its 5x5 conv cannot run, so torchvision's training mode
(``aux_logits=True``) fails at that input size. :class:`Inception3` still
implements the aux head (``aux_logits=True``, loss = main + 0.4 * aux, as
torchvision's reference training does) for 299x299 inputs, and reproduces
torchvision's 27,161,264 parameters with it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from accelbench.backends.torch.models.resnet import ImageClassificationImpl
from accelbench.workloads.images import INCEPTION_SIZES
from accelbench.workloads.registry import Batch, implements
from accelbench.workloads.sizes import SizeName

#: Weight of the auxiliary loss in torchvision's reference training.
AUX_LOSS_WEIGHT = 0.4


class BasicConv2d(nn.Module):
    """Conv (no bias) + BatchNorm (eps 0.001) + ReLU."""

    def __init__(self, in_ch: int, out_ch: int, **kwargs: object) -> None:
        super().__init__()
        self.out_channels = out_ch
        self.conv = nn.Conv2d(in_ch, out_ch, bias=False, **kwargs)  # type: ignore[arg-type]
        self.bn = nn.BatchNorm2d(out_ch, eps=0.001)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn(self.conv(x)), inplace=True)


class _Widths:
    """Divides torchvision's channel counts by ``divisor`` to build smaller models."""

    def __init__(self, divisor: int) -> None:
        self.divisor = divisor

    def __call__(self, channels: int) -> int:
        return max(1, channels // self.divisor)


class InceptionA(nn.Module):
    """35x35 block: 1x1, 5x5, double 3x3 and pool branches."""

    def __init__(self, in_ch: int, pool_features: int, w: _Widths) -> None:
        super().__init__()
        self.branch1x1 = BasicConv2d(in_ch, w(64), kernel_size=1)
        self.branch5x5_1 = BasicConv2d(in_ch, w(48), kernel_size=1)
        self.branch5x5_2 = BasicConv2d(w(48), w(64), kernel_size=5, padding=2)
        self.branch3x3dbl_1 = BasicConv2d(in_ch, w(64), kernel_size=1)
        self.branch3x3dbl_2 = BasicConv2d(w(64), w(96), kernel_size=3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(w(96), w(96), kernel_size=3, padding=1)
        self.branch_pool = BasicConv2d(in_ch, w(pool_features), kernel_size=1)
        self.out_channels = w(64) + w(64) + w(96) + w(pool_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b1 = self.branch1x1(x)
        b5 = self.branch5x5_2(self.branch5x5_1(x))
        b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        bp = self.branch_pool(F.avg_pool2d(x, kernel_size=3, stride=1, padding=1))
        return torch.cat([b1, b5, b3, bp], 1)


class InceptionB(nn.Module):
    """Grid reduction 35x35 -> 17x17."""

    def __init__(self, in_ch: int, w: _Widths) -> None:
        super().__init__()
        self.branch3x3 = BasicConv2d(in_ch, w(384), kernel_size=3, stride=2)
        self.branch3x3dbl_1 = BasicConv2d(in_ch, w(64), kernel_size=1)
        self.branch3x3dbl_2 = BasicConv2d(w(64), w(96), kernel_size=3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(w(96), w(96), kernel_size=3, stride=2)
        self.out_channels = w(384) + w(96) + in_ch

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b3 = self.branch3x3(x)
        bd = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        bp = F.max_pool2d(x, kernel_size=3, stride=2)
        return torch.cat([b3, bd, bp], 1)


class InceptionC(nn.Module):
    """17x17 block with factorised 1x7 / 7x1 convolutions."""

    def __init__(self, in_ch: int, channels_7x7: int, w: _Widths) -> None:
        super().__init__()
        c7 = w(channels_7x7)
        self.branch1x1 = BasicConv2d(in_ch, w(192), kernel_size=1)
        self.branch7x7_1 = BasicConv2d(in_ch, c7, kernel_size=1)
        self.branch7x7_2 = BasicConv2d(c7, c7, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7_3 = BasicConv2d(c7, w(192), kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_1 = BasicConv2d(in_ch, c7, kernel_size=1)
        self.branch7x7dbl_2 = BasicConv2d(c7, c7, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_3 = BasicConv2d(c7, c7, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7dbl_4 = BasicConv2d(c7, c7, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_5 = BasicConv2d(c7, w(192), kernel_size=(1, 7), padding=(0, 3))
        self.branch_pool = BasicConv2d(in_ch, w(192), kernel_size=1)
        self.out_channels = 4 * w(192)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b1 = self.branch1x1(x)
        b7 = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
        bd = self.branch7x7dbl_1(x)
        for conv in (
            self.branch7x7dbl_2,
            self.branch7x7dbl_3,
            self.branch7x7dbl_4,
            self.branch7x7dbl_5,
        ):
            bd = conv(bd)
        bp = self.branch_pool(F.avg_pool2d(x, kernel_size=3, stride=1, padding=1))
        return torch.cat([b1, b7, bd, bp], 1)


class InceptionD(nn.Module):
    """Grid reduction 17x17 -> 8x8."""

    def __init__(self, in_ch: int, w: _Widths) -> None:
        super().__init__()
        self.branch3x3_1 = BasicConv2d(in_ch, w(192), kernel_size=1)
        self.branch3x3_2 = BasicConv2d(w(192), w(320), kernel_size=3, stride=2)
        self.branch7x7x3_1 = BasicConv2d(in_ch, w(192), kernel_size=1)
        self.branch7x7x3_2 = BasicConv2d(w(192), w(192), kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7x3_3 = BasicConv2d(w(192), w(192), kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7x3_4 = BasicConv2d(w(192), w(192), kernel_size=3, stride=2)
        self.out_channels = w(320) + w(192) + in_ch

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b3 = self.branch3x3_2(self.branch3x3_1(x))
        b7 = self.branch7x7x3_1(x)
        for conv in (self.branch7x7x3_2, self.branch7x7x3_3, self.branch7x7x3_4):
            b7 = conv(b7)
        bp = F.max_pool2d(x, kernel_size=3, stride=2)
        return torch.cat([b3, b7, bp], 1)


class InceptionE(nn.Module):
    """8x8 block with expanded 1x3 / 3x1 filter banks."""

    def __init__(self, in_ch: int, w: _Widths) -> None:
        super().__init__()
        self.branch1x1 = BasicConv2d(in_ch, w(320), kernel_size=1)
        self.branch3x3_1 = BasicConv2d(in_ch, w(384), kernel_size=1)
        self.branch3x3_2a = BasicConv2d(w(384), w(384), kernel_size=(1, 3), padding=(0, 1))
        self.branch3x3_2b = BasicConv2d(w(384), w(384), kernel_size=(3, 1), padding=(1, 0))
        self.branch3x3dbl_1 = BasicConv2d(in_ch, w(448), kernel_size=1)
        self.branch3x3dbl_2 = BasicConv2d(w(448), w(384), kernel_size=3, padding=1)
        self.branch3x3dbl_3a = BasicConv2d(w(384), w(384), kernel_size=(1, 3), padding=(0, 1))
        self.branch3x3dbl_3b = BasicConv2d(w(384), w(384), kernel_size=(3, 1), padding=(1, 0))
        self.branch_pool = BasicConv2d(in_ch, w(192), kernel_size=1)
        self.out_channels = w(320) + 4 * w(384) + w(192)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b1 = self.branch1x1(x)
        b3 = self.branch3x3_1(x)
        b3 = torch.cat([self.branch3x3_2a(b3), self.branch3x3_2b(b3)], 1)
        bd = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        bd = torch.cat([self.branch3x3dbl_3a(bd), self.branch3x3dbl_3b(bd)], 1)
        bp = self.branch_pool(F.avg_pool2d(x, kernel_size=3, stride=1, padding=1))
        return torch.cat([b1, b3, bd, bp], 1)


class InceptionAux(nn.Module):
    """Auxiliary classifier on the 17x17 map (needs at least 5x5 after its 5/3 pool)."""

    def __init__(self, in_ch: int, num_classes: int, w: _Widths) -> None:
        super().__init__()
        self.conv0 = BasicConv2d(in_ch, w(128), kernel_size=1)
        self.conv1 = BasicConv2d(w(128), w(768), kernel_size=5)
        self.fc = nn.Linear(w(768), num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(self.conv0(F.avg_pool2d(x, kernel_size=5, stride=3)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class Inception3(nn.Module):
    """Inception-v3 as torchvision builds it (``transform_input=False``).

    Args:
        num_classes: Output classes (1000 for ImageNet).
        aux_logits: Add the auxiliary classifier; in training mode the forward
            pass then returns ``(logits, aux_logits)``.
        width_divisor: Divides every channel count (1 in the paper model).
        dropout: Dropout before the final linear layer.
    """

    def __init__(
        self,
        num_classes: int = 1000,
        aux_logits: bool = False,
        width_divisor: int = 1,
        dropout: float = 0.5,
    ) -> None:
        super().__init__()
        w = _Widths(width_divisor)
        self.Conv2d_1a_3x3 = BasicConv2d(3, w(32), kernel_size=3, stride=2)
        self.Conv2d_2a_3x3 = BasicConv2d(w(32), w(32), kernel_size=3)
        self.Conv2d_2b_3x3 = BasicConv2d(w(32), w(64), kernel_size=3, padding=1)
        self.maxpool1 = nn.MaxPool2d(kernel_size=3, stride=2)
        self.Conv2d_3b_1x1 = BasicConv2d(w(64), w(80), kernel_size=1)
        self.Conv2d_4a_3x3 = BasicConv2d(w(80), w(192), kernel_size=3)
        self.maxpool2 = nn.MaxPool2d(kernel_size=3, stride=2)
        self.Mixed_5b = InceptionA(w(192), pool_features=32, w=w)
        self.Mixed_5c = InceptionA(self.Mixed_5b.out_channels, pool_features=64, w=w)
        self.Mixed_5d = InceptionA(self.Mixed_5c.out_channels, pool_features=64, w=w)
        self.Mixed_6a = InceptionB(self.Mixed_5d.out_channels, w=w)
        self.Mixed_6b = InceptionC(self.Mixed_6a.out_channels, channels_7x7=128, w=w)
        self.Mixed_6c = InceptionC(self.Mixed_6b.out_channels, channels_7x7=160, w=w)
        self.Mixed_6d = InceptionC(self.Mixed_6c.out_channels, channels_7x7=160, w=w)
        self.Mixed_6e = InceptionC(self.Mixed_6d.out_channels, channels_7x7=192, w=w)
        self.AuxLogits: InceptionAux | None = (
            InceptionAux(self.Mixed_6e.out_channels, num_classes, w) if aux_logits else None
        )
        self.Mixed_7a = InceptionD(self.Mixed_6e.out_channels, w=w)
        self.Mixed_7b = InceptionE(self.Mixed_7a.out_channels, w=w)
        self.Mixed_7c = InceptionE(self.Mixed_7b.out_channels, w=w)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(self.Mixed_7c.out_channels, num_classes)
        # torchvision's initialisation: truncated normal, std 0.1, for convs and linears.
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.trunc_normal_(m.weight, mean=0.0, std=0.1, a=-2, b=2)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        x = self.maxpool1(self.Conv2d_2b_3x3(self.Conv2d_2a_3x3(self.Conv2d_1a_3x3(x))))
        x = self.maxpool2(self.Conv2d_4a_3x3(self.Conv2d_3b_1x1(x)))
        x = self.Mixed_5d(self.Mixed_5c(self.Mixed_5b(x)))
        x = self.Mixed_6e(self.Mixed_6d(self.Mixed_6c(self.Mixed_6b(self.Mixed_6a(x)))))
        aux = self.AuxLogits(x) if self.AuxLogits is not None and self.training else None
        x = self.Mixed_7c(self.Mixed_7b(self.Mixed_7a(x)))
        x = self.fc(self.dropout(torch.flatten(self.avgpool(x), 1)))
        return x if aux is None else (x, aux)


@implements("inception_v3", framework="torch")
class InceptionV3Impl(ImageClassificationImpl):
    """Inception-v3 in PyTorch, trained without the aux head (see the module docstring)."""

    def build_model(self, size: SizeName) -> nn.Module:
        """Inception-v3 at ``size``; the paper size has 23,834,568 parameters."""
        cfg = INCEPTION_SIZES[size]
        return Inception3(
            num_classes=cfg.classes, aux_logits=False, width_divisor=cfg.width_divisor
        )

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        """Cross entropy; adds 0.4 x the aux loss if the model has the aux head."""
        images, labels = batch
        out = model(images)
        if isinstance(out, tuple):
            logits, aux = out
            return F.cross_entropy(logits.float(), labels) + AUX_LOSS_WEIGHT * F.cross_entropy(
                aux.float(), labels
            )
        return F.cross_entropy(out.float(), labels)
