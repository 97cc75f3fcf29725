"""ResNet-50 (He et al. 2016) in Flax NNX, the torchvision v1.5 layout, plus the shared image base.

:class:`ImageClassificationJax` lives here because all three CNN workloads
(ResNet-50, VGG-16, Inception-v3) draw the same synthetic ImageNet-style batch
and use the same cross-entropy loss; only the model and the sizes differ.

Images are NHWC in JAX (the torch twin uses NCHW); shapes, strides, paddings,
initialisation and parameter counts match the torch model exactly.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from accelbench.backends.jax.model import JaxBatch, JaxModel
from accelbench.workloads.images import RESNET_SIZES, ImageClassification
from accelbench.workloads.registry import implements
from accelbench.workloads.sizes import SizeName

#: torch's ``kaiming_normal_(mode="fan_out", nonlinearity="relu")``: N(0, 2 / fan_out), not
#: truncated (jax's ``he_normal`` truncates, so it is spelled out).
KAIMING_NORMAL_FAN_OUT = nnx.initializers.variance_scaling(2.0, "fan_out", "normal")

#: torch's ``nn.BatchNorm2d`` defaults: running stats move 10% per step (flax counts the
#: other way round: the fraction kept), eps 1e-5.
BN_MOMENTUM = 0.9
BN_EPSILON = 1e-5


def torch_linear_init(fan_in: int) -> tuple[nnx.Initializer, nnx.Initializer]:
    """Kernel and bias initialisers of torch's default ``nn.Linear`` reset.

    torch draws both the weight (``kaiming_uniform_(a=sqrt(5))``) and the bias from
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)); flax's defaults (lecun normal, zero bias)
    differ, so they are given explicitly where torch leaves the default.

    Args:
        fan_in: Input features of the layer.

    Returns:
        ``(kernel_init, bias_init)``.
    """
    bound = 1.0 / math.sqrt(fan_in)

    def init(key: jax.Array, shape: Any, dtype: Any = jnp.float32) -> jax.Array:
        return jax.random.uniform(key, shape, dtype, minval=-bound, maxval=bound)

    return init, init


def batch_norm(features: int, rngs: nnx.Rngs) -> nnx.BatchNorm:
    """A training-mode BatchNorm with torch's ``nn.BatchNorm2d`` defaults (scale 1, bias 0).

    Args:
        features: Channels (last axis).
        rngs: Parameter rngs (BatchNorm draws none, but NNX requires them).

    Returns:
        The layer, normalising with batch statistics.
    """
    return nnx.BatchNorm(
        features,
        use_running_average=False,
        momentum=BN_MOMENTUM,
        epsilon=BN_EPSILON,
        rngs=rngs,
    )


class ImageClassificationJax(JaxModel):
    """Base of the CNN implementations: random NHWC images, random labels, cross entropy.

    Subclasses define :meth:`build_model`; the model maps (N, H, W, 3) images to
    (N, classes) logits.
    """

    def _description(self) -> ImageClassification:
        """The workload description, typed (the registry pairs image impls with image workloads).

        Returns:
            ``self.workload`` as an :class:`ImageClassification`.

        Raises:
            TypeError: The implementation was paired with another kind of workload.
        """
        wl = self.workload
        if not isinstance(wl, ImageClassification):
            raise TypeError(f"{type(self).__name__} needs an image workload, got {wl!r}")
        return wl

    def make_batch(self, size: SizeName, batch_size: int, key: jax.Array) -> JaxBatch:
        """Standard-normal float32 images (N, H, W, 3) and uniform int32 labels (N,).

        Args:
            size: Workload size.
            batch_size: Images per step.
            key: PRNG key; split between images and labels.

        Returns:
            ``(images, labels)``.
        """
        wl = self._description()
        wl.validate_batch_size(size, batch_size)
        side = wl.image_size(size)
        image_key, label_key = jax.random.split(key)
        images = jax.random.normal(image_key, (batch_size, side, side, 3), jnp.float32)
        labels = jax.random.randint(
            label_key, (batch_size,), 0, wl.num_classes(size), dtype=jnp.int32
        )
        return images, labels

    def loss(self, model: nnx.Module, batch: JaxBatch) -> jax.Array:
        """Mean softmax cross entropy of the logits against the integer labels.

        Args:
            model: The network built by :meth:`build_model`.
            batch: ``(images, labels)`` from :meth:`make_batch`.

        Returns:
            Scalar float32 loss.
        """
        images, labels = batch
        logits = model(images)
        # Under mixed precision the logits are low precision; the loss is reduced in fp32.
        losses = optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), labels)
        return jnp.mean(losses)


def conv(
    in_ch: int,
    out_ch: int,
    kernel: int,
    *,
    stride: int = 1,
    padding: int = 0,
    rngs: nnx.Rngs,
) -> nnx.Conv:
    """A bias-free square conv with torch's explicit symmetric padding and kaiming init.

    Args:
        in_ch: Input channels.
        out_ch: Output channels.
        kernel: Kernel side.
        stride: Stride in both dimensions.
        padding: Zero padding on every side (torch's ``padding=p``; never "SAME").
        rngs: Parameter rngs.

    Returns:
        The conv layer.
    """
    return nnx.Conv(
        in_ch,
        out_ch,
        (kernel, kernel),
        strides=(stride, stride),
        padding=((padding, padding), (padding, padding)),
        use_bias=False,
        kernel_init=KAIMING_NORMAL_FAN_OUT,
        rngs=rngs,
    )


class Bottleneck(nnx.Module):
    """1x1 reduce, 3x3 (carries the stride, as torchvision v1.5), 1x1 expand, residual.

    Args:
        in_planes: Input channels.
        planes: Bottleneck channels; the block outputs ``planes * expansion``.
        stride: Stride of the 3x3 conv and of the projection shortcut.
        rngs: Parameter rngs.
    """

    expansion: ClassVar[int] = 4

    def __init__(self, in_planes: int, planes: int, stride: int, *, rngs: nnx.Rngs) -> None:
        out_planes = planes * self.expansion
        self.conv1 = conv(in_planes, planes, 1, rngs=rngs)
        self.bn1 = batch_norm(planes, rngs)
        self.conv2 = conv(planes, planes, 3, stride=stride, padding=1, rngs=rngs)
        self.bn2 = batch_norm(planes, rngs)
        self.conv3 = conv(planes, out_planes, 1, rngs=rngs)
        self.bn3 = batch_norm(out_planes, rngs)
        # Assigned once: NNX fixes an attribute as data (a module) or static (None) on
        # first assignment.
        self.downsample: nnx.Sequential | None = (
            nnx.Sequential(
                conv(in_planes, out_planes, 1, stride=stride, rngs=rngs),
                batch_norm(out_planes, rngs),
            )
            if stride != 1 or in_planes != out_planes
            else None
        )

    def __call__(self, x: jax.Array) -> jax.Array:
        """Apply the block to NHWC ``x``."""
        identity = x if self.downsample is None else self.downsample(x)
        out = nnx.relu(self.bn1(self.conv1(x)))
        out = nnx.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return nnx.relu(out + identity)


class ResNet50Net(nnx.Module):
    """ResNet-50: stem, four stages of (3, 4, 6, 3) bottlenecks, global pool, linear.

    Args:
        num_classes: Output classes (1000 for ImageNet).
        width: Planes of the first stage (64 in the paper model); later stages
            double it, so a smaller width shrinks the whole network uniformly.
        rngs: Parameter rngs.
    """

    def __init__(self, num_classes: int, width: int, *, rngs: nnx.Rngs) -> None:
        self.conv1 = conv(3, width, 7, stride=2, padding=3, rngs=rngs)
        self.bn1 = batch_norm(width, rngs)
        in_planes = width
        stages: list[nnx.Sequential] = []
        for i, blocks in enumerate((3, 4, 6, 3)):
            planes = width * 2**i
            layers: list[Bottleneck] = []
            for j in range(blocks):
                stride = 2 if i > 0 and j == 0 else 1
                layers.append(Bottleneck(in_planes, planes, stride, rngs=rngs))
                in_planes = planes * Bottleneck.expansion
            stages.append(nnx.Sequential(*layers))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        kernel_init, bias_init = torch_linear_init(in_planes)
        self.fc = nnx.Linear(
            in_planes, num_classes, kernel_init=kernel_init, bias_init=bias_init, rngs=rngs
        )

    def __call__(self, x: jax.Array) -> jax.Array:
        """Logits (N, classes) of NHWC images ``x``."""
        x = nnx.relu(self.bn1(self.conv1(x)))
        # torch's MaxPool2d(3, 2, padding=1) pads with -inf, as flax's max_pool does.
        x = nnx.max_pool(x, (3, 3), strides=(2, 2), padding=((1, 1), (1, 1)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        # AdaptiveAvgPool2d(1) + flatten: the mean over the spatial axes.
        return self.fc(jnp.mean(x, axis=(1, 2)))


@implements("resnet50", framework="jax")
class ResNet50Impl(ImageClassificationJax):
    """ResNet-50 on synthetic ImageNet-shaped images (twin of the torch ``ResNet50``)."""

    def build_model(self, size: SizeName, rngs: nnx.Rngs) -> nnx.Module:
        """ResNet-50 at ``size`` in training mode; the paper size has 25,557,032 parameters.

        Args:
            size: Workload size.
            rngs: Parameter rngs.

        Returns:
            The model.
        """
        cfg = RESNET_SIZES[size]
        return ResNet50Net(cfg.classes, cfg.width, rngs=rngs)
