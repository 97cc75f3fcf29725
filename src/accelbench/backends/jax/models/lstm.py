"""2-layer LSTM language model (Zaremba et al. 2014, PTB "large") in Flax NNX, tied embeddings.

A parameter-for-parameter twin of the torch model: embedding, dropout, a
stack of :class:`LSTMLayer` (laid out exactly as :class:`torch.nn.LSTM`: gate
order i, f, g, o, ``weight_ih`` (4h, in), ``weight_hh`` (4h, h) and the two
bias vectors ``bias_ih`` and ``bias_hh``) with dropout between layers,
dropout, and a decoder whose weight is the embedding matrix plus its own bias.
At paper size: 15,000,000 + 2 x 18,012,000 + 10,000 = 51,034,000 parameters.

:class:`LSTMLayer` is also the recurrent layer of Deep Speech 2.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from accelbench.backends.jax.model import JaxBatch, JaxModel
from accelbench.workloads.lstm import INIT_RANGE, LSTM_LAYERS, LSTMSize
from accelbench.workloads.registry import implements
from accelbench.workloads.sizes import SizeName

#: The initialiser signature of :mod:`jax.nn.initializers`.
Initializer = Callable[..., jax.Array]


def uniform_init(bound: float) -> Initializer:
    """An initialiser drawing from U(-bound, bound), as torch's ``nn.init.uniform_``.

    Args:
        bound: Half-width of the interval.

    Returns:
        An initialiser with the :mod:`jax.nn.initializers` signature.
    """

    def init(key: jax.Array, shape: Any, dtype: Any = jnp.float32) -> jax.Array:
        return jax.random.uniform(key, shape, dtype, minval=-bound, maxval=bound)

    return init


class LSTMLayer(nnx.Module):
    """One direction of one :class:`torch.nn.LSTM` layer, run with :func:`jax.lax.scan`.

    The state starts at zero. Gates are ``i, f, g, o`` in that order along the
    4h axis, as in torch, so torch weights map onto these one to one.

    Args:
        in_features: Input features per time step.
        hidden: Hidden (and cell) state size.
        reverse: Run from the last time step to the first (the backward direction of a
            bidirectional torch LSTM); outputs stay aligned with their input time steps.
        init: Initialiser of all four tensors; defaults to torch's
            U(-1/sqrt(hidden), 1/sqrt(hidden)).
        rngs: Parameter rngs.
    """

    def __init__(
        self,
        in_features: int,
        hidden: int,
        *,
        reverse: bool = False,
        init: Initializer | None = None,
        rngs: nnx.Rngs,
    ) -> None:
        if init is None:
            init = uniform_init(1.0 / math.sqrt(hidden))
        self.hidden = hidden
        self.reverse = reverse
        gates = 4 * hidden
        self.weight_ih = nnx.Param(init(rngs.params(), (gates, in_features), jnp.float32))
        self.weight_hh = nnx.Param(init(rngs.params(), (gates, hidden), jnp.float32))
        self.bias_ih = nnx.Param(init(rngs.params(), (gates,), jnp.float32))
        self.bias_hh = nnx.Param(init(rngs.params(), (gates,), jnp.float32))

    def __call__(self, x: jax.Array) -> jax.Array:
        """Hidden states (T, N, hidden) for time-major inputs ``x`` (T, N, in_features).

        Computed in ``x``'s dtype (parameters are cast to it).
        """
        dtype = x.dtype
        w_hh = self.weight_hh[...].astype(dtype)
        # The input projection has no time dependency: one large matmul over every step
        # (as cuDNN does) leaves only the h @ W_hh product inside the sequential loop.
        bias = self.bias_ih[...].astype(dtype) + self.bias_hh[...].astype(dtype)
        x_proj = x @ self.weight_ih[...].astype(dtype).T + bias

        def step(
            carry: tuple[jax.Array, jax.Array], x_t: jax.Array
        ) -> tuple[tuple[jax.Array, jax.Array], jax.Array]:
            h, c = carry
            i, f, g, o = jnp.split(x_t + h @ w_hh.T, 4, axis=-1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h

        zeros = jnp.zeros((x.shape[1], self.hidden), dtype)
        _, hs = jax.lax.scan(step, (zeros, zeros), x_proj, reverse=self.reverse)
        return hs


class LSTMLanguageModel(nnx.Module):
    """Embedding, dropout, stacked LSTM, dropout, linear decoder tied to the embedding.

    Args:
        cfg: Vocabulary, hidden (= embedding) size, sequence length and dropout rate.
        layers: Stacked LSTM layers.
        rngs: Parameter and dropout random streams.
    """

    def __init__(self, cfg: LSTMSize, layers: int, rngs: nnx.Rngs) -> None:
        # The PTB setup draws every weight, biases included, from U(-r, r).
        init = uniform_init(INIT_RANGE)
        self.embedding = nnx.Embed(cfg.vocab, cfg.hidden, embedding_init=init, rngs=rngs)
        self.rnn = nnx.List(
            [LSTMLayer(cfg.hidden, cfg.hidden, init=init, rngs=rngs) for _ in range(layers)]
        )
        # One module for every dropout site: each call draws a fresh mask from the stream.
        self.drop = nnx.Dropout(cfg.dropout, rngs=rngs)
        # The decoder's weight is the embedding (tied); only its bias is its own. Zero, as
        # in the torch model.
        self.decoder_bias = nnx.Param(jnp.zeros((cfg.vocab,), jnp.float32))

    def __call__(self, tokens: jax.Array) -> jax.Array:
        """Next-token logits (N, T, vocab) for tokens (N, T)."""
        # Time-major inside, so the scan runs over the leading axis.
        x = self.drop(self.embedding(tokens.T))
        for i, layer in enumerate(self.rnn):
            if i > 0:
                # torch.nn.LSTM's inter-layer dropout: on every layer's output but the last.
                x = self.drop(x)
            x = layer(x)
        x = self.drop(jnp.swapaxes(x, 0, 1))
        return self.embedding.attend(x) + self.decoder_bias[...].astype(x.dtype)


@implements("lstm", framework="jax")
class LSTMImpl(JaxModel):
    """The LSTM language model workload in JAX: next-token cross entropy on random tokens."""

    def build_model(self, size: SizeName, rngs: nnx.Rngs) -> nnx.Module:
        """The LSTM LM at ``size`` in training mode; the paper size has 51,034,000 parameters.

        Args:
            size: Workload size.
            rngs: Parameter and dropout random streams.

        Returns:
            The model, mapping tokens (N, T) to logits (N, T, vocab).
        """
        cfg: LSTMSize = self.workload.config(size)
        return LSTMLanguageModel(cfg, LSTM_LAYERS, rngs)

    def make_batch(self, size: SizeName, batch_size: int, key: jax.Array) -> JaxBatch:
        """Random token sequences (N, T+1), split into inputs (N, T) and next tokens (N, T).

        Args:
            size: Workload size.
            batch_size: Sequences per step.
            key: PRNG key.

        Returns:
            ``(tokens, targets)``, both int32.
        """
        self.workload.validate_batch_size(size, batch_size)
        cfg: LSTMSize = self.workload.config(size)
        seq = jax.random.randint(key, (batch_size, cfg.seq_len + 1), 0, cfg.vocab, jnp.int32)
        return seq[:, :-1], seq[:, 1:]

    def loss(self, model: nnx.Module, batch: JaxBatch) -> jax.Array:
        """Mean next-token cross entropy over every position.

        Args:
            model: The network built by :meth:`build_model`.
            batch: ``(tokens, targets)`` from :meth:`make_batch`.

        Returns:
            Scalar float32 loss.
        """
        tokens, targets = batch
        logits = model(tokens)
        # Under mixed precision the logits are low precision; the loss is reduced in fp32.
        losses = optax.softmax_cross_entropy_with_integer_labels(
            logits.astype(jnp.float32), targets
        )
        return jnp.mean(losses)
