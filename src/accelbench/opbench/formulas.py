"""FLOP and minimum-byte formulas of the benchmarked operators.

Conventions, used everywhere in accelbench:

* A multiply-add is 2 FLOPs. Only the matrix-multiply class of work is counted
  (GEMM, convolution, attention score and value products), the convention of
  :mod:`torch.utils.flop_counter` and of model FLOP utilisation (MFU). Bias
  adds, activations, normalisation and other elementwise work count 0.
* The backward pass of a GEMM-like operator costs twice its forward: one
  product for the gradient of the input and one for the gradient of the weight
  (or of each of the two operands), so forward+backward is 3x forward.
* Minimum bytes: each distinct input tensor read once and each output tensor
  written once, at the element size of the precision. For forward+backward the
  forward's inputs and the incoming output gradient are read once, and the
  forward output and every gradient are written once. Real kernels move at
  least this much; the ratio FLOPs / minimum bytes is the operator's
  arithmetic intensity on the roofline.
"""

from __future__ import annotations

from typing import Literal, get_args

OpPrecision = Literal["fp32", "tf32", "fp16", "bf16"]
"""Numeric format of an operator benchmark (tf32: fp32 tensors, TF32 tensor-core math)."""
Pass = Literal["forward", "forward_backward"]
RnnMode = Literal["LSTM", "GRU", "RNN_TANH", "RNN_RELU"]

OP_PRECISIONS: tuple[str, ...] = get_args(OpPrecision)
PASSES: tuple[str, ...] = get_args(Pass)

BYTES_PER_ELEMENT: dict[str, int] = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2}

#: Gate matrices per recurrent cell: LSTM has i, f, g, o; GRU r, z, n; a plain RNN one.
RNN_GATES: dict[str, int] = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}

#: Elementwise FLOPs per hidden unit per time step of an LSTM cell, when asked for:
#: 8 for adding the two bias vectors to the 4H pre-activations, 5 for the
#: activations (sigmoid on i, f, o, tanh on g and on c, one FLOP each by
#: convention), 3 for c' = f*c + i*g and 1 for h' = o*tanh(c').
LSTM_ELEMENTWISE_FLOP_PER_UNIT = 17


def _pass_factor(pass_: str) -> int:
    if pass_ == "forward":
        return 1
    if pass_ == "forward_backward":
        return 3
    raise ValueError(f"unknown pass {pass_!r}; choose one of {', '.join(PASSES)}")


# --------------------------------------------------------------------------- matmul


def matmul_flops(m: int, n: int, k: int) -> int:
    """FLOPs of C (m x n) = A (m x k) @ B (k x n): 2mnk."""
    return 2 * m * n * k


def matmul_min_bytes(m: int, n: int, k: int, bytes_per_element: int) -> int:
    """A and B read once, C written once."""
    return (m * k + k * n + m * n) * bytes_per_element


# --------------------------------------------------------------------------- conv2d


def conv2d_output_hw(h: int, w: int, kh: int, kw: int, stride: int) -> tuple[int, int]:
    """Output height and width of a VALID (unpadded) convolution.

    Raises:
        ValueError: the kernel is larger than the input.
    """
    if kh > h or kw > w:
        raise ValueError(f"kernel {kh}x{kw} larger than the input {h}x{w}")
    return (h - kh) // stride + 1, (w - kw) // stride + 1


def conv2d_flops(
    n: int, h: int, w: int, c_in: int, kh: int, kw: int, c_out: int, stride: int,
    pass_: str = "forward",
) -> int:
    """FLOPs of an NHWC convolution with VALID padding.

    Forward: ``2 * N * OH * OW * KH * KW * C_in * C_out``. Forward+backward adds
    the input gradient and the weight gradient, each as costly as the forward.
    """
    oh, ow = conv2d_output_hw(h, w, kh, kw, stride)
    return _pass_factor(pass_) * 2 * n * oh * ow * kh * kw * c_in * c_out


def conv2d_min_bytes(
    n: int, h: int, w: int, c_in: int, kh: int, kw: int, c_out: int, stride: int,
    bytes_per_element: int, pass_: str = "forward",
) -> int:
    """Forward: x and w read, y written. Forward+backward adds dy read, dx and dw written."""
    oh, ow = conv2d_output_hw(h, w, kh, kw, stride)
    x = n * h * w * c_in
    wt = kh * kw * c_in * c_out
    y = n * oh * ow * c_out
    elements = x + wt + y
    if _pass_factor(pass_) == 3:
        elements += y + x + wt  # dy read, dx and dw written
    return elements * bytes_per_element


