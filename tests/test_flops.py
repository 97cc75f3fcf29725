"""FLOP formulas (exact) and model FLOP accounting (meta device, paper sizes)."""

from __future__ import annotations

import time

import pytest

from accelbench.backends import workload_flops
from accelbench.errors import ConfigError
from accelbench.opbench import formulas as fm
from accelbench.opbench.cases import PAPER_CONV_SHAPES, OpCase, conv_shape
from accelbench.workloads import get_workload, list_workloads
from accelbench.workloads.deepspeech import conv_output_bins, conv_output_frames

# --------------------------------------------------------------------------- formulas


@pytest.mark.parametrize("n", [2048, 4096, 8192])
def test_matmul_flops_exact(n: int) -> None:
    assert fm.matmul_flops(n, n, n) == 2 * n**3
    assert fm.matmul_min_bytes(n, n, n, 4) == 3 * n * n * 4
    case = OpCase(op="matmul", shape={"m": n, "n": n, "k": n}, precision="bf16")
    assert case.flops == 2 * n**3
    assert case.min_bytes == 3 * n * n * 2


def test_matmul_rectangular() -> None:
    assert fm.matmul_flops(3, 5, 7) == 2 * 3 * 5 * 7
    assert fm.matmul_min_bytes(3, 5, 7, 2) == (3 * 7 + 7 * 5 + 3 * 5) * 2


#: The paper's conv shapes: exact FLOPs and the figures the issue quotes.
PAPER_CONV_FLOPS = (
    (57_229_541_376, 5.72e10, (109, 109)),
    (228_379_852_800, 2.28e11, (110, 110)),
    (440_301_256_704, 4.40e11, (54, 54)),
)


@pytest.mark.parametrize("i", range(3))
def test_paper_conv_flops_exact(i: int) -> None:
    c = PAPER_CONV_SHAPES[i]
    exact, quoted, out_hw = PAPER_CONV_FLOPS[i]
    assert fm.conv2d_output_hw(c.h, c.w, c.kh, c.kw, c.stride) == out_hw
    flops = fm.conv2d_flops(c.n, c.h, c.w, c.c_in, c.kh, c.kw, c.c_out, c.stride)
    assert flops == exact
    assert float(f"{flops:.3g}") == quoted
    assert fm.conv2d_flops(
        c.n, c.h, c.w, c.c_in, c.kh, c.kw, c.c_out, c.stride, "forward_backward"
    ) == 3 * exact
    case = OpCase(op="conv2d", shape=conv_shape(c))
    assert case.flops == exact


def test_conv_batch_scaling_recomputes_flops() -> None:
    c = PAPER_CONV_SHAPES[0]
    one = OpCase(op="conv2d", shape=conv_shape(c, batch=1))
    assert one.flops * c.n == PAPER_CONV_FLOPS[0][0]


def test_conv_min_bytes() -> None:
    # (1, 4, 4, 2) * 3x3x2x5, stride 1 -> (1, 2, 2, 5)
    x, w, y = 1 * 4 * 4 * 2, 3 * 3 * 2 * 5, 1 * 2 * 2 * 5
    assert fm.conv2d_min_bytes(1, 4, 4, 2, 3, 3, 5, 1, 4) == (x + w + y) * 4
    assert fm.conv2d_min_bytes(1, 4, 4, 2, 3, 3, 5, 1, 4, "forward_backward") == (
        2 * (x + w + y) * 4
    )
    with pytest.raises(ValueError):
        fm.conv2d_output_hw(2, 2, 3, 3, 1)


def test_lstm_and_rnn_formulas() -> None:
    n, t, i, h = 64, 20, 1500, 1500
    assert fm.lstm_layer_flops(n, t, i, h) == 2 * 4 * h * (i + h) * t * n
    assert fm.lstm_layer_flops(n, t, i, h, "forward_backward") == 3 * 2 * 4 * h * (i + h) * t * n
    with_ew = fm.lstm_layer_flops(n, t, i, h, elementwise=True)
    assert with_ew - fm.lstm_layer_flops(n, t, i, h) == 17 * h * t * n
    # Two bidirectional layers: the second layer reads both directions.
    bi = fm.rnn_flops(mode="LSTM", batch=2, seq_len=3, input_size=10, hidden_size=4,
                      num_layers=2, bidirectional=True)
    assert bi == 2 * 3 * 2 * (2 * 4 * 4 * (10 + 4) + 2 * 4 * 4 * (8 + 4))
    gru = fm.rnn_flops(mode="GRU", batch=1, seq_len=1, input_size=3, hidden_size=2)
    assert gru == 2 * 3 * 2 * (3 + 2)
    with pytest.raises(ValueError):
        fm.rnn_flops(mode="nope", batch=1, seq_len=1, input_size=1, hidden_size=1)


