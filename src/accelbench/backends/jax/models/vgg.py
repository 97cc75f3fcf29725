"""VGG-16 (Simonyan & Zisserman 2015) in Flax NNX: configuration D without BatchNorm.

The torchvision layout, parameter for parameter: 13 3x3 convs, five 2x2 max
pools, a 7x7 adaptive average pool and a three-layer classifier with dropout.
Images are NHWC in JAX (the torch twin uses NCHW).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from accelbench.backends.jax.models.resnet import KAIMING_NORMAL_FAN_OUT, ImageClassificationJax
from accelbench.workloads.images import VGG_SIZES, vgg_widths
from accelbench.workloads.registry import implements
from accelbench.workloads.sizes import SizeName

#: Side of the adaptive average pool's output, as torchvision's ``AdaptiveAvgPool2d((7, 7))``.
POOL_SIDE = 7

#: torchvision's classifier initialisation: N(0, 0.01) weights, zero bias.
LINEAR_INIT = nnx.initializers.normal(0.01)


@functools.cache
def adaptive_pool_matrix(in_size: int, out_size: int) -> np.ndarray:
    """The averaging matrix of torch's adaptive average pooling along one axis.

    Output cell ``i`` averages input cells ``floor(i * n / m)`` to
    ``ceil((i + 1) * n / m)`` (exclusive), exactly as ``AdaptiveAvgPool2d``: bins
    may overlap, and a smaller input is replicated (1 -> 7 copies the one value).

    Args:
        in_size: Input length ``n``.
        out_size: Output length ``m``.

    Returns:
        A float32 (out_size, in_size) matrix whose rows sum to 1.
    """
    matrix = np.zeros((out_size, in_size), np.float32)
    for i in range(out_size):
        start = (i * in_size) // out_size
        end = -(-((i + 1) * in_size) // out_size)  # ceil division
        matrix[i, start:end] = 1.0 / (end - start)
    return matrix


def adaptive_avg_pool(x: jax.Array, side: int) -> jax.Array:
    """torch's ``AdaptiveAvgPool2d((side, side))`` on NHWC ``x``, for any input size.

    The pooling is separable, so it is two small matmuls with constant averaging
    matrices; shapes are static under jit, so the matrices are built once in numpy.

    Args:
        x: (N, H, W, C) activations.
        side: Output height and width.

    Returns:
        (N, side, side, C) activations, in ``x``'s dtype.
    """
    _, height, width, _ = x.shape
    if height == side and width == side:
        return x  # the paper size: the pool is the identity
    rows = jnp.asarray(adaptive_pool_matrix(height, side), x.dtype)
    cols = jnp.asarray(adaptive_pool_matrix(width, side), x.dtype)
    return jnp.einsum("ih,jw,nhwc->nijc", rows, cols, x)


class VGG16Net(nnx.Module):
    """VGG-16: 13 3x3 convs with ReLU, 5 max pools, 7x7 adaptive pool, 3 linear layers.

    Args:
        num_classes: Output classes (1000 for ImageNet).
        width_divisor: Divides every conv's channel count (1 in the paper model).
        hidden: Width of the two hidden classifier layers (4096 in the paper model).
        dropout: Dropout before the second and third linear layers.
        rngs: Parameter and dropout rngs.
    """

    def __init__(
        self,
        num_classes: int,
        width_divisor: int,
        hidden: int,
        dropout: float = 0.5,
        *,
        rngs: nnx.Rngs,
    ) -> None:
        layers: list[nnx.Conv | None] = []
        in_ch = 3
        for out in vgg_widths(width_divisor):
            if out == 0:
                layers.append(None)  # a parameter-free 2x2 max pool, applied in __call__
            else:
                layers.append(
                    nnx.Conv(
                        in_ch,
                        out,
                        (3, 3),
                        padding=((1, 1), (1, 1)),
                        kernel_init=KAIMING_NORMAL_FAN_OUT,
                        bias_init=nnx.initializers.zeros_init(),
                        rngs=rngs,
                    )
                )
                in_ch = out
        self.features = nnx.List(layers)
        flat = in_ch * POOL_SIDE * POOL_SIDE
        self.fc1 = self._linear(flat, hidden, rngs)
        self.drop1 = nnx.Dropout(dropout, rngs=rngs)
        self.fc2 = self._linear(hidden, hidden, rngs)
        self.drop2 = nnx.Dropout(dropout, rngs=rngs)
        self.fc3 = self._linear(hidden, num_classes, rngs)

    @staticmethod
    def _linear(in_features: int, out_features: int, rngs: nnx.Rngs) -> nnx.Linear:
        """A classifier layer with torchvision's N(0, 0.01) weights and zero bias."""
        return nnx.Linear(
            in_features,
            out_features,
            kernel_init=LINEAR_INIT,
            bias_init=nnx.initializers.zeros_init(),
            rngs=rngs,
        )

    def __call__(self, x: jax.Array) -> jax.Array:
        """Logits (N, classes) of NHWC images ``x``."""
        for layer in self.features:
            # None marks torch's MaxPool2d(2, 2) (no padding, floor).
            x = nnx.max_pool(x, (2, 2), strides=(2, 2)) if layer is None else nnx.relu(layer(x))
        x = adaptive_avg_pool(x, POOL_SIDE)
        # torch flattens NCHW as (C, H, W); transposing first keeps the fc1 weight layout
        # (and thus a loaded or compared torch checkpoint) identical.
        x = jnp.transpose(x, (0, 3, 1, 2)).reshape(x.shape[0], -1)
        x = self.drop1(nnx.relu(self.fc1(x)))
        x = self.drop2(nnx.relu(self.fc2(x)))
        return self.fc3(x)


@implements("vgg16", framework="jax")
class VGG16Impl(ImageClassificationJax):
    """VGG-16 on synthetic ImageNet-shaped images (twin of the torch ``VGG16``)."""

    def build_model(self, size: SizeName, rngs: nnx.Rngs) -> nnx.Module:
        """VGG-16 at ``size`` in training mode; the paper size has 138,357,544 parameters.

        Args:
            size: Workload size.
            rngs: Parameter and dropout rngs.

        Returns:
            The model.
        """
        cfg = VGG_SIZES[size]
        return VGG16Net(cfg.classes, cfg.width_divisor, cfg.hidden, rngs=rngs)
