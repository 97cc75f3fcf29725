"""Inception-v3 (Szegedy et al. 2016) in Flax NNX, the torchvision layout, without the aux head.

The workload trains without the auxiliary classifier (23,834,568 parameters at
paper size): at the paper's 224x224 input the Mixed_6e map is 12x12, the aux
head's 5x5/3 average pool leaves 3x3 and its 5x5 conv cannot run, so the torch
twin drops it too and only the main logits enter the loss.

Images are NHWC in JAX (the torch twin uses NCHW); kernels, strides, paddings,
pooling, initialisation, channel widths and parameter counts match the torch
model exactly, and channels are concatenated in torch's branch order.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from accelbench.backends.jax.models.resnet import (
    BN_MOMENTUM,
    ImageClassificationJax,
    torch_linear_init,
)
from accelbench.workloads.images import INCEPTION_SIZES
from accelbench.workloads.registry import implements
from accelbench.workloads.sizes import SizeName

#: torchvision's Inception BatchNorm epsilon (torch's default is 1e-5).
BN_EPSILON = 0.001

#: torchvision's ``trunc_normal_(std=0.1, a=-2, b=2)`` for conv and linear weights. torch's
#: bounds are absolute values, jax's are in standard deviations: +-2 / 0.1 = +-20 std.
TRUNC_NORMAL_STD = 0.1
TRUNC_NORMAL_INIT = nnx.initializers.truncated_normal(
    TRUNC_NORMAL_STD, lower=-2.0 / TRUNC_NORMAL_STD, upper=2.0 / TRUNC_NORMAL_STD
)

#: Dropout before the final linear layer, as torchvision.
DROPOUT = 0.5

#: A kernel, stride or padding given as torch does: one int for both axes, or (height, width).
Pair = int | tuple[int, int]


def _pair(value: Pair) -> tuple[int, int]:
    """``value`` as (height, width), the way torch expands an int argument."""
    return (value, value) if isinstance(value, int) else value


def _avg_pool_3x3(x: jax.Array) -> jax.Array:
    """torch's ``F.avg_pool2d(x, 3, stride=1, padding=1)`` on NHWC ``x``.

    torch's default ``count_include_pad=True`` divides border windows by 9 too,
    which is also flax's default.
    """
    return nnx.avg_pool(x, (3, 3), strides=(1, 1), padding=((1, 1), (1, 1)), count_include_pad=True)


def _max_pool_3x3_s2(x: jax.Array) -> jax.Array:
    """torch's ``F.max_pool2d(x, 3, stride=2)``: no padding, floor mode."""
    return nnx.max_pool(x, (3, 3), strides=(2, 2), padding="VALID")


