"""BERT-base masked-LM pretraining in Flax NNX: the twin of the torch model.

Post-LayerNorm encoder layers (eps 1e-12) with fused attention
(:func:`jax.nn.dot_product_attention`, no mask), GELU (erf) feed-forward, word +
learned position + token-type embeddings with a LayerNorm, and the masked-LM
head (dense + GELU + LayerNorm, decoder tied to the word embedding, decoder
bias): 109,514,298 parameters at the paper size. Weights N(0, 0.02), biases 0.
See :mod:`accelbench.workloads.bert`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from accelbench.backends.jax.model import JaxBatch, JaxModel
from accelbench.workloads.bert import MASK_FRACTION, BertSize
from accelbench.workloads.registry import implements
from accelbench.workloads.sizes import SizeName

INIT_STD = 0.02
_NORMAL = jax.nn.initializers.normal(INIT_STD)
#: Label of positions the loss ignores (as torch's ``ignore_index``).
IGNORE = -100


def _linear(n_in: int, n_out: int, rngs: nnx.Rngs) -> nnx.Linear:
    return nnx.Linear(n_in, n_out, kernel_init=_NORMAL, rngs=rngs)


class EncoderLayer(nnx.Module):
    """Post-LN layer: x = LN(x + attn(x)); x = LN(x + ffn(x))."""

    def __init__(self, cfg: BertSize, rngs: nnx.Rngs) -> None:
        d = cfg.d_model
        self.heads = cfg.heads
        self.q, self.k, self.v, self.o = (_linear(d, d, rngs) for _ in range(4))
        self.norm1 = nnx.LayerNorm(d, epsilon=cfg.norm_eps, rngs=rngs)
        self.up = _linear(d, cfg.ffn, rngs)
        self.down = _linear(cfg.ffn, d, rngs)
        self.norm2 = nnx.LayerNorm(d, epsilon=cfg.norm_eps, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        n, t, d = x.shape

        def heads(y: jax.Array) -> jax.Array:
            return y.reshape(n, t, self.heads, d // self.heads)

        att = jax.nn.dot_product_attention(heads(self.q(x)), heads(self.k(x)), heads(self.v(x)))
        x = self.norm1(x + self.o(att.reshape(n, t, d)))
        return self.norm2(x + self.down(jax.nn.gelu(self.up(x), approximate=False)))


class BertMLM(nnx.Module):
    """Embeddings, encoder and masked-LM head.

    Args:
        cfg: The size's configuration.
        rngs: Parameter random stream.
    """

    def __init__(self, cfg: BertSize, rngs: nnx.Rngs) -> None:
        d = cfg.d_model
        self.words = nnx.Embed(cfg.vocab, d, embedding_init=_NORMAL, rngs=rngs)
        self.positions = nnx.Embed(cfg.max_positions, d, embedding_init=_NORMAL, rngs=rngs)
        self.token_types = nnx.Embed(cfg.type_vocab, d, embedding_init=_NORMAL, rngs=rngs)
        self.embed_norm = nnx.LayerNorm(d, epsilon=cfg.norm_eps, rngs=rngs)
        self.layers = nnx.List([EncoderLayer(cfg, rngs) for _ in range(cfg.layers)])
        self.transform = _linear(d, d, rngs)
        self.transform_norm = nnx.LayerNorm(d, epsilon=cfg.norm_eps, rngs=rngs)
        self.decoder_bias = nnx.Param(jnp.zeros((cfg.vocab,), jnp.float32))

    def __call__(self, tokens: jax.Array, token_types: jax.Array) -> jax.Array:
        """MLM logits (N, T, vocab) at every position."""
        t = tokens.shape[1]
        x = self.words(tokens)
        x = x + self.positions.embedding[...][:t].astype(x.dtype) + self.token_types(token_types)
        x = self.embed_norm(x)
        for layer in self.layers:
            x = layer(x)
        x = self.transform_norm(jax.nn.gelu(self.transform(x), approximate=False))
        return self.words.attend(x) + self.decoder_bias[...].astype(x.dtype)


@implements("bert", framework="jax")
class BertImpl(JaxModel):
    """BERT masked-LM pretraining in JAX."""

    def build_model(self, size: SizeName, rngs: nnx.Rngs) -> nnx.Module:
        """BERT at ``size``; 109,514,298 parameters at paper and seq512."""
        return BertMLM(self.workload.config(size), rngs)

    def make_batch(self, size: SizeName, batch_size: int, key: jax.Array) -> JaxBatch:
        """Masked tokens, token types and labels (N, T), int32; labels -100 where unmasked."""
        self.workload.validate_batch_size(size, batch_size)
        cfg: BertSize = self.workload.config(size)
        shape = (batch_size, cfg.seq_len)
        tok_key, mask_key = jax.random.split(key)
        # The last id stands for [MASK]; the text draws from the others.
        original = jax.random.randint(tok_key, shape, 0, cfg.vocab - 1, dtype=jnp.int32)
        masked = jax.random.uniform(mask_key, shape) < MASK_FRACTION
        masked = masked.at[:, 0].set(True)  # at least one prediction per sequence
        tokens = jnp.where(masked, cfg.vocab - 1, original).astype(jnp.int32)
        labels = jnp.where(masked, original, IGNORE).astype(jnp.int32)
        # Two segments, as BERT's sentence pairs: the second half is type 1.
        types = jnp.broadcast_to(
            (jnp.arange(cfg.seq_len) >= cfg.seq_len // 2).astype(jnp.int32), shape)
        return tokens, types, labels

    def loss(self, model: nnx.Module, batch: JaxBatch) -> jax.Array:
        """Cross entropy on the masked positions, in float32."""
        tokens, types, labels = batch
        logits = model(tokens, types).astype(jnp.float32)
        weights = (labels != IGNORE).astype(jnp.float32)
        per_token = optax.softmax_cross_entropy_with_integer_labels(
            logits, jnp.where(labels == IGNORE, 0, labels))
        return (per_token * weights).sum() / weights.sum()
