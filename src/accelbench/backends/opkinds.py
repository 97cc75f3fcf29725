"""The kinds of a framework's operators (conv, matmul, rnn, attention, norm, ...): what a
backend's per-operator counter (:mod:`accelbench.backends.torch.breakdown`) and the
roofline's breakdown (:mod:`accelbench.roofline.breakdown`) both name them by."""

from __future__ import annotations

import functools
import re

#: Operator kinds, first match wins (names are aten names without the namespace).
KIND_PATTERNS: tuple[tuple[str, str], ...] = (
    ("rnn", r"rnn|lstm|gru"),
    ("attention", r"scaled_dot_product|flash_attention|efficient_attention|cudnn_attention"),
    ("conv", r"conv"),
    ("matmul", r"^(mm|addmm|bmm|baddbmm|matmul|linear|addmv|mv|dot|_scaled_mm|addbmm)$"),
    ("norm", r"batch_norm|layer_norm|group_norm|instance_norm"),
    ("pool", r"pool"),
    ("embedding", r"embedding"),
    ("softmax/loss", r"softmax|nll_loss|ctc|cross_entropy|log_sigmoid|mse_loss"),
    ("activation", r"relu|gelu|sigmoid|tanh|hardtanh|threshold|silu|elu|clamp"),
    ("optimizer", r"^_foreach_|^_fused_(sgd|adam)"),
    ("dropout", r"dropout|bernoulli"),
    ("view", r"^(detach|t|transpose|view|_unsafe_view|unsqueeze|squeeze|select|slice|permute"
             r"|split|split_with_sizes|expand|as_strided|alias|unbind|chunk|narrow|reshape"
             r"|flatten|diagonal|_reshape_alias|unfold)$"),
    ("allocation", r"^(empty|empty_like|empty_strided|new_empty|new_empty_strided|scalar_tensor"
                   r"|lift_fresh)$"),
    ("data movement", r"^(copy_|clone|cat|stack|_to_copy|contiguous|index|index_select|gather"
                      r"|scatter|scatter_add|slice_backward|select_backward|constant_pad_nd"
                      r"|_unsafe_index|flip|roll|repeat|masked_fill_|masked_fill|tril|triu)"),
    ("elementwise", r"^(add|sub|rsub|mul|div|pow|sqrt|rsqrt|neg|exp|log|sum|mean|fill_|zero_"
                    r"|where|abs|sign|reciprocal|lerp|addcmul|addcdiv|maximum|minimum|ne|eq"
                    r"|lt|gt|le|ge|logical|bitwise|ones_like|zeros_like|zeros|ones|full|arange"
                    r"|_local_scalar_dense|amax|amin|max|min|norm|var|std|sort|topk|argmax)"),
)
_KIND_RE = tuple((kind, re.compile(pat)) for kind, pat in KIND_PATTERNS)

#: Kinds that move no data themselves (aliases, uninitialised allocations).
NO_TRAFFIC_KINDS = frozenset({"view", "allocation"})
#: Bookkeeping of the profiler, not work of the model.
IGNORED_OPS = frozenset({"_record_function_enter", "_record_function_enter_new",
                         "_record_function_exit"})


@functools.lru_cache(maxsize=1024)
def op_kind(name: str) -> str:
    """Kind of an aten operator name (``convolution_backward`` -> ``conv``), else ``other``."""
    for kind, rx in _KIND_RE:
        if rx.search(name):
            return kind
    return "other"
