"""The three CNN workloads (ResNet-50, VGG-16, Inception-v3): descriptions and sizes.

All three draw the same synthetic ImageNet-style batch (standard-normal images,
uniform labels) and train with cross entropy; only the model and sizes differ.
Frameworks lay images out as they prefer (NCHW in PyTorch, NHWC in JAX); the
logical shape is the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from accelbench.workloads.registry import Workload, register_workload
from accelbench.workloads.sizes import SizeName


class ImageClassification(Workload):
    """Base of the CNN workloads: random images, random labels, cross entropy."""

    family: ClassVar[str] = "cnn"
    sample_unit: ClassVar[str] = "image"
    loss_kind: ClassVar[str] = "cross_entropy"

    def image_size(self, size: SizeName) -> int:
        """Side of the square RGB input image at ``size``."""
        return int(self.config(size).image)

    def num_classes(self, size: SizeName) -> int:
        """Number of output classes at ``size``."""
        return int(self.config(size).classes)


@dataclass(frozen=True)
class ResNetSize:
    """ResNet-50 configuration: first-stage width (later stages double it), input, classes."""

    width: int
    image: int
    classes: int


RESNET_SIZES: Mapping[SizeName, ResNetSize] = {
    # 64x64 keeps the last stage at 2x2, so BatchNorm has >1 value per channel even at batch 1.
    "tiny": ResNetSize(width=8, image=64, classes=10),
    "small": ResNetSize(width=32, image=112, classes=1000),
    "paper": ResNetSize(width=64, image=224, classes=1000),
}


@register_workload
class ResNet50(ImageClassification):
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

    def config(self, size: SizeName) -> ResNetSize:
        return RESNET_SIZES[size]

    def size_notes(self, size: SizeName) -> str:
        cfg = RESNET_SIZES[size]
        return (
            f"input {cfg.image}x{cfg.image}x3, stage widths {cfg.width}-{cfg.width * 8} "
            f"(x4 expansion), blocks 3-4-6-3, {cfg.classes} classes"
        )


@dataclass(frozen=True)
class VGGSize:
    """VGG-16 configuration: conv width divisor, classifier width, input, classes."""

    width_divisor: int
    hidden: int
    image: int
    classes: int


VGG_SIZES: Mapping[SizeName, VGGSize] = {
    "tiny": VGGSize(width_divisor=16, hidden=64, image=32, classes=10),
    "small": VGGSize(width_divisor=4, hidden=1024, image=112, classes=1000),
    "paper": VGGSize(width_divisor=1, hidden=4096, image=224, classes=1000),
}

#: VGG configuration D: output channels of each 3x3 conv, 0 for a 2x2 max pool.
# fmt: off
VGG_CFG_D: tuple[int, ...] = (
    64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0,
)
# fmt: on


def vgg_widths(divisor: int) -> list[int]:
    """Configuration D with every conv's channels divided by ``divisor`` (0 = max pool)."""
    return [c if c == 0 else max(1, c // divisor) for c in VGG_CFG_D]


@register_workload
class VGG16(ImageClassification):
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

    def config(self, size: SizeName) -> VGGSize:
        return VGG_SIZES[size]

    def size_notes(self, size: SizeName) -> str:
        cfg = VGG_SIZES[size]
        return (
            f"input {cfg.image}x{cfg.image}x3, conv widths {64 // cfg.width_divisor}-"
            f"{512 // cfg.width_divisor}, classifier {cfg.hidden}-{cfg.hidden}-{cfg.classes} "
            "with dropout 0.5"
        )


@dataclass(frozen=True)
class InceptionSize:
    """Inception-v3 configuration: channel divisor, input, classes."""

    width_divisor: int
    image: int
    classes: int


INCEPTION_SIZES: Mapping[SizeName, InceptionSize] = {
    # 107x107 is the smallest input whose last maps are 2x2, so BatchNorm has more than
    # one value per channel in training even at batch size 1 (75 is the absolute minimum).
    "tiny": InceptionSize(width_divisor=8, image=107, classes=10),
    "small": InceptionSize(width_divisor=2, image=160, classes=1000),
    # The paper used 224x224x3 for every CNN; torchvision's nominal input is 299.
    "paper": InceptionSize(width_divisor=1, image=224, classes=1000),
}


@register_workload
class InceptionV3(ImageClassification):
    """Inception-v3 on synthetic ImageNet-shaped images, trained without the aux head.

    At 224 the Mixed_6e map is 12x12, the aux head's 5x5/3 average pool leaves
    3x3 and its 5x5 conv cannot run (torchvision's training mode fails the same
    way), so the workload trains without it: 23,834,568 parameters at paper size.
    """

    name: ClassVar[str] = "inception_v3"
    description: ClassVar[str] = (
        "Inception-v3 (torchvision), 224x224x3 as in the paper, 1000 classes, no aux head"
    )
    default_batch_sizes: ClassVar[Mapping[SizeName, tuple[int, ...]]] = {
        "tiny": (2,),
        "small": (8,),
        "paper": (64, 128),
    }
    # The Inception-v3 paper's initial rate (there with RMSProp; here plain SGD + momentum).
    learning_rate: ClassVar[float] = 0.045

    def config(self, size: SizeName) -> InceptionSize:
        return INCEPTION_SIZES[size]

    def size_notes(self, size: SizeName) -> str:
        cfg = INCEPTION_SIZES[size]
        widths = (
            "torchvision widths"
            if cfg.width_divisor == 1
            else (f"torchvision widths / {cfg.width_divisor}")
        )
        note = f"input {cfg.image}x{cfg.image}x3, {widths}, {cfg.classes} classes, no aux head"
        if size == "paper":
            note += " (224 as in the paper, not torchvision's 299; the aux head cannot run at 224)"
        return note
