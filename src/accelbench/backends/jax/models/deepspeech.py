"""Deep Speech 2 (Amodei et al. 2016) in Flax NNX, in the layout of deepspeech.pytorch.

A parameter-for-parameter twin of the torch model: two 2-D convolutions
(BatchNorm, Hardtanh(0, 20)) over the spectrogram, five bidirectional LSTM
layers whose two directions are summed, BatchNorm over every (time step,
utterance) sample before every LSTM layer but the first, then BatchNorm and a
bias-free linear layer to the 29 CTC symbols. Every utterance has the same
length, so nothing is padded or masked.

Spectrograms are (N, bins, frames, 1) in JAX, NHWC with frequency as height
and time as width; the torch twin takes (N, 1, bins, frames).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from accelbench.backends.jax.model import JaxBatch, JaxModel
from accelbench.backends.jax.models.lstm import LSTMLayer
from accelbench.backends.jax.models.resnet import batch_norm, torch_linear_init
from accelbench.workloads.deepspeech import (
    BLANK,
    DS2_LAYERS,
    NUM_SYMBOLS,
    DS2Size,
    conv_output_bins,
)
from accelbench.workloads.registry import implements
from accelbench.workloads.sizes import SizeName


def _conv(
    in_ch: int,
    out_ch: int,
    kernel: tuple[int, int],
    stride: tuple[int, int],
    padding: tuple[int, int],
    rngs: nnx.Rngs,
) -> nnx.Conv:
    """A biased conv with torch's explicit symmetric padding and default ``Conv2d`` init.

    Args:
        in_ch: Input channels.
        out_ch: Output channels.
        kernel: Kernel (frequency, time).
        stride: Stride (frequency, time).
        padding: Zero padding (frequency, time) on both sides, torch's ``padding=``.
        rngs: Parameter rngs.

    Returns:
        The conv layer.
    """
    # torch's Conv2d reset draws weight and bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    kernel_init, bias_init = torch_linear_init(in_ch * kernel[0] * kernel[1])
    return nnx.Conv(
        in_ch,
        out_ch,
        kernel,
        strides=stride,
        padding=((padding[0], padding[0]), (padding[1], padding[1])),
        kernel_init=kernel_init,
        bias_init=bias_init,
        rngs=rngs,
    )


def _hardtanh(x: jax.Array) -> jax.Array:
    """torch's ``Hardtanh(0, 20)``: a ReLU clipped at 20."""
    return jnp.clip(x, 0, 20)


