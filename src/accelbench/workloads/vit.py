"""ViT-B/16 image classification: description, sizes.

ViT-B/16 (Dosovitskiy et al. 2021, "An Image is Worth 16x16 Words", Table 1:
ViT-Base, 12 layers, hidden 768, MLP 3072, 12 heads, 86M parameters) at
224 x 224 with 1000 classes: a 16 x 16 patch embedding (a strided convolution
with bias), a class token, 197 learned positions, 12 pre-LayerNorm layers
(eps 1e-6) with GELU (erf) MLPs and biases, a final LayerNorm and a linear
head on the class token: 86,567,656 parameters (timm's ``vit_base_patch16_224``
and torchvision's ``vit_b_16``). No dropout. The sample unit is one image;
labels are random classes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from accelbench.workloads.analytic import AnalyticFlops, MatmulGroup, palm_flops
from accelbench.workloads.registry import Workload, register_workload
from accelbench.workloads.sizes import SizeName


@dataclass(frozen=True, kw_only=True, slots=True)
class ViTSize:
    """Vision transformer configuration."""

    image: int
    patch: int
    d_model: int
    layers: int
    heads: int
    mlp: int
    classes: int
    channels: int = 3
    norm_eps: float = 1e-6

    @property
    def head_dim(self) -> int:
        return self.d_model // self.heads

    @property
    def patches(self) -> int:
        return (self.image // self.patch) ** 2

    @property
    def tokens(self) -> int:
        """Sequence length: the patches and the class token."""
        return self.patches + 1


VIT_SIZES: Mapping[SizeName, ViTSize] = {
    "tiny": ViTSize(image=16, patch=4, d_model=32, layers=2, heads=4, mlp=64, classes=10),
    "small": ViTSize(image=32, patch=8, d_model=128, layers=3, heads=4, mlp=512, classes=100),
    "paper": ViTSize(image=224, patch=16, d_model=768, layers=12, heads=12, mlp=3072,
                     classes=1000),
}


@register_workload
class ViT(Workload):
    """Image classification with cross entropy on random images."""

    name: ClassVar[str] = "vit"
    family: ClassVar[str] = "transformer"
    sample_unit: ClassVar[str] = "image"
    description: ClassVar[str] = "ViT-B/16 at 224x224, 1000 classes (86.6M)"
    default_batch_sizes: ClassVar[Mapping[SizeName, tuple[int, ...]]] = {
        "tiny": (4,),
        "small": (8,),
        "paper": (64, 128, 256),
    }
    learning_rate: ClassVar[float] = 1e-3
    optimizer: ClassVar[str] = "adamw"
    weight_decay: ClassVar[float] = 0.05
    loss_kind: ClassVar[str] = "cross_entropy"

    def config(self, size: SizeName) -> ViTSize:
        return VIT_SIZES[self.check_size(size)]

    def tp_split_params(self, size: SizeName, degree: int) -> int | None:
        """Each block's fused q, k, v, its output projection and its MLP."""
        c = self.config(size)
        d = c.d_model
        return c.layers * (4 * d * d + 2 * d * c.mlp + 3 * d + c.mlp)  # qkv and fc1 biases

    def size_notes(self, size: SizeName) -> str:
        c = self.config(size)
        return (f"{c.image}x{c.image} images, patch {c.patch} ({c.tokens} tokens), "
                f"{c.layers} layers, d {c.d_model}, {c.heads} heads, MLP {c.mlp}, "
                f"{c.classes} classes, pre-LN")

    def analytic_flops(self, size: SizeName, batch_size: int) -> AnalyticFlops:
        """PaLM's count per image: the layers on all tokens, the patch embedding on the
        patches, the head on the class token, attention over all tokens."""
        self.validate_batch_size(size, batch_size)
        c = self.config(size)
        d = c.d_model
        return palm_flops(
            groups=(
                MatmulGroup(params=c.layers * (4 * d * d + 2 * d * c.mlp), tokens=c.tokens),
                MatmulGroup(params=c.channels * c.patch * c.patch * d, tokens=c.patches),
                MatmulGroup(params=d * c.classes, tokens=1),
            ),
            layers=c.layers, heads=c.heads, head_dim=c.head_dim, seq_len=c.tokens,
        )
