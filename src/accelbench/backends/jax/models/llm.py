"""A decoder-only language model in Flax NNX: the twin of the torch model.

``style="llama"`` (TinyLlama-1.1B at the paper size, 1,100,048,384 parameters):
pre-norm RMSNorm, rotary positions, grouped-query causal attention through
:func:`jax.nn.dot_product_attention` (``is_causal=True``), SwiGLU MLP, no
biases, untied output projection. ``style="gpt2"`` (GPT-2 small, 124,439,808
parameters): learned positions, pre-LayerNorm, GELU (tanh) MLP with biases,
output projection tied to the token embedding. Weights N(0, 0.02), biases 0,
the same parameter for parameter as the torch model. See
:mod:`accelbench.workloads.llm` for the sizes.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from accelbench.backends.jax.model import JaxBatch, JaxModel
from accelbench.workloads.llm import LLMSize
from accelbench.workloads.registry import implements
from accelbench.workloads.sizes import SizeName

INIT_STD = 0.02
_NORMAL = jax.nn.initializers.normal(INIT_STD)


def rotary_tables(seq_len: int, head_dim: int, base: float = 10_000.0
                  ) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin tables (seq_len, head_dim) of rotary positions (Llama's half layout)."""
    inv = 1.0 / (base ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim))
    angles = np.outer(np.arange(seq_len, dtype=np.float32), inv)
    angles = np.concatenate((angles, angles), axis=-1)
    return np.cos(angles), np.sin(angles)


def apply_rotary(x: jax.Array, cos: np.ndarray, sin: np.ndarray) -> jax.Array:
    """Rotate ``x`` (N, T, heads, head_dim) by the position tables (T, head_dim)."""
    half = x.shape[-1] // 2
    rotated = jnp.concatenate((-x[..., half:], x[..., :half]), axis=-1)
    c = jnp.asarray(cos, x.dtype)[:, None, :]
    s = jnp.asarray(sin, x.dtype)[:, None, :]
    return x * c + rotated * s


def _linear(n_in: int, n_out: int, bias: bool, rngs: nnx.Rngs) -> nnx.Linear:
    return nnx.Linear(n_in, n_out, use_bias=bias, kernel_init=_NORMAL, rngs=rngs)


def _norm(cfg: LLMSize, rngs: nnx.Rngs) -> nnx.Module:
    if cfg.style == "llama":
        return nnx.RMSNorm(cfg.d_model, epsilon=cfg.norm_eps, rngs=rngs)
    return nnx.LayerNorm(cfg.d_model, epsilon=cfg.norm_eps, rngs=rngs)


class Attention(nnx.Module):
    """Causal self-attention; grouped-query when ``kv_heads < heads``."""

    def __init__(self, cfg: LLMSize, rngs: nnx.Rngs) -> None:
        bias = cfg.style == "gpt2"
        self.heads, self.kv_heads, self.head_dim = cfg.heads, cfg.kv_heads, cfg.head_dim
        kv = cfg.kv_heads * cfg.head_dim
        self.q = _linear(cfg.d_model, cfg.d_model, bias, rngs)
        self.k = _linear(cfg.d_model, kv, bias, rngs)
        self.v = _linear(cfg.d_model, kv, bias, rngs)
        self.o = _linear(cfg.d_model, cfg.d_model, bias, rngs)
        self.rotary = cfg.style == "llama"

    def __call__(self, x: jax.Array, cos: np.ndarray, sin: np.ndarray) -> jax.Array:
        n, t, d = x.shape
        q = self.q(x).reshape(n, t, self.heads, self.head_dim)
        k = self.k(x).reshape(n, t, self.kv_heads, self.head_dim)
        v = self.v(x).reshape(n, t, self.kv_heads, self.head_dim)
        if self.rotary:
            q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        # Grouped-query attention natively: query head h uses key/value head
        # h // (heads // kv_heads), as torch's repeat_interleave does.
        out = jax.nn.dot_product_attention(q, k, v, is_causal=True)
        return self.o(out.reshape(n, t, d))


