"""Transformer-base (Vaswani et al. 2017) encoder-decoder in Flax NNX.

A parameter-for-parameter twin of the torch model: post-LayerNorm layers built
exactly as :class:`torch.nn.TransformerEncoderLayer` and
:class:`torch.nn.TransformerDecoderLayer` build them (ReLU feed-forward,
dropout on attention weights, after attention, inside and after the
feed-forward, LayerNorm eps 1e-5, a packed and biased in-projection and a
biased out-projection per attention), sinusoidal positions, and one embedding
matrix shared by source, target and the output projection (no output bias).
There is no final LayerNorm after either stack.

The batch size counts tokens: every sentence pair has ``seq_len`` source and
``seq_len`` target tokens, so a batch of ``B`` tokens holds ``B // seq_len`` pairs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from accelbench.backends.jax.model import JaxBatch, JaxModel
from accelbench.workloads.registry import implements
from accelbench.workloads.sizes import SizeName
from accelbench.workloads.transformer import DROPOUT, LABEL_SMOOTHING, TransformerSize

#: The initialiser signature of :mod:`jax.nn.initializers`.
Initializer = Callable[..., jax.Array]

# nn.Transformer's initialisation: Xavier-uniform on every matrix. The in-projection
# is one (d, 3d) matrix in torch, so its bound is sqrt(6 / 4d), not that of three (d, d).
_XAVIER = jax.nn.initializers.xavier_uniform()


def _torch_bias_init(fan_in: int) -> Initializer:
    """torch.nn.Linear's default bias initialiser, U(-1/sqrt(fan_in), 1/sqrt(fan_in)).

    Args:
        fan_in: Input features of the layer.

    Returns:
        An initialiser with the :mod:`jax.nn.initializers` signature.
    """
    bound = 1.0 / math.sqrt(fan_in)

    def init(key: jax.Array, shape: Any, dtype: Any = jnp.float32) -> jax.Array:
        return jax.random.uniform(key, shape, dtype, -bound, bound)

    return init


def sinusoidal_positions(length: int, d_model: int) -> np.ndarray:
    """The fixed (length, d_model) sine/cosine position table of the original paper.

    Computed in float32 in the same order of operations as the torch model's table.

    Args:
        length: Positions covered.
        d_model: Model width (even).

    Returns:
        A float32 array; even columns hold sines, odd columns cosines.
    """
    pos = np.arange(length, dtype=np.float32)[:, None]
    freq = np.exp(
        np.arange(0, d_model, 2, dtype=np.float32) * np.float32(-math.log(10000.0) / d_model)
    )
    table = np.zeros((length, d_model), dtype=np.float32)
    table[:, 0::2] = np.sin(pos * freq)
    table[:, 1::2] = np.cos(pos * freq)
    return table


def attention_with_dropout(
    q: jax.Array, k: jax.Array, v: jax.Array, causal: bool, dropout: nnx.Dropout
) -> jax.Array:
    """Scaled dot-product attention with dropout on the attention weights.

    The unfused path, used only while attention dropout is active:
    :func:`jax.nn.dot_product_attention` cannot drop attention weights, and
    torch's MultiheadAttention does in training.

    Args:
        q: Queries (N, T, heads, head_dim).
        k: Keys (N, S, heads, head_dim).
        v: Values (N, S, heads, head_dim).
        causal: Whether query t may only attend to keys 0..t.
        dropout: Dropout applied to the softmax probabilities.

    Returns:
        The attended values (N, T, heads, head_dim), in q's dtype.
    """
    scale = 1.0 / math.sqrt(q.shape[-1])
    logits = jnp.einsum("nthd,nshd->nhts", q, k) * scale
    # Softmax in float32, as jax.nn.dot_product_attention does, so bfloat16 stays stable.
    logits = logits.astype(jnp.float32)
    if causal:
        t, s = logits.shape[-2:]
        allowed = jnp.tril(jnp.ones((t, s), dtype=bool))
        logits = jnp.where(allowed, logits, jnp.finfo(jnp.float32).min)
    weights = dropout(jax.nn.softmax(logits, axis=-1).astype(q.dtype))
    return jnp.einsum("nhts,nshd->nthd", weights, v)


class MultiHeadAttention(nnx.Module):
    """torch.nn.MultiheadAttention (batch first): packed in-projection, out-projection, biases.

    Args:
        d_model: Model width.
        heads: Attention heads; ``d_model`` must be divisible by it.
        dropout: Dropout rate on the attention weights.
        rngs: Parameter and dropout random streams.
    """

    def __init__(self, d_model: int, heads: int, dropout: float, rngs: nnx.Rngs) -> None:
        self.d_model = d_model
        self.heads = heads
        #: The in-projection's column layout: 1, ``[q | k | v]`` (each by heads); g (tensor
        #: parallelism over g devices), ``[q_0 k_0 v_0 | ... | q_g-1 k_g-1 v_g-1]``, ``_r``
        #: device r's heads (:func:`accelbench.backends.jax.sharding.heads_by_device`).
        self.head_groups = 1
        # One (d, 3d) kernel as torch's in_proj_weight (transposed), so the Xavier
        # bound and the parameter layout match; q, k, v are its column blocks.
        self.in_kernel = nnx.Param(_XAVIER(rngs.params(), (d_model, 3 * d_model), jnp.float32))
        self.in_bias = nnx.Param(jnp.zeros((3 * d_model,), jnp.float32))
        self.out_proj = nnx.Linear(
            d_model,
            d_model,
            kernel_init=_XAVIER,
            bias_init=jax.nn.initializers.zeros,  # MultiheadAttention zeroes it.
            rngs=rngs,
        )
        self.dropout = nnx.Dropout(dropout, rngs=rngs)

    def _project(self, x: jax.Array, part: int) -> jax.Array:
        """Project ``x`` (N, L, d) by the in-projection's columns of q (``part`` 0), k (1) or
        v (2) into heads."""
        d, g = self.d_model, self.head_groups
        if g == 1:
            block = slice(part * d, (part + 1) * d)
            kernel = self.in_kernel[...][:, block].astype(x.dtype)
            bias = self.in_bias[...][block].astype(x.dtype)
        else:
            # Each device's column share holds its heads' q, k and v: take the part from each.
            kernel = self.in_kernel[...].reshape(d, g, 3, d // g)[:, :, part].reshape(d, d)
            kernel = kernel.astype(x.dtype)
            bias = self.in_bias[...].reshape(g, 3, d // g)[:, part].reshape(d).astype(x.dtype)
        y = x @ kernel + bias
        # Head h owns features h*head_dim:(h+1)*head_dim, as in torch's view.
        return y.reshape(*y.shape[:2], self.heads, -1)

    def __call__(self, query: jax.Array, memory: jax.Array, causal: bool = False) -> jax.Array:
        """Attend from ``query`` (N, T, d) to ``memory`` (N, S, d); (N, T, d) out.

        Pass the same array twice for self-attention.
        """
        d = self.d_model
        q = self._project(query, 0)
        k = self._project(memory, 1)
        v = self._project(memory, 2)
        if self.dropout.deterministic or self.dropout.rate == 0.0:
            # The fused path XLA (and cuDNN) can use; scale 1/sqrt(head_dim) as torch.
            out = jax.nn.dot_product_attention(q, k, v, is_causal=causal)
        else:
            out = attention_with_dropout(q, k, v, causal, self.dropout)
        n, t = out.shape[:2]
        return self.out_proj(out.reshape(n, t, d))


class FeedForward(nnx.Module):
    """linear1 -> ReLU -> dropout -> linear2, as in torch's Transformer layers.

    Args:
        d_model: Model width.
        ffn: Inner width.
        dropout: Dropout rate between the two linears.
        rngs: Parameter and dropout random streams.
    """

    def __init__(self, d_model: int, ffn: int, dropout: float, rngs: nnx.Rngs) -> None:
        self.linear1 = nnx.Linear(
            d_model, ffn, kernel_init=_XAVIER, bias_init=_torch_bias_init(d_model), rngs=rngs
        )
        self.dropout = nnx.Dropout(dropout, rngs=rngs)
        self.linear2 = nnx.Linear(
            ffn, d_model, kernel_init=_XAVIER, bias_init=_torch_bias_init(ffn), rngs=rngs
        )

    def __call__(self, x: jax.Array) -> jax.Array:
        """Apply the feed-forward block to ``x`` (..., d_model)."""
        return self.linear2(self.dropout(jax.nn.relu(self.linear1(x))))


def _layer_norm(d_model: int, rngs: nnx.Rngs) -> nnx.LayerNorm:
    """torch.nn.LayerNorm(d_model): eps 1e-5, scale and bias."""
    return nnx.LayerNorm(d_model, epsilon=1e-5, rngs=rngs)


class EncoderLayer(nnx.Module):
    """Post-LayerNorm encoder layer, as torch.nn.TransformerEncoderLayer (norm_first=False).

    Args:
        d_model: Model width.
        heads: Attention heads.
        ffn: Feed-forward inner width.
        dropout: Dropout rate everywhere torch applies it.
        rngs: Parameter and dropout random streams.
    """

    def __init__(self, d_model: int, heads: int, ffn: int, dropout: float, rngs: nnx.Rngs) -> None:
        self.self_attn = MultiHeadAttention(d_model, heads, dropout, rngs)
        self.ff = FeedForward(d_model, ffn, dropout, rngs)
        self.norm1 = _layer_norm(d_model, rngs)
        self.norm2 = _layer_norm(d_model, rngs)
        self.dropout1 = nnx.Dropout(dropout, rngs=rngs)
        self.dropout2 = nnx.Dropout(dropout, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        """Encode ``x`` (N, S, d_model)."""
        x = self.norm1(x + self.dropout1(self.self_attn(x, x)))
        return self.norm2(x + self.dropout2(self.ff(x)))


class DecoderLayer(nnx.Module):
    """Post-LayerNorm decoder layer, as torch.nn.TransformerDecoderLayer (norm_first=False).

    Args:
        d_model: Model width.
        heads: Attention heads.
        ffn: Feed-forward inner width.
        dropout: Dropout rate everywhere torch applies it.
        rngs: Parameter and dropout random streams.
    """

    def __init__(self, d_model: int, heads: int, ffn: int, dropout: float, rngs: nnx.Rngs) -> None:
        self.self_attn = MultiHeadAttention(d_model, heads, dropout, rngs)
        self.cross_attn = MultiHeadAttention(d_model, heads, dropout, rngs)
        self.ff = FeedForward(d_model, ffn, dropout, rngs)
        self.norm1 = _layer_norm(d_model, rngs)
        self.norm2 = _layer_norm(d_model, rngs)
        self.norm3 = _layer_norm(d_model, rngs)
        self.dropout1 = nnx.Dropout(dropout, rngs=rngs)
        self.dropout2 = nnx.Dropout(dropout, rngs=rngs)
        self.dropout3 = nnx.Dropout(dropout, rngs=rngs)

    def __call__(self, x: jax.Array, memory: jax.Array) -> jax.Array:
        """Decode ``x`` (N, T, d_model) against the encoder output ``memory`` (N, S, d_model)."""
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, causal=True)))
        x = self.norm2(x + self.dropout2(self.cross_attn(x, memory)))
        return self.norm3(x + self.dropout3(self.ff(x)))


class TransformerModel(nnx.Module):
    """Encoder-decoder Transformer with one embedding for source, target and output.

    Args:
        cfg: Vocabulary, widths, depth (each stack) and sequence length.
        dropout: Dropout on embeddings, attention and feed-forward.
        rngs: Parameter and dropout random streams.
    """

    def __init__(self, cfg: TransformerSize, dropout: float, rngs: nnx.Rngs) -> None:
        d = cfg.d_model
        self.d_model = d
        # N(0, d^-0.5) so that, scaled by sqrt(d), embedded tokens have unit variance.
        self.embedding = nnx.Embed(
            cfg.vocab, d, embedding_init=jax.nn.initializers.normal(d**-0.5), rngs=rngs
        )
        self.drop = nnx.Dropout(dropout, rngs=rngs)
        self.encoder = nnx.List(
            [EncoderLayer(d, cfg.heads, cfg.ffn, dropout, rngs) for _ in range(cfg.layers)]
        )
        self.decoder = nnx.List(
            [DecoderLayer(d, cfg.heads, cfg.ffn, dropout, rngs) for _ in range(cfg.layers)]
        )

    def _embed(self, tokens: jax.Array) -> jax.Array:
        x = self.embedding(tokens)
        # A trace-time constant, not a parameter: positions are fixed and not trained.
        pos = jnp.asarray(sinusoidal_positions(tokens.shape[1], self.d_model), dtype=x.dtype)
        return self.drop(x * math.sqrt(self.d_model) + pos)

    def __call__(self, src: jax.Array, tgt_in: jax.Array) -> jax.Array:
        """Logits (N, T, vocab) for source tokens (N, S) and shifted target tokens (N, T)."""
        memory = self._embed(src)
        for enc in self.encoder:
            memory = enc(memory)
        x = self._embed(tgt_in)
        for dec in self.decoder:
            x = dec(x, memory)
        # Tied output projection: logits against the embedding matrix, no bias.
        return self.embedding.attend(x)


@implements("transformer", framework="jax")
class TransformerImpl(JaxModel):
    """The Transformer workload in JAX: label-smoothed cross entropy on random sentence pairs."""

    def build_model(self, size: SizeName, rngs: nnx.Rngs) -> nnx.Module:
        """The Transformer at ``size`` in training mode; the paper size has 60,915,712
        parameters."""
        cfg: TransformerSize = self.workload.config(size)
        return TransformerModel(cfg, DROPOUT, rngs)

    def make_batch(self, size: SizeName, batch_size: int, key: jax.Array) -> JaxBatch:
        """Source (P, L), decoder input (P, L) and labels (P, L), int32, P = batch_size // L."""
        self.workload.validate_batch_size(size, batch_size)
        cfg: TransformerSize = self.workload.config(size)
        pairs = batch_size // cfg.seq_len
        src_key, tgt_key = jax.random.split(key)
        src = jax.random.randint(src_key, (pairs, cfg.seq_len), 0, cfg.vocab, dtype=jnp.int32)
        # One extra target token: the decoder reads tokens 0..L-1 and predicts 1..L.
        tgt = jax.random.randint(tgt_key, (pairs, cfg.seq_len + 1), 0, cfg.vocab, dtype=jnp.int32)
        return src, tgt[:, :-1], tgt[:, 1:]

    def loss(self, model: nnx.Module, batch: JaxBatch) -> jax.Array:
        """Cross entropy with label smoothing 0.1, averaged over target tokens.

        Torch's ``label_smoothing=eps`` targets ``(1 - eps) * one_hot + eps / vocab``,
        which is what :func:`optax.smooth_labels` builds.
        """
        src, tgt_in, labels = batch
        logits = model(src, tgt_in).astype(jnp.float32)
        targets = optax.smooth_labels(
            jax.nn.one_hot(labels, logits.shape[-1], dtype=jnp.float32), LABEL_SMOOTHING
        )
        return optax.softmax_cross_entropy(logits, targets).mean()