class _Widths:
    """Divides torchvision's channel counts by ``divisor`` to build smaller models.

    Args:
        divisor: 1 for the paper model.
    """

    def __init__(self, divisor: int) -> None:
        self.divisor = divisor

    def __call__(self, channels: int) -> int:
        """``channels // divisor``, at least 1 (same rounding as the torch twin)."""
        return max(1, channels // self.divisor)


class BasicConv2d(nnx.Module):
    """Conv (no bias) + BatchNorm (eps 0.001) + ReLU.

    Args:
        in_ch: Input channels.
        out_ch: Output channels.
        kernel: Kernel size, int or (height, width).
        stride: Stride, int or (height, width).
        padding: torch's symmetric zero padding, int or (height, width).
        rngs: Parameter rngs.
    """

    def __init__(
        self,
        in_ch: int,
        out_ch: int,
        kernel: Pair,
        *,
        stride: Pair = 1,
        padding: Pair = 0,
        rngs: nnx.Rngs,
    ) -> None:
        pad_h, pad_w = _pair(padding)
        self.out_channels = out_ch
        self.conv = nnx.Conv(
            in_ch,
            out_ch,
            _pair(kernel),
            strides=_pair(stride),
            padding=((pad_h, pad_h), (pad_w, pad_w)),
            use_bias=False,
            kernel_init=TRUNC_NORMAL_INIT,
            rngs=rngs,
        )
        self.bn = nnx.BatchNorm(
            out_ch,
            use_running_average=False,
            momentum=BN_MOMENTUM,
            epsilon=BN_EPSILON,
            rngs=rngs,
        )

    def __call__(self, x: jax.Array) -> jax.Array:
        """Apply conv, BatchNorm (batch statistics) and ReLU to NHWC ``x``."""
        return nnx.relu(self.bn(self.conv(x)))


class InceptionA(nnx.Module):
    """35x35 block: 1x1, 5x5, double 3x3 and pool branches.

    Args:
        in_ch: Input channels.
        pool_features: torchvision channels of the pool branch (before the divisor).
        w: Channel width divisor.
        rngs: Parameter rngs.
    """

    def __init__(self, in_ch: int, pool_features: int, w: _Widths, *, rngs: nnx.Rngs) -> None:
        self.branch1x1 = BasicConv2d(in_ch, w(64), 1, rngs=rngs)
        self.branch5x5_1 = BasicConv2d(in_ch, w(48), 1, rngs=rngs)
        self.branch5x5_2 = BasicConv2d(w(48), w(64), 5, padding=2, rngs=rngs)
        self.branch3x3dbl_1 = BasicConv2d(in_ch, w(64), 1, rngs=rngs)
        self.branch3x3dbl_2 = BasicConv2d(w(64), w(96), 3, padding=1, rngs=rngs)
        self.branch3x3dbl_3 = BasicConv2d(w(96), w(96), 3, padding=1, rngs=rngs)
        self.branch_pool = BasicConv2d(in_ch, w(pool_features), 1, rngs=rngs)
        self.out_channels = w(64) + w(64) + w(96) + w(pool_features)

    def __call__(self, x: jax.Array) -> jax.Array:
        """Apply the block to NHWC ``x``."""
        b1 = self.branch1x1(x)
        b5 = self.branch5x5_2(self.branch5x5_1(x))
        b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        bp = self.branch_pool(_avg_pool_3x3(x))
        return jnp.concatenate([b1, b5, b3, bp], axis=-1)


class InceptionB(nnx.Module):
    """Grid reduction 35x35 -> 17x17.

    Args:
        in_ch: Input channels.
        w: Channel width divisor.
        rngs: Parameter rngs.
    """

    def __init__(self, in_ch: int, w: _Widths, *, rngs: nnx.Rngs) -> None:
        self.branch3x3 = BasicConv2d(in_ch, w(384), 3, stride=2, rngs=rngs)
        self.branch3x3dbl_1 = BasicConv2d(in_ch, w(64), 1, rngs=rngs)
        self.branch3x3dbl_2 = BasicConv2d(w(64), w(96), 3, padding=1, rngs=rngs)
        self.branch3x3dbl_3 = BasicConv2d(w(96), w(96), 3, stride=2, rngs=rngs)
        self.out_channels = w(384) + w(96) + in_ch

    def __call__(self, x: jax.Array) -> jax.Array:
        """Apply the block to NHWC ``x``."""
        b3 = self.branch3x3(x)
        bd = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        bp = _max_pool_3x3_s2(x)
        return jnp.concatenate([b3, bd, bp], axis=-1)


class InceptionC(nnx.Module):
    """17x17 block with factorised 1x7 / 7x1 convolutions.

    Args:
        in_ch: Input channels.
        channels_7x7: torchvision channels inside the 7x7 branches (before the divisor).
        w: Channel width divisor.
        rngs: Parameter rngs.
    """

    def __init__(self, in_ch: int, channels_7x7: int, w: _Widths, *, rngs: nnx.Rngs) -> None:
        c7 = w(channels_7x7)
        self.branch1x1 = BasicConv2d(in_ch, w(192), 1, rngs=rngs)
        self.branch7x7_1 = BasicConv2d(in_ch, c7, 1, rngs=rngs)
        self.branch7x7_2 = BasicConv2d(c7, c7, (1, 7), padding=(0, 3), rngs=rngs)
        self.branch7x7_3 = BasicConv2d(c7, w(192), (7, 1), padding=(3, 0), rngs=rngs)
        self.branch7x7dbl_1 = BasicConv2d(in_ch, c7, 1, rngs=rngs)
        self.branch7x7dbl_2 = BasicConv2d(c7, c7, (7, 1), padding=(3, 0), rngs=rngs)
        self.branch7x7dbl_3 = BasicConv2d(c7, c7, (1, 7), padding=(0, 3), rngs=rngs)
        self.branch7x7dbl_4 = BasicConv2d(c7, c7, (7, 1), padding=(3, 0), rngs=rngs)
        self.branch7x7dbl_5 = BasicConv2d(c7, w(192), (1, 7), padding=(0, 3), rngs=rngs)
        self.branch_pool = BasicConv2d(in_ch, w(192), 1, rngs=rngs)
        self.out_channels = 4 * w(192)

    def __call__(self, x: jax.Array) -> jax.Array:
        """Apply the block to NHWC ``x``."""
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
        bp = self.branch_pool(_avg_pool_3x3(x))
        return jnp.concatenate([b1, b7, bd, bp], axis=-1)


class InceptionD(nnx.Module):
    """Grid reduction 17x17 -> 8x8.

    Args:
        in_ch: Input channels.
        w: Channel width divisor.
        rngs: Parameter rngs.
    """

    def __init__(self, in_ch: int, w: _Widths, *, rngs: nnx.Rngs) -> None:
        self.branch3x3_1 = BasicConv2d(in_ch, w(192), 1, rngs=rngs)
        self.branch3x3_2 = BasicConv2d(w(192), w(320), 3, stride=2, rngs=rngs)
        self.branch7x7x3_1 = BasicConv2d(in_ch, w(192), 1, rngs=rngs)
        self.branch7x7x3_2 = BasicConv2d(w(192), w(192), (1, 7), padding=(0, 3), rngs=rngs)
        self.branch7x7x3_3 = BasicConv2d(w(192), w(192), (7, 1), padding=(3, 0), rngs=rngs)
        self.branch7x7x3_4 = BasicConv2d(w(192), w(192), 3, stride=2, rngs=rngs)
        self.out_channels = w(320) + w(192) + in_ch

    def __call__(self, x: jax.Array) -> jax.Array:
        """Apply the block to NHWC ``x``."""
        b3 = self.branch3x3_2(self.branch3x3_1(x))
        b7 = self.branch7x7x3_1(x)
        for conv in (self.branch7x7x3_2, self.branch7x7x3_3, self.branch7x7x3_4):
            b7 = conv(b7)
        bp = _max_pool_3x3_s2(x)
        return jnp.concatenate([b3, b7, bp], axis=-1)


class InceptionE(nnx.Module):
    """8x8 block with expanded 1x3 / 3x1 filter banks.

    Args:
        in_ch: Input channels.
        w: Channel width divisor.
        rngs: Parameter rngs.
    """

    def __init__(self, in_ch: int, w: _Widths, *, rngs: nnx.Rngs) -> None:
        self.branch1x1 = BasicConv2d(in_ch, w(320), 1, rngs=rngs)
        self.branch3x3_1 = BasicConv2d(in_ch, w(384), 1, rngs=rngs)
        self.branch3x3_2a = BasicConv2d(w(384), w(384), (1, 3), padding=(0, 1), rngs=rngs)
        self.branch3x3_2b = BasicConv2d(w(384), w(384), (3, 1), padding=(1, 0), rngs=rngs)
        self.branch3x3dbl_1 = BasicConv2d(in_ch, w(448), 1, rngs=rngs)
        self.branch3x3dbl_2 = BasicConv2d(w(448), w(384), 3, padding=1, rngs=rngs)
        self.branch3x3dbl_3a = BasicConv2d(w(384), w(384), (1, 3), padding=(0, 1), rngs=rngs)
        self.branch3x3dbl_3b = BasicConv2d(w(384), w(384), (3, 1), padding=(1, 0), rngs=rngs)
        self.branch_pool = BasicConv2d(in_ch, w(192), 1, rngs=rngs)
        self.out_channels = w(320) + 4 * w(384) + w(192)

    def __call__(self, x: jax.Array) -> jax.Array:
        """Apply the block to NHWC ``x``."""
        b1 = self.branch1x1(x)
        b3 = self.branch3x3_1(x)
        b3 = jnp.concatenate([self.branch3x3_2a(b3), self.branch3x3_2b(b3)], axis=-1)
        bd = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        bd = jnp.concatenate([self.branch3x3dbl_3a(bd), self.branch3x3dbl_3b(bd)], axis=-1)
        bp = self.branch_pool(_avg_pool_3x3(x))
        return jnp.concatenate([b1, b3, bd, bp], axis=-1)


class Inception3Net(nnx.Module):
    """Inception-v3 as torchvision builds it (``transform_input=False``), no aux head.

    Args:
        num_classes: Output classes (1000 for ImageNet).
        width_divisor: Divides every channel count (1 in the paper model).
        dropout: Dropout before the final linear layer.
        rngs: Parameter and dropout rngs.
    """

    def __init__(
        self,
        num_classes: int,
        width_divisor: int = 1,
        dropout: float = DROPOUT,
        *,
        rngs: nnx.Rngs,
    ) -> None:
        w = _Widths(width_divisor)
        self.Conv2d_1a_3x3 = BasicConv2d(3, w(32), 3, stride=2, rngs=rngs)
        self.Conv2d_2a_3x3 = BasicConv2d(w(32), w(32), 3, rngs=rngs)
        self.Conv2d_2b_3x3 = BasicConv2d(w(32), w(64), 3, padding=1, rngs=rngs)
        self.Conv2d_3b_1x1 = BasicConv2d(w(64), w(80), 1, rngs=rngs)
        self.Conv2d_4a_3x3 = BasicConv2d(w(80), w(192), 3, rngs=rngs)
        self.Mixed_5b = InceptionA(w(192), 32, w, rngs=rngs)
        self.Mixed_5c = InceptionA(self.Mixed_5b.out_channels, 64, w, rngs=rngs)
        self.Mixed_5d = InceptionA(self.Mixed_5c.out_channels, 64, w, rngs=rngs)
        self.Mixed_6a = InceptionB(self.Mixed_5d.out_channels, w, rngs=rngs)
        self.Mixed_6b = InceptionC(self.Mixed_6a.out_channels, 128, w, rngs=rngs)
        self.Mixed_6c = InceptionC(self.Mixed_6b.out_channels, 160, w, rngs=rngs)
        self.Mixed_6d = InceptionC(self.Mixed_6c.out_channels, 160, w, rngs=rngs)
        self.Mixed_6e = InceptionC(self.Mixed_6d.out_channels, 192, w, rngs=rngs)
        self.Mixed_7a = InceptionD(self.Mixed_6e.out_channels, w, rngs=rngs)
        self.Mixed_7b = InceptionE(self.Mixed_7a.out_channels, w, rngs=rngs)
        self.Mixed_7c = InceptionE(self.Mixed_7b.out_channels, w, rngs=rngs)
        self.dropout = nnx.Dropout(dropout, rngs=rngs)
        features = self.Mixed_7c.out_channels
        # torchvision re-initialises only the linear weight (truncated normal); the bias
        # keeps torch's default U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
        _, bias_init = torch_linear_init(features)
        self.fc = nnx.Linear(
            features, num_classes, kernel_init=TRUNC_NORMAL_INIT, bias_init=bias_init, rngs=rngs
        )

    def __call__(self, x: jax.Array) -> jax.Array:
        """Logits (N, classes) of NHWC images ``x``."""
        x = self.Conv2d_2b_3x3(self.Conv2d_2a_3x3(self.Conv2d_1a_3x3(x)))
        x = _max_pool_3x3_s2(x)
        x = self.Conv2d_4a_3x3(self.Conv2d_3b_1x1(x))
        x = _max_pool_3x3_s2(x)
        x = self.Mixed_5d(self.Mixed_5c(self.Mixed_5b(x)))
        x = self.Mixed_6e(self.Mixed_6d(self.Mixed_6c(self.Mixed_6b(self.Mixed_6a(x)))))
        x = self.Mixed_7c(self.Mixed_7b(self.Mixed_7a(x)))
        # AdaptiveAvgPool2d(1) + flatten: the mean over the spatial axes.
        return self.fc(self.dropout(jnp.mean(x, axis=(1, 2))))


@implements("inception_v3", framework="jax")
class InceptionV3Impl(ImageClassificationJax):
    """Inception-v3 on synthetic ImageNet-shaped images (twin of the torch ``Inception3``).

    Trained without the aux head, so the inherited cross entropy on the main
    logits is the whole loss, as in the torch workload.
    """

    def build_model(self, size: SizeName, rngs: nnx.Rngs) -> nnx.Module:
        """Inception-v3 at ``size`` in training mode; the paper size has 23,834,568 parameters.

        Args:
            size: Workload size.
            rngs: Parameter and dropout rngs.

        Returns:
            The model.
        """
        cfg = INCEPTION_SIZES[size]
        return Inception3Net(cfg.classes, cfg.width_divisor, rngs=rngs)
