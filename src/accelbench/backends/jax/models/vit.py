"""ViT-B/16 in Flax NNX: the twin of the torch model (86,567,656 parameters at 224).

Patch embedding by a strided convolution with bias (images NHWC, as the other
JAX image models), class token, learned positions, pre-LayerNorm layers (eps
1e-6) with fused attention (:func:`jax.nn.dot_product_attention`) and GELU
(erf) MLPs, final LayerNorm, linear head on the class token. Weights
N(0, 0.02), biases and class token 0. See :mod:`accelbench.workloads.vit`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from accelbench.backends.jax.model import JaxBatch, JaxModel
from accelbench.workloads.registry import implements
from accelbench.workloads.sizes import SizeName
from accelbench.workloads.vit import ViTSize

INIT_STD = 0.02
_NORMAL = jax.nn.initializers.normal(INIT_STD)


def _linear(n_in: int, n_out: int, rngs: nnx.Rngs) -> nnx.Linear:
    return nnx.Linear(n_in, n_out, kernel_init=_NORMAL, rngs=rngs)


class Block(nnx.Module):
    """Pre-LN layer: x += attn(LN(x)); x += mlp(LN(x))."""

    def __init__(self, cfg: ViTSize, rngs: nnx.Rngs) -> None:
        d = cfg.d_model
        self.heads = cfg.heads
        #: The fused qkv's column layout: 1, ``[q | k | v]`` (each by heads); g (tensor
        #: parallelism over g devices), ``[q_0 k_0 v_0 | ... | q_g-1 k_g-1 v_g-1]``, ``_r``
        #: device r's heads (:func:`accelbench.backends.jax.sharding.heads_by_device`).
        self.head_groups = 1
        self.norm1 = nnx.LayerNorm(d, epsilon=cfg.norm_eps, rngs=rngs)
        self.qkv = _linear(d, 3 * d, rngs)
        self.proj = _linear(d, d, rngs)
        self.norm2 = nnx.LayerNorm(d, epsilon=cfg.norm_eps, rngs=rngs)
        self.fc1 = _linear(d, cfg.mlp, rngs)
        self.fc2 = _linear(cfg.mlp, d, rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        n, t, d = x.shape
        if self.head_groups == 1:
            qkv = self.qkv(self.norm1(x)).reshape(n, t, 3, self.heads, d // self.heads)
            att = jax.nn.dot_product_attention(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2])
        else:
            # Device r's column share is q, k and v of its own heads: no reshuffle.
            g = self.head_groups
            qkv = self.qkv(self.norm1(x)).reshape(n, t, g, 3, self.heads // g, d // self.heads)
            q, k, v = (qkv[:, :, :, i].reshape(n, t, self.heads, d // self.heads)
                       for i in range(3))
            att = jax.nn.dot_product_attention(q, k, v)
        x = x + self.proj(att.reshape(n, t, d))
        return x + self.fc2(jax.nn.gelu(self.fc1(self.norm2(x)), approximate=False))


class ViTModel(nnx.Module):
    """Vision transformer classifier.

    Args:
        cfg: The size's configuration.
        rngs: Parameter random stream.
    """

    def __init__(self, cfg: ViTSize, rngs: nnx.Rngs) -> None:
        d = cfg.d_model
        self.patch = nnx.Conv(cfg.channels, d, (cfg.patch, cfg.patch),
                              strides=(cfg.patch, cfg.patch), padding="VALID",
                              kernel_init=_NORMAL, rngs=rngs)
        self.cls = nnx.Param(jnp.zeros((1, 1, d), jnp.float32))
        self.positions = nnx.Param(_NORMAL(rngs.params(), (1, cfg.tokens, d), jnp.float32))
        self.blocks = nnx.List([Block(cfg, rngs) for _ in range(cfg.layers)])
        self.norm = nnx.LayerNorm(d, epsilon=cfg.norm_eps, rngs=rngs)
        self.head = _linear(d, cfg.classes, rngs)

    def __call__(self, images: jax.Array) -> jax.Array:
        """Logits (N, classes) for images (N, H, W, C)."""
        x = self.patch(images)
        n = x.shape[0]
        x = x.reshape(n, -1, x.shape[-1])
        cls = jnp.broadcast_to(self.cls[...].astype(x.dtype), (n, 1, x.shape[-1]))
        x = jnp.concatenate((cls, x), axis=1) + self.positions[...].astype(x.dtype)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x[:, 0]))


@implements("vit", framework="jax")
class ViTImpl(JaxModel):
    """ViT in JAX."""

    def build_model(self, size: SizeName, rngs: nnx.Rngs) -> nnx.Module:
        """ViT at ``size``; 86,567,656 parameters at paper size."""
        return ViTModel(self.workload.config(size), rngs)

    def make_batch(self, size: SizeName, batch_size: int, key: jax.Array) -> JaxBatch:
        """Standard-normal float32 images (N, H, W, C) and int32 labels (N,)."""
        self.workload.validate_batch_size(size, batch_size)
        cfg: ViTSize = self.workload.config(size)
        image_key, label_key = jax.random.split(key)
        images = jax.random.normal(image_key, (batch_size, cfg.image, cfg.image, cfg.channels),
                                   jnp.float32)
        labels = jax.random.randint(label_key, (batch_size,), 0, cfg.classes, dtype=jnp.int32)
        return images, labels

    def loss(self, model: nnx.Module, batch: JaxBatch) -> jax.Array:
        """Cross entropy over the classes, in float32."""
        images, labels = batch
        logits = model(images).astype(jnp.float32)
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