# --------------------------------------------------------------------------- recurrent


def rnn_flops(
    *,
    mode: str,
    batch: int,
    seq_len: int,
    input_size: int,
    hidden_size: int,
    num_layers: int = 1,
    bidirectional: bool = False,
    proj_size: int = 0,
    pass_: str = "forward",
    elementwise: bool = False,
) -> int:
    """FLOPs of a (stacked, optionally bidirectional) ``nn.LSTM``/``nn.GRU``/``nn.RNN``.

    Per time step, per layer, per direction and per sample the input and
    recurrent products cost ``2 * G * H * (I_l + H_out)`` with G gate matrices
    (LSTM 4, GRU 3, RNN 1), ``I_l`` the layer's input width (``input_size`` for
    the first layer, ``D * H_out`` after) and ``H_out`` = ``proj_size or H``;
    an LSTM projection adds ``2 * H * proj_size``. With ``elementwise=True`` an
    LSTM also counts :data:`LSTM_ELEMENTWISE_FLOP_PER_UNIT` FLOPs per hidden
    unit (other cells have no elementwise term). Backward is twice the forward
    (gradients of the inputs/state and of the weights).

    Raises:
        ValueError: unknown ``mode`` or ``pass_``.
    """
    if mode not in RNN_GATES:
        raise ValueError(f"unknown RNN mode {mode!r}; choose one of {', '.join(RNN_GATES)}")
    gates = RNN_GATES[mode]
    directions = 2 if bidirectional else 1
    h_out = proj_size or hidden_size
    per_step = 0
    for layer in range(num_layers):
        width_in = input_size if layer == 0 else directions * h_out
        cell = 2 * gates * hidden_size * (width_in + h_out)
        if proj_size:
            cell += 2 * hidden_size * proj_size
        if elementwise and mode == "LSTM":
            cell += LSTM_ELEMENTWISE_FLOP_PER_UNIT * hidden_size
        per_step += directions * cell
    return _pass_factor(pass_) * per_step * seq_len * batch


def lstm_layer_flops(
    batch: int, seq_len: int, input_size: int, hidden_size: int, pass_: str = "forward",
    *, elementwise: bool = False,
) -> int:
    """One unidirectional LSTM layer: ``2 * 4H * (I + H)`` per step and sample.

    See :func:`rnn_flops` for the conventions.
    """
    return rnn_flops(
        mode="LSTM", batch=batch, seq_len=seq_len, input_size=input_size,
        hidden_size=hidden_size, pass_=pass_, elementwise=elementwise,
    )


def lstm_layer_min_bytes(
    batch: int, seq_len: int, input_size: int, hidden_size: int, bytes_per_element: int,
    pass_: str = "forward",
) -> int:
    """x, W_ih, W_hh and both biases read; the output sequence and (h_n, c_n) written.

    Forward+backward adds the output gradient read and the input and weight
    gradients written. The zero initial state is not read.
    """
    x = batch * seq_len * input_size
    weights = 4 * hidden_size * (input_size + hidden_size) + 2 * 4 * hidden_size
    out = batch * seq_len * hidden_size + 2 * batch * hidden_size
    elements = x + weights + out
    if _pass_factor(pass_) == 3:
        elements += batch * seq_len * hidden_size + x + weights
    return elements * bytes_per_element


# --------------------------------------------------------------------------- attention


def attention_flops(
    batch: int, heads: int, q_len: int, kv_len: int, head_dim: int, pass_: str = "forward"
) -> int:
    """Scaled dot-product attention: ``QK^T`` and ``PV``, each ``2 * B * h * L * S * d``.

    Softmax and scaling count 0; a causal mask is not discounted (the
    convention of :mod:`torch.utils.flop_counter`). Backward computes dV, dP,
    dQ and dK: twice the forward.
    """
    return _pass_factor(pass_) * 4 * batch * heads * q_len * kv_len * head_dim


def attention_min_bytes(
    batch: int, heads: int, q_len: int, kv_len: int, head_dim: int, bytes_per_element: int,
    pass_: str = "forward",
) -> int:
    """Q, K, V read and O written (the L x S score matrix need not reach memory).

    Forward+backward adds dO read and dQ, dK, dV written.
    """
    q = batch * heads * q_len * head_dim
    kv = batch * heads * kv_len * head_dim
    elements = q + 2 * kv + q
    if _pass_factor(pass_) == 3:
        elements += q + q + 2 * kv
    return elements * bytes_per_element