class SequenceBatchNorm(nnx.Module):
    """BatchNorm1d over (T, N, H) sequences, treating every time step as a sample.

    Args:
        features: H.
        rngs: Parameter rngs.
    """

    def __init__(self, features: int, rngs: nnx.Rngs) -> None:
        self.bn = batch_norm(features, rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        """Normalise ``x`` (T, N, H) over its T * N samples."""
        t, n, h = x.shape
        return self.bn(x.reshape(t * n, h)).reshape(t, n, h)


class BatchRNN(nnx.Module):
    """Optional sequence BatchNorm, then a bidirectional LSTM whose directions are summed.

    Args:
        in_features: Input features per time step.
        hidden: LSTM hidden size of each direction, and the output size.
        batch_norm: Whether to normalise the input first.
        rngs: Parameter rngs.
    """

    def __init__(self, in_features: int, hidden: int, batch_norm: bool, rngs: nnx.Rngs) -> None:
        # Assigned once: NNX fixes an attribute as data (a module) or static (None) on
        # first assignment.
        self.batch_norm: SequenceBatchNorm | None = (
            SequenceBatchNorm(in_features, rngs) if batch_norm else None
        )
        self.forward_rnn = LSTMLayer(in_features, hidden, rngs=rngs)
        self.backward_rnn = LSTMLayer(in_features, hidden, reverse=True, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        """Summed forward and backward hidden states (T, N, hidden) for ``x`` (T, N, F)."""
        if self.batch_norm is not None:
            x = self.batch_norm(x)
        # Summing keeps the next layer's input at `hidden`, as deepspeech.pytorch does.
        return self.forward_rnn(x) + self.backward_rnn(x)


class DeepSpeech2Model(nnx.Module):
    """Deep Speech 2 acoustic model.

    Args:
        cfg: Spectrogram bins, LSTM hidden size and conv channels.
        layers: Bidirectional LSTM layers.
        num_classes: Output symbols including the CTC blank.
        rngs: Parameter rngs.
    """

    def __init__(self, cfg: DS2Size, layers: int, num_classes: int, rngs: nnx.Rngs) -> None:
        c = cfg.conv_channels
        self.conv1 = _conv(1, c, (41, 11), (2, 2), (20, 5), rngs)
        self.bn1 = batch_norm(c, rngs)
        self.conv2 = _conv(c, c, (21, 11), (2, 1), (10, 5), rngs)
        self.bn2 = batch_norm(c, rngs)
        rnn_input = c * conv_output_bins(cfg.bins)
        self.rnns = nnx.List(
            [
                BatchRNN(rnn_input if i == 0 else cfg.hidden, cfg.hidden, i > 0, rngs)
                for i in range(layers)
            ]
        )
        self.fc_bn = SequenceBatchNorm(cfg.hidden, rngs)
        kernel_init, _ = torch_linear_init(cfg.hidden)
        self.fc = nnx.Linear(
            cfg.hidden, num_classes, use_bias=False, kernel_init=kernel_init, rngs=rngs
        )

    def __call__(self, spectrogram: jax.Array) -> jax.Array:
        """Logits (T', N, classes) for spectrograms (N, bins, frames, 1)."""
        x = _hardtanh(self.bn1(self.conv1(spectrogram)))
        x = _hardtanh(self.bn2(self.conv2(x)))
        n, f, t, c = x.shape
        # torch flattens (N, C, F, T) to features c * F + f; the same order here.
        x = jnp.transpose(x, (2, 0, 3, 1)).reshape(t, n, c * f)  # (T', N, features)
        for rnn in self.rnns:
            x = rnn(x)
        return self.fc(self.fc_bn(x))


@implements("deepspeech2", framework="jax")
class DeepSpeech2Impl(JaxModel):
    """The Deep Speech 2 workload in JAX: CTC on random spectrograms and transcripts."""

    def build_model(self, size: SizeName, rngs: nnx.Rngs) -> nnx.Module:
        """Deep Speech 2 at ``size`` in training mode; the paper size has 86,618,400 parameters.

        Args:
            size: Workload size.
            rngs: Parameter random stream.

        Returns:
            The model, mapping spectrograms (N, bins, frames, 1) to logits (T', N, 29).
        """
        cfg: DS2Size = self.workload.config(size)
        return DeepSpeech2Model(cfg, DS2_LAYERS, NUM_SYMBOLS, rngs)

    def make_batch(self, size: SizeName, batch_size: int, key: jax.Array) -> JaxBatch:
        """Standard-normal spectrograms and transcripts of symbols 1..28 (never the blank).

        Args:
            size: Workload size.
            batch_size: Utterances per step.
            key: PRNG key; split between spectrograms and transcripts.

        Returns:
            ``(spectrograms, transcripts)``: float32 (N, bins, frames, 1) and
            int32 (N, target_len).
        """
        self.workload.validate_batch_size(size, batch_size)
        cfg: DS2Size = self.workload.config(size)
        spec_key, target_key = jax.random.split(key)
        spec = jax.random.normal(spec_key, (batch_size, cfg.bins, cfg.frames, 1), jnp.float32)
        targets = jax.random.randint(
            target_key, (batch_size, cfg.target_len), 1, NUM_SYMBOLS, jnp.int32
        )
        return spec, targets

    def loss(self, model: nnx.Module, batch: JaxBatch) -> jax.Array:
        """CTC loss summed over the batch and divided by its size (deepspeech.pytorch).

        Args:
            model: The network built by :meth:`build_model`.
            batch: ``(spectrograms, transcripts)`` from :meth:`make_batch`.

        Returns:
            Scalar float32 loss.
        """
        spec, targets = batch
        logits = model(spec)
        # optax wants batch-major logits; it applies the log-softmax itself, in fp32 here.
        logits = jnp.swapaxes(logits, 0, 1).astype(jnp.float32)
        n, steps, _ = logits.shape
        # Every utterance and transcript fills its whole array: no padding anywhere.
        losses = optax.ctc_loss(
            logits,
            jnp.zeros((n, steps), jnp.float32),
            targets,
            jnp.zeros(targets.shape, jnp.float32),
            blank_id=BLANK,
        )
        # torch's zero_infinity=True: an impossible alignment contributes 0, not inf.
        losses = jnp.where(jnp.isfinite(losses), losses, 0.0)
        return jnp.sum(losses) / n