class MLP(nnx.Module):
    """SwiGLU (llama) or GELU-tanh 4x (gpt2) feed-forward."""

    def __init__(self, cfg: LLMSize, rngs: nnx.Rngs) -> None:
        self.swiglu = cfg.style == "llama"
        bias = not self.swiglu
        self.up = _linear(cfg.d_model, cfg.ffn, bias, rngs)
        self.gate = _linear(cfg.d_model, cfg.ffn, False, rngs) if self.swiglu else None
        self.down = _linear(cfg.ffn, cfg.d_model, bias, rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        if self.gate is not None:
            return self.down(jax.nn.silu(self.gate(x)) * self.up(x))
        return self.down(jax.nn.gelu(self.up(x), approximate=True))


class Block(nnx.Module):
    """Pre-norm decoder layer."""

    def __init__(self, cfg: LLMSize, rngs: nnx.Rngs) -> None:
        self.norm1, self.attn = _norm(cfg, rngs), Attention(cfg, rngs)
        self.norm2, self.mlp = _norm(cfg, rngs), MLP(cfg, rngs)

    def __call__(self, x: jax.Array, cos: np.ndarray, sin: np.ndarray) -> jax.Array:
        x = x + self.attn(self.norm1(x), cos, sin)
        return x + self.mlp(self.norm2(x))


class LLMModel(nnx.Module):
    """Token embedding, decoder layers, final norm, output projection.

    Args:
        cfg: The size's configuration.
        rngs: Parameter random stream.
    """

    def __init__(self, cfg: LLMSize, rngs: nnx.Rngs) -> None:
        self.cfg = cfg
        self.embed = nnx.Embed(cfg.vocab, cfg.d_model, embedding_init=_NORMAL, rngs=rngs)
        self.positions = (nnx.Embed(cfg.seq_len, cfg.d_model, embedding_init=_NORMAL, rngs=rngs)
                          if cfg.style == "gpt2" else None)
        self.blocks = nnx.List([Block(cfg, rngs) for _ in range(cfg.layers)])
        self.norm = _norm(cfg, rngs)
        self.head = None if cfg.tied else _linear(cfg.d_model, cfg.vocab, False, rngs)

    def __call__(self, tokens: jax.Array) -> jax.Array:
        """Logits (N, T, vocab) for tokens (N, T)."""
        t = tokens.shape[1]
        x = self.embed(tokens)
        if self.positions is not None:
            x = x + self.positions.embedding[...][:t].astype(x.dtype)
        # Trace-time constants: rotary tables are fixed, not parameters.
        cos, sin = rotary_tables(t, self.cfg.head_dim)
        for block in self.blocks:
            x = block(x, cos, sin)
        x = self.norm(x)
        return self.embed.attend(x) if self.head is None else self.head(x)


@implements("llm", framework="jax")
class LLMImpl(JaxModel):
    """The decoder-only LM in JAX: next-token cross entropy on random sequences."""

    def build_model(self, size: SizeName, rngs: nnx.Rngs) -> nnx.Module:
        """The model at ``size``; paper: 1,100,048,384 parameters, gpt2: 124,439,808."""
        return LLMModel(self.workload.config(size), rngs)

    def make_batch(self, size: SizeName, batch_size: int, key: jax.Array) -> JaxBatch:
        """Tokens (S, T) and next tokens (S, T), int32, S = batch_size // T sequences."""
        self.workload.validate_batch_size(size, batch_size)
        cfg: LLMSize = self.workload.config(size)
        seqs = batch_size // cfg.seq_len
        data = jax.random.randint(key, (seqs, cfg.seq_len + 1), 0, cfg.vocab, dtype=jnp.int32)
        return data[:, :-1], data[:, 1:]

    def loss(self, model: nnx.Module, batch: JaxBatch) -> jax.Array:
        """Cross entropy of the next token, averaged over tokens, in float32."""
        tokens, labels = batch
        logits = model(tokens).astype(jnp.float32)
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