def test_attention_formula() -> None:
    assert fm.attention_flops(32, 8, 32, 32, 64) == 4 * 32 * 8 * 32 * 32 * 64
    assert fm.attention_flops(1, 1, 2, 3, 4, "forward_backward") == 3 * 4 * 2 * 3 * 4
    q = 1 * 2 * 5 * 4
    assert fm.attention_min_bytes(1, 2, 5, 5, 4, 2) == 4 * q * 2


# --------------------------------------------------------------------------- models


def test_resnet50_paper_forward_is_8_2_gflop() -> None:
    f = workload_flops("resnet50", "paper", 128)
    assert f.forward_flop_per_sample == pytest.approx(8.2e9, rel=0.02)
    assert f.method == "flop_counter"
    # Backward ~2x forward, a little less: the first conv needs no input gradient.
    assert 2.9 * f.forward_flop_per_sample < f.train_flop_per_sample < 3 * f.forward_flop_per_sample


def test_vgg16_paper_forward_is_31_gflop_and_fast() -> None:
    t0 = time.perf_counter()
    f = workload_flops("vgg16", "paper", 64)
    # Meta device: nothing allocated or computed (checked below by the device). The time
    # is a figure (benchmarks/time_bounds.py); here only a guard against computing the
    # real model, which takes minutes.
    elapsed = time.perf_counter() - t0
    assert elapsed < 120, f"{elapsed:.0f} s: the count computed real tensors, not meta ones"
    assert f.forward_flop_per_sample == pytest.approx(31.0e9, rel=0.02)
    assert f.device == "meta"


def test_lstm_workload_count_equals_analytic() -> None:
    w = get_workload("lstm")
    h, v, t = 1500, 10_000, 20
    rnn = 2 * (2 * 4 * h * (h + h)) * t  # 2 layers, input = hidden
    decoder = 2 * h * v * t
    f = workload_flops("lstm", "paper", 64)
    assert f.method == "flop_counter+analytic"
    assert f.analytic_forward_flop_per_sample == rnn
    assert f.forward_flop_per_sample == rnn + decoder
    assert f.train_flop_per_sample == 3 * (rnn + decoder)
    assert w.sample_unit == "sentence"


def test_deepspeech2_lstms_counted_analytically() -> None:
    f = workload_flops("deepspeech2", "paper", 8)
    h, steps = 1024, conv_output_frames(300)
    first_in = 32 * conv_output_bins(161)
    per_dir_step = 2 * 4 * h * (first_in + h) + 4 * (2 * 4 * h * (h + h))
    assert f.analytic_forward_flop_per_sample == 2 * per_dir_step * steps
    assert f.forward_flop_per_sample > f.analytic_forward_flop_per_sample  # + convs, fc
    assert f.method == "flop_counter+analytic"


def test_per_sample_count_independent_of_batch() -> None:
    a = workload_flops("resnet50", "tiny", 2)
    b = workload_flops("resnet50", "tiny", 4)
    assert a.forward_flop_per_sample == pytest.approx(b.forward_flop_per_sample)
    assert a.train_flop_per_sample == pytest.approx(b.train_flop_per_sample)


@pytest.mark.parametrize("w", list_workloads(), ids=lambda w: w.name)
def test_every_workload_has_flops(w) -> None:  # type: ignore[no-untyped-def]
    f = workload_flops(w.name, "tiny", w.default_batch_sizes["tiny"][0])
    assert f.forward_flop_per_sample > 0
    assert f.forward_flop_per_sample < f.train_flop_per_sample <= 3 * f.forward_flop_per_sample
    # The transformers record the analytic (PaLM) count and name the counter after it.
    assert f.method.split(";")[0] in (
        "flop_counter", "analytic", "flop_counter+analytic", "analytic_palm")
    assert f.to_dict()["workload"] == w.name


def test_flops_bad_input() -> None:
    with pytest.raises(ConfigError):
        workload_flops("no_such_model", "tiny", 1)
    with pytest.raises(ConfigError):
        workload_flops("resnet50", "huge", 1)
    with pytest.raises(ConfigError):
        workload_flops("transformer", "tiny", 7)  # not a multiple of the sequence length
